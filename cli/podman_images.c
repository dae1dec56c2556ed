/* `csandbox podman|docker pull|build|images|rmi|inspect|tag`: podman's image commands with
 * podman's options, output and exit statuses, on csandbox's own store (image/store) and
 * engine: pull and build run the same csandbox-import helper `csandbox image pull|build`
 * runs; the others call the store as `csandbox image` does. Lookups see the writable store,
 * then the read-only ones of CSANDBOX_READONLY_STORE (listed R/O, never changed). */
#include "podman.h"
#include "podman_opts.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"
#include "../common/path.h"
#include "../image/store/store.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define EXIT_FAIL      125
#define HELPER_OUT_MAX (64u << 10) /* what pull and build print on stdout */
#define INFO_JSON_MAX  (1u << 20)

static const char *prog = "podman";

static void json_deletep(cJSON **j)
{
        cJSON_Delete(*j);
}
#define _cleanup_cjson_ __attribute__((cleanup(json_deletep)))

struct stores {
        struct image_store w;
        struct image_store *ro;
        size_t n_ro;
};

static int perr(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int perr(const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        podman_opt_verror(fmt, ap);
        va_end(ap);
        return EXIT_FAIL;
}

static int pfail(const struct cs_error *err)
{
        fprintf(stderr, "Error: %s\n", err->msg);
        return err->status ? err->status : EXIT_FAIL;
}

static int stores_open(struct stores *st, struct cs_error *err)
{
        int r;

        *st = (struct stores){.w = {.fd = -1}};
        r = store_open(NULL, &st->w, err);
        if (r == 0)
                r = store_open_readonly(&st->w, &st->ro, &st->n_ro, err);
        return r;
}

static void stores_close(struct stores *st)
{
        store_close_all(st->ro, st->n_ro);
        store_close(&st->w);
}

static struct image_store *store_of(struct stores *st, const char *root)
{
        for (size_t i = 0; root && i < st->n_ro; i++)
                if (st->ro[i].root == root)
                        return &st->ro[i];
        return &st->w;
}

/* podman_opts_parse for a subcommand: 0 parsed, else the exit status (0 after --help). */
static int parse_opts(const char *sub, const char *usage_fmt, const struct podman_opt *opts,
                      size_t n, podman_opt_fn fn, void *ctx, int argc, char **argv, char **pos,
                      size_t *n_pos)
{
        int r = podman_opts_parse(prog, sub, usage_fmt, opts, n, fn, ctx, argc, argv, pos, n_pos);

        return r == 0 ? -1 : r == 1 ? 0 : EXIT_FAIL;
}

static bool on(const char *v)
{
        return strcmp(v, "true") == 0;
}

/* ---- finding an image: a name, a digest, or a unique prefix of an image ID ---- */

static bool all_hex(const char *s)
{
        for (; *s; s++)
                if (!isxdigit((unsigned char)*s) || isupper((unsigned char)*s))
                        return false;
        return true;
}

/* name's digest and the store holding it; 0, -ENOENT (printed as podman does), or another
 * error (printed). */
static int find_image(struct stores *st, const char *name, char digest[OCI_DIGEST_LEN + 1],
                      struct image_store **at, bool *by_id, bool quiet)
{
        struct cs_error err = {0};
        struct image_info *v = NULL;
        const char *hex = strncmp(name, "sha256:", 7) == 0 ? name + 7 : name;
        size_t n = 0, hits = 0;
        int r = store_find(&st->w, st->ro, st->n_ro, name, digest, at, &err);

        if (by_id)
                *by_id = strncmp(name, "sha256:", 7) == 0;
        if (r == 0)
                return 0;
        if (r == -ENOENT && strlen(hex) >= 3 && strlen(hex) < 64 && all_hex(hex) &&
            store_list_all(&st->w, st->ro, st->n_ro, &v, &n, &err) == 0) {
                for (size_t i = 0; i < n; i++) {
                        if (strncmp(v[i].digest + 7, hex, strlen(hex)) != 0)
                                continue;
                        if (hits && strcmp(digest, v[i].digest) == 0)
                                continue; /* the same image under another name */
                        hits++;
                        snprintf(digest, OCI_DIGEST_LEN + 1, "%s", v[i].digest);
                        *at = store_of(st, v[i].store);
                }
                image_info_free(v, n);
                if (hits == 1 && by_id)
                        *by_id = true;
                if (hits == 1)
                        return 0;
                if (hits > 1) {
                        if (!quiet)
                                perr("%s: the short ID is ambiguous: more images start with it",
                                     name);
                        return -EEXIST;
                }
        }
        if (!quiet) {
                if (r == -ENOENT)
                        perr("%s: image not known", name);
                else
                        pfail(&err);
        }
        return r;
}

/* ---- the helper: pull and build ---- */

/* line starts with "sha256:" and 64 hex digits. */
static bool last_digest_is(const char *line)
{
        for (size_t k = 7; k < 71; k++)
                if (!isxdigit((unsigned char)line[k]))
                        return false;
        return true;
}

/* The last "sha256:<64 hex>" in text, or NULL. */
static const char *last_digest(const char *text)
{
        const char *found = NULL;

        for (const char *p = strstr(text, "sha256:"); p; p = strstr(p + 1, "sha256:")) {
                size_t k = 0;

                while (k < 64 && isxdigit((unsigned char)p[7 + k]))
                        k++;
                if (k == 64 && !isxdigit((unsigned char)p[71]))
                        found = p;
        }
        return found;
}

/* The helper's output to stderr line by line, but a line that is a digest alone (the
 * helper's last, which stdout gets as the ID); end: what is left of a last line. */
static void stream_lines(const char *buf, size_t n, bool end)
{
        static char line[4096];
        static size_t len;

        for (size_t i = 0; i < n; i++) {
                if (len < sizeof(line))
                        line[len++] = buf[i];
                if (buf[i] != '\n' && len < sizeof(line))
                        continue;
                if (!(len == 72 && line[71] == '\n' && strncmp(line, "sha256:", 7) == 0 &&
                      last_digest_is(line)))
                        fwrite(line, 1, len, stderr);
                len = 0;
        }
        if (end && len) {
                fwrite(line, 1, len, stderr);
                len = 0;
        }
        fflush(stderr);
}

/* csandbox-import WHAT ARGS..., its stdout read: on success the image ID (the digest's hex)
 * is printed on stdout, as podman prints it, and the helper's own lines go to stderr as
 * they come unless quiet (then only on failure). Returns the exit status. */
static int run_helper(const char *what, char **args, size_t n, bool quiet)
{
        _cleanup_free_ char *helper = cs_self_sibling("csandbox-import");
        _cleanup_free_ char *out = NULL;
        char **v;
        size_t len = 0;
        int fds[2], status;
        pid_t pid;

        if (!helper)
                return perr("cannot find csandbox's own path (/proc/self/exe)");
        v = calloc(n + 3, sizeof(*v));
        out = malloc(HELPER_OUT_MAX + 1);
        if (!v || !out) {
                free(v);
                return perr("out of memory");
        }
        v[0] = "csandbox-import";
        v[1] = (char *)what;
        for (size_t i = 0; i < n; i++)
                v[i + 2] = args[i];
        fflush(NULL);
        if (pipe2(fds, O_CLOEXEC) < 0) {
                free(v);
                return perr("pipe: %s", strerror(errno));
        }
        pid = fork();
        if (pid < 0) {
                free(v);
                close(fds[0]);
                close(fds[1]);
                return perr("fork: %s", strerror(errno));
        }
        if (pid == 0) {
                if (dup2(fds[1], STDOUT_FILENO) < 0)
                        _exit(EXIT_FAIL);
                execv(helper, v);
                fprintf(stderr,
                        "Error: cannot run %s: %s; it is built and installed beside csandbox\n",
                        helper, strerror(errno));
                _exit(EXIT_FAIL);
        }
        free(v);
        close(fds[1]);
        for (;;) {
                char buf[4096];
                ssize_t k = read(fds[0], buf, sizeof(buf));

                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        break;
                /* the steps' lines on stderr as they come (a long RUN step shows its
                 * progress), stdout keeps only the ID for scripts */
                if (!quiet)
                        stream_lines(buf, (size_t)k, false);
                /* past the bound the rest is read and dropped, so the helper never blocks */
                if (len < HELPER_OUT_MAX) {
                        size_t take =
                            (size_t)k < HELPER_OUT_MAX - len ? (size_t)k : HELPER_OUT_MAX - len;
                        memcpy(out + len, buf, take);
                        len += take;
                }
        }
        close(fds[0]);
        out[len] = '\0';
        if (!quiet)
                stream_lines(NULL, 0, true);
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return perr("wait for csandbox-import: %s", strerror(errno));
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                if (quiet)
                        fputs(out, stderr);
                return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        }
        {
                const char *d = last_digest(out);

                if (!d) {
                        if (quiet)
                                fputs(out, stderr);
                        return perr("csandbox-import printed no image digest");
                }
                printf("%.64s\n", d + 7);
        }
        return 0;
}

