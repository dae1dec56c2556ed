/* Memory and CPU limits (spec->memory_max, spec->cpu_milli) through cgroup v2. An
 * unprivileged user can only limit what runs in a cgroup delegated to them, and a cgroup
 * that holds processes (the caller's shell's) cannot give its controllers to a child: the
 * way that works on a desktop is the one podman's rootless mode takes, a transient scope
 * from the user's systemd manager, asked for over D-Bus (busctl) with csandbox's own pid.
 * Everything started afterwards (the sandbox, its network helper) is inside the limits.
 * Where that is not possible the launch goes on without them, after saying why, once. */
#include "internal.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"
#include "../common/path.h"
#include "../common/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#define CGROUP_ROOT      "/sys/fs/cgroup"
#define BUSCTL_TIMEOUT   5000 /* ms */
#define SCOPE_WAIT_STEPS 200  /* of 5 ms: the move is done when systemd runs the job */

/* Our cgroup v2 path ("/user.slice/..."), from /proc/self/cgroup's "0::" line. */
static char *own_cgroup(void)
{
        _cleanup_free_ char *buf = NULL;
        /* Dropped: unreadable: the caller says the limits are not applied, and why. */
        struct cs_error ignored;
        size_t len;
        char *line, *nl;

        if (cs_read_file_at(AT_FDCWD, "/proc/self/cgroup", 64 << 10, false, &buf, &len, &ignored) <
            0)
                return NULL;
        for (line = buf; line && *line; line = nl ? nl + 1 : NULL) {
                nl = strchr(line, '\n');
                if (nl)
                        *nl = '\0';
                if (strncmp(line, "0::", 3) == 0)
                        return strdup(line + 3);
        }
        return NULL;
}

static bool has_controllers(const char *cgroup, bool memory, bool cpu)
{
        _cleanup_free_ char *path = NULL, *buf = NULL;
        /* Dropped: unreadable: counted as not delegated, which the warning then says. */
        struct cs_error ignored;
        size_t len;
        char *tok, *save = NULL;
        bool mem_ok = !memory, cpu_ok = !cpu;

        if (asprintf(&path, CGROUP_ROOT "%s/cgroup.controllers", cgroup) < 0) {
                path = NULL;
                return false;
        }
        if (cs_read_file_at(AT_FDCWD, path, 4096, false, &buf, &len, &ignored) < 0)
                return false;
        for (tok = strtok_r(buf, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save)) {
                mem_ok |= strcmp(tok, "memory") == 0;
                cpu_ok |= strcmp(tok, "cpu") == 0;
        }
        return mem_ok && cpu_ok;
}

/* Why this machine cannot take the limits before systemd is even asked, or NULL. */
static const char *cgroup_unusable(void)
{
        struct statfs sf;

        if (statfs(CGROUP_ROOT, &sf) < 0)
                return "there is no " CGROUP_ROOT;
        if ((unsigned long)sf.f_type != CGROUP2_SUPER_MAGIC)
                return "this machine keeps its memory and cpu controllers on cgroup v1 (a "
                       "legacy or hybrid layout), and csandbox sets limits through cgroup v2 "
                       "only";
        return NULL;
}

static int ask_systemd(const struct sandbox_spec *s, const char **why)
{
        _cleanup_free_ char *busctl = cs_find_program("busctl");
        _cleanup_(cs_capture_free) struct cs_capture c = {0};
        char unit[64], pid[16], mem[32], cpu[32], nprops[4];
        const char *runtime = getenv("XDG_RUNTIME_DIR");
        _cleanup_free_ char *bus =
            runtime && runtime[0] == '/' ? cs_path_join(runtime, "bus") : NULL;
        char *argv[32] = {"busctl",
                          "--user",
                          "--quiet",
                          "call",
                          "org.freedesktop.systemd1",
                          "/org/freedesktop/systemd1",
                          "org.freedesktop.systemd1.Manager",
                          "StartTransientUnit",
                          "ssa(sv)a(sa(sv))",
                          unit,
                          "fail",
                          nprops,
                          "PIDs",
                          "au",
                          "1",
                          pid};
        size_t n = 16, props = 1;

        if (!busctl) {
                *why = "busctl (systemd's D-Bus tool) is not installed, and csandbox asks the "
                       "user's systemd for a scope with it";
                return -ENOENT;
        }
        if (!getenv("DBUS_SESSION_BUS_ADDRESS") && (!bus || access(bus, F_OK) < 0)) {
                *why = "there is no systemd user session to ask for a limited scope "
                       "(neither DBUS_SESSION_BUS_ADDRESS nor $XDG_RUNTIME_DIR/bus)";
                return -ENOENT;
        }
        snprintf(unit, sizeof(unit), "csandbox-%d.scope", (int)getpid());
        snprintf(pid, sizeof(pid), "%d", (int)getpid());
        if (s->memory_max) {
                snprintf(mem, sizeof(mem), "%" PRIu64, s->memory_max);
                argv[n++] = "MemoryMax";
                argv[n++] = "t";
                argv[n++] = mem;
                props++;
        }
        if (s->cpu_milli) {
                /* CPU time per second of wall time. */
                snprintf(cpu, sizeof(cpu), "%llu", (unsigned long long)s->cpu_milli * 1000ull);
                argv[n++] = "CPUQuotaPerSecUSec";
                argv[n++] = "t";
                argv[n++] = cpu;
                props++;
        }
        argv[n++] = "CollectMode";
        argv[n++] = "s";
        argv[n++] = "inactive-or-failed";
        props++;
        argv[n++] = "0";
        argv[n] = NULL;
        snprintf(nprops, sizeof(nprops), "%zu", props);
        if (cs_spawn_capture(
                &(struct cs_spawn){
                    .path = busctl, .argv = argv, .timeout_ms = BUSCTL_TIMEOUT, .max = 4096},
                &c) < 0 ||
            !cs_capture_ok(&c)) {
                *why = "the user's systemd did not start a scope for it (busctl --user call "
                       "... StartTransientUnit failed)";
                return -EIO;
        }
        return 0;
}

void cgroup_apply_limits(const struct sandbox_spec *s)
{
        _cleanup_free_ char *before = NULL, *after = NULL;
        const char *why = NULL;

        if (!s->memory_max && !s->cpu_milli)
                return;
        why = cgroup_unusable();
        before = why ? NULL : own_cgroup();
        if (!why && !before)
                why = "csandbox's own cgroup v2 is not in /proc/self/cgroup";
        if (!why && ask_systemd(s, &why) == 0) {
                struct timespec step = {.tv_nsec = 5 * 1000 * 1000};

                for (int i = 0; i < SCOPE_WAIT_STEPS; i++) {
                        free(after);
                        after = own_cgroup();
                        if (after && strcmp(after, before) != 0)
                                break;
                        nanosleep(&step, NULL);
                }
                if (!after || strcmp(after, before) == 0)
                        why = "the user's systemd accepted the scope but did not move csandbox "
                              "into it within a second";
                else if (!has_controllers(after, s->memory_max != 0, s->cpu_milli != 0))
                        why = "the user's systemd does not delegate the memory and cpu "
                              "controllers to user scopes";
        }
        if (why)
                runner_warn("csandbox: warning: the sandbox runs without its %s%s%s limit: %s",
                            s->memory_max ? "memory" : "",
                            s->memory_max && s->cpu_milli ? " and " : "", s->cpu_milli ? "CPU" : "",
                            why);
}
