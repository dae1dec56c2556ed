/* Destinations inside the new root: resolved in it (openat2 RESOLVE_IN_ROOT, or the walking
 * fallback), a link in the spec's own destinations followed as text, and a missing one
 * created, never on a host filesystem: on a scratch layer, or over a cover (mount_cover.c). */
#include "mounts_internal.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"
#include "../common/resolve.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

static int dest_open_at_depth(struct mnt_state *st, const char *dest, enum want want, bool optional,
                              int *ret_fd, int depth, struct cs_error *err);

static bool scratch_has(struct mnt_state *st, int fd)
{
        uint64_t id = 0;
        struct cs_error unknown;

        if (mnt_mount_id(fd, &id, &unknown) < 0)
                return false;
        for (size_t i = 0; i < st->n_scratch; i++)
                if (st->scratch[i] == id)
                        return true;
        return false;
}

/* Where a symlink at dest points, as a path inside the root: relative targets against
 * dest's directory, ".." stopping at / as RESOLVE_IN_ROOT does. */
int mnt_symlink_dest(const char *dest, const char *target, char *out, size_t size)
{
        char joined[2 * SPEC_PATH_MAX + 2];
        size_t o = 0;
        const char *p;

        if (target[0] == '/') {
                snprintf(joined, sizeof(joined), "%s", target);
        } else {
                const char *slash = strrchr(dest, '/');

                snprintf(joined, sizeof(joined), "%.*s/%s", (int)(slash - dest), dest, target);
        }
        out[0] = '\0';
        for (p = joined; *p;) {
                const char *c;
                size_t n;

                while (*p == '/')
                        p++;
                c = p;
                while (*p && *p != '/')
                        p++;
                n = (size_t)(p - c);
                if (n == 0 || (n == 1 && c[0] == '.'))
                        continue;
                if (n == 2 && c[0] == '.' && c[1] == '.') {
                        while (o > 0 && out[o - 1] != '/')
                                o--;
                        if (o > 0)
                                o--;
                        out[o] = '\0';
                        continue;
                }
                if (o + 1 + n + 1 > size)
                        return -ENAMETOOLONG;
                out[o++] = '/';
                memcpy(out + o, c, n);
                o += n;
                out[o] = '\0';
        }
        if (o == 0)
                snprintf(out, size, "/");
        return 0;
}

/* The root of the mount that fd is on: up through ".." until the mount changes. */
static int mount_root_of(int fd, struct cs_error *err)
{
        int cur = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        uint64_t id = 0, pid = 0;
        int r;

        if (cur < 0)
                return cs_error_set(err, errno, "dup");
        r = mnt_mount_id(cur, &id, err);
        for (int depth = 0; r >= 0 && depth < SPEC_PATH_MAX / 2; depth++) {
                struct stat a, b;
                int up = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);

                if (up < 0) {
                        r = cs_error_set(err, errno, "open a directory's parent");
                        break;
                }
                if (mnt_mount_id(up, &pid, err) < 0 || pid != id ||
                    (fstat(up, &a) == 0 && fstat(cur, &b) == 0 && a.st_ino == b.st_ino &&
                     a.st_dev == b.st_dev)) {
                        close(up);
                        return cur;
                }
                close(cur);
                cur = up;
        }
        close(cur);
        return r < 0 ? r : cs_error_setx(err, ELOOP, "find the root of a directory's mount");
}

/* make_entry in a scratch layer; one of our read-only covers is made writable for it. */
static int make_scratch_entry(int parent, const char *name, enum make what, const char *target,
                              struct cs_error *err)
{
        struct mount_attr clr = {.attr_clr = MOUNT_ATTR_RDONLY};
        struct mount_attr set = {.attr_set = MOUNT_ATTR_RDONLY};
        _cleanup_close_ int root = -1;
        int r = mnt_make_entry(parent, name, what, target, err);

        if (r != -EROFS)
                return r;
        root = mount_root_of(parent, err);
        if (root < 0 || mount_setattr(root, "", AT_EMPTY_PATH, &clr, sizeof(clr)) < 0)
                return cs_error_set(err, EROFS, "create %s", name);
        r = mnt_make_entry(parent, name, what, target, err);
        if (mount_setattr(root, "", AT_EMPTY_PATH, &set, sizeof(set)) < 0 && r == 0)
                r = cs_error_set(err, errno, "make %s read-only again", name);
        return r;
}

