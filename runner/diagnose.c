/* Why can't we have a user namespace, or /dev/net/tun? Name the cause and the fix for where
 * csandbox is running (a desktop, a container, another csandbox), as far as we can see it. */
#include "internal.h"

#include "../common/error.h"
#include "../common/fileio.h"

#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

static long read_long(const char *path)
{
        /* Dropped: a diagnosis: a file it cannot read only leaves that hint out. */
        struct cs_error ignored;
        char *buf = NULL;
        long v = -1;

        if (cs_read_file_at(AT_FDCWD, path, 4096, false, &buf, NULL, &ignored) == 0) {
                v = strtol(buf, NULL, 10);
                free(buf);
        }
        return v;
}

static bool seccomp_filtered_at(const char *status)
{
        /* Dropped: a diagnosis: a file it cannot read only leaves that hint out. */
        struct cs_error ignored;
        char *buf = NULL;
        bool r = false;

        if (cs_read_file_at(AT_FDCWD, status, 1 << 16, false, &buf, NULL, &ignored) == 0) {
                const char *p = strstr(buf, "\nSeccomp:");

                r = p && strtol(p + 9, NULL, 10) == 2;
                free(buf);
        }
        return r;
}

static bool seccomp_filtered(void)
{
        return seccomp_filtered_at("/proc/self/status");
}

static bool file_contains(const char *path, const char *const words[])
{
        /* Dropped: a diagnosis: a file it cannot read only leaves that hint out. */
        struct cs_error ignored;
        char *buf = NULL;
        bool r = false;

        if (cs_read_file_at(AT_FDCWD, path, 1 << 16, false, &buf, NULL, &ignored) == 0) {
                for (size_t i = 0; words[i] && !r; i++)
                        r = strstr(buf, words[i]) != NULL;
                free(buf);
        }
        return r;
}

enum where { WHERE_HOST, WHERE_CONTAINER, WHERE_POD, WHERE_USERNS, WHERE_CSANDBOX };

/* The topmost of the csandbox-named processes above us (a sandbox's pid 1 keeps the name,
 * and its parent is the csandbox that launched it), walked up through the PPid of each
 * /proc/PID/status: under a /proc csandbox bound from outside (an outer pid namespace's),
 * /proc/1 is the container's init, not the sandbox's. 0: none. */
static long csandbox_launcher(void)
{
        static const char *const csandbox[] = {"csandbox\n", NULL};
        char path[64];
        long pid, found = 0;

        snprintf(path, sizeof(path), "/proc/self/status");
        for (int depth = 0; depth < 64; depth++) {
                /* Dropped: a diagnosis: an unreadable ancestor ends the walk. */
                struct cs_error ignored;
                char *buf = NULL;
                const char *p;

                if (cs_read_file_at(AT_FDCWD, path, 1 << 16, false, &buf, NULL, &ignored) < 0)
                        break;
                p = strstr(buf, "\nPPid:");
                pid = p ? strtol(p + 6, NULL, 10) : 0;
                free(buf);
                if (pid <= 0)
                        break;
                snprintf(path, sizeof(path), "/proc/%ld/comm", pid);
                if (file_contains(path, csandbox))
                        found = pid;
                else if (found)
                        break;
                snprintf(path, sizeof(path), "/proc/%ld/status", pid);
        }
        return found;
}

static bool csandbox_ancestor(void)
{
        static const char *const csandbox[] = {"csandbox\n", NULL};

        return (getpid() != 1 && file_contains("/proc/1/comm", csandbox)) ||
               csandbox_launcher() > 0;
}

/* A user namespace's map as /proc shows it (its first line), in buf; false when unreadable. */
static bool uid_map_of(const char *pid, char *buf, size_t len)
{
        /* Dropped: a diagnosis: a file it cannot read only leaves that hint out. */
        struct cs_error ignored;
        char path[64], *text = NULL;

        snprintf(path, sizeof(path), "/proc/%s/uid_map", pid);
        if (cs_read_file_at(AT_FDCWD, path, 4096, false, &text, NULL, &ignored) < 0)
                return false;
        snprintf(buf, len, "%.*s", (int)strcspn(text, "\n"), text);
        free(text);
        return true;
}

/* The initial user namespace maps every id to itself. */
static bool map_is_initial(const char *map)
{
        unsigned long a, b, n;

        return sscanf(map, "%lu %lu %lu", &a, &b, &n) == 3 && a == 0 && b == 0 && n == 4294967295ul;
}

