/* The error object: fallible functions return a negative errno-style value and fill this.
 * Library code (policy/, image/, common/) never prints or exits; runner/main.c decides. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#define CS_ERROR_MAX 2048

/* Exit status classes, as podman reports them. */
enum {
        CS_EXIT_SETUP = 125,    /* csandbox itself failed: bad flag, bad input, setup error */
        CS_EXIT_NOEXEC = 126,   /* the command exists but cannot be executed */
        CS_EXIT_NOTFOUND = 127, /* the command was not found */
};

struct cs_error {
        int err;    /* errno of the root cause, 0 when there is none */
        int status; /* exit status this error maps to (CS_EXIT_SETUP unless set) */
        char msg[CS_ERROR_MAX];
        bool cause_named; /* the message names its cause: no guessed diagnosis is added */
};

/* Set the message (printf-style); errnum != 0 appends ": strerror(errnum)". Returns -errnum
 * (or -EINVAL when errnum is 0) so callers can `return cs_error_set(...)`. */
int cs_error_set(struct cs_error *e, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same, but the message already says why: strerror(errnum) is not appended. */
int cs_error_setx(struct cs_error *e, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Like cs_error_set, then appends a hint sentence after the message. */
int cs_error_hint(struct cs_error *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prefix context as the error travels up: "mount /etc/hosts: open `x`: No such file". */
int cs_error_wrap(struct cs_error *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
