/* The sandbox's network interface, configured by csandbox rather than by pasta.
 *
 * pasta needs about 24 ms before it reports ready (its own start-up: socket pools, its
 * sandbox), and about 8 before it attaches to its tap device. csandbox decides the
 * configuration in the host's namespace before clone (what pasta would pick: the host's
 * default-route interface, its first address and gateway in each family) and hands the same
 * values to pasta explicitly. pid 1 makes the tap itself, persistent, before pasta starts
 * (netconf_tap_make; for `run`, the holder of its early network does), pasta, given the
 * same name, attaches to it, and pid 1 configures it and starts the payload without waiting
 * for pasta at all.
 *
 * What the payload sends first waits in the kernel's neighbour queue, not in the tap: a
 * packet to the gateway first needs its link-layer address, and until pasta answers the
 * ARP or neighbour solicitation the kernel holds the packet (unres_qlen) and solicits again
 * every retrans_time. Until pasta attaches the tap has no carrier and drops the
 * solicitations themselves, so they are repeated every 10 ms for as long as csandbox waits
 * for pasta at most. Attaching to the tap announces a link change while the carrier is
 * still off, which by default flushes the interface's neighbours, queued packets with them
 * (a lost SYN costs a second); arp_evict_nocarrier and ndisc_evict_nocarrier (Linux 5.16
 * and 5.18) turned off keep them. On a kernel without those, or where /proc/sys is read-only
 * (container engines mount it so), pid 1 waits for pasta's tap as before; should setting them
 * fail all the same, it waits for pasta to attach (the tap's carrier) before the payload
 * starts. When the host's routes do not fit this (no gateway, a multipath default), pasta
 * configures the namespace itself and the payload waits for it. */
#include "internal.h"
#include "netlink.h"

#include "../common/cleanup.h"
#include "../common/error.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define NET_TAP_MTU 65520
/* linux/if.h's, which net/if.h leaves out */
#ifndef IFF_LOWER_UP
#define IFF_LOWER_UP 0x10000
#endif
/* Solicitations every 10 ms (the kernel's shortest) until pasta answers, for as long as
 * csandbox waits for pasta at most; once resolved, a gateway that stops answering is
 * given about as long as by default (3 s) before it counts as unreachable. */
#define NET_NEIGH_RETRANS_MS    10
#define NET_NEIGH_MCAST_SOLICIT (NET_HELPER_TIMEOUT_MS / NET_NEIGH_RETRANS_MS)
#define NET_NEIGH_UCAST_SOLICIT 300

void *netlink_begin(struct nl_msg *m, unsigned short type, unsigned short flags, size_t hdr)
{
        memset(m, 0, sizeof(*m));
        m->nh.nlmsg_len = (unsigned)NLMSG_LENGTH(hdr);
        m->nh.nlmsg_type = type;
        m->nh.nlmsg_flags = (unsigned short)(NLM_F_REQUEST | flags);
        return NLMSG_DATA(&m->nh);
}

void netlink_attr(struct nl_msg *m, unsigned short type, const void *data, size_t len)
{
        struct rtattr *rta = (struct rtattr *)(m->raw + NLMSG_ALIGN(m->nh.nlmsg_len));

        rta->rta_type = type;
        rta->rta_len = (unsigned short)RTA_LENGTH(len);
        memcpy(RTA_DATA(rta), data, len);
        m->nh.nlmsg_len = NLMSG_ALIGN(m->nh.nlmsg_len) + (unsigned)RTA_ALIGN(rta->rta_len);
}

int netlink_request(int nl, struct nlmsghdr *req)
{
        char ack[NLMSG_SPACE(sizeof(struct nlmsgerr)) + 256];
        ssize_t n;

        req->nlmsg_flags |= NLM_F_ACK;
        if (send(nl, req, req->nlmsg_len, 0) < 0)
                return -errno;
        do
                n = recv(nl, ack, sizeof(ack), 0);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        if ((size_t)n < NLMSG_SPACE(sizeof(struct nlmsgerr)) ||
            ((struct nlmsghdr *)ack)->nlmsg_type != NLMSG_ERROR)
                return -EPROTO;
        return ((struct nlmsgerr *)NLMSG_DATA((struct nlmsghdr *)ack))->error;
}

