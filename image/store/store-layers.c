/* The layer store: one directory per layer diff_id, shared by every image whose config lists
 * it, the verified blob -> diff_id records, and the sweep that removes layers no image
 * lists. See store.h for the layout and the locking. */
#include "store.h"
#include "store-private.h"

#include "../../common/cleanup.h"
#include "../../common/error.h"
#include "../../common/fileio.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#define RECORD_MAX 128

/* Who holds a flock on the file of st, from /proc/locks: "PID (COMM)", or "" when no
 * holder is visible from here. */
static void flock_holder(const struct stat *st, char *out, size_t max)
{
        _cleanup_fclose_ FILE *f = fopen("/proc/locks", "re");
        char line[256];

        out[0] = '\0';
        while (f && fgets(line, sizeof(line), f)) {
                unsigned maj, min;
                unsigned long ino;
                char kind[16], mode[16];
                int pid;

                /* "1: FLOCK  ADVISORY  WRITE 1234 00:2e:5678 0 EOF" */
                if (sscanf(line, "%*d: %15s %*s %15s %d %x:%x:%lu", kind, mode, &pid, &maj, &min,
                           &ino) != 6 ||
                    strcmp(kind, "FLOCK") != 0 || strcmp(mode, "WRITE") != 0 ||
                    ino != (unsigned long)st->st_ino || maj != major(st->st_dev) ||
                    min != minor(st->st_dev))
                        continue;
                {
                        char path[64], comm[64] = "";
                        _cleanup_fclose_ FILE *c = NULL;

                        snprintf(path, sizeof(path), "/proc/%d/comm", pid);
                        if ((c = fopen(path, "re")) && fgets(comm, sizeof(comm), c))
                                comm[strcspn(comm, "\n")] = '\0';
                        snprintf(out, max, "process %d%s%s%s", pid, comm[0] ? " (" : "", comm,
                                 comm[0] ? ")" : "");
                }
                return;
        }
}

