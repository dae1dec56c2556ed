/* The first defence (trust_protect): the profile's scripts and what its settings make the
 * host run are bound read-only inside, so a session cannot rewrite them. */
#include "trust.h"
#include "trust_rules.h"
#include "trust_util.h"

#include "plan.h"
#include "profile.h"
#include "worktree.h"

#include "../common/cleanup.h"
#include "../common/strv.h"
#include "../common/error.h"
#include "../common/fileio.h"
#include "../common/resolve.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SETTINGS_FILE_MAX (32u << 20) /* .claude.json holds a history too */

/* A read-only bind of base/rel over itself (base_fd: base, verified), unless something is
 * mounted at dest already. The source is opened once beneath base_fd, like every bind. */
static int protect_bind(struct sandbox_spec *s, int base_fd, const char *base, const char *rel,
                        const char *dest_base, struct cs_error *err)
{
        _cleanup_free_ char *src = NULL, *dst = NULL;

        if (asprintf(&src, "%s/%s", base, rel) < 0 || asprintf(&dst, "%s/%s", dest_base, rel) < 0)
                return cs_error_set(err, ENOMEM, "protect %s", rel);
        for (size_t i = 0; i < s->n_mounts; i++)
                if (strcmp(s->mounts[i].dest, dst) == 0)
                        return 0;
        return plan_bind_at(s, base_fd, base, src, dst, SPEC_MOUNT_RO, err);
}

/* Collapse "//", "." and ".." in an absolute path, in place. */
static void path_normalise(char *path)
{
        char *out = path, *in = path;

        while (*in) {
                while (*in == '/')
                        in++;
                if (!*in)
                        break;
                if (in[0] == '.' && (in[1] == '/' || !in[1])) {
                        in++;
                        continue;
                }
                if (in[0] == '.' && in[1] == '.' && (in[2] == '/' || !in[2])) {
                        in += 2;
                        while (out > path && *--out != '/')
                                ;
                        continue;
                }
                *out++ = '/';
                while (*in && *in != '/')
                        *out++ = *in++;
        }
        if (out == path)
                *out++ = '/';
        *out = '\0';
}

struct protect_ctx {
        struct sandbox_spec *s;
        const struct profile *p;
        struct trust_watch *w;
        const char *home, *config_dest;
        char *profile_norm, *profile_real; /* the profile dir as named, normalised; resolved */
        int root_fd;
};

