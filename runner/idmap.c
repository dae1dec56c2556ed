/* uid/gid maps. One id is written directly (setgroups denied first, as the kernel requires
 * for an unprivileged writer); a range goes through the setuid newuidmap/newgidmap helpers,
 * which check /etc/subuid and /etc/subgid for us. */
#include "internal.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define RANGE_IDS         65536u
#define SUBID_FILE_MAX    (1u << 20)
#define CAP_SETGID_BIT    6
#define CAP_SETUID_BIT    7
#define CAP_SYS_ADMIN_BIT 21

struct subid_range {
        unsigned long start, count;
};

/* A reason the range cannot be mapped: "FLAG: BODY, or drop FLAG" when a flag asked for it
 * (exec's --map-range), the body alone when csandbox wanted the range for something else
 * (sudo's broker, a build's RUN steps), whose callers say what. */
__attribute__((format(printf, 4, 5))) static int range_fail(struct cs_error *err, int e,
                                                            const char *flag, const char *fmt, ...)
{
        char body[sizeof(err->msg)];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(body, sizeof(body), fmt, ap);
        va_end(ap);
        if (!flag)
                return cs_error_setx(err, e, "%s", body);
        return cs_error_setx(err, e, "%s: %s, or drop %s", flag, body, flag);
}

/* The caller's first subordinate range that can hold the ids --map-range maps. */
static int subid_find(const char *file, uid_t id, const char *flag, struct subid_range *ret,
                      struct cs_error *err)
{
        _cleanup_free_ char *buf = NULL;
        struct passwd *pw = getpwuid(id);
        char idstr[32];
        char *line, *save = NULL;
        int r;

        snprintf(idstr, sizeof(idstr), "%u", (unsigned)id);
        r = cs_read_file_at(AT_FDCWD, file, SUBID_FILE_MAX, false, &buf, NULL, err);
        if (r < 0 && err->err != ENOENT)
                return r;
        for (line = r < 0 ? NULL : strtok_r(buf, "\n", &save); line;
             line = strtok_r(NULL, "\n", &save)) {
                char *c1 = strchr(line, ':'), *c2, *end;
                unsigned long start, count;

                if (!c1)
                        continue;
                *c1 = '\0';
                c2 = strchr(c1 + 1, ':');
                if (!c2)
                        continue;
                if (strcmp(line, idstr) != 0 && !(pw && strcmp(line, pw->pw_name) == 0))
                        continue;
                start = strtoul(c1 + 1, &end, 10);
                if (end != c2)
                        continue;
                count = strtoul(c2 + 1, &end, 10);
                if (*end != '\0' || count < RANGE_IDS)
                        continue;
                ret->start = start;
                ret->count = count;
                return 0;
        }
        return range_fail(err, ENOENT, flag,
                          "%s has no subordinate range of at least %u ids for user %s (uid %u); "
                          "ask an administrator to add one (usermod --add-subuids "
                          "100000-165535 --add-subgids 100000-165535 %s)",
                          file, RANGE_IDS, pw ? pw->pw_name : idstr, (unsigned)id,
                          pw ? pw->pw_name : idstr);
}

/* newuidmap/newgidmap from the system's own dirs (never PATH: they are setuid), into path;
 * NULL when missing. */
static const char *helper_path(const char *name, char path[static 64])
{
        static const char *const dirs[] = {"/usr/bin", "/usr/sbin", "/bin", "/sbin"};

        for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
                snprintf(path, 64, "%s/%s", dirs[i], name);
                if (access(path, X_OK) == 0)
                        return path;
        }
        return NULL;
}

/* Whether ids [start, start + count) all exist in this user namespace: the first column
 * of map (/proc/self/uid_map or gid_map, at most 340 lines). *ret_total gets how many ids
 * it maps. */
