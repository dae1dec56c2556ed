/* The journal's judge (trust_rules.h): git's and claude's discovery rules applied to one
 * changed path. Everything read here was written by the session: opened below the root's
 * fd without following links (but where git follows them: a gitfile, a commondir), read
 * with O_NONBLOCK (a FIFO planted as a config does not hang the host) and bounded. */
#include "trust_rules.h"
#include "claude_json.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"
#include "../common/resolve.h"
#include "../common/strv.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define GIT_CONFIG_MAX  (1u << 20)
#define GITFILE_MAX     4096u
#define HOOKS_MAX       1024u
#define JUDGE_DEPTH_MAX 256
#define CLAUDE_JSON_MAX (32u << 20)

void trust_rules_free(struct trust_rules *r)
{
        for (int i = 0; i < TRUST_ROOT_N; i++) {
                free(r->root_path[i]);
                strv_free(&r->named[i], &r->n_named[i]);
                strv_free(&r->configs[i], &r->n_configs[i]);
        }
        free(r->home);
        trust_free(&r->claude_before);
        memset(r, 0, sizeof(*r));
}

/* ---- findings ---- */

static void finding(struct plan_trust *out, const char *kind, const char *base, const char *rel,
                    const char *detail)
{
        _cleanup_free_ char *path = NULL, *item = NULL;

        if (asprintf(&path, "%s%s%s", base, rel && *rel ? "/" : "", rel ? rel : "") < 0)
                return;
        /* A tab in a name would shift the fields the report splits. */
        for (char *c = path; *c; c++)
                if (*c == '\t' || *c == '\n')
                        *c = '?';
        if (asprintf(&item, "%s\t%s\t%s", kind, path, detail ? detail : "") < 0)
                return;
        /* One item is one line of the journal's record. */
        for (char *c = item; *c; c++)
                if (*c == '\n' || *c == '\r')
                        *c = '?';
        for (size_t i = 0; i < out->n; i++)
                if (strcmp(out->items[i], item) == 0)
                        return;
        (void)strv_push(&out->items, &out->n, cs_take_ptr(&item));
}

/* ---- git dirs ---- */

static bool exists_at(int dirfd, const char *name, bool follow)
{
        struct stat st;

        return fstatat(dirfd, name, &st, follow ? 0 : AT_SYMLINK_NOFOLLOW) == 0;
}

/* Git's is_git_directory, taken wider: HEAD beside objects and refs, or beside a commondir
 * (whose target holds them). Links are followed, as git follows them. */
static bool is_git_dir(int fd)
{
        return exists_at(fd, "HEAD", false) &&
               (exists_at(fd, "commondir", false) ||
                (exists_at(fd, "objects", true) && exists_at(fd, "refs", true)));
}

/* A directory git may read as a git dir: one it finds by its HEAD, or the common dir a
 * linked worktree's commondir names, which needs no HEAD of its own. */
static bool may_be_git_dir(int fd)
{
        return is_git_dir(fd) || (exists_at(fd, "objects", true) && exists_at(fd, "refs", true));
}

static bool has_main_git_dir(const struct trust_rules *r)
{
        return r->main_dev != 0 || r->main_ino != 0;
}

/* The repository's own git dir: judged as such (its config is read-only inside), never as a
 * git dir of the session's. */
static bool is_main_git_dir(const struct trust_rules *r, int fd)
{
        struct stat st;

        return has_main_git_dir(r) && fstat(fd, &st) == 0 &&
               (unsigned long long)st.st_dev == r->main_dev &&
               (unsigned long long)st.st_ino == r->main_ino;
}

/* Read dirfd/name as git does (following a link), bounded, never blocking on a FIFO. */
static int read_git_file(int dirfd, const char *name, size_t max, char **ret, size_t *ret_len)
{
        _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
        struct cs_error ignored;
        struct stat st;

        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                return -EINVAL;
        if ((size_t)st.st_size > max)
                return -EFBIG;
        return cs_read_fd(fd, name, max, ret, ret_len, &ignored);
}

/* Why the config name in dirfd makes git run something, or NULL (missing counts as inert). */
/* A config's keys as git reads them, sorted: every key off the inert list but
 * core.worktree (first_bad), and whether each core.worktree value leads into the work tree. */
struct config_scan {
        const struct trust_rules *r;
        int dirfd;
        char *first_bad;
        bool worktree_outside;
};

/* Whether the file fd is the directory (dev, ino) or below it, as the host resolves its
 * parents (".." from the file itself, never a path string). Takes fd. */
