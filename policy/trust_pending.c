/* The report of what a session changed waits until the user accepts it, in two places: the
 * profile's state dir (what the session changed in the profile) and the work tree's own
 * place in csandbox's data dir (what it changed in the tree), which every profile's launch
 * in that tree reads. A session that never got its check (csandbox was killed) leaves a
 * record saying so, with what the journal saw while it ran. */
#include "trust.h"
#include "trust_util.h"

#include "plan.h"
#include "profile.h"
#include "worktree.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"
#include "../common/resolve.h"
#include "../common/sha256.h"
#include "../common/strv.h"

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

#define PENDING_NAMES_MAX 100000u
#define PENDING_SHOW_FILE (64u << 10)
#define PENDING_SHOW_ALL  (256u << 10)
#define PENDING_DIR       "trust-pending"
#define TREE_DIR          "csandbox/trust"

void trust_place_close(struct trust_place *pl)
{
        if (pl->fd >= 0)
                close(pl->fd);
        free(pl->path);
        pl->fd = -1;
        pl->path = NULL;
}

int trust_place_profile(const struct profile *p, bool create, struct trust_place *ret,
                        struct cs_error *err)
{
        ret->fd = -1;
        ret->path = NULL;
        if (p->state_fd < 0)
                return create ? cs_error_setx(err, EBADF, "no state dir for profile %s", p->name)
                              : 0;
        if (create && mkdirat(p->state_fd, PENDING_DIR, 0700) < 0 && errno != EEXIST)
                return cs_error_set(err, errno, "create %s/%s", p->state_dir, PENDING_DIR);
        ret->fd = openat(p->state_fd, PENDING_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (ret->fd < 0)
                return errno == ENOENT && !create
                           ? 0
                           : cs_error_set(err, errno, "open %s/%s", p->state_dir, PENDING_DIR);
        if (asprintf(&ret->path, "%s/%s", p->state_dir, PENDING_DIR) < 0) {
                trust_place_close(ret);
                return cs_error_set(err, ENOMEM, "trust reports");
        }
        return 1;
}

int trust_place_tree(const char *data_home, const char *tree, bool create, struct trust_place *ret,
                     struct cs_error *err)
{
        unsigned char d[32];
        char hex[33];
        _cleanup_free_ char *base = NULL;
        int r;

        ret->fd = -1;
        ret->path = NULL;
        cs_sha256(tree, strlen(tree), d);
        for (int i = 0; i < 16; i++)
                snprintf(hex + 2 * i, 3, "%02x", d[i]);
        if (asprintf(&base, "%s/%s", data_home, TREE_DIR) < 0 ||
            asprintf(&ret->path, "%s/%s", base, hex) < 0)
                return cs_error_set(err, ENOMEM, "trust reports");
        if (create) {
                r = cs_mkdir_parents(ret->path, 0700, err);
                if (r < 0) {
                        trust_place_close(ret);
                        return r;
                }
        }
        ret->fd = open(ret->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (ret->fd < 0) {
                r = errno == ENOENT && !create ? 0 : cs_error_set(err, errno, "open %s", ret->path);
                trust_place_close(ret);
                return r;
        }
        return 1;
}

static void now_text(char when[32], struct timespec *ret_now)
{
        struct tm tm;

        clock_gettime(CLOCK_REALTIME, ret_now);
        gmtime_r(&ret_now->tv_sec, &tm);
        strftime(when, 32, "%Y-%m-%d %H:%M:%S UTC", &tm);
}

int trust_pending_add(const struct trust_place *pl, const char *work_root, const char *report,
                      struct cs_error *err)
{
        _cleanup_free_ char *text = NULL;
        struct timespec now;
        char name[64], when[32];

        now_text(when, &now);
        snprintf(name, sizeof(name), "%lld.%09ld-%d", (long long)now.tv_sec, now.tv_nsec,
                 (int)getpid());
        if (asprintf(&text, "After the session in %s that ended %s:\n%s\n", work_root, when,
                     report) < 0)
                return cs_error_set(err, ENOMEM, "record the trust report");
        return cs_write_file_once(pl->fd, name, text, strlen(text), 0600, err);
}

/* This boot's id and a process's start time (field 22 of /proc/PID/stat): together with the
 * pid they name one process, whatever reuses the pid later. why (may be NULL) gets the cause
 * when they cannot be read. */
static bool process_identity(pid_t pid, char boot[40], unsigned long long *ret_start,
                             struct cs_error *why)
{
        _cleanup_free_ char *b = NULL, *stat = NULL;
        struct cs_error ignored;
        char path[64];
        const char *f;
        size_t len;

