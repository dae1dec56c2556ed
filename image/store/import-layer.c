/* An import's layers into the layer store: each reused when stored and its blob known,
 * otherwise unpacked into tmp/layer-* (several at once), verified, completed against the
 * layers below it and moved to layers/sha256/HEX, bottom first. */
#include "import-private.h"
#include "store-private.h"

#include "../../common/cleanup.h"
#include "../../common/error.h"
#include "../../common/fileio.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* Layers unpacked at once, at most (and no more than there are cores). */
#define UNPACK_WORKERS_MAX 16

/* layer-HEX in the store's lock directory, flocked exclusively: one import unpacks a layer,
 * the others wait. */
int store_layer_lock(struct image_store *s, const char *diff_id, struct cs_error *err)
{
        char name[100];

        snprintf(name, sizeof(name), "layer-%.64s", store_digest_hex(diff_id));
        return store_lock_named(s, name, err);
}

static uint64_t info_number(const cJSON *j, const char *key)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);

        return cJSON_IsNumber(v) && v->valuedouble >= 0 ? (uint64_t)v->valuedouble : 0;
}

/* A stored layer's numbers into the image's. */
void layer_add_stored_stats(int layer_fd, struct layer_stats *sum)
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

int layer_write_info(int dirfd, const struct layer_stats *st, struct cs_error *err)
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

/* One layer of the image on its way into the store. */
struct slot {
        int tfd; /* tmp/layer-*, flocked, while it is ours */
        char tname[64];
        int diff; /* tfd's LAYER_DIFF */
        struct layer_tree *tree;
        char diff_id[OCI_DIGEST_LEN + 1]; /* found in the stream */
        struct import_progress done;
        int dup_of; /* an earlier layer of the image with the same blob, or -1 */
        bool work;  /* to be unpacked */
        int r;
        struct cs_error err;
};

struct unpack_ctx {
        struct image_store *s;
        struct import_job *job;
        struct slot *slots;
        size_t *work, n_work;
        atomic_size_t next;
};

/* Phase A, for one layer: its tar streamed into tmp/layer-*, verified; what depends on the
 * layers below it is left for layer_complete. */
static int layer_unpack(struct unpack_ctx *c, size_t i, struct image_source *src,
                        struct cs_error *err)
{
        struct slot *sl = &c->slots[i];
        struct layer_limits lim = c->job->o->limits;
        int r;