int netlink_dump(int nl, unsigned short type, unsigned char family,
                 void (*fn)(const struct nlmsghdr *nh, void *opaque), void *opaque)
{
        struct nl_msg m;
        struct rtgenmsg *g = netlink_begin(&m, type, NLM_F_DUMP, sizeof(*g));
        _Alignas(struct nlmsghdr) char buf[16384];

        g->rtgen_family = family;
        if (send(nl, &m, m.nh.nlmsg_len, 0) < 0)
                return -errno;
        for (;;) {
                ssize_t n = recv(nl, buf, sizeof(buf), 0);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return n < 0 ? -errno : -EPROTO;
                for (struct nlmsghdr *nh = (struct nlmsghdr *)buf; NLMSG_OK(nh, (size_t)n);
                     nh = NLMSG_NEXT(nh, n)) {
                        if (nh->nlmsg_type == NLMSG_DONE)
                                return 0;
                        if (nh->nlmsg_type == NLMSG_ERROR)
                                return -EPROTO;
                        fn(nh, opaque);
                }
        }
}

/* The host's default routes, per family: the first with the lowest metric. A default
 * route without a single gateway and interface makes the family unusable here. */
struct route_pick {
        int oif;
        uint32_t metric;
        unsigned char gw[16];
        bool seen, found, odd;
};

static void route_each(const struct nlmsghdr *nh, void *opaque)
{
        struct route_pick *p = opaque;
        const struct rtmsg *rt = NLMSG_DATA(nh);
        int len = (int)RTM_PAYLOAD(nh);
        uint32_t table = rt->rtm_table, metric = 0;
        const void *gw = NULL;
        int oif = 0;

        if (nh->nlmsg_type != RTM_NEWROUTE || rt->rtm_dst_len != 0 || rt->rtm_type != RTN_UNICAST)
                return;
        for (const struct rtattr *a = RTM_RTA(rt); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
                if (a->rta_type == RTA_TABLE && RTA_PAYLOAD(a) == 4)
                        memcpy(&table, RTA_DATA(a), 4);
                else if (a->rta_type == RTA_GATEWAY)
                        gw = RTA_DATA(a);
                else if (a->rta_type == RTA_OIF && RTA_PAYLOAD(a) == 4)
                        memcpy(&oif, RTA_DATA(a), 4);
                else if (a->rta_type == RTA_PRIORITY && RTA_PAYLOAD(a) == 4)
                        memcpy(&metric, RTA_DATA(a), 4);
        }
        if (table != RT_TABLE_MAIN || (p->seen && metric >= p->metric))
                return;
        p->seen = true;
        p->metric = metric;
        p->found = gw && oif > 0;
        p->odd = !p->found;
        if (!p->found)
                return;
        p->oif = oif;
        memcpy(p->gw, gw, rt->rtm_family == AF_INET ? 4 : 16);
}

struct addr_pick {
        int index;
        unsigned char addr[16];
        unsigned char prefix;
        bool found;
};