/* One path a command names: watched, and read-only inside when it is a regular file now. */
static int protect_path(struct protect_ctx *x, char *path, bool config, struct cs_error *err)
{
        const char *rel;
        struct stat st;
        bool in_profile;
        int base, r;

        path_normalise(path);
        rel = x->profile_norm ? trust_path_below(path, x->profile_norm) : NULL;
        if (!rel && x->profile_real)
                rel = trust_path_below(path, x->profile_real);
        in_profile = rel != NULL;
        if (!rel)
                rel = trust_path_below(path, x->w->work_root);
        if (!rel)
                return 0;
        base = in_profile ? x->p->dir_fd : x->root_fd;
        if (config)
                r = in_profile
                        ? strv_add_unique(&x->w->profile_configs, &x->w->n_profile_configs, rel)
                        : strv_add_unique(&x->w->tree_configs, &x->w->n_tree_configs, rel);
        else
                r = in_profile ? strv_add_unique(&x->w->profile_files, &x->w->n_profile_files, rel)
                               : strv_add_unique(&x->w->tree_files, &x->w->n_tree_files, rel);
        if (r < 0)
                return cs_error_set(err, ENOMEM, "watch %s", path);
        {
                _cleanup_free_ char *parent = strdup(rel);
                _cleanup_close_ int pfd = -1;
                char *slash = parent ? strrchr(parent, '/') : NULL;

                if (!parent)
                        return cs_error_set(err, ENOMEM, "watch %s", path);
                if (slash)
                        *slash = '\0';
                pfd = base >= 0 ? cs_open_beneath(base, slash ? parent : "", O_PATH | O_DIRECTORY)
                                : -1;
                if (pfd < 0 ||
                    fstatat(pfd, slash ? slash + 1 : rel, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                    !S_ISREG(st.st_mode))
                        return 0;
        }
        return protect_bind(x->s, base, in_profile ? x->p->dir : x->w->work_root, rel,
                            in_profile ? x->config_dest : x->w->work_root, err);
}

/* Each word of a shell command that names a path: absolute, ~/, $HOME/, $CLAUDE_CONFIG_DIR/
 * (the profile on the host), $CLAUDE_PROJECT_DIR/ or relative (both: the project dir, where
 * claude runs its commands). Quotes are dropped, not split at: "$CLAUDE_PROJECT_DIR"/x. The
 * paths are normalised ("//", "." and ".." collapsed). */
/* One word of a command as a host path: absolute, ~/, $HOME/, $CLAUDE_CONFIG_DIR/ (the
 * profile), $CLAUDE_PROJECT_DIR/ or $PWD/ (the project), or relative to base (where the
 * command runs: the project, or the directory an earlier `cd` went to). NULL: not a path
 * (another variable, ~user). *ret_oom on allocation failure. */
static char *command_word_path(const char *word, const char *home, const char *profile_dir,
                               const char *project_dir, const char *base, bool *ret_oom)
{
        static const struct {
                const char *var;
                int base; /* 0 home, 1 profile, 2 project */
        } vars[] = {
            {"$HOME", 0},
            {"${HOME}", 0},
            {"~", 0},
            {"$CLAUDE_CONFIG_DIR", 1},
            {"${CLAUDE_CONFIG_DIR}", 1},
            {"$CLAUDE_PROJECT_DIR", 2},
            {"${CLAUDE_PROJECT_DIR}", 2},
            {"$PWD", 2},
            {"${PWD}", 2},
        };
        const char *rest = word, *prefix = NULL;
        char *path = NULL;

        for (size_t v = 0; v < sizeof(vars) / sizeof(vars[0]); v++) {
                size_t vl = strlen(vars[v].var);

                if (strncmp(word, vars[v].var, vl) == 0 && (word[vl] == '/' || !word[vl])) {
                        rest = word + vl;
                        prefix = vars[v].base == 0   ? home
                                 : vars[v].base == 1 ? profile_dir
                                                     : project_dir;
                        break;
                }
        }
        if (prefix) {
                if (asprintf(&path, "%s%s", prefix, rest) < 0)
                        path = NULL;
        } else if (word[0] == '/') {
                path = strdup(word);
        } else {
                if (strchr(word, '$') || word[0] == '~' || !base)
                        return NULL;
                if (asprintf(&path, "%s/%s", base, word) < 0)
                        path = NULL;
        }
        if (!path) {
                *ret_oom = true;
                return NULL;
        }
        path_normalise(path);
        return path;
}

/* The paths a command names: each word with a '/', and each other word that is a file where
 * the command runs (`python3 hook.py`, `sh x.sh` after `cd hooks`); a `cd DIR` moves where
 * the words after it are taken. Quotes are dropped, not split at: "$CLAUDE_PROJECT_DIR"/x;
 * ; & | ( ) and blanks end a word. The paths are normalised. */
int trust_command_paths(const char *cmd, const char *home, const char *profile_dir,
                        const char *project_dir, char ***ret, size_t *ret_n)
{
        size_t len = strlen(cmd);
        _cleanup_free_ char *word = malloc(len + 1),
                            *base = project_dir ? strdup(project_dir) : NULL;
        bool after_cd = false, oom = false;

        if (!word || (project_dir && !base))
                return -ENOMEM;
        for (size_t i = 0; i <= len;) {
                size_t n = 0;
                char *path;
                struct stat st;

                for (; i < len; i++) {
                        unsigned char ch = (unsigned char)cmd[i];

                        if (ch == '"' || ch == '\'' || ch == '\\')
                                continue;
                        if (!isalnum(ch) && !strchr("_./~${}-+,:@%", ch))
                                break;
                        word[n++] = (char)ch;
                }
                word[n] = '\0';
                i++;
                if (n == 0)
                        continue;
                if (strcmp(word, "cd") == 0) {
                        after_cd = true;
                        continue;
                }
                path = command_word_path(word, home, profile_dir, project_dir, base, &oom);
                if (oom)
                        return -ENOMEM;
                if (after_cd) {
                        after_cd = false;
                        if (path) {
                                free(base);
                                base = path;
                        }
                        continue;
                }
                if (!path)
                        continue;
                if ((strchr(word, '/') || (stat(path, &st) == 0 && S_ISREG(st.st_mode))) &&
                    strv_add_unique(ret, ret_n, path) < 0) {
                        free(path);
                        return -ENOMEM;
                }
                free(path);
        }
        return 0;
}

static int command_paths(const cJSON *v, const char *home, const char *profile_dir,
                         const char *project_dir, char ***ret, size_t *ret_n)
{
        return cJSON_IsString(v)
                   ? trust_command_paths(v->valuestring, home, profile_dir, project_dir, ret, ret_n)
                   : 0;
}

/* Each MCP server's command line, its words quoted, as one command. */
static int mcp_paths(const cJSON *servers, const char *home, const char *profile_dir,
                     const char *project_dir, char ***ret, size_t *ret_n)
{
        const cJSON *srv, *a;
        int r = 0;

        cJSON_ArrayForEach(srv, servers)
        {
                const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(srv, "command");
                _cleanup_free_ char *line = NULL;
                size_t len = 0;
                FILE *f;

                if (!cJSON_IsString(cmd) || r < 0)
                        continue;
                f = open_memstream(&line, &len);
                if (!f)
                        return -ENOMEM;
                fprintf(f, "\"%s\"", cmd->valuestring);
                cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(srv, "args"))
                {
                        if (cJSON_IsString(a))
                                fprintf(f, " \"%s\"", a->valuestring);
                }
                fclose(f);
                if (!line)
                        return -ENOMEM;
                r = trust_command_paths(line, home, profile_dir, project_dir, ret, ret_n);
        }
        return r;
}

