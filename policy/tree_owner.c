/* A work tree another uid owns (a CI runner's workspace, with the job's steps running as root
 * in a container): csandbox launches there when git itself would, that is when git's
 * safe.directory lists it, read as git reads it: from the protected config only (system,
 * global, command line), never from the repository's own config, which whoever can write the
 * tree controls. The tree's owner is then accepted for what is bound from below it; every
 * other defence stays as for a tree of the caller's (every bind opened by fd below the
 * verified root, the git dirs bound on themselves, config read-only, hooks copied). */
#include "bind.h"
#include "worktree.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/path.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* One safe.directory value against root (resolved): "*" lists every directory; a value
 * ending in "/" "*" lists the dir and everything below it (git 2.46); a leading "~/" is the
 * caller's HOME; anything else names one directory, compared as written and resolved (git 2.45
 * resolves both). */
static bool safe_value_lists(const char *value, const char *root)
{
        _cleanup_free_ char *expanded = NULL;
        char real[PATH_MAX];
        const char *home = getenv("HOME");
        size_t n;
        bool prefix = false;

        if (strcmp(value, "*") == 0)
                return true;
        if (strncmp(value, "~/", 2) == 0) {
                if (!home || home[0] != '/' || asprintf(&expanded, "%s%s", home, value + 1) < 0) {
                        expanded = NULL;
                        return false;
                }
                value = expanded;
        }
        if (value[0] != '/')
                return false; /* %(prefix)/, ~user/, relative: nothing csandbox resolves */
        n = strlen(value);
        if (n >= 2 && strcmp(value + n - 2, "/*") == 0) {
                prefix = true;
                n -= 2;
        }
        while (n > 1 && value[n - 1] == '/')
                n--;
        for (int pass = 0; pass < 2; pass++) {
                char want[PATH_MAX];
                size_t m;

                if (n >= sizeof(want))
                        return false;
                memcpy(want, value, n);
                want[n] = '\0';
                if (pass == 1) {
                        if (!realpath(want, real))
                                return false;
                        snprintf(want, sizeof(want), "%s", real);
                }
                m = strlen(want);
                if (strcmp(want, root) == 0)
                        return true;
                if (prefix &&
                    (strcmp(want, "/") == 0 || (strncmp(want, root, m) == 0 && root[m] == '/')))
                        return true;
        }
        return false;
}

/* Whether git's protected config lists root in safe.directory: `git config --show-scope -z
 * --get-all safe.directory` run from / (with the environment every git csandbox runs gets:
 * PATH and HOME only), values of a local or worktree scope ignored. An empty value clears
 * the list, as in git. -1 (err set) when git cannot be run; 0 when git is missing. */
static int safe_directory_lists(const char *root, bool *ret_git, struct cs_error *err)
{
        char *args[] = {"config", "--show-scope", "-z", "--get-all", "safe.directory", NULL};
        _cleanup_free_ char *out = NULL, *git = cs_find_program("git");
        size_t len = 0;
        bool listed = false;
        int r;

        *ret_git = git != NULL;
        if (!git)
                return 0;
        r = worktree_git("/", args, true, &out, &len, err);
        if (r < 0)
                return r;
        for (size_t i = 0; out && i < len;) {
                const char *scope = out + i, *value, *end;

                end = memchr(scope, '\0', len - i);
                if (!end)
                        break;
                value = end + 1;
                if ((size_t)(value - out) >= len ||
                    !(end = memchr(value, '\0', len - (size_t)(value - out))))
                        break;
                i = (size_t)(end - out) + 1;
                if (strcmp(scope, "system") != 0 && strcmp(scope, "global") != 0 &&
                    strcmp(scope, "command") != 0)
                        continue;
                if (value[0] == '\0')
                        listed = false;
                else if (safe_value_lists(value, root))
                        listed = true;
        }
        return listed ? 1 : 0;
}

int plan_tree_owner_check(int root_fd, const char *root, bool git_answered,
                          const char *outside_git_dir, struct plan_tree_owner *ret,
                          struct cs_error *err)
{
        struct stat st;
        uid_t owner;
        bool git;
        int r;

        *ret = (struct plan_tree_owner){0};
        if (fstat(root_fd, &st) < 0)
                return cs_error_set(err, errno, "stat the work tree %s", root);
        ret->uid = st.st_uid;
        owner = st.st_uid;
        if (plan_owner_is_trusted(st.st_uid))
                return 0;
        r = safe_directory_lists(root, &git, err);
        if (r < 0)
                return r;
        /* A repository git gave no answer for: git refused it, whatever csandbox reads in
         * safe.directory (a form this git does not take), and csandbox goes by git. */
        if (r > 0 && !git_answered && fstatat(root_fd, ".git", &st, AT_SYMLINK_NOFOLLOW) == 0)
                r = 0;
        if (r > 0) {
                ret->listed = true;
                plan_bind_accept_owner(root, git_answered ? outside_git_dir : NULL, owner);
                return 0;
        }
        if (!git)
                return cs_error_setx(
                    err, EPERM,
                    "the work tree %s belongs to uid %u, neither to you (uid %u) nor to root, "
                    "and there is no git here to read safe.directory from; csandbox launches in "
                    "another user's tree only when git's safe.directory lists it. Install git, "
                    "then, if you trust this directory (a CI job's workspace), run: git config "
                    "--global --add safe.directory %s",
                    root, (unsigned)owner, (unsigned)getuid(), root);
        return cs_error_setx(
            err, EPERM,
            "the work tree %s belongs to uid %u, neither to you (uid %u) nor to root, and git's "
            "safe.directory (in the system or global git config) does not list it in a form "
            "this git takes: git itself refuses such a repository (\"dubious ownership\"), and "
            "csandbox launches there only when git would. If you trust this directory (a CI "
            "job's workspace), run: git config --global --add safe.directory %s",
            root, (unsigned)owner, (unsigned)getuid(), root);
}