static void addr_each(const struct nlmsghdr *nh, void *opaque)
{
        struct addr_pick *p = opaque;
        const struct ifaddrmsg *ifa = NLMSG_DATA(nh);
        int len = (int)IFA_PAYLOAD(nh);
        const void *addr = NULL, *local = NULL;
        uint32_t flags = ifa->ifa_flags;

        if (p->found || nh->nlmsg_type != RTM_NEWADDR || (int)ifa->ifa_index != p->index ||
            ifa->ifa_scope != RT_SCOPE_UNIVERSE)
                return;
        for (const struct rtattr *a = IFA_RTA(ifa); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
                if (a->rta_type == IFA_ADDRESS)
                        addr = RTA_DATA(a);
                else if (a->rta_type == IFA_LOCAL)
                        local = RTA_DATA(a);
                else if (a->rta_type == IFA_FLAGS && RTA_PAYLOAD(a) == 4)
                        memcpy(&flags, RTA_DATA(a), 4);
        }
        if (flags & (IFA_F_TENTATIVE | IFA_F_DADFAILED | IFA_F_DEPRECATED))
                return;
        if (local) /* point-to-point: IFA_ADDRESS is the peer */
                addr = local;
        if (!addr)
                return;
        memcpy(p->addr, addr, ifa->ifa_family == AF_INET ? 4 : 16);
        p->prefix = ifa->ifa_prefixlen;
        p->found = true;
}

/* 1: the family has a usable default route (filled in); 0: none at all; -1: one that does
 * not fit (pasta must then decide). */
static int family_pick(int nl, unsigned char family, int *ret_oif, unsigned char *ret_addr,
                       unsigned char *ret_prefix, unsigned char *ret_gw)
{
        struct route_pick rp = {0};
        struct addr_pick ap = {0};

        /* A family the host cannot dump (IPv6 disabled) has no route to take. */
        if (netlink_dump(nl, RTM_GETROUTE, family, route_each, &rp) < 0)
                return 0;
        if (rp.odd)
                return -1;
        if (!rp.found)
                return 0;
        ap.index = rp.oif;
        if (netlink_dump(nl, RTM_GETADDR, family, addr_each, &ap) < 0 || !ap.found)
                return -1;
        *ret_oif = rp.oif;
        memcpy(ret_addr, ap.addr, family == AF_INET ? 4 : 16);
        memcpy(ret_gw, rp.gw, family == AF_INET ? 4 : 16);
        *ret_prefix = ap.prefix;
        return 1;
}

void netconf_host_pick(const struct sandbox_spec *s, struct net_tap_conf *ret)
{
        _cleanup_close_ int nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
        int oif4 = 0, oif6 = 0, r4, r6;

        memset(ret, 0, sizeof(*ret));
        if (nl < 0)
                return;
        r4 = family_pick(nl, AF_INET, &oif4, ret->addr4, &ret->prefix4, ret->gw4);
        r6 = family_pick(nl, AF_INET6, &oif6, ret->addr6, &ret->prefix6, ret->gw6);
        if (r4 < 0 || r6 < 0 || (r4 == 0 && r6 == 0))
                return;
        if (!if_indextoname((unsigned)(r4 ? oif4 : oif6), ret->ifname))
                return;
        ret->has4 = r4 == 1;
        ret->has6 = r6 == 1;
        /* The gateway is what maps to the host's loopback when that is asked for. */
        if (ret->has4 && s->map_host_loopback)
                inet_pton(AF_INET, SPEC_NET_HOST_LOOPBACK, ret->gw4);
        ret->early = true;
}

int netconf_tap_watch(struct cs_error *err)
{
        struct sockaddr_nl sa = {.nl_family = AF_NETLINK, .nl_groups = RTMGRP_LINK};
        int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE);

        if (fd < 0)
                return cs_error_set(err, errno, "watch for the sandbox's network interface");
        if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                cs_error_set(err, errno, "watch for the sandbox's network interface");
                close(fd);
                return -err->err;
        }
        return fd;
}

