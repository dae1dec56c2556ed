/* Named volumes: a directory per volume in csandbox's own data dir,
 * ${XDG_DATA_HOME:-~/.local/share}/csandbox/volumes/NAME/_data (podman's layout under its
 * storage), bound where `-v NAME:/path` says. In a session that is the profile's own data
 * dir, kept for its next sessions. csandbox records no container's use of a volume: rm
 * removes one a container still binds (its bind keeps the directory until it exits). */
#include "podman.h"
#include "podman_opts.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static bool volume_name_valid(const char *n)
{
        static const char first[] =
            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

        if (!n[0] || strlen(n) > 128 || !strchr(first, n[0]))
                return false;
        for (const char *p = n; *p; p++)
                if (!strchr(first, *p) && !strchr("_.-", *p))
                        return false;
        return true;
}

static int volumes_root(char *buf, size_t len, struct cs_error *err)
{
        const char *xdg = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
        int n;

        if (xdg && xdg[0] == '/')
                n = snprintf(buf, len, "%s/csandbox/volumes", xdg);
        else if (home && home[0] == '/')
                n = snprintf(buf, len, "%s/.local/share/csandbox/volumes", home);
        else
                return cs_error_setx(err, EINVAL,
                                     "volumes: neither XDG_DATA_HOME nor HOME is an absolute "
                                     "path; set one");
        if (n < 0 || (size_t)n >= len)
                return cs_error_setx(err, ENAMETOOLONG, "volumes: XDG_DATA_HOME is too long");
        return 0;
}

/* The volumes directory, made (0700) when missing. */
static int volumes_open(char *path, size_t len, struct cs_error *err)
{
        int fd, r = volumes_root(path, len, err);

        if (r < 0)
                return r;
        r = cs_mkdir_parents(path, 0700, err);
        if (r < 0)
                return r;
        fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return cs_error_set(err, errno, "volumes: %s", path);
        return fd;
}

static int volume_make(int dfd, const char *name, struct cs_error *err)
{
        char tmp[64], data[160];
        int r;

        snprintf(tmp, sizeof(tmp), ".new-%d", (int)getpid());
        snprintf(data, sizeof(data), "%s/_data", tmp);
        (void)cs_remove_at(dfd, tmp, &(struct cs_error){0});
        if (mkdirat(dfd, tmp, 0700) < 0 || mkdirat(dfd, data, 0755) < 0) {
                r = cs_error_set(err, errno, "volume %s: create it", name);
                (void)cs_remove_at(dfd, tmp, &(struct cs_error){0});
                return r;
        }
        /* whole or not at all; a racing create of the same name wins and is used */
        if (renameat(dfd, tmp, dfd, name) < 0) {
                r = errno;
                (void)cs_remove_at(dfd, tmp, &(struct cs_error){0});
                if (r == EEXIST || r == ENOTEMPTY)
                        return -EEXIST;
                return cs_error_set(err, r, "volume %s: create it", name);
        }
        return 0;
}

