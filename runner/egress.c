/* SPEC_EGRESS_ALLOWLIST: the session reaches only the allowed hosts, every program alike.
 *
 * The design (the relay is the session's network; no pasta, no tun): in the session's
 * network namespace, before its capabilities are dropped, pid 1 gives loopback the addresses
 * EGRESS_ADDR4/6, routes every destination (IPv4 and IPv6) to loopback, and loads nftables
 * rules: every outbound TCP connection is redirected to EGRESS_PORT and every DNS query (UDP
 * port 53) to EGRESS_DNS_PORT; anything else that is not loopback (other UDP, QUIC, ICMP)
 * is dropped. It then binds the listening sockets there and hands them to csandbox over a
 * unix socket. csandbox's proxy (a process of its own outside the session's namespaces,
 * non-dumpable) accepts on them, reads the first bytes of each connection (a TLS
 * ClientHello's server name, an HTTP/1 Host), and connects out from the host's namespace
 * only when the name is allowed and the connection's original destination
 * (SO_ORIGINAL_DST) is an address its own resolver returned for that name, or an address
 * range allows it. It never decrypts. Its resolver answers allowed names through the host's
 * (getaddrinfo) and REFUSED for everything else, so DNS carries nothing out. */
#include "egress.h"

#include "runner.h"

#include "../common/fileio.h"
#include "../common/egress_wire.h"
#include "../common/error.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <linux/netfilter_ipv4.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netdb.h>
#include <nftables/libnftables.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef IP6T_SO_ORIGINAL_DST
#define IP6T_SO_ORIGINAL_DST 80
#endif

#define EGRESS_ADDR4      SPEC_EGRESS_ADDR4 /* the session's own address (its source) */
#define EGRESS_ADDR6      SPEC_EGRESS_ADDR6
#define EGRESS_PORT       SPEC_EGRESS_PORT
#define EGRESS_DNS_PORT   SPEC_EGRESS_DNS_PORT
#define EGRESS_STR_(x)    #x
#define EGRESS_STR(x)     EGRESS_STR_(x)
#define EGRESS_MAX_CONNS  256   /* at once; more are refused */
#define EGRESS_FIRST_WAIT 10    /* seconds for a connection's first bytes */
#define EGRESS_SEEN_MAX   1024  /* name-address pairs the resolver remembers */
#define EGRESS_LOG_MAX    10000 /* lines; further refusals are only counted */
#define EGRESS_STACK      (128 << 10)
#define EGRESS_RELAY_BUF  16384

/* ---- in the session's namespace ---------------------------------------------------- */

/* clang-format off */
static const char egress_rules[] =
    "table inet csandbox_egress {\n"
    " chain nat_out {\n"
    "  type nat hook output priority -100; policy accept;\n"
    "  ip daddr 127.0.0.0/8 return\n"
    "  ip6 daddr ::1 return\n"
    "  meta l4proto tcp redirect to :" EGRESS_STR(EGRESS_PORT) "\n"
    "  udp dport 53 redirect to :" EGRESS_STR(EGRESS_DNS_PORT) "\n"
    " }\n"
    " chain filter_out {\n"
    "  type filter hook output priority 0; policy drop;\n"
    "  ct state established,related accept\n"
    "  ip daddr { 127.0.0.0/8, " EGRESS_ADDR4 " } accept\n"
    "  ip6 daddr { ::1, " EGRESS_ADDR6 " } accept\n"
    " }\n"
    "}\n";
/* clang-format on */

struct nl_req {
        union {
                struct nlmsghdr nh;
                char raw[256];
        };
};

static void *nl_start(struct nl_req *m, unsigned short type, size_t hdr)
{
        memset(m, 0, sizeof(*m));
        m->nh.nlmsg_len = (unsigned)NLMSG_LENGTH(hdr);
        m->nh.nlmsg_type = type;
        m->nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL;
        return NLMSG_DATA(&m->nh);
}