static long ms_since(const struct timespec *t0)
{
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

/* Until the next link notification on watch: 0, or -ETIMEDOUT once NET_HELPER_TIMEOUT_MS
 * have passed since t0. */
static int link_event_wait(int watch, const struct timespec *t0)
{
        struct pollfd p = {.fd = watch, .events = POLLIN};
        char buf[8192];
        long left = NET_HELPER_TIMEOUT_MS - ms_since(t0);

        if (left <= 0 || (poll(&p, 1, (int)left) < 0 && errno != EINTR))
                return -ETIMEDOUT;
        while (recv(watch, buf, sizeof(buf), MSG_DONTWAIT) > 0)
                ;
        return 0;
}

/* The tap's index once pasta has made it (a link notification wakes us). */
static int tap_wait(const struct net_tap_conf *c, int watch, struct cs_error *err)
{
        struct timespec t0;

        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (;;) {
                unsigned idx = if_nametoindex(c->ifname);

                if (idx)
                        return (int)idx;
                if (link_event_wait(watch, &t0) < 0)
                        return cs_error_setx(err, ETIMEDOUT,
                                             "pasta did not create the sandbox's network "
                                             "interface %s within %d s",
                                             c->ifname, NET_HELPER_TIMEOUT_MS / 1000);
        }
}

/* A sysctl pid 1 can set: the kernel has it, and /proc/sys is not mounted read-only (as
 * container engines mount it). */
static bool sysctl_settable(const char *path)
{
        struct statvfs sv;

        return statvfs(path, &sv) == 0 && !(sv.f_flag & ST_RDONLY);
}

bool netconf_tap_handoff(const struct net_tap_conf *c)
{
        return sysctl_settable("/proc/sys/net/ipv4/conf/default/arp_evict_nocarrier") &&
               (!c->has6 ||
                sysctl_settable("/proc/sys/net/ipv6/conf/default/ndisc_evict_nocarrier"));
}

int netconf_tap_make(const struct net_tap_conf *c)
{
        _cleanup_close_ int fd = -1;
        struct ifreq ifr;

        /* Already there: made by the holder of `run`'s early network, which pasta may have
         * attached to by now; never attach to it (pasta would find it busy). */
        if (if_nametoindex(c->ifname))
                return 0;
        fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        memset(&ifr, 0, sizeof(ifr));
        snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", c->ifname);
        /* What pasta asks for: a tap without packet information, one queue. */
        ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
        if (ioctl(fd, TUNSETIFF, &ifr) < 0 || ioctl(fd, TUNSETPERSIST, 1L) < 0)
                return -errno;
        return 0;
}

/* One of the interface's sysctls, in this process's network namespace. */
static int sysctl_set(const char *family, const char *dir, const char *ifname, const char *name,
                      int value)
{
        char path[128], text[16];
        _cleanup_close_ int fd = -1;
        int len;

        snprintf(path, sizeof(path), "/proc/sys/net/%s/%s/%s/%s", family, dir, ifname, name);
        len = snprintf(text, sizeof(text), "%d", value);
        fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, text, (size_t)len) != len)
                return -errno;
        return 0;
}

/* The neighbour queue holds what the payload sends until pasta answers (see the top). */
static int neigh_hold(const struct net_tap_conf *c, const char **ret_what)
{
        static const char *const fams[] = {"ipv4", "ipv6"};
        int r = 0;

        for (size_t i = 0; i < 2 && r >= 0; i++) {
                if (i == 1 && !c->has6)
                        break;
                *ret_what = i == 0 ? "arp_evict_nocarrier" : "ndisc_evict_nocarrier";
                r = sysctl_set(fams[i], "conf", c->ifname, *ret_what, 0);
                if (r >= 0) {
                        *ret_what = "retrans_time_ms";
                        r = sysctl_set(fams[i], "neigh", c->ifname, *ret_what,
                                       NET_NEIGH_RETRANS_MS);
                }
                if (r >= 0) {
                        *ret_what = "mcast_solicit";
                        r = sysctl_set(fams[i], "neigh", c->ifname, *ret_what,
                                       NET_NEIGH_MCAST_SOLICIT);
                }
                if (r >= 0) {
                        *ret_what = "ucast_solicit";
                        r = sysctl_set(fams[i], "neigh", c->ifname, *ret_what,
                                       NET_NEIGH_UCAST_SOLICIT);
                }
        }
        return r;
}

