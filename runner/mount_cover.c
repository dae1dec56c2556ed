/* Covers: a host directory that must get a new entry is covered first, by an overlay with
 * a tmpfs upper (the mounts beneath it cloned back on top), or, where overlayfs refuses,
 * by a tmpfs mirroring its entries. */
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

void submounts_free(struct submount *subs, size_t n)
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

int submounts_clone(int dir, struct submount **ret, size_t *ret_n, const char *dest,
                    struct cs_error *err)
{
        char self[64], abs[SPEC_PATH_MAX];
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_free_ char *line = NULL;
        struct submount *subs = NULL;
        size_t n = 0, kept = 0, cap = 0, len;
        /* Dropped: a submount that is gone has nothing to keep. */
        struct cs_error gone;
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
                fd = mnt_openat2(dir, subs[i].rel, O_PATH | O_NOFOLLOW | O_CLOEXEC,
                                 RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS, &gone);
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

/* The overlay over dir (see cover_dir), submounts attached again. -EINVAL untouched: the
 * kernel refuses dir as a lower layer (mounts from a more privileged namespace locked
 * beneath it, as container engines bind /etc/hosts; too deep a stack of overlays). */
static int overlay_dir(int dir, const struct stat *sb, uint64_t attrs, const char *dest,
                       int *ret_fd, struct cs_error *err)
{
        char stage[64] = STAGE "/ovlXXXXXX", lower[64], upper[80], work[80];
        const char *opts[] = {"lowerdir", lower,       "upperdir", upper, "workdir",
                              work,       "userxattr", NULL,       NULL,  NULL};
        struct submount *subs = NULL;
        size_t n_subs = 0;
        _cleanup_close_ int m = -1;
        int r;

        /* A staging dir of its own (0700), also for an overlay the kernel then refuses. */
        if (!mkdtemp(stage))
                return cs_error_set(err, errno, "create a staging dir in " STAGE);
        snprintf(upper, sizeof(upper), "%s/upper", stage);
        snprintf(work, sizeof(work), "%s/work", stage);
        snprintf(lower, sizeof(lower), "/proc/self/fd/%d", dir);
        r = mnt_mkdir_stage(upper, 0700, err);
        if (r >= 0)
                r = mnt_mkdir_stage(work, 0700, err);
        if (r < 0)
                return r;
        if (chmod(upper, sb->st_mode & 07777) < 0)
                return cs_error_set(err, errno, "chmod %s", upper);
        r = mnt_new_fs("overlay", opts, attrs, &m, err);
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
        r = mnt_attach(m, dir, "an overlay", dest, err);
        for (size_t i = 0; r >= 0 && i < n_subs; i++) {
                _cleanup_close_ int at =
                    mnt_openat2(m, subs[i].rel, O_PATH | O_NOFOLLOW | O_CLOEXEC,
                                RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS, err);

                r = at < 0
                        ? cs_error_set(err, -at, "%s: reopen %s in the overlay", dest, subs[i].rel)
                        : mnt_attach(subs[i].tree, at, subs[i].rel, dest, err);
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
        r = mnt_new_fs("tmpfs", opts, attrs, &m, err);
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
        r = mnt_attach(m, dir, "a tmpfs", dest, err);
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
                        r = mnt_make_entry(m, e->d_name, MAKE_SYMLINK, target, err);
                } else {
                        r = mnt_make_entry(m, e->d_name,
                                           S_ISDIR(esb.st_mode) ? MAKE_DIR : MAKE_FILE, NULL, err);
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
                                r = mnt_attach(tree, at, e->d_name, dest, err);
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
int mnt_cover_dir(struct mnt_state *st, int dir, const char *dest, int *ret_fd,
                  struct cs_error *err)
{
        uint64_t attrs = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
        struct statvfs sv;
        struct stat sb, rb;
        int r;

        if (fstat(dir, &sb) < 0 || fstatvfs(dir, &sv) < 0)
                return cs_error_set(err, errno, "%s: stat its parent directory", dest);
        if (sv.f_flag & ST_NOEXEC)
                attrs |= MOUNT_ATTR_NOEXEC;
        if (sv.f_flag & ST_RDONLY || st->root_ro)
                attrs |= MOUNT_ATTR_RDONLY;
        /* The host's root itself (a top-level destination is missing): overlayfs refuses an
         * upper layer below its lower one, and a cover would leave st->root behind. */
        if (fstat(st->root, &rb) == 0 && rb.st_dev == sb.st_dev && rb.st_ino == sb.st_ino)
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
        st->n_covers++;
        mnt_scratch_add(st, *ret_fd);
        st->cover_ro[st->n_covers - 1] = (attrs & MOUNT_ATTR_RDONLY) != 0;
        return 0;
}
