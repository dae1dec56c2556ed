/* The unit tests' one harness. A test is either a void function that prints `ok NAME` or
 * `FAIL NAME: why` and returns on the first failed check (CHECK, CHECKF, PASS), or a bool
 * function run by RUN that returns false through fail("why"); main exits non-zero on any
 * failure. RUN calls check_setup and check_teardown around each test when a file sets
 * them. */
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

static void (*check_setup)(void) __attribute__((unused));
static void (*check_teardown)(void) __attribute__((unused));

/* A bool test: "ok NAME" (with " # note" when it left one through fail()) or "FAIL". */
static void check_run(const char *name, bool (*test)(void)) __attribute__((unused));
static void check_run(const char *name, bool (*test)(void))
{
        why[0] = '\0';
        if (check_setup)
                check_setup();
        if (test()) {
                printf("ok %s%s%s\n", name, why[0] ? " # " : "", why);
        } else {
                printf("FAIL %s: %s\n", name, why);
                failures++;
        }
        if (check_teardown)
                check_teardown();
}
#define RUN(t) check_run(#t, t)
