/* The sandbox's own network namespace: loopback up, nothing else. */
#include "runner.h"

#include "../common/cleanup.h"
#include "../common/error.h"

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

int netns_loopback_up(struct cs_error *err)
{
        _cleanup_close_ int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        struct ifreq ifr;

        if (fd < 0)
                return cs_error_set(err, errno, "bring up loopback: socket");
        memset(&ifr, 0, sizeof(ifr));
        strcpy(ifr.ifr_name, "lo");
        if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
                return cs_error_set(err, errno, "bring up loopback: get flags of lo");
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
                return cs_error_set(err, errno, "bring up loopback: set lo up");
        return 0;
}

/* A user-mode network helper attached to the sandbox's netns: pasta (from passt), or
 * slirp4netns when pasta is not installed. csandbox owns its lifetime: it is our child with
 * PDEATHSIG, and it is killed when the sandbox ends on every path. */

static bool find_in_path(const char *name, char *ret, size_t size)
{
        const char *path = getenv("PATH");
        char buf[4096];
        char *save = NULL;

        if (!path || !*path)
                path = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";
        snprintf(buf, sizeof(buf), "%s", path);
        for (char *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
                if (d[0] != '/')
                        continue;
                snprintf(ret, size, "%s/%s", d, name);
                if (access(ret, X_OK) == 0)
                        return true;
        }
        return false;
}

static const char net_alternatives[] =
    "Or choose --net none (no network at all), or --net host, which shares the host's "
    "network and with it every service on the host's 127.0.0.1 and every abstract unix "
    "socket (X11, D-Bus)";

int netns_helper_find(const struct sandbox_spec *s, struct net_helper *ret, struct cs_error *err)
{
        _cleanup_close_ int tun = -1;

        memset(ret, 0, sizeof(*ret));
        ret->pid = -1;
        ret->ready_fd = -1;
        ret->err_fd = -1;
        ret->exit_fd = -1;
        if (find_in_path("pasta", ret->path, sizeof(ret->path))) {
                ret->kind = NET_HELPER_PASTA;
        } else if (find_in_path("slirp4netns", ret->path, sizeof(ret->path))) {
                ret->kind = NET_HELPER_SLIRP4NETNS;
                if (s->map_host_loopback)
                        return cs_error_setx(err, ENOENT,
                                             "--map-host-loopback needs pasta, which is not "
                                             "installed (slirp4netns is, but cannot map %s): "
                                             "install it with: sudo apt-get install passt",
                                             SPEC_NET_HOST_LOOPBACK);
        } else {
                cs_error_setx(err, ENOENT,
                              "--net pasta: neither pasta nor slirp4netns is installed (looked "
                              "in PATH); install pasta with: sudo apt-get install passt");
                return cs_error_hint(err, "%s", net_alternatives);
        }
        /* Both helpers open /dev/net/tun as us; find out now rather than after set-up. */
        tun = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
        if (tun < 0 && (errno == EACCES || errno == EPERM)) {
                cs_error_setx(err, errno,
                              "--net pasta: /dev/net/tun is not usable by your user (%s), so "
                              "%s cannot give the sandbox a network; desktops ship it mode "
                              "0666: fix it with: sudo chmod 0666 /dev/net/tun (and a udev rule "
                              "KERNEL==\"tun\", MODE=\"0666\" to keep it)",
                              strerror(errno), ret->path);
                return cs_error_hint(err, "%s", net_alternatives);
        }
        if (tun < 0) {
                cs_error_setx(err, errno,
                              "--net pasta: /dev/net/tun cannot be opened (%s); load the tun "
                              "module with: sudo modprobe tun",
                              strerror(errno));
                return cs_error_hint(err, "%s", net_alternatives);
        }
        return 0;
}

static void helper_child(const struct net_helper *h, char *const argv[], pid_t parent, int keep1,
                         int keep2, int errw)
{
        int devnull;

        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
                _exit(127);
        /* Out of the terminal's foreground process group: Ctrl-Z must not freeze the network. */
        setsid();
        devnull = open("/dev/null", O_RDWR);
        if (devnull >= 0) {
                dup2(devnull, 0);
                dup2(devnull, 1);
        }
        dup2(errw, 2);
        /* Everything else of ours is close-on-exec already; only the two pipes go along. */
        if (keep1 >= 0)
                fcntl(keep1, F_SETFD, 0);
        if (keep2 >= 0)
                fcntl(keep2, F_SETFD, 0);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execv(h->path, argv);
        dprintf(2, "cannot execute %s: %s\n", h->path, strerror(errno));
        _exit(127);
}

int netns_helper_start(const struct sandbox_spec *s, pid_t child, struct net_helper *h,
                       struct cs_error *err)
{
        int readyp[2], errp[2], exitp[2] = {-1, -1};
        char pidstr[16], readyarg[64], exitarg[32];
        pid_t parent = getpid();
        char *argv[32];
        int n = 0;

