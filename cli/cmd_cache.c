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
    "network.\n"
    "\n"
    "      --tls-verify=false   as for `csandbox image pull`\n";

struct cache {
        char *images[CACHE_MAX_IMAGES];
        char *origin[CACHE_MAX_IMAGES]; /* "server NAME in FILE" */
        size_t n;
};

static void cache_free(struct cache *c)
{
        for (size_t i = 0; i < c->n; i++) {
                free(c->images[i]);
                free(c->origin[i]);
        }
}

static int cache_add(struct cache *c, const char *image, const char *server, const char *file,
                     struct cs_error *err)
{
        for (size_t i = 0; i < c->n; i++)
                if (strcmp(c->images[i], image) == 0)
                        return 0;
        if (c->n >= CACHE_MAX_IMAGES)
                return cs_error_setx(err, E2BIG, "%s: more than %d container images are named",
                                     file, CACHE_MAX_IMAGES);
        c->images[c->n] = strdup(image);
        if (asprintf(&c->origin[c->n], "server `%s` in %s", server, file) < 0)
                c->origin[c->n] = NULL;
        if (!c->images[c->n] || !c->origin[c->n]) {
                free(c->images[c->n]);
                free(c->origin[c->n]);
                return cs_error_set(err, ENOMEM, "%s", file);
        }
        c->n++;
        return 0;
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
        size_t failed = 0;
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
        helper = cs_self_sibling("csandbox-import");
        if (!helper) {
                status = cli_usage_error("sandbox-cache",
                                         "cannot find csandbox's own path (/proc/self/exe)");
                goto out;
        }
        for (size_t i = 0; i < c.n; i++) {
                /* The helper prints the one line: pulled, or already stored. */
                r = cache_pull(helper, c.images[i], tls_verify);
                if (r != 0) {
                        printf("not pulled %s (%s)%s%s\n", c.images[i], c.origin[i],
                               r < 0 ? ": " : "", r < 0 ? strerror(-r) : "");
                        failed++;
                }
        }
        printf("sandbox-cache %s: %zu image%s, %zu ready, %zu failed\n", name, c.n,
               c.n == 1 ? "" : "s", c.n - failed, failed);
        status = failed ? CS_EXIT_SETUP : 0;
out:
        cache_free(&c);
        profile_close(&p);
        profile_config_free(&conf);
        return status;
}
