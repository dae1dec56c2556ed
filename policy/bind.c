/* How policy hands the runner a host object: opened once, by fd, below a verified anchor,
 * its type and owner checked on the fd, which the spec then owns. */
#include "bind.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/resolve.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* path's part below anchor ("" for anchor itself), or NULL when it is not below it. */
const char *plan_path_below(const char *anchor, const char *path)
{
        size_t n = strlen(anchor);

        if (strcmp(anchor, "/") == 0)
                return path[0] == '/' ? path + 1 : NULL;
        if (strncmp(anchor, path, n) != 0 || (path[n] != '/' && path[n] != '\0'))
                return NULL;
        return path[n] ? path + n + 1 : path + n;
}

/* The uid a file shows when its owner is not mapped into this user namespace: inside a
 * container or an outer sandbox that does not map root, the system's own files (the CA
 * store) belong to it, and they are root's as far as trust goes. */
static uid_t overflow_uid(void)
{
        static uid_t cached = (uid_t)-1;
        char buf[32] = "";
        int fd;
        ssize_t n;

        if (cached != (uid_t)-1)
                return cached;
        cached = 65534;
        fd = open("/proc/sys/kernel/overflowuid", O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
                n = read(fd, buf, sizeof(buf) - 1);
                if (n > 0)
                        cached = (uid_t)strtoul(buf, NULL, 10);
                close(fd);
        }
        return cached;
}

/* The work tree of another uid that git's safe.directory lists (tree_owner.c), and its git
 * dir when that is outside it: their owner is accepted for what is bound from below them.
 * One work tree per process: a launch has one. */
static struct {
        char *dirs[2];
        uid_t uid;
} accepted;

void plan_bind_accept_owner(const char *dir, const char *git_dir, uid_t uid)
{
        for (size_t i = 0; i < 2; i++) {
                free(accepted.dirs[i]);
                accepted.dirs[i] = NULL;
        }
        /* On ENOMEM nothing is accepted: the binds below are refused, naming the owner. */
        accepted.dirs[0] = strdup(dir);
        accepted.dirs[1] = git_dir ? strdup(git_dir) : NULL;
        accepted.uid = uid;
}

static bool owner_accepted(uid_t uid, const char *src)
{
        for (size_t i = 0; i < 2; i++)
                if (accepted.dirs[i] && uid == accepted.uid &&
                    plan_path_below(accepted.dirs[i], src))
                        return true;
        return false;
}

bool plan_owner_is_trusted(uid_t uid)
{
        return uid == getuid() || uid == 0 || uid == overflow_uid();
}

/* The one way policy hands the runner a host object: an fd opened once, checked here (a
 * directory or a regular file, the caller's or root's, or below an accepted work tree its
 * owner's), owned by the spec from then on. */
int plan_bind_fd(struct sandbox_spec *s, int *fd, const char *src, const char *dst, unsigned flags,
                 struct cs_error *err)
{
        _cleanup_close_ int f = cs_take_fd(fd);
        struct stat st;

        if (fstat(f, &st) < 0)
                return cs_error_set(err, errno, "stat %s", src);
        if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
                return cs_error_setx(err, EINVAL,
                                     "%s is neither a directory nor a regular file, so it is "
                                     "not mounted at %s",
                                     src, dst);
        if (!plan_owner_is_trusted(st.st_uid) && !owner_accepted(st.st_uid, src))
                return cs_error_setx(err, EPERM,
                                     "%s belongs to uid %u, neither to you (uid %u) nor to root; "
                                     "csandbox does not mount it at %s. Check who made it",
                                     src, (unsigned)st.st_uid, (unsigned)getuid(), dst);
        return spec_add_bind(s, flags, &f, src, dst, err);
}

/* src, a path below anchor (whose verified fd is anchor_fd), opened once with no symlink,
 * magic link or ".." on the way: whatever a session renames or swaps later, the sandbox
 * gets this object or nothing. A missing optional source is skipped. */
int plan_bind_at(struct sandbox_spec *s, int anchor_fd, const char *anchor, const char *src,
                 const char *dst, unsigned flags, struct cs_error *err)
{
        const char *rel = plan_path_below(anchor, src);
        _cleanup_close_ int fd = -1;

        if (!rel)
                return cs_error_setx(err, EINVAL, "bind %s: %s is not below %s", dst, src, anchor);
        fd = cs_open_beneath(anchor_fd, rel, O_PATH);
        if (fd < 0 && errno == ENOENT && (flags & SPEC_MOUNT_OPTIONAL))
                return 0;
        if (fd < 0 && (errno == ELOOP || errno == EXDEV))
                return cs_error_setx(err, errno,
                                     "%s: a symlink is on its way below %s (planted since it "
                                     "was found?); csandbox mounts nothing through one",
                                     src, anchor);
        if (fd < 0)
                return cs_error_set(err, errno, "open %s", src);
        return plan_bind_fd(s, &fd, src, dst, flags, err);
}

/* A host path no session can write (the user's ~/.claude, the CA store, csandbox's own
 * caches): its links are the user's or the system's, resolved once as the reference does,
 * and the result opened from / with none left. */
int plan_bind_host(struct sandbox_spec *s, const char *src, const char *dst, unsigned flags,
                   struct cs_error *err)
{
        _cleanup_close_ int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        char real[PATH_MAX];

        if (root < 0)
                return cs_error_set(err, errno, "open /");
        if (!realpath(src, real)) {
                if (errno == ENOENT && (flags & SPEC_MOUNT_OPTIONAL))
                        return 0;
                return cs_error_set(err, errno, "resolve %s", src);
        }
        return plan_bind_at(s, root, "/", real, dst, flags, err);
}

/* A directory the reference's runtime creates on the host when it is missing, because a
 * copy is mounted over it (<profile>/chrome, <gitdir>/hooks): mkdirat on the verified parent
 * dirfd, then checked again on what is there (no link, a directory of the caller's).
 * Returns 1 when it is a real directory now. */
int plan_ensure_host_dir(int dirfd, const char *name)
{
        _cleanup_close_ int fd = -1;
        struct stat st;

        if (mkdirat(dirfd, name, 0700) < 0 && errno != EEXIST)
                return 0;
        fd = cs_open_beneath(dirfd, name, O_PATH | O_DIRECTORY);
        return fd >= 0 && fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == getuid();
}
