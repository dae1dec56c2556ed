/* One layer of an import into the layer store: reused when stored and its blob known,
 * otherwise unpacked into tmp/layer-*, verified, and moved to layers/sha256/HEX. */
#include "import-private.h"
#include "store-private.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

static void tree_freep(struct layer_tree **t)
{
        layer_tree_free(*t);
}

/* locks/layer-HEX, flocked exclusively: one import unpacks a layer, the others wait. */
static int layer_lock(struct image_store *s, const char *diff_id, struct cs_error *err)
{
        char name[100];
        int fd, r;

        snprintf(name, sizeof(name), "locks/layer-%.64s", store_digest_hex(diff_id));
        fd = openat(s->fd, name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return cs_error_set(err, errno, "open `%s/%s`", s->root, name);
        while ((r = flock(fd, LOCK_EX)) < 0 && errno == EINTR)
                ;
        if (r < 0) {
                r = cs_error_set(err, errno, "lock `%s/%s`", s->root, name);
                close(fd);
                return r;
        }
        return fd;
}

static uint64_t info_number(const cJSON *j, const char *key)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);

        return cJSON_IsNumber(v) && v->valuedouble >= 0 ? (uint64_t)v->valuedouble : 0;
}

/* A stored layer's numbers into the image's. */
static void add_stored_stats(int layer_fd, struct layer_stats *sum)
{
        _cleanup_free_ char *text = NULL;
        _cleanup_json_ cJSON *j = NULL;
        /* Dropped: a layer without readable numbers counts as empty in the image's. */
        struct cs_error ignored;
        size_t len;

        if (cs_read_file_at(layer_fd, "info.json", INFO_MAX, true, &text, &len, &ignored) < 0 ||
            !(j = cJSON_ParseWithLength(text, len)))
                return;
        sum->size += info_number(j, "size");
        sum->files += info_number(j, "files");
        sum->skipped_devices += info_number(j, "skipped_devices");
}

static int write_info(int dirfd, const struct layer_stats *st, struct cs_error *err)
{
        char text[256];
        _cleanup_close_ int fd =
            openat(dirfd, "info.json", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);

        snprintf(
            text, sizeof(text),
            "{\"size\": %llu, \"files\": %llu, \"entries\": %llu, \"skipped_devices\": %llu}\n",
            (unsigned long long)st->size, (unsigned long long)st->files,
            (unsigned long long)st->entries, (unsigned long long)st->skipped_devices);
        if (fd < 0 || cs_write_all(fd, text, strlen(text)) < 0)
                return cs_error_set(err, errno, "write the layer's info.json");
        return 0;
}

