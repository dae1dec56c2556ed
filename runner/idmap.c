/* uid/gid maps. One id is written directly (setgroups denied first, as the kernel requires
 * for an unprivileged writer); a range goes through the setuid newuidmap/newgidmap helpers,
 * which check /etc/subuid and /etc/subgid for us. */
#include "runner.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define RANGE_IDS      65536u
#define SUBID_FILE_MAX (1u << 20)

struct subid_range {
        unsigned long start, count;
};

/* The caller's first subordinate range that can hold the ids --map-range maps. */
static int subid_find(const char *file, uid_t id, struct subid_range *ret, struct cs_error *err)
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
        return cs_error_setx(err, ENOENT,
                             "--map-range: %s has no range of at least %u ids for user %s (uid "
                             "%u); ask an administrator to add one (usermod --add-subuids "
                             "100000-165535 --add-subgids 100000-165535 %s), or drop --map-range",
                             file, RANGE_IDS, pw ? pw->pw_name : idstr, (unsigned)id,
                             pw ? pw->pw_name : idstr);
}

static const char *helper_path(const char *name)
{
        static const char *const dirs[] = {"/usr/bin", "/usr/sbin", "/bin", "/sbin"};
        static char path[64];

        for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
                snprintf(path, sizeof(path), "%s/%s", dirs[i], name);
                if (access(path, X_OK) == 0)
                        return path;
        }
        return NULL;
}

int idmap_check_range(const struct sandbox_spec *s, struct cs_error *err)
{
        struct subid_range r;
        int ret;

        if (!s->map_range)
                return 0;
        if (!helper_path("newuidmap") || !helper_path("newgidmap"))
                return cs_error_setx(err, ENOENT,
                                     "--map-range needs newuidmap and newgidmap, which are not "
                                     "installed: install the uidmap package, or drop --map-range");
        ret = subid_find("/etc/subuid", s->host_uid, &r, err);
        if (ret < 0)
                return ret;
        return subid_find("/etc/subgid", s->host_uid, &r, err);
}

/* Inside ids 0..65535 with `inside` landing on the caller's own host id and the others on
 * the subordinate range. Each entry: inside, outside, count. */
static int range_map_args(unsigned inside, unsigned long host, const struct subid_range *sub,
                          unsigned long out[9])
{
        int n = 0;

        if (inside >= RANGE_IDS) {
                out[n++] = 0, out[n++] = sub->start, out[n++] = RANGE_IDS;
                out[n++] = inside, out[n++] = host, out[n++] = 1;
                return n;
        }
        if (inside > 0)
                out[n++] = 0, out[n++] = sub->start, out[n++] = inside;
        out[n++] = inside, out[n++] = host, out[n++] = 1;
        if (inside + 1 < RANGE_IDS)
                out[n++] = inside + 1, out[n++] = sub->start + inside,
                out[n++] = RANGE_IDS - inside - 1;
        return n;
}

static int run_map_helper(const char *name, pid_t child, const unsigned long *v, int n,
                          struct cs_error *err)
{
        const char *path = helper_path(name);
        char args[10][32];
        char *argv[12];
        pid_t pid;
        int status;

        if (!path)
                return cs_error_setx(err, ENOENT, "%s is not installed: install uidmap", name);
        argv[0] = (char *)name;
        snprintf(args[0], sizeof(args[0]), "%d", (int)child);
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
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return cs_error_set(err, errno, "wait for %s", name);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                return cs_error_setx(err, EPERM,
                                     "%s failed (status %d) mapping the id range: check the "
                                     "ranges in /etc/subuid and /etc/subgid",
                                     path, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        return 0;
}

static int write_proc_file(pid_t child, const char *name, const char *text, struct cs_error *err)
{
        char path[64];
        _cleanup_close_ int fd = -1;

        snprintf(path, sizeof(path), "/proc/%d/%s", (int)child, name);
        fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return cs_error_set(err, errno, "open %s", path);
        if (cs_write_all(fd, text, strlen(text)) < 0)
                return cs_error_set(err, errno, "write %s (`%s`)", path, text);
        return 0;
}

int idmap_write(pid_t child, const struct sandbox_spec *s, struct cs_error *err)
{
        char line[64];
        int r;

        if (s->map_range) {
                struct subid_range ru, rg;
                unsigned long v[9];
                int n;

                r = subid_find("/etc/subuid", s->host_uid, &ru, err);
                if (r >= 0)
                        r = subid_find("/etc/subgid", s->host_uid, &rg, err);
                if (r < 0)
                        return r;
                n = range_map_args(s->uid, s->host_uid, &ru, v);
                r = run_map_helper("newuidmap", child, v, n, err);
                if (r < 0)
                        return r;
                n = range_map_args(s->gid, s->host_gid, &rg, v);
                return run_map_helper("newgidmap", child, v, n, err);
        }
        /* Without CAP_SETGID in the parent namespace the kernel only takes a gid_map once
         * setgroups is denied (CVE-2014-8989). */
        r = write_proc_file(child, "setgroups", "deny", err);
        if (r < 0)
                return r;
        snprintf(line, sizeof(line), "%u %u 1\n", (unsigned)s->uid, (unsigned)s->host_uid);
        r = write_proc_file(child, "uid_map", line, err);
        if (r < 0)
                return r;
        snprintf(line, sizeof(line), "%u %u 1\n", (unsigned)s->gid, (unsigned)s->host_gid);
        return write_proc_file(child, "gid_map", line, err);
}
