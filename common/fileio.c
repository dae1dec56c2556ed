#include "fileio.h"

#include "cleanup.h"
#include "error.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cs_read_fd(int fd, const char *what, size_t max, char **ret_buf, size_t *ret_len,
               struct cs_error *err)
{
        _cleanup_free_ char *buf = NULL;
        size_t len = 0, cap = 0;

        for (;;) {
                ssize_t n;

                if (len == cap) {
                        size_t ncap = cap ? cap * 2 : 4096;
                        char *nb;

                        if (cap > max)
                                return cs_error_setx(err, EFBIG,
                                                     "%s is larger than the limit of %zu bytes",
                                                     what, max);
                        nb = realloc(buf, ncap + 1);
                        if (!nb)
                                return cs_error_set(err, ENOMEM, "read %s", what);
                        buf = nb;
                        cap = ncap;
                }
                n = read(fd, buf + len, cap - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return cs_error_set(err, errno, "read %s", what);
                if (n == 0)
                        break;
                len += (size_t)n;
                if (len > max)
                        return cs_error_setx(err, EFBIG, "%s is larger than the limit of %zu bytes",
                                             what, max);
        }
        if (!buf) {
                buf = malloc(1);
                if (!buf)
                        return cs_error_set(err, ENOMEM, "read %s", what);
        }
        buf[len] = '\0';
        *ret_buf = cs_take_ptr(&buf);
        if (ret_len)
                *ret_len = len;
        return 0;
}

int cs_read_file_at(int dirfd, const char *path, size_t max, bool nofollow, char **ret_buf,
                    size_t *ret_len, struct cs_error *err)
{
        _cleanup_close_ int fd = -1;
        struct stat st;
        int r;

        fd = openat(dirfd, path,
                    O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | (nofollow ? O_NOFOLLOW : 0));
        if (fd < 0 && errno == ELOOP && nofollow)
                return cs_error_setx(err, ELOOP,
                                     "open %s: it is a symlink, which csandbox does "
                                     "not follow here",
                                     path);
        if (fd < 0)
                return cs_error_set(err, errno, "open %s", path);
        if (fstat(fd, &st) < 0)
                return cs_error_set(err, errno, "stat %s", path);
        if (!S_ISREG(st.st_mode))
                return cs_error_setx(err, EINVAL, "%s is not a regular file", path);
        if ((size_t)st.st_size > max)
                return cs_error_setx(err, EFBIG, "%s is %lld bytes, over the limit of %zu bytes",
                                     path, (long long)st.st_size, max);
        r = cs_read_fd(fd, path, max, ret_buf, ret_len, err);
        return r;
}

int cs_write_all(int fd, const void *buf, size_t len)
{
        const char *p = buf;

        while (len > 0) {
                ssize_t n = write(fd, p, len);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                p += n;
                len -= (size_t)n;
        }
        return 0;
}

enum { WRITE_ONCE = 1, WRITE_DURABLE = 2 };

static int write_partial(int dirfd, const char *name, const void *data, size_t len, mode_t mode,
                         int how, struct cs_error *err)
{
        char partial[256];
        _cleanup_close_ int fd = -1;
        int r;

        if (strchr(name, '/') || strlen(name) > 200)
                return cs_error_setx(err, EINVAL, "write %s: not a plain file name", name);
        /* The same content already there: leave it. A concurrent launch may be about to
         * mount the file, and replacing it would pull it from under that mount. */
        fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
        if (fd >= 0) {
                struct stat st;

                if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size == len &&
                    (st.st_mode & 07777) == mode && len <= (1u << 20)) {
                        _cleanup_free_ char *cur = malloc(len + 1);
                        ssize_t n = cur ? pread(fd, cur, len + 1, 0) : -1;

                        if (n >= 0 && (size_t)n == len && memcmp(cur, data, len) == 0)
                                return 0;
                }
                close(fd);
                fd = -1;
        }
        snprintf(partial, sizeof(partial), ".%s.%d.partial", name, (int)getpid());
        unlinkat(dirfd, partial, 0);
        fd = openat(dirfd, partial, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        if (fd < 0)
                return cs_error_set(err, errno, "create %s", partial);
        const bool once = how & WRITE_ONCE;

        r = cs_write_all(fd, data, len);
        if (r == 0 && fchmod(fd, mode) < 0)
                r = -errno;
        if (r == 0 && (how & WRITE_DURABLE) && fsync(fd) < 0)
                r = -errno;
        if (r == 0 && !once && renameat(dirfd, partial, dirfd, name) < 0)
                r = -errno;
        /* EXDEV: a session's seccomp filter refuses hard links; a rename that must not
         * replace gives the same once-only name. */
        if (r == 0 && once && linkat(dirfd, partial, dirfd, name, 0) < 0 && errno != EEXIST &&
            (errno != EXDEV ||
             (renameat2(dirfd, partial, dirfd, name, RENAME_NOREPLACE) < 0 && errno != EEXIST)))
                r = -errno;
        if (r < 0 || once)
                unlinkat(dirfd, partial, 0);
        if (r < 0)
                return cs_error_set(err, -r, "write %s", name);
        return 0;
}

int cs_write_file_atomic(int dirfd, const char *name, const void *data, size_t len, mode_t mode,
                         struct cs_error *err)
{
        return write_partial(dirfd, name, data, len, mode, 0, err);
}

int cs_write_file_durable(int dirfd, const char *name, const void *data, size_t len, mode_t mode,
                          struct cs_error *err)
{
        return write_partial(dirfd, name, data, len, mode, WRITE_DURABLE, err);
}

int cs_write_file_once(int dirfd, const char *name, const void *data, size_t len, mode_t mode,
                       struct cs_error *err)
{
        return write_partial(dirfd, name, data, len, mode, WRITE_ONCE, err);
}

void cs_human_size(uint64_t n, char *buf, size_t len)
{
        static const char *const units[] = {"B", "KB", "MB", "GB", "TB"};
        double v = (double)n;
        int u = 0;

        while (v >= 1000 && u < 4) {
                v /= 1000;
                u++;
        }
        snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", v, units[u]);
}

#define REMOVE_MAX_DEPTH 256

static int remove_at_depth(int dfd, const char *name, int depth, struct cs_error *err);

static int empty_at_depth(int dfd, int depth, struct cs_error *err)
{
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        struct stat st;
        int fd;

        if (depth > REMOVE_MAX_DEPTH)
                return cs_error_setx(err, ELOOP, "directories nested deeper than %d levels",
                                     REMOVE_MAX_DEPTH);
        /* A directory made read-only (by us, or inside a sandbox) is still ours to empty. */
        if (fstat(dfd, &st) == 0 && (st.st_mode & 0700) != 0700)
                (void)fchmod(dfd, (st.st_mode & 07777) | 0700);
        fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return cs_error_set(err, errno, "open a directory to empty it");
        d = fdopendir(fd);
        if (!d) {
                close(fd);
                return cs_error_set(err, errno, "read a directory to empty it");
        }
        while ((errno = 0, de = readdir(d))) {
                int r;

                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                r = remove_at_depth(dirfd(d), de->d_name, depth, err);
                if (r < 0)
                        return r;
        }
        if (errno)
                return cs_error_set(err, errno, "read a directory to empty it");
        return 0;
}

static int remove_at_depth(int dfd, const char *name, int depth, struct cs_error *err)
{
        _cleanup_close_ int sub = -1;
        int r;

        if (unlinkat(dfd, name, 0) == 0 || errno == ENOENT)
                return 0;
        if (errno != EISDIR && errno != EPERM)
                return cs_error_set(err, errno, "remove `%s`", name);
        sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0 && errno == EACCES) {
                /* A directory without r/x for us: it is ours, so make it readable first. */
                if (fchmodat(dfd, name, 0700, AT_SYMLINK_NOFOLLOW) == 0)
                        sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        if (sub < 0)
                return cs_error_set(err, errno, "remove `%s`", name);
        r = empty_at_depth(sub, depth + 1, err);
        if (r < 0)
                return cs_error_wrap(err, "remove `%s`", name);
        if (unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
                return cs_error_set(err, errno, "remove the directory `%s`", name);
        return 0;
}

int cs_remove_at(int dfd, const char *name, struct cs_error *err)
{
        return remove_at_depth(dfd, name, 0, err);
}

int cs_empty_dir(int dfd, struct cs_error *err)
{
        return empty_at_depth(dfd, 0, err);
}

/* Copy an open fd's bytes: copy_file_range, else read/write (the fds start at offset 0). */
int cs_copy_fd_bytes(int in, int out)
{
        char buf[65536];
        bool plain = false;

        for (;;) {
                ssize_t n = plain ? read(in, buf, sizeof(buf))
                                  : copy_file_range(in, NULL, out, NULL, (size_t)1 << 30, 0);

                if (n < 0 && errno == EINTR)
                        continue;
                /* No copy_file_range between these two files, and nothing written yet. */
                if (n < 0 && !plain &&
                    (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP ||
                     errno == EPERM) &&
                    lseek(out, 0, SEEK_CUR) == 0) {
                        plain = true;
                        continue;
                }
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return 0;
                if (plain && cs_write_all(out, buf, (size_t)n) < 0)
                        return -errno;
        }
}

int cs_copy_fd_len(int in, int out, uint64_t len, uint64_t *ret_copied)
{
        char buf[65536];
        bool plain = false;
        uint64_t done = 0;

        while (done < len) {
                size_t want =
                    len - done < ((size_t)1 << 30) ? (size_t)(len - done) : (size_t)1 << 30;
                ssize_t n = plain ? read(in, buf, want < sizeof(buf) ? want : sizeof(buf))
                                  : copy_file_range(in, NULL, out, NULL, want, 0);

                if (n < 0 && errno == EINTR)
                        continue;
                /* no copy_file_range between these two files: through the buffer */
                if (n < 0 && !plain &&
                    (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP ||
                     errno == EPERM)) {
                        plain = true;
                        continue;
                }
                if (n < 0)
                        return -errno;
                if (n == 0)
                        break;
                if (plain && cs_write_all(out, buf, (size_t)n) < 0)
                        return -errno;
                done += (uint64_t)n;
        }
        if (ret_copied)
                *ret_copied = done;
        return 0;
}

static int copy_tree(int src, int dst, int depth, struct cs_copy_budget *bud)
{
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        int fd2, r;

        if (depth > bud->max_depth)
                return -ELOOP;
        fd2 = dup(src);
        if (fd2 < 0)
                return -errno;
        d = fdopendir(fd2);
        if (!d) {
                close(fd2);
                return -errno;
        }
        rewinddir(d); /* the dup shares src's offset: a second copy of src starts over */
        while ((errno = 0, de = readdir(d))) {
                struct stat st;

                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (++bud->entries > bud->max_entries)
                        return -EFBIG;
                if (fstatat(src, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        return -errno;
                if (S_ISLNK(st.st_mode)) {
                        char target[PATH_MAX];
                        ssize_t n = readlinkat(src, de->d_name, target, sizeof(target) - 1);

                        if (n < 0)
                                return -errno;
                        target[n] = '\0';
                        if (symlinkat(target, dst, de->d_name) < 0)
                                return -errno;
                } else if (S_ISREG(st.st_mode)) {
                        _cleanup_close_ int in =
                            openat(src, de->d_name,
                                   O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
                        _cleanup_close_ int out = -1;
                        struct stat st2;

                        if (in < 0 || fstat(in, &st2) < 0)
                                return -errno;
                        if (!S_ISREG(st2.st_mode))
                                return -EINVAL;
                        bud->bytes += (size_t)st2.st_size;
                        if (bud->bytes > bud->max_bytes)
                                return -EFBIG;
                        out = openat(dst, de->d_name,
                                     O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                        if (out < 0)
                                return -errno;
                        r = cs_copy_fd_bytes(in, out);
                        if (r < 0)
                                return r;
                        if (fchmod(out, st2.st_mode & 0777) < 0)
                                return -errno;
                } else if (S_ISDIR(st.st_mode)) {
                        _cleanup_close_ int in = -1, out = -1;

                        in = openat(src, de->d_name,
                                    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (in < 0)
                                return -errno;
                        if (mkdirat(dst, de->d_name, 0700) < 0)
                                return -errno;
                        out = openat(dst, de->d_name,
                                     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (out < 0)
                                return -errno;
                        r = copy_tree(in, out, depth + 1, bud);
                        if (r < 0)
                                return r;
                        if (fchmod(out, st.st_mode & 0777) < 0)
                                return -errno;
                } else if (!bud->skipped) {
                        bud->skipped = "a fifo, socket or device";
                }
        }
        return errno ? -errno : 0;
}

int cs_copy_tree(int src, int dst, struct cs_copy_budget *b)
{
        return copy_tree(src, dst, 0, b);
}

int cs_mkdir_parents(const char *path, mode_t mode, struct cs_error *err)
{
        _cleanup_free_ char *p = strdup(path);

        if (!p)
                return cs_error_set(err, ENOMEM, "create %s", path);
        for (char *s = p + 1;; s++) {
                char saved = *s;

                if (saved != '/' && saved != '\0')
                        continue;
                *s = '\0';
                if (mkdir(p, mode) < 0 && errno != EEXIST)
                        return cs_error_set(err, errno, "create %s", p);
                *s = saved;
                if (saved == '\0')
                        return 0;
        }
}