int podman_volume_path(const char *name, bool create, char **ret, struct cs_error *err)
{
        char root[PATH_MAX], data[PATH_MAX + 160];
        struct stat st;
        int dfd, r = 0;

        if (!volume_name_valid(name))
                return cs_error_setx(err, EINVAL,
                                     "`%s` is not a volume name (a letter or digit, then "
                                     "letters, digits, `_`, `.` and `-`) nor an absolute path",
                                     name);
        dfd = volumes_open(root, sizeof(root), err);
        if (dfd < 0)
                return dfd;
        snprintf(data, sizeof(data), "%s/_data", name);
        if (fstatat(dfd, data, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                if (errno != ENOENT)
                        r = cs_error_set(err, errno, "volume %s", name);
                else if (!create)
                        r = cs_error_setx(err, ENOENT, "no volume with name \"%s\" found", name);
                else if ((r = volume_make(dfd, name, err)) == -EEXIST)
                        r = 0;
        } else if (!S_ISDIR(st.st_mode)) {
                r = cs_error_setx(err, EINVAL, "volume %s: %s/%s is not a directory", name, root,
                                  data);
        }
        close(dfd);
        if (r < 0)
                return r;
        if (asprintf(ret, "%s/%s/_data", root, name) < 0)
                return cs_error_set(err, ENOMEM, "volume %s", name);
        return 0;
}

static int perr(const char *prog, const struct cs_error *err)
{
        fprintf(stderr, "Error: %s\n", err->msg);
        (void)prog;
        return err->status ? err->status : CS_EXIT_SETUP;
}

/* ---- the subcommands ---- */

enum { V_QUIET, V_FORMAT, V_FORCE, V_IGNORE, V_DRIVER, V_LABEL, V_OPT };

struct vol_ctx {
        bool quiet, force, ignore;
        const char *format;
        const char *bad; /* an option given a value csandbox cannot honour */
};

static int vol_opt(void *ctx, int id, const char *v)
{
        struct vol_ctx *c = ctx;

        switch (id) {
        case V_QUIET:
                c->quiet = strcmp(v, "true") == 0;
                break;
        case V_FORCE:
                c->force = strcmp(v, "true") == 0;
                break;
        case V_IGNORE:
                c->ignore = strcmp(v, "true") == 0;
                break;
        case V_FORMAT:
                c->format = v;
                break;
        case V_DRIVER:
                if (strcmp(v, "local") != 0)
                        return podman_opt_error("--driver %s: csandbox's volumes are local "
                                                "directories (--driver local)",
                                                v);
                break;
        case V_OPT:
                return podman_opt_error("--opt %s: csandbox's volumes are plain directories "
                                        "and take no mount options; drop --opt",
                                        v);
        default:
                break; /* --label: kept nowhere, as run's */
        }
        return 0;
}

static const struct podman_opt vol_opts[] = {
    {"--quiet", 'q', false, NULL, V_QUIET},  {"--format", 'f', true, NULL, V_FORMAT},
    {"--force", 'f', false, NULL, V_FORCE},  {"--ignore", 0, false, NULL, V_IGNORE},
    {"--driver", 'd', true, NULL, V_DRIVER}, {"--label", 'l', true, NULL, V_LABEL},
    {"--opt", 'o', true, NULL, V_OPT},
};

static const char usage_volume[] =
    "Usage: %s volume create [--ignore] [NAME] | ls [-q] [--format FORMAT] |\n"
    "       %s volume inspect [--format FORMAT] NAME... | rm [-f] NAME... | exists NAME\n"
    "\n"
    "Volumes are directories in ${XDG_DATA_HOME:-~/.local/share}/csandbox/volumes/NAME/_data;\n"
    "run -v NAME:/path makes a missing one.\n";

struct vol_info {
        char *name, *mountpoint, created[40];
};

static int vol_info(const char *name, struct vol_info *ret, struct cs_error *err)
{
        char *path = NULL;
        struct stat st;
        struct tm tm;
        int r = podman_volume_path(name, false, &path, err);

        memset(ret, 0, sizeof(*ret));
        if (r < 0)
                return r;
        ret->mountpoint = path;
        ret->name = strdup(name);
        if (!ret->name)
                return cs_error_set(err, ENOMEM, "volume");
        if (stat(path, &st) == 0 && localtime_r(&st.st_mtime, &tm))
                strftime(ret->created, sizeof(ret->created), "%Y-%m-%dT%H:%M:%S%z", &tm);
        return 0;
}

static void vol_info_free(struct vol_info *v)
{
        free(v->name);
        free(v->mountpoint);
}

/* podman's --format for a volume: {{.Name}}, {{.Driver}}, {{.Mountpoint}}, {{.Scope}},
 * {{.CreatedAt}}; any other field is refused before anything is printed. */
static int vol_format(const char *fmt, const struct vol_info *v, bool print)
{
        for (const char *p = fmt; *p;) {
                const char *end;

                if (strncmp(p, "{{", 2) != 0) {
                        if (print) {
                                if (p[0] == '\\' && p[1] == 'n')
                                        putchar('\n'), p++;
                                else if (p[0] == '\\' && p[1] == 't')
                                        putchar('\t'), p++;
                                else
                                        putchar(*p);
                        }
                        p++;
                        continue;
                }
                end = strstr(p, "}}");
                if (!end)
                        return podman_opt_error("--format `%s`: a {{ without }}", fmt);
                {
                        const char *f = p + 2, *fe = end;
                        size_t len;

                        while (*f == ' ')
                                f++;
                        while (fe > f && fe[-1] == ' ')
                                fe--;
                        len = (size_t)(fe - f);
#define IS(s) (len == strlen(s) && strncmp(f, s, len) == 0)
                        if (IS(".Name"))
                                print ? fputs(v->name, stdout) : 0;
                        else if (IS(".Driver") || IS(".Scope"))
                                print ? fputs("local", stdout) : 0;
                        else if (IS(".Mountpoint"))
                                print ? fputs(v->mountpoint, stdout) : 0;
                        else if (IS(".CreatedAt"))
                                print ? fputs(v->created, stdout) : 0;
                        else
                                return podman_opt_error("--format: `%.*s` is not a field of "
                                                        "csandbox's volumes (.Name, .Driver, "
                                                        ".Mountpoint, .Scope, .CreatedAt are)",
                                                        (int)len, f);
#undef IS
                }
                p = end + 2;
        }
        if (print)
                putchar('\n');
        return 0;
}

static cJSON *vol_json(const struct vol_info *v)
{
        cJSON *o = cJSON_CreateObject();

        if (!o || !cJSON_AddStringToObject(o, "Name", v->name) ||
            !cJSON_AddStringToObject(o, "Driver", "local") ||
            !cJSON_AddStringToObject(o, "Mountpoint", v->mountpoint) ||
            !cJSON_AddStringToObject(o, "CreatedAt", v->created) ||
            !cJSON_AddObjectToObject(o, "Labels") ||
            !cJSON_AddStringToObject(o, "Scope", "local") ||
            !cJSON_AddObjectToObject(o, "Options")) {
                cJSON_Delete(o);
                return NULL;
        }
        return o;
}

static int names_cmp(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every volume's name, sorted. */
static int vol_list(char ***ret, size_t *n, struct cs_error *err)
{
        char root[PATH_MAX];
        int dfd = volumes_open(root, sizeof(root), err);
        DIR *d;
        struct dirent *de;

        *ret = NULL;
        *n = 0;
        if (dfd < 0)
                return dfd;
        d = fdopendir(dfd);
        if (!d) {
                close(dfd);
                return cs_error_set(err, errno, "volumes: %s", root);
        }
        while ((de = readdir(d))) {
                char **v;

                if (!volume_name_valid(de->d_name))
                        continue; /* ".", "..", a .new- or .rm- in progress */
                v = realloc(*ret, (*n + 1) * sizeof(char *));
                if (!v || !(v[*n] = strdup(de->d_name))) {
                        *ret = v ? v : *ret;
                        closedir(d);
                        return cs_error_set(err, ENOMEM, "volumes");
                }
                *ret = v;
                ++*n;
        }
        closedir(d);
        if (*n > 1)
                qsort(*ret, *n, sizeof(char *), names_cmp);
        return 0;
}

static int vol_create(const char *prog, struct vol_ctx *c, char **pos, size_t n_pos)
{
        struct cs_error err = {0};
        char name[129], root[PATH_MAX];
        int dfd, r;

        if (n_pos > 1) {
                fprintf(stderr, "Error: volume create takes one name (`%s` is extra)\n", pos[1]);
                return CS_EXIT_SETUP;
        }
        if (n_pos) {
                if (!volume_name_valid(pos[0])) {
                        fprintf(stderr,
                                "Error: `%s` is not a volume name (a letter or digit, then "
                                "letters, digits, `_`, `.` and `-`)\n",
                                pos[0]);
                        return CS_EXIT_SETUP;
                }
                snprintf(name, sizeof(name), "%s", pos[0]);
        } else {
                unsigned char rnd[32];

                /* podman names an unnamed volume with 64 hex digits */
                if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd)) {
                        cs_error_set(&err, errno, "getrandom");
                        return perr(prog, &err);
                }
                for (size_t i = 0; i < sizeof(rnd); i++)
                        snprintf(name + 2 * i, 3, "%02x", rnd[i]);
        }
        dfd = volumes_open(root, sizeof(root), &err);
        if (dfd < 0)
                return perr(prog, &err);
        r = volume_make(dfd, name, &err);
        close(dfd);
        if (r == -EEXIST && !c->ignore) {
                fprintf(stderr,
                        "Error: volume with name %s already exists: volume already exists\n", name);
                return CS_EXIT_SETUP;
        }
        if (r < 0 && r != -EEXIST)
                return perr(prog, &err);
        printf("%s\n", name);
        return 0;
}

