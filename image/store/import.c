/* Import: an image source verified and unpacked into the store (libarchive, libcrypto).
 * Kept apart from store.c so that a launch, which only opens the store, never loads
 * libarchive: `csandbox image import` runs the csandbox-import helper. */
#include "import-private.h"
#include "store-private.h"

#include "../../common/cleanup.h"
#include "../../common/error.h"
#include "../../common/fileio.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define IMPORT_BUF  (256u << 10)
#define INDEX_DEPTH 4

static void source_closep(struct image_source *s)
{
        source_close(s);
}

/* ---- import ---- */

void import_options_init(struct import_options *o)
{
        memset(o, 0, sizeof(*o));
        oci_platform_host(&o->platform);
        o->limits = LAYER_LIMITS_DEFAULT;
}

static int write_file_at(int dirfd, const char *name, const char *data, size_t len,
                         struct cs_error *err)
{
        _cleanup_close_ int fd =
            openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);

        if (fd < 0 || cs_write_all(fd, data, len) < 0)
                return cs_error_set(err, errno, "write `%s`", name);
        return 0;
}

int store_image_commit(struct image_store *s, const char *key, const char *config,
                       size_t config_len, const char *source, const char *format,
                       const struct layer_stats *sum, size_t n_layers, struct cs_error *err)
{
        _cleanup_close_ int tfd = -1, lock = -1;
        char tname[64] = "", from[100], to[100];
        _cleanup_json_ cJSON *info = NULL;
        _cleanup_free_ char *text = NULL;
        int r;

        tfd = store_tmp_create(s, "import", tname, err);
        r = tfd < 0 ? tfd : write_file_at(tfd, "config.json", config, config_len, err);
        if (r < 0)
                goto out;
        info = cJSON_CreateObject();
        if (!info || !cJSON_AddStringToObject(info, "digest", key) ||
            !cJSON_AddStringToObject(info, "source", source) ||
            !cJSON_AddStringToObject(info, "format", format) ||
            !cJSON_AddNumberToObject(info, "created", (double)time(NULL)) ||
            !cJSON_AddNumberToObject(info, "size", (double)sum->size) ||
            !cJSON_AddNumberToObject(info, "files", (double)sum->files) ||
            !cJSON_AddNumberToObject(info, "layers", (double)n_layers) ||
            !cJSON_AddNumberToObject(info, "skipped_devices", (double)sum->skipped_devices) ||
            !(text = cJSON_Print(info))) {
                r = cs_error_set(err, ENOMEM, "info.json");
                goto out;
        }
        r = write_file_at(tfd, "info.json", text, strlen(text), err);
        if (r >= 0)
                r = lock = store_lock(s, err);
        if (r < 0)
                goto out;
        snprintf(from, sizeof(from), "tmp/%s", tname);
        snprintf(to, sizeof(to), "sha256/%.64s", store_digest_hex(key));
        if (renameat(s->fd, from, s->fd, to) < 0) {
                if (errno != EEXIST && errno != ENOTEMPTY) {
                        r = cs_error_set(err, errno, "move the image into `%s/%s`", s->root, to);
                        goto out;
                }
        } else {
                tname[0] = '\0';
        }
        r = cs_take_fd(&lock);
out:
        if (tname[0]) {
                /* Dropped: best effort: what is left is swept by the next import or prune. */
                struct cs_error ignored;
                (void)store_tmp_remove(s, tname, &ignored);
        }
        return r;
}

int store_name_set(struct image_store *s, const char *name, const char *digest,
                   struct cs_error *err)
{
        _cleanup_json_ cJSON *names = NULL;
        int r = store_names_read(s, &names, err);

        if (r == 0) {
                cJSON_DeleteItemFromObjectCaseSensitive(names, name);
                if (!cJSON_AddStringToObject(names, name, digest))
                        r = cs_error_set(err, ENOMEM, "names.json");
        }
        if (r == 0)
                r = store_names_write(s, names, err);
        return r;
}

/* Every layer into the layer store, then the image (config and numbers) into
 * tmp/import-* and moved into place. Called with the image's lock held; returns the store
 * lock, held for the caller to name the image. */
static int import_unpack(struct image_store *s, struct image_source *src, const char *path,
                         const struct import_options *o, struct import_plan *p,
                         struct import_result *res, struct cs_error *err)
{
        struct import_job job = {.src = src,
                                 .source_path = p->format == IMAGE_FORMAT_ROOTFS_TAR ? NULL : path,
                                 .source_is_tar = p->format != IMAGE_FORMAT_OCI,
                                 .o = o,
                                 .p = p,
                                 .report_lock = PTHREAD_MUTEX_INITIALIZER};
        _cleanup_close_ int lock = -1;
        bool unknown = false; /* a layer's size: all_total stays 0 */
        int r = 0;

        job.held = calloc(p->n_layers + 1, sizeof(int));
        if (!job.held)
                return cs_error_set(err, ENOMEM, "import");
        for (size_t i = 0; i < p->n_layers; i++) {
                int64_t size = p->layers[i].size;

                job.held[i] = -1;
                if (size < 0 || job.all_total + (uint64_t)size < job.all_total)
                        unknown = true;
                else
                        job.all_total += (uint64_t)size;
        }
        if (unknown)
                job.all_total = 0;
        r = layers_import(s, &job, err);
        if (r < 0)
                goto out;
        res->size = job.sum.size;
        res->files = job.sum.files;
        res->skipped_devices = job.sum.skipped_devices;
        res->skipped_xattrs = job.sum.skipped_xattrs;
        res->layers_reused = job.reused;
        r = lock = store_image_commit(s, p->key, p->config, p->config_len, o->source,
                                      import_format_name(p->format), &job.sum, p->n_layers, err);
        if (r >= 0)
                r = cs_take_fd(&lock); /* the caller names it, then unlocks */
out:
        for (size_t i = 0; i < p->n_layers; i++)
                if (job.held[i] >= 0)
                        close(job.held[i]);
        free(job.held);
        if (r < 0) {
                /* Dropped: best effort: what is left is swept by the next import or prune. */
                struct cs_error ignored;

                /* a refused image leaves the store as it was: the layers it stored go again,
                 * unless another image lists them or another import holds them */
                if (job.stored && (lock >= 0 || (lock = store_lock(s, &ignored)) >= 0))
                        (void)store_layers_sweep(s, NULL, &ignored);
        }
        return r;
}