static bool fd_below(int fd, unsigned long long dev, unsigned long long ino)
{
        for (int up = 0; fd >= 0 && up < JUDGE_DEPTH_MAX; up++) {
                struct stat ds, ps;
                int parent;

                if (fstat(fd, &ds) < 0)
                        break;
                if ((unsigned long long)ds.st_dev == dev && (unsigned long long)ds.st_ino == ino) {
                        close(fd);
                        return true;
                }
                if (!S_ISDIR(ds.st_mode)) {
                        /* A file has no "..": its directory, by the name the kernel
                         * gives the fd. */
                        char proc[64], path[PATH_MAX];
                        ssize_t l;
                        char *slash;

                        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
                        l = readlink(proc, path, sizeof(path) - 1);
                        close(fd);
                        if (l <= 0)
                                return false;
                        path[l] = '\0';
                        slash = strrchr(path, '/');
                        if (!slash)
                                return false;
                        *(slash == path ? slash + 1 : slash) = '\0';
                        fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
                        continue;
                }
                parent = openat(fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (parent >= 0 && fstat(parent, &ps) == 0 && ps.st_dev == ds.st_dev &&
                    ps.st_ino == ds.st_ino) {
                        close(parent); /* "/" */
                        break;
                }
                close(fd);
                fd = parent;
        }
        if (fd >= 0)
                close(fd);
        return false;
}

/* Whether the directory value (relative to the git dir dirfd, as git takes core.worktree)
 * is the work tree or below it: git then checks files out and runs its status there, in
 * the session's own tree, as `git submodule update --init` sets it. */
static bool worktree_inside(const struct trust_rules *r, int dirfd, const char *value)
{
        if (!value || !*value || (!r->work_dev && !r->work_ino))
                return false;
        return fd_below(openat(dirfd, value, O_PATH | O_DIRECTORY | O_CLOEXEC), r->work_dev,
                        r->work_ino);
}

static int config_scan_key(const char *key, const char *value, void *ctx)
{
        struct config_scan *c = ctx;

        if (trust_git_key_inert(key))
                return 0;
        if (strcmp(key, "core.worktree") == 0) {
                if (!worktree_inside(c->r, c->dirfd, value))
                        c->worktree_outside = true;
                return 0;
        }
        if (!c->first_bad)
                c->first_bad = strdup(key);
        return 0;
}

/* Why the config name in dirfd makes git run something, or NULL (missing counts as inert). */
static char *config_why(const struct trust_rules *r, int dirfd, const char *name)
{
        _cleanup_free_ char *text = NULL;
        char *why = NULL;
        size_t len, line = 0;
        int rr = read_git_file(dirfd, name, GIT_CONFIG_MAX, &text, &len);
        struct config_scan c = {.r = r, .dirfd = dirfd};

        if (rr == -ENOENT)
                return NULL;
        if (rr < 0) {
                if (asprintf(&why, "%s that cannot be read as a plain file (%s)", name,
                             strerror(-rr)) < 0)
                        why = NULL;
                return why ? why : strdup(name);
        }
        if (trust_git_config_inert(text, len, &why))
                return NULL;
        /* Off the list only for a core.worktree inside the work tree: inert after all. */
        if (trust_git_config_parse(text, len, config_scan_key, &c, &line) == 0 && !c.first_bad &&
            !c.worktree_outside) {
                free(why);
                return NULL;
        }
        free(c.first_bad);
        {
                char *full = NULL;

                if (asprintf(&full, "%s sets %s", name, why ? why : "?") < 0)
                        full = NULL;
                free(why);
                return full;
        }
}

/* Why the hooks dir of the git dir fd runs something: any hook but git's own samples. */
static char *hooks_why(int gfd)
{
        struct stat st;
        int hfd;
        DIR *d;
        struct dirent *de;
        char *why = NULL;
        size_t n = 0;

        if (fstatat(gfd, "hooks", &st, AT_SYMLINK_NOFOLLOW) < 0)
                return NULL;
        if (S_ISLNK(st.st_mode))
                return strdup("hooks is a link");
        hfd = openat(gfd, "hooks", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        d = hfd >= 0 ? fdopendir(hfd) : NULL;
        if (!d) {
                if (hfd >= 0)
                        close(hfd);
                return NULL;
        }
        while (!why && (de = readdir(d))) {
                size_t l = strlen(de->d_name);

                if (de->d_name[0] == '.' || (l > 7 && strcmp(de->d_name + l - 7, ".sample") == 0))
                        continue;
                if (++n > HOOKS_MAX || asprintf(&why, "hook %s", de->d_name) < 0)
                        why = strdup("hooks");
        }
        closedir(d);
        return why;
}

/* What makes the git dir gfd run commands: its config and config.worktree, its hooks, and
 * those of the directory its commondir names (unless that is the repository's own git dir,
 * whose config the session cannot write). NULL: nothing. */
static char *git_dir_why(const struct trust_rules *r, int gfd)
{
        _cleanup_free_ char *common = NULL;
        _cleanup_close_ int cfd = -1;
        struct stat st;
        size_t len;
        char *why;
        int rr;

        if ((why = config_why(r, gfd, "config")) || (why = config_why(r, gfd, "config.worktree")) ||
            (why = hooks_why(gfd)))
                return why;
        rr = read_git_file(gfd, "commondir", GITFILE_MAX, &common, &len);
        if (rr == -ENOENT)
                return NULL;
        if (rr < 0)
                return strdup("a commondir that cannot be read as a plain file");
        while (len > 0 && (common[len - 1] == '\n' || common[len - 1] == '\r'))
                common[--len] = '\0';
        cfd = openat(gfd, common, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (cfd < 0)
                return NULL; /* git finds no common dir there: it refuses the repository */
        if (fstat(cfd, &st) == 0 && (unsigned long long)st.st_dev == r->main_dev &&
            (unsigned long long)st.st_ino == r->main_ino)
                return NULL;
        if ((why = config_why(r, cfd, "config")) || (why = hooks_why(cfd))) {
                char *full = NULL;

                if (asprintf(&full, "its commondir %s: %s", common, why) < 0)
                        full = NULL;
                free(why);
                return full ? full : strdup("its commondir");
        }
        return NULL;
}

struct judge {
        const struct trust_rules *r;
        const char *base; /* the root's host path */
        struct plan_trust *out;
};

/* A git dir (gfd, at base/gpath) in which rest changed: a finding when it runs commands.
 * main: the repository's own git dir, whose config is read-only and hooks a copy inside;
 * there, what git would take from what the session wrote is judged instead (a config the
 * session could write, a link git follows, the git dirs below modules/ and worktrees/). */
static void judge_git_dir(struct judge *j, int gfd, const char *gpath, char **comp, size_t n,
                          bool main)
{
        _cleanup_free_ char *why = NULL;

        if (main) {
                struct stat st;
                _cleanup_close_ int fd = -1;
                size_t k;

                if (n == 0)
                        return;
                if (strcmp(comp[0], "config") == 0 || strcmp(comp[0], "config.worktree") == 0 ||
                    strcmp(comp[0], "commondir") == 0 || strcmp(comp[0], "hooks") == 0) {
                        why = git_dir_why(j->r, gfd);
                        if (!why && strcmp(comp[0], "config.worktree") != 0 &&
                            strcmp(comp[0], "hooks") != 0)
                                why = strdup("changed by the session");
                        if (why)
                                finding(j->out, "git dir that runs commands", j->base, gpath, why);
                        return;
                }
                /* A link anywhere in the git dir: git follows it, out of the repository. */
                {
                        _cleanup_free_ char *rel = NULL;
                        size_t l = 0;

                        for (k = 0; k < n; k++)
                                l += strlen(comp[k]) + 1;
                        rel = malloc(l + 1);
                        if (!rel)
                                return;
                        rel[0] = '\0';
                        for (k = 0; k < n; k++) {
                                if (k)
                                        strcat(rel, "/");
                                strcat(rel, comp[k]);
                        }
                        if (fstatat(gfd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                            S_ISLNK(st.st_mode) && strcmp(rel, "HEAD") != 0) {
                                _cleanup_free_ char *p = NULL;

                                if (asprintf(&p, "%s/%s", gpath, rel) >= 0)
                                        finding(j->out, "link that git follows in a git dir",
                                                j->base, p, NULL);
                                return;
                        }
                }
                if (strcmp(comp[0], "modules") != 0 && strcmp(comp[0], "worktrees") != 0)
                        return;
                /* The first git dir below modules/ (nested: modules/a/modules/b) or
                 * worktrees/NAME, judged as any other. */
                fd = fcntl(gfd, F_DUPFD_CLOEXEC, 3);
                for (k = 0; k < n && fd >= 0; k++) {
                        int next =
                            openat(fd, comp[k], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

                        close(fd);
                        fd = next;
                        if (fd >= 0 && k >= 1 && is_git_dir(fd)) {
                                _cleanup_free_ char *sub = NULL;
                                size_t l = strlen(gpath);

                                for (size_t m = 0; m <= k; m++)
                                        l += strlen(comp[m]) + 1;
                                sub = malloc(l + 1);
                                if (!sub)
                                        return;
                                strcpy(sub, gpath);
                                for (size_t m = 0; m <= k; m++) {
                                        strcat(sub, "/");
                                        strcat(sub, comp[m]);
                                }
                                judge_git_dir(j, fd, sub, comp + k + 1, n - k - 1, false);
                                return;
                        }
                }
                if (fd < 0 && n >= 2 &&
                    (strcmp(comp[n - 1], "config") == 0 || strcmp(comp[n - 1], "commondir") == 0)) {
                        /* Gone before it could be read: what it held may have run already. */
                        finding(j->out, "git dir changed and gone before it could be checked",
                                j->base, gpath, comp[0]);
                }
                return;
        }
        /* What the session does in a repository of its own (objects, refs, the index, logs)
         * changes nothing git runs: only what makes a git dir one, or gives it commands. */
        if (n >= 1 && strcmp(comp[0], "hooks") != 0 &&
            !(n == 1 &&
              (strcmp(comp[0], "config") == 0 || strcmp(comp[0], "config.worktree") == 0 ||
               strcmp(comp[0], "commondir") == 0 || strcmp(comp[0], "HEAD") == 0 ||
               strcmp(comp[0], "objects") == 0 || strcmp(comp[0], "refs") == 0)))
                return;
        why = git_dir_why(j->r, gfd);
        if (why)
                finding(j->out, "git repository that runs commands", j->base, gpath, why);
}

/* base/dpath/.git (the entry, in dfd) changed or something below it did. */
static void judge_dotgit(struct judge *j, int dfd, const char *dpath, char **comp, size_t n,
                         bool main)
{
        _cleanup_free_ char *gpath = NULL;
        struct stat st;

        if (asprintf(&gpath, "%s%s.git", dpath, *dpath ? "/" : "") < 0)
                return;
        if (fstatat(dfd, ".git", &st, AT_SYMLINK_NOFOLLOW) < 0) {
                if (!main)
                        finding(j->out, "nested git repository gone before it could be checked",
                                j->base, gpath, NULL);
                return;
        }
        if (S_ISLNK(st.st_mode)) {
                char target[PATH_MAX];
                ssize_t l = readlinkat(dfd, ".git", target, sizeof(target) - 1);

                target[l < 0 ? 0 : l] = '\0';
                finding(j->out, "nested git repository (a link)", j->base, gpath, target);
                return;
        }
        if (S_ISDIR(st.st_mode)) {
                _cleanup_close_ int gfd =
                    openat(dfd, ".git", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

                if (gfd >= 0)
                        judge_git_dir(j, gfd, gpath, comp, n, main);
                return;
        }
        if (S_ISREG(st.st_mode)) {
                /* A gitfile: the git dir it names, as git reads it. */
                _cleanup_free_ char *text = NULL, *why = NULL;
                _cleanup_close_ int gfd = -1;
                size_t len;
                const char *target;

                if (read_git_file(dfd, ".git", GITFILE_MAX, &text, &len) < 0 ||
                    strncmp(text, "gitdir: ", 8) != 0) {
                        finding(j->out, "nested git repository (a .git file)", j->base, gpath,
                                "unreadable");
                        return;
                }
                while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r'))
                        text[--len] = '\0';
                target = text + 8;
                gfd = openat(dfd, target, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (gfd < 0)
                        return; /* git refuses a gitfile whose dir is missing */
                if (main) {
                        struct stat gst;

                        if (fstat(gfd, &gst) == 0 &&
                            (unsigned long long)gst.st_dev == j->r->main_dev &&
                            (unsigned long long)gst.st_ino == j->r->main_ino)
                                return;
                        finding(j->out, "the work tree's .git file points elsewhere", j->base,
                                gpath, target);
                        return;
                }
                why = git_dir_why(j->r, gfd);
                if (why) {
                        char *d = NULL;

                        if (asprintf(&d, "gitdir %s: %s", target, why) < 0)
                                d = NULL;
                        finding(j->out, "nested git repository that runs commands", j->base, gpath,
                                d ? d : why);
                        free(d);
                }
                return;
        }
        finding(j->out, "nested git repository (not a file or dir)", j->base, gpath, NULL);
}

/* ---- what the host runs by its own rules ---- */

static bool is_hook_manager_config(const char *name)
{
        static const char *const names[] = {
            ".pre-commit-config.yaml", ".pre-commit-config.yml", "lefthook.yml",
            "lefthook.yaml",           ".lefthook.yml",          ".lefthook.yaml",
            "lefthook-local.yml",      ".lefthook-local.yml",    "lefthook.json",
            ".lefthook.json",          "lefthook.toml",          ".lefthook.toml"};

        for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++)
                if (strcmp(name, names[i]) == 0)
                        return true;
        return false;
}

/* ---- claude ---- */

/* Whether a project settings file only denies or asks (what claude writes when a user
 * refuses a tool): nothing there makes the host's claude run anything, or run it without
 * asking. Anything else (hooks, a helper, env, an allow rule: the host's claude would run
 * that command without asking) is a finding; *ret_grants lists the allow rules when they
 * are all the file holds, so that the report says what accepting grants. The file is read
 * as claude reads it, by csandbox's one JSON parser; one it cannot read is a finding. */
static bool settings_only_restrict(int root_fd, const char *rel, char **ret_grants)
{
        _cleanup_free_ char *text = NULL, *why = NULL;
        cJSON *j = NULL, *perm, *e;
        bool only_perm = true, restrict_only = true;
        size_t len;
        FILE *f;
        size_t glen = 0;

        *ret_grants = NULL;
        if (read_git_file(root_fd, rel, CLAUDE_JSON_MAX, &text, &len) < 0)
                return false;
        j = claude_json_parse(text, len, &why);
        if (!cJSON_IsObject(j)) {
                cJSON_Delete(j);
                return false;
        }
        cJSON_ArrayForEach(e, j) if (strcmp(e->string, "permissions") != 0 &&
                                     strcmp(e->string, "$schema") != 0) only_perm = false;
        perm = cJSON_GetObjectItemCaseSensitive(j, "permissions");
        if (perm && !cJSON_IsObject(perm))
                only_perm = false;
        if (perm)
                cJSON_ArrayForEach(e, perm) if (strcmp(e->string, "deny") != 0 &&
                                                strcmp(e->string, "ask") != 0)
                {
                        if (strcmp(e->string, "allow") == 0 && cJSON_IsArray(e) &&
                            cJSON_GetArraySize(e) == 0)
                                continue;
                        restrict_only = false;
                        if (strcmp(e->string, "allow") != 0)
                                only_perm = false;
                }
        if (only_perm && !restrict_only && (f = open_memstream(ret_grants, &glen))) {
                const cJSON *allow = cJSON_GetObjectItemCaseSensitive(perm, "allow"), *a;

                fputs("grants, without asking:", f);
                cJSON_ArrayForEach(a, allow) if (cJSON_IsString(a))
                    fprintf(f, " %s", a->valuestring);
                fclose(f);
        }
        cJSON_Delete(j);
        return only_perm && restrict_only;
}

static bool path_named(const struct trust_rules *r, enum trust_root root, const char *rel)
{
        return strv_has(r->named[root], r->n_named[root], rel) ||
               strv_has(r->configs[root], r->n_configs[root], rel);
}

/* The named file whose directory holds rel (at any depth), or NULL: what a script loads
 * without naming it comes from there first (Python's sys.path[0], node_modules, a sourced
 * helper beside it). A script at the root itself is left out: its directory is the whole
 * tree or profile, which the other rules cover. */
static const char *path_beside_named(const struct trust_rules *r, enum trust_root root,
                                     const char *rel)
{
        for (size_t i = 0; i < r->n_named[root]; i++) {
                const char *n = r->named[root][i], *slash = strrchr(n, '/');
                size_t dl = slash ? (size_t)(slash - n) : 0;

                if (dl && strncmp(rel, n, dl) == 0 && rel[dl] == '/' && strcmp(rel, n) != 0)
                        return n;
        }
        return NULL;
}

/* Whether a project's settings file in a directory on the way to rel (the work root
 * included) names base/rel in a command: claude started in that directory would run it. */
static bool project_names(const struct trust_rules *r, int root_fd, const char *base, char **comp,
                          size_t n, const char *rel, char **ret_settings)
{
        static const char *const files[] = {".claude/settings.json", ".claude/settings.local.json"};
        _cleanup_free_ char *abs = NULL, *dir = calloc(1, strlen(rel) + 1);
        _cleanup_close_ int dfd = fcntl(root_fd, F_DUPFD_CLOEXEC, 3);

        if (!dir || asprintf(&abs, "%s/%s", base, rel) < 0)
                return false;
        for (size_t k = 0; k < n && dfd >= 0; k++) {
                for (int f = 0; f < 2 && exists_at(dfd, ".claude", false); f++) {
                        _cleanup_free_ char *project = NULL;
                        char **paths = NULL;
                        size_t np = 0;
                        bool hit;

                        if (asprintf(&project, "%s%s%s", base, *dir ? "/" : "", dir) < 0)
                                return false;
                        (void)trust_settings_paths(dfd, files[f], r->home,
                                                   r->root_path[TRUST_ROOT_PROFILE], project,
                                                   &paths, &np, NULL);
                        hit = strv_has(paths, np, abs);
                        strv_free(&paths, &np);
                        if (hit) {
                                if (asprintf(ret_settings, "named by %s/%s", project, files[f]) < 0)
                                        *ret_settings = NULL;
                                return true;
                        }
                }
                {
                        int next =
                            openat(dfd, comp[k], O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

                        close(dfd);
                        dfd = next;
                }
                if (k)
                        strcat(dir, "/");
                strcat(dir, comp[k]);
        }
        return false;
}

static bool setid_file(int root_fd, const char *rel)
{
        _cleanup_free_ char *parent = strdup(rel);
        _cleanup_close_ int pfd = -1;
        char *slash = parent ? strrchr(parent, '/') : NULL;
        struct stat st;

        if (!parent)
                return false;
        if (slash)
                *slash = '\0';
        pfd = cs_open_beneath(root_fd, slash ? parent : ".", O_PATH | O_DIRECTORY);
        return pfd >= 0 && fstatat(pfd, slash ? slash + 1 : rel, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
               S_ISREG(st.st_mode) &&
               ((st.st_mode & S_ISUID) || ((st.st_mode & S_ISGID) && (st.st_mode & S_IXGRP)));
}

/* claude's own config: what it makes the host run now, read as claude would read it, and
 * compared with what it made the host run when the session started. */
static void judge_claude_json(struct judge *j, int root_fd, const char *rel)
{
        _cleanup_free_ char *raw = NULL, *why = NULL;
        struct plan_trust now = {0};
        struct cs_error e;
        struct stat st;
        size_t len;

        if (fstatat(root_fd, rel, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return; /* gone: claude starts from nothing, and runs nothing */
        if (!S_ISREG(st.st_mode)) {
                finding(j->out, "claude's config is not a plain file", j->base, rel,
                        S_ISLNK(st.st_mode) ? "a link, which claude follows" : NULL);
                return;
        }
        if (cs_read_file_at(root_fd, rel, CLAUDE_JSON_MAX, true, &raw, &len, &e) < 0) {
                finding(j->out, "claude's config that csandbox cannot read whole", j->base, rel,
                        e.msg);
                return;
        }
        if (plan_trust_claude_json(&now, raw, len, &why) < 0) {
                finding(j->out, "claude's config read differently by two parsers", j->base, rel,
                        why);
                trust_free(&now);
                return;
        }
        for (size_t i = 0; i < now.n; i++) {
                char *kind = now.items[i], *name, *value;

                if (strv_has(j->r->claude_before.items, j->r->claude_before.n, kind))
                        continue;
                name = strchr(kind, '\t');
                *name++ = '\0';
                value = strchr(name, '\t');
                *value++ = '\0';
                {
                        _cleanup_free_ char *full = NULL;

                        if (asprintf(&full, "%s in %s/%s", kind, j->base, rel) >= 0)
                                finding(j->out, full, name, NULL, value);
                }
        }
        trust_free(&now);
}

static void judge_profile(struct judge *j, int root_fd, char **comp, size_t n, const char *rel)
{
        if (n == 1 && strcmp(comp[0], ".claude.json") == 0) {
                if (!j->r->claude_json_copied)
                        judge_claude_json(j, root_fd, rel);
                return;
        }
        /* claude's legacy config file: read in place of .claude.json when it exists, MCP
         * servers, env and approvals included */
        if (n == 1 && strcmp(comp[0], ".config.json") == 0) {
                finding(j->out, "claude config file (.config.json, read before .claude.json)",
                        j->base, rel, NULL);
                return;
        }
        if (n == 1 && (strcmp(comp[0], ".sandbox") == 0 || strcmp(comp[0], ".env") == 0 ||
                       strcmp(comp[0], "settings.json") == 0)) {
                finding(j->out, "launch configuration changed", j->base, rel,
                        "it decides where and how the next launch runs");
                return;
        }
        if (strcmp(comp[0], "hooks") == 0 || (n == 1 && strcmp(comp[0], "statusline.sh") == 0)) {
                finding(j->out, "claude hook or status line", j->base, rel, NULL);
                return;
        }
        /* A plugin's files are code only once the settings (read-only inside) enable one. */
        if (strcmp(comp[0], "plugins") == 0 && j->r->plugins_enabled && n >= 2 &&
            strcmp(comp[1], "store") != 0 && strcmp(comp[1], "data") != 0) {
                finding(j->out, "plugin file (the settings enable plugins)", j->base, rel, NULL);
                return;
        }
}

static void judge_work(struct judge *j, int root_fd, char **comp, size_t n, const char *rel,
                       enum trust_root root)
{
        _cleanup_close_ int dfd = fcntl(root_fd, F_DUPFD_CLOEXEC, 3);
        _cleanup_free_ char *dpath = calloc(1, strlen(rel) + 1);
        _cleanup_free_ char *settings = NULL;
        const char *last = comp[n - 1];

        if (!dpath)
                return;
        /* claude's: project settings and MCP servers at any depth, and what they run. */
        if (root == TRUST_ROOT_WORK) {
                if (strcmp(last, ".mcp.json") == 0)
                        finding(j->out, "project MCP servers (.mcp.json)", j->base, rel, NULL);
                if (n >= 2 && strcmp(comp[n - 2], ".claude") == 0 &&
                    (strcmp(last, "settings.json") == 0 ||
                     strcmp(last, "settings.local.json") == 0)) {
                        _cleanup_free_ char *grants = NULL;

                        if (!settings_only_restrict(root_fd, rel, &grants))
                                finding(j->out, "claude project settings", j->base, rel, grants);
                }
                /* What the host runs from the tree by its own rules, named here because
                 * the host's git starts it or stands in its place: the config of a hook
                 * manager whose installed hook runs what it names on a commit, an editor's
                 * project rc file (git commit opens the editor in the tree), and a `git` or
                 * `claude` a PATH entry into the tree (an activated virtualenv, direnv)
                 * would run in place of the host's. */
                if (is_hook_manager_config(last))
                        finding(j->out, "hook manager config (git runs what it names)", j->base,
                                rel, NULL);
                if (strcmp(last, ".exrc") == 0 || strcmp(last, ".nvimrc") == 0 ||
                    strcmp(last, ".nvim.lua") == 0)
                        finding(j->out, "editor project config (git commit opens the editor here)",
                                j->base, rel, NULL);
                if (strcmp(last, "git") == 0 || strcmp(last, "claude") == 0) {
                        struct stat st;

                        if (fstatat(root_fd, rel, &st, 0) == 0 && S_ISREG(st.st_mode) &&
                            (st.st_mode & 0111))
                                finding(j->out, "program named like one the host runs", j->base,
                                        rel, "a PATH entry into the tree would run it");
                }
                /* claude follows a .claude that is a link, wherever it leads */
                if (strcmp(last, ".claude") == 0) {
                        struct stat st;

                        if (fstatat(root_fd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                            S_ISLNK(st.st_mode))
                                finding(j->out, "claude project settings (a .claude link)", j->base,
                                        rel, NULL);
                }
                if (project_names(j->r, root_fd, j->base, comp, n, rel, &settings))
                        finding(j->out, "file claude runs", j->base, rel, settings);
        }
        /* git's: every .git on the way and every directory git may take for a git dir, not
         * only the first: git run from below uses the nearest one, which may sit inside
         * another (a repository inside a bare one, a git dir inside the work tree's own .git),
         * and the root itself is one when its .git is missing or broken. */
        if (root == TRUST_ROOT_COMMON)
                judge_git_dir(j, root_fd, "", comp, n, true);
        for (size_t k = 0; k < n && dfd >= 0; k++) {
                if (!is_main_git_dir(j->r, dfd) && may_be_git_dir(dfd))
                        judge_git_dir(j, dfd, dpath, comp + k, n - k, false);
                if (strcmp(comp[k], ".git") == 0)
                        judge_dotgit(j, dfd, dpath, comp + k + 1, n - k - 1,
                                     k == 0 && root == TRUST_ROOT_WORK && has_main_git_dir(j->r));
                {
                        int next =
                            openat(dfd, comp[k], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

                        close(dfd);
                        dfd = next;
                }
                if (k)
                        strcat(dpath, "/");
                strcat(dpath, comp[k]);
        }
}

/* A directory the session left without read permission for its owner (the user, as whom
 * the journal runs): the journal can neither list nor watch it, while the host's git and
 * claude still reach a path inside by name (mode 0300). */
static bool unreadable_dir(int root_fd, const char *rel)
{
        struct stat st;
        int fd;

        if (fstatat(root_fd, rel, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
                return false;
        fd = cs_open_beneath(root_fd, rel, O_RDONLY | O_DIRECTORY);
        if (fd >= 0) {
                close(fd);
                return false;
        }
        return errno == EACCES || errno == EPERM;
}

/* Whether rel is a link that leads (as the host resolves it, links followed) into the
 * profile's state dir, or a gitfile whose git dir is there. */
/* The target (relative to dirfd), or the nearest of its parents that exists: where a link
 * or gitfile leads now, or where what it names would be made. */
static int open_existing_prefix(int dirfd, const char *target)
{
        _cleanup_free_ char *t = strdup(target);

        while (t && *t) {
                int fd = openat(dirfd, t, O_PATH | O_CLOEXEC);
                char *slash;

                if (fd >= 0 || errno != ENOENT)
                        return fd;
                slash = strrchr(t, '/');
                if (!slash)
                        break;
                *(slash == t ? slash + 1 : slash) = '\0';
                if (slash == t && !t[1])
                        return open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        }
        return t ? fcntl(dirfd, F_DUPFD_CLOEXEC, 3) : -1;
}

static bool link_into_state(const struct trust_rules *r, int root_fd, const char *rel)
{
        _cleanup_close_ int fd = -1, dfd = -1;
        _cleanup_free_ char *text = NULL, *dir = NULL;
        struct stat st;
        const char *base = strrchr(rel, '/');
        size_t len = 0;

        if (!r->state_dev && !r->state_ino)
                return false;
        if (fstatat(root_fd, rel, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return false;
        base = base ? base + 1 : rel;
        dir = strndup(rel, (size_t)(base - rel));
        if (!dir)
                return false;
        dfd = *dir ? openat(root_fd, dir, O_PATH | O_DIRECTORY | O_CLOEXEC)
                   : fcntl(root_fd, F_DUPFD_CLOEXEC, 3);
        if (dfd < 0)
                return false;
        if (S_ISLNK(st.st_mode)) {
                char target[PATH_MAX];
                ssize_t l = readlinkat(dfd, base, target, sizeof(target) - 1);

                if (l <= 0)
                        return false;
                target[l] = '\0';
                /* Where it leads now (links on the way followed), or where a target not made
                 * yet would be. */
                fd = openat(dfd, base, O_PATH | O_CLOEXEC);
                if (fd < 0)
                        fd = open_existing_prefix(dfd, target);
        } else if (S_ISREG(st.st_mode) && strcmp(base, ".git") == 0 &&
                   read_git_file(root_fd, rel, GITFILE_MAX, &text, &len) == 0 &&
                   strncmp(text, "gitdir: ", 8) == 0) {
                while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r'))
                        text[--len] = '\0';
                fd = open_existing_prefix(dfd, text + 8);
        }
        return fd_below(cs_take_fd(&fd), r->state_dev, r->state_ino);
}

/* Whether path names a different place for each process that reads it: /proc/self,
 * /proc/thread-self (the reader's cwd, root, fds), /dev/fd and /dev/std* (links into them). */
static bool reader_relative(const char *path)
{
        static const char *const prefixes[] = {"/proc/", "/dev/fd/", "/dev/stdin", "/dev/stdout",
                                               "/dev/stderr"};

        while (*path == ' ' || *path == '\t')
                path++;
        for (size_t i = 0; i < sizeof(prefixes) / sizeof(*prefixes); i++)
                if (strncmp(path, prefixes[i], strlen(prefixes[i])) == 0)
                        return true;
        return false;
}

/* A link, a gitfile, a commondir or a gitdir file leading into /proc/self (or the like):
 * csandbox's judge and each host tool would each reach a different place through it (git
 * in a submodule reads it from there), so it cannot be judged by where it leads. */
static bool leads_per_reader(int root_fd, const char *rel)
{
        const char *base = strrchr(rel, '/');
        _cleanup_free_ char *text = NULL;
        char target[PATH_MAX];
        struct stat st;
        size_t len = 0;
        ssize_t l;

        base = base ? base + 1 : rel;
        if (fstatat(root_fd, rel, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return false;
        if (S_ISLNK(st.st_mode)) {
                l = readlinkat(root_fd, rel, target, sizeof(target) - 1);
                if (l <= 0)
                        return false;
                target[l] = '\0';
                return reader_relative(target);
        }
        if (!S_ISREG(st.st_mode) ||
            (strcmp(base, ".git") != 0 && strcmp(base, "commondir") != 0 &&
             strcmp(base, "gitdir") != 0) ||
            read_git_file(root_fd, rel, GITFILE_MAX, &text, &len) < 0)
                return false;
        return reader_relative(strncmp(text, "gitdir:", 7) == 0 ? text + 7 : text);
}

void trust_judge(const struct trust_rules *r, enum trust_root root, int root_fd, const char *rel,
                 struct plan_trust *out)
{
        _cleanup_free_ char *copy = strdup(rel);
        char *comp[JUDGE_DEPTH_MAX], *save = NULL, *c;
        struct judge j = {.r = r, .base = r->root_path[root], .out = out};
        const char *beside;
        size_t n = 0;

        if (!copy || !j.base)
                return;
        for (c = strtok_r(copy, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
                if (n == JUDGE_DEPTH_MAX) {
                        finding(out, "change too deep to judge", j.base, rel, NULL);
                        return;
                }
                comp[n++] = c;
        }
        if (n == 0)
                return;
        if (path_named(r, root, rel))
                finding(out, "file the host runs", j.base, rel,
                        "named by the settings or by the repository's git config");
        else if ((beside = path_beside_named(r, root, rel))) {
                _cleanup_free_ char *why = NULL;

                if (asprintf(&why,
                             "beside %s/%s, which the settings name: what it loads comes "
                             "from there first",
                             j.base, beside) >= 0)
                        finding(out, "file beside one the host runs", j.base, rel, why);
        }
        if (setid_file(root_fd, rel))
                finding(out, "setuid or setgid file", j.base, rel,
                        "any local user running it acts as you");
        if (unreadable_dir(root_fd, rel))
                finding(out, "directory csandbox cannot read", j.base, rel,
                        "git and claude reach what the session put inside by name, and "
                        "nothing there could be judged");
        if (link_into_state(r, root_fd, rel))
                finding(out, "link into the sandbox's own storage", j.base, rel,
                        "the host reaches what the session keeps there, which is not judged");
        if (leads_per_reader(root_fd, rel))
                finding(out, "a path that leads each reader somewhere else", j.base, rel,
                        "it names /proc/self (or /dev/fd): git and claude on the host each "
                        "reach a different place through it, so it cannot be judged");
        /* git reads a graft file in every git dir before what a commit says */
        if (strcmp(comp[n - 1], "grafts") == 0 && n >= 2 && strcmp(comp[n - 2], "info") == 0)
                finding(out, "git grafts (git shows other parents for commits)", j.base, rel, NULL);
        /* A git dir anywhere the session writes is judged by git's rules: a gitfile or a
         * link in the tree can lead the host's git to it, whenever it was made. */
        if (root == TRUST_ROOT_PROFILE)
                judge_profile(&j, root_fd, comp, n, rel);
        judge_work(&j, root_fd, comp, n, rel, root);
}

/* The files git or claude read from a tree, by name. */
static const char *const reread_names[] = {
    "config",       "config.worktree", "settings.json", "settings.local.json",
    ".mcp.json",    ".config.json",    ".gitconfig",    ".pre-commit-config.yaml",
    "lefthook.yml", ".gitmodules",     ".gitattributes"};

bool trust_rejudge(int root_fd, const char *rel)
{
        const char *base = strrchr(rel, '/');
        struct stat st;

        base = base ? base + 1 : rel;
        if (strcmp(base, ".git") == 0 || strcmp(base, "commondir") == 0 ||
            strcmp(base, "gitdir") == 0)
                return true;
        /* inotify sees write(), not a store into a shared mapping's page: read again every
         * second, so such a change is judged within a second, not when the mapping goes */
        for (size_t i = 0; i < sizeof(reread_names) / sizeof(*reread_names); i++)
                if (strcmp(base, reread_names[i]) == 0)
                        return fstatat(root_fd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                               S_ISREG(st.st_mode);
        if (fstatat(root_fd, rel, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISLNK(st.st_mode))
                return false;
        /* A link the host may enter (or git may follow): to a directory, or to nothing yet.
         * A link to a file (node_modules/.bin) leads nowhere a discovery starts. */
        return fstatat(root_fd, rel, &st, 0) < 0 ? errno == ENOENT || errno == ELOOP
                                                 : S_ISDIR(st.st_mode);
}

const char *trust_host_reads(const char *rel)
{
        const char *last = strrchr(rel, '/'), *dir_end = last;

        last = last ? last + 1 : rel;
        if (strcmp(last, ".mcp.json") == 0)
                return "project MCP servers (.mcp.json)";
        if ((strcmp(last, "settings.json") == 0 || strcmp(last, "settings.local.json") == 0) &&
            dir_end && dir_end - rel >= 7 && strncmp(dir_end - 7, ".claude", 7) == 0 &&
            (dir_end - rel == 7 || dir_end[-8] == '/'))
                return "claude project settings";
        if (strcmp(last, ".claude") == 0)
                return "claude project settings (a .claude that is a file or a link)";
        if (is_hook_manager_config(last))
                return "hook manager config (git runs what it names)";
        if (strcmp(last, ".exrc") == 0 || strcmp(last, ".nvimrc") == 0 ||
            strcmp(last, ".nvim.lua") == 0)
                return "editor project config (git commit opens the editor here)";
        if (strcmp(last, "git") == 0 || strcmp(last, "claude") == 0)
                return "program named like one the host runs";
        return NULL;
}
