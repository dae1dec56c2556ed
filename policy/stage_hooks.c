/* §2.6: a git dir's config and a per-launch copy of its hooks tree (links copied as
 * links, bounded in size, entries and depth), pruned when the launch that made it is gone. */
#include "stage.h"
#include "stage_util.h"

#include "common/cleanup.h"
#include "common/error.h"
#include "common/fileio.h"
#include "common/sha256.h"
#include "policy/profile.h"
#include "policy/settings.h"
#include "policy/worktree.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#define HOOKS_MAX_BYTES   ((size_t)64 << 20)
#define HOOKS_MAX_ENTRIES 4096
#define TREE_MAX_DEPTH    64

struct tree_budget {
        size_t bytes, entries;
        const char *skipped; /* first entry skipped for its type */
};

/* Copy the tree under src into dst: links as links (never followed), regular files with
 * their permission bits, dirs recursively; other types are skipped. */
static int copy_tree(int src, int dst, int depth, struct tree_budget *bud)
{
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        int fd2, r;

        if (depth > TREE_MAX_DEPTH)
                return -ELOOP;
        fd2 = dup(src);
        if (fd2 < 0)
                return -errno;
        d = fdopendir(fd2);
        if (!d) {
                close(fd2);
                return -errno;
        }
        while ((errno = 0, de = readdir(d))) {
                struct stat st;

                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (++bud->entries > HOOKS_MAX_ENTRIES)
                        return -EFBIG;
                if (fstatat(src, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        return -errno;
                if (S_ISLNK(st.st_mode)) {
                        char target[PATH_MAX];
                        ssize_t n = readlinkat(src, de->d_name, target, sizeof(target) - 1);

                        if (n < 0)
                                return -errno;
                        target[n] = '\0';
                        if (symlinkat(target, dst, de->d_name) < 0)
                                return -errno;
                } else if (S_ISREG(st.st_mode)) {
                        _cleanup_close_ int in =
                            openat(src, de->d_name,
                                   O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
                        _cleanup_close_ int out = -1;
                        struct stat st2;

                        if (in < 0 || fstat(in, &st2) < 0)
                                return -errno;
                        if (!S_ISREG(st2.st_mode))
                                return -EINVAL;
                        bud->bytes += (size_t)st2.st_size;
                        if (bud->bytes > HOOKS_MAX_BYTES)
                                return -EFBIG;
                        out = openat(dst, de->d_name,
                                     O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                        if (out < 0)
                                return -errno;
                        r = stage_copy_fd_bytes(in, out);
                        if (r < 0)
                                return r;
                        if (fchmod(out, st2.st_mode & 0777) < 0)
                                return -errno;
                } else if (S_ISDIR(st.st_mode)) {
                        _cleanup_close_ int in = -1, out = -1;

                        in = openat(src, de->d_name,
                                    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (in < 0)
                                return -errno;
                        if (mkdirat(dst, de->d_name, 0700) < 0)
                                return -errno;
                        out = openat(dst, de->d_name,
                                     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (out < 0)
                                return -errno;
                        r = copy_tree(in, out, depth + 1, bud);
                        if (r < 0)
                                return r;
                        if (fchmod(out, st.st_mode & 0777) < 0)
                                return -errno;
                } else if (!bud->skipped) {
                        bud->skipped = "a fifo, socket or device";
                }
        }
        return errno ? -errno : 0;
}

/* Remove the hooks copies of launches that are gone: entries "<key>-<pid>" (every one with
 * our own pid when mine is set, else those whose pid no longer exists). */
static void prune_hook_copies(int rootfd, const char *key, bool mine)
{
        struct cs_error ignored;
        _cleanup_closedir_ DIR *d = NULL;
        int dfd = fcntl(rootfd, F_DUPFD_CLOEXEC, 3);
        size_t klen = key ? strlen(key) : 0;
        struct dirent *de;

        if (dfd < 0 || !(d = fdopendir(dfd))) {
                if (dfd >= 0)
                        close(dfd);
                return;
        }
        while ((de = readdir(d))) {
                const char *dash = strrchr(de->d_name, '-');
                char *end;
                long pid;

                if (!dash || (key && ((size_t)(dash - de->d_name) != klen ||
                                      strncmp(de->d_name, key, klen) != 0)))
                        continue;
                pid = strtol(dash + 1, &end, 10);
                if (*end || pid <= 0)
                        continue;
                if (mine ? pid != getpid() : (kill((pid_t)pid, 0) == 0 || errno != ESRCH))
                        continue;
                /* Best effort: what cannot go now goes with a later launch. */
                (void)cs_remove_at(dirfd(d), de->d_name, &ignored);
        }
}

void stage_release(const struct profile *p)
{
        _cleanup_close_ int rootfd = -1;

        if (p->state_fd < 0)
                return;
        rootfd = openat(p->state_fd, "git-hooks", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (rootfd >= 0)
                prune_hook_copies(rootfd, NULL, true);
}

int stage_git_dir(const struct profile *p, int git_fd, const char *git_dir, char **ret_config,
                  char **ret_hooks_copy, struct stage_warnings *warn, struct cs_error *err)
{
        _cleanup_free_ char *config = stage_path_join(git_dir, "config");
        _cleanup_free_ char *hooks = stage_path_join(git_dir, "hooks");
        _cleanup_free_ char *hooks_root = stage_path_join(p->state_dir, "git-hooks");
        _cleanup_free_ char *copy = NULL;
        _cleanup_close_ int rootfd = -1, cfd = -1, hfd = -1;
        const int gfd = git_fd;
        char key[17], name[40];
        struct cs_error why;
        struct stat st;
        bool config_ok = false, hooks_dir = false;
        int r;

        if (!config || !hooks || !hooks_root)
                return cs_error_set(err, ENOMEM, "stage %s", git_dir);

        if (fstatat(gfd, "config", &st, AT_SYMLINK_NOFOLLOW) == 0) {
                if (S_ISLNK(st.st_mode)) {
                        r = stage_warn(warn, err,
                                       "Warning: %s is a symlink, which git does not create, so "
                                       "the sandbox cannot protect it. Check where it points.",
                                       config);
                        if (r < 0)
                                return r;
                }
                config_ok = S_ISREG(st.st_mode);
        }

        if (fstatat(gfd, "hooks", &st, AT_SYMLINK_NOFOLLOW) == 0) {
                if (S_ISLNK(st.st_mode)) {
                        r = stage_warn(warn, err,
                                       "Warning: %s is a symlink, which git does not create, so "
                                       "the sandbox cannot protect it. Check where it points.",
                                       hooks);
                        if (r < 0)
                                return r;
                        *ret_config = config_ok ? cs_take_ptr(&config) : NULL;
                        *ret_hooks_copy = NULL;
                        return 0;
                }
                if (!S_ISDIR(st.st_mode)) {
                        /* A copy dir cannot be mounted over a file; git ignores it anyway. */
                        r = stage_warn(warn, err,
                                       "Warning: %s is not a directory, so the sandbox does not "
                                       "give it a copy of the hooks.",
                                       hooks);
                        if (r < 0)
                                return r;
                        *ret_config = config_ok ? cs_take_ptr(&config) : NULL;
                        *ret_hooks_copy = NULL;
                        return 0;
                }
                hooks_dir = true;
        } else if (errno != ENOENT) {
                return cs_error_set(err, errno, "stat %s", hooks);
        }

        if (stage_sha256_hex16(hooks, strlen(hooks), key) < 0)
                return cs_error_setx(err, EIO, "sha256 of %s failed", hooks);
        /* One copy per launch, <key>-<pid>: concurrent sessions in one repo each get their
         * own throwaway copy, and none empties another's while it runs. */
        snprintf(name, sizeof(name), "%s-%d", key, (int)getpid());
        copy = stage_path_join(hooks_root, name);
        if (!copy)
                return cs_error_set(err, ENOMEM, "stage %s", hooks);
        r = stage_open_subdir(p->state_fd, "git-hooks", hooks_root, 0700, &rootfd, err);
        if (r < 0)
                return r;
        prune_hook_copies(rootfd, key, false);
        r = stage_open_subdir(rootfd, name, copy, 0700, &cfd, err);
        if (r < 0)
                return r;
        r = cs_empty_dir(cfd, &why);
        if (r < 0)
                return cs_error_setx(err, -r,
                                     "Could not clear the sandbox's copy of %s at %s (%s); "
                                     "remove it with: rm -rf %s and launch again",
                                     hooks, copy, why.msg, copy);
        if (hooks_dir) {
                struct tree_budget bud = {0};

                hfd = openat(gfd, "hooks", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                r = hfd < 0 ? -errno : copy_tree(hfd, cfd, 0, &bud);
                if (r < 0) {
                        r = stage_warn(warn, err,
                                       "Warning: could not copy every hook from %s into the "
                                       "sandbox (%s); git in the sandbox runs without the "
                                       "missing ones.",
                                       hooks, strerror(-r));
                        if (r < 0)
                                return r;
                } else if (bud.skipped) {
                        r = stage_warn(warn, err,
                                       "Warning: %s holds %s, which the sandbox's copy leaves out.",
                                       hooks, bud.skipped);
                        if (r < 0)
                                return r;
                }
        }
        *ret_config = config_ok ? cs_take_ptr(&config) : NULL;
        *ret_hooks_copy = cs_take_ptr(&copy);
        return 0;
}