int trust_settings_paths(int dirfd, const char *path, const char *home, const char *profile_dir,
                         const char *project_dir, char ***ret, size_t *ret_n, bool *ret_plugins)
{
        static const char *const helpers[] = {"apiKeyHelper", "awsAuthRefresh",
                                              "awsCredentialExport", "otelHeadersHelper"};
        _cleanup_free_ char *raw = NULL;
        /* Dropped: settings it cannot read name no file; claude reads them no better. */
        struct cs_error ignored;
        const cJSON *events, *ev, *group, *h, *plugin;
        size_t len;
        cJSON *j;
        int r = 0;

        if (cs_read_file_at(dirfd, path, SETTINGS_FILE_MAX, true, &raw, &len, &ignored) < 0)
                return 0;
        j = cJSON_ParseWithLength(raw, len);
        if (!cJSON_IsObject(j)) {
                cJSON_Delete(j);
                return 0;
        }
        events = cJSON_GetObjectItemCaseSensitive(j, "hooks");
        /* Any container's members: a hook in an odd place counts all the same. */
        cJSON_ArrayForEach(ev, events)
        {
                cJSON_ArrayForEach(group, ev)
                {
                        const cJSON *hs = cJSON_GetObjectItemCaseSensitive(group, "hooks");

                        cJSON_ArrayForEach(h, hs)
                        {
                                if (r >= 0)
                                        r = command_paths(
                                            cJSON_GetObjectItemCaseSensitive(h, "command"), home,
                                            profile_dir, project_dir, ret, ret_n);
                        }
                }
        }
        if (r >= 0)
                r = command_paths(cJSON_GetObjectItemCaseSensitive(
                                      cJSON_GetObjectItemCaseSensitive(j, "statusLine"), "command"),
                                  home, profile_dir, project_dir, ret, ret_n);
        for (size_t i = 0; r >= 0 && i < sizeof(helpers) / sizeof(helpers[0]); i++)
                r = command_paths(cJSON_GetObjectItemCaseSensitive(j, helpers[i]), home,
                                  profile_dir, project_dir, ret, ret_n);
        /* MCP servers (.mcp.json, .claude.json and its projects): the command with its
         * arguments, whose scripts claude starts on the host. */
        if (r >= 0)
                r = mcp_paths(cJSON_GetObjectItemCaseSensitive(j, "mcpServers"), home, profile_dir,
                              project_dir, ret, ret_n);
        cJSON_ArrayForEach(ev, cJSON_GetObjectItemCaseSensitive(j, "projects"))
        {
                if (r >= 0)
                        r = mcp_paths(cJSON_GetObjectItemCaseSensitive(ev, "mcpServers"), home,
                                      profile_dir, ev->string ? ev->string : project_dir, ret,
                                      ret_n);
        }
        cJSON_ArrayForEach(plugin, cJSON_GetObjectItemCaseSensitive(j, "enabledPlugins"))
        {
                if (ret_plugins && !cJSON_IsFalse(plugin))
                        *ret_plugins = true;
        }
        cJSON_Delete(j);
        return r;
}