static int vol_ls(const char *prog, struct vol_ctx *c)
{
        struct cs_error err = {0};
        char **names;
        size_t n;
        int status = 0;

        if (c->format) {
                struct vol_info dummy = {.name = "", .mountpoint = ""};

                if (vol_format(c->format, &dummy, false) < 0)
                        return CS_EXIT_SETUP;
        }
        if (vol_list(&names, &n, &err) < 0)
                return perr(prog, &err);
        if (!c->quiet && !c->format)
                printf("DRIVER      VOLUME NAME\n");
        for (size_t i = 0; i < n; i++) {
                struct vol_info v;

                if (c->quiet)
                        printf("%s\n", names[i]);
                else if (!c->format)
                        printf("local       %s\n", names[i]);
                else if (vol_info(names[i], &v, &err) == 0)
                        vol_format(c->format, &v, true);
                else
                        status = perr(prog, &err);
                if (c->format && !c->quiet)
                        vol_info_free(&v);
                free(names[i]);
        }
        free(names);
        return status;
}

static int vol_inspect(const char *prog, struct vol_ctx *c, char **pos, size_t n_pos)
{
        (void)prog;
        struct cs_error err = {0};
        cJSON *arr = cJSON_CreateArray();
        int status = 0;

        if (!arr)
                return CS_EXIT_SETUP;
        if (c->format) {
                struct vol_info dummy = {.name = "", .mountpoint = ""};

                if (vol_format(c->format, &dummy, false) < 0) {
                        cJSON_Delete(arr);
                        return CS_EXIT_SETUP;
                }
        }
        for (size_t i = 0; i < n_pos; i++) {
                struct vol_info v;

                if (vol_info(pos[i], &v, &err) < 0) {
                        fprintf(stderr, "Error: %s\n", err.msg);
                        status = err.err == ENOENT ? 125 : CS_EXIT_SETUP;
                        vol_info_free(&v);
                        continue;
                }
                if (c->format)
                        vol_format(c->format, &v, true);
                else
                        cJSON_AddItemToArray(arr, vol_json(&v));
                vol_info_free(&v);
        }
        if (!c->format) {
                char *text = cJSON_Print(arr);

                if (text)
                        printf("%s\n", text);
                free(text);
        }
        cJSON_Delete(arr);
        return status;
}

