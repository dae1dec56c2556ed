/* What image/registry.c takes from image/registry-access.c. Not for use outside image/. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>

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

/* ---- internal to registry.c and registry-blobs.c ---- */

struct registry_ref;
struct pull_options;
struct pull_blob;

#define PARALLEL   3          /* layer transfers at a time */
#define ATTEMPTS   5          /* per request, transient failures included */
#define TOKEN_MAX  (1u << 20) /* a token endpoint's answer */
#define USER_AGENT "csandbox/" CSANDBOX_VERSION
#define ACCEPT_MANIFESTS                                                                           \
        "Accept: application/vnd.oci.image.index.v1+json, "                                        \
        "application/vnd.oci.image.manifest.v1+json, "                                             \
        "application/vnd.docker.distribution.manifest.list.v2+json, "                              \
        "application/vnd.docker.distribution.manifest.v2+json"

/* One pull's connection to its registry. */
struct reg {
        const struct registry_ref *ref;
        const struct pull_options *o;
        const struct registry_endpoint *ep; /* where this connection asks */
        bool tls_verify;                    /* o->tls_verify unless ep is insecure */
        char base[300];                     /* scheme://host, the API host for docker.io */
        struct registry_creds creds;
        char *token;
        long auth; /* CURLAUTH_* in use, 0 for none */
        char *ca;  /* the default CA bundle plus the registry's certs.d CAs, or NULL */
        size_t ca_len;
        char ca_dir[4200]; /* where those came from, for messages */
};

/* What the header callback keeps of the last response (redirects reset it). */
struct resp {
        char challenge[2048];
        char content_type[128];
        char content_range[128];
        char retry_after[32]; /* as sent: delta-seconds, or an HTTP date */
};

/* The longest a Retry-After is waited for; a longer one ends the pull saying so. */
#define RETRY_AFTER_MAX 60

CURL *reg_easy(struct reg *g, const char *url, struct resp *h, char errbuf[CURL_ERROR_SIZE]);
bool curl_transient(CURLcode rc);
bool http_transient(long code);
/* How long to wait before retrying after a transient answer code: the Retry-After the
 * registry sent (seconds), else a backoff growing with attempt. < 0 with err set when the
 * registry asks for more than RETRY_AFTER_MAX seconds (a rate limit): the message names
 * the wait and what helps. */
double reg_retry_delay(const struct reg *g, long code, const struct resp *h, int attempt,
                       struct cs_error *err);
int reg_authenticate(struct reg *g, const char *challenge, struct cs_error *err);
/* GET a manifest into memory, bounded by OCI_MANIFEST_MAX, authenticating and retrying as
 * needed (registry.c). */
int reg_get_manifest(struct reg *g, const char *reference, char **ret, size_t *ret_len,
                     struct cs_error *err);
/* Every blob into dirfd's blobs/sha256/, verified by digest and size while it streams,
 * PARALLEL at a time, retried and resumed (registry-blobs.c). */
int reg_get_blobs(struct reg *g, int dirfd, struct pull_blob *blobs, const int64_t *sizes, size_t n,
                  struct cs_error *err);