/* The commands a settings file makes claude run on the host: each file they name. */
static int protect_settings(struct protect_ctx *x, int dirfd, const char *path,
                            struct cs_error *err)
{
        char **paths = NULL;
        size_t n = 0;
        int r = trust_settings_paths(dirfd, path, x->home, x->p->dir, x->w->work_root, &paths, &n,
                                     &x->w->plugins_enabled);

        if (r < 0)
                r = cs_error_set(err, ENOMEM, "read %s", path);
        for (size_t i = 0; r >= 0 && i < n; i++)
                r = protect_path(x, paths[i], false, err);
        strv_free(&paths, &n);
        return r;
}

/* ---- the repository's own git config, as git reads it ---- */

#define GIT_INCLUDE_DEPTH 10 /* git's own limit */
#define GIT_CONFIGS_MAX   64
#define GIT_CONFIG_READ   (1u << 20)

/* The hook names git runs (githooks(5)), for a hooks dir that does not exist yet. */
static const char *const git_hook_names[] = {"applypatch-msg",
                                             "pre-applypatch",
                                             "post-applypatch",
                                             "pre-commit",
                                             "pre-merge-commit",
                                             "prepare-commit-msg",
                                             "commit-msg",
                                             "post-commit",
                                             "pre-rebase",
                                             "post-checkout",
                                             "post-merge",
                                             "pre-push",
                                             "pre-receive",
                                             "update",
                                             "proc-receive",
                                             "post-receive",
                                             "post-update",
                                             "reference-transaction",
                                             "push-to-checkout",
                                             "pre-auto-gc",
                                             "post-rewrite",
                                             "sendemail-validate",
                                             "fsmonitor-watchman",
                                             "p4-changelist",
                                             "p4-prepare-changelist",
                                             "p4-post-changelist",
                                             "p4-pre-submit",
                                             "post-index-change"};

struct git_walk {
        struct protect_ctx *x;
        const char *home, *work_root;
        char *dir;   /* the directory of the file being read, for relative includes */
        char **seen; /* files read, once each */
        size_t n_seen;
        char **hooks_paths;
        size_t n_hooks_paths;
        unsigned depth;
        int r;
        struct cs_error *err;
};

static int git_walk_file(struct git_walk *g, const char *path);

/* An include's or a hooks path's value as git expands it: ~/ is the home, a relative path
 * is taken in base. NULL for what git would not read (~user, empty). */
static char *git_path_expand(const char *value, const char *home, const char *base)
{
        char *out = NULL;

        if (!value || !*value || (value[0] == '~' && value[1] != '/'))
                return NULL;
        if (value[0] == '~') {
                if (asprintf(&out, "%s%s", home, value + 1) < 0)
                        return NULL;
        } else if (value[0] == '/') {
                out = strdup(value);
        } else if (asprintf(&out, "%s/%s", base, value) < 0) {
                return NULL;
        }
        if (out)
                path_normalise(out);
        return out;
}

static int git_walk_key(const char *key, const char *value, void *ctx)
{
        struct git_walk *g = ctx;
        size_t l = strlen(key);
        _cleanup_free_ char *path = NULL;

        /* include.path and includeIf.<cond>.path: every condition counted as true, so that
         * what git may read under any of them is covered */
        if ((strcmp(key, "include.path") == 0 || (strncmp(key, "includeif.", 10) == 0 && l > 15 &&
                                                  strcmp(key + l - 5, ".path") == 0)) &&
            (path = git_path_expand(value, g->home, g->dir))) {
                if (g->depth < GIT_INCLUDE_DEPTH) {
                        _cleanup_free_ char *saved = g->dir;

                        g->dir = NULL;
                        g->depth++;
                        (void)git_walk_file(g, path);
                        g->depth--;
                        free(g->dir);
                        g->dir = cs_take_ptr(&saved);
                }
                return g->r < 0 ? -1 : 0;
        }
        /* Any other key off the inert list may be a command git runs (a filter's clean and
         * smudge, a textconv, core.fsmonitor, core.pager, a credential helper, an alias with
         * `!`): the files it names in the tree are pinned like the ones a hook names. git
         * runs them at the work tree's top. */
        if (value && strcmp(key, "core.hookspath") != 0 && !trust_git_key_inert(key) &&
            (strncmp(key, "alias.", 6) != 0 || value[0] == '!')) {
                char **paths = NULL;
                size_t n = 0;

                if (trust_command_paths(value[0] == '!' ? value + 1 : value, g->home, g->x->p->dir,
                                        g->work_root, &paths, &n) < 0)
                        g->r = cs_error_set(g->err, ENOMEM, "git's config");
                for (size_t i = 0; g->r >= 0 && i < n; i++)
                        g->r = protect_path(g->x, paths[i], false, g->err);
                strv_free(&paths, &n);
                return g->r < 0 ? -1 : 0;
        }
        /* core.hooksPath: relative to the work tree's top, where git runs hooks */
        if (strcmp(key, "core.hookspath") == 0 &&
            (path = git_path_expand(value, g->home, g->work_root)) &&
            strv_add_unique(&g->hooks_paths, &g->n_hooks_paths, path) < 0)
                g->r = cs_error_set(g->err, ENOMEM, "git's hooks path");
        return g->r < 0 ? -1 : 0;
}

