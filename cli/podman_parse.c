/* `podman run`'s options as podman parses them (`--opt=v`, `--opt v`, `-it`, `-eK=V`, `--`,
 * the first word that is not an option being the image), turned into `csandbox exec`
 * flags: exec's parser builds the sandbox, this file only translates. */
#include "podman.h"

#include "../common/error.h"
#include "../common/strv.h"

#include "../common/cleanup.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <arpa/inet.h>

struct run_opt {
        const char *name;
        char short_name;
        bool value;
};

/* clang-format off */
static const struct run_opt run_opts[] = {
    {"interactive", 'i', false}, {"tty", 't', false},
    {"rm", 0, false},            {"detach", 'd', false},
    {"quiet", 'q', false},       {"help", 0, false},
    {"read-only", 0, false},
    {"env", 'e', true},          {"env-file", 0, true},
    {"volume", 'v', true},       {"mount", 0, true},
    {"workdir", 'w', true},      {"user", 'u', true},
    {"entrypoint", 0, true},     {"network", 0, true},
    {"net", 0, true},            {"name", 0, true},
    {"hostname", 'h', true},     {"pull", 0, true},
    {"tmpfs", 0, true},
    {"init", 0, false},          {"label", 'l', true},
    {"add-host", 0, true},       {"memory", 'm', true},
    {"platform", 0, true},       {"publish", 'p', true},
};
/* clang-format on */

static const struct run_opt *opt_long(const char *name, size_t len)
{
        for (size_t i = 0; i < sizeof(run_opts) / sizeof(run_opts[0]); i++)
                if (strlen(run_opts[i].name) == len && strncmp(run_opts[i].name, name, len) == 0)
                        return &run_opts[i];
        return NULL;
}

static const struct run_opt *opt_short(char c)
{
        for (size_t i = 0; i < sizeof(run_opts) / sizeof(run_opts[0]); i++)
                if (run_opts[i].short_name == c)
                        return &run_opts[i];
        return NULL;
}

static int push(struct podman_run *r, const char *a, const char *b, const char *c,
                struct cs_error *err)
{
        const char *v[] = {a, b, c};

        for (size_t i = 0; i < 3 && v[i]; i++)
                if (strv_push_dup(&r->exec_args, &r->n_exec_args, v[i]) < 0)
                        return cs_error_set(err, ENOMEM, "run");
        return 0;
}

static int set_str(char **dst, const char *v, struct cs_error *err)
{
        free(*dst);
        *dst = strdup(v);
        return *dst ? 0 : cs_error_set(err, ENOMEM, "run");
}

static int parse_env(struct podman_run *r, const char *v, struct cs_error *err)
{
        const char *eq = strchr(v, '=');
        char *k = eq ? strndup(v, (size_t)(eq - v)) : strdup(v);
        const char *val = eq ? eq + 1 : NULL;
        int ret = 0;

        if (!k)
                return cs_error_set(err, ENOMEM, "run");
        if (k[0] == '\0' || strchr(k, '*')) {
                ret = cs_error_setx(err, EINVAL,
                                    "run: --env `%s`: expected NAME=VALUE or NAME (patterns are "
                                    "not supported by csandbox's podman)",
                                    v);
        } else {
                if (!val)
                        val = getenv(k); /* podman: NAME alone takes the caller's value, if any */
                if (strcmp(k, "HOME") == 0 && val)
                        r->home_set = true;
                if (val)
                        ret = push(r, "--setenv", k, val, err);
        }
        free(k);
        return ret;
}

