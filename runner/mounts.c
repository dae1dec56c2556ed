/* The new root: assembled on a tmpfs-backed layer, every destination resolved inside it
 * (openat2 RESOLVE_IN_ROOT) and every mount attached through fds (open_tree, fsmount,
 * move_mount), with mount_setattr making read-only/nosuid/nodev cover whole subtrees. */
#include "runner.h"

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

/* Where the root is put together before pivot_root, in our own mount namespace. */
#define STAGE       "/tmp"
#define STAGE_ROOT  STAGE "/root"
#define STAGE_FILES STAGE "/files"

enum want { WANT_DIR, WANT_FILE, WANT_PARENT };

static const char *const dev_nodes[] = {"null", "zero", "full", "random", "urandom", "tty"};
#define N_DEV_NODES (sizeof(dev_nodes) / sizeof(dev_nodes[0]))

/* State of the one child that assembles the root; it lives until pivot_root. */
static struct {
        int *bind_trees; /* per spec mount: a detached clone of the source, or -1 */
        bool *bind_is_dir;
        int *bind_parents; /* a file source's directory, to clone it again if replaced */
        int host_view;     /* "/" of our copy of the caller's mount table, before staging */
        int host_root;     /* SPEC_ROOT_HOST: detached read-only clone of / */
        int root_dir;      /* SPEC_ROOT_DIR: O_PATH fd of the tree */
        int dev_trees[N_DEV_NODES];
        int root;             /* the assembled root, once attached */
        uint64_t scratch[64]; /* mount ids of layers that may hold new entries */
        size_t n_scratch;
        bool cover_ro[32]; /* per cover of one directory (cover_dir): read-only */
        size_t n_covers;
        bool root_ro; /* a rootfs that ends read-only */
        mode_t umask;
} st = {.host_root = -1, .root_dir = -1, .root = -1, .host_view = -1};

/* The two resolutions common/resolve.c offers (each with its walking fallback): inside a
 * root (RESOLVE_IN_ROOT, magic links refused), or beneath a dir with no link at all
 * (RESOLVE_BENEATH, which there always means RESOLVE_NO_SYMLINKS too). */
static int sys_openat2(int dirfd, const char *path, uint64_t flags, uint64_t resolve)
{
        if (resolve & RESOLVE_IN_ROOT)
                return cs_open_in_root(dirfd, path, (int)flags);
        if (resolve & RESOLVE_BENEATH)
                return cs_open_beneath(dirfd, path, (int)flags);
        errno = EINVAL;
        return -1;
}

static int mount_id_of(int fd, uint64_t *ret)
{
        struct statx sx;

        if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_MNT_ID, &sx) < 0)
                return -errno;
        if (!(sx.stx_mask & STATX_MNT_ID))
                return -ENOSYS;
        *ret = sx.stx_mnt_id;
        return 0;
}

static void scratch_add(int fd)
{
        uint64_t id;

        if (st.n_scratch < sizeof(st.scratch) / sizeof(st.scratch[0]) && mount_id_of(fd, &id) == 0)
                st.scratch[st.n_scratch++] = id;
}

static bool scratch_has(int fd)
{
        uint64_t id;

        if (mount_id_of(fd, &id) < 0)
                return false;
        for (size_t i = 0; i < st.n_scratch; i++)
                if (st.scratch[i] == id)
                        return true;
        return false;
}

static int set_tree_attrs(int tree, uint64_t attrs, bool recursive)
{
        struct mount_attr a = {.attr_set = attrs};

        return mount_setattr(tree, "", AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0), &a,
                             sizeof(a));
}

/* A detached recursive clone of a host path, with binds' attributes applied. */
static int clone_tree(int dirfd, const char *path, unsigned flags, bool recursive, uint64_t attrs)
{
        int tree =
            open_tree(dirfd, path,
                      OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | flags | (recursive ? AT_RECURSIVE : 0));

        if (tree < 0)
                return -errno;
        if (set_tree_attrs(tree, attrs, recursive) < 0) {
                int e = errno;

                close(tree);
                return -e;
        }
        return tree;
}

static bool same_object(const struct stat *a, const struct stat *b)
{
        return a->st_dev == b->st_dev && a->st_ino == b->st_ino &&
               (a->st_mode & S_IFMT) == (b->st_mode & S_IFMT);
}

/* The object the producer opened (want_fd), found again in our own mount namespace.
 * The kernel clones only mounts of the caller's mount namespace (open_tree on the
 * producer's fd, which belongs to the caller's, is EINVAL here), so the object is found
 * again in our copy of that table: by the name the kernel gave the fd (real), beneath dirfd
 * with no symlink and no "..", and proven to be the very inode that was opened and checked.
 * A different inode is refused (ESTALE): something swapped a component in between. One
 * exception keeps concurrent launches of one profile working: a regular file that was
 * unlinked since (a staged copy replaced by rename) is taken as its successor when that is
 * a regular file of the same owner. Sets errno on failure. */
static int source_find_again(int dirfd, const char *real, int want_fd, struct stat *ret_st)
{
        struct stat want;
        int fd;

        if (fstat(want_fd, &want) < 0)
                return -1;
        while (*real == '/')
                real++;
        fd = cs_open_beneath(dirfd, real, O_PATH);
        if (fd < 0 || fstat(fd, ret_st) < 0) {
                if (fd >= 0)
                        close(fd);
                return -1;
        }
        if (!same_object(&want, ret_st) &&
            !(S_ISREG(want.st_mode) && want.st_nlink == 0 && S_ISREG(ret_st->st_mode) &&
              ret_st->st_uid == want.st_uid)) {
                close(fd);
                errno = ESTALE;
                return -1;
        }
        return fd;
}

/* A detached recursive clone of bind source m, with the bind's attributes. *ret_tree -1: an
 * optional source that is gone. */