static bool ids_mapped(const char *map, unsigned long start, unsigned long count,
                       unsigned long *ret_total)
{
        _cleanup_free_ char *buf = NULL;
        /* Dropped: an unreadable map: taken as mapped; the map helper then says what fails. */
        struct cs_error ignored;
        unsigned long in[340], len[340], want = start;
        size_t n = 0;
        char *line, *save = NULL;
        bool progress = true;

        *ret_total = 0;
        if (cs_read_file_at(AT_FDCWD, map, 65536, false, &buf, NULL, &ignored) < 0)
                return true; /* nothing to say: the helper will */
        for (line = strtok_r(buf, "\n", &save); line && n < 340;
             line = strtok_r(NULL, "\n", &save)) {
                unsigned long out;

                if (sscanf(line, "%lu %lu %lu", &in[n], &out, &len[n]) == 3)
                        *ret_total += len[n++];
        }
        /* The ranges come in any order: extend the covered prefix until it stops growing. */
        while (progress && want < start + count) {
                progress = false;
                for (size_t i = 0; i < n; i++)
                        if (in[i] <= want && want < in[i] + len[i]) {
                                want = in[i] + len[i];
                                progress = true;
                        }
        }
        return want >= start + count;
}

/* A capability in this process's bounding set (what a setuid helper can get at most). */
static bool cap_in_bounding_set(int cap)
{
        _cleanup_free_ char *buf = NULL;
        /* Dropped: unreadable: treated as present, so no cause is named that is not certain. */
        struct cs_error ignored;
        unsigned long long bnd;
        const char *p;

        if (cs_read_file_at(AT_FDCWD, "/proc/self/status", 65536, false, &buf, NULL, &ignored) <
                0 ||
            !(p = strstr(buf, "\nCapBnd:")) || sscanf(p + 8, "%llx", &bnd) != 1)
                return true;
        return bnd & (1ull << cap);
}

/* The three ways --map-range fails where /etc/subuid and /etc/subgid are right, named with
 * their fix: the helpers cannot gain their privilege here (no_new_privs, nosuid), the ids
 * do not exist in this user namespace (a container, another sandbox), or the capability
 * bounding set lacks what the kernel asks of a map writer. sub NULL: before /etc/subuid was
 * read. Returns < 0 with err set when one applies. */
static int range_blocked(const struct subid_range *sub, const char *map, const char *flag,
                         struct cs_error *err)
{
        char buf[64];
        const char *helper = helper_path("newuidmap", buf);
        unsigned long total;
        struct statvfs sv;

        if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1)
                return range_fail(
                    err, EACCES, flag,
                    "newuidmap and newgidmap get their privilege from the setuid bit (or file "
                    "capabilities), and this process runs with no_new_privs set (inside "
                    "csandbox or bubblewrap, or a container started with no-new-privileges), so "
                    "the kernel runs them without it and no subordinate range can be mapped "
                    "here: run csandbox outside that sandbox");
        if (helper && statvfs(helper, &sv) == 0 && (sv.f_flag & ST_NOSUID))
                return range_fail(err, EACCES, flag,
                                  "%s is on a filesystem mounted nosuid, so it runs without its "
                                  "privilege (inside a sandbox or a container that binds it so) "
                                  "and no subordinate range can be mapped here: run csandbox "
                                  "outside it",
                                  helper);
        if (!ids_mapped(map, sub ? sub->start : 0, sub ? RANGE_IDS : RANGE_IDS + 1, &total))
                return range_fail(
                    err, EACCES, flag,
                    "this runs in a user namespace (a container or another sandbox) whose %s "
                    "maps %lu ids, %s, so no helper can map a range of %u here. Give the "
                    "container more ids (rootless podman maps the range /etc/subuid gives the "
                    "user who starts it)",
                    map, total,
                    sub ? "not the subordinate range /etc/subuid gives you"
                        : "too few for another 65536",
                    RANGE_IDS);
        if (sub && (!cap_in_bounding_set(CAP_SYS_ADMIN_BIT) ||
                    !cap_in_bounding_set(CAP_SETUID_BIT) || !cap_in_bounding_set(CAP_SETGID_BIT)))
                return range_fail(
                    err, EACCES, flag,
                    "newuidmap and newgidmap need CAP_SETUID, CAP_SETGID and CAP_SYS_ADMIN to "
                    "write a map of more than one id, and this process's capability bounding "
                    "set (CapBnd in /proc/self/status) lacks one of them, as a container "
                    "engine's default set does. Start the container with --cap-add SYS_ADMIN "
                    "(and SETUID, SETGID)");
        return 0;
}

