/* What image/registry.c takes from image/registry-access.c. Not for use outside image/. */
#pragma once
#include <stddef.h>

struct cs_error;

struct registry_creds {
        char *user, *pass;
        char *file; /* where they came from, for messages */
};

/* The credentials for host/repo from the first of $REGISTRY_AUTH_FILE,
 * $XDG_RUNTIME_DIR/containers/auth.json, ~/.config/containers/auth.json and
 * ~/.docker/config.json that has any (the longest matching key: podman allows keys per
 * namespace); ret stays empty when none has. */
int registry_creds_find(const char *host, const char *repo, struct registry_creds *ret,
                        struct cs_error *err);
void registry_creds_free(struct registry_creds *c);
/* From an auth file's len bytes (file names it in messages): 1 and ret filled when it has
 * credentials for host/repo (the longest matching key: podman allows keys per namespace),
 * 0 when it has none, < 0 when it is not a JSON object or the entry is not base64 of
 * USER:PASSWORD. */
int registry_creds_parse(const char *buf, size_t len, const char *file, const char *host,
                         const char *repo, struct registry_creds *ret, struct cs_error *err);

/* The default CA bundle plus every certs.d/HOST[:PORT]/ *.crt of the first of the user's
 * containers dir, the system's and docker's that exists; *ret_ca stays NULL when there is no
 * such directory. ret_dir gets the directory, for messages. */
int registry_ca_load(const char *host, char **ret_ca, size_t *ret_len, char *ret_dir,
                     size_t dir_max, struct cs_error *err);
