/* The image store: ${XDG_DATA_HOME:-~/.local/share}/csandbox/images/
 *
 *   names.json          {"NAME:TAG": "sha256:..."}, replaced atomically under the store lock
 *   sha256/HEX/         one image per manifest digest (docker-archive: config digest; rootfs
 *                       tar: digest of the tar): config.json (as the image shipped it; its
 *                       rootfs.diff_ids are the image's layers, bottom first) and info.json.
 *                       No tree of its own.
 *   layers/sha256/HEX/  one layer per diff_id, unpacked once and shared by every image that
 *                       lists it: diff/ (the layer's own changes in overlayfs form: whiteouts
 *                       as 0/0 character devices, opaque dirs by user.overlay.opaque, see
 *                       layer.h), metadata (its ownership record, see layer_tree_finish),
 *                       info.json (size, files)
 *   layers/blobs/HEX    "sha256:DIFFID": a compressed blob an import verified to unpack to
 *                       that diff_id, so a later import or pull of it costs no read
 *   tmp/                imports in progress (import-*, layer-*, pull-*, flocked by their
 *                       owner) and removals (rm-*); whatever is here is invisible and prunable
 *   build-cache/KEY     `image build`'s cache: "sha256:DIFFID" (or "empty") for the chain key
 *                       of a step; an entry whose layer is gone is a miss, and prune drops it
 *
 * A layer appears only by rename(tmp/layer-* -> layers/sha256/HEX) after its blob digest,
 * size and diff_id have been verified, and an image only by rename(tmp/import-* ->
 * sha256/HEX) once all its layers are in place, so a killed or failed import leaves nothing
 * usable behind (only tmp/ entries the next import or prune sweeps).
 *
 * Who keeps what: a launch holds a shared flock on sha256/HEX, so rm and prune (which take
 * it exclusively without waiting) refuse an image in use, and the image keeps listing its
 * layers. An import holds a shared flock on each layer it stored or reuses until its image
 * is committed; a stored layer is moved into place and held under the store lock. A sweep
 * (rm of an image's last name, prune) runs under the store lock: it reads every image's
 * layer list and removes each layer none lists whose exclusive flock it gets without
 * waiting. A shared hold never waits long: a directory locked exclusively for longer than
 * an instant is someone else's (store_dir_hold).
 *
 * The lock files are beside the store, in images.locks/ (STORE_LOCKS_SUFFIX), where no
 * session sees them: sessions get the store bound read-only, and flock works on a read-only
 * file, so a lock file inside it would let a session stall every host command waiting on it.
 *   store               flock: held exclusively while names change, images appear or go,
 *                       and while a sweep decides which layers no image lists
 *   image-HEX           per-image flock: one import does the work, the others wait
 *   layer-HEX           per-layer flock: one import unpacks a layer, the others wait and
 *                       reuse it
 * (Stores of an earlier version kept them inside, as .lock and locks/.)
 *
 * Images of the earlier layout (sha256/HEX/rootfs/, a whole unpacked tree) still launch, as
 * the overlay's one lower dir, and are listed and removed as before. */
#pragma once
#include "../layer/layer.h"
#include "../oci/oci.h"
#include "source.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct cs_error;

/* image build's cache, in the store (see the layout above). */
#define STORE_BUILD_CACHE "build-cache"

/* The most lower dirs an overlay mounts (the kernel's limit). */
#define STORE_MAX_LAYERS 500u

#define STORE_LOCKS_SUFFIX ".locks"

struct image_store {
        char *root; /* .../csandbox/images */
        int fd;
        bool read_only; /* one of CSANDBOX_READONLY_STORE's: never written, locked or pruned */
};

/* Read-only stores beside the writable one: a colon-separated list of store directories,
 * each shaped like the default store itself (${XDG_DATA_HOME}/csandbox/images: names.json,
 * sha256/, layers/). A session gets the host user's store this way, bound read-only.
 * Lookups by name or digest look in the writable store first, then in these in order. */
#define STORE_READONLY_ENV "CSANDBOX_READONLY_STORE"
#define STORE_READONLY_MAX 16u

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
        bool reused;                  /* finished: the layer was stored already, its blob unread */
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
        size_t layers_reused; /* layers stored already (by another image), not unpacked */
        bool existed;         /* another import had already stored it */
};

void import_options_init(struct import_options *o);
int store_import(struct image_store *s, const struct import_options *o, struct import_result *ret,
                 struct cs_error *err);