int idmap_check_range(const struct sandbox_spec *s, const char *flag, struct cs_error *err)
{
        struct subid_range r;
        char buf[64];
        int ret;

        if (!s->map_range)
                return 0;
        if (!helper_path("newuidmap", buf) || !helper_path("newgidmap", buf))
                return range_fail(err, ENOENT, flag,
                                  "newuidmap and newgidmap, which map a subordinate id range, "
                                  "are not installed: install the uidmap package");
        ret = range_blocked(NULL, "/proc/self/uid_map", flag, err);
        if (ret >= 0)
                ret = subid_find("/etc/subuid", s->host_uid, flag, &r, err);
        if (ret >= 0)
                ret = range_blocked(&r, "/proc/self/uid_map", flag, err);
        if (ret >= 0)
                ret = subid_find("/etc/subgid", s->host_uid, flag, &r, err);
        if (ret >= 0)
                ret = range_blocked(&r, "/proc/self/gid_map", flag, err);
        return ret;
}

/* Inside ids 0..65535 with `inside` landing on the caller's own host id and the others on
 * the subordinate range. Each entry: inside, outside, count. */
int idmap_range_args(unsigned inside, unsigned long host, unsigned long sub_start,
                     unsigned long out[9])
{
        int n = 0;

        if (inside >= RANGE_IDS) {
                out[n++] = 0, out[n++] = sub_start, out[n++] = RANGE_IDS;
                out[n++] = inside, out[n++] = host, out[n++] = 1;
                return n;
        }
        if (inside > 0)
                out[n++] = 0, out[n++] = sub_start, out[n++] = inside;
        out[n++] = inside, out[n++] = host, out[n++] = 1;
        if (inside + 1 < RANGE_IDS)
                out[n++] = inside + 1, out[n++] = sub_start + inside,
                out[n++] = RANGE_IDS - inside - 1;
        return n;
}

/* Start name (newuidmap or newgidmap) on child with the map v; its pid, or < 0. */
static pid_t map_helper_start(const char *name, pid_t child, const unsigned long *v, int n,
                              struct cs_error *err)
{
        char buf[64];
        const char *path = helper_path(name, buf);
        char args[10][32];
        char *argv[12];
        pid_t pid;

        if (!path)
                return cs_error_setx(err, ENOENT, "%s is not installed: install uidmap", name);
        argv[0] = (char *)name;
        snprintf(args[0], sizeof(args[0]), "%d", (int)runner_pid_in_proc(child));
        argv[1] = args[0];
        for (int i = 0; i < n; i++) {
                snprintf(args[i + 1], sizeof(args[i + 1]), "%lu", v[i]);
                argv[i + 2] = args[i + 1];
        }
        argv[n + 2] = NULL;
        pid = fork();
        if (pid < 0)
                return cs_error_set(err, errno, "fork for %s", name);
        if (pid == 0) {
                sigset_t none;

                sigemptyset(&none);
                sigprocmask(SIG_SETMASK, &none, NULL);
                execv(path, argv);
                _exit(127);
        }
        return pid;
}