static int parse_volume(struct podman_run *r, const char *v, struct cs_error *err)
{
        char *copy = strdup(v), *src, *dst, *opts, *save = NULL, *vol_path = NULL;
        bool ro = false;
        int ret = 0;

        if (!copy)
                return cs_error_set(err, ENOMEM, "run");
        src = copy;
        dst = strchr(src, ':');
        if (!dst) {
                ret = cs_error_setx(err, EINVAL,
                                    "run: --volume `%s`: anonymous volumes are not supported by "
                                    "csandbox's podman; give HOST-PATH:CONTAINER-PATH",
                                    v);
                goto out;
        }
        *dst++ = '\0';
        opts = strchr(dst, ':');
        if (opts)
                *opts++ = '\0';
        if (src[0] == '.') {
                ret = cs_error_setx(err, EINVAL,
                                    "run: --volume `%s`: the source `%s` is relative; give an "
                                    "absolute host path",
                                    v, src);
                goto out;
        }
        if (src[0] != '/') {
                /* a named volume: made on first use, as podman makes it */
                ret = podman_volume_path(src, true, &vol_path, err);
                if (ret < 0) {
                        cs_error_wrap(err, "run: --volume `%s`", v);
                        goto out;
                }
                src = vol_path;
        }
        if (dst[0] != '/') {
                ret = cs_error_setx(err, EINVAL,
                                    "run: --volume `%s`: the container path `%s` is not absolute",
                                    v, dst);
                goto out;
        }
        for (char *o = opts ? strtok_r(opts, ",", &save) : NULL; o;
             o = strtok_r(NULL, ",", &save)) {
                if (strcmp(o, "ro") == 0)
                        ro = true;
                else if (strcmp(o, "rw") == 0)
                        ro = false;
                else if (strcmp(o, "z") == 0 || strcmp(o, "Z") == 0)
                        ; /* SELinux relabelling: csandbox relabels nothing (doc/exec-and-podman.md)
                           */
                else {
                        ret = cs_error_setx(err, EINVAL,
                                            "run: --volume `%s`: the option `%s` is not supported "
                                            "by csandbox's podman (ro, rw, z and Z are)",
                                            v, o);
                        goto out;
                }
        }
        ret = push(r, ro ? "--ro-bind" : "--bind", src, dst, err);
out:
        free(vol_path);
        free(copy);
        return ret;
}

static bool bool_value(const char *v, bool *ret)
{
        if (!v || strcmp(v, "true") == 0)
                *ret = true;
        else if (strcmp(v, "false") == 0)
                *ret = false;
        else
                return false;
        return true;
}