static bool pod_marked(const char *pid)
{
        static const char *const kube[] = {"kubepods", NULL};
        char path[64];

        snprintf(path, sizeof(path), "/proc/%s/cgroup", pid);
        return (strcmp(pid, "self") == 0 && getenv("KUBERNETES_SERVICE_HOST")) ||
               access("/var/run/secrets/kubernetes.io", F_OK) == 0 || file_contains(path, kube) ||
               file_contains("/proc/1/cgroup", kube);
}

/* Where the process pid ("self", or an outer csandbox's launcher seen through a bound /proc)
 * runs. A pod first (its containers carry the service's address and its cgroup's name), then
 * a container engine's own marks; then a user namespace that is not the one of pid 1 (or
 * not the initial one, with no engine's mark): a plain unshare or another sandbox. Docker's
 * /.dockerenv counts last: machine images made from a container's file system keep it. */
static enum where place_of(const char *pid)
{
        static const char *const engines[] = {"docker", "libpod", "containerd",
                                              "lxc",    "podman", NULL};
        char path[64], map[128], map1[128];
        bool own_ns;

        if (pod_marked(pid))
                return WHERE_POD;
        snprintf(path, sizeof(path), "/proc/%s/status", pid);
        if (access("/run/.containerenv", F_OK) == 0 || file_contains("/proc/1/cgroup", engines) ||
            seccomp_filtered_at(path))
                return WHERE_CONTAINER;
        own_ns = uid_map_of(pid, map, sizeof(map)) && !map_is_initial(map) &&
                 (!uid_map_of("1", map1, sizeof(map1)) || strcmp(map, map1) != 0 ||
                  access("/.dockerenv", F_OK) < 0);
        if (own_ns)
                return WHERE_USERNS;
        if (access("/.dockerenv", F_OK) == 0)
                return WHERE_CONTAINER;
        return WHERE_HOST;
}

/* csandbox's pid 1 keeps its name (and is not us); then place_of. Computed once, before
 * the launch's clone (runner_place), so the sandbox's child inherits the outer view. */
static enum where running_where(void)
{
        static int cached = -1;

        if (cached < 0)
                cached = csandbox_ancestor() ? WHERE_CSANDBOX : place_of("self");
        return (enum where)cached;
}

/* Where the outer csandbox runs, seen through the /proc it bound into this sandbox (its
 * launcher is visible there); WHERE_HOST when it cannot be told. */
static enum where outer_where(void)
{
        long pid = csandbox_launcher();
        char name[24];

        if (pid <= 0)
                return WHERE_HOST;
        snprintf(name, sizeof(name), "%ld", pid);
        return place_of(name);
}

/* Which command the outer csandbox runs: its pid 1 is a fork of it and keeps its argv.
 * Only `exec` takes --dev-bind; a `run` session cannot be given the device. */
static enum outer { OUTER_UNKNOWN, OUTER_EXEC, OUTER_RUN } outer_command(void)
{
        char buf[256];
        ssize_t n;
        int fd = open("/proc/1/cmdline", O_RDONLY | O_CLOEXEC);
        const char *arg1;

        if (fd < 0)
                return OUTER_UNKNOWN;
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
                return OUTER_UNKNOWN;
        buf[n] = '\0';
        arg1 = buf + strlen(buf) + 1;
        if (arg1 >= buf + n)
                return OUTER_UNKNOWN;
        return strcmp(arg1, "exec") == 0  ? OUTER_EXEC
               : strcmp(arg1, "run") == 0 ? OUTER_RUN
                                          : OUTER_UNKNOWN;
}

static void hint_inside_csandbox(struct cs_error *err, bool nodev)
{
        const char *why =
            nodev ? "whose binds are nodev" : "which has no /dev/net/tun unless given";

        switch (outer_command()) {
        case OUTER_RUN:
                cs_error_hint(err,
                              "This runs inside csandbox (a `csandbox run` session), %s, and "
                              "`run` cannot be given the device: run this outside the session, "
                              "or in a sandbox started with `csandbox exec --dev-bind "
                              "/dev/net/tun /dev/net/tun`",
                              why);
                break;
        case OUTER_EXEC:
                cs_error_hint(err,
                              "This runs inside csandbox (an outer `csandbox exec`), %s: start "
                              "that outer `csandbox exec` with --dev-bind /dev/net/tun "
                              "/dev/net/tun%s",
                              why, nodev ? " in place of its bind of the device" : "");
                break;
        default:
                cs_error_hint(err,
                              "This runs inside csandbox, %s: start the outer sandbox with "
                              "`csandbox exec --dev-bind /dev/net/tun /dev/net/tun` (`run` "
                              "cannot be given the device)",
                              why);
        }
}