static void nl_put(struct nl_req *m, unsigned short type, const void *data, size_t len)
{
        struct rtattr *rta = (struct rtattr *)(m->raw + NLMSG_ALIGN(m->nh.nlmsg_len));

        rta->rta_type = type;
        rta->rta_len = (unsigned short)RTA_LENGTH(len);
        memcpy(RTA_DATA(rta), data, len);
        m->nh.nlmsg_len = NLMSG_ALIGN(m->nh.nlmsg_len) + (unsigned)RTA_ALIGN(rta->rta_len);
}

/* addr on lo (index 1), and a default route through lo with it as the source. */
static int lo_address_and_route(int nl, int family, const char *text)
{
        unsigned char a[16];
        size_t alen = family == AF_INET ? 4 : 16;
        uint32_t lo = 1, flags = IFA_F_NODAD;
        struct nl_req m;
        struct ifaddrmsg *ifa;
        struct rtmsg *rt;
        int r;

        inet_pton(family, text, a);
        ifa = nl_start(&m, RTM_NEWADDR, sizeof(*ifa));
        ifa->ifa_family = (unsigned char)family;
        ifa->ifa_prefixlen = (unsigned char)(alen * 8);
        ifa->ifa_scope = RT_SCOPE_UNIVERSE;
        ifa->ifa_index = lo;
        nl_put(&m, IFA_LOCAL, a, alen);
        nl_put(&m, IFA_ADDRESS, a, alen);
        if (family == AF_INET6) {
                ifa->ifa_flags = IFA_F_NODAD;
                nl_put(&m, IFA_FLAGS, &flags, sizeof(flags));
        }
        r = netlink_request(nl, &m.nh);
        if (r < 0)
                return r;
        rt = nl_start(&m, RTM_NEWROUTE, sizeof(*rt));
        rt->rtm_family = (unsigned char)family;
        rt->rtm_table = RT_TABLE_MAIN;
        rt->rtm_protocol = RTPROT_BOOT;
        rt->rtm_scope = RT_SCOPE_LINK;
        rt->rtm_type = RTN_UNICAST;
        nl_put(&m, RTA_OIF, &lo, sizeof(lo));
        nl_put(&m, RTA_PREFSRC, a, alen);
        return netlink_request(nl, &m.nh);
}

/* libnftables, opened only by the sessions that need it (every other launch stays as
 * light as before). */
