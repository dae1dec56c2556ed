#include "resolve.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static bool openat2_refused;

bool cs_resolve_walking(void)
{
        return openat2_refused;
}

/* openat2, or -2 when the call itself is refused (before Linux 5.6, or a container's
 * seccomp profile): that is remembered, so later opens walk without trying again. */
static int try_openat2(int dirfd, const char *path, int flags, uint64_t resolve)
{
        struct open_how how = {.flags = (uint64_t)(flags | O_CLOEXEC), .resolve = resolve};
        int fd;

        if (openat2_refused)
                return -2;
        /* EAGAIN: a ".." raced a mount or rename anywhere on the machine (the kernel cannot
         * prove the walk stayed inside); the call may be retried, and after that the walk
         * gives the answer. */
        for (int tries = 0; tries < 64; tries++) {
                fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
                if (fd >= 0 || errno != EAGAIN)
                        break;
        }
        if (fd < 0 && errno == EAGAIN)
                return -2;
        if (fd < 0 && (errno == ENOSYS || errno == EPERM)) {
                openat2_refused = true;
                return -2;
        }
        return fd;
}

/* RESOLVE_BENEATH refuses an absolute path and a ".." that leaves dirfd; both resolvers
 * refuse every "..", so they agree whatever the tree looks like. */
static int beneath_check(const char *path)
{
        const char *p = path;

        if (path[0] == '/') {
                errno = EXDEV;
                return -1;
        }
        while (*p) {
                size_t n = strcspn(p, "/");

                if (n == 2 && p[0] == '.' && p[1] == '.') {
                        errno = EXDEV;
                        return -1;
                }
                p += n;
                while (*p == '/')
                        p++;
        }
        return 0;
}

/* The next component of *p into comp, *p moved past it: 1, 0 at the end, or -1 with errno
 * ENAMETOOLONG. */
static int next_component(const char **p, char comp[NAME_MAX + 1])
{
        size_t n;

        while (**p == '/')
                (*p)++;
        if (!**p)
                return 0;
        n = strcspn(*p, "/");
        if (n > NAME_MAX) {
                errno = ENAMETOOLONG;
                return -1;
        }
        memcpy(comp, *p, n);
        comp[n] = '\0';
        *p += n;
        return 1;
}

