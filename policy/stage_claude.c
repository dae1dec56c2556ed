/* The host claude binary, found as the reference finds it and opened once: the sandbox gets
 * that file, bound read-only (no copy). */
#include "stage.h"
#include "stage_util.h"

#include "common/cleanup.h"
#include "common/error.h"
#include "common/fileio.h"
#include "common/path.h"
#include "policy/profile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Once per machine: the copies csandbox staged before it bound the host's binary. */
static void claude_cache_remove(const struct profile_config *c)
{
        const char *runtime = getenv("XDG_RUNTIME_DIR");
        const char *bases[] = {c->data_home, runtime && runtime[0] == '/' ? runtime : NULL};
        /* Dropped: best effort: a leftover of an old version is only disk space. */
        struct cs_error ignored;

        for (size_t i = 0; i < sizeof(bases) / sizeof(bases[0]); i++) {
                _cleanup_free_ char *dir = NULL;
                _cleanup_close_ int fd = -1;

                if (!bases[i] || asprintf(&dir, "%s/csandbox", bases[i]) < 0)
                        continue;
                fd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd >= 0)
                        (void)cs_remove_at(fd, "claude", &ignored);
        }
}

int claude_blocked(const char *bin, struct cs_error *err)
{
        _cleanup_free_ char *path = NULL;
        _cleanup_free_ char *mount = NULL;
        const char *from =
            strcmp(bin, "claude") == 0 ? "the first claude on PATH" : "CLAUDE_PROFILE_CLAUDE_BIN";

        if (!cs_program_blocked(bin, &path, &mount))
                return 0;
        if (mount)
                return cs_error_setx(
                    err, EACCES,
                    "claude is installed at %s (%s), but it cannot run: it lies on %s, which is "
                    "mounted noexec. Install claude where programs may run (Anthropic's native "
                    "installer puts it in ~/.local), remount that filesystem with exec (sudo "
                    "mount -o remount,exec %s), or point CLAUDE_PROFILE_CLAUDE_BIN at a claude "
                    "on another mount",
                    path, from, mount, mount);
        return cs_error_setx(err, EACCES,
                             "claude is installed at %s (%s), but it cannot run: you have no "
                             "permission to execute it. Fix it with `chmod +x %s`, or point "
                             "CLAUDE_PROFILE_CLAUDE_BIN at another claude",
                             path, from, path);
}

int stage_claude(const struct profile_config *c, int *ret_fd, char **ret_path, bool *ret_missing,
                 struct cs_error *err)
{
        _cleanup_free_ char *found = NULL;
        _cleanup_free_ char *resolved = NULL;
        _cleanup_close_ int fd = -1;
        struct stat st;

        *ret_fd = -1;
        *ret_path = NULL;
        found = cs_find_program(c->claude_bin ? c->claude_bin : "claude");
        if (found)
                resolved = realpath(found, NULL);
        if (!found && claude_blocked(c->claude_bin ? c->claude_bin : "claude", err) < 0)
                return -err->err;
        if (!found || !resolved) {
                *ret_missing = true;
                return 0;
        }
        /* The file itself, opened once: an update on the host renames a new file into place,
         * so the inode a session runs is never rewritten, and the next launch opens the new
         * one. */
        fd = open(resolved, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return cs_error_set(err, errno, "open %s (claude)", resolved);
        if (fstat(fd, &st) < 0)
                return cs_error_set(err, errno, "stat %s (claude)", resolved);
        if (!S_ISREG(st.st_mode))
                return cs_error_setx(err, EINVAL, "%s (claude) is not a regular file", resolved);
        if (st.st_mode & S_IWOTH)
                return cs_error_setx(err, EPERM,
                                     "%s (claude) is writable by every user (mode %04o): any of "
                                     "them could change what runs. Fix it with `chmod o-w %s`",
                                     resolved, (unsigned)(st.st_mode & 07777), resolved);
        claude_cache_remove(c);
        *ret_fd = cs_take_fd(&fd);
        *ret_path = cs_take_ptr(&resolved);
        *ret_missing = false;
        return 0;
}
