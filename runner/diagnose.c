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

static bool seccomp_filtered(void)
{
        /* Dropped: a diagnosis: a file it cannot read only leaves that hint out. */
        struct cs_error ignored;
        char *buf = NULL;
        bool r = false;

        if (cs_read_file_at(AT_FDCWD, "/proc/self/status", 1 << 16, false, &buf, NULL, &ignored) ==
            0) {
                const char *p = strstr(buf, "\nSeccomp:");

                r = p && strtol(p + 9, NULL, 10) == 2;
                free(buf);
        }
        return r;
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

enum where { WHERE_HOST, WHERE_CONTAINER, WHERE_CSANDBOX };

/* Whether an ancestor of ours is named csandbox (a sandbox's pid 1 keeps the name), walked
 * up through the PPid of each /proc/PID/status: under a /proc csandbox bound from outside
 * (an outer pid namespace's), /proc/1 is the container's init, not the sandbox's. */
static bool csandbox_ancestor(void)
{
        static const char *const csandbox[] = {"csandbox\n", NULL};
        char path[64];
        long pid;

        if (getpid() != 1 && file_contains("/proc/1/comm", csandbox))
                return true;
        snprintf(path, sizeof(path), "/proc/self/status");
        for (int depth = 0; depth < 64; depth++) {
                /* Dropped: a diagnosis: an unreadable ancestor ends the walk. */
                struct cs_error ignored;
                char *buf = NULL;
                const char *p;

                if (cs_read_file_at(AT_FDCWD, path, 1 << 16, false, &buf, NULL, &ignored) < 0)
                        return false;
                p = strstr(buf, "\nPPid:");
                pid = p ? strtol(p + 6, NULL, 10) : 0;
                free(buf);
                if (pid <= 0)
                        return false;
                snprintf(path, sizeof(path), "/proc/%ld/comm", pid);
                if (file_contains(path, csandbox))
                        return true;
                snprintf(path, sizeof(path), "/proc/%ld/status", pid);
        }
        return false;
}

/* csandbox's pid 1 keeps its name (and is not us); container engines leave a file or a
 * cgroup name behind, and install a seccomp filter a desktop session does not have. */
static enum where running_where(void)
{
        static const char *const engines[] = {"docker", "libpod", "containerd", "kubepods",
                                              "lxc",    "podman", NULL};

        if (csandbox_ancestor())
                return WHERE_CSANDBOX;
        if (access("/.dockerenv", F_OK) == 0 || access("/run/.containerenv", F_OK) == 0 ||
            file_contains("/proc/1/cgroup", engines) || seccomp_filtered())
                return WHERE_CONTAINER;
        return WHERE_HOST;
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
                else if (where == WHERE_CONTAINER)
                        cs_error_hint(err, "This runs in a container, which may use the device "
                                           "only when it is passed in: start it with --device "
                                           "/dev/net/tun (docker, podman)");
                else if (statvfs("/dev/net/tun", &vfs) == 0 && vfs.f_flag & ST_NODEV)
                        cs_error_hint(err, "It lies on a mount with nodev, where no device can be "
                                           "opened: bind it without nodev");
                return;
        }
        if (where == WHERE_CSANDBOX)
                hint_inside_csandbox(err, false);
        else if (where == WHERE_CONTAINER)
                cs_error_hint(err, "This runs in a container without the device: start it with "
                                   "--device /dev/net/tun (docker, podman)");
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

/* The clone itself was refused: a container engine's filter is the likelier blocker than
 * AppArmor, whose restriction lets the namespace be created and then denies its set-up. */
void diagnose_userns(struct cs_error *err)
{
        if (read_long("/proc/sys/kernel/unprivileged_userns_clone") == 0) {
                cs_error_hint(err, "Unprivileged user namespaces are disabled "
                                   "(kernel.unprivileged_userns_clone=0); enable them with: sudo "
                                   "sysctl -w kernel.unprivileged_userns_clone=1");
        } else if (read_long("/proc/sys/user/max_user_namespaces") == 0) {
                cs_error_hint(err, "User namespaces are disabled (user.max_user_namespaces=0); "
                                   "enable them with: sudo sysctl -w "
                                   "user.max_user_namespaces=15000");
        } else if (seccomp_filtered()) {
                cs_error_hint(err, "This process already runs under a seccomp filter (Seccomp: "
                                   "2 in /proc/self/status), as container engines install; the "
                                   "filter likely refuses new namespaces. Run the container "
                                   "with a seccomp profile that allows clone/unshare of user "
                                   "namespaces (e.g. --security-opt seccomp=unconfined)");
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
                cs_error_hint(err, "This process runs under a seccomp filter (Seccomp: 2 in "
                                   "/proc/self/status), as container engines install, and it "
                                   "likely refuses this call. Run the container with a seccomp "
                                   "profile that allows it (e.g. --security-opt "
                                   "seccomp=unconfined)");
}

void diagnose_no_network(struct cs_error *err)
{
        switch (running_where()) {
        case WHERE_CSANDBOX:
                cs_error_hint(err, "This runs inside csandbox, in a session without a network "
                                   "(`csandbox exec`'s default, --net none): start that outer "
                                   "sandbox with --net pasta (or --net relay)");
                break;
        case WHERE_CONTAINER:
                cs_error_hint(err, "This runs in a container without a network (started with "
                                   "--network none): start it with a network for one");
                break;
        default:
                cs_error_hint(err, "This machine's network is down or not configured");
        }
}