int netlink_addr_add(int nl, int idx, int family, const unsigned char *addr, unsigned char prefix)
{
        struct nl_msg m;
        struct ifaddrmsg *ifa =
            netlink_begin(&m, RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL, sizeof(*ifa));
        size_t alen = family == AF_INET ? 4 : 16;

        ifa->ifa_family = (unsigned char)family;
        ifa->ifa_prefixlen = prefix;
        ifa->ifa_scope = RT_SCOPE_UNIVERSE;
        ifa->ifa_index = (unsigned)idx;
        netlink_attr(&m, IFA_LOCAL, addr, alen);
        netlink_attr(&m, IFA_ADDRESS, addr, alen);
        if (family == AF_INET6) {
                /* No duplicate detection: the address is usable at once, as pasta's is. */
                uint32_t flags = IFA_F_NODAD;

                ifa->ifa_flags = IFA_F_NODAD;
                netlink_attr(&m, IFA_FLAGS, &flags, sizeof(flags));
        }
        return netlink_request(nl, &m.nh);
}

static int default_route_add(int nl, int idx, int family, const unsigned char *gw)
{
        struct nl_msg m;
        struct rtmsg *rt = netlink_begin(&m, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL, sizeof(*rt));
        uint32_t oif = (uint32_t)idx;

        rt->rtm_family = (unsigned char)family;
        rt->rtm_table = RT_TABLE_MAIN;
        rt->rtm_protocol = RTPROT_BOOT;
        rt->rtm_scope = RT_SCOPE_UNIVERSE;
        rt->rtm_type = RTN_UNICAST;
        /* The gateway need not be in the address's prefix (169.254.1.2 when the host's
         * loopback is mapped, a /32 address): pasta answers for every address on the link. */
        rt->rtm_flags = RTNH_F_ONLINK;
        netlink_attr(&m, RTA_GATEWAY, gw, family == AF_INET ? 4 : 16);
        netlink_attr(&m, RTA_OIF, &oif, sizeof(oif));
        return netlink_request(nl, &m.nh);
}

static int link_up(int nl, int idx)
{
        struct nl_msg m;
        struct ifinfomsg *ifi = netlink_begin(&m, RTM_NEWLINK, 0, sizeof(*ifi));
        uint32_t mtu = NET_TAP_MTU;

        ifi->ifi_family = AF_UNSPEC;
        ifi->ifi_index = idx;
        ifi->ifi_flags = IFF_UP;
        ifi->ifi_change = IFF_UP;
        netlink_attr(&m, IFLA_MTU, &mtu, sizeof(mtu));
        return netlink_request(nl, &m.nh);
}

/* Whether interface idx has a carrier now (IFF_LOWER_UP, which the kernel computes when
 * asked, unlike IFF_RUNNING, which follows the carrier only after a delay): 1, 0 or -errno. */
static int link_lower_up(int nl, int idx)
{
        struct nl_msg m;
        struct ifinfomsg *ifi = netlink_begin(&m, RTM_GETLINK, 0, sizeof(*ifi));
        _Alignas(struct nlmsghdr) char buf[8192];
        ssize_t n;

        ifi->ifi_family = AF_UNSPEC;
        ifi->ifi_index = idx;
        if (send(nl, &m, m.nh.nlmsg_len, 0) < 0)
                return -errno;
        do
                n = recv(nl, buf, sizeof(buf), 0);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        for (struct nlmsghdr *nh = (struct nlmsghdr *)buf; NLMSG_OK(nh, (size_t)n);
             nh = NLMSG_NEXT(nh, n)) {
                if (nh->nlmsg_type == NLMSG_ERROR)
                        return ((struct nlmsgerr *)NLMSG_DATA(nh))->error ?: -EPROTO;
                if (nh->nlmsg_type == RTM_NEWLINK &&
                    nh->nlmsg_len >= NLMSG_LENGTH(sizeof(struct ifinfomsg)))
                        return (((struct ifinfomsg *)NLMSG_DATA(nh))->ifi_flags & IFF_LOWER_UP) !=
                               0;
        }
        return -EPROTO;
}