        if (!why)
                why = &ignored; /* Dropped: the process is taken as gone, its record stale. */
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        if (cs_read_file_at(AT_FDCWD, "/proc/sys/kernel/random/boot_id", 64, true, &b, &len, why) <
            0) {
                cs_error_wrap(why, "/proc/sys/kernel/random/boot_id, this boot's id, cannot be "
                                   "read (the container's runtime masks it)");
                return false;
        }
        if (len < 36) {
                cs_error_setx(why, EINVAL,
                              "/proc/sys/kernel/random/boot_id, this boot's id, is empty (the "
                              "container's runtime masks it)");
                return false;
        }
        if (cs_read_file_at(AT_FDCWD, path, 4096, true, &stat, NULL, why) < 0)
                return false;
        memcpy(boot, b, 36);
        boot[36] = '\0';
        f = strrchr(stat, ')');
        for (int field = 2; f && field < 22; field++)
                f = strchr(f + 1, ' ');
        if (f && sscanf(f, " %llu", ret_start) == 1)
                return true;
        cs_error_setx(why, EINVAL, "%s has no start time field", path);
        return false;
}

/* This process's pid as /proc names it (where /proc is an outer pid namespace's, not
 * getpid()), or 0 when /proc does not show this process at all. */
static pid_t self_in_proc(void)
{
        char self[32];
        ssize_t n = readlink("/proc/self", self, sizeof(self) - 1);

        if (n <= 0)
                return 0;
        self[n] = '\0';
        return (pid_t)strtol(self, NULL, 10);
}

int trust_session_identity(pid_t *ret_pid, char boot[40], unsigned long long *ret_start,
                           struct cs_error *err)
{
        pid_t pid = self_in_proc();

