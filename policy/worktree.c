/* The work tree a launch mounts (reference §2.3, §2.1, §2.6, §2.4 row 12). */
#include "worktree.h"
#include "stage.h"

#include "../common/cleanup.h"
#include "../common/strv.h"
#include "../common/error.h"
#include "../common/fileio.h"
#include "../common/path.h"
#include "../common/resolve.h"
#include "../common/spawn.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define GIT_OUTPUT_MAX    (64u << 10)
#define MODULES_DEPTH_MAX 32
#define MODULES_ENTRY_MAX 4096

/* "/" is an ancestor of everything; otherwise a strict prefix followed by '/'. */
static bool path_is_ancestor(const char *anc, const char *path)
{
        size_t n = strlen(anc);

        if (strcmp(anc, "/") == 0)
                return strcmp(path, "/") != 0;
        return strncmp(anc, path, n) == 0 && path[n] == '/';
}

/* The work tree's .git/config is hostile (a session wrote it, or a nested repository's did):
 * whatever git would execute because a config says so is switched off for every git that
 * csandbox runs. The command line outranks every config file, includes too, and reaches
 * git's own child processes (GIT_CONFIG_PARAMETERS). The user's global and the system
 * config are the user's own and stay in effect. Filters, textconv and diff.external run
 * only for commands that read file content (add, diff, status, checkout): csandbox runs
 * none of those, and reads the index itself (policy/trust.c), never through git. */
static const char *const git_hardening[] = {
    "core.fsmonitor=false",     /* run by any command that reads the index */
    "core.hooksPath=/dev/null", /* no hook of the tree's */
    "core.sshCommand=false",    /* and GIT_ALLOW_PROTOCOL: no transport at all */
    "protocol.allow=never",
    "credential.helper=", /* the empty value clears the list of helpers */
    "gc.auto=0",
    "maintenance.auto=false",
    "core.pager=cat",
};
#define GIT_HARDENING_N (sizeof(git_hardening) / sizeof(git_hardening[0]))
#define GIT_TIMEOUT_MS  20000

int worktree_git_start(const char *cwd, char *const *args, struct cs_spawned *ret,
                       struct cs_error *err)
{
        _cleanup_free_ char *env_path = NULL, *env_home = NULL, *git = NULL;
        const char *path = getenv("PATH"), *home = getenv("HOME");
        char *argv[2 * GIT_HARDENING_N + 16] = {"git", "--no-pager"};
        char *envp[8] = {NULL};
        size_t n = 2, n_env = 0;

        *ret = (struct cs_spawned){.pid = -1, .out = -1};
        for (size_t i = 0; i < GIT_HARDENING_N; i++) {
                argv[n++] = "-c";
                argv[n++] = (char *)git_hardening[i];
        }
        argv[n++] = "-C";
        argv[n++] = (char *)cwd;
        for (; *args && n < 2 * GIT_HARDENING_N + 15; args++)
                argv[n++] = *args;
        argv[n] = NULL;
        if (asprintf(&env_path, "PATH=%s", path && *path ? path : CS_DEFAULT_PATH) < 0) {
                env_path = NULL;
                return cs_error_set(err, ENOMEM, "run git");
        }
        envp[n_env++] = env_path;
        /* Set, it overrides every protocol.<name>.allow a config has (ext:: runs a command). */
        envp[n_env++] = "GIT_ALLOW_PROTOCOL=";
        envp[n_env++] = "GIT_PROTOCOL_FROM_USER=0";
        /* What a commit holds, not what a replace ref or a graft the session wrote says it
         * holds (the judge's diff of a moved branch reads both sides through them). */
        envp[n_env++] = "GIT_NO_REPLACE_OBJECTS=1";
        envp[n_env++] = "GIT_GRAFT_FILE=/dev/null";
        if (home && *home) {
                if (asprintf(&env_home, "HOME=%s", home) < 0) {
                        env_home = NULL;
                        return cs_error_set(err, ENOMEM, "run git");
                }
                envp[n_env++] = env_home;
        }
        /* Found on the caller's PATH (the one git is given) by absolute entries only: a "."
         * or an empty entry would run a `git` the session left in the work tree. */
        git = cs_find_program("git");
        if (!git)
                return 0; /* no git: as outside a repository */
        /* Dropped: git that cannot be started is git that is not there. */
        (void)cs_spawn_start(&(struct cs_spawn){.path = git,
                                                .argv = argv,
                                                .envp = envp,
                                                .max = GIT_OUTPUT_MAX,
                                                /* a FIFO the session left where git reads
                                                 * (alternates, a ref) must not hold csandbox */
                                                .timeout_ms = GIT_TIMEOUT_MS},
                             ret);
        return 0;
}

