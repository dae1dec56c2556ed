/* The sandbox's own network namespace: loopback up, the host's addresses unreachable, and
 * the user-mode helper (pasta) that gives it a network. */
#include "internal.h"
#include "netlink.h"

#include "../common/cleanup.h"
#include "../common/error.h"

#include <arpa/inet.h>
#include <errno.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <fcntl.h>
#include <linux/fib_rules.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
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

static int loopback_up(struct cs_error *err)
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
        if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0) {
                cs_error_set(err, errno, "bring up loopback: set lo up");
                if (err->err == EPERM)
                        diagnose_setup(err);
                return -err->err;
        }
        return 0;
}

bool net_addr_needs_rule(const struct sandbox_spec *s, const struct net_host_addr *a)
{
        static const unsigned char loop6[16] = {[15] = 1};
        struct in_addr mapped;

        if (a->family == AF_INET6)
                return memcmp(a->bytes, loop6, 16) != 0;
        if (a->bytes[0] == 127)
                return false;
        inet_pton(AF_INET, SPEC_NET_HOST_LOOPBACK, &mapped);
        return !(s->map_host_loopback && memcmp(a->bytes, &mapped, 4) == 0);
}

/* Every address of the host, read in the host's namespace before clone. A user-mode helper
 * connects from the host to whatever the sandbox asks for, so a host service listening on
 * [::], a link-local or a secondary address would answer the sandbox. */
static int host_addrs_gather(const struct sandbox_spec *s, struct net_helper *h,
                             struct cs_error *err)
{
        struct net_host_addr *all = NULL;
        size_t n = 0;
        int r = host_addrs_dump(&all, &n);

        /* the same reader the watcher and the proxy follow (addresses, and local routes
         * wider than one) */
        if (r < 0)
                return cs_error_set(err, -r, "--net pasta: list the host's addresses");
        h->host_addrs = calloc(n ? n : 1, sizeof(*h->host_addrs));
        if (!h->host_addrs) {
                free(all);
                return cs_error_set(err, ENOMEM, "--net pasta: list the host's addresses");
        }
        for (size_t i = 0; i < n; i++)
                if (net_addr_needs_rule(s, &all[i]))
                        h->host_addrs[h->n_host_addrs++] = all[i];
        free(all);
        return 0;
}

int net_rule_unreachable(int nl, unsigned short type, const struct net_host_addr *a, uint32_t seq)
{
        size_t alen = a->family == AF_INET ? 4 : 16;
        uint32_t priority = NET_RULE_PRIORITY;
        struct nl_msg m;
        /* EXCL: the watcher (netwatch.c) may have made it first; never two of one */
        struct fib_rule_hdr *frh = netlink_begin(
            &m, type, type == RTM_NEWRULE ? NLM_F_CREATE | NLM_F_EXCL : 0, sizeof(*frh));

        m.nh.nlmsg_seq = seq;
        frh->family = (unsigned char)a->family;
        frh->dst_len = a->prefix ? a->prefix : (unsigned char)(alen * 8);
        frh->action = FR_ACT_UNREACHABLE;
        netlink_attr(&m, FRA_DST, a->bytes, alen);
        netlink_attr(&m, FRA_PRIORITY, &priority, sizeof(priority));
        return netlink_request(nl, &m.nh);
}

/* Inside the new netns, before the payload exists: every host address unreachable. Rules
 * rather than routes: an IPv6 link-local destination is looked up on its interface, which a
 * reject route (always on lo) never matches, while a rule applies before any table. */
static int host_addrs_block(const struct net_helper *h, struct cs_error *err)
{
        _cleanup_close_ int nl = -1;

        if (h->n_host_addrs == 0)
                return 0;
        nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
        if (nl < 0)
                return cs_error_set(err, errno, "make the host's addresses unreachable: netlink");
        for (size_t i = 0; i < h->n_host_addrs; i++) {
                const struct net_host_addr *a = &h->host_addrs[i];
                char text[INET6_ADDRSTRLEN];
                int r = net_rule_unreachable(nl, RTM_NEWRULE, a, (uint32_t)i + 1);

                if (r < 0 && r != -EEXIST) {
                        inet_ntop(a->family, a->bytes, text, sizeof(text));
                        return cs_error_set(err, -r,
                                            "make the host's address %s unreachable from the "
                                            "sandbox (a routing rule)",
                                            text);
                }
        }
        return 0;
}