        if (pipe2(readyp, O_CLOEXEC) < 0)
                return cs_error_set(err, errno, "pipe");
        if (pipe2(errp, O_CLOEXEC) < 0) {
                close(readyp[0]), close(readyp[1]);
                return cs_error_set(err, errno, "pipe");
        }
        snprintf(pidstr, sizeof(pidstr), "%d", (int)child);
        argv[n++] = h->path;
        if (h->kind == NET_HELPER_PASTA) {
                /* Addresses and routes copied from the host; no port forwarding either way
                 * (-T/-U auto would expose every host loopback port on the sandbox's own
                 * loopback); the gateway address maps to the host's loopback only when
                 * asked, and then it is 169.254.1.2; DNS to 169.254.1.3 goes to the host's
                 * resolver. pasta writes the pid file once the namespace is configured. */
                static char *const fixed[] = {"--config-net", "--quiet", "--foreground",
                                              /* addresses come from --config-net */
                                              "--no-dhcp", "--no-dhcpv6", "--no-ra", "-t", "none",
                                              "-u", "none", "-T", "none", "-U", "none",
                                              "--dns-forward", SPEC_NET_DNS};
                for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
                        argv[n++] = fixed[i];
                if (s->map_host_loopback) {
                        argv[n++] = "--gateway";
                        argv[n++] = SPEC_NET_HOST_LOOPBACK;
                } else {
                        argv[n++] = "--no-map-gw";
                }
                snprintf(readyarg, sizeof(readyarg), "/proc/self/fd/%d", readyp[1]);
                argv[n++] = "--pid";
                argv[n++] = readyarg;
                argv[n++] = pidstr;
        } else {
                if (pipe2(exitp, O_CLOEXEC) < 0) {
                        close(readyp[0]), close(readyp[1]), close(errp[0]), close(errp[1]);
                        return cs_error_set(err, errno, "pipe");
                }
                snprintf(readyarg, sizeof(readyarg), "--ready-fd=%d", readyp[1]);
                snprintf(exitarg, sizeof(exitarg), "--exit-fd=%d", exitp[0]);
                argv[n++] = "--configure";
                argv[n++] = "--mtu=65520";
                argv[n++] = "--cidr=" SPEC_NET_CIDR;
                argv[n++] = "--disable-host-loopback";
                argv[n++] = readyarg;
                argv[n++] = exitarg;
                argv[n++] = pidstr;
                argv[n++] = "tap0";
        }
        argv[n] = NULL;

        h->pid = fork();
        if (h->pid < 0) {
                int e = errno;

                close(readyp[0]), close(readyp[1]), close(errp[0]), close(errp[1]);
                if (exitp[0] >= 0)
                        close(exitp[0]), close(exitp[1]);
                return cs_error_set(err, e, "fork %s", h->path);
        }
        if (h->pid == 0)
                helper_child(h, argv, parent, readyp[1], exitp[0], errp[1]);
        close(readyp[1]);
        close(errp[1]);
        if (exitp[0] >= 0)
                close(exitp[0]);
        h->ready_fd = readyp[0];
        h->err_fd = errp[0];
        h->exit_fd = exitp[1];
        return 0;
}

int netns_helper_wait_ready(struct net_helper *h, struct cs_error *err)
{
        const char *name = h->kind == NET_HELPER_PASTA ? "pasta" : "slirp4netns";
        struct pollfd p = {.fd = h->ready_fd, .events = POLLIN};
        char buf[64];
        int r;

        do
                r = poll(&p, 1, NET_HELPER_TIMEOUT_MS);
        while (r < 0 && errno == EINTR);
        if (r == 0)
                return cs_error_setx(err, ETIMEDOUT,
                                     "%s did not configure the sandbox's network within %d s",
                                     h->path, NET_HELPER_TIMEOUT_MS / 1000);
        if (r > 0 && read(h->ready_fd, buf, sizeof(buf)) > 0)
                return 0;
        /* It exited before it was ready: show what it said. */
        {
                char msg[1024];
                ssize_t n;

                fcntl(h->err_fd, F_SETFL, O_NONBLOCK);
                n = read(h->err_fd, msg, sizeof(msg) - 1);
                msg[n > 0 ? n : 0] = '\0';
                while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
                        msg[--n] = '\0';
                return cs_error_setx(err, EIO, "%s failed to set up the sandbox's network%s%s%s",
                                     name, n > 0 ? " (it said: " : "", n > 0 ? msg : "",
                                     n > 0 ? ")" : "");
        }
}

void netns_helper_stop(struct net_helper *h)
{
        if (h->pid > 0) {
                /* SIGKILL ends it; its exit then unregisters the tap device, which takes the
                 * kernel tens of milliseconds of RCU grace periods. Nobody needs to wait for
                 * that: reap it if it is gone already, else leave the corpse to init. */
                kill(h->pid, SIGKILL);
                waitpid(h->pid, NULL, WNOHANG);
                h->pid = -1;
        }
        if (h->ready_fd >= 0)
                close(h->ready_fd);
        if (h->err_fd >= 0)
                close(h->err_fd);
        if (h->exit_fd >= 0)
                close(h->exit_fd);
        h->ready_fd = h->err_fd = h->exit_fd = -1;
}
