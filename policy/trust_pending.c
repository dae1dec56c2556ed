/* The third defence (trust_pending_*, trust_session_*): the report of what a session
 * changed waits in the state dir until the user accepts it, and a session that never got
 * its check (csandbox was killed) leaves a report saying so. */
#include "trust.h"
#include "trust_util.h"

#include "plan.h"
#include "profile.h"
#include "worktree.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"
#include "../common/resolve.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define PENDING_MAX      64
#define PENDING_FILE_MAX (256u << 10)
#define PENDING_DIR      "trust-pending"

static int pending_dir(const struct profile *p, struct cs_error *err)
{
        int dfd;

        if (p->state_fd < 0)
                return cs_error_setx(err, EBADF, "no state dir for profile %s", p->name);
        if (mkdirat(p->state_fd, PENDING_DIR, 0700) < 0 && errno != EEXIST)
                return cs_error_set(err, errno, "create %s/%s", p->state_dir, PENDING_DIR);
        dfd = openat(p->state_fd, PENDING_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return cs_error_set(err, errno, "open %s/%s", p->state_dir, PENDING_DIR);
        return dfd;
}

static void now_text(char when[32], struct timespec *ret_now)
{
        struct tm tm;

        clock_gettime(CLOCK_REALTIME, ret_now);
        gmtime_r(&ret_now->tv_sec, &tm);
        strftime(when, 32, "%Y-%m-%d %H:%M:%S UTC", &tm);
}

int trust_pending_add(const struct profile *p, const char *work_root, const char *report,
                      struct cs_error *err)
{
        _cleanup_close_ int dfd = pending_dir(p, err);
        _cleanup_free_ char *text = NULL;
        struct timespec now;
        char name[64], when[32];

        if (dfd < 0)
                return dfd;
        now_text(when, &now);
        snprintf(name, sizeof(name), "%lld.%09ld-%d", (long long)now.tv_sec, now.tv_nsec,
                 (int)getpid());
        if (asprintf(&text, "After the session in %s that ended %s:\n%s\n", work_root, when,
                     report) < 0)
                return cs_error_set(err, ENOMEM, "record the trust report");
        return cs_write_file_once(dfd, name, text, strlen(text), 0600, err);
}

/* This boot's id and a process's start time (field 22 of /proc/PID/stat): together with the
 * pid they name one process, whatever reuses the pid later. */
static bool process_identity(pid_t pid, char boot[40], unsigned long long *ret_start)
{
        _cleanup_free_ char *b = NULL, *stat = NULL;
        /* Dropped: unreadable: the process is taken as gone, and its record as stale. */
        struct cs_error ignored;
        char path[64];
        const char *f;
        size_t len;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        if (cs_read_file_at(AT_FDCWD, "/proc/sys/kernel/random/boot_id", 64, true, &b, &len,
                            &ignored) < 0 ||
            len < 36 || cs_read_file_at(AT_FDCWD, path, 4096, true, &stat, NULL, &ignored) < 0)
                return false;
        memcpy(boot, b, 36);
        boot[36] = '\0';
        f = strrchr(stat, ')');
        for (int field = 2; f && field < 22; field++)
                f = strchr(f + 1, ' ');
        return f && sscanf(f, " %llu", ret_start) == 1;
}

int trust_session_begin(const struct profile *p, const char *work_root, char **ret_name,
                        struct cs_error *err)
{
        _cleanup_close_ int dfd = pending_dir(p, err);
        _cleanup_free_ char *text = NULL;
        unsigned long long start;
        struct timespec now;
        char boot[40], when[32];

        *ret_name = NULL;
        if (dfd < 0)
                return dfd;
        if (!process_identity(getpid(), boot, &start))
                return cs_error_setx(err, ENOENT, "cannot read this process's start time");
        now_text(when, &now);
        if (asprintf(ret_name, "running-%d-%llu-%s", (int)getpid(), start, boot) < 0 ||
            asprintf(&text,
                     "A session in %s that started %s ended before csandbox could check what "
                     "it left (csandbox was killed, or the machine stopped). Check yourself, "
                     "before running git or claude there: any .git below %s, new dirs in its "
                     ".git/modules, gitlinks in its index (git ls-files -s | grep ^160000), "
                     ".gitmodules, and the profile's hooks, scripts and .claude.json.\n",
                     work_root, when, work_root) < 0) {
                free(*ret_name);
                *ret_name = NULL;
                return cs_error_set(err, ENOMEM, "record the session");
        }
        return cs_write_file_once(dfd, *ret_name, text, strlen(text), 0600, err);
}

void trust_session_end(const struct profile *p, const char *name)
{
        _cleanup_close_ int dfd = -1;

        if (!name || p->state_fd < 0)
                return;
        dfd = openat(p->state_fd, PENDING_DIR, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd >= 0)
                (void)unlinkat(dfd, name, 0);
}

/* A running-PID-START-BOOT record whose process is still there: its session goes on. */
static bool session_alive(const char *name)
{
        unsigned long long start, now_start;
        char boot[40], now_boot[40];
        int pid;

        if (sscanf(name, "running-%d-%llu-%39s", &pid, &start, boot) != 3)
                return false;
        return process_identity(pid, now_boot, &now_start) && start == now_start &&
               strcmp(boot, now_boot) == 0;
}

static int name_cmp(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

int trust_pending_take(const struct profile *p, bool accept, char **ret, struct cs_error *err)
{
        _cleanup_closedir_ DIR *d = NULL;
        char *names[PENDING_MAX], *out = NULL;
        size_t n = 0, len = 0;
        struct dirent *de;
        FILE *f;
        int r = 0;

        *ret = NULL;
        d = p->state_fd >= 0 ? trust_dir_open(p->state_fd, PENDING_DIR) : NULL;
        if (!d)
                return 0;
        while ((de = readdir(d)) && n < PENDING_MAX)
                if (de->d_name[0] != '.' && !session_alive(de->d_name) &&
                    (names[n] = strdup(de->d_name)))
                        n++;
        if (n == 0)
                return 0;
        qsort(names, n, sizeof(names[0]), name_cmp);
        f = open_memstream(&out, &len);
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *text = NULL;
                /* Dropped: a report that vanished meanwhile was accepted by another launch. */
                struct cs_error ignored;

                if (f && cs_read_file_at(dirfd(d), names[i], PENDING_FILE_MAX, true, &text, NULL,
                                         &ignored) == 0)
                        fputs(text, f);
                /* Only what was listed goes: a report that lands meanwhile stays. */
                if (accept && unlinkat(dirfd(d), names[i], 0) < 0 && errno != ENOENT && r == 0)
                        r = cs_error_set(err, errno, "remove %s/%s/%s", p->state_dir, PENDING_DIR,
                                         names[i]);
                free(names[i]);
        }
        if (!f)
                return cs_error_set(err, ENOMEM, "read the trust reports");
        fclose(f);
        if (r < 0 || len == 0) {
                free(out);
                return r;
        }
        while (len > 0 && out[len - 1] == '\n')
                out[--len] = '\0';
        *ret = out;
        return 0;
}