int netns_setup(const struct sandbox_spec *s, const struct net_helper *h, struct cs_error *err)
{
        int r = loopback_up(err);

        if (r >= 0 && s->net == SPEC_NET_PASTA)
                r = host_addrs_block(h, err);
        return r;
}

/* A user-mode network helper attached to the sandbox's netns: pasta (from passt), or
 * slirp4netns when pasta is not installed. csandbox owns its lifetime: it is our child with
 * PDEATHSIG, and it is killed when the sandbox ends on every path. */

static const char net_alternatives[] =
    "Or choose --net none (no network at all), or --net host, which shares the host's "
    "network and with it every service on the host's 127.0.0.1 and every abstract unix "
    "socket (X11, D-Bus)";

/* `run` always makes its network: no flag of its to name, and no other network to offer. */
static const char *net_what(const struct sandbox_spec *s)
{
        return s->net_fixed ? "the session's network (pasta)" : "--net pasta";
}

static void helper_init(struct net_helper *h)
{
        memset(h, 0, sizeof(*h));
        h->pid = -1;
        h->ready_fd = -1;
        h->err_fd = -1;
        h->exit_fd = -1;
}

/* AVX2, asked of the CPU only here: __builtin_cpu_supports would link libgcc's constructor,
 * which runs a dozen cpuid at every start of csandbox, each a trap to the hypervisor in a
 * VM. AVX2 (leaf 7, EBX bit 5) counts only where the OS saves the AVX state (OSXSAVE, and
 * XCR0's SSE and AVX bits). */
static bool cpu_has_avx2(void)
{
#if defined(__x86_64__) || defined(__i386__)
        unsigned a, b, c, d, lo, hi;

        if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE) || !(c & bit_AVX))
                return false;
        __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        (void)hi;
        if ((lo & 6) != 6)
                return false;
        return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_AVX2);
#else
        return false;
#endif
}

int netns_helper_find(const struct sandbox_spec *s, struct net_helper *ret, struct cs_error *err)
{
        _cleanup_close_ int tun = -1;

        _cleanup_free_ char *helper = spec_net_helper(s);
        const char *base = helper ? strrchr(helper, '/') + 1 : NULL;

        helper_init(ret);
        if (helper)
                snprintf(ret->path, sizeof(ret->path), "%s", helper);
        if (base && strcmp(base, "pasta") == 0) {
                ret->kind = NET_HELPER_PASTA;
                /* pasta re-executes itself as <its path>.avx2 on a CPU that has AVX2, as
                 * passt's packages install it; go there directly. */
                if (cpu_has_avx2()) {
                        snprintf(ret->exec_path, sizeof(ret->exec_path), "%s.avx2", helper);
                        if (access(ret->exec_path, X_OK) != 0)
                                ret->exec_path[0] = '\0';
                }
        } else if (base) {
                ret->kind = NET_HELPER_SLIRP4NETNS;
                if (s->map_host_loopback)
                        return cs_error_setx(err, ENOENT,
                                             "--map-host-loopback needs pasta, which is not "
                                             "installed (slirp4netns is, but cannot map %s): "
                                             "install it with: sudo apt-get install passt",
                                             SPEC_NET_HOST_LOOPBACK);
        } else {
                cs_error_setx(err, ENOENT,
                              "%s: neither pasta nor slirp4netns is installed (looked in PATH); "
                              "install pasta with: sudo apt-get install passt",
                              net_what(s));
                return s->net_fixed ? -ENOENT : cs_error_hint(err, "%s", net_alternatives);
        }
        /* Both helpers open /dev/net/tun as us; find out now rather than after set-up. */
        tun = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
        if (tun < 0) {
                int e = errno;

                cs_error_setx(err, e,
                              "%s: /dev/net/tun %s (%s), so %s cannot give the sandbox a "
                              "network",
                              net_what(s),
                              e == EACCES || e == EPERM ? "is not usable by your user"
                                                        : "cannot be opened",
                              strerror(e), ret->path);
                diagnose_tun(err, e);
                return s->net_fixed ? -e : cs_error_hint(err, "%s", net_alternatives);
        }
        if (ret->kind == NET_HELPER_PASTA)
                netconf_host_pick(s, &ret->tap);
        return host_addrs_gather(s, ret, err);
}

