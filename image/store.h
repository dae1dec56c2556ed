/* The image store: ${XDG_DATA_HOME:-~/.local/share}/csandbox/images/
 *
 *   names.json          {"NAME:TAG": "sha256:..."}, replaced atomically under .lock
 *   .lock               flock: held exclusively while names change or images move
 *   sha256/HEX/         one complete image per manifest digest (docker-archive: config
 *                       digest; rootfs tar: digest of the tar): rootfs/, config.json,
 *                       metadata (see layer_tree_finish), info.json
 *   tmp/                imports in progress (import-*, flocked by their importer) and
 *                       removals (rm-*); whatever is here is invisible and prunable
 *   locks/HEX           per-image flock: one import does the work, the others wait
 *
 * An image appears only by rename(tmp/import-* -> sha256/HEX) after every blob, size and
 * diff_id has been verified, so a killed or failed import leaves nothing usable behind.
 * A launch holds a shared flock on sha256/HEX; rm and prune take it exclusively without
 * waiting and refuse an image in use. */
#pragma once
#include "layer.h"
#include "oci.h"
#include "source.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct cs_error;

struct image_store {
        char *root; /* .../csandbox/images */
        int fd;
};

/* root NULL: the default location. Creates the directories (0700) as needed. */
int store_open(const char *root, struct image_store *ret, struct cs_error *err);
void store_close(struct image_store *s);
/* ${XDG_DATA_HOME:-$HOME/.local/share}/csandbox/images */
int store_default_root(char **ret, struct cs_error *err);

struct import_progress {
        size_t layer, n_layers;       /* 1-based */
        uint64_t done, total;         /* blob bytes of this layer (total 0: unknown) */
        uint64_t all_done, all_total; /* blob bytes of all layers (all_total 0: unknown) */
        const char *what;             /* the layer's blob digest, or its member name */
        double seconds;               /* since this layer's import started */
        bool finished;                /* the layer is verified and unpacked (reported once) */
};

struct import_options {
        const char *source;
        const char *name; /* NULL: from the image (ref name, RepoTags) or the source's name */
        enum image_format format;
        struct oci_platform platform;
        struct layer_limits limits;
        void (*progress)(void *opaque, const struct import_progress *p);
        void *progress_opaque;
};

struct import_result {
        char name[256];
        char digest[OCI_DIGEST_LEN + 1];
        uint64_t size, files, skipped_devices, skipped_xattrs;
        size_t layers;
        bool existed; /* another import had already stored it */
};

void import_options_init(struct import_options *o);
int store_import(struct image_store *s, const struct import_options *o, struct import_result *ret,
                 struct cs_error *err);

struct image_info {
        char *name; /* NAME:TAG, or NULL for an unnamed image */
        char digest[OCI_DIGEST_LEN + 1];
        uint64_t size, files;
        int64_t created;
};
/* Every name whose image is complete, sorted by name. */
int store_list(struct image_store *s, struct image_info **ret, size_t *ret_n, struct cs_error *err);
void image_info_free(struct image_info *v, size_t n);

/* NAME[:TAG] (":latest" when absent) or a full "sha256:..." digest -> the digest. */
int store_resolve(struct image_store *s, const char *name, char ret[OCI_DIGEST_LEN + 1],
                  struct cs_error *err);
/* The stored image config, as the image shipped it. */
int store_inspect(struct image_store *s, const char *name, char **ret_json, struct cs_error *err);
/* Remove the name; the image goes with its last name unless a sandbox uses it (then
 * nothing changes and the error says so). */
int store_remove(struct image_store *s, const char *name, struct cs_error *err);
/* Remove images no name points at (unless in use) and stale temporary directories. */
int store_prune(struct image_store *s, size_t *ret_images, size_t *ret_tmp, struct cs_error *err);

/* NAME[:TAG] in canonical form: a tag added when absent; refuses odd characters. */
int store_name_canonical(const char *name, char ret[256], struct cs_error *err);

/* What a launch needs. Holding lock_fd (a shared flock on the image directory) keeps rm and
 * prune from removing the rootfs; close it after the sandbox ends. */
struct image_ref {
        char digest[OCI_DIGEST_LEN + 1];
        char *rootfs;  /* absolute path of the unpacked rootfs */
        int rootfs_fd; /* O_PATH|O_DIRECTORY of the same */
        int lock_fd;
        struct oci_config config; /* Env, WorkingDir, User, Entrypoint, Cmd */
};
/* From the default store. */
int store_open_image(const char *name, struct image_ref *ret, struct cs_error *err);
void image_ref_free(struct image_ref *r);

/* Docker/OCI User ("", "user", "uid", "user:group", "uid:gid", ...) resolved through the
 * image's own /etc/passwd and /etc/group, read through rootfs_fd (symlinks stay inside,
 * sizes bounded). "" is 0:0; a numeric uid absent from passwd gets gid 0. */
int image_resolve_user(int rootfs_fd, const char *user, uid_t *ret_uid, gid_t *ret_gid,
                       struct cs_error *err);
/* The same on file contents already read (NULL = the file is absent); for tests. */
int image_lookup_user(const char *passwd, const char *group, const char *user, uid_t *ret_uid,
                      gid_t *ret_gid, struct cs_error *err);