static const char usage_pull[] =
    "Usage: %s pull [--tls-verify=false] [-q] [--platform OS/ARCH] [--policy always|missing] "
    "REF\n";

enum { PULL_QUIET, PULL_TLS, PULL_PLATFORM, PULL_POLICY, PULL_MISSING };
static const struct podman_opt pull_opts[] = {
    {"--quiet", 'q', false, NULL, PULL_QUIET},    {"--tls-verify", 0, false, NULL, PULL_TLS},
    {"--platform", 0, true, NULL, PULL_PLATFORM}, {"--policy", 0, true, NULL, PULL_POLICY},
    {"--missing", 0, false, NULL, PULL_MISSING},
};

struct pull_ctx {
        char *args[16];
        size_t n;
        bool quiet;
};

static int pull_opt(void *ctx, int id, const char *v)
{
        struct pull_ctx *c = ctx;

        if (c->n + 2 > 12)
                return podman_opt_error("pull: too many options");
        switch (id) {
        case PULL_QUIET:
                c->quiet = on(v);
                break;
        case PULL_TLS:
                c->args[c->n++] = on(v) ? "--tls-verify=true" : "--tls-verify=false";
                break;
        case PULL_PLATFORM:
                c->args[c->n++] = "--platform";
                c->args[c->n++] = (char *)v;
                break;
        case PULL_POLICY:
                if (strcmp(v, "missing") == 0)
                        c->args[c->n++] = "--missing";
                else if (strcmp(v, "always") != 0)
                        return podman_opt_error(
                            "--policy %s: csandbox's %s supports always and missing", v, prog);
                break;
        case PULL_MISSING:
                if (on(v))
                        c->args[c->n++] = "--missing";
                break;
        }
        return 0;
}

static int cmd_pull(int argc, char **argv)
{
        _cleanup_free_ char **pos = calloc((size_t)argc, sizeof(char *));
        struct pull_ctx c = {0};
        size_t n_pos;
        int r;

        if (!pos)
                return perr("out of memory");
        r = parse_opts("pull", usage_pull, pull_opts, sizeof(pull_opts) / sizeof(pull_opts[0]),
                       pull_opt, &c, argc, argv, pos, &n_pos);
        if (r >= 0)
                return r;
        if (n_pos == 0)
                return perr("`%s pull` needs an image reference", prog);
        if (n_pos > 1)
                return perr("`%s pull` takes one image reference (`%s` is extra)", prog, pos[1]);
        c.args[c.n++] = "--quiet";
        c.args[c.n++] = pos[0];
        return run_helper("--pull", c.args, c.n, c.quiet);
}

static const char usage_build[] =
    "Usage: %s build [-t NAME]... [-f FILE] [--build-arg K=V]... [--target STAGE] [--no-cache]\n"
    "       [--pull] [--network none|host] [--tls-verify=false] [-q] [CONTEXT]\n";

enum {
        BUILD_TAG,
        BUILD_FILE,
        BUILD_ARG,
        BUILD_TARGET,
        BUILD_NETWORK,
        BUILD_NO_CACHE,
        BUILD_PULL,
        BUILD_QUIET,
        BUILD_TLS,
        BUILD_LAYERS,
        BUILD_RM,
};
static const struct podman_opt build_opts[] = {
    {"--tag", 't', true, NULL, BUILD_TAG},       {"--file", 'f', true, NULL, BUILD_FILE},
    {"--build-arg", 0, true, NULL, BUILD_ARG},   {"--target", 0, true, NULL, BUILD_TARGET},
    {"--network", 0, true, NULL, BUILD_NETWORK}, {"--no-cache", 0, false, NULL, BUILD_NO_CACHE},
    {"--pull", 0, true, "always", BUILD_PULL},   {"--quiet", 'q', false, NULL, BUILD_QUIET},
    {"--tls-verify", 0, false, NULL, BUILD_TLS}, {"--layers", 0, false, NULL, BUILD_LAYERS},
    {"--rm", 0, false, NULL, BUILD_RM},
};

struct build_ctx {
        char **args; /* room for two per option */
        size_t n;
        bool quiet, net_given;
};