static int parse_mount(struct podman_run *r, const char *v, struct cs_error *err)
{
        char *copy = strdup(v), *save = NULL;
        const char *type = NULL, *src = NULL, *dst = NULL;
        bool ro = false;
        int ret = 0;

        if (!copy)
                return cs_error_set(err, ENOMEM, "run");
        for (char *kv = strtok_r(copy, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
                char *eq = strchr(kv, '=');
                const char *val = eq ? eq + 1 : NULL;

                if (eq)
                        *eq = '\0';
                if (strcmp(kv, "type") == 0 && val)
                        type = val;
                else if ((strcmp(kv, "source") == 0 || strcmp(kv, "src") == 0) && val)
                        src = val;
                else if ((strcmp(kv, "target") == 0 || strcmp(kv, "destination") == 0 ||
                          strcmp(kv, "dst") == 0) &&
                         val)
                        dst = val;
                else if ((strcmp(kv, "readonly") == 0 || strcmp(kv, "ro") == 0) &&
                         bool_value(val, &ro))
                        ;
                else if (strcmp(kv, "rw") == 0 && bool_value(val, &ro))
                        ro = !ro;
                else {
                        ret = cs_error_setx(err, EINVAL,
                                            "run: --mount `%s`: `%s` is not supported by "
                                            "csandbox's podman (type, source, target, readonly "
                                            "are)",
                                            v, kv);
                        goto out;
                }
        }
        if (type && strcmp(type, "volume") == 0 && src && src[0] && src[0] != '/') {
                char *vol_path = NULL;

                ret = podman_volume_path(src, true, &vol_path, err);
                if (ret < 0)
                        cs_error_wrap(err, "run: --mount `%s`", v);
                else if (!dst || dst[0] != '/')
                        ret = cs_error_setx(
                            err, EINVAL, "run: --mount `%s`: target= must be an absolute path", v);
                else
                        ret = push(r, ro ? "--ro-bind" : "--bind", vol_path, dst, err);
                free(vol_path);
                goto out;
        }
        if (!type || (strcmp(type, "bind") != 0 && strcmp(type, "tmpfs") != 0)) {
                ret = cs_error_setx(err, EINVAL,
                                    "run: --mount `%s`: type=%s is not supported by csandbox's "
                                    "podman (type=bind and type=tmpfs are)",
                                    v, type ? type : "(none)");
                goto out;
        }
        if (!dst || dst[0] != '/') {
                ret = cs_error_setx(err, EINVAL,
                                    "run: --mount `%s`: target= must be an absolute path", v);
                goto out;
        }
        if (strcmp(type, "tmpfs") == 0) {
                if (src)
                        ret = cs_error_setx(err, EINVAL, "run: --mount `%s`: a tmpfs has no source",
                                            v);
                else
                        ret = push(r, "--tmpfs", dst, NULL, err);
                goto out;
        }
        if (!src || src[0] != '/') {
                ret = cs_error_setx(err, EINVAL,
                                    "run: --mount `%s`: source= must be an absolute host path "
                                    "(named volumes are not supported by csandbox's podman)",
                                    v);
                goto out;
        }
        ret = push(r, ro ? "--ro-bind" : "--bind", src, dst, err);
out:
        free(copy);
        return ret;
}

static int parse_entrypoint(struct podman_run *r, const char *v, struct cs_error *err)
{
        cJSON *j;
        int ret = 0;

        strv_free(&r->entrypoint, &r->n_entrypoint);
        r->has_entrypoint = true;
        if (v[0] != '[')
                return v[0] ? (strv_push_dup(&r->entrypoint, &r->n_entrypoint, v) < 0
                                   ? cs_error_set(err, ENOMEM, "run")
                                   : 0)
                            : 0;
        j = cJSON_Parse(v);
        if (!cJSON_IsArray(j)) {
                cJSON_Delete(j);
                return cs_error_setx(err, EINVAL,
                                     "run: --entrypoint `%s`: not a JSON array of strings", v);
        }
        for (cJSON *e = j->child; e && ret == 0; e = e->next) {
                if (!cJSON_IsString(e))
                        ret = cs_error_setx(
                            err, EINVAL, "run: --entrypoint `%s`: not a JSON array of strings", v);
                else if (strv_push_dup(&r->entrypoint, &r->n_entrypoint, e->valuestring) < 0)
                        ret = cs_error_set(err, ENOMEM, "run");
        }
        cJSON_Delete(j);
        return ret;
}

static bool name_valid(const char *n)
{
        /* podman's rule: [a-zA-Z0-9][a-zA-Z0-9_.-]* */
        if (!n[0] || strlen(n) > 128 ||
            !strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                    "0123456789",
                    n[0]))
                return false;
        for (const char *p = n; *p; p++)
                if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-",
                            *p))
                        return false;
        return true;
}

/* podman's --memory: a number of bytes with an optional unit b, k, m or g; exec's is MiB
 * (rounded up). */
static int parse_memory(struct podman_run *r, const char *shown, const char *v,
                        struct cs_error *err)
{
        unsigned long long n, mult = 1, mib;
        char *end, num[32];

        errno = 0;
        n = strtoull(v, &end, 10);
        if (end != v && *end && !end[1]) {
                switch (*end | 0x20) {
                case 'b':
                        mult = 1;
                        break;
                case 'k':
                        mult = 1ull << 10;
                        break;
                case 'm':
                        mult = 1ull << 20;
                        break;
                case 'g':
                        mult = 1ull << 30;
                        break;
                default:
                        end = (char *)v;
                }
                if (end != v)
                        end++;
        }
        if (errno || end == v || *end || v[0] == '-' || n == 0 || n > (1ull << 50) / mult)
                return cs_error_setx(err, EINVAL,
                                     "run: %s `%s`: expected a size such as 512m or 2g", shown, v);
        mib = (n * mult + (1ull << 20) - 1) >> 20;
        snprintf(num, sizeof(num), "%llu", mib);
        r->memory = true;
        return push(r, "--memory", num, NULL, err);
}

