/* The unit tests' one harness. A test is either a void function that prints `ok NAME` or
 * `FAIL NAME: why` and returns on the first failed check (CHECK, CHECKF, PASS), or a bool
 * function run by RUN that returns false through fail("why"); main exits non-zero on any
 * failure. RUN calls check_setup and check_teardown around each test when a file sets
 * them. */
#pragma once
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

/* In a child: a user and mount namespace of its own, our uid and gid mapped to 0 (so files
 * can be made and chowned on what it mounts). 0, -1 when user namespaces are refused, -2
 * when the maps could not be written. */
static int check_unshare_user(void) __attribute__((unused));
static int check_unshare_user(void)
{
        const char *files[] = {"/proc/self/uid_map", "/proc/self/setgroups", "/proc/self/gid_map"};
        char maps[3][64];
        unsigned uid = (unsigned)getuid(), gid = (unsigned)getgid();

        if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
                return -1;
        snprintf(maps[0], sizeof(maps[0]), "0 %u 1\n", uid);
        snprintf(maps[1], sizeof(maps[1]), "deny");
        snprintf(maps[2], sizeof(maps[2]), "0 %u 1\n", gid);
        for (int i = 0; i < 3; i++) {
                int fd = open(files[i], O_WRONLY | O_CLOEXEC);

                if (fd < 0 || write(fd, maps[i], strlen(maps[i])) < 0)
                        return -2;
                close(fd);
        }
        return 0;
}