static int build_opt(void *ctx, int id, const char *v)
{
        static const char *const as[] = {
            [BUILD_TAG] = "--tag",
            [BUILD_FILE] = "--file",
            [BUILD_ARG] = "--build-arg",
            [BUILD_TARGET] = "--target",
        };
        struct build_ctx *c = ctx;

        switch (id) {
        case BUILD_TAG:
        case BUILD_FILE:
        case BUILD_ARG:
        case BUILD_TARGET:
                /* the long name as the helper spells it */
                c->args[c->n++] = (char *)as[id];
                c->args[c->n++] = (char *)v;
                break;
        case BUILD_NETWORK:
                c->net_given = true;
                if (strcmp(v, "none") == 0)
                        c->args[c->n++] = "--network", c->args[c->n++] = "none";
                else if (strcmp(v, "host") == 0 || strcmp(v, "private") == 0 ||
                         strcmp(v, "default") == 0 || strcmp(v, "pasta") == 0)
                        /* RUN steps reach the network this session has */
                        c->args[c->n++] = "--network", c->args[c->n++] = "host";
                else
                        return podman_opt_error("--network %s: csandbox's %s build supports "
                                                "none and host (the network this session has)",
                                                v, prog);
                break;
        case BUILD_NO_CACHE:
                if (on(v))
                        c->args[c->n++] = "--no-cache";
                break;
        case BUILD_PULL:
                if (strcmp(v, "true") == 0 || strcmp(v, "always") == 0)
                        c->args[c->n++] = "--pull";
                else if (strcmp(v, "false") != 0 && strcmp(v, "missing") != 0)
                        /* missing is the default: FROM images are pulled when not stored */
                        return podman_opt_error(
                            "--pull=%s: csandbox's %s build supports always and missing", v, prog);
                break;
        case BUILD_QUIET:
                c->quiet = on(v);
                break;
        case BUILD_TLS:
                c->args[c->n++] = on(v) ? "--tls-verify=true" : "--tls-verify=false";
                break;
        case BUILD_LAYERS:
        case BUILD_RM:
                /* podman's defaults, and what csandbox always does: every step's changes are
                 * a cached layer; no intermediate container is kept */
                if (!on(v))
                        return podman_opt_error("%s=false: csandbox's %s build always caches "
                                                "each step as a layer and keeps no container",
                                                id == BUILD_RM ? "--rm" : "--layers", prog);
                break;
        }
        return 0;
}

static int cmd_build(int argc, char **argv)
{
        _cleanup_free_ char **args = calloc((size_t)argc * 2 + 6, sizeof(char *));
        _cleanup_free_ char **pos = calloc((size_t)argc, sizeof(char *));
        struct build_ctx c = {.args = args};
        size_t n_pos;
        int r;

        if (!args || !pos)
                return perr("out of memory");
        r = parse_opts("build", usage_build, build_opts, sizeof(build_opts) / sizeof(build_opts[0]),
                       build_opt, &c, argc, argv, pos, &n_pos);
        if (r >= 0)
                return r;
        if (n_pos > 1)
                return perr("`%s build` takes one context directory (`%s` is extra)", prog, pos[1]);
        /* as run: RUN steps have the network of whoever builds (in a session, the session's) */
        if (!c.net_given)
                args[c.n++] = "--network", args[c.n++] = "host";
        if (c.quiet)
                args[c.n++] = "--quiet";
        args[c.n++] = n_pos ? pos[0] : ".";
        return run_helper("--build", args, c.n, c.quiet);
}

/* ---- templates: podman's --format, `{{.Field}}` and `{{json .Field}}` ---- */

/* The value of a field (a malloc'ed string), or NULL when there is no such field. */
typedef char *(*lookup_fn)(const char *path, bool json, void *ctx);

static void put_escaped(FILE *f, const char *s, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                if (s[i] == '\\' && i + 1 < n && (s[i + 1] == 't' || s[i + 1] == 'n')) {
                        fputc(s[i + 1] == 't' ? '\t' : '\n', f);
                        i++;
                } else {
                        fputc(s[i], f);
                }
        }
}

/* fmt rendered on f; -1 (printed) for what it cannot render. */
static int render(FILE *f, const char *fmt, lookup_fn lookup, void *ctx)
{
        const char *p = fmt;

        for (;;) {
                const char *open = strstr(p, "{{"), *close;
                char inner[256], *s, *e;
                bool json = false;
                char *val;

                if (!open) {
                        put_escaped(f, p, strlen(p));
                        return 0;
                }
                put_escaped(f, p, (size_t)(open - p));
                close = strstr(open + 2, "}}");
                if (!close || (size_t)(close - open) > sizeof(inner))
                        return perr("--format: unterminated `{{` in `%s`", fmt), -1;
                snprintf(inner, sizeof(inner), "%.*s", (int)(close - open - 2), open + 2);
                for (s = inner; isspace((unsigned char)*s); s++)
                        ;
                e = s + strlen(s);
                while (e > s && isspace((unsigned char)e[-1]))
                        *--e = '\0';
                if (strncmp(s, "json ", 5) == 0) {
                        json = true;
                        for (s += 5; isspace((unsigned char)*s); s++)
                                ;
                }
                if (s[0] != '.')
                        return perr("--format: `{{%s}}` is not supported by csandbox's %s "
                                    "(only {{.Field}} and {{json .Field}})",
                                    inner, prog),
                               -1;
                val = lookup(s + 1, json, ctx);
                if (!val)
                        return perr("--format: no field `%s`", s), -1;
                fputs(val, f);
                free(val);
                p = close + 2;
        }
}

/* ---- images ---- */

struct row {
        const struct image_info *info;
        char repo[256], tag[128];
        bool no_trunc;
};

static void split_name(const char *name, char repo[256], char tag[128])
{
        const char *slash = strrchr(name, '/'), *colon = strrchr(name, ':');

        if (colon && (!slash || colon > slash)) {
                snprintf(repo, 256, "%.*s", (int)(colon - name), name);
                snprintf(tag, 128, "%s", colon + 1);
        } else {
                snprintf(repo, 256, "%s", name);
                snprintf(tag, 128, "latest");
        }
}

/* podman's "2 weeks ago". */
static void since(int64_t created, char *buf, size_t len)
{
        int64_t d = (int64_t)time(NULL) - created;
        static const struct {
                int64_t secs;
                const char *unit;
        } units[] = {{365 * 86400, "year"}, {30 * 86400, "month"}, {7 * 86400, "week"},
                     {86400, "day"},        {3600, "hour"},        {60, "minute"}};

        if (created <= 0) {
                snprintf(buf, len, "unknown");
                return;
        }
        if (d < 60) {
                snprintf(buf, len, "Less than a minute ago");
                return;
        }
        for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
                if (d >= units[i].secs) {
                        int64_t n = d / units[i].secs;

                        if (n == 1)
                                snprintf(buf, len, "%s %s ago", units[i].secs == 3600 ? "An" : "1",
                                         units[i].unit);
                        else
                                snprintf(buf, len, "%" PRId64 " %ss ago", n, units[i].unit);
                        return;
                }
        }
}

