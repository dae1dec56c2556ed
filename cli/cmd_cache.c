/* `csandbox sandbox-cache PROFILE`: pull the images of the MCP servers that are containers
 * (`docker run … IMAGE`, `podman run … IMAGE`) named in the profile's .claude.json and in the
 * .mcp.json files of the current directory and its ancestors, into the user's csandbox
 * store. A session's podman and docker see that store read-only, so those servers start
 * with no network. Everything is read and checked before anything is pulled. */
#include "cli.h"
#include "cmd_profile.h"

#include "../common/cleanup.h"
#include "../common/engine.h"
#include "../common/error.h"
#include "../common/path.h"
#include "../policy/mcp_images.h"
#include "../policy/plan_report.h"
#include "../policy/profile.h"
#include "../policy/trust.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define CACHE_MAX_IMAGES 256
#define CACHE_MAX_ARGS   4096

static const char usage_cache[] =
    "Usage: csandbox sandbox-cache PROFILE [--tls-verify=false]\n"
    "\n"
    "Pull the images of PROFILE's MCP servers that are containers (a server whose command\n"
    "is docker or podman with `run … IMAGE`), named in PROFILE's .claude.json (top level and\n"
    "projects) and in the .mcp.json of the current directory and each directory above it,\n"
    "into your csandbox image store. Images already stored are not pulled again. Inside a\n"
    "session, podman and docker see that store read-only: those servers start with no\n"
    "network. Each image is shown with the server and the file that name it.\n"
    "\n"
    "A file a sandboxed session may have changed names nothing to pull until you accept\n"
    "that session's report: while one waits for the profile (or a session that was not\n"
    "checked, or one still running), its .claude.json is not used, and while one waits for\n"
    "a work tree here or above, neither is a .mcp.json in it; sandbox-cache then pulls\n"
    "nothing and exits 125, naming each image and file. `csandbox run --accept-changes\n"
    "PROFILE` from the same directory accepts, as run itself asks.\n"
    "\n"
    "      --tls-verify=false   as for `csandbox image pull`\n";

/* One server that runs a container: its image, its name, the file that names it, and where
 * a session's changes to that file would wait to be accepted (level: -1 the profile's
 * place, else the tree places from this many directories above the current one up). */
struct cache_entry {
        char *image, *server, *file;
        int level;
};

struct cache {
        struct cache_entry e[CACHE_MAX_IMAGES];
        size_t n;
        int level; /* of the file being read */
};

static void cache_free(struct cache *c)
{
        for (size_t i = 0; i < c->n; i++) {
                free(c->e[i].image);
                free(c->e[i].server);
                free(c->e[i].file);
        }
}

static int cache_add(struct cache *c, const char *image, const char *server, const char *file,
                     struct cs_error *err)
{
        struct cache_entry *e = &c->e[c->n];

        if (c->n >= CACHE_MAX_IMAGES)
                return cs_error_setx(err, E2BIG, "%s: more than %d container images are named",
                                     file, CACHE_MAX_IMAGES);
        e->image = strdup(image);
        e->server = strdup(server);
        e->file = strdup(file);
        e->level = c->level;
        if (!e->image || !e->server || !e->file) {
                free(e->image);
                free(e->server);
                free(e->file);
                return cs_error_set(err, ENOMEM, "%s", file);
        }
        c->n++;
        return 0;
}

/* Whether entry i's image was named by an earlier entry (pulled once, shown with each). */
static bool cache_seen(const struct cache *c, size_t i)
{
        for (size_t k = 0; k < i; k++)
                if (strcmp(c->e[k].image, c->e[i].image) == 0)
                        return true;
        return false;
}