struct image_info {
        char *name; /* NAME:TAG, or NULL for an unnamed image */
        char digest[OCI_DIGEST_LEN + 1];
        uint64_t size, files;
        int64_t created;
        const char *store; /* store_list_all: a read-only store's root, NULL for the writable */
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
/* Remove images no name points at (unless in use), layers no image lists, and stale
 * temporary directories. */
int store_prune(struct image_store *s, size_t *ret_images, size_t *ret_layers, size_t *ret_tmp,
                struct cs_error *err);

/* NAME[:TAG] in canonical form: a tag added when absent; refuses odd characters. */
int store_name_canonical(const char *name, char ret[256], struct cs_error *err);

/* ---- the writable store and the read-only ones (store-stores.c) ---- */

/* The stores of CSANDBOX_READONLY_STORE that are csandbox stores owned by the caller and no
 * symlink, opened read-only (nothing is created in them); each other entry is skipped with
 * one warning line on stderr naming it (once a process). w (may be NULL) is the writable
 * store: an entry that is that directory is skipped. *ret NULL when there is none. */
int store_open_readonly(const struct image_store *w, struct image_store **ret, size_t *ret_n,
                        struct cs_error *err);
void store_close_all(struct image_store *v, size_t n);
/* name (as store_resolve) in w, then in each of ro: the digest and the store holding it;
 * -ENOENT with w's message when none has it. */
int store_find(struct image_store *w, struct image_store *ro, size_t n_ro, const char *name,
               char ret[OCI_DIGEST_LEN + 1], struct image_store **ret_store, struct cs_error *err);
/* store_list of w, then the names of each of ro that no store before it has (their store
 * set to its root). */
int store_list_all(struct image_store *w, struct image_store *ro, size_t n_ro,
                   struct image_info **ret, size_t *ret_n, struct cs_error *err);
/* store_remove in w; a name only a read-only store has is refused (EROFS, nothing changes). */
int store_remove_any(struct image_store *w, struct image_store *ro, size_t n_ro, const char *name,
                     struct cs_error *err);
/* Name the image src (a name or digest of w) new_name too, in w. An image only a read-only
 * store has is refused (EROFS). */
int store_tag(struct image_store *w, struct image_store *ro, size_t n_ro, const char *src,
              const char *new_name, struct cs_error *err);
/* A layer held (store_dir_hold) from the first of w, ro... that has it; -ENOENT when none. */
int store_layer_hold_any(struct image_store *w, struct image_store *ro, size_t n_ro,
                         const char *diff_id, struct cs_error *err);

/* What a launch needs. Holding lock_fd (a shared flock on the image directory) keeps rm and
 * prune from removing the image and so its layers; close it after the sandbox ends. */
struct image_ref {
        char digest[OCI_DIGEST_LEN + 1];
        char *dir;          /* the image's directory in the store */
        int *layer_fds;     /* O_PATH|O_DIRECTORY of each overlay lower dir, top first: the
                             * layers' diff/ trees (each once), or an old image's rootfs */
        char **layer_paths; /* their absolute paths */
        size_t n_layers;
        int lock_fd;
        int *held; /* shared flocks on layers of other stores than the image's */
        size_t n_held;
        struct oci_config config; /* Env, WorkingDir, User, Entrypoint, Cmd, diff_ids */
};
/* From the default store, else the first read-only store (CSANDBOX_READONLY_STORE) that
 * has it; each layer from the image's store, else the writable one, else a read-only one
 * (an image built in the writable store on a read-only store's base). */
int store_open_image(const char *name, struct image_ref *ret, struct cs_error *err);
void image_ref_free(struct image_ref *r);
/* path (absolute inside the image) opened O_RDONLY as the overlay will show it: from the
 * topmost layer holding it, -ENOENT when absent or hidden by a whiteout or an opaque dir.
 * Symlinks are followed inside the layer that holds them, never out of it. */
int image_open_file(const struct image_ref *img, const char *path, struct cs_error *err);
/* A regular file of the image read whole (bounded); *ret NULL when it is absent. */
int image_read_file(const struct image_ref *img, const char *path, char **ret,
                    struct cs_error *err);

/* Docker/OCI User ("", "user", "uid", "user:group", "uid:gid", ...) resolved through the
 * image's own /etc/passwd and /etc/group (image_read_file). "" is 0:0; a numeric uid absent
 * from passwd gets gid 0. */
int image_resolve_user(const struct image_ref *img, const char *user, uid_t *ret_uid,
                       gid_t *ret_gid, struct cs_error *err);
/* The same on file contents already read (NULL = the file is absent); for tests. */
int image_lookup_user(const char *passwd, const char *group, const char *user, uid_t *ret_uid,
                      gid_t *ret_gid, struct cs_error *err);
