#include "error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int cs_error_set(struct cs_error *e, int errnum, const char *fmt, ...)
{
        va_list ap;
        size_t n;

        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
        va_end(ap);
        n = strlen(e->msg);
        if (errnum != 0 && n < sizeof(e->msg))
                snprintf(e->msg + n, sizeof(e->msg) - n, ": %s", strerror(errnum));
        e->err = errnum;
        e->status = CS_EXIT_SETUP;
        e->cause_named = false;
        return errnum > 0 ? -errnum : -EINVAL;
}

int cs_error_setx(struct cs_error *e, int errnum, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
        va_end(ap);
        e->err = errnum;
        e->status = CS_EXIT_SETUP;
        e->cause_named = false;
        return errnum > 0 ? -errnum : -EINVAL;
}

int cs_error_hint(struct cs_error *e, const char *fmt, ...)
{
        size_t n = strlen(e->msg);
        va_list ap;

        if (n + 2 < sizeof(e->msg)) {
                e->msg[n++] = '.';
                e->msg[n++] = ' ';
                e->msg[n] = '\0';
                va_start(ap, fmt);
                vsnprintf(e->msg + n, sizeof(e->msg) - n, fmt, ap);
                va_end(ap);
        }
        return e->err > 0 ? -e->err : -EINVAL;
}

int cs_error_wrap(struct cs_error *e, const char *fmt, ...)
{
        char prefix[512];
        size_t plen, mlen;
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(prefix, sizeof(prefix), fmt, ap);
        va_end(ap);
        plen = strlen(prefix);
        mlen = strlen(e->msg);
        if (plen + 2 + mlen + 1 > sizeof(e->msg))
                mlen = sizeof(e->msg) - plen - 3;
        memmove(e->msg + plen + 2, e->msg, mlen);
        memcpy(e->msg, prefix, plen);
        e->msg[plen] = ':';
        e->msg[plen + 1] = ' ';
        e->msg[plen + 2 + mlen] = '\0';
        return e->err > 0 ? -e->err : -EINVAL;
}