static int vol_rm(const char *prog, struct vol_ctx *c, char **pos, size_t n_pos)
{
        struct cs_error err = {0};
        char root[PATH_MAX];
        int dfd, status = 0;

        (void)prog;
        dfd = volumes_open(root, sizeof(root), &err);
        if (dfd < 0)
                return perr(prog, &err);
        for (size_t i = 0; i < n_pos; i++) {
                char tmp[200];
                struct stat st;

                if (!volume_name_valid(pos[i]) ||
                    fstatat(dfd, pos[i], &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        if (c->force)
                                continue;
                        fprintf(stderr, "Error: no volume with name \"%s\" found: no such volume\n",
                                pos[i]);
                        status = 1;
                        continue;
                }
                /* out of sight first: no run binds half a volume */
                snprintf(tmp, sizeof(tmp), ".rm-%s-%d", pos[i], (int)getpid());
                if (renameat(dfd, pos[i], dfd, tmp) < 0 || cs_remove_at(dfd, tmp, &err) < 0) {
                        if (!err.msg[0])
                                cs_error_set(&err, errno, "volume rm %s", pos[i]);
                        status = perr(prog, &err);
                        continue;
                }
                printf("%s\n", pos[i]);
        }
        close(dfd);
        return status;
}

int podman_volume_main(const char *prog, int argc, char **argv)
{
        struct vol_ctx c = {0};
        _cleanup_free_ char **pos = NULL;
        const char *sub = argc > 1 ? argv[1] : NULL;
        struct podman_opt opts[sizeof(vol_opts) / sizeof(vol_opts[0])];
        size_t n = 0, n_pos;
        int r;

        if (!sub || strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0 ||
            strcmp(sub, "help") == 0) {
                printf(usage_volume, prog, prog);
                return sub ? 0 : CS_EXIT_SETUP;
        }
        /* each subcommand's own options, as podman's (-f is --force for rm, --format else) */
        for (size_t i = 0; i < sizeof(vol_opts) / sizeof(vol_opts[0]); i++) {
                int id = vol_opts[i].id;
                bool ok = (strcmp(sub, "create") == 0 &&
                           (id == V_IGNORE || id == V_DRIVER || id == V_LABEL || id == V_OPT)) ||
                          ((strcmp(sub, "ls") == 0 || strcmp(sub, "list") == 0) &&
                           (id == V_QUIET || id == V_FORMAT)) ||
                          (strcmp(sub, "inspect") == 0 && id == V_FORMAT) ||
                          ((strcmp(sub, "rm") == 0 || strcmp(sub, "remove") == 0) && id == V_FORCE);

                if (ok)
                        opts[n++] = vol_opts[i];
        }
        pos = calloc((size_t)argc, sizeof(char *));
        if (!pos)
                return CS_EXIT_SETUP;
        r = podman_opts_parse(prog, "volume", usage_volume, opts, n, vol_opt, &c, argc - 1,
                              argv + 1, pos, &n_pos);
        if (r != 0)
                return r == 1 ? 0 : CS_EXIT_SETUP;
        if (strcmp(sub, "create") == 0)
                return vol_create(prog, &c, pos, n_pos);
        if (strcmp(sub, "ls") == 0 || strcmp(sub, "list") == 0) {
                if (n_pos) {
                        fprintf(stderr, "Error: volume ls takes no arguments (`%s`)\n", pos[0]);
                        return CS_EXIT_SETUP;
                }
                return vol_ls(prog, &c);
        }
        if (strcmp(sub, "exists") == 0) {
                char *path = NULL;
                struct cs_error err = {0};

                if (n_pos != 1) {
                        fprintf(stderr, "Error: volume exists takes one name\n");
                        return CS_EXIT_SETUP;
                }
                r = podman_volume_path(pos[0], false, &path, &err);
                free(path);
                return r == 0 ? 0 : r == -ENOENT ? 1 : perr(prog, &err);
        }
        if (n_pos == 0 &&
            (strcmp(sub, "inspect") == 0 || strcmp(sub, "rm") == 0 || strcmp(sub, "remove") == 0)) {
                fprintf(stderr, "Error: volume %s: give at least one volume's name\n", sub);
                return CS_EXIT_SETUP;
        }
        if (strcmp(sub, "inspect") == 0)
                return vol_inspect(prog, &c, pos, n_pos);
        if (strcmp(sub, "rm") == 0 || strcmp(sub, "remove") == 0)
                return vol_rm(prog, &c, pos, n_pos);
        if (strcmp(sub, "prune") == 0) {
                fprintf(stderr,
                        "Error: volume prune: csandbox records no container's use of a volume, "
                        "so it cannot tell the unused ones; remove them by name (%s volume rm "
                        "NAME)\n",
                        prog);
                return CS_EXIT_SETUP;
        }
        fprintf(stderr,
                "Error: `volume %s` is not a command of csandbox's %s (create, ls, inspect, rm, "
                "exists are)\n",
                sub, prog);
        return CS_EXIT_SETUP;
}