static int nft_load(struct cs_error *err)
{
        __typeof__(nft_ctx_new) *ctx_new;
        __typeof__(nft_ctx_buffer_error) *buffer_error;
        __typeof__(nft_run_cmd_from_buffer) *run;
        __typeof__(nft_ctx_get_error_buffer) *error_text;
        __typeof__(nft_ctx_free) *ctx_free;
        void *lib = dlopen("libnftables.so.1", RTLD_NOW | RTLD_LOCAL);
        struct nft_ctx *ctx;
        int r, probe;

        /* libnftables exits the process when it cannot open its netlink socket: find out
         * first, and say why. */
        probe = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
        if (probe < 0) {
                int e = errno;

                return cs_error_setx(err, e,
                                     "egress allowlist: nftables cannot be used in the "
                                     "session's network namespace (a netfilter netlink "
                                     "socket: %s), so csandbox cannot keep the session to "
                                     "its allowed hosts and does not start it; without an "
                                     "allowlist, choose egress open or none",
                                     strerror(e));
        }
        close(probe);
        if (!lib)
                return cs_error_setx(err, ENOENT,
                                     "egress allowlist: libnftables is not installed (%s); "
                                     "install it with: sudo apt-get install libnftables1",
                                     dlerror());
        *(void **)&ctx_new = dlsym(lib, "nft_ctx_new");
        *(void **)&buffer_error = dlsym(lib, "nft_ctx_buffer_error");
        *(void **)&run = dlsym(lib, "nft_run_cmd_from_buffer");
        *(void **)&error_text = dlsym(lib, "nft_ctx_get_error_buffer");
        *(void **)&ctx_free = dlsym(lib, "nft_ctx_free");
        if (!ctx_new || !buffer_error || !run || !error_text || !ctx_free)
                return cs_error_setx(err, ENOENT, "egress allowlist: libnftables lacks %s",
                                     "nft_run_cmd_from_buffer");
        ctx = ctx_new(NFT_CTX_DEFAULT);
        if (!ctx)
                return cs_error_set(err, ENOMEM, "egress allowlist: nftables");
        buffer_error(ctx);
        r = run(ctx, egress_rules);
        if (r != 0) {
                const char *why = error_text(ctx);
                size_t len = why ? strlen(why) : 0;

                while (len && why[len - 1] == '\n')
                        len--;
                cs_error_setx(err, EPERM,
                              "egress allowlist: the kernel refused the session's nftables "
                              "rules (%.*s), so csandbox cannot keep the session to its "
                              "allowed hosts and does not start it; without an allowlist, "
                              "choose egress open or none",
                              (int)(len > 400 ? 400 : len), why ? why : "no reason given");
                ctx_free(ctx);
                return -EPERM;
        }
        ctx_free(ctx);
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

int egress_ns_setup(int sock, struct cs_error *err)
{
        int nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
        int fds[4] = {-1, -1, -1, -1}, r;
        char byte = 'e';
        struct iovec iov = {&byte, 1};
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(fds))];
        } c;
        struct msghdr msg = {.msg_iov = &iov,
                             .msg_iovlen = 1,
                             .msg_control = c.buf,
                             .msg_controllen = sizeof(c.buf)};

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
        for (int i = 0; i < 4; i++)
                if (fds[i] < 0) {
                        r = fds[i];
                        for (int j = 0; j < 4; j++)
                                if (fds[j] >= 0)
                                        close(fds[j]);
                        return cs_error_set(err, -r, "egress allowlist: the proxy's sockets");
                }
        memset(&c, 0, sizeof(c));
        c.h.cmsg_level = SOL_SOCKET;
        c.h.cmsg_type = SCM_RIGHTS;
        c.h.cmsg_len = CMSG_LEN(sizeof(fds));
        memcpy(CMSG_DATA(&c.h), fds, sizeof(fds));
        r = sendmsg(sock, &msg, MSG_NOSIGNAL) == 1 ? 0 : -errno;
        for (int i = 0; i < 4; i++)
                close(fds[i]);
        close(sock);
        if (r < 0)
                return cs_error_set(err, -r, "egress allowlist: hand the sockets to csandbox");
        return 0;
}

/* ---- the proxy and resolver, outside ----------------------------------------------- */

struct seen {
        char name[EGRESS_NAME_MAX];
        int family;
        unsigned char addr[16];
};

static const struct sandbox_spec *pol;
static int log_fd = -1;
static unsigned long *refused;
static atomic_uint log_lines, conns;
static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;
static struct seen *seen;
static size_t seen_next, seen_n;

static void seen_add(const char *name, int family, const unsigned char *addr)
{
        pthread_mutex_lock(&seen_lock);
        for (size_t i = 0; i < seen_n; i++)
                if (seen[i].family == family && strcmp(seen[i].name, name) == 0 &&
                    memcmp(seen[i].addr, addr, family == AF_INET ? 4 : 16) == 0) {
                        pthread_mutex_unlock(&seen_lock);
                        return;
                }
        snprintf(seen[seen_next].name, EGRESS_NAME_MAX, "%s", name);
        seen[seen_next].family = family;
        memset(seen[seen_next].addr, 0, 16);
        memcpy(seen[seen_next].addr, addr, family == AF_INET ? 4 : 16);
        seen_next = (seen_next + 1) % EGRESS_SEEN_MAX;
        if (seen_n < EGRESS_SEEN_MAX)
                seen_n++;
        pthread_mutex_unlock(&seen_lock);
}

static bool seen_has(const char *name, int family, const unsigned char *addr)
{
        bool found = false;

        pthread_mutex_lock(&seen_lock);
        for (size_t i = 0; i < seen_n && !found; i++)
                found = seen[i].family == family && strcmp(seen[i].name, name) == 0 &&
                        memcmp(seen[i].addr, addr, family == AF_INET ? 4 : 16) == 0;
        pthread_mutex_unlock(&seen_lock);
        return found;
}

