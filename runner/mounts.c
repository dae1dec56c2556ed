/* The new root, in order: every host source cloned first (so a later tmpfs cannot hide
 * it), the root attached on a tmpfs-backed layer, then each spec mount (mount_kinds.c) at its
 * destination resolved inside the root (mount_dest.c), and pivot_root. */
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
 * a regular file of the same owner (else -ESTALE). */
static int source_find_again(int dirfd, const char *real, int want_fd, struct stat *ret_st,
                             struct cs_error *err)
{
        struct stat want;
        int fd, e;

        if (fstat(want_fd, &want) < 0)
                return cs_error_set(err, errno, "stat %s as it was opened", real);
        while (*real == '/')
                real++;
        fd = cs_open_beneath(dirfd, real, O_PATH);
        if (fd < 0 || fstat(fd, ret_st) < 0) {
                e = errno;
                if (fd >= 0)
                        close(fd);
                return cs_error_set(err, e, "find /%s again", real);
        }
        if (!same_object(&want, ret_st) &&
            !(S_ISREG(want.st_mode) && want.st_nlink == 0 && S_ISREG(ret_st->st_mode) &&
              ret_st->st_uid == want.st_uid)) {
                close(fd);
                return cs_error_setx(err, ESTALE, "/%s is not the object opened before", real);
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
        src = source_find_again(dirfd, path, m->source_fd, &sb, err);
        if (src == -ENOENT && (m->flags & SPEC_MOUNT_OPTIONAL))
                return 0;
        if (src == -ESTALE)
                return mnt_fail(err, MNT_SOURCE_SWAPPED, 0, m->dest, m->source);
        if (src < 0)
                return mnt_fail(err, MNT_SOURCE_GONE, -src, m->dest, m->source);
        if (m->flags & SPEC_MOUNT_RO)
                attrs |= MOUNT_ATTR_RDONLY;
        tree = mnt_clone_tree(src, "", AT_EMPTY_PATH, true, attrs, err);
        if (tree < 0)
                return mnt_fail(err, MNT_SOURCE_CLONE, -tree, m->dest, m->source);
        *ret_tree = tree;
        *ret_is_dir = S_ISDIR(sb.st_mode);
        return 0;
}

static int prepare(struct mnt_state *st, const struct sandbox_spec *s, struct cs_error *err)
{
        st->umask = umask(0);
        umask(st->umask);
        /* Nothing we mount may travel back to the host's namespace. */
        if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
                return cs_error_set(err, errno, "make / a slave mount");

        st->bind_trees = calloc(s->n_mounts ? s->n_mounts : 1, sizeof(int));
        st->bind_is_dir = calloc(s->n_mounts ? s->n_mounts : 1, sizeof(bool));
        st->bind_parents = calloc(s->n_mounts ? s->n_mounts : 1, sizeof(int));
        if (!st->bind_trees || !st->bind_is_dir || !st->bind_parents)
                return cs_error_set(err, ENOMEM, "prepare mounts");
        /* Clone every source now: the staging tmpfs on /tmp would hide sources under it. */
        st->host_view = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (st->host_view < 0)
                return cs_error_set(err, errno, "open /");
        for (size_t i = 0; i < s->n_mounts; i++) {
                const struct spec_mount *m = &s->mounts[i];
                const char *slash;
                int r;

                st->bind_trees[i] = st->bind_parents[i] = -1;
                if (m->kind != SPEC_MOUNT_BIND)
                        continue;
                r = bind_source_clone(st->host_view, m->source_real, m, &st->bind_trees[i],
                                      &st->bind_is_dir[i], err);
                if (r < 0)
                        return r;
                slash = strrchr(m->source_real, '/');
                if (st->bind_trees[i] >= 0 && !st->bind_is_dir[i] && slash) {
                        _cleanup_free_ char *dir =
                            strndup(m->source_real, (size_t)(slash - m->source_real));

                        st->bind_parents[i] =
                            dir ? cs_open_beneath(st->host_view, dir[0] ? dir + 1 : "",
                                                  O_PATH | O_DIRECTORY)
                                : -1;
                }
        }
        if (s->root == SPEC_ROOT_DIR) {
                struct stat sb;

                st->root_dir = source_find_again(st->host_view, s->root_real, s->root_fd, &sb, err);
                if (st->root_dir < 0 || !S_ISDIR(sb.st_mode))
                        return cs_error_set(err, st->root_dir < 0 ? -st->root_dir : ENOTDIR,
                                            "find the root %s (%s) again in the sandbox's mount "
                                            "namespace",
                                            s->root_path, s->root_real);
                st->lower_dirs = calloc(s->n_lowers + 1, sizeof(int));
                if (!st->lower_dirs)
                        return cs_error_set(err, ENOMEM, "prepare the root's layers");
                for (size_t i = 0; i < s->n_lowers; i++) {
                        const struct spec_lower *l = &s->lowers[i];

                        st->lower_dirs[i] =
                            source_find_again(st->host_view, l->real, l->fd, &sb, err);
                        if (st->lower_dirs[i] < 0 || !S_ISDIR(sb.st_mode))
                                return cs_error_set(
                                    err, st->lower_dirs[i] < 0 ? -st->lower_dirs[i] : ENOTDIR,
                                    "find the root's layer %s (%s) again in the "
                                    "sandbox's mount namespace",
                                    l->path, l->real);
                }
        }
        close(st->host_view);
        st->host_view = -1;
        for (size_t i = 0; i < N_DEV_NODES; i++) {
                /* Dropped: a node the host lacks is left out of the sandbox's /dev. */
                struct cs_error missing;
                char path[32];

                snprintf(path, sizeof(path), "/dev/%s", mnt_dev_nodes[i]);
                /* Device nodes need a mount without nodev. */
                st->dev_trees[i] =
                    mnt_clone_tree(AT_FDCWD, path, 0, false, MOUNT_ATTR_NOSUID, &missing);
        }
        if (s->root == SPEC_ROOT_HOST) {
                st->host_root =
                    mnt_clone_tree(AT_FDCWD, "/", 0, true,
                                   MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, err);
                if (st->host_root < 0)
                        return cs_error_set(err, -st->host_root, "clone the host's root");
        }
        return 0;
}

/* Whether dest lies under the destination of an earlier mount that puts a fresh tree there
 * (a tmpfs, proc, dev, a directory bind): its mountpoint is made in that tree, not here. */
static bool under_earlier_tree(struct mnt_state *st, const struct sandbox_spec *s, size_t i)
{
        for (size_t j = 0; j < i; j++) {
                const struct spec_mount *m = &s->mounts[j];
                size_t l = strlen(m->dest);

                if (m->kind != SPEC_MOUNT_TMPFS && m->kind != SPEC_MOUNT_PROC &&
                    m->kind != SPEC_MOUNT_DEV && m->kind != SPEC_MOUNT_COPY &&
                    !(m->kind == SPEC_MOUNT_BIND && st->bind_trees[j] >= 0 && st->bind_is_dir[j]))
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
static int upper_prepare(struct mnt_state *st, const struct sandbox_spec *s, int upper,
                         struct cs_error *err)
{
        for (size_t i = 0; i < s->n_mounts; i++) {
                const struct spec_mount *m = &s->mounts[i];
                bool dir = m->kind != SPEC_MOUNT_FILE && m->kind != SPEC_MOUNT_SYMLINK &&
                           !(m->kind == SPEC_MOUNT_BIND && !st->bind_is_dir[i]);
                char comps[SPEC_PATH_MAX], *save = NULL;
                const char *c, *missing = NULL;
                _cleanup_close_ int lo = fcntl(st->root_dir, F_DUPFD_CLOEXEC, 3);
                _cleanup_close_ int up = fcntl(upper, F_DUPFD_CLOEXEC, 3);
                struct stat sb;

                if ((m->kind == SPEC_MOUNT_BIND && st->bind_trees[i] < 0) ||
                    (m->flags & SPEC_MOUNT_OPTIONAL && m->kind != SPEC_MOUNT_FILE &&
                     m->kind != SPEC_MOUNT_BIND) ||
                    under_earlier_tree(st, s, i))
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
                lo = fcntl(st->root_dir, F_DUPFD_CLOEXEC, 3);
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

/* The overlay through the new mount API, one fsconfig("lowerdir+") a lower dir (Linux
 * 6.8), which no option-string length limits: 0 when attached at target, else -errno
 * with err set. */
static int overlay_fsopen(struct mnt_state *st, const struct sandbox_spec *s, const char *upper,
                          const char *work, const char *target, struct cs_error *err)
{
        _cleanup_close_ int fs = fsopen("overlay", FSOPEN_CLOEXEC);
        _cleanup_close_ int m = -1;
        char lower[32];

        if (fs < 0)
                return cs_error_set(err, errno, "open a new overlay");
        for (size_t i = 0; i < s->n_lowers + 1; i++) {
                snprintf(lower, sizeof(lower), "/proc/self/fd/%d",
                         i ? st->lower_dirs[i - 1] : st->root_dir);
                if (fsconfig(fs, FSCONFIG_SET_STRING, "lowerdir+", lower, 0) < 0)
                        return cs_error_set(err, errno, "overlay: add the lower dir %zu", i);
        }
        if (upper && (fsconfig(fs, FSCONFIG_SET_STRING, "upperdir", upper, 0) < 0 ||
                      fsconfig(fs, FSCONFIG_SET_STRING, "workdir", work, 0) < 0))
                return cs_error_set(err, errno, "overlay: set the upper and work dirs");
        if (fsconfig(fs, FSCONFIG_SET_FLAG, "userxattr", NULL, 0) < 0 ||
            fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return cs_error_set(err, errno, "create an overlay");
        m = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
        if (m < 0 || move_mount(m, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH) < 0)
                return cs_error_set(err, errno, "mount an overlay on %s", target);
        return 0;
}

/* The overlay of the root's layers at target: upper (and its work dir) NULL for a read-only
 * merged view. Where
 * the new mount API cannot (no lowerdir+ before Linux 6.8, no overlay fs_context before
 * 6.5), the one legacy option string, which holds about 200 lower dirs. */
static int overlay_mount(struct mnt_state *st, const struct sandbox_spec *s, const char *upper,
                         const char *work, const char *target, struct cs_error *err)
{
        size_t n = s->n_lowers + 1, len;
        int first = overlay_fsopen(st, s, upper, work, target, err);
        char opts[4096];

        if (first == 0)
                return 0;
        len = (size_t)snprintf(opts, sizeof(opts), "lowerdir=");
        for (size_t i = 0; i < n && len < sizeof(opts); i++)
                len += (size_t)snprintf(opts + len, sizeof(opts) - len, "%s/proc/self/fd/%d",
                                        i ? ":" : "", i ? st->lower_dirs[i - 1] : st->root_dir);
        if (len < sizeof(opts) && upper)
                len += (size_t)snprintf(opts + len, sizeof(opts) - len, ",upperdir=%s,workdir=%s",
                                        upper, work);
        if (len < sizeof(opts))
                len += (size_t)snprintf(opts + len, sizeof(opts) - len, ",userxattr");
        if (len >= sizeof(opts))
                return cs_error_setx(err, E2BIG,
                                     "the rootfs %s has %zu layers, more than overlay mount "
                                     "options can name, and the kernel refused them one by one "
                                     "(%s; Linux 6.8 takes them so); use an image with fewer "
                                     "layers or a newer kernel",
                                     s->root_path, n, strerror(-first));
        if (mount("overlay", target, "overlay", MS_NOSUID | MS_NODEV, opts) < 0)
                return cs_error_set(err, errno,
                                    "mount an overlay on the rootfs %s (overlayfs in a user "
                                    "namespace needs Linux 5.11 or later)",
                                    s->root_path);
        return 0;
}

/* upper_prepare needs to see what the layers show together: a read-only overlay of them
 * alone, looked at and taken away again. */
static int upper_prepare_layers(struct mnt_state *st, const struct sandbox_spec *s, int upper,
                                struct cs_error *err)
{
        int top = st->root_dir, r;

        r = mnt_mkdir_stage(STAGE "/lower", 0700, err);
        if (r >= 0)
                r = overlay_mount(st, s, NULL, NULL, STAGE "/lower", err);
        if (r < 0)
                return r;
        st->root_dir = open(STAGE "/lower", O_PATH | O_DIRECTORY | O_CLOEXEC);
        r = st->root_dir < 0 ? cs_error_set(err, errno, "open " STAGE "/lower")
                             : upper_prepare(st, s, upper, err);
        if (st->root_dir >= 0)
                close(st->root_dir);
        st->root_dir = top;
        if (umount2(STAGE "/lower", MNT_DETACH) < 0 && r >= 0)
                r = cs_error_set(err, errno, "unmount " STAGE "/lower");
        return r;
}

int mnt_reopen_here(int fd, const char *what, struct cs_error *err)
{
        char link[32], path[SPEC_PATH_MAX];
        struct stat a, b;
        ssize_t n;
        int nfd;

        snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
        n = readlink(link, path, sizeof(path) - 1);
        if (n <= 0 || fstat(fd, &a) < 0)
                return cs_error_set(err, errno, "%s: find it", what);
        path[n] = '\0';
        nfd = cs_open_no_links(AT_FDCWD, path, O_PATH | O_DIRECTORY);
        if (nfd < 0)
                return cs_error_set(err, errno, "%s: open %s", what, path);
        if (fstat(nfd, &b) < 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
                close(nfd);
                return cs_error_setx(err, ESTALE, "%s: %s was replaced", what, path);
        }
        return nfd;
}

static int attach_root(struct mnt_state *st, const struct sandbox_spec *s, struct cs_error *err)
{
        int r;

        _cleanup_close_ int upper = -1, work = -1;

        st->root_ro = s->root == SPEC_ROOT_DIR && !s->writable && s->upper_fd < 0;
        if (s->root == SPEC_ROOT_DIR && s->upper_fd >= 0) {
                /* before the staging tmpfs covers /tmp, where the dirs may be */
                upper = mnt_reopen_here(s->upper_fd, "the root's upper dir", err);
                if (upper < 0)
                        return upper;
                work = mnt_reopen_here(s->work_fd, "the root's work dir", err);
                if (work < 0)
                        return work;
        }
        if (mount("tmpfs", STAGE, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700") < 0) {
                r = cs_error_set(err, errno, "mount the staging tmpfs on " STAGE);
                diagnose_stage(err, -r);
                return r;
        }
        r = mnt_mkdir_stage(STAGE_ROOT, 0755, err);
        if (r >= 0)
                r = mnt_mkdir_stage(STAGE_FILES, 0700, err);
        if (r < 0)
                return r;
        if (s->root == SPEC_ROOT_HOST) {
                if (move_mount(st->host_root, "", AT_FDCWD, STAGE_ROOT, MOVE_MOUNT_F_EMPTY_PATH) <
                    0)
                        return cs_error_set(err, errno, "attach the host's root");
                close(st->host_root);
                st->host_root = -1;
        } else {
                /* The tree is the lower layer (an image's layers, the lower dirs): it is never
                 * written; new mountpoints and (with --writable) the payload's writes land in
                 * the upper layer: a tmpfs, or the spec's own dir on disk (a build step's). */
                char upper_path[32] = STAGE "/upper", work_path[32] = STAGE "/work";

                if (s->upper_fd >= 0) {
                        snprintf(upper_path, sizeof(upper_path), "/proc/self/fd/%d", upper);
                        snprintf(work_path, sizeof(work_path), "/proc/self/fd/%d", work);
                } else {
                        r = mnt_mkdir_stage(STAGE "/upper", 0755, err);
                        if (r >= 0)
                                r = mnt_mkdir_stage(STAGE "/work", 0700, err);
                        if (r < 0)
                                return r;
                        upper = open(STAGE "/upper", O_PATH | O_DIRECTORY | O_CLOEXEC);
                        if (upper < 0)
                                return cs_error_set(err, errno, "open " STAGE "/upper");
                }
                r = s->n_lowers ? upper_prepare_layers(st, s, upper, err)
                                : upper_prepare(st, s, upper, err);
                if (r >= 0)
                        r = overlay_mount(st, s, upper_path, work_path, STAGE_ROOT, err);
                if (r < 0)
                        return r;
                close(st->root_dir);
                st->root_dir = -1;
                for (size_t i = 0; i < s->n_lowers; i++) {
                        close(st->lower_dirs[i]);
                        st->lower_dirs[i] = -1;
                }
        }
        st->root = open(STAGE_ROOT, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (st->root < 0)
                return cs_error_set(err, errno, "open the new root");
        if (s->root == SPEC_ROOT_DIR)
                mnt_scratch_add(st, st->root);
        return 0;
}

static int type_check(int dst, bool want_dir, const char *dest, const char *source,
                      struct cs_error *err)
{
        struct stat sb;

        if (fstat(dst, &sb) < 0)
                return mnt_fail(err, MNT_TARGET_STAT, errno, dest, source);
        if (want_dir && !S_ISDIR(sb.st_mode))
                return mnt_fail(err, MNT_TARGET_NOT_DIR, 0, dest, source);
        if (!want_dir && S_ISDIR(sb.st_mode))
                return mnt_fail(err, MNT_TARGET_IS_DIR, 0, dest, source);
        return 0;
}

static int mount_one(struct mnt_state *st, const struct sandbox_spec *s, size_t i,
                     struct cs_error *err)
{
        const struct spec_mount *m = &s->mounts[i];
        bool optional = (m->flags & SPEC_MOUNT_OPTIONAL) != 0;
        _cleanup_close_ int dst = -1;
        int r;

        switch (m->kind) {
        case SPEC_MOUNT_SYMLINK:
                return mnt_make_symlink(st, m, err);
        case SPEC_MOUNT_BIND:
                if (st->bind_trees[i] < 0)
                        return 0; /* an optional source that is missing */
                r = mnt_dest_open(st, m->dest, st->bind_is_dir[i] ? WANT_DIR : WANT_FILE, false,
                                  &dst, err);
                if (r < 0)
                        return r;
                r = type_check(dst, st->bind_is_dir[i], m->dest, m->source, err);
                if (r < 0)
                        return r;
                r = mnt_attach(st->bind_trees[i], dst, m->source, m->dest, err);
                /* A file replaced by rename since it was cloned (a concurrent launch
                 * regenerating a state copy), or a destination file replaced by rename
                 * since it was opened (claude, or a concurrent launch writing back the
                 * profile's .claude.json), cannot be attached: take the new one. */
                for (int tries = 0; r < 0 && err->err == ENOENT && tries < 3; tries++) {
                        const char *base = strrchr(m->source_real, '/') + 1;
                        bool is_dir = false;

                        close(dst);
                        dst = -1;
                        r = mnt_dest_open(st, m->dest, st->bind_is_dir[i] ? WANT_DIR : WANT_FILE,
                                          false, &dst, err);
                        if (r >= 0)
                                r = type_check(dst, st->bind_is_dir[i], m->dest, m->source, err);
                        if (r < 0)
                                return r;
                        if (st->bind_parents[i] >= 0) {
                                close(st->bind_trees[i]);
                                r = bind_source_clone(st->bind_parents[i], base, m,
                                                      &st->bind_trees[i], &is_dir, err);
                                if (r < 0 || st->bind_trees[i] < 0 || is_dir)
                                        return r < 0 ? r
                                                     : mnt_fail(err, MNT_SOURCE_REPLACED_GONE, 0,
                                                                m->dest, m->source);
                        }
                        r = mnt_attach(st->bind_trees[i], dst, m->source, m->dest, err);
                }
                close(st->bind_trees[i]);
                st->bind_trees[i] = -1;
                return r;
        case SPEC_MOUNT_FILE:
                /* Always created (in memory where the directory is the host's): the
                 * optional flag of a file is about nothing but its source. */
                r = mnt_dest_open(st, m->dest, WANT_FILE, false, &dst, err);
                if (r < 0 || dst < 0)
                        return r;
                r = type_check(dst, false, m->dest, m->source, err);
                return r < 0 ? r : mnt_file_at(m, dst, err);
        default:
                break;
        }
        r = mnt_dest_open(st, m->dest, WANT_DIR, optional, &dst, err);
        if (r < 0 || dst < 0)
                return r;
        r = type_check(dst, true, m->dest, NULL, err);
        if (r < 0)
                return r;
        switch (m->kind) {
        case SPEC_MOUNT_TMPFS:
                return mnt_tmpfs_at(st, dst, m->mode ? m->mode : 0755, m->dest, err);
        case SPEC_MOUNT_PROC:
                return mnt_proc_at(dst, s->proc, m->dest, err);
        case SPEC_MOUNT_COPY:
                return mnt_copy_at(st, dst, m, err);
        case SPEC_MOUNT_DEV:
                return mnt_dev_at(st, dst, m->dest, err);
        default:
                return 0; /* SPEC_MOUNT_DIR: it exists now */
        }
}

static int assemble(struct mnt_state *st, const struct sandbox_spec *s, struct cs_error *err)
{
        int r;

        r = attach_root(st, s, err);
        if (r >= 0 && s->root == SPEC_ROOT_HOST)
                r = mnt_sysfs(st, err);
        if (r < 0)
                return r;
        for (size_t i = 0; i < s->n_mounts; i++) {
                const struct spec_mount *m = &s->mounts[i];

                r = mount_one(st, s, i, err);
                if (r < 0 && m->source)
                        return cs_error_wrap(err, "%s %s on %s", spec_mount_kind_name(m->kind),
                                             m->source, m->dest);
                if (r < 0)
                        return cs_error_wrap(err, "%s on %s", spec_mount_kind_name(m->kind),
                                             m->dest);
        }
        if (s->root == SPEC_ROOT_DIR && !s->writable && s->upper_fd < 0) {
                r = mnt_set_tree_attrs(st->root, MOUNT_ATTR_RDONLY, false, err);
                if (r < 0)
                        return cs_error_set(err, -r, "make the root read-only");
        }
        if (fchdir(st->root) < 0)
                return cs_error_set(err, errno, "enter the new root");
        if (syscall(SYS_pivot_root, ".", ".") < 0)
                return cs_error_set(err, errno, "pivot_root into the new root");
        /* The old root is stacked under the new one; detach it so nothing of the host's
         * tree stays reachable. */
        if (umount2(".", MNT_DETACH) < 0)
                return cs_error_set(err, errno, "detach the old root");
        if (chdir("/") < 0)
                return cs_error_set(err, errno, "chdir /");
        close(st->root);
        st->root = -1;
        free(st->bind_trees);
        free(st->bind_is_dir);
        for (size_t i = 0; i < s->n_mounts; i++) {
                if (st->bind_parents[i] >= 0)
                        close(st->bind_parents[i]);
                /* pid 1 never execs: the host fds must not stay open in the sandbox. */
                if (s->mounts[i].source_fd >= 0)
                        close(s->mounts[i].source_fd);
        }
        if (s->root_fd >= 0)
                close(s->root_fd);
        for (size_t i = 0; i < s->n_lowers; i++)
                if (s->lowers[i].fd >= 0)
                        close(s->lowers[i].fd);
        free(st->lower_dirs);
        free(st->bind_parents);
        return 0;
}

int mounts_setup(const struct sandbox_spec *s, struct cs_error *err)
{
        struct mnt_state st = {.host_root = -1, .root_dir = -1, .root = -1, .host_view = -1};
        int r = prepare(&st, s, err);

        return r < 0 ? r : assemble(&st, s, err);
}
