/* COPY and ADD's destination: resolved inside the step's root (a symlink taken while it
 * stays inside, as /lib -> usr/lib), missing directories made by fd. */
#include "build-copy-ctx.h"
#include "../layer/layer.h"

#include "../../common/cleanup.h"
#include "../../common/error.h"
#include "../../common/fileio.h"
#include "../../common/resolve.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the destination ---- */

mode_t copy_perm_of(struct copy_ctx *x, const struct stat *st)
{
        return x->chmod_set ? x->chmod : st->st_mode & 07777;
}

/* Owner, then mode (chown clears setuid/setgid), then mtime. */
int copy_set_attrs(struct copy_ctx *x, int fd, mode_t mode, const struct timespec *mtime, uid_t uid,
                   gid_t gid, const char *shown)
{
        if (fchown(fd, uid, gid) < 0)
                return cs_error_set(x->err, errno, "%s: chown `%s` to %u:%u", x->c->what, shown,
                                    (unsigned)uid, (unsigned)gid);
        if (fchmod(fd, mode) < 0)
                return cs_error_set(x->err, errno, "%s: chmod `%s`", x->c->what, shown);
        if (mtime) {
                struct timespec ts[2] = {{.tv_nsec = UTIME_OMIT}, *mtime};
                (void)futimens(fd, ts);
        }
        return 0;
}

/* Whatever is at dfd/name removed, unless it is a directory and keep_dir: 1 then. */
int copy_clear_at(struct copy_ctx *x, int dfd, const char *name, bool keep_dir, const char *shown)
{
        struct stat st;
        int r;

        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT
                           ? 0
                           : cs_error_set(x->err, errno, "%s: stat `%s`", x->c->what, shown);
        if (S_ISDIR(st.st_mode) && keep_dir)
                return 1;
        r = cs_remove_at(dfd, name, x->err);
        return r < 0 ? cs_error_wrap(x->err, "%s: replace `%s`", x->c->what, shown) : 0;
}

/* The directory name in dfd (whose path in the root is full), opened O_RDONLY: an existing
 * one is kept, a symlink taken when it leads to a directory inside the root (as /lib ->
 * usr/lib), anything else replaced by a new directory (mode, owner: the copy's). */
int copy_dest_dir(struct copy_ctx *x, int dfd, const char *name, const char *full, mode_t mode,
                  uid_t uid, gid_t gid, bool *ret_made)
{
        int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        int r;

        *ret_made = false;
        if (fd >= 0)
                return fd;
        if (errno != ENOENT) {
                if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
                        fd = cs_open_in_root(x->root_fd, full, O_RDONLY | O_DIRECTORY);
                        if (fd >= 0)
                                return fd;
                }
                r = copy_clear_at(x, dfd, name, false, full);
                if (r < 0)
                        return r;
        }
        if (mkdirat(dfd, name, 0700) < 0)
                return cs_error_set(x->err, errno, "%s: create the directory `%s`", x->c->what,
                                    full);
        fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return cs_error_set(x->err, errno, "%s: open `%s`", x->c->what, full);
        *ret_made = true;
        r = copy_set_attrs(x, fd, mode, NULL, uid, gid, full);
        if (r < 0) {
                close(fd);
                return r;
        }
        return fd;
}

/* The absolute destination path split in components ("" for /) and opened: missing
 * directories are made 0755, the last with the copy's owner when last_owned, the others
 * 0:0. */
int copy_dest_open_dirs(struct copy_ctx *x, const char *path, bool last_owned)
{
        _cleanup_close_ int cur = cs_open_in_root(x->root_fd, "/", O_RDONLY | O_DIRECTORY);
        const char *p = path;
        uid_t uid = x->uid;
        gid_t gid = x->gid;

        if (cur < 0)
                return cs_error_set(x->err, errno, "%s: open the root", x->c->what);
        while (*p == '/')
                p++;
        while (*p) {
                const char *end = strchrnul(p, '/');
                _cleanup_free_ char *comp = strndup(p, (size_t)(end - p));
                _cleanup_free_ char *full = strndup(path, (size_t)(end - path));
                bool made, last;
                int next;

                if (!comp || !full)
                        return cs_error_set(x->err, ENOMEM, "%s", x->c->what);
                while (*end == '/')
                        end++;
                last = !*end;
                next = cs_open_in_root(x->root_fd, full, O_RDONLY | O_DIRECTORY);
                if (next < 0 && errno == ENOENT) {
                        next = copy_dest_dir(x, cur, comp, full, 0755, last && last_owned ? uid : 0,
                                             last && last_owned ? gid : 0, &made);
                        if (next < 0)
                                return next;
                } else if (next < 0) {
                        char shown[256];

                        layer_sanitize(full, shown, sizeof(shown));
                        return cs_error_set(x->err, errno,
                                            "%s: destination `%s` cannot be a directory",
                                            x->c->what, shown);
                }
                close(cur);
                cur = next;
                p = end;
        }
        return cs_take_fd(&cur);
}

/* Whether a destination word names a directory: a trailing '/' or a last `.`/`..`. */
bool copy_dest_is_dir(const char *d)
{
        size_t n = strlen(d);
        const char *last = strrchr(d, '/');

        last = last ? last + 1 : d;
        return n == 0 || d[n - 1] == '/' || strcmp(last, ".") == 0 || strcmp(last, "..") == 0;
}
