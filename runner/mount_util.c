/* The mount files' primitives (mounts_internal.h), below every mount kind: opening inside
 * the root, creating one entry, making, cloning and attaching a detached mount, setting its
 * attributes, and knowing the scratch layers. They call nothing else of the mount files, so
 * those call each other one way only: mounts.c over mount_kinds.c over mount_dest.c over
 * mount_cover.c, all over this. */
#include "mounts_internal.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"
#include "../common/resolve.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The two resolutions common/resolve.c offers (each with its walking fallback): inside a
 * root (RESOLVE_IN_ROOT, magic links refused), or beneath a dir with no link at all
 * (RESOLVE_BENEATH, which there always means RESOLVE_NO_SYMLINKS too). */
int mnt_openat2(int dirfd, const char *path, uint64_t flags, uint64_t resolve, struct cs_error *err)
{
        int fd = -1;

        errno = EINVAL;
        if (resolve & RESOLVE_IN_ROOT)
                fd = cs_open_in_root(dirfd, path, (int)flags);
        else if (resolve & RESOLVE_BENEATH)
                fd = cs_open_beneath(dirfd, path, (int)flags);
        if (fd < 0)
                return cs_error_set(err, errno, "open %s inside the sandbox's root", path);
        return fd;
}

int mnt_mount_id(int fd, uint64_t *ret, struct cs_error *err)
{
        struct statx sx;

        if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_MNT_ID, &sx) < 0)
                return cs_error_set(err, errno, "find a directory's mount");
        if (!(sx.stx_mask & STATX_MNT_ID))
                return cs_error_setx(err, ENOSYS, "find a directory's mount: no mount id");
        *ret = sx.stx_mnt_id;
        return 0;
}

void mnt_scratch_add(struct mnt_state *st, int fd)
{
        uint64_t id = 0;
        /* Dropped: a layer whose mount is unknown is not a scratch layer. */
        struct cs_error unknown;

        if (st->n_scratch < sizeof(st->scratch) / sizeof(st->scratch[0]) &&
            mnt_mount_id(fd, &id, &unknown) == 0)
                st->scratch[st->n_scratch++] = id;
}

int mnt_make_entry(int parent, const char *name, enum make what, const char *target,
                   struct cs_error *err)
{
        int f;

        switch (what) {
        case MAKE_DIR:
                if (mkdirat(parent, name, 0755) < 0 && errno != EEXIST)
                        return cs_error_set(err, errno, "create the directory %s", name);
                return 0;
        case MAKE_SYMLINK:
                if (symlinkat(target, parent, name) < 0)
                        return cs_error_set(err, errno, "create the symlink %s", name);
                return 0;
        default:
                f = openat(parent, name, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW,
                           0644);
                if (f < 0)
                        return cs_error_set(err, errno, "create the file %s", name);
                close(f);
                return 0;
        }
}

int mnt_set_tree_attrs(int tree, uint64_t attrs, bool recursive, struct cs_error *err)
{
        struct mount_attr a = {.attr_set = attrs};

        if (mount_setattr(tree, "", AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0), &a, sizeof(a)) <
            0)
                return cs_error_set(err, errno, "set a mount's attributes");
        return 0;
}

/* A detached recursive clone of a host path, with binds' attributes applied. */
int mnt_clone_tree(int dirfd, const char *path, unsigned flags, bool recursive, uint64_t attrs,
                   struct cs_error *err)
{
        int tree =
            open_tree(dirfd, path,
                      OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | flags | (recursive ? AT_RECURSIVE : 0));
        int r;

        if (tree < 0)
                return cs_error_set(err, errno, "clone the mount of %s", path[0] ? path : "a tree");
        r = mnt_set_tree_attrs(tree, attrs, recursive, err);
        if (r < 0) {
                close(tree);
                return r;
        }
        return tree;
}

int mnt_mkdir_stage(const char *path, mode_t mode, struct cs_error *err)
{
        if (mkdir(path, mode) < 0)
                return cs_error_set(err, errno, "create %s", path);
        return 0;
}