/* One config file git reads for the repository: pinned (or watched, when missing) where the
 * session could write it, and read for its includes and hooks path. */
static int git_walk_file(struct git_walk *g, const char *path)
{
        _cleanup_free_ char *text = NULL, *copy = strdup(path);
        _cleanup_close_ int fd = -1;
        struct cs_error ignored;
        struct stat st;
        char *slash;
        size_t len;

        if (!copy)
                return g->r = cs_error_set(g->err, ENOMEM, "git's config");
        if (strv_has(g->seen, g->n_seen, path) || g->n_seen >= GIT_CONFIGS_MAX)
                return 0;
        if (strv_push_dup(&g->seen, &g->n_seen, path) < 0)
                return g->r = cs_error_set(g->err, ENOMEM, "git's config");
        /* protect_path pins a regular file below the work root or the profile, and watches
         * the name whatever it is now (an include of a missing file is no error to git). */
        g->r = protect_path(g->x, copy, true, g->err);
        if (g->r < 0)
                return g->r;
        /* Read as git reads it (links followed), bounded, never blocking on a FIFO. */
        fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
            cs_read_fd(fd, path, GIT_CONFIG_READ, &text, &len, &ignored) < 0)
                return 0;
        free(g->dir);
        g->dir = strdup(path);
        if (!g->dir)
                return g->r = cs_error_set(g->err, ENOMEM, "git's config");
        slash = strrchr(g->dir, '/');
        if (slash)
                *(slash == g->dir ? slash + 1 : slash) = '\0';
        (void)trust_git_config_parse(text, len, git_walk_key, g, NULL);
        return g->r;
}

/* What the host's git reads as this repository's config (system, global, the repository's,
 * its config.worktree, and every file they include, under any condition) and the hooks
 * dir it runs from: a file or dir of these where the session can write (a tracked
 * `.gitconfig` the repository includes, a `.githooks` or `.husky` dir core.hooksPath names)
 * is read-only inside like .git/config and .git/hooks, and watched by the journal. */
static int protect_git_configs(struct protect_ctx *x, const struct worktree *wt, const char *home,
                               struct cs_error *err)
{
        struct git_walk g = {.x = x, .home = home, .work_root = x->w->work_root, .err = err};
        const char *env_global = getenv("GIT_CONFIG_GLOBAL"),
                   *env_system = getenv("GIT_CONFIG_SYSTEM"), *xdg = getenv("XDG_CONFIG_HOME");
        _cleanup_free_ char *p1 = NULL, *p2 = NULL, *p3 = NULL, *p4 = NULL;