static int map_helper_wait(const char *name, pid_t pid, struct cs_error *err)
{
        char buf[64];
        int status;

        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return cs_error_set(err, errno, "wait for %s", name);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                return cs_error_setx(err, EACCES,
                                     "%s failed (status %d) mapping the id range (its own words "
                                     "are above): check your ranges in /etc/subuid and "
                                     "/etc/subgid",
                                     helper_path(name, buf) ? buf : name,
                                     WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        return 0;
}

bool runner_proc_is_ours(void)
{
        char self[32];
        ssize_t n = readlink("/proc/self", self, sizeof(self) - 1);

        if (n <= 0)
                return false;
        self[n] = '\0';
        return strtol(self, NULL, 10) == (long)getpid();
}

pid_t runner_pid_in_proc(pid_t pid)
{
        /* Dropped: untranslated, the caller's open fails and says why. */
        struct cs_error ignored;
        _cleanup_free_ char *buf = NULL;
        _cleanup_close_ int fd = -1;
        char path[64];
        const char *p;
        long v;

        if (runner_proc_is_ours())
                return pid;
        /* A pidfd's fdinfo gives its pid as the pid namespace of the /proc read sees it. */
        fd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (fd < 0)
                return pid;
        snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
        if (cs_read_file_at(AT_FDCWD, path, 4096, false, &buf, NULL, &ignored) < 0)
                return pid;
        p = strstr(buf, "\nPid:");
        v = p ? strtol(p + 5, NULL, 10) : -1;
        return v > 0 ? (pid_t)v : pid;
}

static int write_proc_file(pid_t child, const char *name, const char *text, struct cs_error *err)
{
        char path[64];
        _cleanup_close_ int fd = -1;

        snprintf(path, sizeof(path), "/proc/%d/%s", (int)runner_pid_in_proc(child), name);
        fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0 && (errno == EROFS || errno == ENOENT) && !runner_proc_is_ours()) {
                const char *cause, *fix;
                int e = errno;

                diagnose_outer_proc(&cause, &fix);
                cs_error_setx(err, e,
                              "open %s: %s. This /proc is an outer pid namespace's, bound "
                              "read-only by the csandbox this runs in (the kernel refused it a "
                              "fresh one: %s), so a nested sandbox's id maps cannot be written. "
                              "To let csandbox run inside it, %s: the outer csandbox then gets "
                              "a /proc of its own",
                              path, strerror(e), cause, fix);
                err->cause_named = true;
                return -e;
        }
        if (fd < 0)
                return cs_error_set(err, errno, "open %s", path);
        if (cs_write_all(fd, text, strlen(text)) < 0)
                return cs_error_set(err, errno, "write %s (`%.*s`)", path, (int)strcspn(text, "\n"),
                                    text);
        return 0;
}

int idmap_write(pid_t child, const struct sandbox_spec *s, struct cs_error *err)
{
        char line[64];
        int r;

        if (s->map_range) {
                /* Dropped: the first failure is the one reported. */
                struct cs_error ignored;
                struct subid_range ru, rg;
                unsigned long v[9];
                pid_t pu, pg;
                int n, r2;

                r = subid_find("/etc/subuid", s->host_uid, "--map-range", &ru, err);
                if (r >= 0)
                        r = subid_find("/etc/subgid", s->host_uid, "--map-range", &rg, err);
                if (r < 0)
                        return r;
                /* The two helpers side by side: each is an exec of a setuid program. */
                n = idmap_range_args(s->uid, s->host_uid, ru.start, v);
                pu = map_helper_start("newuidmap", child, v, n, err);
                if (pu < 0)
                        return pu;
                n = idmap_range_args(s->gid, s->host_gid, rg.start, v);
                pg = map_helper_start("newgidmap", child, v, n, err);
                r = map_helper_wait("newuidmap", pu, pg < 0 ? &ignored : err);
                if (pg < 0)
                        return pg;
                r2 = map_helper_wait("newgidmap", pg, r < 0 ? &ignored : err);
                return r < 0 ? r : r2;
        }
        /* Without CAP_SETGID in the parent namespace the kernel only takes a gid_map once
         * setgroups is denied (CVE-2014-8989). */
        r = write_proc_file(child, "setgroups", "deny", err);
        if (r < 0)
                return r;
        snprintf(line, sizeof(line), "%u %u 1\n", (unsigned)s->uid, (unsigned)s->host_uid);
        r = write_proc_file(child, "uid_map", line, err);
        if (r == -EPERM && s->host_uid == 0)
                diagnose_root_map(err);
        if (r < 0)
                return r;
        snprintf(line, sizeof(line), "%u %u 1\n", (unsigned)s->gid, (unsigned)s->host_gid);
        return write_proc_file(child, "gid_map", line, err);
}