static void helper_child(const struct net_helper *h, char *const argv[], pid_t parent,
                         const int keep[4], int errw)
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
        /* Everything else of ours is close-on-exec already; only the pipes and the
         * namespaces go along. */
        for (int i = 0; i < 4; i++)
                if (keep[i] >= 0)
                        fcntl(keep[i], F_SETFD, 0);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        /* pasta (passt 2023-03-09) exits "Couldn't install signal handlers" when it starts
         * with SIGPIPE ignored, which a caller (nohup, a CI runner, the build) may pass on. */
        signal(SIGPIPE, SIG_DFL);
        execv(h->exec_path[0] ? h->exec_path : h->path, argv);
        dprintf(2, "cannot execute %s: %s\n", h->path, strerror(errno));
        _exit(127);
}

int netns_helper_nsopen(const struct sandbox_spec *s, pid_t child, const struct net_helper *h,
                        int ret_fds[2], struct cs_error *err)
{
        char path[64];

        snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)runner_pid_in_proc(child));
        ret_fds[0] = open(path, O_RDONLY | O_CLOEXEC);
        snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)runner_pid_in_proc(child));
        ret_fds[1] = ret_fds[0] < 0 ? -1 : open(path, O_RDONLY | O_CLOEXEC);
        if (ret_fds[1] < 0) {
                cs_error_set(err, errno, "%s: open the sandbox's namespaces for %s", net_what(s),
                             h->path);
                if (ret_fds[0] >= 0)
                        close(ret_fds[0]);
                ret_fds[0] = -1;
                return -err->err;
        }
        return 0;
}

int netns_helper_start(const struct sandbox_spec *s, pid_t child, int nsfds[2],
                       struct net_helper *h, struct cs_error *err)
{
        int readyp[2], errp[2], exitp[2] = {-1, -1};
        char pidstr[16], readyarg[64], exitarg[32], tap_text[5][INET6_ADDRSTRLEN];
        char userarg[32], netarg[32];
        _cleanup_close_ int userns = nsfds ? nsfds[0] : -1, netns = nsfds ? nsfds[1] : -1;
        pid_t parent = getpid();
        char *argv[48];
        int n = 0;

        if (nsfds)
                nsfds[0] = nsfds[1] = -1;
        snprintf(pidstr, sizeof(pidstr), "%d", (int)runner_pid_in_proc(child));
        /* pasta joins the namespaces by fd, not by the pid of the sandbox's first process:
         * that one makes itself undumpable before its payload starts, which may be before
         * pasta gets that far. */
        if (h->kind == NET_HELPER_PASTA && userns < 0) {
                int fds[2];

                if (netns_helper_nsopen(s, child, h, fds, err) < 0)
                        return -err->err;
                userns = fds[0];
                netns = fds[1];
        }
        if (pipe2(readyp, O_CLOEXEC) < 0)
                return cs_error_set(err, errno, "pipe");
        if (pipe2(errp, O_CLOEXEC) < 0) {
                close(readyp[0]), close(readyp[1]);
                return cs_error_set(err, errno, "pipe");
        }
        argv[n++] = h->path;
        if (h->kind == NET_HELPER_PASTA) {
                /* Addresses and routes copied from the host; no port forwarding either way
                 * (-T/-U auto would expose every host loopback port on the sandbox's own
                 * loopback); the gateway address maps to the host's loopback only when
                 * asked, and then it is 169.254.1.2; DNS to 169.254.1.3 goes to the host's
                 * resolver. pasta writes the pid file once it is ready. Its interface is
                 * configured by pid 1 with the addresses given here (netconf.c), or by
                 * pasta itself (--config-net) where the host's routes do not fit that. */
                static char *const fixed[] = {
                    "--quiet", "--foreground", "--no-dhcp", "--no-dhcpv6",   "--no-ra",
                    "-t",      "none",         "-u",        "none",          "-T",
                    "none",    "-U",           "none",      "--dns-forward", SPEC_NET_DNS};
                for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
                        argv[n++] = fixed[i];
                if (h->tap.early)
                        n = netconf_pasta_args(&h->tap, argv, (size_t)n, tap_text);
                else
                        argv[n++] = "--config-net";
                /* As root, pasta would drop to nobody, who cannot enter a user namespace
                 * that root owns. */
                if (geteuid() == 0) {
                        argv[n++] = "--runas";
                        argv[n++] = "0:0";
                }
                if (s->map_host_loopback && !h->tap.early) {
                        argv[n++] = "--gateway";
                        argv[n++] = SPEC_NET_HOST_LOOPBACK;
                } else if (!s->map_host_loopback) {
                        argv[n++] = "--no-map-gw";
                }
                snprintf(readyarg, sizeof(readyarg), "/proc/self/fd/%d", readyp[1]);
                snprintf(userarg, sizeof(userarg), "/proc/self/fd/%d", userns);
                snprintf(netarg, sizeof(netarg), "/proc/self/fd/%d", netns);
                argv[n++] = "--pid";
                argv[n++] = readyarg;
                /* csandbox ends pasta itself; nothing to watch for on a file system */
                argv[n++] = "--no-netns-quit";
                argv[n++] = "--userns";
                argv[n++] = userarg;
                argv[n++] = "--netns";
                argv[n++] = netarg;
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
                helper_child(h, argv, parent, (const int[4]){readyp[1], exitp[0], userns, netns},
                             errp[1]);
        close(readyp[1]);
        close(errp[1]);
        if (exitp[0] >= 0)
                close(exitp[0]);
        h->ready_fd = readyp[0];
        h->err_fd = errp[0];
        h->exit_fd = exitp[1];
        return 0;
}

/* pasta repeats each line to a system logger that may not exist, and as root it announces
 * that it drops to nobody: neither is the cause of anything. */
static bool helper_noise(const char *line)
{
        return (strncmp(line, "Failed to send ", 15) == 0 && strstr(line, "syslog")) ||
               strncmp(line, "Don't run as root", 17) == 0 || !line[strspn(line, " \t")];
}

/* What the helper wrote on stderr, as one line without the noise. */
static void helper_said(int fd, char *out, size_t size)
{
        char buf[8192], *save = NULL;
        size_t len = 0, used = 0;
        struct pollfd p = {.fd = fd, .events = POLLIN};

        out[0] = '\0';
        /* It has exited or is exiting: read until EOF, briefly. */
        while (len < sizeof(buf) - 1 && poll(&p, 1, 200) > 0) {
                ssize_t n = read(fd, buf + len, sizeof(buf) - 1 - len);

                if (n <= 0)
                        break;
                len += (size_t)n;
        }
        buf[len] = '\0';
        for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                if (helper_noise(line))
                        continue;
                used += (size_t)snprintf(out + used, size - used, "%s%s", used ? "; " : "", line);
                if (used >= size - 1)
                        break;
        }
}

