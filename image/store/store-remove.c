/* Removing images from the store: `image rm` (an image's names, then the image once no
 * name points at it) and `image prune` (every unnamed image, the layers no image lists, the
 * build cache's stale entries, what killed imports left in tmp/). */
#include "store.h"
#include "store-private.h"

#include "../../common/cleanup.h"
#include "../../common/error.h"
#include "../../common/fileio.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool digest_named(const cJSON *names, const char *digest)
{
        const cJSON *e;

        cJSON_ArrayForEach(e, names) if (cJSON_IsString(e) &&
                                         strcmp(e->valuestring, digest) == 0) return true;
        return false;
}

int store_remove(struct image_store *s, const char *name, struct cs_error *err)
{
        _cleanup_close_ int lock = -1;
        _cleanup_json_ cJSON *names = NULL;
        char digest[OCI_DIGEST_LEN + 1], canon[256];
        bool busy, gone;
        int r;

        lock = store_lock(s, err);
        if (lock < 0)
                return lock;
        r = store_resolve(s, name, digest, err);
        if (r < 0)
                return r;
        r = store_names_read(s, &names, err);
        if (r < 0)
                return r;
        if (strncmp(name, "sha256:", 7) == 0) {
                const cJSON *e = names ? names->child : NULL;
                while (e) {
                        const cJSON *next = e->next;
                        if (cJSON_IsString(e) && strcmp(e->valuestring, digest) == 0)
                                cJSON_DeleteItemFromObjectCaseSensitive(names, e->string);
                        e = next;
                }
        } else {
                r = store_name_canonical(name, canon, err);
                if (r < 0)
                        return r;
                cJSON_DeleteItemFromObjectCaseSensitive(names, canon);
        }
        gone = !digest_named(names, digest);
        if (gone) {
                r = store_image_delete(s, digest, &busy, err);
                if (r < 0)
                        return r;
                if (busy)
                        return cs_error_setx(err, EBUSY,
                                             "image `%s` is in use by a running sandbox; stop it "
                                             "first (nothing was removed)",
                                             name);
        }
        r = store_names_write(s, names, err);
        /* its layers go with it, unless another image lists them */
        if (r == 0 && gone && store_layers_sweep(s, NULL, err) < 0)
                return cs_error_wrap(err,
                                     "image `%s` is removed, but not its layers; `csandbox image "
                                     "prune` tries again",
                                     name);
        return r;
}

/* build-cache/KEY entries (image build's) whose layer is no longer stored: a build would
 * miss them anyway. Best effort; called under the store lock, after the layers' sweep. */
static void build_cache_sweep(struct image_store *s)
{
        int fd = openat(s->fd, STORE_BUILD_CACHE, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_closedir_ DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        struct dirent *de;

        if (!d) {
                if (fd >= 0)
                        close(fd);
                return;
        }
        while ((de = readdir(d))) {
                char text[OCI_DIGEST_LEN + 2] = "", layer[100];
                _cleanup_close_ int e = -1;
                struct stat st;
                ssize_t len;

                if (de->d_name[0] == '.')
                        continue;
                e = openat(dirfd(d), de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
                len = e >= 0 ? read(e, text, sizeof(text) - 1) : -1;
                if (len <= 0)
                        continue;
                text[len] = '\0';
                text[strcspn(text, "\n")] = '\0';
                if (strncmp(text, "sha256:", 7) != 0)
                        continue; /* "empty": a step that changed nothing */
                store_layer_path(text, layer);
                if (fstatat(s->fd, layer, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT)
                        unlinkat(dirfd(d), de->d_name, 0);
        }
}

int store_prune(struct image_store *s, size_t *ret_images, size_t *ret_layers, size_t *ret_tmp,
                struct cs_error *err)
{
        _cleanup_close_ int lock = -1, hfd = -1;
        _cleanup_json_ cJSON *names = NULL;
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        size_t n = 0;
        int r;

        lock = store_lock(s, err);
        if (lock < 0)
                return lock;
        r = store_names_read(s, &names, err);
        if (r < 0)
                return r;
        hfd = openat(s->fd, "sha256", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (hfd < 0 || !(d = fdopendir(hfd)))
                return cs_error_set(err, errno, "open `%s/sha256`", s->root);
        hfd = -1;
        while ((de = readdir(d))) {
                char digest[OCI_DIGEST_LEN + 1];
                /* Dropped: a name that is no digest is not an image of the store. */
                struct cs_error ignored;
                bool busy;

                if (de->d_name[0] == '.')
                        continue;
                snprintf(digest, sizeof(digest), "sha256:%.64s", de->d_name);
                if (strlen(de->d_name) != 64 || oci_digest_check(digest, "", &ignored) < 0 ||
                    digest_named(names, digest))
                        continue;
                r = store_image_delete(s, digest, &busy, err);
                if (r < 0)
                        return r;
                if (!busy)
                        n++;
        }
        r = store_layers_sweep(s, ret_layers, err);
        if (r == 0)
                build_cache_sweep(s);
        if (r == 0)
                r = store_tmp_sweep(s, ret_tmp, err);
        if (r < 0)
                return r;
        *ret_images = n;
        return 0;
}
