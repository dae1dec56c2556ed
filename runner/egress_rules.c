/* What the proxy and its resolver both judge by (egress_proxy.c, egress_dns.c): the
 * policy, the host's own addresses that are never a destination, and the refusal log. */
#include "egress_int.h"
#include "runner.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const struct sandbox_spec *egress_pol;
int egress_log_fd = -1;
unsigned long *egress_refused;
static atomic_uint log_lines;

/* The host's own addresses (every interface), read when the proxy starts. */
static struct net_host_addr *host_addrs;
static size_t n_host_addrs;

void egress_host_addrs_read(void)
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

/* The clouds' instance metadata services besides 169.254.169.254 (link-local, refused with
 * the rest): they hand out the machine's credentials to whoever asks from the host. */
static const char *const metadata4[] = {
    "100.100.100.200", /* Alibaba Cloud */
    "168.63.129.16",   /* Azure's wire server */
    "192.0.0.192",     /* Oracle Cloud Classic */
};
static const char *const metadata6[] = {
    "fd00:ec2::254",      /* AWS (IMDS over IPv6) */
    "fd20:ce::254",       /* Google Cloud */
    "fd00:c1::a9fe:a9fe", /* Oracle Cloud */
};

static bool listed(int family, const unsigned char *a, const char *const *list, size_t n)
{
        unsigned char b[16];

        for (size_t i = 0; i < n; i++)
                if (inet_pton(family, list[i], b) == 1 &&
                    memcmp(a, b, family == AF_INET ? 4 : 16) == 0)
                        return true;
        return false;
}

/* Never the host itself: loopback, unspecified, link-local, multicast, every address of the
 * host's, and the metadata services. */
bool egress_addr_forbidden(int family, const unsigned char *a)
{
        static const unsigned char zero[16], loop6[16] = {[15] = 1},
                                             nat64[12] = {0x00, 0x64, 0xff, 0x9b};

        for (size_t i = 0; i < n_host_addrs; i++)
                if (host_addrs[i].family == family &&
                    memcmp(host_addrs[i].bytes, a, family == AF_INET ? 4 : 16) == 0)
                        return true;

        if (family == AF_INET)
                return a[0] == 127 || a[0] == 0 || (a[0] == 169 && a[1] == 254) || a[0] >= 224 ||
                       listed(AF_INET, a, metadata4, sizeof(metadata4) / sizeof(*metadata4));
        if (memcmp(a, zero, 16) == 0 || memcmp(a, loop6, 16) == 0 || a[0] == 0xff ||
            (a[0] == 0xfe && (a[1] & 0xc0) == 0x80) ||
            listed(AF_INET6, a, metadata6, sizeof(metadata6) / sizeof(*metadata6)))
                return true;
        /* an IPv4-mapped address, and the well-known NAT64 prefix (a NAT64 gateway of the
         * host's carries it to that IPv4 address): judged as IPv4 */
        if ((memcmp(a, zero, 10) == 0 && a[10] == 0xff && a[11] == 0xff) ||
            memcmp(a, nat64, 12) == 0)
                return egress_addr_forbidden(AF_INET, a + 12);
        return false;
}

/* One line per refusal: time, what, name, address, port, reason. */
void egress_refuse(const char *what, const char *name, int family, const void *addr, unsigned port,
                   const char *reason)
{
        char line[512], text[INET6_ADDRSTRLEN] = "-", when[32];
        time_t now = time(NULL);
        struct tm tm;
        int n;

        __atomic_fetch_add(egress_refused, 1, __ATOMIC_RELAXED);
        if (egress_log_fd < 0 || atomic_fetch_add(&log_lines, 1) >= EGRESS_LOG_MAX)
                return;
        if (addr)
                inet_ntop(family, addr, text, sizeof(text));
        gmtime_r(&now, &tm);
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
        n = snprintf(line, sizeof(line), "%s %s name=%s addr=%s port=%u refused: %s\n", when, what,
                     name && *name ? name : "-", text, port, reason);
        if (n > 0)
                (void)!write(egress_log_fd, line,
                             (size_t)n < sizeof(line) ? (size_t)n : sizeof(line));
}
