/* Using an image: its directory held for the launch, its layers opened top first, and files
 * read through the layers the way the overlay will show them. */
#include "store.h"
#include "store-private.h"

#include "../../common/cleanup.h"
#include "../../common/error.h"
#include "../../common/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

void image_ref_free(struct image_ref *r)
{
        free(r->dir);
        r->dir = NULL;
        for (size_t i = 0; i < r->n_layers; i++) {
                if (r->layer_fds && r->layer_fds[i] >= 0)
                        close(r->layer_fds[i]);
                if (r->layer_paths)
                        free(r->layer_paths[i]);
        }
        free(r->layer_fds);
        free(r->layer_paths);
        r->layer_fds = NULL;
        r->layer_paths = NULL;
        r->n_layers = 0;
        if (r->lock_fd >= 0)
                close(r->lock_fd);
        r->lock_fd = -1;
        for (size_t i = 0; i < r->n_held; i++)
                close(r->held[i]);
        free(r->held);
        r->held = NULL;
        r->n_held = 0;
        oci_config_free(&r->config);
}

/* One more lower dir (rel under base_fd), named base/rel for the spec. */
static int ref_add_layer(struct image_ref *ref, int base_fd, const char *base, const char *rel,
                         const char *name, struct cs_error *err)
{
        int fd = openat(base_fd, rel, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        char *path = NULL;

        if (fd < 0)
                return cs_error_set(err, errno,
                                    "image `%s`: open `%s/%s` (a damaged store: remove the image "
                                    "and import it again)",
                                    name, base, rel);
        if (asprintf(&path, "%s/%s", base, rel) < 0) {
                close(fd);
                return cs_error_set(err, ENOMEM, "image `%s`", name);
        }
        ref->layer_fds[ref->n_layers] = fd;
        ref->layer_paths[ref->n_layers++] = path;
        return 0;
}

/* The stores a layer is looked for in: the image's own, then the writable one, then the
 * read-only ones. */
struct layer_stores {
        struct image_store *own, *w, *ro;
        size_t n_ro;
};

/* The store of the stores that has the layer rel (its own store first), or NULL. */
static struct image_store *layer_store(const struct layer_stores *ls, const char *rel)
{
        struct stat st;

        if (fstatat(ls->own->fd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
                return ls->own;
        if (ls->w != ls->own && fstatat(ls->w->fd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISDIR(st.st_mode))
                return ls->w;
        for (size_t i = 0; i < ls->n_ro; i++)
                if (&ls->ro[i] != ls->own &&
                    fstatat(ls->ro[i].fd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                    S_ISDIR(st.st_mode))
                        return &ls->ro[i];
        return ls->own; /* the open below reports it missing */
}

/* A layer of another store than the image's: held with a shared flock for the launch, so
 * that store's own rm or prune (which do not know this image) leave it. */
static int ref_hold_layer(struct image_ref *ref, struct image_store *s, const char *layer,
                          const char *name, struct cs_error *err)
{
        int fd = store_dir_hold(s, layer, err);

        if (fd < 0)
                return fd == -ENOENT ? cs_error_setx(err, ENOENT,
                                                     "image `%s`: its layer `%s/%s` was removed "
                                                     "just now",
                                                     name, s->root, layer)
                                     : fd;
        ref->held[ref->n_held++] = fd;
        return 0;
}

/* The layers top first. A layer listed twice is mounted once, at its topmost place: every
 * entry, whiteout and opaque dir of the lower copy is repeated by the upper one, so the
 * merged view is the same (and overlayfs refuses a lower dir given twice). */
static int ref_add_layers(struct image_ref *ref, const struct layer_stores *ls, const char *name,
                          struct cs_error *err)
{
        size_t n = ref->config.n_diff_ids;

        if (n == 0)
                return cs_error_setx(err, EINVAL, "image `%s` has no layers", name);
        if (n > STORE_MAX_LAYERS)
                return cs_error_setx(err, E2BIG,
                                     "image `%s` has %zu layers; an overlay mounts at most %u",
                                     name, n, STORE_MAX_LAYERS);
        ref->layer_fds = calloc(n, sizeof(int));
        ref->layer_paths = calloc(n, sizeof(char *));
        ref->held = calloc(n, sizeof(int));
        if (!ref->layer_fds || !ref->layer_paths || !ref->held)
                return cs_error_set(err, ENOMEM, "image `%s`", name);
        for (size_t i = n; i-- > 0;) {
                const char *id = ref->config.diff_ids[i];
                struct image_store *s;
                char rel[120];
                bool dup = false;
                int r;

                for (size_t j = i + 1; j < n && !dup; j++)
                        dup = strcmp(ref->config.diff_ids[j], id) == 0;
                if (dup)
                        continue;
                store_layer_path(id, rel);
                s = layer_store(ls, rel);
                if (s != ls->own && (r = ref_hold_layer(ref, s, rel, name, err)) < 0)
                        return r;
                strcat(rel, "/" LAYER_DIFF);
                r = ref_add_layer(ref, s->fd, s->root, rel, name, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

int store_open_image(const char *name, struct image_ref *ret, struct cs_error *err)
{
        struct image_store w = {.fd = -1}, *ro = NULL, *s = NULL;
        struct image_ref ref = {.lock_fd = -1};
        struct layer_stores ls;
        size_t n_ro = 0;
        char path[100];
        struct stat st;
        int r;

        r = store_open(NULL, &w, err);
        if (r < 0)
                return r;
        r = store_open_readonly(&w, &ro, &n_ro, err);
        if (r < 0)
                goto fail;
        r = store_find(&w, ro, n_ro, name, ref.digest, &s, err);
        if (r < 0)
                goto fail;
        snprintf(path, sizeof(path), "sha256/%.64s", store_digest_hex(ref.digest));
        /* the shared lock keeps rm and prune from removing it, and so its layers */
        ref.lock_fd = store_dir_hold(s, path, err);
        if (ref.lock_fd < 0) {
                r = ref.lock_fd == -ENOENT
                        ? cs_error_setx(err, ENOENT, "image `%s` was removed just now", name)
                        : ref.lock_fd;
                ref.lock_fd = -1;
                goto fail;
        }
        r = store_image_layers(s, ref.lock_fd, name, &ref.config, err);
        if (r < 0)
                goto fail;
        if (asprintf(&ref.dir, "%s/%s", s->root, path) < 0) {
                ref.dir = NULL;
                r = cs_error_set(err, ENOMEM, "image `%s`", name);
                goto fail;
        }
        if (fstatat(ref.lock_fd, "rootfs", &st, AT_SYMLINK_NOFOLLOW) == 0) {
                /* the old layout: one unpacked rootfs of its own */
                ref.layer_fds = calloc(1, sizeof(int));
                ref.layer_paths = calloc(1, sizeof(char *));
                r = ref.layer_fds && ref.layer_paths
                        ? ref_add_layer(&ref, ref.lock_fd, ref.dir, "rootfs", name, err)
                        : cs_error_set(err, ENOMEM, "image `%s`", name);
        } else {
                ls = (struct layer_stores){.own = s, .w = &w, .ro = ro, .n_ro = n_ro};
                r = ref_add_layers(&ref, &ls, name, err);
        }
        if (r < 0)
                goto fail;
        store_close_all(ro, n_ro);
        store_close(&w);
        *ret = ref;
        return 0;
fail:
        image_ref_free(&ref);
        store_close_all(ro, n_ro);
        store_close(&w);
        return r;
}

/* Whether layer hides path (absolute inside the image) from the layers beneath: a whiteout
 * or a file on the way, or path missing under an opaque directory of this layer. */
static bool layer_hides(int layer, const char *path)
{
        _cleanup_close_ int cur = openat(layer, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        char comps[PATH_MAX], *save = NULL;
        bool opaque = false;

        snprintf(comps, sizeof(comps), "%s", path);
        for (char *c = strtok_r(comps, "/", &save); c && cur >= 0; c = strtok_r(NULL, "/", &save)) {
                struct stat st;
                char v[2];
                int next;

                if (fstatat(cur, c, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        return opaque; /* missing here: an opaque dir above hides the rest */
                if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0))
                        return true;
                if (S_ISLNK(st.st_mode) || !S_ISDIR(st.st_mode))
                        /* a file here hides a lower directory of that name; a symlink is
                         * followed (within this layer) by the open */
                        return !S_ISLNK(st.st_mode) && save && *save;
                next = openat(cur, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (next < 0)
                        return false;
                close(cur);
                cur = next;
                opaque = fgetxattr(cur, "user.overlay.opaque", v, sizeof(v)) == 1 && v[0] == 'y';
        }
        return false;
}

int image_open_file(const struct image_ref *img, const char *path, struct cs_error *err)
{
        for (size_t i = 0; i < img->n_layers; i++) {
                int fd;

                if (layer_hides(img->layer_fds[i], path))
                        break;
                /* symlinks resolve within the layer that holds them */
                fd = source_open_in_root(img->layer_fds[i], path, O_RDONLY, err);
                if (fd != -ENOENT)
                        return fd;
        }
        return -ENOENT;
}
