/* The final pass over an unpacked tree: the ownership table written out beside it, times
 * and modes set bottom-up. */
#include "layer-private.h"

#include "../../common/cleanup.h"
#include "../../common/error.h"
#include "../../common/fileio.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

/* ---- the final pass ---- */

struct finish_ctx {
        struct layer_tree *t;
        FILE *meta;
        char *path; /* grows as the walk descends */
        size_t path_cap;
        struct cs_error *err;
};

int layer_meta_line(FILE *meta, const char *path, uint32_t mode, uint32_t uid, uint32_t gid,
                    struct cs_error *err)
{
        char esc[4 * 4096 + 8];

        if (layer_path_escape(path, esc, sizeof(esc)) < 0)
                return cs_error_setx(err, ENAMETOOLONG, "metadata: path too long");
        if (fprintf(meta, "%o %u %u %s\n", mode, uid, gid, esc) < 0)
                return cs_error_set(err, errno, "write the image metadata");
        return 0;
}

static int meta_line(struct finish_ctx *c, const char *path, const struct stat *st,
                     const struct meta_rec *rec)
{
        uint32_t mode = rec ? (rec->mode & 07777) | (st->st_mode & S_IFMT) : st->st_mode;

        return layer_meta_line(c->meta, path, mode, rec ? rec->uid : 0, rec ? rec->gid : 0, c->err);
}

static int finish_dir(struct finish_ctx *c, int dfd, size_t plen)
{
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        if (fd < 0 || !(d = fdopendir(fd))) {
                if (fd >= 0)
                        close(fd);
                return cs_error_set(c->err, errno, "read `%s`", plen ? c->path : ".");
        }
        while ((errno = 0, de = readdir(d))) {
                size_t nlen = strlen(de->d_name), np = plen + (plen ? 1 : 0) + nlen;
                struct meta_rec *rec;
                struct stat st;
                int r;

                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (np + 1 > c->path_cap) {
                        char *nb = realloc(c->path, np + 256);
                        if (!nb)
                                return cs_error_set(c->err, ENOMEM, "metadata");
                        c->path = nb;
                        c->path_cap = np + 256;
                }
                if (plen)
                        c->path[plen] = '/';
                memcpy(c->path + plen + (plen ? 1 : 0), de->d_name, nlen + 1);
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        return cs_error_set(c->err, errno, "stat `%s`", c->path);
                if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0))
                        continue; /* a whiteout: it hides, it is no file of the image */
                rec = meta_find(c->t, c->path);
                c->t->stats.files++;
                r = meta_line(c, c->path, &st, rec);
                if (r < 0)
                        return r;
                if (S_ISDIR(st.st_mode)) {
                        _cleanup_close_ int sub = openat(
                            dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (sub < 0)
                                return cs_error_set(c->err, errno, "open `%s`", c->path);
                        r = finish_dir(c, sub, np);
                        if (r < 0)
                                return r;
                        if (rec) {
                                struct timespec ts[2] = {
                                    {.tv_nsec = UTIME_OMIT},
                                    {.tv_sec = rec->mtime_sec, .tv_nsec = rec->mtime_nsec}};
                                if (layer_fchmod(sub, rec->mode & 07777) < 0)
                                        return cs_error_set(c->err, errno, "chmod `%s`", c->path);
                                if (rec->mtime_set)
                                        (void)futimens(sub, ts);
                        }
                        c->path[plen] = '\0';
                }
        }
        if (errno)
                return cs_error_set(c->err, errno, "read `%s`", plen ? c->path : ".");
        return 0;
}

int layer_tree_finish(struct layer_tree *t, int meta_fd, struct cs_error *err)
{
        struct finish_ctx c = {.t = t, .err = err};
        struct meta_rec *root = meta_find(t, ".");
        struct stat st;
        int fd, r;

        fd = dup(meta_fd);
        if (fd < 0 || !(c.meta = fdopen(fd, "w"))) {
                if (fd >= 0)
                        close(fd);
                return cs_error_set(err, errno, "write the image metadata");
        }
        c.path_cap = 4096;
        c.path = calloc(1, c.path_cap);
        t->stats.files = 0;
        if (!c.path) {
                r = cs_error_set(err, ENOMEM, "metadata");
                goto out;
        }
        if (fstat(t->root_fd, &st) < 0) {
                r = cs_error_set(err, errno, "stat the rootfs");
                goto out;
        }
        r = meta_line(&c, ".", &st, root);
        if (r == 0)
                r = finish_dir(&c, t->root_fd, 0);
        if (r == 0 && root && root->mtime_set) {
                struct timespec ts[2] = {{.tv_nsec = UTIME_OMIT},
                                         {.tv_sec = root->mtime_sec, .tv_nsec = root->mtime_nsec}};
                (void)futimens(t->root_fd, ts);
        }
        if (r == 0 && fflush(c.meta) != 0)
                r = cs_error_set(err, errno, "write the image metadata");
out:
        free(c.path);
        if (fclose(c.meta) != 0 && r == 0)
                r = cs_error_set(err, errno, "write the image metadata");
        return r;
}

static int longer_first(const void *a, const void *b)
{
        size_t la = strlen((*(const struct meta_rec *const *)a)->path);
        size_t lb = strlen((*(const struct meta_rec *const *)b)->path);

        return la < lb ? 1 : la > lb ? -1 : 0;
}

int layer_tree_add_finish(struct layer_tree *t, struct cs_error *err)
{
        _cleanup_free_ const struct meta_rec **dirs = NULL;
        size_t n = 0;

        cache_drop(t);
        dirs = t->n ? calloc(t->n, sizeof(*dirs)) : NULL;
        if (t->n && !dirs)
                return cs_error_set(err, ENOMEM, "unpack the archive");
        for (size_t i = 0; i < t->cap && n < t->n; i++)
                if (t->slots[i].path && S_ISDIR(t->slots[i].mode) &&
                    strcmp(t->slots[i].path, ".") != 0)
                        dirs[n++] = &t->slots[i];
        /* the deepest first: a parent's mode may take away what reaches its children */
        if (n)
                qsort(dirs, n, sizeof(*dirs), longer_first);
        for (size_t i = 0; i < n; i++) {
                const struct meta_rec *rec = dirs[i];
                _cleanup_free_ char *rel = strdup(rec->path);
                _cleanup_close_ int pfd = -1, fd = -1;
                struct cs_error gone = {0};
                const char *parent, *base;

                if (!rel)
                        return cs_error_set(err, ENOMEM, "unpack the archive");
                split_path(rel, &parent, &base);
                /* by fd, never through a symlink: a later entry may have replaced a parent
                 * (then nothing of this directory is left to finish) */
                pfd = tree_open_dir(t, parent, false, rec->path, &gone);
                if (pfd >= 0)
                        fd = openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0)
                        continue;
                if (layer_fchmod(fd, rec->mode & 07777) < 0)
                        return cs_error_set(err, errno, "chmod `%s`", rec->path);
                if (rec->mtime_set) {
                        struct timespec ts[2] = {
                            {.tv_nsec = UTIME_OMIT},
                            {.tv_sec = rec->mtime_sec, .tv_nsec = rec->mtime_nsec}};
                        (void)futimens(fd, ts);
                }
        }
        cache_drop(t);
        return 0;
}