int store_dir_hold(struct image_store *s, const char *path, struct cs_error *err)
{
        struct timespec start, now;

        clock_gettime(CLOCK_MONOTONIC, &start);
        for (int attempt = 0;; attempt++) {
                _cleanup_close_ int fd =
                    openat(s->fd, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                struct stat a, b;
                bool moved = false;

                if (fd < 0 && errno == ENOENT)
                        return -ENOENT;
                if (fd < 0)
                        return cs_error_set(err, errno, "open `%s/%s`", s->root, path);
                /* Never a blocking wait: csandbox holds these exclusively only for the instant
                 * of a rename, but anyone who sees the store can flock it, and a session sees
                 * it (bound read-only: flock works there too). */
                while (flock(fd, LOCK_SH | LOCK_NB) < 0) {
                        if (errno != EWOULDBLOCK && errno != EINTR)
                                return cs_error_set(err, errno, "lock `%s/%s`", s->root, path);
                        /* moved away (rm, a sweep): open what is in its place now */
                        if (fstat(fd, &a) < 0 ||
                            fstatat(s->fd, path, &b, AT_SYMLINK_NOFOLLOW) < 0 ||
                            a.st_ino != b.st_ino || a.st_dev != b.st_dev) {
                                moved = true;
                                break;
                        }
                        clock_gettime(CLOCK_MONOTONIC, &now);
                        if (now.tv_sec - start.tv_sec >= STORE_HOLD_WAIT_S) {
                                char who[128];

                                flock_holder(&a, who, sizeof(who));
                                return cs_error_setx(
                                    err, EBUSY,
                                    "`%s/%s` has been locked exclusively by %s for %d seconds; "
                                    "csandbox itself does that only for an instant, so it is "
                                    "likely a session or another program that sees the store: "
                                    "end it and retry",
                                    s->root, path, who[0] ? who : "another process",
                                    STORE_HOLD_WAIT_S);
                        }
                        nanosleep(&(struct timespec){.tv_nsec = 20 * 1000000L}, NULL);
                }
                if (moved) {
                        if (attempt >= 100)
                                return cs_error_setx(err, EAGAIN, "`%s/%s` keeps changing; retry",
                                                     s->root, path);
                        continue;
                }
                /* rm or a sweep may have moved it away between the open and the lock */
                if (fstat(fd, &a) == 0 && fstatat(s->fd, path, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
                    a.st_ino == b.st_ino && a.st_dev == b.st_dev)
                        return cs_take_fd(&fd);
                if (attempt >= 3)
                        return cs_error_setx(err, EAGAIN, "`%s/%s` keeps changing; retry", s->root,
                                             path);
        }
}

void store_layer_path(const char *diff_id, char ret[100])
{
        snprintf(ret, 100, "layers/sha256/%.64s", store_digest_hex(diff_id));
}

int store_layer_hold(struct image_store *s, const char *diff_id, struct cs_error *err)
{
        char path[100];

        store_layer_path(diff_id, path);
        return store_dir_hold(s, path, err);
}

bool store_blob_diff_id(struct image_store *s, const char *blob, char ret[OCI_DIGEST_LEN + 1])
{
        _cleanup_free_ char *buf = NULL;
        /* Dropped: no readable record means the blob must be read and verified. */
        struct cs_error ignored;
        char path[100];
        size_t len;

        snprintf(path, sizeof(path), "layers/blobs/%.64s", store_digest_hex(blob));
        if (cs_read_file_at(s->fd, path, RECORD_MAX, true, &buf, &len, &ignored) < 0 ||
            len != OCI_DIGEST_LEN || oci_digest_check(buf, "record", &ignored) < 0)
                return false;
        snprintf(ret, OCI_DIGEST_LEN + 1, "%s", buf);
        return true;
}

/* A directory of the store (O_PATH), or < 0 with err filled. */
static int store_subdir(struct image_store *s, const char *rel, struct cs_error *err)
{
        int fd = openat(s->fd, rel, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

        return fd < 0 ? cs_error_set(err, errno, "open `%s/%s`", s->root, rel) : fd;
}

int store_blob_record(struct image_store *s, const char *blob, const char *diff_id,
                      struct cs_error *err)
{
        _cleanup_close_ int dfd = store_subdir(s, "layers/blobs", err);
        char name[65];

        if (dfd < 0)
                return dfd;
        snprintf(name, sizeof(name), "%.64s", store_digest_hex(blob));
        return cs_write_file_durable(dfd, name, diff_id, strlen(diff_id), 0600, err);
}

bool store_layer_reusable(struct image_store *s, const char *blob, const char *diff_id)
{
        char known[OCI_DIGEST_LEN + 1], path[100];
        struct stat st;

        store_layer_path(diff_id, path);
        if (fstatat(s->fd, path, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
                return false;
        return !blob[0] || strcmp(blob, diff_id) == 0 ||
               (store_blob_diff_id(s, blob, known) && strcmp(known, diff_id) == 0);
}

int store_image_layers(struct image_store *s, int image_fd, const char *what,
                       struct oci_config *ret, struct cs_error *err)
{
        _cleanup_free_ char *config = NULL;
        size_t len;
        int r;

        r = cs_read_file_at(image_fd, "config.json", OCI_CONFIG_MAX, true, &config, &len, err);
        if (r == 0)
                r = oci_config_parse(config, len, ret, err);
        if (r < 0)
                return cs_error_wrap(err, "image `%s` in `%s`", what, s->root);
        return 0;
}

/* Add every diff_id an image of the new layout lists to keep (an object used as a set). */
static int keep_image_layers(struct image_store *s, int hfd, const char *hex, cJSON *keep,
                             struct cs_error *err)
{
        _cleanup_close_ int fd = openat(hfd, hex, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct oci_config cfg = {0};
        struct stat st;
        int r;

        if (fd < 0)
                return errno == ENOENT ? 0 : cs_error_set(err, errno, "open image %s", hex);
        if (fstatat(fd, "rootfs", &st, AT_SYMLINK_NOFOLLOW) == 0)
                return 0; /* the old layout: its rootfs is its own */
        r = store_image_layers(s, fd, hex, &cfg, err);
        for (size_t i = 0; r == 0 && i < cfg.n_diff_ids; i++)
                if (!cJSON_GetObjectItemCaseSensitive(keep, cfg.diff_ids[i]) &&
                    !cJSON_AddTrueToObject(keep, cfg.diff_ids[i]))
                        r = cs_error_set(err, ENOMEM, "layer sweep");
        oci_config_free(&cfg);
        return r;
}

/* Move dir/name away to tmp/rm-* and delete it, unless someone holds it (an import that
 * stored or reused it and has not committed its image yet). */
static int remove_unless_held(struct image_store *s, int dir, const char *name, bool *ret_busy,
                              struct cs_error *err)
{
        _cleanup_close_ int fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        char to[100];

        *ret_busy = false;
        if (fd < 0)
                return errno == ENOENT ? 0 : cs_error_set(err, errno, "open `%s`", name);
        if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
                if (errno != EWOULDBLOCK)
                        return cs_error_set(err, errno, "lock `%s`", name);
                *ret_busy = true;
                return 0;
        }
        /* the flock moves with the directory, so a concurrent prune leaves it alone */
        snprintf(to, sizeof(to), "tmp/rm-%.16s-%d", name, (int)getpid());
        if (renameat(dir, name, s->fd, to) < 0)
                return cs_error_set(err, errno, "move `%s` away", name);
        return cs_remove_at(s->fd, to, err);
}

int store_image_delete(struct image_store *s, const char *digest, bool *ret_busy,
                       struct cs_error *err)
{
        _cleanup_close_ int hfd = store_subdir(s, "sha256", err);
        char hex[65];

        if (hfd < 0)
                return hfd;
        snprintf(hex, sizeof(hex), "%.64s", store_digest_hex(digest));
        return remove_unless_held(s, hfd, hex, ret_busy, err);
}

int store_layers_sweep(struct image_store *s, size_t *ret_n, struct cs_error *err)
{
        _cleanup_json_ cJSON *keep = cJSON_CreateObject();
        _cleanup_closedir_ DIR *images = NULL, *layers = NULL;
        _cleanup_close_ int bfd = -1;
        struct dirent *de;
        size_t n = 0;
        int fd, r;

        if (!keep)
                return cs_error_set(err, ENOMEM, "layer sweep");
        fd = openat(s->fd, "sha256", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0 || !(images = fdopendir(fd))) {
                if (fd >= 0)
                        close(fd);
                return cs_error_set(err, errno, "open `%s/sha256`", s->root);
        }
        while ((de = readdir(images)))
                if (de->d_name[0] != '.' &&
                    (r = keep_image_layers(s, dirfd(images), de->d_name, keep, err)) < 0)
                        return cs_error_wrap(err, "nothing was removed");
        fd = openat(s->fd, "layers/sha256", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0 || !(layers = fdopendir(fd))) {
                if (fd >= 0)
                        close(fd);
                return cs_error_set(err, errno, "open `%s/layers/sha256`", s->root);
        }
        while ((de = readdir(layers))) {
                char diff_id[OCI_DIGEST_LEN + 1];
                bool busy;

                if (de->d_name[0] == '.' || strlen(de->d_name) != 64)
                        continue;
                snprintf(diff_id, sizeof(diff_id), "sha256:%s", de->d_name);
                if (cJSON_GetObjectItemCaseSensitive(keep, diff_id))
                        continue;
                r = remove_unless_held(s, dirfd(layers), de->d_name, &busy, err);
                if (r < 0)
                        return cs_error_wrap(err, "remove the unused layer %s", diff_id);
                n += !busy;
        }
        /* a record whose layer is gone says nothing any more */
        bfd = openat(s->fd, "layers/blobs", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (bfd >= 0) {
                _cleanup_closedir_ DIR *blobs = fdopendir(bfd);

                if (!blobs)
                        return cs_error_set(err, errno, "open `%s/layers/blobs`", s->root);
                bfd = -1;
                while ((de = readdir(blobs))) {
                        char blob[OCI_DIGEST_LEN + 1], diff_id[OCI_DIGEST_LEN + 1], path[100];
                        struct stat st;

                        if (de->d_name[0] == '.' || strlen(de->d_name) != 64)
                                continue;
                        snprintf(blob, sizeof(blob), "sha256:%s", de->d_name);
                        if (store_blob_diff_id(s, blob, diff_id)) {
                                store_layer_path(diff_id, path);
                                if (fstatat(s->fd, path, &st, AT_SYMLINK_NOFOLLOW) == 0)
                                        continue;
                        }
                        if (unlinkat(dirfd(blobs), de->d_name, 0) < 0 && errno != ENOENT)
                                return cs_error_set(err, errno, "remove `%s/layers/blobs/%s`",
                                                    s->root, de->d_name);
                }
        }
        if (ret_n)
                *ret_n = n;
        return 0;
}
