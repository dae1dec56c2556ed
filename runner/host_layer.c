/* The package broker's writable layer on the embedded default (doc/packages-default.md).
 *
 * The embedded default shows the host's system read-only, owned by ids the session does not
 * map. A package manager can still install there when each of the spec's layer_dirs (/usr,
 * /etc, the package databases under /var) gets an overlay whose upper is prepared: every
 * directory of the lower made in the upper (the skeleton), owned by the session's root,
 * and the files a manager opens for writing (dpkg's locks and status) made there first.
 * Without that, the kernel refuses the copy-up of anything the host's root owns.
 *
 * Who mounts: pid 1, before it drops its capabilities, forks this helper. The helper
 * becomes uid 0 of the session's user namespace, keeps CAP_SYS_ADMIN and the broker's own
 * capabilities alone (LAYER_CAPS; its bounding set cut to them), sets no_new_privs, is not
 * dumpable, closes every fd but its end of a socket pair with the broker and waits. The broker
 * (which holds no CAP_SYS_ADMIN) sends one byte at its first request; the helper then runs the one
 * sequence below, answers with the result and exits: it takes no path, name or option from anyone,
 * and nothing the payload can reach. Its mounts are in the session's one mount namespace, so the
 * payload, the broker and the package manager all see them.
 *
 * The sequence, for each layer dir D:
 *   - a tmpfs of the session (fsopen/fsmount, never attached anywhere a path reaches),
 *     holding the upper and work dirs of every overlay: it goes with the session;
 *   - the skeleton of D, walked by dir fds (openat O_NOFOLLOW, mkdirat relative to the
 *     upper's dir fds, never a path string twice). A directory the user cannot read (a
 *     0700 of the host's root) cannot be mirrored: it is left out, noted, and the broker
 *     names it when a package manager fails;
 *   - the manager's files under D (layer_files), copied or made empty in the upper;
 *   - the mounts the session has below D (/etc/hosts and the like), cloned before and put
 *     back on the overlay after, so the session keeps its view;
 *   - the overlay (lower: D as the session sees it, by fd; userxattr), nosuid and nodev,
 *     moved onto D's fd.
 * Where the kernel refuses D as a lower (mounts below it that it locked, made outside the
 * session: it would show what they cover), tried first on a scratch pair, D's layer is a
 * copy in the tmpfs instead (layer_copy_tree: what the user can read, bounded), with the
 * host's unreadable directories and files bound back read-only over empty ones.
 * The host's files are lower layers only: every change lands in the tmpfs, which nothing
 * of the host ever reads. */
#include "internal.h"
#include "mounts_internal.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/resolve.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#define LAYER_MAX_DIRS  2000000u /* directories in one skeleton */
#define LAYER_MAX_DEPTH 128u
#define LAYER_MAX_COPY  (512ull << 20)
#define LAYER_REPLY     4096
/* What the helper holds: SYS_ADMIN to mount (with SYS_CHROOT, which setns into the broker's
 * mount namespace asks for too), and the broker's own capabilities. An overlay
 * does every change to its upper with the credentials of whoever mounted it (after checking
 * the caller's own against the merged inode): with less than the broker has, the package
 * manager's chown to _apt or chmod of a root file would fail in the layer (measured), and
 * without DAC_OVERRIDE the overlay cannot even be made (its work dir has mode 0). The
 * payload gains nothing by it: its own credentials are checked first, and they hold no
 * capability. */
#define LAYER_CAPS(s) ((s)->broker_caps | (1ull << CAP_SYS_ADMIN) | (1ull << CAP_SYS_CHROOT))

/* The files package managers open for writing in place: made in the upper first, since the
 * kernel cannot copy up a file of the host's root. EMPTY: a lock the user may not read. */
enum layer_file_how { LAYER_COPY, LAYER_EMPTY };
static const struct {
        const char *dir, *file;
        enum layer_file_how how;
} layer_files[] = {
    {"/var/lib/dpkg", "lock", LAYER_EMPTY},
    {"/var/lib/dpkg", "lock-frontend", LAYER_EMPTY},
    {"/var/lib/dpkg", "triggers/Lock", LAYER_EMPTY},
    {"/var/lib/dpkg", "status", LAYER_COPY},
    {"/var/lib/dpkg", "triggers/Unincorp", LAYER_COPY},
    {"/var/lib/apt", "lists/lock", LAYER_EMPTY},
    {"/var/lib/rpm", ".rpm.lock", LAYER_EMPTY},
    {"/var/lib/rpm", "rpmdb.sqlite", LAYER_COPY},
    {"/var/lib/rpm", "rpmdb.sqlite-shm", LAYER_COPY},
    {"/var/lib/rpm", "rpmdb.sqlite-wal", LAYER_COPY},
};