/* podman's sizes: decimal units, three significant digits ("5.87 MB"). */
static void si_size(uint64_t n, char *buf, size_t len)
{
        static const char *const u[] = {"B", "kB", "MB", "GB", "TB", "PB"};
        double v = (double)n;
        size_t i = 0;

        while (v >= 1000 && i + 1 < sizeof(u) / sizeof(u[0])) {
                v /= 1000;
                i++;
        }
        snprintf(buf, len, "%.3g %s", v, u[i]);
}

static void rfc3339(int64_t t, char *buf, size_t len)
{
        time_t tt = (time_t)t;
        struct tm tm;

        strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&tt, &tm));
}

static char *row_lookup(const char *key, bool json, void *ctx)
{
        const struct row *r = ctx;
        char buf[300];

        if (strcmp(key, "Repository") == 0)
                snprintf(buf, sizeof(buf), "%s", r->repo);
        else if (strcmp(key, "Tag") == 0)
                snprintf(buf, sizeof(buf), "%s", r->tag);
        else if (strcmp(key, "ID") == 0 || strcmp(key, "Id") == 0)
                snprintf(buf, sizeof(buf), r->no_trunc ? "%s" : "%.12s",
                         r->no_trunc ? r->info->digest : r->info->digest + 7);
        else if (strcmp(key, "Digest") == 0)
                snprintf(buf, sizeof(buf), "%s", r->info->digest);
        else if (strcmp(key, "Size") == 0 || strcmp(key, "VirtualSize") == 0)
                si_size(r->info->size, buf, sizeof(buf));
        else if (strcmp(key, "Created") == 0 || strcmp(key, "CreatedSince") == 0)
                since(r->info->created, buf, sizeof(buf));
        else if (strcmp(key, "CreatedAt") == 0)
                rfc3339(r->info->created, buf, sizeof(buf));
        else if (strcmp(key, "ReadOnly") == 0)
                snprintf(buf, sizeof(buf), "%s", r->info->store ? "true" : "false");
        else if (strcmp(key, "Store") == 0)
                snprintf(buf, sizeof(buf), "%s", r->info->store ? r->info->store : "");
        else
                return NULL;
        if (json) {
                cJSON *str = cJSON_CreateString(buf);
                char *q = str ? cJSON_PrintUnformatted(str) : NULL;

                cJSON_Delete(str);
                return q;
        }
        return strdup(buf);
}

static const char *header_of(const char *key)
{
        static const struct {
                const char *key, *head;
        } h[] = {{"Repository", "REPOSITORY"}, {"Tag", "TAG"},         {"ID", "IMAGE ID"},
                 {"Id", "IMAGE ID"},           {"Digest", "DIGEST"},   {"Size", "SIZE"},
                 {"VirtualSize", "SIZE"},      {"Created", "CREATED"}, {"CreatedSince", "CREATED"},
                 {"CreatedAt", "CREATED AT"},  {"ReadOnly", "R/O"},    {"Store", "STORE"}};

        for (size_t i = 0; i < sizeof(h) / sizeof(h[0]); i++)
                if (strcmp(h[i].key, key) == 0)
                        return h[i].head;
        return NULL;
}

static char *header_lookup(const char *key, bool json, void *ctx)
{
        const char *h = header_of(key);

        (void)json;
        (void)ctx;
        return h ? strdup(h) : NULL;
}

static bool row_matches(const struct row *r, const char *filter)
{
        char canon[256];
        struct cs_error ignored = {0};

        if (!filter)
                return true;
        if (strcmp(r->repo, filter) == 0)
                return true;
        return store_name_canonical(filter, canon, &ignored) == 0 &&
               strcmp(r->info->name, canon) == 0;
}

static const char usage_images[] =
    "Usage: %s images [-q] [-a] [-n] [--no-trunc] [--format FORMAT|json] [REPOSITORY[:TAG]]\n";

static int images_json(struct row *rows, size_t n)
{
        cJSON *arr = cJSON_CreateArray();
        char *text;

        for (size_t i = 0; arr && i < n; i++) {
                cJSON *o = cJSON_CreateObject(), *names = cJSON_CreateArray();

                if (!o || !names) {
                        cJSON_Delete(o);
                        cJSON_Delete(names);
                        break;
                }
                cJSON_AddItemToArray(arr, o);
                cJSON_AddStringToObject(o, "Id", rows[i].info->digest + 7);
                cJSON_AddStringToObject(o, "Digest", rows[i].info->digest);
                cJSON_AddItemToArray(names, cJSON_CreateString(rows[i].info->name));
                cJSON_AddItemToObject(o, "Names", names);
                cJSON_AddNumberToObject(o, "Size", (double)rows[i].info->size);
                cJSON_AddNumberToObject(o, "Created", (double)rows[i].info->created);
                cJSON_AddBoolToObject(o, "ReadOnly", rows[i].info->store != NULL);
                if (rows[i].info->store)
                        cJSON_AddStringToObject(o, "Store", rows[i].info->store);
        }
        text = arr ? cJSON_Print(arr) : NULL;
        cJSON_Delete(arr);
        if (!text)
                return perr("out of memory");
        printf("%s\n", text);
        free(text);
        return 0;
}

enum { IMAGES_QUIET, IMAGES_ALL, IMAGES_NO_TRUNC, IMAGES_NOHEADING, IMAGES_FORMAT };
static const struct podman_opt images_opts[] = {
    {"--quiet", 'q', false, NULL, IMAGES_QUIET},
    {"--all", 'a', false, NULL, IMAGES_ALL},
    {"--no-trunc", 0, false, NULL, IMAGES_NO_TRUNC},
    {"--noheading", 'n', false, NULL, IMAGES_NOHEADING},
    {"--format", 0, true, NULL, IMAGES_FORMAT},
};

struct images_ctx {
        bool quiet, no_trunc, noheading;
        const char *format;
};

static int images_opt(void *ctx, int id, const char *v)
{
        struct images_ctx *c = ctx;

        switch (id) {
        case IMAGES_QUIET:
                c->quiet = on(v);
                break;
        case IMAGES_ALL:
                /* podman's -a adds intermediate images: csandbox keeps none (a build's
                 * steps are cached as layers), so the list is the same */
                break;
        case IMAGES_NO_TRUNC:
                c->no_trunc = on(v);
                break;
        case IMAGES_NOHEADING:
                c->noheading = on(v);
                break;
        case IMAGES_FORMAT:
                c->format = v;
                break;
        }
        return 0;
}

