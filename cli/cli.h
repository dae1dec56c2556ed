/* What every command of the command line shares: the one error printer. */
#pragma once

struct cs_error;

/* The one way a command reports an error: "csandbox: MSG" on stderr; returns the exit
 * status it maps to (125 unless the error says otherwise). */
int cli_fail(const struct cs_error *err);
/* A usage error of `csandbox CMD`: the message, and where --help is; returns 125. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
