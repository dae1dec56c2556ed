/* A pasta session's rules "to ADDR unreachable" follow the host's addresses. pid 1 makes
 * them for the addresses the host had at launch (netns.c); an address the host gains later
 * would reach its services on 0.0.0.0 or [::] through pasta. The watcher runs beside the
 * session, outside its namespaces: subscribed to the host's address events, and holding a
 * netlink socket of the session's network namespace, opened by a short-lived child that
 * joins the session's user and network namespaces (csandbox made the user namespace, so it
 * may). The kernel checks CAP_NET_ADMIN in the namespace's owner for the socket's opener
 * and for the sender alike; the watcher, in the namespace that owns it, as the owner's
 * user, has it there. */
#include "internal.h"
#include "netlink.h"

#include "../common/cleanup.h"
#include "../common/error.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fib_rules.h>
#include <linux/rtnetlink.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* The session's own rules (priority NET_RULE_PRIORITY, unreachable, an address or a prefix)
 * into the list opaque. */
static void rule_each(const struct nlmsghdr *nh, void *opaque)
{
        struct net_addr_list *l = opaque;
        const struct fib_rule_hdr *frh = NLMSG_DATA(nh);
        int len = (int)(nh->nlmsg_len - NLMSG_LENGTH(sizeof(*frh)));
        size_t alen = frh->family == AF_INET ? 4 : 16;
        struct net_host_addr h = {.family = frh->family};
        bool ours_prio = false, has_dst = false;

        if (nh->nlmsg_type != RTM_NEWRULE || (frh->family != AF_INET && frh->family != AF_INET6) ||
            frh->action != FR_ACT_UNREACHABLE || frh->dst_len == 0 || frh->dst_len > alen * 8 ||
            frh->src_len)
                return;
        /* a whole address, or a local route's prefix (struct net_host_addr's prefix) */
        h.prefix = frh->dst_len == alen * 8 ? 0 : frh->dst_len;
        for (struct rtattr *rta = (struct rtattr *)((char *)frh + NLMSG_ALIGN(sizeof(*frh)));
             RTA_OK(rta, len); rta = RTA_NEXT(rta, len)) {
                if (rta->rta_type == FRA_PRIORITY && RTA_PAYLOAD(rta) == 4)
                        ours_prio = *(const uint32_t *)RTA_DATA(rta) == NET_RULE_PRIORITY;
                else if (rta->rta_type == FRA_DST && RTA_PAYLOAD(rta) == alen) {
                        memcpy(h.bytes, RTA_DATA(rta), alen);
                        has_dst = true;
                }
        }
        if (!ours_prio || !has_dst)
                return;
        net_addr_list_push(l, &h, false);
}

static bool addr_in(const struct net_host_addr *a, const struct net_host_addr *set, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (memcmp(&set[i], a, sizeof(*a)) == 0)
                        return true;
        return false;
}

/* The session's rules made equal to the host's addresses now: a rule for each address
 * without one, none for an address the host no longer has. false: something failed. */
static bool reconcile(const struct sandbox_spec *s, int sess)
{
        struct net_host_addr *host = NULL;
        struct net_addr_list rules = {0};
        size_t n_host = 0;
        uint32_t seq = 1;
        bool ok = false;

        if (host_addrs_dump(&host, &n_host) < 0 ||
            netlink_dump(sess, RTM_GETRULE, AF_UNSPEC, rule_each, &rules) < 0 || rules.failed)
                goto out;
        ok = true;
        for (size_t i = 0; i < n_host; i++)
                if (net_addr_needs_rule(s, &host[i]) && !addr_in(&host[i], rules.a, rules.n)) {
                        int r = net_rule_unreachable(sess, RTM_NEWRULE, &host[i], seq++);

                        ok = ok && (r == 0 || r == -EEXIST);
                }
        for (size_t i = 0; i < rules.n; i++)
                if (!addr_in(&rules.a[i], host, n_host)) {
                        int r = net_rule_unreachable(sess, RTM_DELRULE, &rules.a[i], seq++);

                        ok = ok && (r == 0 || r == -ENOENT);
                }
out:
        free(host);
        free(rules.a);
        return ok;
}

/* A netlink socket of the session's network namespace, from a child that joins it (a
 * process of several threads, or one sharing its root, could not join a user namespace;
 * this one only opens the socket and exits). The socket, or -errno. */