static int cmd_images(int argc, char **argv)
{
        struct cs_error err = {0};
        struct stores st;
        struct image_info *v = NULL;
        struct row *rows = NULL;
        const char *format = NULL, *filter = NULL;
        bool quiet = false, no_trunc = false, noheading = false, any_ro = false;
        struct images_ctx ic = {0};
        size_t n = 0, m = 0, n_pos;
        _cleanup_free_ char **pos = calloc((size_t)argc, sizeof(char *));
        int r = 0;

        if (!pos)
                return perr("out of memory");
        r = parse_opts("images", usage_images, images_opts,
                       sizeof(images_opts) / sizeof(images_opts[0]), images_opt, &ic, argc, argv,
                       pos, &n_pos);
        if (r >= 0)
                return r;
        r = 0;
        if (n_pos > 1)
                return perr("`%s images` takes at most one image name (`%s` is extra)", prog,
                            pos[1]);
        quiet = ic.quiet, no_trunc = ic.no_trunc, noheading = ic.noheading, format = ic.format;
        filter = n_pos ? pos[0] : NULL;
        if (stores_open(&st, &err) < 0 || store_list_all(&st.w, st.ro, st.n_ro, &v, &n, &err) < 0) {
                stores_close(&st);
                return pfail(&err);
        }
        rows = calloc(n + 1, sizeof(*rows));
        if (!rows) {
                r = perr("out of memory");
                goto out;
        }
        for (size_t i = 0; i < n; i++) {
                struct row *w = &rows[m];

                w->info = &v[i];
                w->no_trunc = no_trunc;
                split_name(v[i].name, w->repo, w->tag);
                if (!row_matches(w, filter))
                        continue;
                any_ro |= v[i].store != NULL;
                m++;
        }
        if (quiet) {
                for (size_t i = 0; i < m; i++) {
                        bool seen = false;

                        for (size_t j = 0; j < i && !seen; j++)
                                seen = strcmp(rows[j].info->digest, rows[i].info->digest) == 0;
                        if (!seen)
                                printf(no_trunc ? "%s\n" : "%.12s\n",
                                       rows[i].info->digest + (no_trunc ? 0 : 7));
                }
                goto out;
        }
        if (format && strcmp(format, "json") == 0) {
                r = images_json(rows, m);
                goto out;
        }
        if (format) {
                const char *f = format;
                bool table = strncmp(f, "table", 5) == 0;

                if (table)
                        for (f += 5; *f == ' '; f++)
                                ;
                if (table && !noheading) {
                        if (render(stdout, f, header_lookup, NULL) < 0) {
                                r = EXIT_FAIL;
                                goto out;
                        }
                        fputc('\n', stdout);
                }
                for (size_t i = 0; i < m; i++) {
                        if (render(stdout, f, row_lookup, &rows[i]) < 0) {
                                r = EXIT_FAIL;
                                goto out;
                        }
                        fputc('\n', stdout);
                }
                goto out;
        }
        /* podman's table; R/O (true for an image of a read-only store) when there is one;
         * columns as wide as their widest cell, three spaces apart */
        {
                static const char *const head[] = {"REPOSITORY", "TAG",  "IMAGE ID",
                                                   "CREATED",    "SIZE", "R/O"};
                size_t cols = any_ro ? 6 : 5, width[6] = {0};
                char(*cell)[6][300] = calloc(m + 1, sizeof(*cell));

                if (!cell) {
                        r = perr("out of memory");
                        goto out;
                }
                for (size_t c = 0; c < cols; c++)
                        snprintf(cell[0][c], sizeof(cell[0][c]), "%s", head[c]);
                for (size_t i = 0; i < m; i++) {
                        char(*row)[300] = cell[i + 1];

                        snprintf(row[0], sizeof(row[0]), "%s", rows[i].repo);
                        snprintf(row[1], sizeof(row[1]), "%s", rows[i].tag);
                        snprintf(row[2], sizeof(row[2]), no_trunc ? "%s" : "%.12s",
                                 rows[i].info->digest + (no_trunc ? 0 : 7));
                        since(rows[i].info->created, row[3], sizeof(row[3]));
                        si_size(rows[i].info->size, row[4], sizeof(row[4]));
                        snprintf(row[5], sizeof(row[5]), "%s",
                                 rows[i].info->store ? "true" : "false");
                }
                for (size_t i = 0; i <= m; i++)
                        for (size_t c = 0; c < cols; c++)
                                if (strlen(cell[i][c]) > width[c])
                                        width[c] = strlen(cell[i][c]);
                for (size_t i = noheading ? 1 : 0; i <= m; i++)
                        for (size_t c = 0; c < cols; c++)
                                printf(c + 1 < cols ? "%-*s   " : "%-*s\n",
                                       c + 1 < cols ? (int)width[c] : 0, cell[i][c]);
                free(cell);
        }
out:
        free(rows);
        image_info_free(v, n);
        stores_close(&st);
        return r;
}

/* ---- inspect ---- */

/* podman's image inspect object of digest in at. */
static cJSON *inspect_object(struct stores *st, struct image_store *at, const char *digest,
                             struct cs_error *err)
{
        _cleanup_free_ char *config = NULL, *info = NULL;
        _cleanup_cjson_ cJSON *cfg = NULL;
        _cleanup_cjson_ cJSON *inf = NULL;
        struct image_info *v = NULL;
        char path[100], when[40];
        cJSON *o, *tags, *it;
        size_t n = 0, len;
        int r;

