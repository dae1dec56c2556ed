/* What a commit leaves out of the layer: the sandbox's own mountpoints and the directories
 * the step only copied up, each compared with the lower layers it came from. */
#include "build-commit-ctx.h"

#include "../../common/cleanup.h"
#include "../../common/error.h"
#include "../../common/resolve.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

/* What the topmost lower dir holding path has there (true, *st), without following links. */
static bool lower_stat(struct commit_ctx *x, const char *path, struct stat *st)
{
        for (size_t i = 0; i < x->n_lowers; i++) {
                _cleanup_close_ int fd = cs_open_beneath(x->lowers[i], path, O_PATH | O_NOFOLLOW);

                if (fd >= 0 && fstat(fd, st) == 0)
                        return true;
        }
        return false;
}

/* A RUN's mountpoint (path, normalized) dropped when the sandbox made it: an empty file or
 * directory no lower dir has; then its parents that hold nothing of the step's own. */
int commit_drop_mountpoint(struct commit_ctx *x, int upper_fd, char *path)
{
        bool first = true;

        while (*path) {
                _cleanup_close_ int pfd = -1, fd = -1;
                char *slash = strrchr(path, '/');
                const char *parent = slash ? path : "", *base = slash ? slash + 1 : path;
                struct stat st, lst;
                bool in_lower;

                if (slash)
                        *slash = '\0';
                pfd = cs_open_beneath(upper_fd, parent, O_RDONLY | O_DIRECTORY);
                if (pfd < 0 || fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        return 0; /* not in the upper dir (or behind a link): nothing to do */
                if (!S_ISDIR(st.st_mode) && !(first && S_ISREG(st.st_mode) && st.st_size == 0))
                        return 0;
                if (S_ISDIR(st.st_mode)) {
                        fd = openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (fd < 0 || !commit_dir_is_empty(fd) || commit_is_opaque(fd))
                                return 0;
                }
                if (slash)
                        *slash = '/';
                in_lower = lower_stat(x, path, &lst);
                if (slash)
                        *slash = '\0';
                /* the mountpoint itself only when the sandbox made it; a parent also when it
                 * is the lower's directory as it was (copied up for the mountpoint) */
                if (in_lower && (first || !S_ISDIR(lst.st_mode) ||
                                 (lst.st_mode & 07777) != (st.st_mode & 07777) ||
                                 lst.st_uid != st.st_uid || lst.st_gid != st.st_gid))
                        return 0;
                struct stat pst;
                bool have_pst = fstat(pfd, &pst) == 0;

                if (unlinkat(pfd, base, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) < 0) {
                        char shown[256];

                        layer_sanitize(base, shown, sizeof(shown));
                        return cs_error_set(x->err, errno, "remove the mountpoint `%s`", shown);
                }
                if (have_pst) {
                        struct timespec ts[2] = {{.tv_nsec = UTIME_OMIT}, pst.st_mtim};
                        (void)futimens(pfd, ts);
                }
                first = false;
                if (!slash)
                        break;
        }
        return 0;
}

/* The record of path in the topmost lower layer, when it is a directory there. */
bool commit_lower_dir_record(struct commit_ctx *x, const char *path, uint32_t *mode, uint32_t *uid,
                             uint32_t *gid)
{
        return x->lt && strcmp(path, ".") != 0 &&
               layer_lowers_record(x->lt, path, mode, uid, gid) && S_ISDIR(*mode);
}

/* Whether fd carries an xattr that belongs in a layer. */
static bool has_layer_xattrs(struct commit_ctx *x, int fd)
{
        char *list = x->buf;
        ssize_t n = flistxattr(fd, list, XATTR_LIST_MAX_LEN);

        if (n < 0)
                return errno != ENOTSUP;
        for (ssize_t i = 0; i < n; i += (ssize_t)strlen(list + i) + 1)
                if (commit_layer_xattr(list + i))
                        return true;
        return false;
}

/* Whether lower dir i hides path from the dirs below it: an ancestor of path is a whiteout
 * there, or an opaque directory (path itself is not in it). */
static bool lower_hides(struct commit_ctx *x, size_t i, const char *path)
{
        _cleanup_free_ char *p = strdup(path);
        bool hides = false, found = true;

        if (!p)
                return true;
        for (char *slash = strchr(p, '/'); slash && found && !hides;
             slash = strchr(slash + 1, '/')) {
                _cleanup_close_ int fd = -1, dir = -1;
                struct stat st;

                *slash = '\0';
                fd = cs_open_beneath(x->lowers[i], p, O_PATH | O_NOFOLLOW);
                found = fd >= 0; /* else this dir has nothing there */
                if (found && (fstat(fd, &st) < 0 || is_whiteout(&st) || !S_ISDIR(st.st_mode)))
                        hides = true;
                else if (found) {
                        dir = cs_open_beneath(x->lowers[i], p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
                        hides = dir < 0 || commit_is_opaque(dir);
                }
                *slash = '/';
        }
        return hides;
}

/* The directory path as the overlay's lower dirs show it (the topmost that has it, unless a
 * dir above hides it), when it is a directory: *st, and whether it carries xattrs that
 * belong in a layer. */
static bool lower_dir(struct commit_ctx *x, const char *path, struct stat *st, bool *xattrs)
{
        for (size_t i = 0; i < x->n_lowers; i++) {
                _cleanup_close_ int fd = cs_open_beneath(x->lowers[i], path, O_PATH | O_NOFOLLOW);
                _cleanup_close_ int dir = -1;

                if (fd < 0) {
                        if (lower_hides(x, i, path))
                                return false;
                        continue;
                }
                if (fstat(fd, st) < 0 || !S_ISDIR(st->st_mode))
                        return false;
                dir = cs_open_beneath(x->lowers[i], path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
                *xattrs = dir < 0 || has_layer_xattrs(x, dir);
                return true;
        }
        return false;
}

/* The directories under dfd (path rel) that the step only copied up, removed, deepest
 * first: what remains is what the step changed. dfd keeps its mtime. merged: dfd is merged
 * with the lower dirs (no opaque directory at or above it in the upper dir); below an
 * opaque one nothing is a copy-up. */
int commit_prune_copied_up(struct commit_ctx *x, int dfd, const char *rel, int depth, bool merged)
{
        char **names = NULL;
        size_t n = 0;
        struct stat pst;
        int r;

        if (depth > LAYER_MAX_DEPTH)
                return cs_error_setx(x->err, ELOOP, "`%s` is more than %d directories deep", rel,
                                     LAYER_MAX_DEPTH);
        if (fstat(dfd, &pst) < 0)
                return cs_error_set(x->err, errno, "stat `%s`", rel);
        r = build_list_dir(dfd, BUILD_MAX_DIR_ENTRIES, &names, &n, rel, x->err);
        for (size_t i = 0; r == 0 && i < n; i++) {
                _cleanup_free_ char *path = NULL;
                _cleanup_close_ int fd = -1;
                struct stat st, lst;
                uint32_t lmode, luid, lgid;
                bool lxattrs;
                uid_t uid;
                gid_t gid;

                if (asprintf(&path, "%s%s%s", rel, *rel ? "/" : "", names[i]) < 0) {
                        r = cs_error_set(x->err, ENOMEM, "commit the layer");
                        break;
                }
                fd = openat(dfd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0)
                        continue; /* not a directory */
                r = commit_prune_copied_up(x, fd, path, depth + 1, merged && !commit_is_opaque(fd));
                /* xattrs: kept when either side has one (a change to them shows nowhere
                 * else) */
                if (r < 0 || !merged || fstat(fd, &st) < 0 || !commit_dir_is_empty(fd) ||
                    commit_is_opaque(fd) || has_layer_xattrs(x, fd) ||
                    !commit_lower_dir_record(x, path, &lmode, &luid, &lgid) ||
                    !lower_dir(x, path, &lst, &lxattrs) || lxattrs)
                        continue;
                commit_entry_owner(x, path, &st, &uid, &gid);
                if ((st.st_mode & 07777) != (lmode & 07777) || uid != luid || gid != lgid ||
                    st.st_mtim.tv_sec != lst.st_mtim.tv_sec ||
                    st.st_mtim.tv_nsec != lst.st_mtim.tv_nsec)
                        continue;
                if (unlinkat(dfd, names[i], AT_REMOVEDIR) < 0) {
                        char shown[256];

                        layer_sanitize(path, shown, sizeof(shown));
                        r = cs_error_set(x->err, errno, "remove `%s`, copied up unchanged", shown);
                }
        }
        build_names_free(names, n);
        if (r == 0) {
                struct timespec ts[2] = {{.tv_nsec = UTIME_OMIT}, pst.st_mtim};

                (void)futimens(dfd, ts);
        }
        return r;
}

/* The owner path has in the layer. A directory the step only passed through was copied up
 * with the owner it has on disk (the caller's): it keeps the owner its layer recorded,
 * unless the step was given that owner before it ran (then the disk says what it left). */
void commit_entry_owner(struct commit_ctx *x, const char *path, const struct stat *st,
                        uid_t *ret_uid, gid_t *ret_gid)
{
        uint32_t lmode, luid, lgid;

        *ret_uid = st->st_uid;
        *ret_gid = st->st_gid;
        if (S_ISDIR(st->st_mode) && st->st_uid == x->uid && st->st_gid == x->gid &&
            commit_lower_dir_record(x, path, &lmode, &luid, &lgid) &&
            !((luid || lgid) && luid <= x->given_max && lgid <= x->given_max)) {
                *ret_uid = luid;
                *ret_gid = lgid;
        }
}