static int session_socket(int userns, int netns)
{
        _Alignas(struct cmsghdr) char cbuf[CMSG_SPACE(sizeof(int))];
        int sv[2], fd = -1, e = 0;
        char byte = 0;
        struct iovec iov = {&byte, 1};
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
        pid_t pid;
        ssize_t n;

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                return -errno;
        pid = fork();
        if (pid == 0) {
                close(sv[0]);
                if (setns(userns, CLONE_NEWUSER) < 0 || setns(netns, CLONE_NEWNET) < 0 ||
                    (fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE)) < 0) {
                        byte = (char)errno;
                } else {
                        struct cmsghdr *c;

                        msg.msg_control = cbuf;
                        msg.msg_controllen = sizeof(cbuf);
                        c = CMSG_FIRSTHDR(&msg);
                        c->cmsg_level = SOL_SOCKET;
                        c->cmsg_type = SCM_RIGHTS;
                        c->cmsg_len = CMSG_LEN(sizeof(int));
                        memcpy(CMSG_DATA(c), &fd, sizeof(int));
                }
                _exit(sendmsg(sv[1], &msg, MSG_NOSIGNAL) == 1 ? 0 : 1);
        }
        e = errno;
        close(sv[1]);
        if (pid < 0) {
                close(sv[0]);
                return -e;
        }
        msg.msg_control = cbuf;
        msg.msg_controllen = sizeof(cbuf);
        do
                n = recvmsg(sv[0], &msg, MSG_CMSG_CLOEXEC);
        while (n < 0 && errno == EINTR);
        e = n < 0 ? errno : byte ? byte : EIO;
        close(sv[0]);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
        if (n == 1 && !byte) {
                struct cmsghdr *c = CMSG_FIRSTHDR(&msg);

                if (c && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int))) {
                        memcpy(&fd, CMSG_DATA(c), sizeof(int));
                        return fd;
                }
        }
        return -e;
}

static __attribute__((noreturn)) void watch_main(const struct sandbox_spec *s, int sub, int userns,
                                                 int netns)
{
        sigset_t none;
        int sess, retry_ms = HOST_ADDRS_RETRY_MS;

        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        prctl(PR_SET_DUMPABLE, 0);
        /* its own name, for whoever looks at the host's processes */
        prctl(PR_SET_NAME, "csandbox-addrs");
        sess = session_socket(userns, netns);
        close(userns);
        close(netns);
        if (sess < 0) {
                dprintf(2,
                        "csandbox: addresses the host gains during this session stay "
                        "reachable from it: cannot join its network namespace (%s)\n",
                        strerror(-sess));
                _exit(1);
        }
        /* subscribed before this first look: nothing since is missed; what failed is
         * tried again, event or not, ever less often while it keeps failing */
        for (bool ok = reconcile(s, sess);;) {
                struct pollfd p = {sub, POLLIN, 0};
                int n = poll(&p, 1, ok ? -1 : retry_ms);

                if (n < 0 || (n > 0 && !host_addrs_changed(sub) && ok))
                        continue;
                ok = reconcile(s, sess);
                retry_ms = ok ? HOST_ADDRS_RETRY_MS
                              : (retry_ms < HOST_ADDRS_RETRY_MAX_MS / 2 ? retry_ms * 2
                                                                        : HOST_ADDRS_RETRY_MAX_MS);
        }
}

int net_watch_start(const struct sandbox_spec *s, pid_t child, struct net_watch *w,
                    struct cs_error *err)
{
        int sub, userns, netns, e;
        pid_t parent = getpid();
        char path[64];

        w->pid = -1;
        sub = host_addrs_subscribe();
        if (sub < 0)
                return cs_error_set(err, -sub, "follow the host's addresses (netlink)");
        snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)runner_pid_in_proc(child));
        userns = open(path, O_RDONLY | O_CLOEXEC);
        snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)runner_pid_in_proc(child));
        netns = userns < 0 ? -1 : open(path, O_RDONLY | O_CLOEXEC);
        if (netns < 0) {
                cs_error_set(err, errno,
                             "follow the host's addresses: open the sandbox's "
                             "namespaces");
                if (userns >= 0)
                        close(userns);
                close(sub);
                return -err->err;
        }
        fflush(NULL);
        w->pid = fork();
        e = errno;
        if (w->pid == 0) {
                int keep[3] = {sub, userns, netns}, from = 3;

                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != parent)
                        _exit(0);
                /* nothing of csandbox's but these: the session's pipes and terminal stay
                 * csandbox's */
                for (int i = 0; i < 3; i++)
                        for (int j = i + 1; j < 3; j++)
                                if (keep[j] < keep[i]) {
                                        int t = keep[i];
                                        keep[i] = keep[j];
                                        keep[j] = t;
                                }
                for (int i = 0; i < 3; i++) {
                        if (keep[i] > from)
                                close_range((unsigned)from, (unsigned)keep[i] - 1, 0);
                        from = keep[i] + 1;
                }
                close_range((unsigned)from, ~0u, 0);
                watch_main(s, sub, userns, netns);
        }
        close(sub);
        close(userns);
        close(netns);
        if (w->pid < 0)
                return cs_error_set(err, e, "follow the host's addresses: fork");
        return 0;
}

void net_watch_stop(struct net_watch *w)
{
        if (w->pid > 0) {
                kill(w->pid, SIGKILL);
                while (waitpid(w->pid, NULL, 0) < 0 && errno == EINTR)
                        ;
        }
        w->pid = -1;
}
