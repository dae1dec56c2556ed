/* The options of csandbox's podman subcommands, read as podman's own parser reads them
 * (podman_opts.h). */
#include "podman_opts.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int podman_opt_verror(const char *fmt, va_list ap)
{
        fputs("Error: ", stderr);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        return -1;
}

int podman_opt_error(const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        podman_opt_verror(fmt, ap);
        va_end(ap);
        return -1;
}

static int unknown(const char *prog, const char *sub, const char *what)
{
        fprintf(stderr,
                "Error: unknown flag: %s (csandbox's %s does not support it)\nSee '%s %s "
                "--help'\n",
                what, prog, prog, sub);
        return -1;
}

/* usage with each %s in it read as prog (a format string the compiler cannot check here) */
static void usage_print(const char *usage, const char *prog)
{
        for (const char *p = usage; *p; p++) {
                if (p[0] == '%' && p[1] == 's') {
                        fputs(prog, stdout);
                        p++;
                } else {
                        putchar(*p);
                }
        }
}

static const struct podman_opt *find_long(const struct podman_opt *o, size_t n, const char *a,
                                          size_t len)
{
        for (size_t i = 0; i < n; i++)
                if (strlen(o[i].lng) == len && strncmp(o[i].lng, a, len) == 0)
                        return &o[i];
        return NULL;
}

static const struct podman_opt *find_short(const struct podman_opt *o, size_t n, char c)
{
        for (size_t i = 0; i < n; i++)
                if (o[i].shrt && o[i].shrt == c)
                        return &o[i];
        return NULL;
}

/* A flag's value: "true" or "false" from what follows its =, or NULL (printed). */
static const char *flag_value(const struct podman_opt *o, const char *v)
{
        if (!v || strcmp(v, "true") == 0)
                return "true";
        if (strcmp(v, "false") == 0)
                return "false";
        podman_opt_error("invalid argument \"%s\" for \"%s\" flag: expected true or false", v,
                         o->lng);
        return NULL;
}

int podman_opts_parse(const char *prog, const char *sub, const char *usage,
                      const struct podman_opt *opts, size_t n_opts, podman_opt_fn fn, void *ctx,
                      int argc, char **argv, char **pos, size_t *n_pos)
{
        bool options = true;

        *n_pos = 0;
        for (int i = 1; i < argc; i++) {
                const char *a = argv[i];

                if (!options || a[0] != '-' || a[1] == '\0') {
                        pos[(*n_pos)++] = argv[i];
                        continue;
                }
                if (strcmp(a, "--") == 0) {
                        options = false;
                        continue;
                }
                if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
                        usage_print(usage, prog);
                        return 1;
                }
                if (a[1] == '-') {
                        const char *eq = strchr(a, '=');
                        const struct podman_opt *o =
                            find_long(opts, n_opts, a, eq ? (size_t)(eq - a) : strlen(a));
                        const char *v = eq ? eq + 1 : NULL;

                        if (!o)
                                return unknown(prog, sub, a);
                        if (!o->value) {
                                v = flag_value(o, v);
                                if (!v)
                                        return -1;
                        } else if (!v && o->bare) {
                                v = o->bare;
                        } else if (!v) {
                                if (i + 1 >= argc)
                                        return podman_opt_error("flag needs an argument: %s", a);
                                v = argv[++i];
                        }
                        if (fn(ctx, o->id, v) < 0)
                                return -1;
                        continue;
                }
                /* -x, a group of flags -xy, or -xVALUE / -x VALUE */
                for (const char *c = a + 1; *c; c++) {
                        const struct podman_opt *o = find_short(opts, n_opts, *c);
                        const char *v = "true";
                        char shown[3] = {'-', *c, '\0'};

                        if (!o)
                                return unknown(prog, sub, c == a + 1 ? a : shown);
                        if (o->value && c[1]) {
                                v = c + 1;
                        } else if (o->value && o->bare) {
                                v = o->bare;
                        } else if (o->value) {
                                if (i + 1 >= argc)
                                        return podman_opt_error("flag needs an argument: %s",
                                                                shown);
                                v = argv[++i];
                        }
                        if (fn(ctx, o->id, v) < 0)
                                return -1;
                        if (o->value)
                                break;
                }
        }
        return 0;
}