static int bind_source_clone(int dirfd, const char *path, const struct spec_mount *m, int *ret_tree,
                             bool *ret_is_dir, struct cs_error *err)
{
        _cleanup_close_ int src = -1;
        uint64_t attrs = MOUNT_ATTR_NOSUID | (m->flags & SPEC_MOUNT_DEVICES ? 0 : MOUNT_ATTR_NODEV);
        struct stat sb;
        int tree;

        *ret_tree = -1;
        src = source_find_again(dirfd, path, m->source_fd, &sb);
        if (src < 0 && errno == ENOENT && (m->flags & SPEC_MOUNT_OPTIONAL))
                return 0;
        if (src < 0 && errno == ESTALE)
                return cs_error_setx(err, ESTALE,
                                     "bind %s: the source %s was replaced between its check and "
                                     "the mount (something swapped it, or a directory on its "
                                     "way); refusing to mount what was not checked. Launch "
                                     "again",
                                     m->dest, m->source);
        if (src < 0)
                return cs_error_set(err, errno,
                                    "bind %s: find the source %s (%s) again in the sandbox's "
                                    "mount namespace (it changed since it was checked: launch "
                                    "again)",
                                    m->dest, m->source, m->source_real);
        if (m->flags & SPEC_MOUNT_RO)
                attrs |= MOUNT_ATTR_RDONLY;
        tree = clone_tree(src, "", AT_EMPTY_PATH, true, attrs);
        if (tree < 0)
                return cs_error_set(err, -tree, "bind %s: clone the mount of %s", m->dest,
                                    m->source);
        *ret_tree = tree;
        *ret_is_dir = S_ISDIR(sb.st_mode);
        return 0;
}