int worktree_git_finish(struct cs_spawned *h, bool raw, char **ret, size_t *ret_len,
                        struct cs_error *err)
{
        _cleanup_(cs_capture_free) struct cs_capture c = {0};
        _cleanup_free_ char *out = NULL;
        size_t len;

        *ret = NULL;
        if (h->pid < 0)
                return 0;
        cs_spawn_finish(h, &c);
        if (c.too_big)
                return cs_error_setx(err, EFBIG, "git's output is larger than %u bytes",
                                     GIT_OUTPUT_MAX);
        if (c.timed_out)
                return cs_error_setx(err, ETIMEDOUT, "git did not finish within %d s",
                                     GIT_TIMEOUT_MS / 1000);
        if (!cs_capture_ok(&c))
                return 0;
        out = cs_take_ptr(&c.out);
        len = c.len;
        if (!raw && len > 0 && out[len - 1] == '\n')
                out[--len] = '\0';
        if (len == 0 || (!raw && memchr(out, '\0', len)))
                return 0;
        if (ret_len)
                *ret_len = len;
        *ret = cs_take_ptr(&out);
        return 0;
}

int worktree_git(const char *cwd, char *const *args, bool raw, char **ret, size_t *ret_len,
                 struct cs_error *err)
{
        struct cs_spawned h;
        int r = worktree_git_start(cwd, args, &h, err);

        *ret = NULL;
        return r < 0 ? r : worktree_git_finish(&h, raw, ret, ret_len, err);
}

/* `git -C cwd rev-parse <what>`, or NULL (outside a repository, no git, any failure). */
static char *git_rev_parse(const char *cwd, const char *what)
{
        char *args[] = {"rev-parse", (char *)what, NULL};
        /* Dropped: git failing means "not a repository", as for claude-profile. */
        struct cs_error ignored;
        char *out = NULL;

        return worktree_git(cwd, args, false, &out, NULL, &ignored) < 0 ? NULL : out;
}

/* Whether git could find a repository from dir: an ancestor (or dir) with a .git entry, or
 * one that is itself a git dir (HEAD, objects/, refs/). Cheaper than asking git. */
static bool maybe_in_repo(const char *dir)
{
        char path[PATH_MAX];

        snprintf(path, sizeof(path), "%s", dir);
        for (;;) {
                struct stat st;
                char probe[PATH_MAX + 16];
                char *slash;

                snprintf(probe, sizeof(probe), "%s/.git", strcmp(path, "/") ? path : "");
                if (lstat(probe, &st) == 0)
                        return true;
                snprintf(probe, sizeof(probe), "%s/HEAD", strcmp(path, "/") ? path : "");
                if (lstat(probe, &st) == 0) {
                        snprintf(probe, sizeof(probe), "%s/objects", strcmp(path, "/") ? path : "");
                        if (lstat(probe, &st) == 0)
                                return true;
                }
                if (strcmp(path, "/") == 0)
                        return false;
                slash = strrchr(path, '/');
                if (slash == path)
                        slash[1] = '\0';
                else
                        *slash = '\0';
        }
}

/* `git rev-parse --show-toplevel --git-common-dir`: the top level, and *ret_common; both
 * NULL when git fails. */
static char *git_rev_parse2(const char *cwd, char **ret_common)
{
        char *args[] = {"rev-parse", "--show-toplevel", "--git-common-dir", NULL};
        /* Dropped: git failing means "not a repository", as for claude-profile. */
        struct cs_error ignored;
        char *out = NULL, *nl;

        *ret_common = NULL;
        if (worktree_git(cwd, args, false, &out, NULL, &ignored) < 0 || !out)
                return NULL;
        nl = strchr(out, '\n');
        if (!nl || !nl[1] || strchr(nl + 1, '\n')) {
                free(out);
                return NULL;
        }
        *nl = '\0';
        *ret_common = strdup(nl + 1);
        return out;
}

struct modules_walk {
        char **dirs;
        int *fds;
        size_t n;
        size_t entries;
};

