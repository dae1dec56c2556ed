/* The options of csandbox's podman subcommands (all but run, podman_parse.c), read as
 * podman reads them: one table per subcommand, one parser. */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

struct podman_opt {
        const char *lng;  /* "--quiet" */
        char shrt;        /* 'q', or 0 */
        bool value;       /* takes a value: --x V, --x=V, -x V, -xV; else a flag: --x,
                           * --x=true|false, -x, or in a group -xy */
        const char *bare; /* with value: the value of the option given alone (--pull:
                           * "always"); a value is then given only with = */
        int id;           /* the caller's */
};

/* Called for each option found, in order: id, and its value ("true" or "false" for a
 * flag). Returns < 0 after printing why the value is refused. */
typedef int (*podman_opt_fn)(void *ctx, int id, const char *value);

/* argv[1..argc) of `prog sub`: options of opts anywhere among the arguments (as podman
 * allows), "--" ends them. The other arguments are put in pos (room for argc), in order.
 * Returns 0; 1 when -h or --help printed usage (each %s in it is prog); or -1 when
 * an option is unknown, lacks its value or fn refused it (printed as podman does). */
int podman_opts_parse(const char *prog, const char *sub, const char *usage,
                      const struct podman_opt *opts, size_t n_opts, podman_opt_fn fn, void *ctx,
                      int argc, char **argv, char **pos, size_t *n_pos);

/* "Error: FMT\n" on stderr, as podman prints; returns -1. */
__attribute__((format(printf, 1, 2))) int podman_opt_error(const char *fmt, ...);
__attribute__((format(printf, 1, 0))) int podman_opt_verror(const char *fmt, va_list ap);