        r = store_inspect(at, digest, &config, err);
        if (r < 0)
                return NULL;
        cfg = cJSON_Parse(config);
        if (!cJSON_IsObject(cfg)) {
                cs_error_setx(err, EINVAL, "image %s: its stored config is not JSON", digest);
                return NULL;
        }
        snprintf(path, sizeof(path), "sha256/%.64s/info.json", digest + 7);
        {
                /* Dropped: without its numbers the image has size 0. */
                struct cs_error ignored = {0};

                if (cs_read_file_at(at->fd, path, INFO_JSON_MAX, true, &info, &len, &ignored) == 0)
                        inf = cJSON_ParseWithLength(info, len);
        }
        o = cJSON_CreateObject();
        tags = cJSON_CreateArray();
        if (!o || !tags) {
                cJSON_Delete(o);
                cJSON_Delete(tags);
                cs_error_set(err, ENOMEM, "inspect");
                return NULL;
        }
        cJSON_AddStringToObject(o, "Id", digest + 7);
        cJSON_AddStringToObject(o, "Digest", digest);
        if (store_list_all(&st->w, st->ro, st->n_ro, &v, &n, err) == 0)
                for (size_t i = 0; i < n; i++)
                        if (strcmp(v[i].digest, digest) == 0)
                                cJSON_AddItemToArray(tags, cJSON_CreateString(v[i].name));
        image_info_free(v, n);
        cJSON_AddItemToObject(o, "RepoTags", tags);
        cJSON_AddItemToObject(o, "RepoDigests", cJSON_CreateArray());
        it = cJSON_GetObjectItemCaseSensitive(cfg, "created");
        if (cJSON_IsString(it)) {
                cJSON_AddStringToObject(o, "Created", it->valuestring);
        } else {
                const cJSON *c = cJSON_GetObjectItemCaseSensitive(inf, "created");

                rfc3339(cJSON_IsNumber(c) ? (int64_t)c->valuedouble : 0, when, sizeof(when));
                cJSON_AddStringToObject(o, "Created", when);
        }
        it = cJSON_GetObjectItemCaseSensitive(cfg, "config");
        cJSON_AddItemToObject(
            o, "Config", cJSON_IsObject(it) ? cJSON_Duplicate(it, true) : cJSON_CreateObject());
        if (cJSON_IsObject(it) && cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(it, "Labels")))
                cJSON_AddItemToObject(
                    o, "Labels",
                    cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(it, "Labels"), true));
        else
                cJSON_AddNullToObject(o, "Labels");
        for (const char *const *k =
                 (const char *const[]){"architecture", "os", "variant", "author", NULL};
             *k; k++) {
                char key[32];

                it = cJSON_GetObjectItemCaseSensitive(cfg, *k);
                snprintf(key, sizeof(key), "%c%s", toupper((unsigned char)(*k)[0]), *k + 1);
                if (cJSON_IsString(it))
                        cJSON_AddStringToObject(o, key, it->valuestring);
                else if (strcmp(*k, "variant") != 0)
                        cJSON_AddStringToObject(o, key, "");
        }
        {
                const cJSON *s = cJSON_GetObjectItemCaseSensitive(inf, "size");
                double size = cJSON_IsNumber(s) ? s->valuedouble : 0;

                cJSON_AddNumberToObject(o, "Size", size);
                cJSON_AddNumberToObject(o, "VirtualSize", size);
        }
        it = cJSON_GetObjectItemCaseSensitive(cfg, "rootfs");
        if (cJSON_IsObject(it))
                cJSON_AddItemToObject(o, "RootFS", cJSON_Duplicate(it, true));
        it = cJSON_GetObjectItemCaseSensitive(cfg, "history");
        if (cJSON_IsArray(it))
                cJSON_AddItemToObject(o, "History", cJSON_Duplicate(it, true));
        cJSON_AddBoolToObject(o, "ReadOnly", at->read_only);
        if (at->read_only)
                cJSON_AddStringToObject(o, "Store", at->root);
        return o;
}

/* A value as Go's template prints it: strings bare, lists [a b], maps as JSON. */
static void go_print(FILE *f, const cJSON *v)
{
        if (cJSON_IsString(v)) {
                fputs(v->valuestring, f);
        } else if (cJSON_IsArray(v)) {
                const cJSON *e;
                bool first = true;

                fputc('[', f);
                cJSON_ArrayForEach(e, v)
                {
                        if (!first)
                                fputc(' ', f);
                        first = false;
                        go_print(f, e);
                }
                fputc(']', f);
        } else if (cJSON_IsNull(v)) {
                fputs("<nil>", f);
        } else if (cJSON_IsNumber(v) && v->valuedouble == (double)(int64_t)v->valuedouble) {
                fprintf(f, "%" PRId64, (int64_t)v->valuedouble);
        } else {
                char *t = cJSON_PrintUnformatted(v);

                if (t)
                        fputs(t, f);
                free(t);
        }
}

static char *object_lookup(const char *path, bool json, void *ctx)
{
        const cJSON *v = ctx;
        char *buf = NULL;
        size_t len = 0;
        FILE *f;

        if (*path) { /* "" is `{{.}}`: the whole object */
                char part[128];

                for (const char *p = path; *p && v;) {
                        size_t k = strcspn(p, ".");

                        snprintf(part, sizeof(part), "%.*s", (int)k, p);
                        v = cJSON_GetObjectItemCaseSensitive(v, part);
                        p += k + (p[k] == '.');
                }
                if (!v)
                        return NULL;
        }
        f = open_memstream(&buf, &len);
        if (!f)
                return NULL;
        if (json) {
                char *t = cJSON_PrintUnformatted(v);

                if (t)
                        fputs(t, f);
                free(t);
        } else {
                go_print(f, v);
        }
        fclose(f);
        return buf;
}

static const char usage_inspect[] = "Usage: %s inspect [--type image] [-f FORMAT] NAME...\n";

enum { INSPECT_FORMAT, INSPECT_TYPE };
static const struct podman_opt inspect_opts[] = {
    {"--format", 'f', true, NULL, INSPECT_FORMAT},
    {"--type", 't', true, NULL, INSPECT_TYPE},
};

static int inspect_opt(void *ctx, int id, const char *v)
{
        if (id == INSPECT_FORMAT)
                *(const char **)ctx = v;
        else if (strcmp(v, "image") != 0 && strcmp(v, "all") != 0)
                return podman_opt_error("--type %s: csandbox's %s inspect knows images", v, prog);
        return 0;
}

static int cmd_inspect(int argc, char **argv)
{
        struct cs_error err = {0};
        struct stores st;
        const char *format = NULL;
        _cleanup_free_ char **pos = calloc((size_t)argc, sizeof(char *));
        size_t n_pos;
        cJSON *arr;
        int status = 0;

        if (!pos)
                return perr("out of memory");
        status = parse_opts("inspect", usage_inspect, inspect_opts,
                            sizeof(inspect_opts) / sizeof(inspect_opts[0]), inspect_opt, &format,
                            argc, argv, pos, &n_pos);
        if (status >= 0)
                return status;
        status = 0;
        if (n_pos == 0)
                return perr("`%s inspect` needs at least one image name", prog);
        if (stores_open(&st, &err) < 0) {
                stores_close(&st);
                return pfail(&err);
        }
        arr = cJSON_CreateArray();
        for (size_t i = 0; arr && i < n_pos; i++) {
                char digest[OCI_DIGEST_LEN + 1];
                struct image_store *at = NULL;
                cJSON *o;

                if (find_image(&st, pos[i], digest, &at, NULL, false) < 0) {
                        status = EXIT_FAIL;
                        continue;
                }
                o = inspect_object(&st, at, digest, &err);
                if (!o) {
                        status = pfail(&err);
                        continue;
                }
                if (format) {
                        if (render(stdout, format, object_lookup, o) < 0) {
                                cJSON_Delete(o);
                                status = EXIT_FAIL;
                                break;
                        }
                        fputc('\n', stdout);
                        cJSON_Delete(o);
                        continue;
                }
                cJSON_AddItemToArray(arr, o);
        }
        if (arr && !format) {
                char *text = cJSON_Print(arr);

                if (text)
                        printf("%s\n", text);
                free(text);
        }
        cJSON_Delete(arr);
        stores_close(&st);
        return status;
}

/* ---- rmi, tag ---- */

static const char usage_rmi[] = "Usage: %s rmi [-f] [-i] NAME...\n";