static int name_cmp(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A git dir found: its path (for messages and --plan) and a copy of the fd it was found
 * through, which is what a launch binds. */
static int walk_record(struct modules_walk *w, const char *path, int fd)
{
        char **nd = realloc(w->dirs, (w->n + 1) * sizeof(*nd));
        int *nf;

        if (!nd)
                return -ENOMEM;
        w->dirs = nd;
        nf = realloc(w->fds, (w->n + 1) * sizeof(*nf));
        if (!nf)
                return -ENOMEM;
        w->fds = nf;
        w->dirs[w->n] = strdup(path);
        w->fds[w->n] = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (!w->dirs[w->n] || w->fds[w->n] < 0) {
                free(w->dirs[w->n]);
                if (w->fds[w->n] >= 0)
                        close(w->fds[w->n]);
                return -ENOMEM;
        }
        w->n++;
        return 0;
}

/* Sorted names of dir_fd's entries (not "." and ".."). */
static int dir_names(int dir_fd, const char *path, char ***ret, size_t *ret_n,
                     struct modules_walk *w, struct cs_error *err)
{
        _cleanup_closedir_ DIR *d = NULL;
        char **names = NULL;
        size_t n = 0;
        struct dirent *de;
        int fd = dup(dir_fd);

        if (fd < 0 || !(d = fdopendir(fd))) {
                if (fd >= 0)
                        close(fd);
                return cs_error_set(err, errno, "read %s", path);
        }
        while ((errno = 0, de = readdir(d))) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (++w->entries > MODULES_ENTRY_MAX) {
                        errno = E2BIG;
                        break;
                }
                if (strv_push_dup(&names, &n, de->d_name) < 0) {
                        errno = ENOMEM;
                        break;
                }
        }
        if (errno) {
                int e = errno;

                for (size_t i = 0; i < n; i++)
                        free(names[i]);
                free(names);
                if (e == E2BIG)
                        return cs_error_setx(err, E2BIG,
                                             "%s: more than %d entries under the submodule git "
                                             "dirs, which csandbox does not walk",
                                             path, MODULES_ENTRY_MAX);
                return cs_error_set(err, e, "read %s", path);
        }
        if (n > 1)
                qsort(names, n, sizeof(*names), name_cmp);
        *ret = names;
        *ret_n = n;
        return 0;
}

/* §2.6: depth first over sorted entries; links and non-dirs are skipped (a linked entry
 * could name any host dir); a dir with HEAD and objects/ is a submodule git dir, recorded
 * and then its own modules/ walked; any other dir is descended into (modules/vendor/lib). */
static int modules_walk(int dir_fd, const char *path, int depth, struct modules_walk *w,
                        struct cs_error *err)
{
        char **names = NULL;
        size_t n = 0;
        int r;