int netns_helper_wait_ready(struct net_helper *h, int timeout_ms, struct cs_error *err)
{
        const char *name = h->kind == NET_HELPER_PASTA ? "pasta" : "slirp4netns";
        struct pollfd p = {.fd = h->ready_fd, .events = POLLIN};
        char buf[64];
        int r;

        do
                r = poll(&p, 1, timeout_ms);
        while (r < 0 && errno == EINTR);
        if (r == 0)
                return cs_error_setx(err, ETIMEDOUT,
                                     "%s did not configure the sandbox's network within %d s",
                                     h->path, NET_HELPER_TIMEOUT_MS / 1000);
        if (r > 0 && read(h->ready_fd, buf, sizeof(buf)) > 0)
                return 0;
        /* It exited before it was ready: say why, in its words. */
        {
                char said[1024];
                int wstatus = 0;
                pid_t w = 0;

                helper_said(h->err_fd, said, sizeof(said));
                /* Its pipes close a moment before it can be reaped. */
                for (int i = 0; said[0] == '\0' && i < 50 && w == 0; i++) {
                        w = waitpid(h->pid, &wstatus, WNOHANG);
                        if (w == 0)
                                usleep(10000);
                }
                if (w == h->pid) {
                        h->pid = -1;
                        if (WIFSIGNALED(wstatus))
                                snprintf(said, sizeof(said), "it was killed by signal %d",
                                         WTERMSIG(wstatus));
                        else
                                snprintf(said, sizeof(said), "it exited with status %d",
                                         WEXITSTATUS(wstatus));
                }
                cs_error_setx(err, EIO, "%s failed to set up the sandbox's network%s%s%s", name,
                              said[0] ? " (" : "", said, said[0] ? ")" : "");
                if (strstr(said, "Couldn't open user namespace") ||
                    strstr(said, "Couldn't open network namespace"))
                        cs_error_hint(err,
                                      "%s runs as uid %u and must enter the sandbox's "
                                      "namespaces, which your user owns; a security module "
                                      "that confines it (an AppArmor or SELinux profile of "
                                      "pasta: look for a denial in the kernel log) also "
                                      "refuses this",
                                      name, (unsigned)geteuid());
                else if (strstr(said, "/dev/net/tun"))
                        diagnose_tun(err, strstr(said, "ermission") ? EACCES : ENODEV);
                return -EIO;
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
        free(h->host_addrs);
        h->host_addrs = NULL;
        h->n_host_addrs = 0;
}
