/* The unit tests' few checks: each test is a function that prints `ok NAME` or
 * `FAIL NAME: why` and returns on the first failed check; main exits non-zero on any. */
#pragma once
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

static int failures;
static char why[4096] __attribute__((unused));

/* Record why a check failed (for checks written as bool functions); returns false. */
static bool fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), unused));
static bool fail(const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(why, sizeof(why), fmt, ap);
        va_end(ap);
        return false;
}

#define CHECK(cond)                                                                                \
        do {                                                                                       \
                if (!(cond)) {                                                                     \
                        printf("FAIL %s: %s (line %d)\n", __func__, #cond, __LINE__);              \
                        failures++;                                                                \
                        return;                                                                    \
                }                                                                                  \
        } while (0)
#define CHECKF(cond, ...)                                                                          \
        do {                                                                                       \
                if (!(cond)) {                                                                     \
                        printf("FAIL %s: ", __func__);                                             \
                        printf(__VA_ARGS__);                                                       \
                        printf("\n");                                                              \
                        failures++;                                                                \
                        return;                                                                    \
                }                                                                                  \
        } while (0)
#define PASS() printf("ok %s\n", __func__)