/* Create name (a missing part of dest) in the directory *parent, never on a host
 * filesystem: directly in a scratch layer (a tmpfs, a rootfs's overlay, a cover); in a
 * read-only host directory, or a rootfs directory the sandbox's ids cannot write, inside a
 * cover of that one directory (cover_dir), which *parent names afterwards. A writable host
 * directory (a read-write bind) is an error: there the reference creates nothing either; so
 * is any directory that would need a cover when !may_cover (EROFS). */
int mnt_create_entry(struct mnt_state *st, int *parent, const char *name, enum make what,
                     const char *target, bool may_cover, const char *dest, struct cs_error *err)
{
        struct statvfs sv;
        int r, fd = -1;

        if (scratch_has(st, *parent)) {
                r = make_scratch_entry(*parent, name, what, target, err);
                if (r == 0)
                        return 0;
                if (r != -EACCES && r != -EPERM && r != -EOVERFLOW)
                        return cs_error_set(err, -r, "%s: create %s", dest, name);
                if (!may_cover)
                        return cs_error_set(err, EROFS, "%s: create %s", dest, name);
        } else if (fstatvfs(*parent, &sv) < 0) {
                return cs_error_set(err, errno, "%s: stat its parent directory", dest);
        } else if (!(sv.f_flag & ST_RDONLY) || !may_cover) {
                return cs_error_setx(err, EROFS,
                                     "%s: %s does not exist, and its directory is a writable "
                                     "host directory, where csandbox never creates anything: "
                                     "create it on the host first, or choose a destination "
                                     "under a tmpfs",
                                     dest, name);
        }
        if (st->n_covers >= sizeof(st->cover_ro) / sizeof(st->cover_ro[0]))
                return cs_error_setx(err, E2BIG,
                                     "%s: more than %zu directories need a new mountpoint", dest,
                                     st->n_covers);
        r = mnt_cover_dir(st, *parent, dest, &fd, err);
        if (r < 0)
                return r;
        close(*parent);
        *parent = fd;
        r = mnt_make_entry(fd, name, what, target, err);
        if (r < 0)
                return cs_error_set(err, -r, "%s: create %s", dest, name);
        if (st->cover_ro[st->n_covers - 1])
                r = mnt_set_tree_attrs(fd, MOUNT_ATTR_RDONLY, false, err);
        if (r < 0)
                return cs_error_set(err, -r, "%s: make the cover of its directory read-only", dest);
        return 0;
}

/* Open the parent directory of dest inside the new root, creating missing directories in
 * scratch layers only; *ret_name points at dest's last component. */
static int dest_parent_once(struct mnt_state *st, const char *dest, bool may_cover, int *ret_fd,
                            const char **ret_name, char *rewrite, struct cs_error *err)
{
        _cleanup_close_ int cur = fcntl(st->root, F_DUPFD_CLOEXEC, 3);
        char prefix[SPEC_PATH_MAX];
        const char *p = dest + 1, *name;

        if (cur < 0)
                return cs_error_set(err, errno, "%s", dest);
        for (;;) {
                const char *slash = strchr(p, '/');
                size_t n;
                int fd;

                if (!slash)
                        break;
                n = (size_t)(slash - dest);
                memcpy(prefix, dest, n);
                prefix[n] = '\0';
                fd = mnt_openat2(st->root, prefix, O_PATH | O_CLOEXEC | O_DIRECTORY,
                                 RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS, err);
                if (fd == -ENOENT) {
                        char comp[256];
                        size_t cn = (size_t)(slash - p);
                        struct stat sb;

                        if (cn >= sizeof(comp))
                                return cs_error_setx(err, ENAMETOOLONG, "%s", dest);
                        memcpy(comp, p, cn);
                        comp[cn] = '\0';
                        if (fstatat(cur, comp, &sb, AT_SYMLINK_NOFOLLOW) == 0) {
                                /* A symlink to a path missing inside the root: go on along
                                 * what it points at (still resolved inside the root). */
                                char target[SPEC_PATH_MAX], head[SPEC_PATH_MAX];
                                ssize_t tn = S_ISLNK(sb.st_mode)
                                                 ? readlinkat(cur, comp, target, sizeof(target) - 1)
                                                 : -1;

                                if (tn <= 0)
                                        return cs_error_setx(err, ENOENT,
                                                             "%s: %s is not a directory inside "
                                                             "the sandbox root",
                                                             dest, prefix);
                                target[tn] = '\0';
                                if (mnt_symlink_dest(prefix, target, head, sizeof(head)) < 0 ||
                                    snprintf(rewrite, SPEC_PATH_MAX, "%s%s",
                                             strcmp(head, "/") == 0 ? "" : head,
                                             slash) >= SPEC_PATH_MAX)
                                        return cs_error_setx(err, ENAMETOOLONG,
                                                             "%s: symlink target too long", dest);
                                return 1;
                        }
                        if (mnt_create_entry(st, &cur, comp, MAKE_DIR, NULL, may_cover, dest, err) <
                            0)
                                return -err->err;
                        fd = openat(cur, comp, O_PATH | O_CLOEXEC | O_DIRECTORY | O_NOFOLLOW);
                        if (fd < 0)
                                fd = -errno;
                }
                if (fd < 0)
                        return cs_error_set(err, -fd, "%s: resolve %s inside the sandbox root",
                                            dest, prefix);
                close(cur);
                cur = fd;
                p = slash + 1;
        }
        name = p;
        *ret_name = name;
        *ret_fd = cs_take_fd(&cur);
        return 0;
}