enum { RMI_FORCE, RMI_IGNORE };
static const struct podman_opt rmi_opts[] = {
    {"--force", 'f', false, NULL, RMI_FORCE},
    {"--ignore", 'i', false, NULL, RMI_IGNORE},
};

static int rmi_opt(void *ctx, int id, const char *v)
{
        ((bool *)ctx)[id] = on(v);
        return 0;
}

static int cmd_rmi(int argc, char **argv)
{
        struct cs_error err = {0};
        struct stores st;
        bool flags[2] = {false, false};
        _cleanup_free_ char **pos = calloc((size_t)argc, sizeof(char *));
        size_t n_pos;
        int status;

        if (!pos)
                return perr("out of memory");
        status = parse_opts("rmi", usage_rmi, rmi_opts, sizeof(rmi_opts) / sizeof(rmi_opts[0]),
                            rmi_opt, flags, argc, argv, pos, &n_pos);
        if (status >= 0)
                return status;
        status = 0;
        if (n_pos == 0)
                return perr("`%s rmi` needs at least one image name", prog);
        if (stores_open(&st, &err) < 0) {
                stores_close(&st);
                return pfail(&err);
        }
        for (size_t i = 0; i < n_pos; i++) {
                char digest[OCI_DIGEST_LEN + 1], probe[OCI_DIGEST_LEN + 1];
                struct image_store *at = NULL;
                struct image_info *v = NULL;
                const char *name = pos[i];
                bool by_id, force = flags[RMI_FORCE], ignore = flags[RMI_IGNORE];
                size_t n = 0, names = 0;
                int r;

                r = find_image(&st, name, digest, &at, &by_id, ignore);
                if (r == -ENOENT && ignore)
                        continue;
                if (r < 0) {
                        status = EXIT_FAIL;
                        continue;
                }
                /* by ID: every name goes, which podman does only when forced */
                if (by_id && store_list_all(&st.w, st.ro, st.n_ro, &v, &n, &err) == 0) {
                        for (size_t j = 0; j < n; j++)
                                names += strcmp(v[j].digest, digest) == 0;
                        image_info_free(v, n);
                }
                if (by_id && names > 1 && !force) {
                        status = perr("unable to delete image \"%.12s\" by ID with more than "
                                      "one tag: please force removal (-f)",
                                      digest + 7);
                        continue;
                }
                r = store_remove_any(&st.w, st.ro, st.n_ro, by_id ? digest : name, &err);
                if (r < 0) {
                        status = pfail(&err);
                        continue;
                }
                if (!by_id) {
                        char canon[256];

                        if (store_name_canonical(name, canon, &err) == 0)
                                printf("Untagged: %s\n", canon);
                }
                if (store_resolve(&st.w, digest, probe, &err) < 0)
                        printf("Deleted: %s\n", digest + 7);
        }
        stores_close(&st);
        return status;
}

static int cmd_tag(int argc, char **argv)
{
        struct cs_error err = {0};
        struct stores st;
        char digest[OCI_DIGEST_LEN + 1], src[OCI_DIGEST_LEN + 1];
        struct image_store *at = NULL;
        _cleanup_free_ char **pos = calloc((size_t)argc, sizeof(char *));
        size_t n_pos;
        int status;

        if (!pos)
                return perr("out of memory");
        status = parse_opts("tag", "Usage: %s tag IMAGE TARGET_NAME...\n", NULL, 0, NULL, NULL,
                            argc, argv, pos, &n_pos);
        if (status >= 0)
                return status;
        status = 0;
        if (n_pos < 2)
                return perr("`%s tag` needs an image and at least one new name", prog);
        if (stores_open(&st, &err) < 0) {
                stores_close(&st);
                return pfail(&err);
        }
        if (find_image(&st, pos[0], digest, &at, NULL, false) < 0) {
                stores_close(&st);
                return EXIT_FAIL;
        }
        /* by its digest: a short ID names it as well as a name does */
        snprintf(src, sizeof(src), "%s", digest);
        for (size_t i = 1; i < n_pos; i++)
                if (store_tag(&st.w, at == &st.w ? NULL : st.ro, at == &st.w ? 0 : st.n_ro,
                              at == &st.w ? src : pos[0], pos[i], &err) < 0)
                        status = pfail(&err);
        stores_close(&st);
        return status;
}

static const char usage[] =
    "Usage: %s pull|build|images|rmi|inspect|tag ARGS (csandbox's own front-end: images are\n"
    "csandbox's store, ${XDG_DATA_HOME:-~/.local/share}/csandbox/images, and the read-only\n"
    "stores of $CSANDBOX_READONLY_STORE)\n";

/* ---- load, save ---- */

static const char usage_load[] = "Usage: %s load [-i FILE] [-q]\n"
                                 "  an oci-archive or docker-archive (as podman save or docker "
                                 "save writes it), from FILE or stdin\n";

enum { LOAD_INPUT, LOAD_QUIET };
static const struct podman_opt load_opts[] = {
    {"--input", 'i', true, NULL, LOAD_INPUT},
    {"--quiet", 'q', false, NULL, LOAD_QUIET},
};

struct load_ctx {
        const char *input;
        bool quiet;
};

static int load_opt(void *ctx, int id, const char *v)
{
        struct load_ctx *c = ctx;

        if (id == LOAD_INPUT)
                c->input = v;
        else
                c->quiet = on(v);
        return 0;
}

/* stdin into dir/image.tar (the importer reads an archive by path, in any order). */
static int spool_stdin(char *dir, char *path, size_t len)
{
        int fd, r;

        if (!mkdtemp(dir))
                return perr("load: a temporary directory %s: %s", dir, strerror(errno));
        snprintf(path, len, "%s/image.tar", dir);
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0)
                return perr("load: %s: %s", path, strerror(errno));
        r = cs_copy_fd_bytes(STDIN_FILENO, fd);
        if (close(fd) < 0 && r >= 0)
                r = -errno;
        if (r < 0)
                return perr("load: reading stdin into %s: %s", path, strerror(-r));
        return 0;
}