/* This machine's platform as OCI names it (linux/amd64, linux/arm64, ...). */
static const char *host_arch(void)
{
        static struct utsname u;

        if (uname(&u) < 0)
                return "unknown";
        if (strcmp(u.machine, "x86_64") == 0)
                return "amd64";
        if (strcmp(u.machine, "aarch64") == 0)
                return "arm64";
        if (strcmp(u.machine, "i686") == 0 || strcmp(u.machine, "i386") == 0)
                return "386";
        return u.machine;
}

/* --platform: this machine's (images run as they are, without emulation), else refused. */
static int parse_platform(const char *shown, const char *v, struct cs_error *err)
{
        const char *arch = host_arch(), *a = v;
        size_t len = strlen(arch);

        if (strncmp(a, "linux/", 6) == 0)
                a += 6;
        if (strncmp(a, arch, len) == 0 && (a[len] == '\0' || a[len] == '/'))
                return 0;
        return cs_error_setx(err, EINVAL,
                             "run: %s `%s`: csandbox runs images of this machine's platform "
                             "(linux/%s) only, without emulation; drop %s or give linux/%s",
                             shown, v, arch, shown, arch);
}

/* -p [[IP:]HOST:]CONTAINER[/tcp] */
static int parse_publish(struct podman_run *r, const char *shown, const char *v,
                         struct cs_error *err)
{
        _cleanup_free_ char *copy = strdup(v);
        char *last, *proto, *hostp = NULL, *end, *ip = NULL;
        unsigned long ctr, host;

        if (!copy)
                return cs_error_set(err, ENOMEM, "run");
        proto = strchr(copy, '/');
        if (proto) {
                *proto++ = '\0';
                if (strcmp(proto, "tcp") != 0)
                        return cs_error_setx(err, EINVAL,
                                             "run: %s `%s`: only tcp ports can be published by "
                                             "csandbox's podman",
                                             shown, v);
        }
        last = strrchr(copy, ':');
        if (last) {
                *last++ = '\0';
                hostp = strrchr(copy, ':');
                if (hostp) {
                        /* IP:HOST:CTR, the IP perhaps in brackets */
                        *hostp++ = '\0';
                        ip = copy;
                        if (ip[0] == '[' && ip[strlen(ip) - 1] == ']') {
                                ip[strlen(ip) - 1] = '\0';
                                ip++;
                        }
                } else {
                        hostp = copy;
                }
        } else {
                last = copy;
        }
        if (ip && *ip) {
                unsigned char a[16];

                if (strlen(ip) >= sizeof(r->publish[0].ip) ||
                    (inet_pton(AF_INET, ip, a) != 1 && inet_pton(AF_INET6, ip, a) != 1))
                        return cs_error_setx(err, EINVAL, "run: %s `%s`: `%s` is not an IP address",
                                             shown, v, ip);
        }
        errno = 0;
        ctr = strtoul(last, &end, 10);
        if (errno || end == last || *end || ctr == 0 || ctr > 65535)
                return cs_error_setx(err, EINVAL,
                                     "run: %s `%s`: expected [[IP:]HOST-PORT:]CONTAINER-PORT "
                                     "(ranges are not supported by csandbox's podman)",
                                     shown, v);
        host = ctr;
        if (hostp && *hostp) {
                host = strtoul(hostp, &end, 10);
                if (errno || end == hostp || *end || host == 0 || host > 65535)
                        return cs_error_setx(err, EINVAL,
                                             "run: %s `%s`: expected [[IP:]HOST-PORT:]"
                                             "CONTAINER-PORT (ranges are not supported by "
                                             "csandbox's podman)",
                                             shown, v);
        }
        if (r->n_publish >= PODMAN_PUBLISH_MAX)
                return cs_error_setx(err, EINVAL, "run: more than %d %s", PODMAN_PUBLISH_MAX,
                                     shown);
        snprintf(r->publish[r->n_publish].ip, sizeof(r->publish[0].ip), "%s", ip ? ip : "");
        r->publish[r->n_publish].host = (unsigned short)host;
        r->publish[r->n_publish].ctr = (unsigned short)ctr;
        r->n_publish++;
        return 0;
}