        sl->tfd = store_tmp_create(c->s, "layer", sl->tname, err);
        if (sl->tfd < 0)
                return sl->tfd;
        if (mkdirat(sl->tfd, LAYER_DIFF, 0755) < 0 ||
            (sl->diff =
                 openat(sl->tfd, LAYER_DIFF, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
                return cs_error_set(err, errno, "create a layer directory in `%s/tmp`", c->s->root);
        lim.shared = &c->job->budget;
        r = layer_tree_new(sl->diff, &lim, &sl->tree, err);
        if (r == 0)
                r = layer_stream(c->job, src, i, sl->tree, sl->diff_id, &sl->done, err);
        return r;
}

static void *unpack_worker(void *opaque)
{
        struct unpack_ctx *c = opaque;
        struct image_source src = {.dir_fd = -1, .member_fd = -1};
        bool own = false;

        for (size_t k; (k = atomic_fetch_add(&c->next, 1)) < c->n_work;) {
                struct slot *sl = &c->slots[c->work[k]];

                if (!own) {
                        sl->r =
                            source_open(c->job->source_path, c->job->source_is_tar, &src, &sl->err);
                        if (sl->r < 0) {
                                atomic_store(&c->job->cancel, true);
                                break;
                        }
                        own = true;
                }
                sl->r = layer_unpack(c, c->work[k], &src, &sl->err);
                if (sl->r < 0)
                        atomic_store(&c->job->cancel, true);
        }
        if (own)
                source_close(&src);
        return NULL;
}

/* Phase A for every layer to unpack: in this thread with the job's source when there is
 * one layer or one core, else in up to a worker per core, each with its own source. */
static void unpack_all(struct unpack_ctx *c)
{
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        size_t n = c->n_work < (size_t)(cores > 1 ? cores : 1) ? c->n_work : (size_t)cores;
        pthread_t tids[UNPACK_WORKERS_MAX];
        size_t started = 0;

        if (n > UNPACK_WORKERS_MAX)
                n = UNPACK_WORKERS_MAX;
        if (n <= 1 || !c->job->source_path) {
                for (size_t k = 0; k < c->n_work && !atomic_load(&c->job->cancel); k++) {
                        struct slot *sl = &c->slots[c->work[k]];

                        sl->r = layer_unpack(c, c->work[k], c->job->src, &sl->err);
                        if (sl->r < 0)
                                atomic_store(&c->job->cancel, true);
                }
                return;
        }
        for (; started < n; started++)
                if (pthread_create(&tids[started], NULL, unpack_worker, c) != 0)
                        break;
        if (started == 0)
                unpack_worker(c); /* no thread to be had: this one does it all */
        for (size_t k = 0; k < started; k++)
                pthread_join(tids[k], NULL);
}

/* Move tmp/tname into layers/sha256/HEX (unless another import stored it first) and hold
 * it, under the store lock so that no sweep sees it unheld in between. */
int store_layer_commit(struct image_store *s, int *tfd, const char *tname, const char *diff_id,
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

/* Phase B, bottom first: the layer completed against the layers below it (now all held),
 * its metadata and numbers written, moved into the store and held. */
static int layer_complete(struct unpack_ctx *c, size_t i, struct cs_error *err)
{
        struct import_job *job = c->job;
        struct import_layer *l = &job->p->layers[i];
        struct slot *sl = &c->slots[i];
        _cleanup_free_ int *lowers = calloc(i + 1, sizeof(int));
        _cleanup_close_ int meta = -1, llock = -1;
        const struct layer_stats *st;
        int r;

        if (!lowers)
                return cs_error_set(err, ENOMEM, "import");
        for (size_t k = 0; k < i; k++)
                lowers[k] = job->held[i - 1 - k];
        r = layer_tree_set_lowers(sl->tree, lowers, i, err);
        if (r < 0)
                return cs_error_wrap(err, "layer %zu/%zu", i + 1, job->p->n_layers);
        meta =
            openat(sl->tfd, LAYER_META, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (meta < 0)
                return cs_error_set(err, errno, "create the layer's metadata");
        r = layer_tree_finish(sl->tree, meta, err);
        if (r < 0)
                return r;
        st = layer_tree_stats(sl->tree);
        job->sum.size += st->size;
        job->sum.files += st->files;
        job->sum.skipped_devices += st->skipped_devices;
        job->sum.skipped_xattrs += st->skipped_xattrs;
        r = layer_write_info(sl->tfd, st, err);
        if (r == 0 && !l->diff_id[0]) {
                /* a rootfs tar: its diff_id is known only now */
                llock = store_layer_lock(c->s, sl->diff_id, err);
                r = llock < 0 ? llock : 0;
        }
        if (r == 0)
                r = store_layer_commit(c->s, &sl->tfd, sl->tname, sl->diff_id, &job->held[i], err);
        if (r < 0)
                return r;
        job->stored++;
        import_report(job, &sl->done);
        layer_tree_free(sl->tree); /* its tables and buffer: many layers may follow */
        sl->tree = NULL;
        /* the blob is verified to unpack to diff_id: a later import need not read it */
        if (l->digest[0] && strcmp(l->digest, sl->diff_id) != 0)
                return store_blob_record(c->s, l->digest, sl->diff_id, err);
        return 0;
}

static int diff_id_cmp(const void *a, const void *b)
{
        return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Phase 0: the layer locks, taken in diff_id order (every import takes them so, so none
 * waits in a circle), then each layer reused, left to an earlier one with the same blob,
 * or marked to unpack. */
static int layers_plan(struct unpack_ctx *c, int *locks, struct cs_error *err)
{
        struct import_job *job = c->job;
        struct import_plan *p = job->p;
        _cleanup_free_ const char **ids = calloc(p->n_layers + 1, sizeof(char *));
        size_t n = 0;

        if (!ids)
                return cs_error_set(err, ENOMEM, "import");
        for (size_t i = 0; i < p->n_layers; i++)
                if (p->layers[i].diff_id[0])
                        ids[n++] = p->layers[i].diff_id;
        qsort(ids, n, sizeof(*ids), diff_id_cmp);
        for (size_t k = 0; k < n; k++) {
                if (k && strcmp(ids[k], ids[k - 1]) == 0)
                        continue;
                locks[k] = store_layer_lock(c->s, ids[k], err);
                if (locks[k] < 0)
                        return locks[k];
        }
        for (size_t i = 0; i < p->n_layers; i++) {
                struct import_layer *l = &p->layers[i];
                struct slot *sl = &c->slots[i];

                if (l->diff_id[0] && store_layer_reusable(c->s, l->digest, l->diff_id)) {
                        int fd = store_layer_hold(c->s, l->diff_id, err);

                        if (fd != -ENOENT && fd < 0)
                                return fd;
                        if (fd >= 0) {
                                job->held[i] = fd;
                                job->reused++;
                                layer_add_stored_stats(fd, &job->sum);
                                if (l->size > 0)
                                        atomic_fetch_add(&job->all_done, (uint64_t)l->size);
                                import_report(job,
                                              &(struct import_progress){
                                                  .layer = i + 1,
                                                  .n_layers = p->n_layers,
                                                  .what = l->digest[0] ? l->digest : l->diff_id,
                                                  .finished = true,
                                                  .reused = true});
                                continue;
                        }
                }
                for (size_t j = 0; j < i && sl->dup_of < 0; j++)
                        if (c->slots[j].work && l->diff_id[0] &&
                            strcmp(p->layers[j].diff_id, l->diff_id) == 0 &&
                            strcmp(p->layers[j].digest, l->digest) == 0)
                                sl->dup_of = (int)j;
                if (sl->dup_of < 0) {
                        sl->work = true;
                        c->work[c->n_work++] = i;
                }
        }
        return 0;
}

/* Until it is stored, a layer to unpack holds its lock, its temporary directory and its
 * tree open, and every layer below it its directory: a soft limit of 1024 would not do for
 * the most layers an image may have. */
static void nofile_for(size_t n_layers)
{
        rlim_t want = (rlim_t)n_layers * 4 + 64;
        struct rlimit rl;

        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < want) {
                rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
                /* Dropped: where the hard limit is lower, EMFILE will say so. */
                (void)setrlimit(RLIMIT_NOFILE, &rl);
        }
}

int layers_import(struct image_store *s, struct import_job *job, struct cs_error *err)
{
        size_t n = job->p->n_layers;
        struct unpack_ctx c = {.s = s, .job = job};
        _cleanup_free_ int *locks = calloc(n + 1, sizeof(int));
        int r;

        c.slots = calloc(n + 1, sizeof(*c.slots));
        c.work = calloc(n + 1, sizeof(*c.work));
        if (!locks || !c.slots || !c.work) {
                free(c.slots);
                free(c.work);
                return cs_error_set(err, ENOMEM, "import");
        }
        for (size_t i = 0; i < n; i++) {
                locks[i] = c.slots[i].tfd = c.slots[i].diff = c.slots[i].dup_of = -1;
        }
        nofile_for(n);
        r = layers_plan(&c, locks, err);
        if (r == 0)
                unpack_all(&c);
        for (size_t i = 0; r == 0 && i < n; i++) {
                struct slot *sl = &c.slots[i];

                if (sl->dup_of >= 0) {
                        job->held[i] = store_layer_hold(s, c.slots[sl->dup_of].diff_id, err);
                        r = job->held[i] < 0 ? job->held[i] : 0;
                } else if (sl->work && sl->r < 0) {
                        r = sl->r;
                        *err = sl->err;
                } else if (sl->work) {
                        r = sl->tree ? layer_complete(&c, i, err)
                                     : cs_error_setx(err, ECANCELED, "layer %zu/%zu was not read",
                                                     i + 1, n);
                }
        }
        if (r < 0) {
                /* the first layer that failed of itself, not one stopped because of it */
                for (size_t i = 0; i < n; i++)
                        if (c.slots[i].r < 0 && c.slots[i].err.err != ECANCELED) {
                                *err = c.slots[i].err;
                                r = c.slots[i].r;
                                break;
                        }
        }
        for (size_t i = 0; i < n; i++) {
                struct slot *sl = &c.slots[i];

                layer_tree_free(sl->tree);
                if (sl->diff >= 0)
                        close(sl->diff);
                if (sl->tfd >= 0) {
                        /* Dropped: best effort: what is left in tmp/ is swept later. */
                        struct cs_error ignored;

                        close(sl->tfd);
                        (void)store_tmp_remove(s, sl->tname, &ignored);
                }
                if (locks[i] >= 0)
                        close(locks[i]);
        }
        free(c.slots);
        free(c.work);
        return r;
}