/* One server entry: {"command": …, "args": [ … ]}. Not a container run: nothing. */
static int cache_server(struct cache *c, const cJSON *srv, const char *file, struct cs_error *err)
{
        const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(srv, "command");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(srv, "args"), *a;
        _cleanup_free_ const char **argv = NULL;
        const char *image = NULL;
        size_t n = 0;
        int r;

        if (!cJSON_IsString(cmd))
                return 0;
        if (args && !cJSON_IsArray(args))
                return cs_error_setx(err, EINVAL, "%s: server `%s`: \"args\" is not a list", file,
                                     srv->string);
        if (cJSON_GetArraySize(args) > CACHE_MAX_ARGS)
                return cs_error_setx(err, E2BIG, "%s: server `%s`: more than %d args", file,
                                     srv->string, CACHE_MAX_ARGS);
        argv = calloc((size_t)cJSON_GetArraySize(args) + 1, sizeof(*argv));
        if (!argv)
                return cs_error_set(err, ENOMEM, "%s", file);
        cJSON_ArrayForEach(a, args)
        {
                if (!cJSON_IsString(a))
                        return cs_error_setx(err, EINVAL,
                                             "%s: server `%s`: an argument is not a string", file,
                                             srv->string);
                argv[n++] = a->valuestring;
        }
        r = mcp_run_image(cmd->valuestring, argv, n, &image, err);
        if (r < 0)
                return cs_error_wrap(err, "%s: server `%s`", file, srv->string);
        if (r == 0)
                return 0;
        return cache_add(c, image, srv->string, file, err);
}

static int cache_servers(struct cache *c, const cJSON *servers, const char *file,
                         struct cs_error *err)
{
        const cJSON *s;