/* Scratch directories of a manager that the host keeps unreadable (apt's, 0700 _apt): what
 * they hold is the host's half-done downloads, so the layer has an empty one of its own in
 * their place (opaque: the host's is not looked into). Any other unreadable directory is
 * left out and named when a manager fails. */
static const char *const layer_scratch[] = {
    "/var/lib/apt/lists/partial",
    "/var/lib/apt/lists/auxfiles",
    "/var/cache/apt/archives/partial",
};

#define LAYER_MAX_KEEP 64

struct layer_walk {
        /* a copy's unreadable directories and files: the host's own, bound back read-only
         * over the copy's empty one, so that a package writing there fails as over an
         * overlay, and the session sees them as it did */
        int keep_fd[LAYER_MAX_KEEP];
        char keep_path[LAYER_MAX_KEEP][PATH_MAX];
        size_t n_keep;
        size_t dirs;
        size_t unread;
        char path[PATH_MAX];
        char note[LAYER_REPLY - 256]; /* the unreadable directories, as many as fit */
};

static int sys_fsopen(const char *fs)
{
        return (int)syscall(SYS_fsopen, fs, FSOPEN_CLOEXEC);
}
static int sys_fsconfig(int fd, unsigned cmd, const char *key, const void *value, int aux)
{
        return (int)syscall(SYS_fsconfig, fd, cmd, key, value, aux);
}
static int sys_fsmount(int fd, unsigned attrs)
{
        return (int)syscall(SYS_fsmount, fd, FSMOUNT_CLOEXEC, attrs);
}
static int sys_move_mount(int from, int to)
{
        return (int)syscall(SYS_move_mount, from, "", to, "",
                            MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
}
static int open_no_links(const char *path, int flags)
{
        return cs_open_no_links(AT_FDCWD, path, flags);
}

static void walk_note(struct layer_walk *w, const char *name)
{
        size_t n = strlen(w->note), p = strlen(w->path), l = strlen(name);

        w->unread++;
        if (n + p + l + 4 >= sizeof(w->note))
                return;
        if (n) {
                memcpy(w->note + n, ", ", 2);
                n += 2;
        }
        memcpy(w->note + n, w->path, p);
        w->note[n + p] = '/';
        memcpy(w->note + n + p + 1, name, l + 1);
}

/* An unreadable scratch directory: an empty, opaque one of the layer's own. 1: made (or
 * *r < 0 if that failed); 0: not a scratch directory. */
static int layer_scratch_dir(struct layer_walk *w, int upper, const char *name,
                             struct cs_error *err, int *r)
{
        size_t p = strlen(w->path);
        _cleanup_close_ int fd = -1;

        for (size_t i = 0; i < sizeof(layer_scratch) / sizeof(layer_scratch[0]); i++) {
                const char *s = layer_scratch[i];

                if (strncmp(s, w->path, p) != 0 || s[p] != '/' || strcmp(s + p + 1, name) != 0)
                        continue;
                if (mkdirat(upper, name, 0700) < 0 ||
                    (fd = openat(upper, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) <
                        0 ||
                    fsetxattr(fd, "user.overlay.opaque", "y", 1, 0) < 0)
                        *r = cs_error_set(err, errno, "make %s in the layer", s);
                return 1;
        }
        return 0;
}

/* The directories below lower (read by fd, owned by the caller) made in upper, with their
 * modes, as the helper's uid 0. Another filesystem below (a mount point of the session) is
 * made but not entered: the overlay's lower has none of it. */
static int layer_skeleton(int lower, int upper, dev_t dev, unsigned depth, struct cs_error *err,
                          struct layer_walk *w)
{
        _cleanup_closedir_ DIR *d = fdopendir(lower);
        size_t plen = strlen(w->path);
        struct dirent *de;
        int r = 0;

        if (!d) {
                r = cs_error_set(err, errno, "list %s", w->path);
                close(lower);
                return r;
        }
        while (r >= 0 && (errno = 0, de = readdir(d))) {
                _cleanup_close_ int child = -1, up = -1;
                struct stat st;

                if (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN)
                        continue;
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                    !S_ISDIR(st.st_mode))
                        continue;
                child =
                    openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (child < 0) {
                        if ((errno == EACCES || errno == EPERM) &&
                            layer_scratch_dir(w, upper, de->d_name, err, &r) == 0)
                                walk_note(w, de->d_name);
                        continue;
                }
                if (++w->dirs > LAYER_MAX_DIRS || depth >= LAYER_MAX_DEPTH)
                        return cs_error_setx(err, E2BIG,
                                             "%s: more than %u directories or %u levels: the "
                                             "layer is not made",
                                             w->path, LAYER_MAX_DIRS, LAYER_MAX_DEPTH);
                if (mkdirat(upper, de->d_name, st.st_mode & 0777) < 0 && errno != EEXIST)
                        return cs_error_set(err, errno, "make %s/%s in the layer", w->path,
                                            de->d_name);
                up = openat(upper, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (up < 0)
                        return cs_error_set(err, errno, "open %s/%s in the layer", w->path,
                                            de->d_name);
                if ((st.st_mode & 07000) && fchmod(up, st.st_mode & 07777) < 0)
                        return cs_error_set(err, errno, "set the mode of %s/%s in the layer",
                                            w->path, de->d_name);
                if (st.st_dev != dev || plen + strlen(de->d_name) + 2 >= sizeof(w->path))
                        continue;
                snprintf(w->path + plen, sizeof(w->path) - plen, "/%s", de->d_name);
                r = layer_skeleton(child, up, dev, depth + 1, err, w);
                child = -1; /* layer_skeleton took it */
                w->path[plen] = '\0';
        }
        if (r >= 0 && errno)
                r = cs_error_set(err, errno, "list %s", w->path);
        return r;
}

/* size bytes of from into to (fewer if from is shorter now). */
static int copy_fd(int from, int to, off_t size, struct cs_error *err, const char *dir,
                   const char *name)
{
        for (off_t left = size; left > 0;) {
                char buf[65536];
                ssize_t n = read(from, buf, sizeof(buf));

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                for (ssize_t off = 0; off < n;) {
                        ssize_t m = write(to, buf + off, (size_t)(n - off));

                        if (m < 0 && errno == EINTR)
                                continue;
                        if (m <= 0)
                                return cs_error_set(err, m < 0 ? errno : EIO,
                                                    "copy %s/%s into the layer", dir, name);
                        off += m;
                }
                left -= n;
        }
        return 0;
}

/* A manager's file under dir: its copy, or an empty file of its mode, in the upper. */
static int layer_file(int lower, int upper, const char *dir, const char *rel,
                      enum layer_file_how how, struct cs_error *err)
{
        _cleanup_close_ int from = -1, to = -1;
        struct stat st;

        if (fstatat(lower, rel, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
                return 0; /* not there: the manager makes it */
        if (how == LAYER_COPY) {
                from = openat(lower, rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
                if (from < 0 || fstat(from, &st) < 0 || !S_ISREG(st.st_mode))
                        return cs_error_set(err, from < 0 ? errno : EINVAL,
                                            "read %s/%s for the layer", dir, rel);
                if ((unsigned long long)st.st_size > LAYER_MAX_COPY)
                        return cs_error_setx(err, EFBIG, "%s/%s is larger than %llu MiB", dir, rel,
                                             LAYER_MAX_COPY >> 20);
        }
        to = openat(upper, rel, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                    st.st_mode & 0777);
        if (to < 0)
                return cs_error_set(err, errno, "make %s/%s in the layer", dir, rel);
        return how == LAYER_COPY ? copy_fd(from, to, st.st_size, err, dir, rel) : 0;
}

/* Whether the kernel takes D as an overlay's lower: it refuses (EINVAL) a lower with mounts
 * below it that it locked, made outside the session (`ip netns exec` binds
 * /etc/resolv.conf, a container runtime /etc/hosts): an overlay would show what they
 * cover. Tried on a scratch pair, never mounted. 1: yes; 0: locked; <0: err set. */
static int layer_overlay_takes(int tmp, size_t idx, int target, const char *dir,
                               struct cs_error *err)
{
        _cleanup_close_ int fs = -1, up = -1, wk = -1;
        char u[32], w[32];

        snprintf(u, sizeof(u), "probe%zu", idx);
        snprintf(w, sizeof(w), "probework%zu", idx);
        if (mkdirat(tmp, u, 0755) < 0 || mkdirat(tmp, w, 0700) < 0)
                return cs_error_set(err, errno, "make the layer of %s", dir);
        up = openat(tmp, u, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        wk = openat(tmp, w, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        fs = sys_fsopen("overlay");
        if (up < 0 || wk < 0 || fs < 0)
                return cs_error_set(err, errno, "open an overlay for %s", dir);
        if (sys_fsconfig(fs, FSCONFIG_SET_FD, "lowerdir+", NULL, target) < 0 &&
            sys_fsconfig(fs, FSCONFIG_SET_STRING, "lowerdir", dir, 0) < 0)
                return cs_error_set(err, errno, "the overlay's lower dir %s", dir);
        if (sys_fsconfig(fs, FSCONFIG_SET_FD, "upperdir", NULL, up) < 0 ||
            sys_fsconfig(fs, FSCONFIG_SET_FD, "workdir", NULL, wk) < 0)
                return cs_error_set(err, errno,
                                    "the overlay's upper dir for %s (the kernel needs overlay "
                                    "layers given by fd, Linux 6.13 or later)",
                                    dir);
        if (sys_fsconfig(fs, FSCONFIG_SET_FLAG, "userxattr", NULL, 0) < 0)
                return cs_error_set(err, errno, "make the overlay over %s", dir);
        if (sys_fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return errno == EINVAL ? 0
                                       : cs_error_set(err, errno, "make the overlay over %s", dir);
        return 1;
}

/* The overlay over target: skeleton, the manager's files, then the mount (not yet moved). */
static int layer_overlay(int tmp, size_t idx, int target, int lower, const struct stat *st,
                         const char *dir, struct layer_walk *w, int *ret_mnt, struct cs_error *err)
{
        _cleanup_close_ int upper = -1, work = -1, fs = -1, dup_lower = -1;
        char up[32], wk[32];
        int r;

        snprintf(up, sizeof(up), "upper%zu", idx);
        snprintf(wk, sizeof(wk), "work%zu", idx);
        if (mkdirat(tmp, up, st->st_mode & 07777) < 0 || mkdirat(tmp, wk, 0700) < 0)
                return cs_error_set(err, errno, "make the layer of %s", dir);
        upper = openat(tmp, up, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        work = openat(tmp, wk, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        dup_lower = fcntl(lower, F_DUPFD_CLOEXEC, 3);
        if (upper < 0 || work < 0 || dup_lower < 0)
                return cs_error_set(err, errno, "open the layer of %s", dir);
        r = layer_skeleton(dup_lower, upper, st->st_dev, 0, err, w);
        dup_lower = -1; /* layer_skeleton took it */
        for (size_t i = 0; r >= 0 && i < sizeof(layer_files) / sizeof(layer_files[0]); i++)
                if (strcmp(layer_files[i].dir, dir) == 0)
                        r = layer_file(lower, upper, dir, layer_files[i].file, layer_files[i].how,
                                       err);
        if (r < 0)
                return r;
        fs = sys_fsopen("overlay");
        if (fs < 0)
                return cs_error_set(err, errno, "open an overlay for %s", dir);
        if (sys_fsconfig(fs, FSCONFIG_SET_FD, "lowerdir+", NULL, target) < 0 &&
            sys_fsconfig(fs, FSCONFIG_SET_STRING, "lowerdir", dir, 0) < 0)
                return cs_error_set(err, errno, "the overlay's lower dir %s", dir);
        if (sys_fsconfig(fs, FSCONFIG_SET_FD, "upperdir", NULL, upper) < 0 ||
            sys_fsconfig(fs, FSCONFIG_SET_FD, "workdir", NULL, work) < 0 ||
            sys_fsconfig(fs, FSCONFIG_SET_FLAG, "userxattr", NULL, 0) < 0 ||
            sys_fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return cs_error_set(err, errno, "make the overlay over %s", dir);
        *ret_mnt = sys_fsmount(fs, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
        if (*ret_mnt < 0)
                return cs_error_set(err, errno, "mount the layer over %s", dir);
        return 0;
}

/* A copy of D in the layer's tmpfs, for a D the kernel will not take as a lower: what the
 * user can read, the session root's, bounded. */
static int layer_copy_tree(int lower, int upper, dev_t dev, unsigned depth, size_t *bytes,
                           struct cs_error *err, struct layer_walk *w)
{
        _cleanup_closedir_ DIR *d = fdopendir(lower);
        size_t plen = strlen(w->path);
        struct dirent *de;
        int r = 0;

        if (!d) {
                r = cs_error_set(err, errno, "list %s", w->path);
                close(lower);
                return r;
        }
        while (r >= 0 && (errno = 0, de = readdir(d))) {
                _cleanup_close_ int from = -1, to = -1;
                struct stat st;

                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
                    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                if (++w->dirs > LAYER_MAX_DIRS || depth >= LAYER_MAX_DEPTH)
                        return cs_error_setx(err, E2BIG,
                                             "%s: more than %u entries or %u levels: the "
                                             "layer is not made",
                                             w->path, LAYER_MAX_DIRS, LAYER_MAX_DEPTH);
                if (S_ISLNK(st.st_mode)) {
                        char target[PATH_MAX];
                        ssize_t n = readlinkat(dirfd(d), de->d_name, target, sizeof(target) - 1);

                        if (n < 0)
                                continue;
                        target[n] = '\0';
                        if (symlinkat(target, upper, de->d_name) < 0)
                                return cs_error_set(err, errno, "copy %s/%s into the layer",
                                                    w->path, de->d_name);
                        continue;
                }
                if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
                        continue;
                from = openat(dirfd(d), de->d_name,
                              (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0) | O_RDONLY | O_NOFOLLOW |
                                  O_CLOEXEC | O_NONBLOCK);
                /* A mount point of the session's (another filesystem): made, not copied;
                 * the session's mount goes back on it. */
                if (from < 0 && st.st_dev == dev) {
                        if (errno != EACCES && errno != EPERM)
                                continue;
                        walk_note(w, de->d_name);
                        if (w->n_keep >= LAYER_MAX_KEEP ||
                            plen + strlen(de->d_name) + 2 >= PATH_MAX)
                                continue;
                        if (S_ISDIR(st.st_mode)
                                ? mkdirat(upper, de->d_name, 0700) < 0
                                : (to = openat(upper, de->d_name,
                                               O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                                               0600)) < 0)
                                return cs_error_set(err, errno, "copy %s/%s into the layer",
                                                    w->path, de->d_name);
                        w->keep_fd[w->n_keep] =
                            (int)syscall(SYS_open_tree, dirfd(d), de->d_name,
                                         OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
                        if (w->keep_fd[w->n_keep] < 0)
                                return cs_error_set(err, errno, "keep %s/%s", w->path, de->d_name);
                        snprintf(w->keep_path[w->n_keep], PATH_MAX, "%s/%s", w->path, de->d_name);
                        w->n_keep++;
                        continue;
                }
                if (S_ISDIR(st.st_mode)) {
                        if (mkdirat(upper, de->d_name, st.st_mode & 0777) < 0 ||
                            (to = openat(upper, de->d_name,
                                         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
                            ((st.st_mode & 07000) && fchmod(to, st.st_mode & 07777) < 0))
                                return cs_error_set(err, errno, "copy %s/%s into the layer",
                                                    w->path, de->d_name);
                        if (from < 0 || st.st_dev != dev ||
                            plen + strlen(de->d_name) + 2 >= sizeof(w->path))
                                continue;
                        snprintf(w->path + plen, sizeof(w->path) - plen, "/%s", de->d_name);
                        r = layer_copy_tree(from, to, dev, depth + 1, bytes, err, w);
                        from = -1; /* taken */
                        w->path[plen] = '\0';
                        continue;
                }
                to = openat(upper, de->d_name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                            st.st_mode & 0777);
                if (to < 0 || ((st.st_mode & 07000) && fchmod(to, st.st_mode & 07777) < 0))
                        return cs_error_set(err, errno, "copy %s/%s into the layer", w->path,
                                            de->d_name);
                /* a file mounted there shows its own content: the session sees it so */
                if (from < 0)
                        continue;
                *bytes += (size_t)st.st_size;
                if (*bytes > LAYER_MAX_COPY)
                        return cs_error_setx(err, EFBIG,
                                             "%s holds more than %llu MiB: too much to copy "
                                             "into the layer",
                                             w->path, LAYER_MAX_COPY >> 20);
                r = copy_fd(from, to, st.st_size, err, w->path, de->d_name);
        }
        if (r >= 0 && errno)
                r = cs_error_set(err, errno, "list %s", w->path);
        return r;
}

/* One layer dir: an overlay (or, where the kernel locked mounts below it, a copy), the
 * session's mounts below it put back on top. */
static int layer_one(int tmp, size_t idx, const char *dir, struct layer_walk *w, int *ret_clone,
                     struct cs_error *err)
{
        _cleanup_close_ int target = open_no_links(dir, O_PATH | O_DIRECTORY);
        _cleanup_close_ int lower = -1, mnt = -1;
        struct submount *subs = NULL;
        size_t n_subs = 0;
        struct stat st;
        int r;

        if (target < 0)
                return cs_error_set(err, errno, "open %s", dir);
        lower = openat(target, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (lower < 0 || fstat(lower, &st) < 0)
                return cs_error_set(err, errno, "read %s", dir);
        snprintf(w->path, sizeof(w->path), "%s", dir);
        r = layer_overlay_takes(tmp, idx, target, dir, err);
        if (r > 0) {
                r = layer_overlay(tmp, idx, target, lower, &st, dir, w, &mnt, err);
        } else if (r == 0) {
                char name[32];
                size_t bytes = 0;
                int cover, dup_lower = fcntl(lower, F_DUPFD_CLOEXEC, 3);

                snprintf(name, sizeof(name), "copy%zu", idx);
                if (dup_lower < 0 || mkdirat(tmp, name, st.st_mode & 07777) < 0 ||
                    (cover = openat(tmp, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) <
                        0) {
                        r = cs_error_set(err, errno, "make the layer of %s", dir);
                        if (dup_lower >= 0)
                                close(dup_lower);
                } else {
                        r = layer_copy_tree(dup_lower, cover, st.st_dev, 0, &bytes, err, w);
                        close(cover);
                }
                if (r >= 0) {
                        mnt =
                            (int)syscall(SYS_open_tree, tmp, name,
                                         OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
                        if (mnt < 0)
                                r = cs_error_set(err, errno, "mount the layer over %s", dir);
                }
        }
        if (r >= 0)
                r = submounts_clone(target, &subs, &n_subs, dir, err);
        if (r >= 0 && sys_move_mount(mnt, target) < 0)
                r = cs_error_set(err, errno, "mount the layer over %s", dir);
        for (size_t i = 0; i < w->n_keep; i++) {
                if (r >= 0) {
                        _cleanup_close_ int at = open_no_links(w->keep_path[i], O_PATH);

                        if (at < 0 || sys_move_mount(w->keep_fd[i], at) < 0)
                                r = cs_error_set(err, errno, "keep the host's %s", w->keep_path[i]);
                }
                close(w->keep_fd[i]);
        }
        w->n_keep = 0;
        /* the session's mounts back, each beneath the layer's own mount */
        for (size_t i = 0; r >= 0 && i < n_subs; i++) {
                _cleanup_close_ int at =
                    mnt_openat2(mnt, subs[i].rel, O_PATH | O_NOFOLLOW | O_CLOEXEC,
                                RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS, err);

                r = at < 0 ? cs_error_set(err, -at, "put the session's mount at %s/%s back", dir,
                                          subs[i].rel)
                           : mnt_attach(subs[i].tree, at, subs[i].rel, dir, err);
        }
        submounts_free(subs, n_subs);
        /* What the broker's namespace gets: the layer as the session now sees it, with
         * the session's mounts on it. */
        if (r >= 0) {
                *ret_clone = (int)syscall(SYS_open_tree, mnt, "",
                                          OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE |
                                              AT_EMPTY_PATH);
                if (*ret_clone < 0)
                        r = cs_error_set(err, errno, "clone the layer over %s", dir);
        }
        return r;
}

/* The broker runs the package manager in a mount namespace of its own (broker.c,
 * broker_own_mounts: the host's writable binds read-only there), which the layer must
 * reach too: the helper joins it by the fd the broker sends and attaches there the clone of
 * each layer dir, its writable host binds made read-only first. */
static int layer_to_broker(const struct sandbox_spec *s, int *clones, int broker,
                           struct cs_error *err)
{
        int r;

        for (size_t i = 0; i < s->n_layer_dirs; i++) {
                r = broker_clone_read_only(s, clones[i], s->layer_dirs[i]);
                if (r < 0)
                        return cs_error_set(err, -r,
                                            "make the host's binds below %s read-only "
                                            "for the package manager",
                                            s->layer_dirs[i]);
        }
        if (setns(broker, CLONE_NEWNS) < 0)
                return cs_error_set(err, errno, "enter the package broker's mount namespace");
        for (size_t i = 0; i < s->n_layer_dirs; i++) {
                _cleanup_close_ int at = open_no_links(s->layer_dirs[i], O_PATH | O_DIRECTORY);

                if (at < 0 || sys_move_mount(clones[i], at) < 0)
                        return cs_error_set(err, errno,
                                            "mount the layer over %s for the package manager",
                                            s->layer_dirs[i]);
        }
        return 0;
}

static int layer_build(const struct sandbox_spec *s, int broker, struct layer_walk *w,
                       struct cs_error *err)
{
        _cleanup_close_ int fs = sys_fsopen("tmpfs"), tmp = -1;
        _cleanup_free_ int *clones = calloc(s->n_layer_dirs + 1, sizeof(int));
        int r = 0;

        umask(0);
        if (fs < 0 || sys_fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0755", 0) < 0 ||
            sys_fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return cs_error_set(err, errno, "make the layer's tmpfs");
        tmp = sys_fsmount(fs, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
        if (tmp < 0)
                return cs_error_set(err, errno, "make the layer's tmpfs");
        if (!clones)
                return cs_error_set(err, ENOMEM, "make the layer");
        for (size_t i = 0; i < s->n_layer_dirs; i++)
                clones[i] = -1;
        for (size_t i = 0; r >= 0 && i < s->n_layer_dirs; i++)
                r = layer_one(tmp, i, s->layer_dirs[i], w, &clones[i], err);
        if (r >= 0)
                r = layer_to_broker(s, clones, broker, err);
        for (size_t i = 0; i < s->n_layer_dirs; i++)
                if (clones[i] >= 0)
                        close(clones[i]);
        return r;
}

/* The request: one byte, with the broker's mount namespace (which the helper joins). */
static ssize_t layer_receive(int sock, char *go, int *ret_fd)
{
        union {
                struct cmsghdr h;
                char space[CMSG_SPACE(sizeof(int))];
        } ctl;
        struct iovec iov = {.iov_base = go, .iov_len = 1};
        struct msghdr mh = {.msg_iov = &iov,
                            .msg_iovlen = 1,
                            .msg_control = ctl.space,
                            .msg_controllen = sizeof(ctl.space)};
        struct cmsghdr *c;
        ssize_t n;

        *ret_fd = -1;
        do
                n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
        while (n < 0 && errno == EINTR);
        c = n == 1 ? CMSG_FIRSTHDR(&mh) : NULL;
        if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
            c->cmsg_len == CMSG_LEN(sizeof(int)))
                memcpy(ret_fd, CMSG_DATA(c), sizeof(int));
        return n;
}

/* The helper: one request, one answer ("0 N note" or "-errno message"), then exit. */
static void layer_helper(const struct sandbox_spec *s, int sock)
{
        static struct layer_walk w;
        struct cs_error err = {0};
        char reply[LAYER_REPLY];
        char go;
        ssize_t n;
        int r, broker = -1;

        if (setgroups(0, NULL) < 0 || setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0 ||
            exec_keep_capabilities(LAYER_CAPS(s), &err) < 0 ||
            prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || prctl(PR_SET_DUMPABLE, 0) < 0)
                _exit(0); /* the broker reads EOF and says the layer cannot be made */
        n = layer_receive(sock, &go, &broker);
        if (n != 1 || broker < 0)
                _exit(0);
        r = layer_build(s, broker, &w, &err);
        if (r < 0)
                snprintf(reply, sizeof(reply), "%d %s", r, err.msg);
        else
                snprintf(reply, sizeof(reply), "0 %zu %s", w.unread, w.note);
        (void)!write(sock, reply, strlen(reply));
        _exit(0);
}

int host_layer_start(const struct sandbox_spec *s)
{
        int sv[2];
        pid_t pid;

        if (!s->package_broker || !s->n_layer_dirs)
                return -1;
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                return -1;
        pid = fork();
        if (pid < 0) {
                close(sv[0]);
                close(sv[1]);
                return -1;
        }
        if (pid > 0) {
                close(sv[1]);
                return sv[0];
        }
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (sv[1] != 3 && dup3(sv[1], 3, O_CLOEXEC) < 0)
                _exit(0);
        syscall(SYS_close_range, 4, ~0U, 0);
        signal(SIGPIPE, SIG_IGN);
        {
                sigset_t none;

                sigemptyset(&none);
                sigprocmask(SIG_SETMASK, &none, NULL);
        }
        layer_helper(s, 3);
        _exit(0);
}

int host_layer_request(int sock, int broker_ns, size_t *ret_unread, char *note, size_t note_len,
                       char *why, size_t why_len)
{
        union {
                struct cmsghdr h;
                char space[CMSG_SPACE(sizeof(int))];
        } ctl = {0};
        struct iovec iov = {.iov_base = "m", .iov_len = 1};
        struct msghdr mh = {.msg_iov = &iov,
                            .msg_iovlen = 1,
                            .msg_control = ctl.space,
                            .msg_controllen = sizeof(ctl.space)};
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        char reply[LAYER_REPLY + 1];
        char *end = NULL;
        ssize_t n;
        long code;

        *ret_unread = 0;
        note[0] = '\0';
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &broker_ns, sizeof(int));
        if (sock < 0 || broker_ns < 0 || sendmsg(sock, &mh, 0) != 1) {
                snprintf(why, why_len, "its mount helper is not there");
                return -ESRCH;
        }
        do
                n = read(sock, reply, sizeof(reply) - 1);
        while (n < 0 && errno == EINTR);
        if (n <= 0) {
                snprintf(why, why_len, "its mount helper went away without an answer");
                return -EIO;
        }
        reply[n] = '\0';
        code = strtol(reply, &end, 10);
        if (end == reply || *end != ' ') {
                snprintf(why, why_len, "its mount helper gave no answer it understands");
                return -EIO;
        }
        if (code < 0) {
                snprintf(why, why_len, "%s", end + 1);
                return code < -4095 ? -EIO : (int)code;
        }
        *ret_unread = strtoul(end + 1, &end, 10);
        if (*end == ' ')
                snprintf(note, note_len, "%s", end + 1);
        return 0;
}

/* What a manager expects in the session's /var beside its databases: the embedded default's
 * /var is a tmpfs of the session's (spec_add_host_view), which the payload can write, so
 * each step is made by dir fd with no link followed. Made by the broker, as the session's
 * root, after the layer. */
static const char *const layer_var_dirs[] = {
    "log",
    "log/apt",
    "cache",
    "cache/apt",
    "cache/apt/archives",
    "cache/apt/archives/partial",
    "cache/debconf",
};

void host_layer_var(void)
{
        _cleanup_close_ int var = open_no_links("/var", O_PATH | O_DIRECTORY);

        for (size_t i = 0; var >= 0 && i < sizeof(layer_var_dirs) / sizeof(layer_var_dirs[0]);
             i++) {
                const char *rel = layer_var_dirs[i], *slash = strrchr(rel, '/');
                _cleanup_close_ int parent = -1;
                char dir[64];

                snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - rel) : 0, rel);
                if (slash) {
                        struct cs_error other_mount;
                        uint64_t var_id = 0, parent_id = 1;

                        /* beneath /var, on its own mount (what RESOLVE_NO_XDEV said) */
                        parent = cs_open_beneath(var, dir, O_PATH | O_DIRECTORY);
                        if (parent < 0 || mnt_mount_id(var, &var_id, &other_mount) < 0 ||
                            mnt_mount_id(parent, &parent_id, &other_mount) < 0 ||
                            var_id != parent_id)
                                continue;
                }
                (void)mkdirat(slash ? parent : var, slash ? slash + 1 : rel, 0755);
        }
}