/* A pod's containers get devices only from the node: a hostPath volume or a device plugin. */
static void hint_tun_container(struct cs_error *err, enum where where, bool present)
{
        if (where == WHERE_POD)
                cs_error_hint(err,
                              "This runs in a pod, whose container %s: mount the node's "
                              "/dev/net/tun into it (a hostPath volume, type: CharDevice) or "
                              "ask for it through a device plugin",
                              present ? "may use the device only when it is given one"
                                      : "has no /dev/net/tun");
        else if (present)
                cs_error_hint(err, "This runs in a container, which may use the device only "
                                   "when it is passed in: start it with --device /dev/net/tun "
                                   "(docker, podman)");
        else
                cs_error_hint(err, "This runs in a container without the device: start it with "
                                   "--device /dev/net/tun (docker, podman)");
}

void diagnose_tun(struct cs_error *err, int e)
{
        enum where where = running_where();
        struct statvfs vfs;
        struct stat st;

        if (e == EACCES || e == EPERM) {
                if (stat("/dev/net/tun", &st) == 0 &&
                    !(st.st_mode & S_IROTH && st.st_mode & S_IWOTH) && st.st_uid != geteuid() &&
                    geteuid() != 0)
                        cs_error_hint(err,
                                      "It is mode %04o, owned by uid %u; desktops ship it mode "
                                      "0666: fix it with: sudo chmod 0666 /dev/net/tun (and a "
                                      "udev rule KERNEL==\"tun\", MODE=\"0666\" to keep it)",
                                      (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid);
                else if (where == WHERE_CSANDBOX)
                        hint_inside_csandbox(err, true);
                else if (where == WHERE_CONTAINER || where == WHERE_POD)
                        hint_tun_container(err, where, true);
                else if (statvfs("/dev/net/tun", &vfs) == 0 && vfs.f_flag & ST_NODEV)
                        cs_error_hint(err, "It lies on a mount with nodev, where no device can be "
                                           "opened: bind it without nodev");
                return;
        }
        if (where == WHERE_CSANDBOX)
                hint_inside_csandbox(err, false);
        else if (where == WHERE_CONTAINER || where == WHERE_POD)
                hint_tun_container(err, where, false);
        else
                cs_error_hint(err, "Load the tun module with: sudo modprobe tun");
}

static const char apparmor_hint[] =
    "AppArmor restricts unprivileged user namespaces "
    "(kernel.apparmor_restrict_unprivileged_userns=1): a namespace csandbox creates holds no "
    "capabilities. Allow csandbox with an AppArmor profile that has `userns,` (the "
    "repository ships one in contrib/apparmor), or run: sudo sysctl -w "
    "kernel.apparmor_restrict_unprivileged_userns=0";

static bool apparmor_restricts(void)
{
        return read_long("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == 1;
}

/* Whose seccomp filter this process runs under, and how that one lets csandbox through:
 * inside csandbox it is the outer csandbox's own (its default allows a nested csandbox). */
static void hint_seccomp(struct cs_error *err, const char *what)
{
        switch (running_where()) {
        case WHERE_CSANDBOX:
                cs_error_hint(err,
                              "This runs inside csandbox, whose seccomp filter (Seccomp: 2 in "
                              "/proc/self/status) is the outer csandbox's and likely %s: its "
                              "default profile lets a nested csandbox start, --seccomp strict or "
                              "a profile file may not; start the outer csandbox with --seccomp "
                              "default",
                              what);
                break;
        case WHERE_POD:
                cs_error_hint(err,
                              "This runs in a pod under a seccomp filter (Seccomp: 2 in "
                              "/proc/self/status), which likely %s: set the container's "
                              "securityContext.seccompProfile.type to Unconfined (or a "
                              "Localhost profile that allows clone and unshare of user "
                              "namespaces, mount and pivot_root)",
                              what);
                break;
        default:
                cs_error_hint(err,
                              "This process runs under a seccomp filter (Seccomp: 2 in "
                              "/proc/self/status), as container engines install, which likely "
                              "%s. Run the container with a seccomp profile that allows "
                              "clone/unshare of user namespaces, mount and pivot_root (e.g. "
                              "--security-opt seccomp=unconfined)",
                              what);
        }
}

/* The clone itself was refused: a container engine's filter is the likelier blocker than
 * AppArmor, whose restriction lets the namespace be created and then denies its set-up. */
void diagnose_userns(struct cs_error *err)
{
        if (err->cause_named)
                return;
        if (read_long("/proc/sys/kernel/unprivileged_userns_clone") == 0) {
                cs_error_hint(err, "Unprivileged user namespaces are disabled "
                                   "(kernel.unprivileged_userns_clone=0); enable them with: sudo "
                                   "sysctl -w kernel.unprivileged_userns_clone=1");
        } else if (read_long("/proc/sys/user/max_user_namespaces") == 0) {
                cs_error_hint(err, "User namespaces are disabled (user.max_user_namespaces=0); "
                                   "enable them with: sudo sysctl -w "
                                   "user.max_user_namespaces=15000");
        } else if (seccomp_filtered()) {
                hint_seccomp(err, "refuses new namespaces");
        } else if (apparmor_restricts()) {
                cs_error_hint(err, "%s", apparmor_hint);
        } else if (err->err == ENOSPC || err->err == EUSERS) {
                cs_error_hint(err, "The limit on user namespaces is reached "
                                   "(user.max_user_namespaces); raise it with sudo sysctl");
        }
}

void diagnose_setup(struct cs_error *err)
{
        if (err->cause_named)
                return;
        if (apparmor_restricts())
                cs_error_hint(err, "%s", apparmor_hint);
        else if (seccomp_filtered())
                hint_seccomp(err, "refuses this call");
}

/* Why the kernel refuses a fresh /proc where w is (it does beside mounts over parts of the
 * visible /proc that the sandbox's namespace cannot remove), and what gives one there. */
static void proc_words(enum where w, const char **cause, const char **fix)
{
        switch (w) {
        case WHERE_CONTAINER:
                *cause = "the container masks parts of its /proc";
                *fix = "start the container with --security-opt unmask=ALL (podman) or "
                       "--security-opt systempaths=unconfined (Docker)";
                break;
        case WHERE_POD:
                *cause = "the pod's container runtime masks parts of its /proc";
                *fix = "set the container's securityContext.procMount to Unmasked (the pod "
                       "needs hostUsers: false)";
                break;
        case WHERE_USERNS:
                *cause = "this user namespace, a plain unshare or another sandbox's, sees "
                         "mounts over parts of /proc it cannot remove";
                *fix = "start that namespace with a /proc of its own (unshare --fork --pid "
                       "--mount-proc)";
                break;
        case WHERE_CSANDBOX:
                *cause = "the csandbox this runs in has a /proc bound from outside";
                *fix = "start the outer csandbox where it gets a /proc of its own (its own "
                       "note says how)";
                break;
        default:
                *cause = "mounts cover parts of /proc (findmnt -R /proc lists them)";
                *fix = "unmount them";
        }
}

void runner_proc_words(const char **cause, const char **fix)
{
        proc_words(running_where(), cause, fix);
}

void diagnose_outer_proc(const char **cause, const char **fix)
{
        proc_words(outer_where(), cause, fix);
}

bool runner_in_pod(void)
{
        return running_where() == WHERE_POD;
}

/* The kernel maps a parent namespace's uid 0 into a new one only for a process holding
 * CAP_SETFCAP there (Linux 5.12: else the child could write file capabilities root honours). */
static bool holds_setfcap(void)
{
        /* Dropped: a diagnosis: an unreadable status reads as holding it (no hint). */
        struct cs_error ignored;
        char *buf = NULL;
        bool r = true;

        if (cs_read_file_at(AT_FDCWD, "/proc/self/status", 1 << 16, false, &buf, NULL, &ignored) ==
            0) {
                const char *p = strstr(buf, "\nCapEff:");

                r = !p || (strtoull(p + 8, NULL, 16) >> 31 & 1);
                free(buf);
        }
        return r;
}

void diagnose_root_map(struct cs_error *err)
{
        if (geteuid() != 0 || holds_setfcap())
                return;
        switch (running_where()) {
        case WHERE_CSANDBOX:
                cs_error_hint(err,
                              "This runs as uid 0 inside csandbox, which drops every capability, "
                              "and the kernel maps uid 0 into a new user namespace only for a "
                              "holder of CAP_SETFCAP (no seccomp profile changes that): %s",
                              outer_command() == OUTER_RUN
                                  ? "start the outer `csandbox run` as a user other than root"
                                  : "start the outer csandbox with another uid (csandbox exec "
                                    "--uid 1000), not --uid 0");
                break;
        case WHERE_POD:
                cs_error_hint(err,
                              "This runs as uid 0 without CAP_SETFCAP, and the kernel maps uid "
                              "0 into a new user namespace only for a holder of it: run the "
                              "container as another user (securityContext.runAsUser: 1000) or "
                              "add SETFCAP to its securityContext.capabilities");
                break;
        case WHERE_CONTAINER:
                cs_error_hint(err,
                              "This runs as uid 0 without CAP_SETFCAP, and the kernel maps uid "
                              "0 into a new user namespace only for a holder of it: start the "
                              "container as another user (--user 1000) or with --cap-add "
                              "SETFCAP (docker, podman)");
                break;
        default:
                cs_error_hint(err,
                              "This runs as uid 0 without CAP_SETFCAP, and the kernel maps uid "
                              "0 into a new user namespace only for a holder of it: run "
                              "csandbox as another user, or with CAP_SETFCAP");
        }
        err->cause_named = true;
}

void diagnose_stage(struct cs_error *err, int e)
{
        if (e != ENOENT && e != ENOTDIR)
                return;
        switch (running_where()) {
        case WHERE_POD:
                cs_error_hint(err, "This root has no /tmp directory, where csandbox assembles "
                                   "the sandbox's root: mount an emptyDir volume at /tmp in the "
                                   "pod, or add /tmp to the image (RUN mkdir -m 1777 /tmp)");
                break;
        case WHERE_CONTAINER:
                cs_error_hint(err, "This root has no /tmp directory, where csandbox assembles "
                                   "the sandbox's root: start the container with --tmpfs /tmp "
                                   "(docker, podman), or add /tmp to the image (RUN mkdir -m "
                                   "1777 /tmp)");
                break;
        default:
                cs_error_hint(err, "This root has no /tmp directory, where csandbox assembles "
                                   "the sandbox's root: create it (mkdir -m 1777 /tmp) or mount "
                                   "a tmpfs there");
        }
        err->cause_named = true;
}

/* Whether file (/proc/net/route, or ipv6_route with its device last) has a route through a
 * device other than lo; -1 when it cannot be read (then nothing is claimed). */
static int routes_beyond_lo(const char *file, bool device_last)
{
        /* Dropped: a diagnosis: an unreadable table claims nothing. */
        struct cs_error ignored;
        char *buf = NULL, *line, *save = NULL;
        int r = 0;

        if (cs_read_file_at(AT_FDCWD, file, 1 << 20, false, &buf, NULL, &ignored) < 0)
                return -1;
        for (line = strtok_r(buf, "\n", &save); line && !r; line = strtok_r(NULL, "\n", &save)) {
                char dev[32] = "";
                const char *w = line;

                if (device_last) {
                        w = strrchr(line, ' ');
                        w = w ? w + 1 : line;
                } else if (strncmp(line, "Iface", 5) == 0) {
                        continue;
                }
                sscanf(w, "%31s", dev);
                r = dev[0] && strcmp(dev, "lo") != 0;
        }
        free(buf);
        return r;
}

bool runner_no_network(void)
{
        return routes_beyond_lo("/proc/self/net/route", false) == 0 &&
               routes_beyond_lo("/proc/self/net/ipv6_route", true) != 1;
}

const char *runner_no_network_words(void)
{
        switch (running_where()) {
        case WHERE_POD:
                return "this pod has no network beyond loopback (no route in /proc/net/route but "
                       "lo's), so nothing outside can be reached: give the pod a network "
                       "(its network plugin, or hostNetwork: true)";
        case WHERE_CONTAINER:
                return "this container has no network beyond loopback (no route in "
                       "/proc/net/route but lo's, as --network none leaves it), so nothing "
                       "outside can be reached: start it with a network (docker, podman: drop "
                       "--network none)";
        case WHERE_CSANDBOX:
                return "the csandbox this runs in has no network beyond loopback (no route but "
                       "lo's), so nothing outside can be reached: start the outer csandbox "
                       "with --net pasta (or --net relay)";
        case WHERE_USERNS:
                return "this network namespace has no network beyond loopback (no route but "
                       "lo's: an `unshare --net` gives none), so nothing outside can be "
                       "reached: run csandbox outside it, or give it a network (pasta, "
                       "slirp4netns)";
        default:
                return "this machine has no network beyond loopback (no route in "
                       "/proc/net/route but lo's), so nothing outside can be reached: connect "
                       "it to a network, or run csandbox in a network namespace that has one";
        }
}

int runner_check_network(struct sandbox_spec *s, struct cs_error *err)
{
        if (s->egress != SPEC_EGRESS_ALLOWLIST || !runner_no_network())
                return 0;
        return spec_warn(s, err, "csandbox: egress: %s", runner_no_network_words());
}