        if (!wt->common_dir)
                return 0;
        if (!getenv("GIT_CONFIG_NOSYSTEM"))
                p1 = strdup(env_system && *env_system ? env_system : "/etc/gitconfig");
        if (env_global && *env_global) {
                p2 = strdup(env_global);
        } else {
                if (asprintf(&p2, "%s/.gitconfig", home) < 0)
                        p2 = NULL;
                if (xdg && *xdg ? asprintf(&p3, "%s/git/config", xdg) < 0
                                : asprintf(&p3, "%s/.config/git/config", home) < 0)
                        p3 = NULL;
        }
        if (asprintf(&p4, "%s/config", wt->common_dir) < 0)
                p4 = NULL;
        {
                const char *files[] = {p1, p2, p3, p4};

                for (size_t i = 0; i < 4 && g.r >= 0; i++)
                        if (files[i]) {
                                g.depth = 0;
                                (void)git_walk_file(&g, files[i]);
                        }
        }
        if (g.r >= 0 && p4) {
                _cleanup_free_ char *wtc = NULL;

                if (asprintf(&wtc, "%s/config.worktree", wt->common_dir) >= 0)
                        (void)git_walk_file(&g, wtc);
        }
        /* The hooks dir core.hooksPath names, where the session could write it: pinned when it
         * is a dir now, and each hook's name watched. */
        for (size_t i = 0; g.r >= 0 && i < g.n_hooks_paths; i++) {
                const char *rel = trust_path_below(g.hooks_paths[i], x->w->work_root);
                struct stat st;

                if (!rel && x->profile_norm)
                        rel = trust_path_below(g.hooks_paths[i], x->profile_norm);
                if (!rel)
                        continue;
                for (size_t h = 0; g.r >= 0 && h < sizeof(git_hook_names) / sizeof(*git_hook_names);
                     h++) {
                        char *hook = NULL;

                        if (asprintf(&hook, "%s/%s", g.hooks_paths[i], git_hook_names[h]) < 0) {
                                g.r = cs_error_set(err, ENOMEM, "git's hooks path");
                                break;
                        }
                        g.r = protect_path(x, hook, false, err);
                        free(hook);
                        /* A hook manager's stubs run the hook of that name one level up
                         * (husky: .husky/_/pre-commit runs .husky/pre-commit): those too,
                         * unless one level up is the tree's root itself. */
                        hook = NULL;
                        if (g.r >= 0 && strchr(rel, '/') &&
                            asprintf(&hook, "%s/../%s", g.hooks_paths[i], git_hook_names[h]) >= 0)
                                g.r = protect_path(x, hook, false, err);
                        free(hook);
                }
                if (g.r >= 0 && trust_path_below(g.hooks_paths[i], x->w->work_root) &&
                    x->root_fd >= 0 && fstatat(x->root_fd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                    S_ISDIR(st.st_mode))
                        g.r = protect_bind(x->s, x->root_fd, x->w->work_root, rel, x->w->work_root,
                                           err);
        }
        free(g.dir);
        strv_free(&g.seen, &g.n_seen);
        strv_free(&g.hooks_paths, &g.n_hooks_paths);
        return g.r;
}

/* ---- plugins whose files live outside plugins/ ---- */

/* Every path under installLocation, installPath or a directory source's path in JSON j. */
static int plugin_dirs_collect(const cJSON *j, char ***ret, size_t *ret_n)
{
        const cJSON *e;
        int r = 0;

        cJSON_ArrayForEach(e, j)
        {
                if (r < 0)
                        break;
                if (cJSON_IsString(e) && e->string && e->valuestring[0] == '/' &&
                    (strcmp(e->string, "installLocation") == 0 ||
                     strcmp(e->string, "installPath") == 0 || strcmp(e->string, "path") == 0))
                        r = strv_add_unique(ret, ret_n, e->valuestring);
                else if (cJSON_IsObject(e) || cJSON_IsArray(e))
                        r = plugin_dirs_collect(e, ret, ret_n);
        }
        return r;
}

/* A marketplace or an installed plugin can live anywhere (a `directory` marketplace kept in
 * the repository): claude loads its hooks, commands and MCP servers from there. Where such
 * a directory is in the work tree or the profile, it is pinned like plugins/ itself. */
static int protect_plugin_dirs(struct protect_ctx *x, struct cs_error *err)
{
        static const char *const lists[] = {"plugins/known_marketplaces.json",
                                            "plugins/installed_plugins.json"};
        char **dirs = NULL;
        size_t n = 0;
        int r = 0;

        for (size_t i = 0; r >= 0 && i < 2; i++) {
                _cleanup_free_ char *raw = NULL;
                struct cs_error ignored;
                size_t len;
                cJSON *j;

                if (cs_read_file_at(x->p->dir_fd, lists[i], SETTINGS_FILE_MAX, true, &raw, &len,
                                    &ignored) < 0)
                        continue;
                j = cJSON_ParseWithLength(raw, len);
                if (plugin_dirs_collect(j, &dirs, &n) < 0)
                        r = cs_error_set(err, ENOMEM, "the plugins' paths");
                cJSON_Delete(j);
        }
        for (size_t i = 0; r >= 0 && i < n; i++) {
                _cleanup_free_ char *path = strdup(dirs[i]);
                const char *rel;
                struct stat st;

                if (!path) {
                        r = cs_error_set(err, ENOMEM, "the plugins' paths");
                        break;
                }
                path_normalise(path);
                rel = trust_path_below(path, x->w->work_root);
                if (rel && x->root_fd >= 0 && *rel &&
                    fstatat(x->root_fd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
                        r = protect_bind(x->s, x->root_fd, x->w->work_root, rel, x->w->work_root,
                                         err);
        }
        strv_free(&dirs, &n);
        return r;
}

int trust_protect(struct sandbox_spec *s, const struct profile_config *c, const struct profile *p,
                  const char *config_dest, const struct worktree *wt, struct trust_watch *w,
                  struct cs_error *err)
{
        /* What claude on the host runs from the profile by itself. */
        static const char *const fixed[] = {"hooks", "statusline.sh", "plugins"};
        struct protect_ctx x = {.s = s, .p = p, .w = w, .home = c->home, .root_fd = -1};
        _cleanup_free_ char *shared = NULL;
        int r = 0;

        w->work_root = strdup(wt->root);
        if (!w->work_root)
                return cs_error_set(err, ENOMEM, "watch %s", wt->root);
        if (wt->common_dir && !wt->common_outside &&
            asprintf(&w->git_dir, "%s/.git", wt->root) >= 0 &&
            strcmp(w->git_dir, wt->common_dir) == 0) {
                w->git_inside = true;
        } else if (wt->common_dir && wt->common_outside) {
                free(w->git_dir);
                w->git_dir = strdup(wt->common_dir);
        } else {
                free(w->git_dir);
                w->git_dir = NULL;
        }
        x.config_dest = config_dest;
        x.profile_real = realpath(p->dir, NULL);
        x.profile_norm = strdup(p->dir);
        if (x.profile_norm)
                path_normalise(x.profile_norm);
        x.root_fd = open(w->work_root, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (asprintf(&shared, "%s/shared-settings.json", c->profiles_base) < 0)
                r = cs_error_set(err, ENOMEM, "shared settings");
        if (r >= 0)
                r = protect_settings(&x, p->dir_fd, "settings.json", err);
        if (r >= 0)
                r = protect_settings(&x, AT_FDCWD, shared, err);
        /* The project's own settings (the work root's): claude on the host runs their hooks
         * too, with $CLAUDE_PROJECT_DIR the work root. */
        if (r >= 0 && x.root_fd >= 0)
                r = protect_settings(&x, x.root_fd, ".claude/settings.json", err);
        if (r >= 0 && x.root_fd >= 0)
                r = protect_git_configs(&x, wt, c->home, err);
        /* What the project's and the profile's MCP servers start (.claude.json is the host's,
         * a copy inside: only the scripts it names are in reach). */
        if (r >= 0 && x.root_fd >= 0)
                r = protect_settings(&x, x.root_fd, ".mcp.json", err);
        if (r >= 0)
                r = protect_settings(&x, p->dir_fd, ".claude.json", err);
        if (r >= 0)
                r = protect_plugin_dirs(&x, err);
        /* plugins/ is claude's own state until the settings enable a plugin: then its
         * files are code the host runs. */
        for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]) && r >= 0; i++) {
                struct stat st;

                if ((i < 2 || w->plugins_enabled) &&
                    fstatat(p->dir_fd, fixed[i], &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                    (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)))
                        r = protect_bind(s, p->dir_fd, p->dir, fixed[i], config_dest, err);
        }
        free(x.profile_real);
        free(x.profile_norm);
        if (x.root_fd >= 0)
                close(x.root_fd);
        return r;
}

void trust_watch_free(struct trust_watch *w)
{
        for (size_t i = 0; i < w->n_profile_files; i++)
                free(w->profile_files[i]);
        for (size_t i = 0; i < w->n_tree_files; i++)
                free(w->tree_files[i]);
        free(w->profile_files);
        free(w->tree_files);
        strv_free(&w->profile_configs, &w->n_profile_configs);
        strv_free(&w->tree_configs, &w->n_tree_configs);
        free(w->work_root);
        free(w->git_dir);
        memset(w, 0, sizeof(*w));
}
