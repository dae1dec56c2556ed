/* What every command of the command line shares: the one error printer. */
#pragma once

struct cs_error;
struct sandbox_spec;

/* The one way a command reports an error: "csandbox: MSG" on stderr; returns the exit
 * status it maps to (125 unless the error says otherwise). */
int cli_fail(const struct cs_error *err);
/* A usage error of `csandbox CMD`: the message, and where --help is; returns 125. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* --plan and `csandbox plan`: the spec, checked (spec_validate), as JSON on stdout; returns
 * the exit status. */
int cli_print_plan(const struct sandbox_spec *s);
/* The spec's warnings on stderr, one a line. */
