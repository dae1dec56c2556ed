/* A build step's overlay upper dir made a layer of the store (layer.h): the sandbox's own
 * mountpoints dropped, the overlay's bookkeeping xattrs removed, owners recorded in the
 * metadata file and the tree given to the caller, and the diff_id taken from the layer's tar
 * form streamed into SHA-256 (nothing written).
 *
 * The tar form: pax (restricted: ustar headers, pax records only where ustar cannot say
 * it), directories before their contents and siblings in byte order, mtimes in whole
 * seconds, no atime/ctime, no user or group names; the xattrs the step left (not the
 * overlay's, nor the host's SELinux label) sorted by name; a whiteout (0/0 character
 * device) is an empty `.wh.NAME` file of mode 0 owned by 0:0, an opaque directory has a
 * `.wh..wh..opq` entry first. Files that are hard links of each other are one file and
 * hard-link entries to its first name. */
#include "build-private.h"
#include "../oci/digest.h"
#include "../layer/layer.h"

#include "../../common/cleanup.h"
#include "../../common/error.h"
#include "../../common/resolve.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#define COMMIT_BUF (256u << 10) /* file data read at a time */

#define XATTR_LIST_MAX_LEN  65536
#define XATTR_VALUE_MAX_LEN 65536

struct link_rec {
        dev_t dev;
        ino_t ino;
        char *path;
};

struct commit_ctx {
        const int *lowers;
        size_t n_lowers;
        FILE *meta;
        EVP_MD_CTX *md;
        struct archive *a;
        struct archive_entry *e;
        struct layer_stats stats;
        struct link_rec *links; /* files with more than one name, by inode (open addressing) */
        size_t links_cap, n_links;
        char *buf;
        build_tar_tap tap;
        void *tap_opaque;
        struct cs_error *err;
        uid_t uid; /* the ids the caller has in this namespace: the tree goes back to them */
        gid_t gid;
        /* The lower layers' ownership records (each lower's layer dir is the parent of its
         * tree), for the directories a step only copied up; NULL without them. */
        struct layer_tree *lt;
        int *lt_dirs;
        size_t n_lt_dirs;
        uint32_t given_max; /* build_layer_commit's */
};

static la_ssize_t tar_sink(struct archive *a, void *opaque, const void *buf, size_t len)
{
        struct commit_ctx *x = opaque;

        (void)a;
        EVP_DigestUpdate(x->md, buf, len);
        if (x->tap)
                x->tap(x->tap_opaque, buf, len);
        return (la_ssize_t)len;
}

/* Whether an xattr belongs in a layer: not the overlay's bookkeeping, nor the host's
 * SELinux label (set on whatever the step created or copied up, and not the image's). */
static bool layer_xattr(const char *name)
{
        return strncmp(name, "user.overlay.", 13) != 0 && strcmp(name, "security.selinux") != 0;
}

static bool is_opaque(int fd)
{
        char v[2];

        return fgetxattr(fd, "user.overlay.opaque", v, sizeof(v)) == 1 && v[0] == 'y';
}

static bool dir_is_empty(int fd)
{
        int dup_fd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_closedir_ DIR *d = dup_fd < 0 ? NULL : fdopendir(dup_fd);
        struct dirent *de;

        if (!d) {
                if (dup_fd >= 0)
                        close(dup_fd);
                return false;
        }
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
                        return false;
        return true;
}

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
static int drop_mountpoint(struct commit_ctx *x, int upper_fd, char *path)
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
                        if (fd < 0 || !dir_is_empty(fd) || is_opaque(fd))
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

/* The overlay's xattrs other than the opaque marker: bookkeeping of this mount (origin,
 * impure, redirect, metacopy), meaningless in a layer. */