        if (pid <= 0)
                return cs_error_setx(err, ENOENT,
                                     "/proc does not show this process (/proc/self leads "
                                     "nowhere: it is another pid namespace's /proc, bound in "
                                     "from outside this container or sandbox)");
        if (!process_identity(pid, boot, ret_start, err))
                return -1;
        *ret_pid = pid;
        return 0;
}

/* A session's record: "session-PID-START-BOOT", its first line what a later launch needs
 * to finish its check ("csandbox-session SEC.NSEC LEN" and then the work root's LEN bytes),
 * then what the journal noted while it ran. ("running-..." records of earlier versions hold
 * only text; they are shown as they are.) */
#define SESSION_PREFIX "session-"
#define LEGACY_PREFIX  "running-"
#define SESSION_MAGIC  "csandbox-session"
#define SESSION_MAX    (4u << 20)

int trust_session_begin(const struct trust_place *pl, const char *work_root,
                        const struct timespec *since, char **ret_name, struct cs_error *err)
{
        _cleanup_free_ char *text = NULL;
        unsigned long long start;
        char boot[40];
        pid_t pid;

        *ret_name = NULL;
        if (trust_session_identity(&pid, boot, &start, err) < 0)
                return -1;
        if (asprintf(ret_name, SESSION_PREFIX "%d-%llu-%s", (int)pid, start, boot) < 0 ||
            asprintf(&text, SESSION_MAGIC " %lld.%09ld %zu\n%s\n", (long long)since->tv_sec,
                     since->tv_nsec, strlen(work_root), work_root) < 0) {
                free(*ret_name);
                *ret_name = NULL;
                return cs_error_set(err, ENOMEM, "record the session");
        }
        return cs_write_file_once(pl->fd, *ret_name, text, strlen(text), 0600, err);
}

void trust_session_note(const struct trust_place *pl, const char *name, const char *text)
{
        _cleanup_close_ int fd = -1;

        if (!name || pl->fd < 0)
                return;
        fd = openat(pl->fd, name, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0)
                (void)cs_write_all(fd, text, strlen(text));
}

void trust_session_end(const struct trust_place *pl, const char *name)
{
        if (name && pl->fd >= 0)
                (void)unlinkat(pl->fd, name, 0);
}

/* A running-PID-START-BOOT record whose process is still there: its session goes on. */
static bool session_alive(const char *name)
{
        unsigned long long start, now_start;
        char boot[40], now_boot[40];
        int pid;

        if (sscanf(name, SESSION_PREFIX "%d-%llu-%39s", &pid, &start, boot) != 3 &&
            sscanf(name, LEGACY_PREFIX "%d-%llu-%39s", &pid, &start, boot) != 3)
                return false;
        return process_identity(pid, now_boot, &now_start, NULL) && start == now_start &&
               strcmp(boot, now_boot) == 0;
}

/* A place's directory, for listing its reports and records (NULL: none, or unreadable). */
static DIR *place_dir(const struct trust_place *pl)
{
        int fd = pl->fd >= 0 ? openat(pl->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;

        if (!d && fd >= 0)
                close(fd);
        return d;
}

unsigned trust_place_waiting(const struct trust_place *pl)
{
        _cleanup_closedir_ DIR *d = place_dir(pl);
        struct dirent *de;
        unsigned what = 0;

        while (d && (de = readdir(d))) {
                bool session = strncmp(de->d_name, SESSION_PREFIX, strlen(SESSION_PREFIX)) == 0;

                if (de->d_name[0] == '.')
                        continue;
                if (session_alive(de->d_name))
                        what |= TRUST_WAIT_RUNNING;
                else if (session)
                        what |= TRUST_WAIT_UNCHECKED;
                else
                        what |= TRUST_WAIT_REPORT;
        }
        return what;
}

static int name_cmp(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* One place's reports, in the order they were made. Never bounded by dropping: past the
 * bounds of what is shown, the text says how much more there is and where. */
static void place_show(const struct trust_place *pl, char **names, size_t n, size_t more, FILE *f,
                       size_t *shown, char **earlier, size_t n_earlier)
{
        for (size_t i = 0; i < n; i++) {
                bool dup = false;

                /* One session's record stands in the profile's place and the tree's: the
                 * same text, shown once. */
                for (size_t e = 0; e < n_earlier && !dup; e++)
                        dup = strncmp(names[i], LEGACY_PREFIX, strlen(LEGACY_PREFIX)) == 0 &&
                              strcmp(names[i], earlier[e]) == 0;
                if (dup)
                        continue;
                _cleanup_close_ int fd = -1;
                struct stat st;
                char buf[4096];
                size_t left, done = 0;
                ssize_t got;

                fd = openat(pl->fd, names[i], O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
                if (fd < 0 && errno == ENOENT)
                        continue; /* accepted or ended meanwhile: nothing waits there now */
                if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                        fprintf(f, "A report csandbox cannot read: %s/%s\n", pl->path, names[i]);
                        continue;
                }
                if (*shown >= PENDING_SHOW_ALL) {
                        fprintf(f, "%zu more reports in %s (not shown here: too long)\n",
                                n - i + more, pl->path);
                        return;
                }
                left = PENDING_SHOW_FILE;
                while (left > 0 &&
                       (got = read(fd, buf, left < sizeof(buf) ? left : sizeof(buf))) > 0) {
                        for (ssize_t k = 0; k < got; k++)
                                if (buf[k] != '\n' && buf[k] != '\t' &&
                                    !isprint((unsigned char)buf[k]) && (unsigned char)buf[k] < 0x80)
                                        buf[k] = '?';
                        fwrite(buf, 1, (size_t)got, f);
                        left -= (size_t)got;
                        done += (size_t)got;
                }
                *shown += done;
                if ((off_t)done < st.st_size)
                        fprintf(f, "\n... and %lld more bytes of this report: %s/%s\n",
                                (long long)(st.st_size - (off_t)done), pl->path, names[i]);
        }
        if (more)
                fprintf(f, "%zu more reports in %s (too many to list)\n", more, pl->path);
}

int trust_pending_take(const struct trust_place *places, size_t n_places, bool accept,
                       bool (*confirm)(const char *text, void *ctx), void *ctx, char **ret,
                       bool *ret_accepted, struct cs_error *err)
{
        char **names[TRUST_PLACES_MAX] = {0};
        size_t n_names[TRUST_PLACES_MAX] = {0}, more[TRUST_PLACES_MAX] = {0};
        size_t total = 0, len = 0, shown = 0;
        char *out = NULL;
        FILE *f;
        int r = 0;

        *ret = NULL;
        *ret_accepted = false;
        if (n_places > TRUST_PLACES_MAX)
                n_places = TRUST_PLACES_MAX;
        for (size_t k = 0; k < n_places; k++) {
                _cleanup_closedir_ DIR *d = place_dir(&places[k]);
                struct dirent *de;
                int fd = d ? dirfd(d) : -1;

                if (!d)
                        continue;
                while ((de = readdir(d))) {
                        struct stat st;

                        /* A record of this version is finished by the launch (below), not
                         * shown; one left by an earlier version is shown as it is. */
                        if (de->d_name[0] == '.' ||
                            strncmp(de->d_name, SESSION_PREFIX, strlen(SESSION_PREFIX)) == 0 ||
                            session_alive(de->d_name))
                                continue;
                        /* A session removes its record, then exits: listed before the one,
                         * found dead after the other, its record is gone by now. */
                        if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 &&
                            errno == ENOENT)
                                continue;
                        if (n_names[k] >= PENDING_NAMES_MAX) {
                                more[k]++;
                                continue;
                        }
                        if (strv_push_dup(&names[k], &n_names[k], de->d_name) < 0) {
                                r = cs_error_set(err, ENOMEM, "read the trust reports");
                                goto out;
                        }
                }
                if (n_names[k])
                        qsort(names[k], n_names[k], sizeof(char *), name_cmp);
                total += n_names[k] + more[k];
        }
        if (total == 0)
                goto out;
        f = open_memstream(&out, &len);
        if (!f) {
                r = cs_error_set(err, ENOMEM, "read the trust reports");
                goto out;
        }
        for (size_t k = 0; k < n_places; k++)
                if (n_names[k] || more[k])
                        place_show(&places[k], names[k], n_names[k], more[k], f, &shown,
                                   k ? names[k - 1] : NULL, k ? n_names[k - 1] : 0);
        fclose(f);
        while (len > 0 && out[len - 1] == '\n')
                out[--len] = '\0';
        if (len == 0)
                goto out; /* every report listed was gone when it was read */
        if (!accept && confirm && confirm(out, ctx))
                accept = true;
        /* Only what was listed goes: a report that lands meanwhile stays. Past the bounds,
         * nothing can be accepted that was not shown. */
        for (size_t k = 0; accept && k < n_places; k++) {
                if (more[k]) {
                        r = cs_error_setx(err, E2BIG,
                                          "%zu reports wait in %s, more than csandbox lists; "
                                          "read and remove them there by hand",
                                          n_names[k] + more[k], places[k].path);
                        accept = false;
                        break;
                }
                for (size_t i = 0; i < n_names[k]; i++)
                        if (unlinkat(places[k].fd, names[k][i], 0) < 0 && errno != ENOENT && r == 0)
                                r = cs_error_set(err, errno, "remove %s/%s", places[k].path,
                                                 names[k][i]);
        }
        *ret_accepted = accept && r >= 0;
        *ret = cs_take_ptr(&out);
out:
        for (size_t k = 0; k < n_places; k++)
                strv_free(&names[k], &n_names[k]);
        free(out);
        return r;
}

static void unfinished_clear(struct trust_unfinished *u)
{
        if (u->dir_fd >= 0)
                close(u->dir_fd);
        free(u->dir_path);
        free(u->name);
        free(u->work_root);
        free(u->seen);
        *u = (struct trust_unfinished){.dir_fd = -1};
}

void trust_unfinished_free(struct trust_unfinished *u, size_t n)
{
        for (size_t i = 0; i < n; i++)
                unfinished_clear(&u[i]);
        free(u);
}

/* One record's first line and work root; false when it is not of this version's form. */
static bool session_parse(const char *text, size_t len, struct trust_unfinished *u)
{
        long long sec;
        long nsec;
        size_t wlen;
        int used = 0;
        const char *root;

        if (sscanf(text, SESSION_MAGIC " %lld.%ld %zu\n%n", &sec, &nsec, &wlen, &used) != 3 ||
            used <= 0 || nsec < 0 || nsec >= 1000000000L || wlen == 0 || wlen > PATH_MAX ||
            (size_t)used + wlen + 1 > len)
                return false;
        root = text + used;
        if (root[wlen] != '\n' || memchr(root, '\0', wlen))
                return false;
        u->since = (struct timespec){.tv_sec = (time_t)sec, .tv_nsec = nsec};
        u->work_root = strndup(root, wlen);
        u->seen = strndup(root + wlen + 1, len - (size_t)used - wlen - 1);
        return u->work_root && u->seen;
}

int trust_unfinished_list(const struct trust_place *places, size_t n_places, ssize_t profile_place,
                          struct trust_unfinished **ret, size_t *ret_n, struct cs_error *err)
{
        struct trust_unfinished *v = NULL;
        size_t n = 0;

        *ret = NULL;
        *ret_n = 0;
        for (size_t k = 0; k < n_places; k++) {
                _cleanup_closedir_ DIR *d = place_dir(&places[k]);
                struct dirent *de;
                int fd = d ? dirfd(d) : -1;

                if (!d)
                        continue;
                while ((de = readdir(d))) {
                        _cleanup_free_ char *text = NULL;
                        struct trust_unfinished u = {.dir_fd = -1};
                        struct cs_error ignored;
                        size_t len = 0;

                        if (strncmp(de->d_name, SESSION_PREFIX, strlen(SESSION_PREFIX)) != 0 ||
                            session_alive(de->d_name))
                                continue;
                        if (n >= PENDING_NAMES_MAX)
                                break;
                        /* Unreadable or not of this form: a record nobody can finish, shown
                         * as the refusal's cause with its path. */
                        if (cs_read_file_at(fd, de->d_name, SESSION_MAX, true, &text, &len,
                                            &ignored) < 0 ||
                            !session_parse(text, len, &u)) {
                                free(u.work_root);
                                free(u.seen);
                                u.work_root = u.seen = NULL;
                                u.broken = true;
                        }
                        u.profile = (ssize_t)k == profile_place;
                        u.name = strdup(de->d_name);
                        u.dir_path = strdup(places[k].path);
                        u.dir_fd = fcntl(places[k].fd, F_DUPFD_CLOEXEC, 3);
                        if (!u.name || !u.dir_path || u.dir_fd < 0) {
                                unfinished_clear(&u);
                                trust_unfinished_free(v, n);
                                return cs_error_set(err, ENOMEM, "read the session records");
                        }
                        struct trust_unfinished *nv = realloc(v, (n + 1) * sizeof(*v));
                        if (!nv) {
                                unfinished_clear(&u);
                                trust_unfinished_free(v, n);
                                return cs_error_set(err, ENOMEM, "read the session records");
                        }
                        v = nv;
                        v[n++] = u;
                }
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

void trust_unfinished_text(const struct trust_unfinished *u, size_t n, size_t i, FILE *f)
{
        struct tm tm;
        char when[32];

        /* The profile's place and the tree's hold one record each for one session. */
        for (size_t e = 0; e < i; e++)
                if (strcmp(u[e].name, u[i].name) == 0)
                        return;
        (void)n;
        if (u[i].broken) {
                fprintf(f,
                        "A sandboxed session ended before csandbox could check what it left "
                        "(csandbox was killed, or the machine stopped), and its record cannot "
                        "be read: %s/%s\n",
                        u[i].dir_path, u[i].name);
                return;
        }
        gmtime_r(&u[i].since.tv_sec, &tm);
        strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tm);
        fprintf(f,
                "A sandboxed session in %s that started %s ended before csandbox could check "
                "what it left (csandbox was killed, or the machine stopped).\n",
                u[i].work_root, when);
        if (u[i].seen && *u[i].seen)
                fprintf(f, "While it ran, csandbox saw it change what the host runs:\n%s",
                        u[i].seen);
}

void trust_unfinished_drop(const struct trust_unfinished *u)
{
        if (u->dir_fd >= 0)
                (void)unlinkat(u->dir_fd, u->name, 0);
}
