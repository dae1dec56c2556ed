/* How every csandbox command reports a failure: one line on stderr, one exit status. */
#include "cli.h"
#include "../runner/runner.h"

#include "../common/error.h"

#include <stdarg.h>
#include <stdio.h>

int cli_fail(const struct cs_error *err)
{
        fprintf(stderr, "csandbox: %s\n", err->msg);
        return err->status ? err->status : CS_EXIT_SETUP;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
        va_list ap;

        fprintf(stderr, "csandbox: %s: ", cmd);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fprintf(stderr, "; see `csandbox %s --help`\n", cmd);
        return CS_EXIT_SETUP;
}