static void strip_overlay_xattrs(struct commit_ctx *x, int fd)
{
        char *list = x->buf;
        ssize_t n = flistxattr(fd, list, XATTR_LIST_MAX_LEN);

        for (ssize_t i = 0; n > 0 && i < n; i += (ssize_t)strlen(list + i) + 1)
                if (strncmp(list + i, "user.overlay.", 13) == 0 &&
                    strcmp(list + i, "user.overlay.opaque") != 0)
                        (void)fremovexattr(fd, list + i);
}

static uint64_t link_hash(dev_t dev, ino_t ino)
{
        return ((uint64_t)ino * 0x9e3779b97f4a7c15ull) ^ (uint64_t)dev;
}

/* The first name of the file st (more than one name), or NULL after recording path as it. */
static const char *link_first(struct commit_ctx *x, const struct stat *st, const char *path)
{
        size_t i;

        if ((x->n_links + 1) * 2 > x->links_cap) {
                size_t ncap = x->links_cap ? x->links_cap * 2 : 256;
                struct link_rec *nl = calloc(ncap, sizeof(*nl));

                if (!nl)
                        return NULL; /* then a copy: still a correct layer */
                for (size_t j = 0; j < x->links_cap; j++) {
                        if (!x->links[j].path)
                                continue;
                        for (i = link_hash(x->links[j].dev, x->links[j].ino) & (ncap - 1);
                             nl[i].path; i = (i + 1) & (ncap - 1))
                                ;
                        nl[i] = x->links[j];
                }
                free(x->links);
                x->links = nl;
                x->links_cap = ncap;
        }
        for (i = link_hash(st->st_dev, st->st_ino) & (x->links_cap - 1); x->links[i].path;
             i = (i + 1) & (x->links_cap - 1))
                if (x->links[i].dev == st->st_dev && x->links[i].ino == st->st_ino)
                        return x->links[i].path;
        x->links[i] = (struct link_rec){st->st_dev, st->st_ino, strdup(path)};
        if (x->links[i].path)
                x->n_links++;
        return NULL;
}