int store_import(struct image_store *s, const struct import_options *o, struct import_result *ret,
                 struct cs_error *err)
{
        __attribute__((cleanup(source_closep))) struct image_source src = {.dir_fd = -1,
                                                                           .member_fd = -1};
        struct import_plan p = {0};
        struct import_result res = {0};
        _cleanup_free_ char *path = NULL, *ref = NULL;
        _cleanup_close_ int ilock = -1, slock = -1;
        char lockname[80];
        struct stat st;
        int r;

        path = strdup(o->source);
        if (!path)
                return cs_error_set(err, ENOMEM, "import");
        /* DIR:REF picks a ref from a layout directory's index */
        if (stat(path, &st) < 0) {
                char *colon = strrchr(path, ':');
                if (colon && colon != path) {
                        *colon = '\0';
                        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode) && colon[1]) {
                                ref = strdup(colon + 1);
                                if (!ref)
                                        return cs_error_set(err, ENOMEM, "import");
                        } else {
                                *colon = ':';
                        }
                }
                if (!ref)
                        return cs_error_set(err, errno ? errno : ENOENT, "image source `%s`",
                                            o->source);
        }
        p.format = o->format;
        if (p.format == IMAGE_FORMAT_AUTO) {
                if (S_ISDIR(st.st_mode))
                        p.format = IMAGE_FORMAT_OCI;
                else if ((r = source_detect_tar(path, &p.format, err)) < 0)
                        return r;
        }
        if ((p.format == IMAGE_FORMAT_OCI) != S_ISDIR(st.st_mode))
                return cs_error_setx(err, EINVAL, "image source `%s`: --format %s needs a %s",
                                     o->source, import_format_name(p.format),
                                     p.format == IMAGE_FORMAT_OCI ? "directory" : "file");
        if (p.format == IMAGE_FORMAT_OCI || p.format == IMAGE_FORMAT_OCI_ARCHIVE) {
                r = source_open(path, p.format == IMAGE_FORMAT_OCI_ARCHIVE, &src, err);
                if (r == 0)
                        r = plan_oci(&src, path, ref, o, &p, err);
        } else if (p.format == IMAGE_FORMAT_DOCKER_ARCHIVE) {
                r = source_open(path, true, &src, err);
                if (r == 0)
                        r = plan_docker(&src, o, &p, err);
        } else {
                r = plan_rootfs(o, &p, err);
        }
        if (r < 0)
                goto out;
        if (o->name)
                r = store_name_canonical(o->name, res.name, err);
        else if (p.default_name)
                r = store_name_canonical(p.default_name, res.name, err);
        else {
                _cleanup_free_ char *base = source_basename(path);
                r = base ? store_name_canonical(base, res.name, err)
                         : cs_error_set(err, ENOMEM, "import");
        }
        if (r < 0)
                goto out;
        snprintf(res.digest, sizeof(res.digest), "%s", p.key);
        res.layers = p.n_layers;

        /* one import per image does the work; the others wait and find it done */
        snprintf(lockname, sizeof(lockname), "image-%.64s", store_digest_hex(p.key));
        ilock = store_lock_named(s, lockname, err);
        if (ilock < 0) {
                r = ilock;
                goto out;
        }
        {
                /* Dropped: best effort: what is left in tmp/ is swept by the next import. */
                struct cs_error ignored;
                (void)store_tmp_sweep(s, NULL, &ignored);
        }
        if (store_image_present(s, p.key)) {
                res.existed = true;
                slock = store_lock(s, err);
                if (slock < 0) {
                        r = slock;
                        goto out;
                }
                {
                        _cleanup_free_ char *info = NULL;
                        char ipath[100];
                        size_t len;
                        cJSON *j;

                        snprintf(ipath, sizeof(ipath), "sha256/%.64s/info.json",
                                 store_digest_hex(p.key));
                        if (cs_read_file_at(s->fd, ipath, INFO_MAX, true, &info, &len, err) == 0 &&
                            (j = cJSON_ParseWithLength(info, len))) {
                                const cJSON *v;
                                if ((v = cJSON_GetObjectItem(j, "size")) && cJSON_IsNumber(v))
                                        res.size = (uint64_t)v->valuedouble;
                                if ((v = cJSON_GetObjectItem(j, "files")) && cJSON_IsNumber(v))
                                        res.files = (uint64_t)v->valuedouble;
                                if ((v = cJSON_GetObjectItem(j, "skipped_devices")) &&
                                    cJSON_IsNumber(v))
                                        res.skipped_devices = (uint64_t)v->valuedouble;
                                cJSON_Delete(j);
                        }
                }
        } else {
                slock = import_unpack(s, &src, path, o, &p, &res, err);
                if (slock < 0) {
                        r = slock;
                        goto out;
                }
        }
        r = store_name_set(s, res.name, res.digest, err);
        if (r < 0)
                r = cs_error_wrap(err, "the image is stored as %s but naming it `%s` failed",
                                  res.digest, res.name);
out:
        import_plan_free(&p);
        if (r == 0)
                *ret = res;
        return r < 0 ? r : 0;
}
