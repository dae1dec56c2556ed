/* SPEC_EGRESS_ALLOWLIST: the session reaches only the allowed hosts, every program alike.
 * This file: the session's side (routes, rules, the sockets handed to csandbox); the proxy
 * is egress_proxy.c, its resolver egress_dns.c.
 *
 * The design (the relay is the session's network; no pasta, no tun): in the session's
 * network namespace, before its capabilities are dropped, pid 1 gives loopback the addresses
 * EGRESS_ADDR4/6, routes every destination (IPv4 and IPv6) to loopback, and loads nftables
 * rules (one nf_tables netlink batch, nft_batch.c: nothing parsed, no library loaded): every
 * outbound TCP connection is redirected to EGRESS_PORT and every DNS query (UDP port 53) to
 * EGRESS_DNS_PORT; anything else that is not loopback (other UDP, QUIC, ICMP)
 * is dropped. It then binds the listening sockets there and hands them to csandbox over a
 * unix socket. csandbox's proxy (a process of its own outside the session's namespaces,
 * non-dumpable) accepts on them, reads the first bytes of each connection (a TLS
 * ClientHello's server name, an HTTP/1 Host), and connects out from the host's namespace
 * only when the name is allowed and the connection's original destination
 * (SO_ORIGINAL_DST) is an address its own resolver returned for that name, or an address
 * range allows it. It never decrypts. Its resolver answers allowed names through the host's
 * (getaddrinfo) and REFUSED for everything else, so DNS carries nothing out. */
#include "egress.h"
#include "egress_int.h"

#include "internal.h"
#include "netlink.h"
#include "nft_batch.h"

#include "../common/error.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* addr on lo (index 1), and a default route through lo with it as the source. */
static int lo_address_and_route(int nl, int family, const char *text)
{
        unsigned char a[16];
        size_t alen = family == AF_INET ? 4 : 16;
        uint32_t lo = 1;
        struct nl_msg m;
        struct rtmsg *rt;
        int r;

        inet_pton(family, text, a);
        r = netlink_addr_add(nl, (int)lo, family, a, (unsigned char)(alen * 8));
        if (r < 0)
                return r;
        rt = netlink_begin(&m, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL, sizeof(*rt));
        rt->rtm_family = (unsigned char)family;
        rt->rtm_table = RT_TABLE_MAIN;
        rt->rtm_protocol = RTPROT_BOOT;
        rt->rtm_scope = RT_SCOPE_LINK;
        rt->rtm_type = RTN_UNICAST;
        netlink_attr(&m, RTA_OIF, &lo, sizeof(lo));
        netlink_attr(&m, RTA_PREFSRC, a, alen);
        return netlink_request(nl, &m.nh);
}

/* The session's nftables rules (nft_batch.c), loaded while pid 1 has CAP_NET_ADMIN in the
 * session's namespace. An error names what the kernel refused; the launch then stops (never
 * an open network). */
static int nft_load(struct cs_error *err)
{
        int e = 0,
            r = nft_egress_load(EGRESS_PORT, EGRESS_DNS_PORT, EGRESS_ADDR4, EGRESS_ADDR6, &e);

        if (r == -ENOTSUP)
                return cs_error_setx(err, e,
                                     "egress: nftables cannot be used in the session's network "
                                     "namespace (a netfilter netlink socket: %s), so csandbox "
                                     "cannot keep the session to its network and does not start "
                                     "it; choose egress open or none",
                                     strerror(e));
        if (r < 0)
                return cs_error_setx(err, r == -EPERM ? e : EPERM,
                                     "egress: the kernel refused the session's nftables rules "
                                     "(%s), so csandbox cannot keep the session to its network "
                                     "and does not start it; choose egress open or none",
                                     r == -EPERM || r == -EIO ? strerror(e) : strerror(-r));
        return 0;
}