/* The host's own addresses (every interface), read when the proxy starts. */
static struct net_host_addr *host_addrs;
static size_t n_host_addrs;

static void host_addrs_read(void)
{
        struct ifaddrs *list = NULL;
        size_t n = 0;

        if (getifaddrs(&list) < 0)
                return;
        for (struct ifaddrs *i = list; i; i = i->ifa_next)
                n++;
        host_addrs = calloc(n ? n : 1, sizeof(*host_addrs));
        for (struct ifaddrs *i = list; i && host_addrs; i = i->ifa_next) {
                struct net_host_addr *h = &host_addrs[n_host_addrs];

                if (!i->ifa_addr ||
                    (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
                        continue;
                h->family = i->ifa_addr->sa_family;
                if (h->family == AF_INET)
                        memcpy(h->bytes, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, 4);
                else
                        memcpy(h->bytes, &((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, 16);
                n_host_addrs++;
        }
        freeifaddrs(list);
}

/* Never the host itself: loopback, unspecified, link-local, multicast, and every address
 * of the host's. */
static bool addr_forbidden(int family, const unsigned char *a)
{
        static const unsigned char zero[16], loop6[16] = {[15] = 1};

        for (size_t i = 0; i < n_host_addrs; i++)
                if (host_addrs[i].family == family &&
                    memcmp(host_addrs[i].bytes, a, family == AF_INET ? 4 : 16) == 0)
                        return true;

        if (family == AF_INET)
                return a[0] == 127 || a[0] == 0 || (a[0] == 169 && a[1] == 254) || a[0] >= 224;
        if (memcmp(a, zero, 16) == 0 || memcmp(a, loop6, 16) == 0 || a[0] == 0xff ||
            (a[0] == 0xfe && (a[1] & 0xc0) == 0x80))
                return true;
        /* an IPv4-mapped address: judged as IPv4 */
        if (memcmp(a, zero, 10) == 0 && a[10] == 0xff && a[11] == 0xff)
                return addr_forbidden(AF_INET, a + 12);
        return false;
}

/* One line per refusal: time, what, name, address, port, reason. */
static void refuse(const char *what, const char *name, int family, const void *addr, unsigned port,
                   const char *reason)
{
        char line[512], text[INET6_ADDRSTRLEN] = "-", when[32];
        time_t now = time(NULL);
        struct tm tm;
        int n;

        __atomic_fetch_add(refused, 1, __ATOMIC_RELAXED);
        if (log_fd < 0 || atomic_fetch_add(&log_lines, 1) >= EGRESS_LOG_MAX)
                return;
        if (addr)
                inet_ntop(family, addr, text, sizeof(text));
        gmtime_r(&now, &tm);
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
        n = snprintf(line, sizeof(line), "%s %s name=%s addr=%s port=%u refused: %s\n", when, what,
                     name && *name ? name : "-", text, port, reason);
        if (n > 0)
                (void)!write(log_fd, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line));
}

static void relay(int a, int b, uint8_t *buf)
{
        int fd[2] = {a, b};
        bool open[2] = {true, true};

        while (open[0] || open[1]) {
                struct pollfd p[2] = {{open[0] ? a : -1, POLLIN, 0}, {open[1] ? b : -1, POLLIN, 0}};

                if (poll(p, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        return;
                }
                for (int i = 0; i < 2; i++) {
                        ssize_t n;

                        if (!open[i] || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                                continue;
                        n = read(fd[i], buf, EGRESS_RELAY_BUF);
                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n <= 0) {
                                open[i] = false;
                                shutdown(fd[1 - i], SHUT_WR);
                                if (n < 0)
                                        return;
                                continue;
                        }
                        if (cs_write_all(fd[1 - i], buf, (size_t)n) < 0)
                                return;
                }
        }
}

/* Whether addr is the proxy's own address in the session (a program that uses
 * HTTPS_PROXY=http://EGRESS_ADDR4:EGRESS_PORT connects there). */
static bool own_addr(int family, const unsigned char *a)
{
        unsigned char own[16];

        return inet_pton(family, family == AF_INET ? EGRESS_ADDR4 : EGRESS_ADDR6, own) == 1 &&
               memcmp(own, a, family == AF_INET ? 4 : 16) == 0;
}

/* A request to the proxy itself: CONNECT name:port, the name allowed on the port, resolved
 * by the host's resolver to an address the proxy may connect to (never the host's own, nor
 * a denied range). The request's head is answered here, not passed on: *sa becomes the
 * target, and 0 means connect, relay, and say "200" first (the caller's connect). -1: refused
 * (answered 403, logged). */
static int proxied(int c, uint8_t *buf, size_t have, struct sockaddr *sa, socklen_t *salen)
{
        static const char forbidden[] = "HTTP/1.1 403 Forbidden (csandbox egress allowlist)\r\n"
                                        "Content-Length: 0\r\nConnection: close\r\n\r\n";
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
        char target[EGRESS_NAME_MAX] = "";
        uint16_t tport = 0;
        const char *why = NULL;
        int t = egress_proxy_target(buf, have, target, &tport);

        if (t != 1 || have < 8 || memcmp(buf, "CONNECT ", 8) != 0 ||
            !memmem(buf, have, "\r\n\r\n", 4))
                why = "a request to the proxy itself that is not a whole CONNECT";
        else if (!spec_egress_name_allowed(pol, target, tport))
                why = "name not allowed";
        else if (getaddrinfo(target, NULL, &hints, &res) != 0)
                why = "the name does not resolve";
        if (!why) {
                why = "the name resolves only to the host's own or denied addresses";
                for (struct addrinfo *a = res; a; a = a->ai_next) {
                        const unsigned char *b =
                            a->ai_family == AF_INET
                                ? (const unsigned char *)&((struct sockaddr_in *)a->ai_addr)
                                      ->sin_addr
                                : (const unsigned char *)&((struct sockaddr_in6 *)a->ai_addr)
                                      ->sin6_addr;

                        if ((a->ai_family != AF_INET && a->ai_family != AF_INET6) ||
                            addr_forbidden(a->ai_family, b) ||
                            spec_egress_addr_denied(pol, a->ai_family, b))
                                continue;
                        memcpy(sa, a->ai_addr, a->ai_addrlen);
                        *salen = a->ai_addrlen;
                        if (a->ai_family == AF_INET)
                                ((struct sockaddr_in *)sa)->sin_port = htons(tport);
                        else
                                ((struct sockaddr_in6 *)sa)->sin6_port = htons(tport);
                        why = NULL;
                        break;
                }
        }
        if (res)
                freeaddrinfo(res);
        if (why) {
                refuse("tcp", target, AF_INET, NULL, tport, why);
                (void)!write(c, forbidden, sizeof(forbidden) - 1);
                return -1;
        }
        return 0;
}

static void *conn_main(void *arg)
{
        int c = (int)(intptr_t)arg, out = -1;
        union {
                struct sockaddr sa;
                struct sockaddr_in in;
                struct sockaddr_in6 in6;
        } dst = {0};
        socklen_t dlen = sizeof(dst);
        struct timeval tv = {EGRESS_FIRST_WAIT, 0};
        uint8_t *buf = malloc(EGRESS_FIRST_MAX);
        char name[EGRESS_NAME_MAX] = "";
        enum egress_first kind = EGRESS_FIRST_MORE;
        const unsigned char *addr;
        size_t have = 0;
        unsigned port;
        int family;
        bool is_proxied = false;

        if (!buf)
                goto out;
        if (getsockopt(c, SOL_IP, SO_ORIGINAL_DST, &dst, &dlen) < 0) {
                dlen = sizeof(dst);
                if (getsockopt(c, SOL_IPV6, IP6T_SO_ORIGINAL_DST, &dst, &dlen) < 0) {
                        refuse("tcp", NULL, AF_INET, NULL, 0, "no original destination");
                        goto out;
                }
        }
        family = dst.sa.sa_family;
        addr = family == AF_INET ? (const unsigned char *)&dst.in.sin_addr
                                 : (const unsigned char *)&dst.in6.sin6_addr;
        port = ntohs(family == AF_INET ? dst.in.sin_port : dst.in6.sin6_port);
        setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        while (kind == EGRESS_FIRST_MORE && have < EGRESS_FIRST_MAX) {
                ssize_t n = read(c, buf + have, EGRESS_FIRST_MAX - have);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                have += (size_t)n;
                kind = egress_first_name(buf, have, name);
        }
        if (port == EGRESS_PORT && own_addr(family, addr)) {
                /* a CONNECT's head may take more reads than its Host did */
                while (have < EGRESS_FIRST_MAX && !memmem(buf, have, "\r\n\r\n", 4)) {
                        ssize_t n = read(c, buf + have, EGRESS_FIRST_MAX - have);

                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n <= 0)
                                break;
                        have += (size_t)n;
                }
                is_proxied = true;
                if (proxied(c, buf, have, &dst.sa, &dlen))
                        goto out;
                family = dst.sa.sa_family;
                goto connect;
        }
        if (pol->map_host_loopback && family == AF_INET &&
            memcmp(addr, (const unsigned char[]){169, 254, 1, 2}, 4) == 0) {
                /* The host's loopback, mapped for the launch's own loopback hooks and for a
                 * proxy of the user's there (Agent Vault's), which connects wherever it is
                 * asked: HTTP only, and a request asking it to connect somewhere (CONNECT,
                 * an absolute URI) must name an allowed host. */
                char target[EGRESS_NAME_MAX];
                uint16_t tport;
                int t = egress_proxy_target(buf, have, target, &tport);

                if (t != 0 && t != 1) {
                        refuse("tcp", NULL, family, addr, port,
                               "the host's loopback takes HTTP requests only");
                        goto out;
                }
                if (t == 1 && !spec_egress_name_allowed(pol, target, tport)) {
                        refuse("tcp", target, family, addr, port,
                               "a proxy request for a name not allowed");
                        goto out;
                }
                dst.in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
                goto connect;
        }
        if (addr_forbidden(family, addr)) {
                refuse("tcp", name, family, addr, port,
                       "the host's own, a loopback or a link-local address");
                goto out;
        }
        if (spec_egress_addr_denied(pol, family, addr)) {
                refuse("tcp", name, family, addr, port, "address in a denied range");
                goto out;
        }
        if (!spec_egress_addr_allowed(pol, family, addr, (uint16_t)port)) {
                const char *why = NULL;

                if (kind == EGRESS_FIRST_MORE)
                        why = have ? "no server name in the first bytes" : "nothing sent";
                else if (kind == EGRESS_FIRST_NO_NAME)
                        why = "a TLS ClientHello without a server name (or encrypted)";
                else if (kind == EGRESS_FIRST_UNKNOWN)
                        why = "neither TLS with a server name nor HTTP with a Host";
                else if (!spec_egress_name_allowed(pol, name, (uint16_t)port))
                        why = "name not allowed";
                else if (!seen_has(name, family, addr))
                        why = "address not one the session's resolver gave for the name";
                if (why) {
                        refuse("tcp", name, family, addr, port, why);
                        goto out;
                }
        }
connect:
        tv.tv_sec = EGRESS_FIRST_WAIT;
        out = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (out < 0)
                goto out;
        setsockopt(out, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        if (connect(out, &dst.sa, family == AF_INET ? sizeof(dst.in) : sizeof(dst.in6)) < 0)
                goto out;
        tv.tv_sec = 0;
        setsockopt(out, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        if (is_proxied) {
                /* the head was for us: answer it; what followed it is the tunnel's */
                static const uint8_t ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
                const uint8_t *end = memmem(buf, have, "\r\n\r\n", 4) + 4;

                if (cs_write_all(c, ok, sizeof(ok) - 1) == 0 &&
                    cs_write_all(out, end, have - (size_t)(end - buf)) == 0)
                        relay(c, out, buf);
        } else if (cs_write_all(out, buf, have) == 0)
                relay(c, out, buf);
out:
        if (out >= 0)
                close(out);
        close(c);
        free(buf);
        atomic_fetch_sub(&conns, 1);
        return NULL;
}

static void dns_serve(int fd)
{
        uint8_t q[4096], a[512];
        struct egress_dns_query dq;
        uint8_t addrs[16][16];

        for (;;) {
                union {
                        struct sockaddr_in in;
                        struct sockaddr_in6 in6;
                } peer;
                socklen_t plen = sizeof(peer);
                ssize_t n = recvfrom(fd, q, sizeof(q), 0, (struct sockaddr *)&peer, &plen);
                unsigned rcode = EGRESS_DNS_NOERROR;
                size_t na = 0, len;

                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return;
                }
                if (egress_dns_parse(q, (size_t)n, &dq) < 0) {
                        refuse("dns", NULL, AF_INET, NULL, 53, "a malformed query");
                        continue;
                }
                if (dq.qclass != 1 || !spec_egress_name_allowed(pol, dq.name, 0)) {
                        refuse("dns", dq.name, AF_INET, NULL, 53, "name not allowed");
                        rcode = EGRESS_DNS_REFUSED;
                } else if (dq.qtype == EGRESS_DNS_A || dq.qtype == EGRESS_DNS_AAAA) {
                        int family = dq.qtype == EGRESS_DNS_A ? AF_INET : AF_INET6;
                        struct addrinfo hints = {.ai_family = family, .ai_socktype = SOCK_STREAM};
                        struct addrinfo *res = NULL;
                        int e = getaddrinfo(dq.name, NULL, &hints, &res);

                        if (e == EAI_NONAME)
                                rcode = EGRESS_DNS_NXDOMAIN;
                        else if (e != 0 && e != EAI_NODATA)
                                rcode = EGRESS_DNS_SERVFAIL;
                        for (struct addrinfo *i = e ? NULL : res; i && na < 16; i = i->ai_next) {
                                const unsigned char *ad =
                                    family == AF_INET
                                        ? (const unsigned char *)&((struct sockaddr_in *)i->ai_addr)
                                              ->sin_addr
                                        : (const unsigned char *)&(
                                              (struct sockaddr_in6 *)i->ai_addr)
                                              ->sin6_addr;

                                if (i->ai_family != family || addr_forbidden(family, ad))
                                        continue;
                                memcpy(addrs[na], ad, family == AF_INET ? 4 : 16);
                                seen_add(dq.name, family, ad);
                                na++;
                        }
                        if (res)
                                freeaddrinfo(res);
                }
                len = egress_dns_answer(q, &dq, rcode, (const uint8_t(*)[16])addrs, na, 60, a,
                                        sizeof(a));
                if (len)
                        sendto(fd, a, len, 0, (struct sockaddr *)&peer, plen);
        }
}

static void *dns_main(void *arg)
{
        dns_serve((int)(intptr_t)arg);
        return NULL;
}

static __attribute__((noreturn)) void proxy_main(const int fds[4])
{
        pthread_attr_t attr;
        pthread_t t;
        sigset_t all;

        sigemptyset(&all);
        sigprocmask(SIG_SETMASK, &all, NULL);
        signal(SIGPIPE, SIG_IGN);
        prctl(PR_SET_DUMPABLE, 0);
        seen = calloc(EGRESS_SEEN_MAX, sizeof(*seen));
        if (!seen)
                _exit(1);
        host_addrs_read();
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, EGRESS_STACK);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        for (int i = 2; i < 4; i++)
                if (pthread_create(&t, &attr, dns_main, (void *)(intptr_t)fds[i]) != 0)
                        _exit(1);
        for (;;) {
                struct pollfd p[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};

                if (poll(p, 2, -1) < 0)
                        continue;
                for (int i = 0; i < 2; i++) {
                        int c;

                        if (!(p[i].revents & POLLIN))
                                continue;
                        c = accept4(fds[i], NULL, NULL, SOCK_CLOEXEC);
                        if (c < 0)
                                continue;
                        if (atomic_fetch_add(&conns, 1) >= EGRESS_MAX_CONNS ||
                            pthread_create(&t, &attr, conn_main, (void *)(intptr_t)c) != 0) {
                                atomic_fetch_sub(&conns, 1);
                                refuse("tcp", NULL, AF_INET, NULL, 0, "too many connections");
                                close(c);
                        }
                }
        }
}

int egress_proxy_start(const struct sandbox_spec *s, int sock, struct egress_proxy *p,
                       struct cs_error *err)
{
        int fds[4] = {-1, -1, -1, -1}, keep[5];
        char byte;
        struct iovec iov = {&byte, 1};
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(fds))];
        } c;
        struct msghdr msg = {.msg_iov = &iov,
                             .msg_iovlen = 1,
                             .msg_control = c.buf,
                             .msg_controllen = sizeof(c.buf)};
        struct cmsghdr *h;
        ssize_t n;

        p->pid = -1;
        p->log_path = s->egress_log;
        do
                n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
        while (n < 0 && errno == EINTR);
        h = n == 1 ? CMSG_FIRSTHDR(&msg) : NULL;
        if (!h || h->cmsg_type != SCM_RIGHTS || h->cmsg_len != CMSG_LEN(sizeof(fds)))
                return cs_error_setx(err, EIO,
                                     "egress allowlist: the session's network was "
                                     "not set up");
        memcpy(fds, CMSG_DATA(h), sizeof(fds));
        refused =
            mmap(NULL, sizeof(*refused), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (refused == MAP_FAILED) {
                refused = NULL;
                for (int i = 0; i < 4; i++)
                        close(fds[i]);
                return cs_error_set(err, errno, "egress allowlist: the proxy");
        }
        p->refused = refused;
        log_fd = -1;
        if (s->egress_log) {
                log_fd =
                    open(s->egress_log,
                         O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
                if (log_fd < 0)
                        fprintf(stderr,
                                "csandbox: egress: cannot write the log %s (%s); "
                                "refusals are only counted\n",
                                s->egress_log, strerror(errno));
        }
        fflush(NULL);
        p->pid = fork();
        if (p->pid == 0) {
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() == 1)
                        _exit(0);
                pol = s;
                /* nothing of csandbox's but these: the session's pipes and terminal stay
                 * csandbox's */
                memcpy(keep, fds, sizeof(fds));
                keep[4] = log_fd;
                for (int i = 0; i < 5; i++)
                        for (int j = i + 1; j < 5; j++)
                                if (keep[j] < keep[i]) {
                                        int t = keep[i];
                                        keep[i] = keep[j];
                                        keep[j] = t;
                                }
                {
                        int from = 3;

                        for (int i = 0; i < 5; i++) {
                                if (keep[i] < from)
                                        continue;
                                if (keep[i] > from)
                                        close_range((unsigned)from, (unsigned)keep[i] - 1, 0);
                                from = keep[i] + 1;
                        }
                        close_range((unsigned)from, ~0u, 0);
                }
                proxy_main(fds);
        }
        for (int i = 0; i < 4; i++)
                close(fds[i]);
        if (log_fd >= 0)
                close(log_fd);
        if (p->pid < 0)
                return cs_error_set(err, errno, "egress allowlist: start the proxy");
        return 0;
}

void egress_proxy_stop(struct egress_proxy *p)
{
        if (p->pid > 0) {
                kill(p->pid, SIGKILL);
                while (waitpid(p->pid, NULL, 0) < 0 && errno == EINTR)
                        ;
                if (!p->report)
                        ;
                else if (p->log_path)
                        fprintf(stderr,
                                "csandbox: egress: %lu connection(s) or queries refused; "
                                "each is in %s\n",
                                *p->refused, p->log_path);
                else
                        fprintf(stderr, "csandbox: egress: %lu connection(s) or queries refused\n",
                                *p->refused);
        }
        if (p->refused)
                munmap(p->refused, sizeof(*p->refused));
        p->refused = NULL;
        p->pid = -1;
}