int mnt_attach(int tree, int dst, const char *what, const char *dest, struct cs_error *err)
{
        if (move_mount(tree, "", dst, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                return mnt_fail(err, MNT_ATTACH, errno, dest, what);
        return 0;
}

/* A new filesystem instance as a detached mount. */
int mnt_new_fs(const char *type, const char *const *opts, uint64_t attrs, int *ret_fd,
               struct cs_error *err)
{
        _cleanup_close_ int fs = fsopen(type, FSOPEN_CLOEXEC);
        int m;

        if (fs < 0)
                return cs_error_set(err, errno, "open a new %s", type);
        for (; opts && opts[0]; opts += 2)
                if (fsconfig(fs, opts[1] ? FSCONFIG_SET_STRING : FSCONFIG_SET_FLAG, opts[0],
                             opts[1], 0) < 0)
                        return cs_error_set(err, errno, "%s: set %s", type, opts[0]);
        if (fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return cs_error_set(err, errno, "create a %s", type);
        m = fsmount(fs, FSMOUNT_CLOEXEC, (unsigned)attrs);
        if (m < 0)
                return cs_error_set(err, errno, "mount a %s", type);
        *ret_fd = m;
        return 0;
}

int mnt_fail(struct cs_error *err, enum mnt_result result, int errnum, const char *dest,
             const char *source)
{
        const char *src = source ? source : "the mount";
        int e = errnum;

/* Each result's text, checked by the compiler; with the errno's text when there is one. */
#define MNT_TEXT(own_errno, ...)                                                                   \
        do {                                                                                       \
                e = errnum ? errnum : (own_errno);                                                 \
                if (errnum)                                                                        \
                        cs_error_set(err, e, __VA_ARGS__);                                         \
                else                                                                               \
                        cs_error_setx(err, e, __VA_ARGS__);                                        \
        } while (0)
        switch (result) {
        case MNT_SOURCE_GONE:
                MNT_TEXT(ENOENT,
                         "bind %s: find the source %s again in the sandbox's mount namespace (it "
                         "changed since it was checked: launch again)",
                         dest, src);
                break;
        case MNT_SOURCE_SWAPPED:
                MNT_TEXT(ESTALE,
                         "bind %s: the source %s was replaced between its check and the mount "
                         "(something swapped it, or a directory on its way); refusing to mount "
                         "what was not checked. Launch again",
                         dest, src);
                break;
        case MNT_SOURCE_CLONE:
                MNT_TEXT(EINVAL, "bind %s: clone the mount of %s", dest, src);
                break;
        case MNT_SOURCE_REPLACED_GONE:
                MNT_TEXT(ENOENT, "bind %s: %s was replaced and its successor is gone; launch again",
                         dest, src);
                break;
        case MNT_TARGET_NOT_DIR:
                MNT_TEXT(ENOTDIR, "%s is not a directory inside the sandbox, but %s is", dest, src);
                cs_error_hint(err,
                              "The root the sandbox runs on (the image or the --rootfs tree), or "
                              "a bind above it, has a file or a link to one at %s: make it a "
                              "directory there (in an image's Containerfile: RUN rm -f %s && "
                              "mkdir -p%s %s, then build and import it again)",
                              dest, dest, strcmp(dest, "/tmp") == 0 ? " -m 1777" : "", dest);
                break;
        case MNT_TARGET_IS_DIR:
                MNT_TEXT(EISDIR, "%s is a directory inside the sandbox, but %s is a file", dest,
                         src);
                cs_error_hint(err,
                              "The root the sandbox runs on (the image or the --rootfs tree), or "
                              "a bind above it, has a directory at %s: remove it there, or bind "
                              "the file elsewhere",
                              dest);
                break;
        case MNT_TARGET_STAT:
                MNT_TEXT(EIO, "stat %s", dest);
                break;
        case MNT_ATTACH:
                MNT_TEXT(EINVAL, "mount %s on %s", src, dest);
                break;
        }
#undef MNT_TEXT
        return -e;
}