static int cmd_load(int argc, char **argv)
{
        _cleanup_free_ char **pos = calloc((size_t)argc, sizeof(char *));
        _cleanup_free_ char *helper = cs_self_sibling("csandbox-import");
        _cleanup_free_ char *out = malloc(HELPER_OUT_MAX + 1);
        struct load_ctx c = {0};
        const char *tmpdir = getenv("TMPDIR");
        char dir[PATH_MAX], path[PATH_MAX + 16], *name = NULL;
        const char *src;
        size_t n_pos, len = 0;
        int r, fds[2], status;
        struct stat st;
        pid_t pid;

        if (!pos || !out || !helper)
                return perr("load: out of memory");
        r = parse_opts("load", usage_load, load_opts, sizeof(load_opts) / sizeof(load_opts[0]),
                       load_opt, &c, argc, argv, pos, &n_pos);
        if (r >= 0)
                return r;
        if (n_pos)
                return perr("`%s load` takes no arguments (`%s`); give the archive with -i FILE",
                            prog, pos[0]);
        dir[0] = '\0';
        src = c.input;
        if (!src) {
                if (isatty(STDIN_FILENO))
                        return perr("load: stdin is a terminal; give the archive with -i FILE or "
                                    "redirect it (%s load < FILE)",
                                    prog);
                if (fstat(STDIN_FILENO, &st) == 0 && S_ISREG(st.st_mode)) {
                        src = "/dev/stdin";
                } else {
                        snprintf(dir, sizeof(dir), "%s/csandbox-load-XXXXXX",
                                 tmpdir && tmpdir[0] == '/' ? tmpdir : "/tmp");
                        if (spool_stdin(dir, path, sizeof(path)) != 0) {
                                if (dir[0] && !strstr(dir, "XXXXXX")) {
                                        unlink(path);
                                        rmdir(dir);
                                }
                                return EXIT_FAIL;
                        }
                        src = path;
                }
        }
        fflush(NULL);
        if (pipe2(fds, O_CLOEXEC) < 0)
                return perr("pipe: %s", strerror(errno));
        pid = fork();
        if (pid == 0) {
                char *v[] = {"csandbox-import", "--quiet", (char *)src, NULL};

                if (dup2(fds[1], STDOUT_FILENO) < 0)
                        _exit(EXIT_FAIL);
                execv(helper, v);
                _exit(EXIT_FAIL);
        }
        close(fds[1]);
        for (ssize_t k; pid > 0;) {
                char buf[4096];

                k = read(fds[0], buf, sizeof(buf));
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        break;
                if (len + (size_t)k <= HELPER_OUT_MAX) {
                        memcpy(out + len, buf, (size_t)k);
                        len += (size_t)k;
                }
        }
        close(fds[0]);
        out[len] = '\0';
        while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        if (dir[0]) {
                unlink(path);
                rmdir(dir);
        }
        if (pid < 0)
                return perr("fork: %s", strerror(errno));
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                fputs(out, stderr);
                return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        }
        /* "imported NAME DIGEST: ..." or "already stored NAME DIGEST: ..." */
        {
                char *p = strncmp(out, "imported ", 9) == 0          ? out + 9
                          : strncmp(out, "already stored ", 15) == 0 ? out + 15
                                                                     : NULL;
                char *sp = p ? strchr(p, ' ') : NULL;

                if (sp) {
                        *sp = '\0';
                        name = p;
                }
        }
        if (!name)
                return perr("load: csandbox-import printed no image name:\n%s", out);
        printf("Loaded image: %s\n", name);
        return 0;
}

static const char usage_save[] =
    "Usage: %s save [-o FILE] [--format docker-archive|oci-archive] IMAGE\n"
    "  the image as an archive (to stdout without -o), for podman load, docker load and\n"
    "  csandbox image import\n";

enum { SAVE_OUTPUT, SAVE_FORMAT, SAVE_QUIET };
static const struct podman_opt save_opts[] = {
    {"--output", 'o', true, NULL, SAVE_OUTPUT},
    {"--format", 0, true, NULL, SAVE_FORMAT},
    {"--quiet", 'q', false, NULL, SAVE_QUIET},
};

struct save_ctx {
        const char *output, *format;
};

static int save_opt(void *ctx, int id, const char *v)
{
        struct save_ctx *c = ctx;

        if (id == SAVE_OUTPUT)
                c->output = v;
        else if (id == SAVE_FORMAT) {
                if (strcmp(v, "docker-archive") != 0 && strcmp(v, "oci-archive") != 0)
                        return podman_opt_error("--format %s: csandbox's %s saves docker-archive "
                                                "and oci-archive",
                                                v, prog);
                c->format = v;
        }
        return 0;
}

/* The helper writes the archive, to -o FILE or to our stdout as it is. */
static int cmd_save(int argc, char **argv)
{
        _cleanup_free_ char **pos = calloc((size_t)argc, sizeof(char *));
        _cleanup_free_ char *helper = cs_self_sibling("csandbox-import");
        struct save_ctx c = {.format = "docker-archive"};
        char *v[9];
        size_t n_pos, n = 0;
        int r, status;
        pid_t pid;

        if (!pos || !helper)
                return perr("save: out of memory");
        r = parse_opts("save", usage_save, save_opts, sizeof(save_opts) / sizeof(save_opts[0]),
                       save_opt, &c, argc, argv, pos, &n_pos);
        if (r >= 0)
                return r;
        if (n_pos != 1)
                return perr("`%s save` takes one image (%s)", prog,
                            n_pos ? "several images in one archive are not supported by "
                                    "csandbox's podman"
                                  : "none given");
        if (!c.output && isatty(STDOUT_FILENO))
                return perr("refusing to save to terminal. Use -o flag or redirect");
        v[n++] = "csandbox-import";
        v[n++] = "--save";
        v[n++] = "--format";
        v[n++] = (char *)c.format;
        if (c.output) {
                v[n++] = "-o";
                v[n++] = (char *)c.output;
        }
        v[n++] = pos[0];
        v[n] = NULL;
        fflush(NULL);
        pid = fork();
        if (pid < 0)
                return perr("fork: %s", strerror(errno));
        if (pid == 0) {
                execv(helper, v);
                fprintf(stderr, "Error: cannot run %s: %s\n", helper, strerror(errno));
                _exit(EXIT_FAIL);
        }
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return perr("wait for csandbox-import: %s", strerror(errno));
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int podman_images_main(const char *name, int argc, char **argv)
{
        prog = name && strcmp(name, "docker") == 0 ? "docker" : "podman";
        if (argc < 1) {
                fprintf(stderr, usage, prog);
                return EXIT_FAIL;
        }
        if (strcmp(argv[0], "pull") == 0)
                return cmd_pull(argc, argv);
        if (strcmp(argv[0], "build") == 0)
                return cmd_build(argc, argv);
        if (strcmp(argv[0], "images") == 0)
                return cmd_images(argc, argv);
        if (strcmp(argv[0], "rmi") == 0)
                return cmd_rmi(argc, argv);
        if (strcmp(argv[0], "inspect") == 0)
                return cmd_inspect(argc, argv);
        if (strcmp(argv[0], "tag") == 0)
                return cmd_tag(argc, argv);
        if (strcmp(argv[0], "load") == 0)
                return cmd_load(argc, argv);
        if (strcmp(argv[0], "save") == 0)
                return cmd_save(argc, argv);
        if (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "help") == 0) {
                printf(usage, prog);
                return 0;
        }
        return perr("unrecognized command `%s %s`; csandbox's %s front-end has pull, build, "
                    "images, rmi, inspect, tag, load and save here",
                    prog, argv[0], prog);
}