static int apply(struct podman_run *r, const struct run_opt *o, const char *shown, const char *v,
                 struct cs_error *err)
{
        const char *n = o->name;

        if (!o->value) {
                bool on;

                if (!bool_value(v, &on))
                        return cs_error_setx(err, EINVAL, "run: %s=%s: expected true or false",
                                             shown, v);
                if (strcmp(n, "interactive") == 0)
                        r->interactive = on;
                else if (strcmp(n, "tty") == 0)
                        r->tty = on;
                else if (strcmp(n, "rm") == 0)
                        r->rm = on;
                else if (strcmp(n, "detach") == 0)
                        r->detach = on;
                else if (strcmp(n, "quiet") == 0)
                        r->quiet = on;
                else if (strcmp(n, "help") == 0)
                        r->help = on;
                else if (strcmp(n, "read-only") == 0)
                        r->read_only = on;
                /* --init: csandbox's pid 1 always reaps and forwards signals, as podman's
                 * catatonit does, and the payload is never pid 1 */
                return 0;
        }
        if (strcmp(n, "env") == 0)
                return parse_env(r, v, err);
        if (strcmp(n, "env-file") == 0)
                return push(r, "--env-file", v, NULL, err);
        if (strcmp(n, "volume") == 0)
                return parse_volume(r, v, err);
        if (strcmp(n, "mount") == 0)
                return parse_mount(r, v, err);
        if (strcmp(n, "workdir") == 0) {
                if (v[0] != '/')
                        return cs_error_setx(err, EINVAL, "run: %s `%s`: not an absolute path",
                                             shown, v);
                return set_str(&r->workdir, v, err);
        }
        if (strcmp(n, "user") == 0)
                return set_str(&r->user, v, err);
        if (strcmp(n, "entrypoint") == 0)
                return parse_entrypoint(r, v, err);
        if (strcmp(n, "network") == 0 || strcmp(n, "net") == 0) {
                if (strcmp(v, "none") == 0)
                        return set_str(&r->net, "none", err);
                /* Every network of podman's but none is, for a container of csandbox, the
                 * network of whoever runs it (doc/exec-and-podman.md). */
                if (strcmp(v, "host") == 0 || strcmp(v, "default") == 0 ||
                    strcmp(v, "bridge") == 0 || strcmp(v, "slirp4netns") == 0 ||
                    strcmp(v, "pasta") == 0 || strcmp(v, "private") == 0)
                        return set_str(&r->net, "host", err);
                return cs_error_setx(err, EINVAL,
                                     "run: %s `%s` is not supported by csandbox's podman (none, "
                                     "host, default, bridge, slirp4netns, pasta are)",
                                     shown, v);
        }
        if (strcmp(n, "name") == 0) {
                if (!name_valid(v))
                        return cs_error_setx(err, EINVAL,
                                             "run: --name `%s`: a name is a letter or digit, then "
                                             "letters, digits, `_`, `.` and `-`",
                                             v);
                return set_str(&r->name, v, err);
        }
        if (strcmp(n, "hostname") == 0)
                return set_str(&r->hostname, v, err);
        if (strcmp(n, "pull") == 0) {
                if (strcmp(v, "missing") == 0)
                        r->pull = PODMAN_PULL_MISSING;
                else if (strcmp(v, "never") == 0)
                        r->pull = PODMAN_PULL_NEVER;
                else if (strcmp(v, "always") == 0)
                        r->pull = PODMAN_PULL_ALWAYS;
                else
                        return cs_error_setx(err, EINVAL,
                                             "run: --pull `%s` is not supported by csandbox's "
                                             "podman (missing, never, always are)",
                                             v);
                return 0;
        }
        if (strcmp(n, "tmpfs") == 0) {
                if (v[0] != '/' || strchr(v, ':'))
                        return cs_error_setx(err, EINVAL,
                                             "run: --tmpfs `%s`: expected an absolute path "
                                             "(mount options are not supported by csandbox's "
                                             "podman)",
                                             v);
                return push(r, "--tmpfs", v, NULL, err);
        }
        if (strcmp(n, "label") == 0) {
                r->labels = true; /* metadata only: no command of csandbox's reads it */
                return 0;
        }
        if (strcmp(n, "add-host") == 0) {
                if (!r->add_host)
                        return set_str(&r->add_host, v, err);
                return 0;
        }
        if (strcmp(n, "memory") == 0)
                return parse_memory(r, shown, v, err);
        if (strcmp(n, "platform") == 0)
                return parse_platform(shown, v, err);
        if (strcmp(n, "publish") == 0)
                return parse_publish(r, shown, v, err);
        return cs_error_setx(err, EINVAL, "run: %s is not supported by csandbox's podman", shown);
}