int cs_open_beneath_walk(int dirfd, const char *path, int flags)
{
        const char *p = path;
        int cur, next;

        if (beneath_check(path) < 0)
                return -1;
        cur = openat(dirfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
        while (cur >= 0) {
                char comp[NAME_MAX + 1];
                struct stat sb;
                bool last;
                int got = next_component(&p, comp);

                if (got < 0) {
                        close(cur);
                        return -1;
                }
                if (got == 0)
                        break;
                while (*p == '/')
                        p++;
                if (strcmp(comp, ".") == 0)
                        continue;
                last = !*p;
                next = openat(cur, comp, (last ? flags : O_PATH) | O_NOFOLLOW | O_CLOEXEC);
                close(cur);
                if (next < 0)
                        return -1;
                /* O_PATH | O_NOFOLLOW opens a symlink itself: refuse it as openat2 does. */
                if ((!last || (flags & O_PATH)) && fstat(next, &sb) == 0 &&
                    (S_ISLNK(sb.st_mode) || (!last && !S_ISDIR(sb.st_mode)))) {
                        close(next);
                        errno = S_ISLNK(sb.st_mode) ? ELOOP : ENOTDIR;
                        return -1;
                }
                if (last)
                        return next;
                cur = next;
        }
        if (cur < 0)
                return -1;
        /* dirfd itself ("" or "."): reopened with the caller's flags. */
        next = openat(cur, ".", flags | O_CLOEXEC);
        close(cur);
        return next;
}

int cs_open_beneath(int dirfd, const char *path, int flags)
{
        int fd;

        if (beneath_check(path) < 0)
                return -1;
        fd = try_openat2(dirfd, path[0] ? path : ".", flags,
                         RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
        if (fd != -2)
                return fd;
        return cs_open_beneath_walk(dirfd, path, flags);
}

int cs_open_no_links(int dirfd, const char *path, int flags)
{
        int fd = try_openat2(dirfd, path, flags, RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
        int root;

        if (fd != -2)
                return fd;
        if (path[0] != '/')
                return cs_open_beneath_walk(dirfd, path, flags);
        root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return -1;
        fd = cs_open_beneath_walk(root, path + strspn(path, "/"), flags);
        if (fd < 0) {
                int e = errno;

                close(root);
                errno = e;
                return -1;
        }
        close(root);
        return fd;
}

int cs_open_beneath_links(int dirfd, const char *path, int flags)
{
        int fd;

        if (path[0] == '/') {
                errno = EXDEV;
                return -1;
        }
        fd = try_openat2(dirfd, path[0] ? path : ".", flags,
                         RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS);
        if (fd != -2)
                return fd;
        return cs_open_in_root_walk(dirfd, path, flags);
}

int cs_open_in_root_walk(int root, const char *path, int flags)
{
        char todo[2 * PATH_MAX], done[PATH_MAX] = "";
        int links = 0, cur = fcntl(root, F_DUPFD_CLOEXEC, 3);

        if (cur < 0)
                return -1;
        if (snprintf(todo, sizeof(todo), "%s", path) >= (int)sizeof(todo)) {
                close(cur);
                errno = ENAMETOOLONG;
                return -1;
        }
        for (const char *p = todo;;) {
                char comp[NAME_MAX + 1], target[PATH_MAX], rest[2 * PATH_MAX];
                size_t n;
                struct stat sb;
                ssize_t tl;
                int next, got = next_component(&p, comp);

                if (got < 0) {
                        close(cur);
                        return -1;
                }
                if (got == 0)
                        break;
                n = strlen(comp);
                if (strcmp(comp, ".") == 0)
                        continue;
                if (strcmp(comp, "..") == 0) {
                        /* Back to the parent of what is resolved so far: walk it again from
                         * the root (its components are known directories, not links). */
                        char *slash = strrchr(done, '/');

                        if (slash)
                                *slash = '\0';
                        close(cur);
                        cur = done[0] ? cs_open_in_root_walk(root, done, O_PATH | O_DIRECTORY)
                                      : fcntl(root, F_DUPFD_CLOEXEC, 3);
                        if (cur < 0)
                                return -1;
                        continue;
                }
                if (fstatat(cur, comp, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(sb.st_mode)) {
                        tl = readlinkat(cur, comp, target, sizeof(target) - 1);
                        if (tl < 0 || ++links > 40) {
                                close(cur);
                                errno = tl < 0 ? errno : ELOOP;
                                return -1;
                        }
                        target[tl] = '\0';
                        snprintf(rest, sizeof(rest), "%s%s", target, p);
                        snprintf(todo, sizeof(todo), "%s", rest);
                        p = todo;
                        if (target[0] == '/') {
                                close(cur);
                                cur = fcntl(root, F_DUPFD_CLOEXEC, 3);
                                done[0] = '\0';
                                if (cur < 0)
                                        return -1;
                        }
                        continue;
                }
                next =
                    openat(cur, comp, (*p ? O_PATH | O_DIRECTORY : flags) | O_NOFOLLOW | O_CLOEXEC);
                close(cur);
                if (next < 0)
                        return -1;
                cur = next;
                if (strlen(done) + 1 + n + 1 > sizeof(done)) {
                        close(cur);
                        errno = ENAMETOOLONG;
                        return -1;
                }
                strcat(done, "/");
                strcat(done, comp);
        }
        if (!done[0]) {
                /* The root itself: reopen it with the caller's flags. */
                int fd = openat(cur, ".", flags | O_CLOEXEC);

                close(cur);
                return fd;
        }
        return cur;
}

int cs_open_in_root(int rootfd, const char *path, int flags)
{
        int fd = try_openat2(rootfd, path, flags, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);

        if (fd != -2)
                return fd;
        return cs_open_in_root_walk(rootfd, path, flags);
}