static int name_ptr_cmp(const void *a, const void *b)
{
        return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The xattrs a step left on fd (file capabilities, ACLs, user.*; not the overlay's own),
 * sorted by name, into the tar entry: they are part of the layer, so of its diff_id. */
static int tar_xattrs(struct commit_ctx *x, int fd, const char *path)
{
        _cleanup_free_ char *list = malloc(XATTR_LIST_MAX_LEN);
        _cleanup_free_ char *value = malloc(XATTR_VALUE_MAX_LEN);
        _cleanup_free_ const char **names = NULL;
        ssize_t n = list ? flistxattr(fd, list, XATTR_LIST_MAX_LEN) : -1;
        size_t count = 0;

        if (!list || !value)
                return cs_error_set(x->err, ENOMEM, "xattrs of `%s`", path);
        if (n < 0)
                return errno == ENOTSUP ? 0 : cs_error_set(x->err, errno, "xattrs of `%s`", path);
        for (ssize_t i = 0; i < n; i += (ssize_t)strlen(list + i) + 1)
                count++;
        names = calloc(count + 1, sizeof(*names));
        if (!names)
                return cs_error_set(x->err, ENOMEM, "xattrs of `%s`", path);
        count = 0;
        for (ssize_t i = 0; i < n; i += (ssize_t)strlen(list + i) + 1)
                if (layer_xattr(list + i))
                        names[count++] = list + i;
        qsort(names, count, sizeof(*names), name_ptr_cmp);
        for (size_t i = 0; i < count; i++) {
                ssize_t len = fgetxattr(fd, names[i], value, XATTR_VALUE_MAX_LEN);

                if (len < 0)
                        return cs_error_set(x->err, errno, "xattr %s of `%s`", names[i], path);
                archive_entry_xattr_add_entry(x->e, names[i], value, (size_t)len);
        }
        return 0;
}

static int tar_header(struct commit_ctx *x, const char *path, mode_t mode, uid_t uid, gid_t gid,
                      time_t mtime, int64_t size, const char *symlink, const char *hardlink,
                      int xattr_fd)
{
        archive_entry_clear(x->e);
        if (xattr_fd >= 0 && tar_xattrs(x, xattr_fd, path) < 0)
                return -1;
        archive_entry_set_pathname(x->e, path);
        archive_entry_set_mode(x->e, mode);
        archive_entry_set_uid(x->e, uid);
        archive_entry_set_gid(x->e, gid);
        archive_entry_set_mtime(x->e, mtime, 0);
        archive_entry_set_size(x->e, size);
        if (symlink)
                archive_entry_set_symlink(x->e, symlink);
        if (hardlink)
                archive_entry_set_hardlink(x->e, hardlink);
        if (archive_write_header(x->a, x->e) < ARCHIVE_WARN)
                return cs_error_setx(x->err, EIO, "the layer's tar, at `%s`: %s", path,
                                     archive_error_string(x->a));
        return 0;
}

static int tar_data(struct commit_ctx *x, int fd, int64_t size, const char *shown)
{
        for (int64_t left = size; left > 0;) {
                ssize_t n = read(fd, x->buf, left < COMMIT_BUF ? (size_t)left : COMMIT_BUF);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return cs_error_set(x->err, n < 0 ? errno : EIO, "read `%s`", shown);
                if (archive_write_data(x->a, x->buf, (size_t)n) < 0)
                        return cs_error_setx(x->err, EIO, "the layer's tar, at `%s`: %s", shown,
                                             archive_error_string(x->a));
                left -= n;
        }
        return 0;
}

/* The record of path in the topmost lower layer, when it is a directory there. */
static bool lower_dir_record(struct commit_ctx *x, const char *path, uint32_t *mode, uint32_t *uid,
                             uint32_t *gid)
{
        return x->lt && strcmp(path, ".") != 0 &&
               layer_lowers_record(x->lt, path, mode, uid, gid) && S_ISDIR(*mode);
}

/* The owner path has in the layer. A directory the step only passed through was copied up
 * with the owner it has on disk (the caller's): it keeps the owner its layer recorded,
 * unless the step was given that owner before it ran (then the disk says what it left). */
static void entry_owner(struct commit_ctx *x, const char *path, const struct stat *st,
                        uid_t *ret_uid, gid_t *ret_gid)
{
        uint32_t lmode, luid, lgid;

        *ret_uid = st->st_uid;
        *ret_gid = st->st_gid;
        if (S_ISDIR(st->st_mode) && st->st_uid == x->uid && st->st_gid == x->gid &&
            lower_dir_record(x, path, &lmode, &luid, &lgid) &&
            !((luid || lgid) && luid <= x->given_max && lgid <= x->given_max)) {
                *ret_uid = luid;
                *ret_gid = lgid;
        }
}

/* Whether fd carries an xattr that belongs in a layer. */
static bool has_layer_xattrs(struct commit_ctx *x, int fd)
{
        char *list = x->buf;
        ssize_t n = flistxattr(fd, list, XATTR_LIST_MAX_LEN);

        if (n < 0)
                return errno != ENOTSUP;
        for (ssize_t i = 0; i < n; i += (ssize_t)strlen(list + i) + 1)
                if (layer_xattr(list + i))
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
                        hides = dir < 0 || is_opaque(dir);
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
static int prune_copied_up(struct commit_ctx *x, int dfd, const char *rel, int depth, bool merged)
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
                r = prune_copied_up(x, fd, path, depth + 1, merged && !is_opaque(fd));
                /* xattrs: kept when either side has one (a change to them shows nowhere
                 * else) */
                if (r < 0 || !merged || fstat(fd, &st) < 0 || !dir_is_empty(fd) || is_opaque(fd) ||
                    has_layer_xattrs(x, fd) || !lower_dir_record(x, path, &lmode, &luid, &lgid) ||
                    !lower_dir(x, path, &lst, &lxattrs) || lxattrs)
                        continue;
                entry_owner(x, path, &st, &uid, &gid);
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

/* Record the entry (metadata line, tar entry), then give it to the caller (the ids the
 * caller has here), its mode put back (chown clears setuid and setgid). */
static int commit_entry(struct commit_ctx *x, int dfd, const char *name, int fd,
                        const struct stat *st, const char *path, const char *shown)
{
        char target[LAYER_DEFAULT_MAX_PATH + 1];
        const char *hardlink = NULL;
        int64_t size = S_ISREG(st->st_mode) ? st->st_size : 0;
        int r;

        uid_t uid;
        gid_t gid;

        entry_owner(x, path, st, &uid, &gid);
        r = layer_meta_line(x->meta, path, st->st_mode, uid, gid, x->err);
        if (r < 0)
                return r;
        x->stats.files++;
        if (S_ISLNK(st->st_mode)) {
                ssize_t n = readlinkat(dfd, name, target, sizeof(target));

                if (n < 0 || (size_t)n >= sizeof(target))
                        return cs_error_set(x->err, n < 0 ? errno : ENAMETOOLONG,
                                            "read the symlink `%s`", shown);
                target[n] = '\0';
        }
        if (S_ISREG(st->st_mode) && st->st_nlink > 1 && (hardlink = link_first(x, st, path)))
                size = 0;
        r = tar_header(x, path, st->st_mode, uid, gid, st->st_mtim.tv_sec, size,
                       S_ISLNK(st->st_mode) ? target : NULL, hardlink, hardlink ? -1 : fd);
        if (r == 0 && size > 0) {
                x->stats.size += (uint64_t)size;
                r = tar_data(x, fd, size, shown);
        }
        if (r < 0)
                return r;
        if (fchownat(dfd, name, x->uid, x->gid, AT_SYMLINK_NOFOLLOW) < 0)
                return cs_error_set(x->err, errno, "chown `%s` to the caller", shown);
        if (fd >= 0 && fchmod(fd, st->st_mode & 07777) < 0)
                return cs_error_set(x->err, errno, "chmod `%s`", shown);
        return 0;
}

static int commit_dir(struct commit_ctx *x, int dfd, const char *rel, int depth)
{
        char **names = NULL;
        size_t n = 0;
        int r;

        if (depth > LAYER_MAX_DEPTH)
                return cs_error_setx(x->err, ELOOP, "`%s` is more than %d directories deep", rel,
                                     LAYER_MAX_DEPTH);
        r = build_list_dir(dfd, BUILD_MAX_DIR_ENTRIES, &names, &n, rel, x->err);
        for (size_t i = 0; r == 0 && i < n; i++) {
                _cleanup_free_ char *path = NULL, *wh = NULL;
                _cleanup_close_ int fd = -1;
                char shown[256];
                struct stat st;

                if (asprintf(&path, "%s%s%s", rel, *rel ? "/" : "", names[i]) < 0) {
                        r = cs_error_set(x->err, ENOMEM, "commit the layer");
                        break;
                }
                layer_sanitize(path, shown, sizeof(shown));
                if (strlen(path) > LAYER_DEFAULT_MAX_PATH) {
                        r = cs_error_setx(x->err, ENAMETOOLONG,
                                          "`%s` has a name longer than %u bytes", shown,
                                          LAYER_DEFAULT_MAX_PATH);
                        break;
                }
                if (++x->stats.entries > LAYER_DEFAULT_MAX_ENTRIES) {
                        r = cs_error_setx(x->err, E2BIG, "the layer has more than %llu entries",
                                          (unsigned long long)LAYER_DEFAULT_MAX_ENTRIES);
                        break;
                }
                if (fstatat(dfd, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        r = cs_error_set(x->err, errno, "stat `%s`", shown);
                        break;
                }
                if (is_whiteout(&st)) {
                        /* what the step deleted: hidden in the lower layers */
                        if (asprintf(&wh, "%s%s.wh.%s", rel, *rel ? "/" : "", names[i]) < 0)
                                r = cs_error_set(x->err, ENOMEM, "commit the layer");
                        if (r == 0)
                                r = tar_header(x, wh, S_IFREG, 0, 0, st.st_mtim.tv_sec, 0, NULL,
                                               NULL, -1);
                        if (r == 0 &&
                            fchownat(dfd, names[i], x->uid, x->gid, AT_SYMLINK_NOFOLLOW) < 0)
                                r = cs_error_set(x->err, errno, "chown `%s`", shown);
                        continue;
                }
                if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) {
                        fd = openat(dfd, names[i],
                                    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC |
                                        (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0));
                        if (fd < 0) {
                                r = cs_error_set(x->err, errno, "open `%s`", shown);
                                break;
                        }
                        strip_overlay_xattrs(x, fd);
                }
                r = commit_entry(x, dfd, names[i], fd, &st, path, shown);
                if (r == 0 && S_ISDIR(st.st_mode)) {
                        if (is_opaque(fd)) {
                                _cleanup_free_ char *opq = NULL;

                                if (asprintf(&opq, "%s/.wh..wh..opq", path) < 0)
                                        r = cs_error_set(x->err, ENOMEM, "commit the layer");
                                else
                                        r = tar_header(x, opq, S_IFREG, 0, 0, st.st_mtim.tv_sec, 0,
                                                       NULL, NULL, -1);
                        }
                        if (r == 0)
                                r = commit_dir(x, fd, path, depth + 1);
                }
        }
        build_names_free(names, n);
        return r;
}

/* The lower layers' ownership tables, when their trees sit in layer dirs of the store. */
static void lowers_records(struct commit_ctx *x)
{
        /* only ownership tables: no stream is read against these limits */
        struct layer_limits lim = LAYER_LIMITS_DEFAULT;
        /* Dropped: without the tables, copied-up directories keep their owner on disk. */
        struct cs_error ignored;

        if (!x->n_lowers || !(x->lt_dirs = calloc(x->n_lowers, sizeof(int))))
                return;
        for (size_t k = 0; k < x->n_lowers; k++) {
                x->lt_dirs[k] = openat(x->lowers[k], "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (x->lt_dirs[k] < 0)
                        break;
                x->n_lt_dirs++;
        }
        if (x->n_lt_dirs != x->n_lowers || layer_tree_new(x->lowers[0], &lim, &x->lt, &ignored) < 0)
                return;
        if (layer_tree_set_lowers(x->lt, x->lt_dirs, x->n_lt_dirs, &ignored) < 0) {
                layer_tree_free(x->lt);
                x->lt = NULL;
        }
}

static void lowers_records_free(struct commit_ctx *x)
{
        layer_tree_free(x->lt);
        for (size_t k = 0; k < x->n_lt_dirs; k++)
                close(x->lt_dirs[k]);
        free(x->lt_dirs);
}

int build_layer_commit(int upper_fd, const int *lower_fds, size_t n_lowers,
                       const char *const *mountpoints, size_t n_mountpoints, uint32_t given_max,
                       int meta_fd, unsigned char ret_diff_id[32], struct layer_stats *ret_stats,
                       bool *ret_empty, struct cs_error *err)
{
        return build_layer_commit_tap(upper_fd, lower_fds, n_lowers, mountpoints, n_mountpoints,
                                      given_max, meta_fd, NULL, NULL, ret_diff_id, ret_stats,
                                      ret_empty, err);
}

int build_layer_commit_tap(int upper_fd, const int *lower_fds, size_t n_lowers,
                           const char *const *mountpoints, size_t n_mountpoints, uint32_t given_max,
                           int meta_fd, build_tar_tap tap, void *opaque,
                           unsigned char ret_diff_id[32], struct layer_stats *ret_stats,
                           bool *ret_empty, struct cs_error *err)
{
        struct commit_ctx x = {.uid = geteuid(),
                               .gid = getegid(),
                               .lowers = lower_fds,
                               .n_lowers = n_lowers,
                               .given_max = given_max,
                               .tap = tap,
                               .tap_opaque = opaque,
                               .err = err};
        _cleanup_close_ int root = -1;
        struct stat st;
        bool empty = false;
        int r = 0, fd;

        root = openat(upper_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return cs_error_set(err, errno, "open the step's upper dir");
        for (size_t i = 0; i < n_mountpoints; i++) {
                _cleanup_free_ char *p = NULL;
                const char *m = mountpoints[i];

                while (*m == '/')
                        m++;
                r = layer_path_normalize(*m ? m : ".", LAYER_DEFAULT_MAX_PATH, &p, err);
                if (r < 0)
                        return cs_error_wrap(err, "the sandbox's mountpoint `%s`", mountpoints[i]);
                r = drop_mountpoint(&x, root, p);
                if (r < 0)
                        return r;
        }

        lowers_records(&x);
        x.buf = malloc(COMMIT_BUF > XATTR_LIST_MAX_LEN ? COMMIT_BUF : XATTR_LIST_MAX_LEN);
        if (x.buf && x.lt) {
                r = prune_copied_up(&x, root, "", 0, !is_opaque(root));
                if (r < 0)
                        goto out;
        }
        x.md = digest_new();
        x.a = archive_write_new();
        x.e = archive_entry_new();
        fd = dup(meta_fd);
        x.meta = fd < 0 ? NULL : fdopen(fd, "w");
        if (!x.meta && fd >= 0)
                close(fd);
        if (!x.buf || !x.md || !x.a || !x.e || !x.meta) {
                r = cs_error_set(err, x.meta ? ENOMEM : errno, "commit the layer");
                goto out;
        }
        if (archive_write_set_format_pax_restricted(x.a) != ARCHIVE_OK ||
            archive_write_add_filter_none(x.a) != ARCHIVE_OK ||
            archive_write_set_bytes_in_last_block(x.a, 1) != ARCHIVE_OK ||
            archive_write_open(x.a, &x, NULL, tar_sink, NULL) != ARCHIVE_OK) {
                r = cs_error_setx(err, EIO, "commit the layer: the tar writer: %s",
                                  archive_error_string(x.a));
                goto out;
        }
        if (fstat(root, &st) < 0) {
                r = cs_error_set(err, errno, "stat the step's upper dir");
                goto out;
        }
        strip_overlay_xattrs(&x, root);
        r = layer_meta_line(x.meta, ".", st.st_mode, st.st_uid, st.st_gid, err);
        if (r == 0 && is_opaque(root))
                r = tar_header(&x, ".wh..wh..opq", S_IFREG, 0, 0, st.st_mtim.tv_sec, 0, NULL, NULL,
                               -1);
        if (r == 0)
                r = commit_dir(&x, root, "", 0);
        if (r == 0 && (fchown(root, x.uid, x.gid) < 0 || fchmod(root, st.st_mode & 07777) < 0))
                r = cs_error_set(err, errno, "chown the step's upper dir to the caller");
        if (r == 0 && archive_write_close(x.a) != ARCHIVE_OK)
                r = cs_error_setx(err, EIO, "commit the layer: the tar writer: %s",
                                  archive_error_string(x.a));
        if (r == 0 && fflush(x.meta) != 0)
                r = cs_error_set(err, errno, "write the layer's metadata");
        if (r == 0) {
                empty = dir_is_empty(root) && !is_opaque(root);
                digest_end(x.md, ret_diff_id);
                *ret_stats = x.stats;
                *ret_empty = empty;
        }
out:
        if (x.meta && fclose(x.meta) != 0 && r == 0)
                r = cs_error_set(err, errno, "write the layer's metadata");
        if (x.a)
                archive_write_free(x.a);
        archive_entry_free(x.e);
        EVP_MD_CTX_free(x.md);
        for (size_t i = 0; i < x.links_cap; i++)
                free(x.links[i].path);
        free(x.links);
        free(x.buf);
        lowers_records_free(&x);
        return r;
}