static int listen_on(int family, int type, const char *text, int port)
{
        union {
                struct sockaddr_in in;
                struct sockaddr_in6 in6;
        } a = {0};
        int fd = socket(family, type | SOCK_CLOEXEC, 0), one = 1;
        socklen_t len;

        if (fd < 0)
                return -errno;
        if (family == AF_INET) {
                a.in.sin_family = AF_INET;
                a.in.sin_port = htons((uint16_t)port);
                inet_pton(AF_INET, text, &a.in.sin_addr);
                len = sizeof(a.in);
        } else {
                a.in6.sin6_family = AF_INET6;
                a.in6.sin6_port = htons((uint16_t)port);
                inet_pton(AF_INET6, text, &a.in6.sin6_addr);
                setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
                len = sizeof(a.in6);
        }
        if (bind(fd, (struct sockaddr *)&a, len) < 0 ||
            (type == SOCK_STREAM && listen(fd, 128) < 0)) {
                int e = errno;

                close(fd);
                return -e;
        }
        return fd;
}

void egress_fds_msg(struct egress_fds_msg *m, const int *fds)
{
        struct cmsghdr *h;

        memset(m, 0, sizeof(*m));
        m->byte = 'e';
        m->iov.iov_base = &m->byte;
        m->iov.iov_len = 1;
        m->msg.msg_iov = &m->iov;
        m->msg.msg_iovlen = 1;
        m->msg.msg_control = m->cbuf;
        m->msg.msg_controllen = sizeof(m->cbuf);
        h = CMSG_FIRSTHDR(&m->msg);
        h->cmsg_level = SOL_SOCKET;
        h->cmsg_type = SCM_RIGHTS;
        h->cmsg_len = CMSG_LEN(sizeof(int) * EGRESS_FDS);
        if (fds)
                memcpy(CMSG_DATA(h), fds, sizeof(int) * EGRESS_FDS);
}

int egress_fds_take(struct egress_fds_msg *m, ssize_t n, int *fds)
{
        struct cmsghdr *h = n == 1 ? CMSG_FIRSTHDR(&m->msg) : NULL;

        if (!h || h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS ||
            h->cmsg_len != CMSG_LEN(sizeof(int) * EGRESS_FDS))
                return -1;
        memcpy(fds, CMSG_DATA(h), sizeof(int) * EGRESS_FDS);
        return 0;
}

int egress_ns_setup(int sock, struct cs_error *err)
{
        int nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
        int fds[EGRESS_FDS] = {-1, -1, -1, -1}, r;
        struct egress_fds_msg m;

        if (nl < 0)
                return cs_error_set(err, errno, "egress allowlist: netlink");
        r = lo_address_and_route(nl, AF_INET, EGRESS_ADDR4);
        if (r >= 0)
                r = lo_address_and_route(nl, AF_INET6, EGRESS_ADDR6);
        close(nl);
        if (r < 0)
                return cs_error_set(err, -r,
                                    "egress allowlist: route the session's network to its "
                                    "proxy (an address and a route on lo)");
        r = nft_load(err);
        if (r < 0)
                return r;
        fds[0] = listen_on(AF_INET, SOCK_STREAM, "127.0.0.1", EGRESS_PORT);
        fds[1] = listen_on(AF_INET6, SOCK_STREAM, "::1", EGRESS_PORT);
        fds[2] = listen_on(AF_INET, SOCK_DGRAM, "127.0.0.1", EGRESS_DNS_PORT);
        fds[3] = listen_on(AF_INET6, SOCK_DGRAM, "::1", EGRESS_DNS_PORT);
        for (int i = 0; i < EGRESS_FDS; i++)
                if (fds[i] < 0) {
                        r = fds[i];
                        for (int j = 0; j < EGRESS_FDS; j++)
                                if (fds[j] >= 0)
                                        close(fds[j]);
                        return cs_error_set(err, -r, "egress allowlist: the proxy's sockets");
                }
        egress_fds_msg(&m, fds);
        r = sendmsg(sock, &m.msg, MSG_NOSIGNAL) == 1 ? 0 : -errno;
        for (int i = 0; i < EGRESS_FDS; i++)
                close(fds[i]);
        close(sock);
        if (r < 0)
                return cs_error_set(err, -r, "egress allowlist: hand the sockets to csandbox");
        return 0;
}