/* Unpack layer i into tmp/tname/diff on top of the layers held below it, verified. */
static int layer_unpack(struct image_store *s, struct import_job *job, size_t i, int tfd,
                        char ret_diff_id[OCI_DIGEST_LEN + 1], struct cs_error *err)
{
        __attribute__((cleanup(tree_freep))) struct layer_tree *tree = NULL;
        _cleanup_close_ int diff = -1, meta = -1;
        _cleanup_free_ int *lowers = calloc(i + 1, sizeof(int));
        struct layer_limits lim = job->o->limits;
        const struct layer_stats *st;
        int r;

        (void)s;
        if (!lowers)
                return cs_error_set(err, ENOMEM, "import");
        if (mkdirat(tfd, LAYER_DIFF, 0755) < 0 ||
            (diff = openat(tfd, LAYER_DIFF, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
                return cs_error_set(err, errno, "create a layer directory in `%s/tmp`", s->root);
        lim.shared = &job->budget;
        r = layer_tree_new(diff, &lim, &tree, err);
        for (size_t k = 0; k < i; k++)
                lowers[k] = job->held[i - 1 - k];
        if (r == 0)
                r = layer_stream(job->src, job->o, job->p, i, tree, ret_diff_id, err);
        if (r == 0)
                r = layer_tree_set_lowers(tree, lowers, i, err);
        if (r < 0)
                return r;
        meta = openat(tfd, LAYER_META, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (meta < 0)
                return cs_error_set(err, errno, "create the layer's metadata");
        r = layer_tree_finish(tree, meta, err);
        if (r < 0)
                return r;
        st = layer_tree_stats(tree);
        job->sum.size += st->size;
        job->sum.files += st->files;
        job->sum.skipped_devices += st->skipped_devices;
        job->sum.skipped_xattrs += st->skipped_xattrs;
        return write_info(tfd, st, err);
}

/* Move tmp/tname into layers/sha256/HEX (unless another import stored it first) and hold
 * it, under the store lock so that no sweep sees it unheld in between. */
static int layer_commit(struct image_store *s, int *tfd, const char *tname, const char *diff_id,
                        int *ret_held, struct cs_error *err)
{
        _cleanup_close_ int slock = store_lock(s, err);
        char from[100], to[100];
        bool exists = false;
        int r;

        if (slock < 0)
                return slock;
        snprintf(from, sizeof(from), "tmp/%s", tname);
        store_layer_path(diff_id, to);
        if (renameat(s->fd, from, s->fd, to) < 0) {
                if (errno != EEXIST && errno != ENOTEMPTY)
                        return cs_error_set(err, errno, "move the layer into `%s/%s`", s->root, to);
                exists = true;
        }
        close(*tfd); /* our exclusive flock on it, now in place: the shared one follows */
        *tfd = -1;
        r = store_layer_hold(s, diff_id, err);
        if (r == -ENOENT)
                r = cs_error_setx(err, ENOENT, "the layer %s vanished from `%s`", diff_id, s->root);
        if (r < 0)
                return r;
        *ret_held = r;
        if (exists) {
                /* Dropped: best effort: what is left in tmp/ is swept by the next import. */
                struct cs_error ignored;
                (void)store_tmp_remove(s, tname, &ignored);
        }
        return 0;
}

int layer_import(struct image_store *s, struct import_job *job, size_t i, struct cs_error *err)
{
        struct import_layer *l = &job->p->layers[i];
        _cleanup_close_ int llock = -1, tfd = -1;
        char tname[64], diff_id[OCI_DIGEST_LEN + 1];
        int r;

        if (l->diff_id[0]) {
                llock = layer_lock(s, l->diff_id, err);
                if (llock < 0)
                        return llock;
                if (store_layer_reusable(s, l->digest, l->diff_id)) {
                        int fd = store_layer_hold(s, l->diff_id, err);

                        if (fd >= 0) {
                                job->held[i] = fd;
                                job->reused++;
                                add_stored_stats(fd, &job->sum);
                                if (job->o->progress)
                                        job->o->progress(
                                            job->o->progress_opaque,
                                            &(struct import_progress){
                                                .layer = i + 1,
                                                .n_layers = job->p->n_layers,
                                                .what = l->digest[0] ? l->digest : l->diff_id,
                                                .finished = true,
                                                .reused = true});
                                return 0;
                        }
                        if (fd != -ENOENT)
                                return fd;
                }
        }
        tfd = store_tmp_create(s, "layer", tname, err);
        if (tfd < 0)
                return tfd;
        r = layer_unpack(s, job, i, tfd, diff_id, err);
        if (r == 0 && !l->diff_id[0]) {
                /* a rootfs tar: its diff_id is known only now */
                llock = layer_lock(s, diff_id, err);
                r = llock < 0 ? llock : 0;
        }
        if (r == 0)
                r = layer_commit(s, &tfd, tname, diff_id, &job->held[i], err);
        job->stored += r == 0;
        /* the blob is verified to unpack to diff_id: a later import need not read it */
        if (r == 0 && l->digest[0] && strcmp(l->digest, diff_id) != 0)
                r = store_blob_record(s, l->digest, diff_id, err);
        if (r < 0 && tfd >= 0) {
                /* Dropped: best effort: what is left in tmp/ is swept by the next import. */
                struct cs_error ignored;
                (void)store_tmp_remove(s, tname, &ignored);
        }
        return r;
}