        if (!servers)
                return 0;
        if (!cJSON_IsObject(servers))
                return cs_error_setx(err, EINVAL, "%s: \"mcpServers\" is not an object", file);
        cJSON_ArrayForEach(s, servers)
        {
                int r;

                if (!cJSON_IsObject(s))
                        continue;
                r = cache_server(c, s, file, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* dirfd/name as .claude.json is read (bounded, no symlink, the one parser); absent: 0. */
static int cache_file(struct cache *c, int dirfd, const char *name, const char *shown,
                      bool projects, struct cs_error *err)
{
        _cleanup_free_ char *why = NULL;
        struct stat st;
        cJSON *j, *p, *proj;
        int r;

        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : cs_error_set(err, errno, "%s", shown);
        j = plan_claude_json_read(dirfd, name, &why);
        if (!j)
                return cs_error_setx(err, EINVAL, "%s: %s; fix or remove it", shown,
                                     why ? why : "cannot be read");
        r = cache_servers(c, cJSON_GetObjectItemCaseSensitive(j, "mcpServers"), shown, err);
        proj = projects ? cJSON_GetObjectItemCaseSensitive(j, "projects") : NULL;
        if (r == 0 && cJSON_IsObject(proj))
                cJSON_ArrayForEach(p, proj)
                {
                        if (!cJSON_IsObject(p))
                                continue;
                        r = cache_servers(c, cJSON_GetObjectItemCaseSensitive(p, "mcpServers"),
                                          shown, err);
                        if (r < 0)
                                break;
                }
        cJSON_Delete(j);
        return r;
}

/* The .mcp.json of the current directory and of each one above it, walked by fd ("..") so
 * that no path is looked up twice; the names shown come from getcwd. */
static int cache_ancestors(struct cache *c, struct cs_error *err)
{
        char cwd[PATH_MAX];
        int fd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
        int r = 0;

        if (fd < 0)
                return cs_error_set(err, errno, "open the current directory");
        if (!getcwd(cwd, sizeof(cwd)))
                snprintf(cwd, sizeof(cwd), "(current directory)");
        for (int depth = 0; depth < 256; depth++) {
                char shown[PATH_MAX + 16];
                struct stat here, up;
                int parent;

                snprintf(shown, sizeof(shown), "%s%s.mcp.json", cwd,
                         strcmp(cwd, "/") == 0 ? "" : "/");
                c->level = depth;
                r = cache_file(c, fd, ".mcp.json", shown, false, err);
                if (r < 0)
                        break;
                parent = openat(fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (parent < 0) {
                        r = cs_error_set(err, errno, "open the parent of %s", cwd);
                        break;
                }
                if (fstat(fd, &here) < 0 || fstat(parent, &up) < 0 ||
                    (here.st_dev == up.st_dev && here.st_ino == up.st_ino)) {
                        close(parent);
                        break; /* at / */
                }
                close(fd);
                fd = parent;
                char *slash = strrchr(cwd, '/');
                if (slash && slash != cwd)
                        *slash = '\0';
                else
                        snprintf(cwd, sizeof(cwd), "/");
        }
        close(fd);
        return r;
}

/* Where a session's changes to the file of level wait (trust_place_waiting), said. */
static void cache_say_waiting(unsigned what, const char *where, const char *name)
{
        if (what & TRUST_WAIT_REPORT)
                fprintf(stderr,
                        "csandbox: sandbox-cache: a sandboxed session changed what the host "
                        "runs in %s and it is not accepted yet (listed above). Check it, then "
                        "accept it from this directory with `csandbox run --accept-changes %s` "
                        "(or `csandbox run %s` at a terminal, which asks), and run sandbox-cache "
                        "again.\n",
                        where, name, name);
        if (what & TRUST_WAIT_UNCHECKED)
                fprintf(stderr,
                        "csandbox: sandbox-cache: a sandboxed session in %s ended before "
                        "csandbox checked what it left: `csandbox run --sandbox %s` from this "
                        "directory checks it.\n",
                        where, name);
        if (what & TRUST_WAIT_RUNNING)
                fprintf(stderr,
                        "csandbox: sandbox-cache: a sandboxed session is running in %s: what it "
                        "writes is judged when it ends; run sandbox-cache after that.\n",
                        where);
}

/* A file a session may have written, whose change the user has not accepted, names no image
 * to pull: the same reports and records `csandbox run` refuses on (policy/trust_pending.c),
 * read in the same places (the profile's, and the work tree's of this directory and each
 * one above it). 0: nothing waits for what is named; else CS_EXIT_SETUP, said. */
static int cache_unaccepted(const struct cache *c, struct profile *p,
                            const struct profile_config *conf, const char *name)
{
        struct trust_place pl;
        struct cs_error err = {0};
        char dir[PATH_MAX], where[PATH_MAX + 32];
        unsigned waits[258] = {0}; /* [0]: the profile's; [1 + level]: the tree's */
        struct stat st;
        bool blocked = false;
        int r;

        /* The profile's state dir, where its reports wait: none yet, nothing waits. */
        if (p->state_dir && stat(p->state_dir, &st) == 0 && S_ISDIR(st.st_mode) &&
            profile_state_open(p, &err) < 0) {
                fprintf(stderr, "csandbox: sandbox-cache: %s\n", err.msg);
                return CS_EXIT_SETUP;
        }
        if (p->state_fd >= 0 && trust_place_profile(p, false, &pl, &err) > 0)
                waits[0] = trust_place_waiting(&pl);
        trust_place_close(&pl);
        if (!getcwd(dir, sizeof(dir)))
                dir[0] = '\0';
        /* The tree places above the shallowest .mcp.json named cover it too. */
        for (int level = 0; dir[0] == '/' && level < 256; level++) {
                char *slash;

                r = trust_place_tree(conf->data_home, dir, false, &pl, &err);
                if (r > 0)
                        waits[1 + level] = trust_place_waiting(&pl);
                trust_place_close(&pl);
                if (strcmp(dir, "/") == 0)
                        break;
                slash = strrchr(dir, '/');
                slash[slash == dir ? 1 : 0] = '\0';
        }
        for (size_t i = 0; i < c->n; i++) {
                bool b = c->e[i].level < 0 ? waits[0] != 0 : false;

                for (int level = c->e[i].level; level >= 0 && level < 256 && !b; level++)
                        b = waits[1 + level] != 0;
                if (!b)
                        continue;
                if (!blocked)
                        fprintf(stderr, "csandbox: sandbox-cache: not pulling what a file a "
                                        "sandboxed session may have changed names, until that "
                                        "change is accepted:\n");
                blocked = true;
                fprintf(stderr, "  %s, for server `%s` in %s\n", c->e[i].image, c->e[i].server,
                        c->e[i].file);
        }
        if (!blocked)
                return 0;
        /* What waits, shown as run shows it (and accepting nothing), then how to go on. */
        for (int k = 0; k < 257; k++) {
                _cleanup_free_ char *text = NULL;
                bool accepted;

                if (!waits[k])
                        continue;
                if (k == 0) {
                        r = trust_place_profile(p, false, &pl, &err);
                        snprintf(where, sizeof(where), "the profile %s", p->dir);
                } else {
                        if (!getcwd(dir, sizeof(dir)))
                                break;
                        for (int up = 1; up < k; up++) {
                                char *slash = strrchr(dir, '/');

                                slash[slash == dir ? 1 : 0] = '\0';
                        }
                        r = trust_place_tree(conf->data_home, dir, false, &pl, &err);
                        snprintf(where, sizeof(where), "the work tree %s", dir);
                }
                if (r > 0 &&
                    trust_pending_take(&pl, 1, false, NULL, NULL, &text, &accepted, &err) >= 0 &&
                    text)
                        fprintf(stderr, "%s\n", text);
                trust_place_close(&pl);
                cache_say_waiting(waits[k], where, name);
        }
        return CS_EXIT_SETUP;
}

/* csandbox-import --pull --missing [--quiet] [--tls-verify=false] IMAGE: its exit status. */
static int cache_pull(const char *helper, const char *image, bool tls_verify)
{
        char *v[] = {"csandbox-import", "--pull", "--missing", "--quiet", NULL, NULL, NULL};
        int status;
        pid_t pid;

        v[4] = tls_verify ? (char *)image : "--tls-verify=false";
        v[5] = tls_verify ? NULL : (char *)image;
        fflush(stdout);
        fflush(stderr);
        pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                cs_engine_execv(helper, v);
                fprintf(stderr, "csandbox: sandbox-cache: cannot run %s: %s\n", helper,
                        strerror(errno));
                _exit(CS_EXIT_SETUP);
        }
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int cmd_sandbox_cache(int argc, char **argv)
{
        struct profile_config conf = {0};
        struct profile p = {.dir_fd = -1, .state_fd = -1};
        struct cache c = {0};
        struct cs_error err = {0};
        _cleanup_free_ char *helper = NULL;
        const char *name = NULL;
        bool tls_verify = true;
        size_t failed = 0, images = 0;
        int r, status = 0;

        for (int i = 0; i < argc; i++) {
                if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
                        fputs(usage_cache, stdout);
                        return 0;
                }
                if (strcmp(argv[i], "--tls-verify=false") == 0)
                        tls_verify = false;
                else if (strcmp(argv[i], "--tls-verify=true") == 0)
                        tls_verify = true;
                else if (argv[i][0] == '-' && argv[i][1] != '\0')
                        return cli_usage_error("sandbox-cache", "unknown option `%s`", argv[i]);
                else if (name)
                        return cli_usage_error("sandbox-cache", "unexpected argument `%s`",
                                               argv[i]);
                else
                        name = argv[i];
        }
        if (!name)
                return cli_usage_error("sandbox-cache", "which profile? give its name");
        r = profile_config_load(&conf, &err);
        if (r < 0)
                return cli_fail(&err);
        r = profile_open(&conf, name, &p, &err);
        if (r < 0) {
                profile_config_free(&conf);
                return cli_fail(&err);
        }
        {
                char shown[PATH_MAX + 16];

                c.level = -1;
                snprintf(shown, sizeof(shown), "%s/.claude.json", p.dir);
                r = cache_file(&c, p.dir_fd, ".claude.json", shown, true, &err);
        }
        if (r == 0)
                r = cache_ancestors(&c, &err);
        if (r < 0) {
                status = cli_fail(&err);
                goto out;
        }
        if (c.n == 0) {
                printf("sandbox-cache %s: no MCP server of this profile runs a container image; "
                       "nothing to pull\n",
                       name);
                goto out;
        }
        status = cache_unaccepted(&c, &p, &conf, name);
        if (status != 0)
                goto out;
        helper = cs_self_sibling("csandbox-import");
        if (!helper) {
                status = cli_usage_error("sandbox-cache",
                                         "cannot find csandbox's own path (/proc/self/exe)");
                goto out;
        }
        for (size_t i = 0; i < c.n; i++) {
                if (cache_seen(&c, i))
                        continue;
                images++;
                /* Which file and server asked for it, each, then the helper's one line:
                 * pulled, or already stored. */
                for (size_t k = i; k < c.n; k++)
                        if (strcmp(c.e[k].image, c.e[i].image) == 0)
                                printf("%s: for server `%s` in %s\n", c.e[i].image, c.e[k].server,
                                       c.e[k].file);
                r = cache_pull(helper, c.e[i].image, tls_verify);
                if (r != 0) {
                        printf("not pulled %s%s%s\n", c.e[i].image, r < 0 ? ": " : "",
                               r < 0 ? strerror(-r) : "");
                        failed++;
                }
        }
        printf("sandbox-cache %s: %zu image%s, %zu ready, %zu failed\n", name, images,
               images == 1 ? "" : "s", images - failed, failed);
        status = failed ? CS_EXIT_SETUP : 0;
out:
        cache_free(&c);
        profile_close(&p);
        profile_config_free(&conf);
        return status;
}