/* dest_parent_once, following symlinks to missing paths (at most 8) inside the root. path
 * (SPEC_PATH_MAX bytes) holds the path that was finally resolved; *ret_name points into it. */
int mnt_dest_parent(struct mnt_state *st, const char *dest, bool may_cover, char *path, int *ret_fd,
                    const char **ret_name, struct cs_error *err)
{
        snprintf(path, SPEC_PATH_MAX, "%s", dest);
        for (int depth = 0;; depth++) {
                char next[SPEC_PATH_MAX];
                int r = dest_parent_once(st, path, may_cover, ret_fd, ret_name, next, err);

                if (r <= 0)
                        return r;
                if (depth >= 8)
                        return cs_error_setx(err, ELOOP,
                                             "%s: too many levels of symlinks inside the "
                                             "sandbox root",
                                             dest);
                snprintf(path, SPEC_PATH_MAX, "%s", next);
        }
}

int mnt_dest_open(struct mnt_state *st, const char *dest, enum want want, bool optional,
                  int *ret_fd, struct cs_error *err)
{
        return dest_open_at_depth(st, dest, want, optional, ret_fd, 0, err);
}

static int dest_open_at_depth(struct mnt_state *st, const char *dest, enum want want, bool optional,
                              int *ret_fd, int depth, struct cs_error *err)
{
        char path[SPEC_PATH_MAX];
        _cleanup_close_ int parent = -1;
        const char *name;
        struct stat sb;
        int fd, r;

        fd = mnt_openat2(st->root, dest, O_PATH | O_CLOEXEC,
                         RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS, err);
        if (fd >= 0) {
                *ret_fd = fd;
                return 0;
        }
        if (fd != -ENOENT)
                return cs_error_set(err, -fd, "%s: resolve it inside the sandbox root", dest);
        r = mnt_dest_parent(st, dest, !optional, path, &parent, &name, err);
        if (r < 0)
                return optional && err->err == EROFS ? (*ret_fd = -1, 0) : r;
        if (fstatat(parent, name, &sb, AT_SYMLINK_NOFOLLOW) == 0) {
                /* A dangling symlink (resolv.conf into an emptied /run): create what it
                 * points at, inside the root. */
                char target[SPEC_PATH_MAX], next[SPEC_PATH_MAX];
                ssize_t n =
                    S_ISLNK(sb.st_mode) ? readlinkat(parent, name, target, sizeof(target) - 1) : -1;

                if (n <= 0 || depth >= 8)
                        return cs_error_setx(err, ENOENT,
                                             "%s is a symlink to a missing path inside the "
                                             "sandbox root",
                                             dest);
                target[n] = '\0';
                if (mnt_symlink_dest(path, target, next, sizeof(next)) < 0)
                        return cs_error_setx(err, ENAMETOOLONG, "%s: symlink target too long",
                                             dest);
                return dest_open_at_depth(st, next, want, optional, ret_fd, depth + 1, err);
        }
        r = mnt_create_entry(st, &parent, name, want == WANT_DIR ? MAKE_DIR : MAKE_FILE, NULL,
                             !optional, dest, err);
        if (r < 0)
                return optional && err->err == EROFS ? (*ret_fd = -1, 0) : r;
        fd = openat(parent, name, O_PATH | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return cs_error_set(err, errno, "open %s", dest);
        *ret_fd = fd;
        return 0;
}