int podman_run_parse(int argc, char **argv, struct podman_run *r, struct cs_error *err)
{
        int i, ret;

        memset(r, 0, sizeof(*r));
        for (i = 0; i < argc; i++) {
                const char *a = argv[i];

                if (strcmp(a, "--") == 0) {
                        i++;
                        break;
                }
                if (a[0] != '-' || a[1] == '\0')
                        break;
                if (a[1] == '-') {
                        const char *eq = strchr(a + 2, '=');
                        size_t len = eq ? (size_t)(eq - (a + 2)) : strlen(a + 2);
                        const struct run_opt *o = opt_long(a + 2, len);
                        char shown[128];
                        const char *v = eq ? eq + 1 : NULL;

                        snprintf(shown, sizeof(shown), "--%.*s", (int)(len < 100 ? len : 100),
                                 a + 2);
                        if (!o)
                                return cs_error_setx(
                                    err, EINVAL, "run: %s is not supported by csandbox's podman",
                                    shown);
                        if (o->value && !v) {
                                if (i + 1 >= argc)
                                        return cs_error_setx(err, EINVAL, "run: %s needs a value",
                                                             shown);
                                v = argv[++i];
                        }
                        ret = apply(r, o, shown, v, err);
                        if (ret < 0)
                                return ret;
                        continue;
                }
                /* a group of short options: -it, -eK=V, -e K=V */
                for (const char *p = a + 1; *p; p++) {
                        const struct run_opt *o = opt_short(*p);
                        char shown[3] = {'-', *p, '\0'};
                        const char *v = NULL;

                        if (!o)
                                return cs_error_setx(
                                    err, EINVAL, "run: %s is not supported by csandbox's podman",
                                    shown);
                        if (o->value) {
                                if (p[1])
                                        v = p[1] == '=' ? p + 2 : p + 1;
                                else if (i + 1 < argc)
                                        v = argv[++i];
                                else
                                        return cs_error_setx(err, EINVAL, "run: %s needs a value",
                                                             shown);
                        }
                        ret = apply(r, o, shown, v, err);
                        if (ret < 0)
                                return ret;
                        if (o->value)
                                break;
                }
        }
        if (r->help)
                return 0;
        if (i >= argc)
                return cs_error_setx(err, EINVAL,
                                     "run: no image given; usage: run [OPTIONS] "
                                     "IMAGE [COMMAND [ARG...]]");
        r->image = strdup(argv[i]);
        if (!r->image)
                return cs_error_set(err, ENOMEM, "run");
        for (i++; i < argc; i++)
                if (strv_push_dup(&r->cmd, &r->n_cmd, argv[i]) < 0)
                        return cs_error_set(err, ENOMEM, "run");
        if (r->detach && (r->interactive || r->tty))
                return cs_error_setx(err, EINVAL,
                                     "run: %s with --detach is not supported by csandbox's podman "
                                     "(it cannot attach to a detached container)",
                                     r->tty ? "--tty" : "--interactive");
        return 0;
}

void podman_run_free(struct podman_run *r)
{
        strv_free(&r->exec_args, &r->n_exec_args);
        strv_free(&r->cmd, &r->n_cmd);
        strv_free(&r->entrypoint, &r->n_entrypoint);
        free(r->image);
        free(r->user);
        free(r->name);
        free(r->workdir);
        free(r->hostname);
        free(r->net);
        free(r->add_host);
        memset(r, 0, sizeof(*r));
}
