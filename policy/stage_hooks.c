/* §2.6: a git dir's config, and its hooks dir opened for the copy the runner makes in a
 * tmpfs of the sandbox (nothing is written on the host). */
#include "stage.h"
#include "stage_util.h"

#include "common/cleanup.h"
#include "common/error.h"
#include "common/fileio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void stage_hooks_cleanup(int state_fd)
{
        /* Dropped: best effort: a leftover of an old version is only disk space. */
        struct cs_error ignored;
        _cleanup_closedir_ DIR *d = NULL;
        int dfd = openat(state_fd, "git-hooks", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
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

                if (!dash)
                        continue;
                pid = strtol(dash + 1, &end, 10);
                /* A launch of an earlier version may still be running on its copy. */
                if (*end || pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
                        continue;
                (void)cs_remove_at(dirfd(d), de->d_name, &ignored);
        }
        (void)unlinkat(state_fd, "git-hooks", AT_REMOVEDIR);
}

int stage_git_dir(int git_fd, const char *git_dir, char **ret_config, int *ret_hooks_fd,
                  bool *ret_hooks_missing, struct stage_warnings *warn, struct cs_error *err)
{
        _cleanup_free_ char *config = cs_path_join(git_dir, "config");
        _cleanup_free_ char *hooks = cs_path_join(git_dir, "hooks");
        struct stat st;
        bool config_ok = false;
        int r;

        *ret_config = NULL;
        *ret_hooks_fd = -1;
        *ret_hooks_missing = false;
        if (!config || !hooks)
                return cs_error_set(err, ENOMEM, "stage %s", git_dir);

        if (fstatat(git_fd, "config", &st, AT_SYMLINK_NOFOLLOW) == 0) {
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

        /* Opened once, here, without following a link: the runner copies what this fd is
         * into a tmpfs of the sandbox's own. */
        *ret_hooks_fd = openat(git_fd, "hooks", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (*ret_hooks_fd < 0 && errno == ENOENT) {
                *ret_hooks_missing = true;
        } else if (*ret_hooks_fd < 0 && (errno == ELOOP || errno == ENOTDIR)) {
                /* With O_DIRECTORY a link gives ENOTDIR too: tell them apart. */
                bool link =
                    fstatat(git_fd, "hooks", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);

                r = stage_warn(warn, err,
                               link ? "Warning: %s is a symlink, which git does not create, so "
                                      "the sandbox cannot protect it. Check where it points."
                                    : "Warning: %s is not a directory, so the sandbox does not "
                                      "give it a copy of the hooks.",
                               hooks);
                if (r < 0)
                        return r;
        } else if (*ret_hooks_fd < 0) {
                return cs_error_set(err, errno, "open %s", hooks);
        }
        *ret_config = config_ok ? cs_take_ptr(&config) : NULL;
        return 0;
}