int mounts_prepare(const struct sandbox_spec *s, struct cs_error *err)
{
        st.umask = umask(0);
        umask(st.umask);
        /* Nothing we mount may travel back to the host's namespace. */
        if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
                return cs_error_set(err, errno, "make / a slave mount");

        st.bind_trees = calloc(s->n_mounts ? s->n_mounts : 1, sizeof(int));
        st.bind_is_dir = calloc(s->n_mounts ? s->n_mounts : 1, sizeof(bool));
        st.bind_parents = calloc(s->n_mounts ? s->n_mounts : 1, sizeof(int));
        if (!st.bind_trees || !st.bind_is_dir || !st.bind_parents)
                return cs_error_set(err, ENOMEM, "prepare mounts");
        /* Clone every source now: the staging tmpfs on /tmp would hide sources under it. */
        st.host_view = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (st.host_view < 0)
                return cs_error_set(err, errno, "open /");
        for (size_t i = 0; i < s->n_mounts; i++) {
                const struct spec_mount *m = &s->mounts[i];
                const char *slash;
                int r;

                st.bind_trees[i] = st.bind_parents[i] = -1;
                if (m->kind != SPEC_MOUNT_BIND)
                        continue;
                r = bind_source_clone(st.host_view, m->source_real, m, &st.bind_trees[i],
                                      &st.bind_is_dir[i], err);
                if (r < 0)
                        return r;
                slash = strrchr(m->source_real, '/');
                if (st.bind_trees[i] >= 0 && !st.bind_is_dir[i] && slash) {
                        _cleanup_free_ char *dir =
                            strndup(m->source_real, (size_t)(slash - m->source_real));

                        st.bind_parents[i] =
                            dir ? cs_open_beneath(st.host_view, dir[0] ? dir + 1 : "",
                                                  O_PATH | O_DIRECTORY)
                                : -1;
                }
        }
        if (s->root == SPEC_ROOT_DIR) {
                struct stat sb;

                st.root_dir = source_find_again(st.host_view, s->root_real, s->root_fd, &sb);
                if (st.root_dir < 0 || !S_ISDIR(sb.st_mode))
                        return cs_error_set(err, st.root_dir < 0 ? errno : ENOTDIR,
                                            "find the root %s (%s) again in the sandbox's mount "
                                            "namespace",
                                            s->root_path, s->root_real);
        }
        close(st.host_view);
        st.host_view = -1;
        for (size_t i = 0; i < N_DEV_NODES; i++) {
                char path[32];

                snprintf(path, sizeof(path), "/dev/%s", dev_nodes[i]);
                /* Device nodes need a mount without nodev. */
                st.dev_trees[i] = clone_tree(AT_FDCWD, path, 0, false, MOUNT_ATTR_NOSUID);
        }
        if (s->root == SPEC_ROOT_HOST) {
                st.host_root = clone_tree(AT_FDCWD, "/", 0, true,
                                          MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
                if (st.host_root < 0)
                        return cs_error_set(err, -st.host_root, "clone the host's root");
        }
        return 0;
}

static int mkdir_stage(const char *path, mode_t mode, struct cs_error *err)
{
        if (mkdir(path, mode) < 0)
                return cs_error_set(err, errno, "create %s", path);
        return 0;
}

/* Whether dest lies under the destination of an earlier mount that puts a fresh tree there
 * (a tmpfs, proc, dev, a directory bind): its mountpoint is made in that tree, not here. */
static bool under_earlier_tree(const struct sandbox_spec *s, size_t i)
{
        for (size_t j = 0; j < i; j++) {
                const struct spec_mount *m = &s->mounts[j];
                size_t l = strlen(m->dest);

                if (m->kind != SPEC_MOUNT_TMPFS && m->kind != SPEC_MOUNT_PROC &&
                    m->kind != SPEC_MOUNT_DEV &&
                    !(m->kind == SPEC_MOUNT_BIND && st.bind_trees[j] >= 0 && st.bind_is_dir[j]))
                        continue;
                if (strncmp(m->dest, s->mounts[i].dest, l) == 0 &&
                    (l == 1 || s->mounts[i].dest[l] == '/'))
                        return true;
        }
        return false;
}

/* Before the overlay of a --rootfs tree is mounted, make each missing destination in its
 * tmpfs upper layer, with the directories above it copied up as ours (their mode kept): the
 * tree may belong to ids the sandbox does not map (root-owned, a group outside the map),
 * where the overlay's merged view refuses new entries. Paths through a symlink of the tree
 * are left to dest_open, which resolves them inside the root. */
static int upper_prepare(const struct sandbox_spec *s, int upper, struct cs_error *err)
{
        for (size_t i = 0; i < s->n_mounts; i++) {
                const struct spec_mount *m = &s->mounts[i];
                bool dir = m->kind != SPEC_MOUNT_FILE && m->kind != SPEC_MOUNT_SYMLINK &&
                           !(m->kind == SPEC_MOUNT_BIND && !st.bind_is_dir[i]);
                char comps[SPEC_PATH_MAX], *save = NULL;
                const char *c, *missing = NULL;
                _cleanup_close_ int lo = fcntl(st.root_dir, F_DUPFD_CLOEXEC, 3);
                _cleanup_close_ int up = fcntl(upper, F_DUPFD_CLOEXEC, 3);
                struct stat sb;

                if ((m->kind == SPEC_MOUNT_BIND && st.bind_trees[i] < 0) ||
                    (m->flags & SPEC_MOUNT_OPTIONAL && m->kind != SPEC_MOUNT_FILE &&
                     m->kind != SPEC_MOUNT_BIND) ||
                    under_earlier_tree(s, i))
                        continue;
                if (lo < 0 || up < 0)
                        return cs_error_set(err, errno, "%s: prepare its mountpoint", m->dest);
                snprintf(comps, sizeof(comps), "%s", m->dest);
                /* Find the first missing component along real directories of the tree. */
                for (c = strtok_r(comps, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
                        bool last = save == NULL || *save == '\0';
                        int fd;

                        if (last && m->kind == SPEC_MOUNT_SYMLINK)
                                break;
                        if (fstatat(lo, c, &sb, AT_SYMLINK_NOFOLLOW) < 0) {
                                if (errno == ENOENT)
                                        missing = c;
                                break;
                        }
                        if (last || !S_ISDIR(sb.st_mode))
                                break;
                        fd = openat(lo, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (fd < 0)
                                break;
                        close(lo);
                        lo = fd;
                }
                if (!missing)
                        continue;
                /* Copy up the directories above it, then create the rest. */
                snprintf(comps, sizeof(comps), "%s", m->dest);
                close(lo);
                lo = fcntl(st.root_dir, F_DUPFD_CLOEXEC, 3);
                for (c = strtok_r(comps, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
                        bool last = save == NULL || *save == '\0';
                        bool found = lo >= 0 && fstatat(lo, c, &sb, AT_SYMLINK_NOFOLLOW) == 0;
                        mode_t mode = found ? sb.st_mode & 07777 : 0755;
                        int fd;

                        if (last && m->kind == SPEC_MOUNT_SYMLINK)
                                break;
                        if (last && !dir) {
                                fd = openat(up, c,
                                            O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC,
                                            0644);
                                if (fd < 0)
                                        return cs_error_set(err, errno, "%s: create it", m->dest);
                                close(fd);
                                break;
                        }
                        if (mkdirat(up, c, mode) < 0 && errno != EEXIST)
                                return cs_error_set(err, errno, "%s: create %s", m->dest, c);
                        if (fchmodat(up, c, mode, AT_SYMLINK_NOFOLLOW) < 0 && errno != ENOTSUP)
                                return cs_error_set(err, errno, "%s: chmod %s", m->dest, c);
                        fd = openat(up, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (fd < 0)
                                return cs_error_set(err, errno, "%s: open %s", m->dest, c);
                        close(up);
                        up = fd;
                        fd = found ? openat(lo, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                                   : -1;
                        if (lo >= 0)
                                close(lo);
                        lo = fd;
                }
        }
        return 0;
}

static int attach_root(const struct sandbox_spec *s, struct cs_error *err)
{
        char opts[256];
        int r;

        st.root_ro = s->root == SPEC_ROOT_DIR && !s->writable;
        if (mount("tmpfs", STAGE, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700") < 0)
                return cs_error_set(err, errno, "mount the staging tmpfs on " STAGE);
        r = mkdir_stage(STAGE_ROOT, 0755, err);
        if (r >= 0)
                r = mkdir_stage(STAGE_FILES, 0700, err);
        if (r < 0)
                return r;
        if (s->root == SPEC_ROOT_HOST) {
                if (move_mount(st.host_root, "", AT_FDCWD, STAGE_ROOT, MOVE_MOUNT_F_EMPTY_PATH) < 0)
                        return cs_error_set(err, errno, "attach the host's root");
                close(st.host_root);
                st.host_root = -1;
        } else {
                /* The tree is the lower layer: it is never written; new mountpoints and
                 * (with --writable) the payload's writes land in the tmpfs upper layer. */
                _cleanup_close_ int upper = -1;

                r = mkdir_stage(STAGE "/upper", 0755, err);
                if (r >= 0)
                        r = mkdir_stage(STAGE "/work", 0700, err);
                if (r < 0)
                        return r;
                upper = open(STAGE "/upper", O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (upper < 0)
                        return cs_error_set(err, errno, "open " STAGE "/upper");
                r = upper_prepare(s, upper, err);
                if (r < 0)
                        return r;
                snprintf(opts, sizeof(opts),
                         "lowerdir=/proc/self/fd/%d,upperdir=" STAGE "/upper,workdir=" STAGE
                         "/work,userxattr",
                         st.root_dir);
                if (mount("overlay", STAGE_ROOT, "overlay", MS_NOSUID | MS_NODEV, opts) < 0)
                        return cs_error_set(err, errno,
                                            "mount an overlay on the rootfs %s (overlayfs in a "
                                            "user namespace needs Linux 5.11 or later)",
                                            s->root_path);
                close(st.root_dir);
                st.root_dir = -1;
        }
        st.root = open(STAGE_ROOT, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (st.root < 0)
                return cs_error_set(err, errno, "open the new root");
        if (s->root == SPEC_ROOT_DIR)
                scratch_add(st.root);
        return 0;
}

/* Where a symlink at dest points, as a path inside the root: relative targets against
 * dest's directory, ".." stopping at / as RESOLVE_IN_ROOT does. */
static int symlink_dest(const char *dest, const char *target, char *out, size_t size)
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

static int attach(int tree, int dst, const char *what, const char *dest, struct cs_error *err);
static int new_fs(const char *type, const char *const *opts, uint64_t attrs, int *ret_fd);

/* A mount beneath a directory that an overlay is about to cover: a recursive clone of it,
 * and its path relative to that directory. */
struct submount {
        int tree;
        char *rel;
};

static void submounts_free(struct submount *subs, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                if (subs[i].tree >= 0)
                        close(subs[i].tree);
                free(subs[i].rel);
        }
        free(subs);
}

/* mountinfo writes space, tab, newline and backslash as \ooo. */
static void mountinfo_unescape(char *s)
{
        char *o = s;

        for (const char *p = s; *p;) {
                if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' &&
                    p[3] >= '0' && p[3] <= '7') {
                        *o++ = (char)(((p[1] - '0') << 6) | ((p[2] - '0') << 3) | (p[3] - '0'));
                        p += 4;
                } else {
                        *o++ = *p++;
                }
        }
        *o = '\0';
}

/* Whether rel lies under (or is) another entry's path: its clone already covers it. */
static bool submount_covered(const struct submount *subs, size_t n, const char *rel)
{
        for (size_t i = 0; i < n; i++) {
                size_t l = strlen(subs[i].rel);

                if (strncmp(subs[i].rel, rel, l) == 0 && (rel[l] == '\0' || rel[l] == '/'))
                        return true;
        }
        return false;
}

static int rel_shorter(const void *a, const void *b)
{
        size_t la = strlen(((const struct submount *)a)->rel);
        size_t lb = strlen(((const struct submount *)b)->rel);

        return la < lb ? -1 : la > lb;
}

/* Clone the outermost mounts beneath dir (an overlay over dir hides them; they are attached
 * again on the overlay). Resolved beneath dir without following a symlink. */
static int submounts_clone(int dir, struct submount **ret, size_t *ret_n, const char *dest,
                           struct cs_error *err)
{
        char self[64], abs[SPEC_PATH_MAX];
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_free_ char *line = NULL;
        struct submount *subs = NULL;
        size_t n = 0, kept = 0, cap = 0, len;
        ssize_t l;

        *ret = NULL;
        *ret_n = 0;
        snprintf(self, sizeof(self), "/proc/self/fd/%d", dir);
        l = readlink(self, abs, sizeof(abs) - 1);
        if (l <= 0)
                return cs_error_set(err, l < 0 ? errno : ENOENT, "%s: find the mounts beneath",
                                    dest);
        abs[l] = '\0';
        len = (size_t)l;
        f = fopen("/proc/self/mountinfo", "re");
        if (!f)
                return cs_error_set(err, errno, "%s: read /proc/self/mountinfo", dest);
        while (getline(&line, &cap, f) > 0) {
                char *save = NULL, *mp = strtok_r(line, " ", &save);
                struct submount *grown;

                for (int i = 0; mp && i < 4; i++)
                        mp = strtok_r(NULL, " ", &save);
                if (!mp)
                        continue;
                mountinfo_unescape(mp);
                if (strncmp(mp, abs, len) != 0 || mp[len] != '/' || !mp[len + 1])
                        continue;
                grown = realloc(subs, (n + 1) * sizeof(*subs));
                if (!grown || !(grown[n].rel = strdup(mp + len + 1))) {
                        submounts_free(grown ? grown : subs, n);
                        return cs_error_set(err, ENOMEM, "%s: list the mounts beneath", dest);
                }
                subs = grown;
                subs[n++].tree = -1;
        }
        /* mountinfo is not in tree order: parents (shorter paths) first, then keep only
         * the mounts no kept one already covers. */
        if (n)
                qsort(subs, n, sizeof(*subs), rel_shorter);
        for (size_t i = 0; i < n; i++) {
                struct statx sx;
                int fd;

                if (submount_covered(subs, kept, subs[i].rel))
                        continue;
                fd = sys_openat2(dir, subs[i].rel, O_PATH | O_NOFOLLOW | O_CLOEXEC,
                                 RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS);
                if (fd < 0)
                        continue; /* gone, or no longer reachable from dir: nothing to keep */
                if (statx(fd, "", AT_EMPTY_PATH, 0, &sx) < 0 ||
                    !(sx.stx_attributes & STATX_ATTR_MOUNT_ROOT)) {
                        close(fd);
                        continue;
                }
                subs[i].tree = open_tree(
                    fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
                close(fd);
                if (subs[i].tree < 0) {
                        int e = errno;

                        submounts_free(subs, n);
                        return cs_error_set(err, e, "%s: clone the mount beneath it on %s", dest,
                                            abs);
                }
                /* Swap it into the kept prefix. */
                struct submount t = subs[kept];
                subs[kept++] = subs[i];
                subs[i] = t;
        }
        for (size_t i = kept; i < n; i++)
                free(subs[i].rel);
        *ret = subs;
        *ret_n = kept;
        return 0;
}

enum make { MAKE_DIR, MAKE_FILE, MAKE_SYMLINK };

static int make_entry(int parent, const char *name, enum make what, const char *target)
{
        int f;

        switch (what) {
        case MAKE_DIR:
                return mkdirat(parent, name, 0755) < 0 && errno != EEXIST ? -errno : 0;
        case MAKE_SYMLINK:
                return symlinkat(target, parent, name) < 0 ? -errno : 0;
        default:
                f = openat(parent, name, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW,
                           0644);
                if (f < 0)
                        return -errno;
                close(f);
                return 0;
        }
}

/* The overlay over dir (see cover_dir), submounts attached again. -EINVAL untouched: the
 * kernel refuses dir as a lower layer (mounts from a more privileged namespace locked
 * beneath it, as container engines bind /etc/hosts; too deep a stack of overlays). */
static int overlay_dir(int dir, const struct stat *sb, uint64_t attrs, const char *dest,
                       int *ret_fd, struct cs_error *err)
{
        char lower[64], upper[64], work[64];
        const char *opts[] = {"lowerdir", lower,       "upperdir", upper, "workdir",
                              work,       "userxattr", NULL,       NULL,  NULL};
        static unsigned n; /* staging dirs made, refused overlays' included */
        struct submount *subs = NULL;
        size_t n_subs = 0;
        _cleanup_close_ int m = -1;
        int r;

        n++;
        snprintf(upper, sizeof(upper), STAGE "/ovl%u", n);
        r = mkdir_stage(upper, 0700, err);
        if (r < 0)
                return r;
        snprintf(upper, sizeof(upper), STAGE "/ovl%u/upper", n);
        snprintf(work, sizeof(work), STAGE "/ovl%u/work", n);
        snprintf(lower, sizeof(lower), "/proc/self/fd/%d", dir);
        r = mkdir_stage(upper, 0700, err);
        if (r >= 0)
                r = mkdir_stage(work, 0700, err);
        if (r < 0)
                return r;
        if (chmod(upper, sb->st_mode & 07777) < 0)
                return cs_error_set(err, errno, "chmod %s", upper);
        r = new_fs("overlay", opts, attrs, &m);
        if (r == -EINVAL)
                return r;
        if (r < 0)
                return cs_error_set(err, -r,
                                    "%s: mount an overlay over its parent directory to hold the "
                                    "new mountpoint in memory (overlayfs in a user namespace "
                                    "needs Linux 5.11 or later)",
                                    dest);
        r = submounts_clone(dir, &subs, &n_subs, dest, err);
        if (r < 0)
                return r;
        r = attach(m, dir, "an overlay", dest, err);
        for (size_t i = 0; r >= 0 && i < n_subs; i++) {
                _cleanup_close_ int at =
                    sys_openat2(m, subs[i].rel, O_PATH | O_NOFOLLOW | O_CLOEXEC,
                                RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);

                r = at < 0 ? cs_error_set(err, errno, "%s: reopen %s in the overlay", dest,
                                          subs[i].rel)
                           : attach(subs[i].tree, at, subs[i].rel, dest, err);
        }
        submounts_free(subs, n_subs);
        if (r < 0)
                return r;
        *ret_fd = cs_take_fd(&m);
        return 0;
}

/* A tmpfs over dir holding a copy of each of its entries: symlinks made again, everything
 * else (directories, files, devices, sockets) a recursive bind of the original, so locked
 * mounts beneath dir come along. For the directories overlayfs refuses. */
static int mirror_dir(int dir, const struct stat *sb, uint64_t attrs, const char *dest, int *ret_fd,
                      struct cs_error *err)
{
        char modestr[16];
        const char *opts[] = {"mode", modestr, NULL, NULL};
        _cleanup_closedir_ DIR *d = NULL;
        _cleanup_close_ int m = -1;
        struct dirent *e;
        int r, rd;

        snprintf(modestr, sizeof(modestr), "%04o", (unsigned)(sb->st_mode & 07777));
        r = new_fs("tmpfs", opts, attrs, &m);
        if (r < 0)
                return cs_error_set(err, -r, "%s: create a tmpfs over its parent directory", dest);
        rd = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        d = rd >= 0 ? fdopendir(rd) : NULL;
        if (!d) {
                r = errno;
                if (rd >= 0)
                        close(rd);
                return cs_error_set(err, r, "%s: list its parent directory to mirror it", dest);
        }
        r = attach(m, dir, "a tmpfs", dest, err);
        while (r >= 0 && (errno = 0, e = readdir(d))) {
                char target[SPEC_PATH_MAX];
                _cleanup_close_ int tree = -1;
                _cleanup_close_ int at = -1;
                struct stat esb;
                ssize_t n;

                if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                        continue;
                if (fstatat(dirfd(d), e->d_name, &esb, AT_SYMLINK_NOFOLLOW) < 0)
                        continue; /* gone since it was listed */
                if (S_ISLNK(esb.st_mode)) {
                        n = readlinkat(dirfd(d), e->d_name, target, sizeof(target) - 1);
                        if (n < 0)
                                continue;
                        target[n] = '\0';
                        r = make_entry(m, e->d_name, MAKE_SYMLINK, target);
                } else {
                        r = make_entry(m, e->d_name, S_ISDIR(esb.st_mode) ? MAKE_DIR : MAKE_FILE,
                                       NULL);
                        if (r == 0)
                                tree = open_tree(dirfd(d), e->d_name,
                                                 OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC |
                                                     AT_RECURSIVE | AT_SYMLINK_NOFOLLOW);
                        if (r == 0 && tree < 0)
                                r = -errno;
                        if (r == 0)
                                at = openat(m, e->d_name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
                        if (r == 0 && at < 0)
                                r = -errno;
                        if (r == 0) {
                                r = attach(tree, at, e->d_name, dest, err);
                                if (r < 0)
                                        return r;
                        }
                }
                if (r < 0)
                        return cs_error_set(err, -r, "%s: mirror %s of its parent directory", dest,
                                            e->d_name);
        }
        if (r < 0)
                return r;
        *ret_fd = cs_take_fd(&m);
        return 0;
}

/* Cover the directory dir so that a mountpoint can be created in it without writing the
 * host: an overlay whose lower layer is dir itself and whose upper layer lives on the
 * staging tmpfs (every entry of dir stays visible and live; mounts beneath are attached
 * again), or where the kernel refuses that, a tmpfs mirroring dir (mirror_dir). The cover's
 * root takes its owner from us and its mode from dir, so entries can be created even where
 * dir belongs to an id the sandbox does not map. It is as read-only as the mount of dir
 * (and as the root of a rootfs), except for a moment while create_entry adds to it.
 * *ret_fd: the cover's root, a scratch layer. */
static int cover_dir(int dir, const char *dest, int *ret_fd, struct cs_error *err)
{
        uint64_t attrs = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
        struct statvfs sv;
        struct stat sb, rb;
        int r;

        if (fstat(dir, &sb) < 0 || fstatvfs(dir, &sv) < 0)
                return cs_error_set(err, errno, "%s: stat its parent directory", dest);
        if (sv.f_flag & ST_NOEXEC)
                attrs |= MOUNT_ATTR_NOEXEC;
        if (sv.f_flag & ST_RDONLY || st.root_ro)
                attrs |= MOUNT_ATTR_RDONLY;
        /* The host's root itself (a top-level destination is missing): overlayfs refuses an
         * upper layer below its lower one, and a cover would leave st.root behind. */
        if (fstat(st.root, &rb) == 0 && rb.st_dev == sb.st_dev && rb.st_ino == sb.st_ino)
                return cs_error_setx(err, EROFS,
                                     "%s: a new top-level directory cannot be made over the "
                                     "host's root, which csandbox never writes: choose a "
                                     "destination inside an existing directory (for example "
                                     "under /mnt or /opt), or use --rootfs or an image",
                                     dest);
        r = overlay_dir(dir, &sb, attrs & ~(uint64_t)MOUNT_ATTR_RDONLY, dest, ret_fd, err);
        if (r == -EINVAL)
                r = mirror_dir(dir, &sb, attrs & ~(uint64_t)MOUNT_ATTR_RDONLY, dest, ret_fd, err);
        if (r < 0)
                return r;
        st.n_covers++;
        scratch_add(*ret_fd);
        st.cover_ro[st.n_covers - 1] = (attrs & MOUNT_ATTR_RDONLY) != 0;
        return 0;
}

/* The root of the mount that fd is on: up through ".." until the mount changes. */
static int mount_root_of(int fd)
{
        int cur = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        uint64_t id, pid;

        if (cur < 0 || mount_id_of(cur, &id) < 0)
                goto fail;
        for (int depth = 0; depth < SPEC_PATH_MAX / 2; depth++) {
                struct stat a, b;
                int up = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);

                if (up < 0)
                        goto fail;
                if (mount_id_of(up, &pid) < 0 || pid != id ||
                    (fstat(up, &a) == 0 && fstat(cur, &b) == 0 && a.st_ino == b.st_ino &&
                     a.st_dev == b.st_dev)) {
                        close(up);
                        return cur;
                }
                close(cur);
                cur = up;
        }
fail:
        if (cur >= 0)
                close(cur);
        return -1;
}

/* make_entry in a scratch layer; one of our read-only covers is made writable for it. */
static int make_scratch_entry(int parent, const char *name, enum make what, const char *target)
{
        struct mount_attr clr = {.attr_clr = MOUNT_ATTR_RDONLY};
        struct mount_attr set = {.attr_set = MOUNT_ATTR_RDONLY};
        _cleanup_close_ int root = -1;
        int r = make_entry(parent, name, what, target);

        if (r != -EROFS)
                return r;
        root = mount_root_of(parent);
        if (root < 0 || mount_setattr(root, "", AT_EMPTY_PATH, &clr, sizeof(clr)) < 0)
                return r;
        r = make_entry(parent, name, what, target);
        if (mount_setattr(root, "", AT_EMPTY_PATH, &set, sizeof(set)) < 0 && r == 0)
                r = -errno;
        return r;
}

/* Create name (a missing part of dest) in the directory *parent, never on a host
 * filesystem: directly in a scratch layer (a tmpfs, a rootfs's overlay, a cover); in a
 * read-only host directory, or a rootfs directory the sandbox's ids cannot write, inside a
 * cover of that one directory (cover_dir), which *parent names afterwards. A writable host
 * directory (a read-write bind) is an error: there the reference creates nothing either; so
 * is any directory that would need a cover when !may_cover (EROFS). */
static int create_entry(int *parent, const char *name, enum make what, const char *target,
                        bool may_cover, const char *dest, struct cs_error *err)
{
        struct statvfs sv;
        int r, fd = -1;

        if (scratch_has(*parent)) {
                r = make_scratch_entry(*parent, name, what, target);
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
        if (st.n_covers >= sizeof(st.cover_ro) / sizeof(st.cover_ro[0]))
                return cs_error_setx(err, E2BIG,
                                     "%s: more than %zu directories need a new mountpoint", dest,
                                     st.n_covers);
        r = cover_dir(*parent, dest, &fd, err);
        if (r < 0)
                return r;
        close(*parent);
        *parent = fd;
        r = make_entry(fd, name, what, target);
        if (r < 0)
                return cs_error_set(err, -r, "%s: create %s", dest, name);
        if (st.cover_ro[st.n_covers - 1] && set_tree_attrs(fd, MOUNT_ATTR_RDONLY, false) < 0)
                return cs_error_set(err, errno, "%s: make the cover of its directory read-only",
                                    dest);
        return 0;
}

/* Open the parent directory of dest inside the new root, creating missing directories in
 * scratch layers only; *ret_name points at dest's last component. */
static int dest_parent_once(const char *dest, bool may_cover, int *ret_fd, const char **ret_name,
                            char *rewrite, struct cs_error *err)
{
        _cleanup_close_ int cur = fcntl(st.root, F_DUPFD_CLOEXEC, 3);
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
                fd = sys_openat2(st.root, prefix, O_PATH | O_CLOEXEC | O_DIRECTORY,
                                 RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
                if (fd < 0 && errno == ENOENT) {
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
                                if (symlink_dest(prefix, target, head, sizeof(head)) < 0 ||
                                    snprintf(rewrite, SPEC_PATH_MAX, "%s%s",
                                             strcmp(head, "/") == 0 ? "" : head,
                                             slash) >= SPEC_PATH_MAX)
                                        return cs_error_setx(err, ENAMETOOLONG,
                                                             "%s: symlink target too long", dest);
                                return 1;
                        }
                        if (create_entry(&cur, comp, MAKE_DIR, NULL, may_cover, dest, err) < 0)
                                return -err->err;
                        fd = openat(cur, comp, O_PATH | O_CLOEXEC | O_DIRECTORY | O_NOFOLLOW);
                }
                if (fd < 0)
                        return cs_error_set(err, errno, "%s: resolve %s inside the sandbox root",
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
static int dest_parent(const char *dest, bool may_cover, char *path, int *ret_fd,
                       const char **ret_name, struct cs_error *err)
{
        snprintf(path, SPEC_PATH_MAX, "%s", dest);
        for (int depth = 0;; depth++) {
                char next[SPEC_PATH_MAX];
                int r = dest_parent_once(path, may_cover, ret_fd, ret_name, next, err);

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

/* Open dest inside the new root, creating it as a directory or an empty file when it is
 * missing (create_entry: never on a host filesystem). An optional one (a tmpfs hiding a
 * host directory) is skipped, *ret_fd = -1, where that would take an overlay. */
static int dest_open_at_depth(const char *dest, enum want want, bool optional, int *ret_fd,
                              int depth, struct cs_error *err);

static int dest_open(const char *dest, enum want want, bool optional, int *ret_fd,
                     struct cs_error *err)
{
        return dest_open_at_depth(dest, want, optional, ret_fd, 0, err);
}

static int dest_open_at_depth(const char *dest, enum want want, bool optional, int *ret_fd,
                              int depth, struct cs_error *err)
{
        char path[SPEC_PATH_MAX];
        _cleanup_close_ int parent = -1;
        const char *name;
        struct stat sb;
        int fd, r;

        fd =
            sys_openat2(st.root, dest, O_PATH | O_CLOEXEC, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
        if (fd >= 0) {
                *ret_fd = fd;
                return 0;
        }
        if (errno != ENOENT)
                return cs_error_set(err, errno, "%s: resolve it inside the sandbox root", dest);
        r = dest_parent(dest, !optional, path, &parent, &name, err);
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
                if (symlink_dest(path, target, next, sizeof(next)) < 0)
                        return cs_error_setx(err, ENAMETOOLONG, "%s: symlink target too long",
                                             dest);
                return dest_open_at_depth(next, want, optional, ret_fd, depth + 1, err);
        }
        r = create_entry(&parent, name, want == WANT_DIR ? MAKE_DIR : MAKE_FILE, NULL, !optional,
                         dest, err);
        if (r < 0)
                return optional && err->err == EROFS ? (*ret_fd = -1, 0) : r;
        fd = openat(parent, name, O_PATH | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return cs_error_set(err, errno, "open %s", dest);
        *ret_fd = fd;
        return 0;
}

static int attach(int tree, int dst, const char *what, const char *dest, struct cs_error *err)
{
        if (move_mount(tree, "", dst, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                return cs_error_set(err, errno, "mount %s on %s", what, dest);
        return 0;
}

/* A new filesystem instance as a detached mount. */
static int new_fs(const char *type, const char *const *opts, uint64_t attrs, int *ret_fd)
{
        _cleanup_close_ int fs = fsopen(type, FSOPEN_CLOEXEC);
        int m;

        if (fs < 0)
                return -errno;
        for (; opts && opts[0]; opts += 2)
                if (fsconfig(fs, opts[1] ? FSCONFIG_SET_STRING : FSCONFIG_SET_FLAG, opts[0],
                             opts[1], 0) < 0)
                        return -errno;
        if (fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return -errno;
        m = fsmount(fs, FSMOUNT_CLOEXEC, (unsigned)attrs);
        if (m < 0)
                return -errno;
        *ret_fd = m;
        return 0;
}

static int mount_tmpfs_at(int dst, mode_t mode, const char *dest, struct cs_error *err)
{
        char modestr[16];
        const char *opts[] = {"mode", modestr, NULL, NULL};
        _cleanup_close_ int m = -1;
        int r;

        snprintf(modestr, sizeof(modestr), "%04o", (unsigned)mode);
        r = new_fs("tmpfs", opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, &m);
        if (r < 0)
                return cs_error_set(err, -r, "create a tmpfs for %s", dest);
        scratch_add(m);
        return attach(m, dst, "a tmpfs", dest, err);
}

static int mount_proc_at(int dst, const char *dest, struct cs_error *err)
{
        static bool warned;
        _cleanup_close_ int m = -1;
        int r;

        r = new_fs("proc", NULL, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, &m);
        if (r == -EPERM) {
                /* The kernel refuses a fresh proc when the visible one has locked
                 * overmounts (container engines mask /proc this way). */
                m = clone_tree(AT_FDCWD, "/proc", 0, true,
                               MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                                   MOUNT_ATTR_NOEXEC);
                if (m < 0)
                        return cs_error_set(err, -m, "bind the existing /proc on %s", dest);
                if (!warned)
                        fprintf(stderr,
                                "csandbox: the kernel refused a fresh /proc (the outer /proc has "
                                "overmounts, as container engines make); binding the existing "
                                "/proc read-only instead, so it shows the outer pid "
                                "namespace\n");
                warned = true;
        } else if (r < 0) {
                return cs_error_set(err, -r, "mount proc on %s", dest);
        }
        return attach(m, dst, "proc", dest, err);
}

/* The host's /sys lists its interfaces and their MAC addresses (from which its IPv6
 * link-local addresses follow): a sysfs of the sandbox's own network namespace instead. The
 * kernel allows that only when the netns belongs to our user namespace and no outer mount
 * hides part of /sys (container engines mask some); where it is refused, for whatever
 * reason, the network directories are covered. */
static int mount_sysfs(struct cs_error *err)
{
        static const char *const net_dirs[] = {"/sys/class/net", "/sys/devices/virtual/net"};
        _cleanup_close_ int dst = -1, m = -1;
        int r;

        r = dest_open("/sys", WANT_DIR, true, &dst, err);
        if (r < 0 || dst < 0)
                return r;
        r = new_fs("sysfs", NULL,
                   MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
                   &m);
        if (r == 0)
                return attach(m, dst, "sysfs", "/sys", err);
        for (size_t i = 0; i < sizeof(net_dirs) / sizeof(net_dirs[0]); i++) {
                _cleanup_close_ int d = -1;

                r = dest_open(net_dirs[i], WANT_DIR, true, &d, err);
                if (r >= 0 && d >= 0)
                        r = mount_tmpfs_at(d, 0755, net_dirs[i], err);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int mount_dev_at(int dst, const char *dest, struct cs_error *err)
{
        static const char *const links[][2] = {{"fd", "/proc/self/fd"},
                                               {"stdin", "/proc/self/fd/0"},
                                               {"stdout", "/proc/self/fd/1"},
                                               {"stderr", "/proc/self/fd/2"},
                                               {"ptmx", "pts/ptmx"}};
        static const char *const pts_opts[] = {"newinstance", NULL,   "ptmxmode", "0666",
                                               "mode",        "0620", NULL,       NULL};
        _cleanup_close_ int dev = -1;
        _cleanup_close_ int pts = -1;
        _cleanup_close_ int m = -1;
        int r;

        r = mount_tmpfs_at(dst, 0755, dest, err);
        if (r < 0)
                return r;
        /* dst still names the covered directory; reopen through the path to get the tmpfs. */
        dev = sys_openat2(st.root, dest, O_PATH | O_DIRECTORY | O_CLOEXEC,
                          RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
        if (dev < 0)
                return cs_error_set(err, errno, "open %s", dest);
        for (size_t i = 0; i < N_DEV_NODES; i++) {
                int f, node;

                if (st.dev_trees[i] < 0)
                        continue;
                f = openat(dev, dev_nodes[i], O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0666);
                if (f < 0)
                        return cs_error_set(err, errno, "create %s/%s", dest, dev_nodes[i]);
                close(f);
                node = openat(dev, dev_nodes[i], O_PATH | O_CLOEXEC | O_NOFOLLOW);
                if (node < 0)
                        return cs_error_set(err, errno, "open %s/%s", dest, dev_nodes[i]);
                r = attach(st.dev_trees[i], node, dev_nodes[i], dest, err);
                close(node);
                if (r < 0)
                        return r;
                close(st.dev_trees[i]);
                st.dev_trees[i] = -1;
        }
        for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++)
                if (symlinkat(links[i][1], dev, links[i][0]) < 0)
                        return cs_error_set(err, errno, "create %s/%s", dest, links[i][0]);
        if (mkdirat(dev, "pts", 0755) < 0 || mkdirat(dev, "shm", 01777) < 0)
                return cs_error_set(err, errno, "create %s/pts and shm", dest);
        pts = openat(dev, "pts", O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (pts < 0)
                return cs_error_set(err, errno, "open %s/pts", dest);
        r = new_fs("devpts", pts_opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, &m);
        if (r < 0)
                return cs_error_set(err, -r, "mount devpts on %s/pts", dest);
        r = attach(m, pts, "devpts", dest, err);
        if (r < 0)
                return r;
        close(pts);
        pts = openat(dev, "shm", O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (pts < 0)
                return cs_error_set(err, errno, "open %s/shm", dest);
        return mount_tmpfs_at(pts, 01777, dest, err);
}

/* A file with content from memory: written to the staging tmpfs, bound read-only. */
static int mount_file_at(const struct spec_mount *m, int dst, struct cs_error *err)
{
        _cleanup_close_ int files = open(STAGE_FILES, O_PATH | O_DIRECTORY | O_CLOEXEC);
        _cleanup_close_ int f = -1;
        _cleanup_close_ int tree = -1;
        char name[32];

        snprintf(name, sizeof(name), "%zu", m->seq);
        if (files < 0)
                return cs_error_set(err, errno, "open " STAGE_FILES);
        f = openat(files, name, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, m->mode ? m->mode : 0444);
        if (f < 0 || cs_write_all(f, m->data, m->data_len) < 0)
                return cs_error_set(err, errno, "write the copy for %s", m->dest);
        tree = clone_tree(files, name, 0, false,
                          MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
        if (tree < 0)
                return cs_error_set(err, -tree, "clone the copy for %s", m->dest);
        return attach(tree, dst, "a file", m->dest, err);
}

static int make_symlink(const struct spec_mount *m, struct cs_error *err)
{
        char path[SPEC_PATH_MAX];
        _cleanup_close_ int parent = -1;
        const char *name;
        char cur[SPEC_PATH_MAX];
        ssize_t n;
        int r;

        r = dest_parent(m->dest, true, path, &parent, &name, err);
        if (r < 0)
                return r;
        n = readlinkat(parent, name, cur, sizeof(cur) - 1);
        if (n >= 0) {
                cur[n] = '\0';
                if (strcmp(cur, m->source) == 0)
                        return 0;
                return cs_error_setx(err, EEXIST, "--symlink %s: a different symlink is there",
                                     m->dest);
        }
        return create_entry(&parent, name, MAKE_SYMLINK, m->source, true, m->dest, err);
}

static int type_check(int dst, bool want_dir, const char *dest, const char *source,
                      struct cs_error *err)
{
        struct stat sb;

        if (fstat(dst, &sb) < 0)
                return cs_error_set(err, errno, "stat %s", dest);
        if (want_dir && !S_ISDIR(sb.st_mode))
                return cs_error_setx(err, ENOTDIR,
                                     "%s is not a directory inside the sandbox, but %s is", dest,
                                     source ? source : "the mount");
        if (!want_dir && S_ISDIR(sb.st_mode))
                return cs_error_setx(err, EISDIR,
                                     "%s is a directory inside the sandbox, but %s is a file", dest,
                                     source ? source : "the mount");
        return 0;
}

static int mount_one(const struct sandbox_spec *s, size_t i, struct cs_error *err)
{
        const struct spec_mount *m = &s->mounts[i];
        bool optional = (m->flags & SPEC_MOUNT_OPTIONAL) != 0;
        _cleanup_close_ int dst = -1;
        int r;

        switch (m->kind) {
        case SPEC_MOUNT_SYMLINK:
                return make_symlink(m, err);
        case SPEC_MOUNT_BIND:
                if (st.bind_trees[i] < 0)
                        return 0; /* an optional source that is missing */
                r = dest_open(m->dest, st.bind_is_dir[i] ? WANT_DIR : WANT_FILE, false, &dst, err);
                if (r < 0)
                        return r;
                r = type_check(dst, st.bind_is_dir[i], m->dest, m->source, err);
                if (r < 0)
                        return r;
                r = attach(st.bind_trees[i], dst, m->source, m->dest, err);
                /* A file replaced by rename since it was cloned (a concurrent launch
                 * regenerating a state copy) cannot be attached: take the new one. */
                for (int tries = 0;
                     r < 0 && err->err == ENOENT && st.bind_parents[i] >= 0 && tries < 3; tries++) {
                        const char *base = strrchr(m->source_real, '/') + 1;
                        bool is_dir = false;

                        close(st.bind_trees[i]);
                        r = bind_source_clone(st.bind_parents[i], base, m, &st.bind_trees[i],
                                              &is_dir, err);
                        if (r < 0 || st.bind_trees[i] < 0 || is_dir)
                                return r < 0 ? r
                                             : cs_error_setx(err, ENOENT, "%s is gone", m->source);
                        r = attach(st.bind_trees[i], dst, m->source, m->dest, err);
                }
                close(st.bind_trees[i]);
                st.bind_trees[i] = -1;
                return r;
        case SPEC_MOUNT_FILE:
                /* Always created (in memory where the directory is the host's): the
                 * optional flag of a file is about nothing but its source. */
                r = dest_open(m->dest, WANT_FILE, false, &dst, err);
                if (r < 0 || dst < 0)
                        return r;
                r = type_check(dst, false, m->dest, m->source, err);
                return r < 0 ? r : mount_file_at(m, dst, err);
        default:
                break;
        }
        r = dest_open(m->dest, WANT_DIR, optional, &dst, err);
        if (r < 0 || dst < 0)
                return r;
        r = type_check(dst, true, m->dest, NULL, err);
        if (r < 0)
                return r;
        switch (m->kind) {
        case SPEC_MOUNT_TMPFS:
                return mount_tmpfs_at(dst, m->mode ? m->mode : 0755, m->dest, err);
        case SPEC_MOUNT_PROC:
                return mount_proc_at(dst, m->dest, err);
        case SPEC_MOUNT_DEV:
                return mount_dev_at(dst, m->dest, err);
        default:
                return 0; /* SPEC_MOUNT_DIR: it exists now */
        }
}

int mounts_setup(const struct sandbox_spec *s, struct cs_error *err)
{
        int r;

        r = attach_root(s, err);
        if (r >= 0 && s->root == SPEC_ROOT_HOST)
                r = mount_sysfs(err);
        if (r < 0)
                return r;
        for (size_t i = 0; i < s->n_mounts; i++) {
                const struct spec_mount *m = &s->mounts[i];

                r = mount_one(s, i, err);
                if (r < 0 && m->source)
                        return cs_error_wrap(err, "%s %s on %s", spec_mount_kind_name(m->kind),
                                             m->source, m->dest);
                if (r < 0)
                        return cs_error_wrap(err, "%s on %s", spec_mount_kind_name(m->kind),
                                             m->dest);
        }
        if (s->root == SPEC_ROOT_DIR && !s->writable &&
            set_tree_attrs(st.root, MOUNT_ATTR_RDONLY, false) < 0)
                return cs_error_set(err, errno, "make the root read-only");
        if (fchdir(st.root) < 0)
                return cs_error_set(err, errno, "enter the new root");
        if (syscall(SYS_pivot_root, ".", ".") < 0)
                return cs_error_set(err, errno, "pivot_root into the new root");
        /* The old root is stacked under the new one; detach it so nothing of the host's
         * tree stays reachable. */
        if (umount2(".", MNT_DETACH) < 0)
                return cs_error_set(err, errno, "detach the old root");
        if (chdir("/") < 0)
                return cs_error_set(err, errno, "chdir /");
        close(st.root);
        st.root = -1;
        free(st.bind_trees);
        free(st.bind_is_dir);
        for (size_t i = 0; i < s->n_mounts; i++) {
                if (st.bind_parents[i] >= 0)
                        close(st.bind_parents[i]);
                /* pid 1 never execs: the host fds must not stay open in the sandbox. */
                if (s->mounts[i].source_fd >= 0)
                        close(s->mounts[i].source_fd);
        }
        if (s->root_fd >= 0)
                close(s->root_fd);
        free(st.bind_parents);
        return 0;
}