        if (depth > MODULES_DEPTH_MAX)
                return cs_error_setx(err, ELOOP,
                                     "%s: submodule git dirs nested deeper than %d levels, "
                                     "which csandbox does not walk",
                                     path, MODULES_DEPTH_MAX);
        r = dir_names(dir_fd, path, &names, &n, w, err);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n && r == 0; i++) {
                _cleanup_free_ char *child_path = NULL;
                _cleanup_close_ int child = -1;
                struct stat st;
                bool is_git_dir;

                /* O_NOFOLLOW|O_DIRECTORY: a link or a non-dir fails to open and is skipped,
                 * with no window between a check and the open. */
                child = openat(dir_fd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (child < 0)
                        continue;
                if (asprintf(&child_path, "%s/%s", path, names[i]) < 0) {
                        child_path = NULL;
                        r = cs_error_set(err, ENOMEM, "walk %s", path);
                        break;
                }
                /* HEAD and objects may follow links (as the reference's is_file/is_dir do):
                 * recognising more git dirs only protects more. */
                is_git_dir = fstatat(child, "HEAD", &st, 0) == 0 && S_ISREG(st.st_mode) &&
                             fstatat(child, "objects", &st, 0) == 0 && S_ISDIR(st.st_mode);
                if (is_git_dir) {
                        _cleanup_close_ int modules = -1;
                        _cleanup_free_ char *modules_path = NULL;

                        if (walk_record(w, child_path, child) < 0) {
                                r = cs_error_set(err, ENOMEM, "walk %s", path);
                                break;
                        }
                        modules = openat(child, "modules",
                                         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (modules < 0)
                                continue;
                        if (asprintf(&modules_path, "%s/modules", child_path) < 0) {
                                modules_path = NULL;
                                r = cs_error_set(err, ENOMEM, "walk %s", path);
                                break;
                        }
                        r = modules_walk(modules, modules_path, depth + 1, w, err);
                } else {
                        r = modules_walk(child, child_path, depth + 1, w, err);
                }
        }
        for (size_t i = 0; i < n; i++)
                free(names[i]);
        free(names);
        return r;
}

static int git_dirs_find(const char *common_dir, char ***ret, int **ret_fds, size_t *ret_n,
                         struct cs_error *err)
{
        struct modules_walk w = {0};
        _cleanup_close_ int rootfd = -1, common = -1, modules = -1;
        _cleanup_free_ char *modules_path = NULL;
        int r;

        /* common_dir is resolved (no links); a link planted on its way since is refused. */
        rootfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        common = rootfd < 0 ? -1 : cs_open_beneath(rootfd, common_dir + 1, O_RDONLY | O_DIRECTORY);
        if (common < 0)
                return cs_error_set(err, errno,
                                    "open the git dir %s (resolved a moment ago; a symlink or a "
                                    "non-directory on its way now is refused)",
                                    common_dir);
        r = walk_record(&w, common_dir, common);
        if (r < 0)
                goto fail_oom;
        modules = openat(common, "modules", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (modules >= 0) {
                if (asprintf(&modules_path, "%s/modules", common_dir) < 0) {
                        modules_path = NULL;
                        goto fail_oom;
                }
                r = modules_walk(modules, modules_path, 1, &w, err);
                if (r < 0)
                        goto fail;
        }
        *ret = w.dirs;
        *ret_fds = w.fds;
        *ret_n = w.n;
        return 0;
fail_oom:
        r = cs_error_set(err, ENOMEM, "find the git dirs of %s", common_dir);
fail:
        for (size_t i = 0; i < w.n; i++) {
                free(w.dirs[i]);
                close(w.fds[i]);
        }
        free(w.dirs);
        free(w.fds);
        return r;
}

void worktree_free(struct worktree *w)
{
        if (!w)
                return;
        free(w->cwd);
        free(w->root);
        free(w->common_dir);
        for (size_t i = 0; i < w->n_git_dirs; i++) {
                free(w->git_dirs[i]);
                if (w->git_dir_fds[i] >= 0)
                        close(w->git_dir_fds[i]);
        }
        free(w->git_dirs);
        free(w->git_dir_fds);
        memset(w, 0, sizeof(*w));
}

int worktree_detect(const char *cwd, struct worktree *ret, struct cs_error *err)
{
        struct worktree w = {0};
        _cleanup_free_ char *top = NULL, *common = NULL, *joined = NULL;
        int r;

        w.cwd = cwd ? realpath(cwd, NULL) : getcwd(NULL, 0);
        if (!w.cwd)
                return cs_error_set(err, errno, "resolve the working directory %s", cwd ? cwd : "");
        /* One git for both answers; apart only when it is no work tree (inside a .git dir,
         * where git knows the common dir but no top level). No git at all where no
         * ancestor could be a repository: a launch outside one spawns none. */
        if (maybe_in_repo(w.cwd))
                top = git_rev_parse2(w.cwd, &common);
        if (top)
                w.root = realpath(top, NULL);
        if (!w.root)
                w.root = strdup(w.cwd);
        if (!w.root)
                goto oom;
        if (!top && maybe_in_repo(w.cwd))
                common = git_rev_parse(w.cwd, "--git-common-dir");
        if (common && common[0] != '/') {
                if (asprintf(&joined, "%s/%s", w.cwd, common) < 0) {
                        joined = NULL;
                        goto oom;
                }
                w.common_dir = realpath(joined, NULL);
        } else if (common) {
                w.common_dir = realpath(common, NULL);
        }
        if (w.common_dir) {
                w.common_outside =
                    strcmp(w.common_dir, w.root) != 0 && !path_is_ancestor(w.root, w.common_dir);
                r = git_dirs_find(w.common_dir, &w.git_dirs, &w.git_dir_fds, &w.n_git_dirs, err);
                if (r < 0) {
                        worktree_free(&w);
                        return r;
                }
        }
        *ret = w;
        return 0;
oom:
        worktree_free(&w);
        return cs_error_set(err, ENOMEM, "find the work tree of %s", cwd ? cwd : ".");
}

/* Python's Path.resolve() (not strict): the longest existing prefix resolved, the rest
 * appended as it is. */
static char *path_resolve_lenient(const char *path)
{
        _cleanup_free_ char *abs = NULL, *parent = NULL, *head = NULL;
        char *slash, *r;

        if (path[0] != '/') {
                _cleanup_free_ char *cwd = getcwd(NULL, 0);

                if (!cwd || asprintf(&abs, "%s/%s", cwd, path) < 0)
                        return NULL;
        } else if (!(abs = strdup(path))) {
                return NULL;
        }
        r = realpath(abs, NULL);
        if (r || (errno != ENOENT && errno != ENOTDIR))
                return r;
        slash = strrchr(abs, '/');
        if (slash == abs)
                return strdup(abs);
        parent = strndup(abs, (size_t)(slash - abs));
        if (!parent || !(head = path_resolve_lenient(parent)))
                return NULL;
        if (asprintf(&r, "%s%s%s", head, strcmp(head, "/") == 0 ? "" : "/", slash + 1) < 0)
                return NULL;
        return r;
}

/* Whether common_dir really is the common dir of the linked worktree at root: git records
 * each linked worktree in <common>/worktrees/<name>/gitdir as "<root>/.git". The work tree
 * is writable from inside, so its .git file (or a planted commondir) alone proves nothing:
 * the link must point back from the common dir, which the sandbox cannot write. */
static bool common_dir_points_back(const char *common_dir, const char *root)
{
        _cleanup_free_ char *wt = NULL, *want = NULL;
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        size_t seen = 0;

        if (asprintf(&wt, "%s/worktrees", common_dir) < 0 || asprintf(&want, "%s/.git", root) < 0)
                return false;
        d = opendir(wt);
        while (d && (de = readdir(d)) && seen++ < MODULES_ENTRY_MAX) {
                _cleanup_free_ char *buf = NULL;
                /* Dropped: a module dir without a readable gitdir does not point back. */
                struct cs_error ignored;
                _cleanup_close_ int fd = -1;
                size_t len;

                if (de->d_name[0] == '.')
                        continue;
                fd = openat(dirfd(d), de->d_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0 || cs_read_file_at(fd, "gitdir", 4096, true, &buf, &len, &ignored) < 0)
                        continue;
                while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
                        buf[--len] = '\0';
                if (strcmp(buf, want) == 0)
                        return true;
        }
        return false;
}

/* Whether common_dir is the git dir of a submodule checked out at root: `git submodule`
 * keeps it under the superproject's .git/modules/ with core.worktree naming the checkout
 * (relative to the git dir). As for a linked worktree, the link must point back from the git
 * dir, whose config the sandbox cannot write (it is pinned read-only in every launch that
 * mounts it); the checkout's .git file alone proves nothing. git reads the config (no
 * second parser), with the git dir given, so no discovery rule or safe.bareRepository
 * decides for it. */
static bool submodule_points_back(const char *common_dir, const char *root)
{
        char *args[] = {"--git-dir=.", "config", "--local", "--get", "core.worktree", NULL};
        _cleanup_free_ char *wt = NULL, *joined = NULL, *real = NULL;
        /* Dropped: git failing to read core.worktree means it does not point back. */
        struct cs_error ignored;

        if (worktree_git(common_dir, args, false, &wt, NULL, &ignored) < 0 || !wt)
                return false;
        if (wt[0] == '/')
                real = realpath(wt, NULL);
        else if (asprintf(&joined, "%s/%s", common_dir, wt) >= 0)
                real = realpath(joined, NULL);
        return real && strcmp(real, root) == 0;
}

/* git's answers come from files in the work tree, which the previous session could write
 * (core.worktree in .git/config, a .git file, .git/commondir): accept only a work root that
 * contains the cwd, and a git dir outside it only when it points back at this work tree. */
static int worktree_check_git(const struct worktree *w, struct cs_error *err)
{
        if (strcmp(w->root, w->cwd) != 0 && !path_is_ancestor(w->root, w->cwd))
                return cs_error_setx(err, EPERM,
                                     "Refusing to start the sandbox in %s: git says its work "
                                     "tree is %s, which does not contain it (core.worktree or "
                                     "a .git file pointing elsewhere, which a sandboxed "
                                     "session could have planted). Check the repository's .git "
                                     "before launching.",
                                     w->cwd, w->root);
        {
                /* A .git directory never has a commondir of its own (linked worktrees have
                 * a .git file): one there redirects git to another config and hooks. */
                _cleanup_free_ char *cd = NULL;
                struct stat st;

                if (asprintf(&cd, "%s/.git/commondir", w->root) >= 0 && lstat(cd, &st) == 0)
                        return cs_error_setx(err, EPERM,
                                             "Refusing to start the sandbox in %s: %s exists, "
                                             "which git does not create in a repository's "
                                             ".git directory; a sandboxed session could have "
                                             "planted it to point git at another config. "
                                             "Check it and remove it before launching.",
                                             w->cwd, cd);
        }
        if (w->common_dir && w->common_outside && !common_dir_points_back(w->common_dir, w->root) &&
            !submodule_points_back(w->common_dir, w->root))
                return cs_error_setx(
                    err, EPERM,
                    "Refusing to start the sandbox in %s: its git dir is %s, "
                    "outside the work tree %s, and nothing is pointing back at it: "
                    "%s/worktrees/ has no entry naming %s/.git, as a linked "
                    "worktree's would, and its core.worktree does not name "
                    "%s, as a submodule's does (a .git file or .git/commondir "
                    "pointing elsewhere, which a sandboxed session could have "
                    "planted). Check %s/.git, or start from the main "
                    "checkout.",
                    w->cwd, w->common_dir, w->root, w->common_dir, w->root, w->root, w->root);
        return 0;
}

int worktree_refuse(const struct worktree *w, const char *home, const char *profiles_base,
                    struct cs_error *err)
{
        _cleanup_free_ char *home_r = path_resolve_lenient(home);
        _cleanup_free_ char *base_r = path_resolve_lenient(profiles_base);

        if (!home_r || !base_r)
                return cs_error_set(err, errno ? errno : ENOMEM, "resolve %s and %s", home,
                                    profiles_base);
        if (strcmp(w->root, home_r) == 0 || path_is_ancestor(w->root, home_r))
                return cs_error_setx(err, EPERM,
                                     "Refusing to start the sandbox in %s: it would mount %s "
                                     "read-write, which includes your whole home directory. "
                                     "cd into a project directory first.",
                                     w->cwd, w->root);
        if (strcmp(w->root, base_r) == 0 || path_is_ancestor(base_r, w->root) ||
            path_is_ancestor(w->root, base_r))
                return cs_error_setx(err, EPERM,
                                     "Refusing to start the sandbox in %s: it would mount %s "
                                     "read-write, which overlaps the profiles dir %s and with "
                                     "it every profile's credentials. cd into a project "
                                     "directory first.",
                                     w->cwd, w->root, profiles_base);
        return worktree_check_git(w, err);
}

int worktree_ancestor_mcp(const struct worktree *w, char ***ret, size_t *ret_n,
                          struct stage_warnings *warn, struct cs_error *err)
{
        _cleanup_free_ char *dir = strdup(w->root);
        char **found = NULL;
        size_t n = 0;

        if (!dir)
                goto oom;
        while (strcmp(dir, "/") != 0) {
                _cleanup_free_ char *path = NULL;
                _cleanup_close_ int fd = -1;
                char *slash = strrchr(dir, '/');
                struct stat st;

                if (!slash)
                        break;
                slash[slash == dir ? 1 : 0] = '\0';
                if (asprintf(&path, "%s/.mcp.json", strcmp(dir, "/") == 0 ? "" : dir) < 0) {
                        path = NULL;
                        goto oom;
                }
                /* The reference's is_file() follows a link; csandbox does not mount a linked
                 * .mcp.json at all, so a link cannot bring another file in read-only. */
                fd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
                if (fd >= 0 && fstat(fd, &st) == 0 && S_ISLNK(st.st_mode) &&
                    stage_warn(warn, err,
                               "Warning: %s is a symlink, so it is not mounted into the sandbox "
                               "(a link could bring in any file); claude there does not see its "
                               "MCP servers. Make it a regular file to use them.",
                               path) < 0)
                        goto oom;
                if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                        continue;
                if (strv_push(&found, &n, cs_take_ptr(&path)) < 0)
                        goto oom;
        }
        *ret = found;
        *ret_n = n;
        return 0;
oom:
        for (size_t i = 0; i < n; i++)
                free(found[i]);
        free(found);
        return cs_error_set(err, ENOMEM, "find the .mcp.json files above %s", w->root);
}
