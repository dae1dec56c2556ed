/* The runner's one way to tell the user something at run time: what the machine refused
 * after the spec was made (a broker that could not start, a limit systemd did not apply, a
 * copy left partial, an adaptation worth a note). What can be known before the launch is a
 * warning in the spec instead (runner_spec_complete), which --plan shows and the command
 * line prints. One write per message, so the lines of pid 1, its children and csandbox
 * never interleave. */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

void runner_warn(const char *fmt, ...)
{
        char buf[2048];
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
        va_end(ap);
        if (n < 0)
                return;
        if ((size_t)n > sizeof(buf) - 2)
                n = (int)sizeof(buf) - 2;
        buf[n++] = '\n';
        fflush(stderr);
        (void)!write(STDERR_FILENO, buf, (size_t)n);
}