/* Until pasta has attached to the tap (it has a carrier then): where the neighbour queue
 * cannot be made to hold the payload's first packets, the payload waits for pasta. */
static int carrier_wait(const struct net_tap_conf *c, int nl, int idx, struct cs_error *err)
{
        _cleanup_close_ int watch = netconf_tap_watch(err);
        struct timespec t0;

        if (watch < 0)
                return watch;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (;;) {
                int up = link_lower_up(nl, idx);

                if (up < 0)
                        return cs_error_set(err, -up, "watch the sandbox's network interface %s",
                                            c->ifname);
                if (up)
                        return 0;
                if (link_event_wait(watch, &t0) < 0)
                        return cs_error_setx(err, ETIMEDOUT,
                                             "pasta did not attach to the sandbox's network "
                                             "interface %s within %d s",
                                             c->ifname, NET_HELPER_TIMEOUT_MS / 1000);
        }
}

int netconf_tap_up(const struct net_tap_conf *c, int watch, struct cs_error *err)
{
        _cleanup_close_ int nl = -1;
        const char *step, *what = "";
        bool held = true;
        int idx, r;

        if (watch >= 0) {
                idx = tap_wait(c, watch, err);
                if (idx < 0)
                        return idx;
        } else {
                idx = (int)if_nametoindex(c->ifname);
                if (idx == 0)
                        return cs_error_set(
                            err, errno, "configure the sandbox's network interface %s", c->ifname);
                /* Refused (a /proc/sys read-only after all): the payload waits for pasta
                 * below instead, so that nothing it sends first is flushed. */
                held = neigh_hold(c, &what) >= 0;
        }
        nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
        if (nl < 0)
                return cs_error_set(err, errno, "configure the sandbox's network: netlink");
        step = "bring it up";
        r = link_up(nl, idx);
        if (r >= 0 && c->has4) {
                step = "add its IPv4 address";
                r = netlink_addr_add(nl, idx, AF_INET, c->addr4, c->prefix4);
        }
        if (r >= 0 && c->has6) {
                step = "add its IPv6 address";
                r = netlink_addr_add(nl, idx, AF_INET6, c->addr6, c->prefix6);
        }
        if (r >= 0 && c->has4) {
                step = "add its IPv4 default route";
                r = default_route_add(nl, idx, AF_INET, c->gw4);
        }
        if (r >= 0 && c->has6) {
                step = "add its IPv6 default route";
                r = default_route_add(nl, idx, AF_INET6, c->gw6);
        }
        if (r < 0)
                return cs_error_set(err, -r, "configure the sandbox's network interface %s: %s",
                                    c->ifname, step);
        return held ? 0 : carrier_wait(c, nl, idx, err);
}

int netconf_pasta_args(const struct net_tap_conf *c, char **argv, size_t n,
                       char text[5][INET6_ADDRSTRLEN])
{
        argv[n++] = "-I";
        argv[n++] = (char *)c->ifname;
        if (c->has4) {
                inet_ntop(AF_INET, c->addr4, text[0], INET6_ADDRSTRLEN);
                snprintf(text[1], INET6_ADDRSTRLEN, "%u", c->prefix4);
                inet_ntop(AF_INET, c->gw4, text[2], INET6_ADDRSTRLEN);
                argv[n++] = "-a";
                argv[n++] = text[0];
                argv[n++] = "-n";
                argv[n++] = text[1];
                argv[n++] = "-g";
                argv[n++] = text[2];
        } else {
                argv[n++] = "-6";
        }
        if (c->has6) {
                inet_ntop(AF_INET6, c->addr6, text[3], INET6_ADDRSTRLEN);
                inet_ntop(AF_INET6, c->gw6, text[4], INET6_ADDRSTRLEN);
                argv[n++] = "-a";
                argv[n++] = text[3];
                argv[n++] = "-g";
                argv[n++] = text[4];
        } else {
                argv[n++] = "-4";
        }
        return (int)n;
}
