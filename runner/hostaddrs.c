/* The host's own addresses, read from the kernel and followed while a session runs: an
 * address the host gains later (a VPN, a container bridge, an IPv6 privacy address) is the
 * host's as much as those it had at launch, and its services on 0.0.0.0 or [::] answer
 * whoever can reach it. */
#include "netlink.h"
#include "runner.h"

#include "../common/cleanup.h"

#include <errno.h>
#include <linux/rtnetlink.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int host_addrs_subscribe(void)
{
        struct sockaddr_nl sa = {.nl_family = AF_NETLINK,
                                 .nl_groups = RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR |
                                              RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_ROUTE};
        int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE);

        if (fd < 0)
                return -errno;
        if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                int e = errno;

                close(fd);
                return -e;
        }
        return fd;
}

void net_addr_list_push(struct net_addr_list *l, const struct net_host_addr *h, bool unique)
{
        for (size_t i = 0; unique && i < l->n; i++)
                if (memcmp(&l->a[i], h, sizeof(*h)) == 0)
                        return;
        if (l->n == l->cap) {
                size_t cap = l->cap ? l->cap * 2 : 16;
                struct net_host_addr *a = realloc(l->a, cap * sizeof(*a));

                if (!a) {
                        l->failed = true;
                        return;
                }
                l->a = a;
                l->cap = cap;
        }
        l->a[l->n++] = *h;
}

static void addr_each(const struct nlmsghdr *nh, void *opaque)
{
        struct net_addr_list *l = opaque;
        const struct ifaddrmsg *ifa = NLMSG_DATA(nh);
        const unsigned char *local = NULL, *address = NULL;
        struct net_host_addr h = {0};
        int len = (int)IFA_PAYLOAD(nh);

        if (nh->nlmsg_type != RTM_NEWADDR ||
            (ifa->ifa_family != AF_INET && ifa->ifa_family != AF_INET6))
                return;
        for (struct rtattr *rta = IFA_RTA(ifa); RTA_OK(rta, len); rta = RTA_NEXT(rta, len)) {
                if (RTA_PAYLOAD(rta) != (ifa->ifa_family == AF_INET ? 4u : 16u))
                        continue;
                if (rta->rta_type == IFA_LOCAL)
                        local = RTA_DATA(rta);
                else if (rta->rta_type == IFA_ADDRESS)
                        address = RTA_DATA(rta);
        }
        /* a point-to-point link's IFA_ADDRESS is its peer's; IFA_LOCAL is ours */
        if (!local)
                local = address;
        if (!local)
                return;
        h.family = ifa->ifa_family;
        memcpy(h.bytes, local, h.family == AF_INET ? 4 : 16);
        net_addr_list_push(l, &h, true);
}

bool net_host_addr_holds(const struct net_host_addr *h, int family, const unsigned char *a)
{
        unsigned full = family == AF_INET ? 32 : 128, bits = h->prefix ? h->prefix : full;
        unsigned whole = bits / 8, rest = bits % 8;

        if (h->family != family || bits > full || memcmp(h->bytes, a, whole) != 0)
                return false;
        return !rest || ((h->bytes[whole] ^ a[whole]) & (0xff << (8 - rest)) & 0xff) == 0;
}

/* A local route wider than one address (`ip route add local 10.88.0.0/16 dev lo`, AnyIP):
 * the host answers every address in it as its own. Loopback's own prefix aside (127/8 is
 * refused anyway, and a pasta session's loopback rule would cover the session's own). */
static void route_each(const struct nlmsghdr *nh, void *opaque)
{
        struct net_addr_list *l = opaque;
        const struct rtmsg *rt = NLMSG_DATA(nh);
        int len = (int)RTM_PAYLOAD(nh);
        unsigned full = rt->rtm_family == AF_INET ? 32 : 128;
        uint32_t table = rt->rtm_table;
        struct net_host_addr h = {.family = rt->rtm_family, .prefix = rt->rtm_dst_len};
        bool has_dst = false;

        if (nh->nlmsg_type != RTM_NEWROUTE || rt->rtm_type != RTN_LOCAL ||
            (rt->rtm_family != AF_INET && rt->rtm_family != AF_INET6) || rt->rtm_dst_len >= full ||
            rt->rtm_dst_len == 0)
                return;
        for (struct rtattr *rta = RTM_RTA(rt); RTA_OK(rta, len); rta = RTA_NEXT(rta, len)) {
                if (rta->rta_type == RTA_TABLE && RTA_PAYLOAD(rta) == 4)
                        table = *(const uint32_t *)RTA_DATA(rta);
                else if (rta->rta_type == RTA_DST && RTA_PAYLOAD(rta) == full / 8) {
                        memcpy(h.bytes, RTA_DATA(rta), full / 8);
                        has_dst = true;
                }
        }
        if (!has_dst || table != RT_TABLE_LOCAL || (h.family == AF_INET && h.bytes[0] == 127))
                return;
        net_addr_list_push(l, &h, true);
}

int host_addrs_dump(struct net_host_addr **ret, size_t *ret_n)
{
        _cleanup_close_ int nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
        struct net_addr_list l = {0};
        int r;

        if (nl < 0)
                return -errno;
        r = netlink_dump(nl, RTM_GETADDR, AF_UNSPEC, addr_each, &l);
        if (r >= 0)
                r = netlink_dump(nl, RTM_GETROUTE, AF_UNSPEC, route_each, &l);
        if (r >= 0 && l.failed)
                r = -ENOMEM;
        if (r < 0) {
                free(l.a);
                return r;
        }
        *ret = l.a;
        *ret_n = l.n;
        return 0;
}

bool host_addrs_changed(int sub)
{
        _Alignas(struct nlmsghdr) char buf[8192];
        bool changed = false;

        for (;;) {
                ssize_t n = recv(sub, buf, sizeof(buf), 0);

                if (n < 0 && errno == EINTR)
                        continue;
                /* the socket's buffer overflowed: events were lost */
                if (n < 0 && errno == ENOBUFS) {
                        changed = true;
                        continue;
                }
                if (n < 0)
                        return changed;
                if (n == 0)
                        return changed;
                for (struct nlmsghdr *nh = (struct nlmsghdr *)buf; NLMSG_OK(nh, (size_t)n);
                     nh = NLMSG_NEXT(nh, n))
                        if (nh->nlmsg_type == RTM_NEWADDR || nh->nlmsg_type == RTM_DELADDR ||
                            nh->nlmsg_type == RTM_NEWROUTE || nh->nlmsg_type == RTM_DELROUTE)
                                changed = true;
        }
}
