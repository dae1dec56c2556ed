/* What the proxy and its resolver both judge by (egress_proxy.c, egress_dns.c): the
 * policy, the host's own addresses that are never a destination, and the refusal log. */
#include "egress_int.h"
#include "netlink.h"
#include "runner.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const struct sandbox_spec *egress_pol;
int egress_log_fd = -1;
unsigned long *egress_refused;
static atomic_uint log_lines;

/* The host's own addresses, followed while the proxy runs: replaced whole (never changed in
 * place) under host_lock, which the connection and resolver threads take only to read. */
static pthread_rwlock_t host_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct net_host_addr *host_addrs;
static size_t n_host_addrs;

static void host_addrs_set(struct net_host_addr *a, size_t n)
{
        struct net_host_addr *old;

        pthread_rwlock_wrlock(&host_lock);
        old = host_addrs;
        host_addrs = a;
        n_host_addrs = n;
        pthread_rwlock_unlock(&host_lock);
        free(old);
}

int egress_host_addrs_begin(void)
{
        struct net_host_addr *a = NULL;
        size_t n = 0;
        int sub = host_addrs_subscribe(), r;

        if (sub < 0)
                return sub;
        r = host_addrs_dump(&a, &n);
        if (r < 0) {
                close(sub);
                return r;
        }
        host_addrs_set(a, n);
        return sub;
}

void egress_host_addrs_forget(void)
{
        host_addrs_set(NULL, 0);
}

static void *host_addrs_follow(void *arg)
{
        int sub = (int)(intptr_t)arg;
        bool stale = false;

        for (;;) {
                struct pollfd p = {sub, POLLIN, 0};
                struct net_host_addr *a = NULL;
                size_t n = 0;

                /* a dump that failed is tried again shortly, event or not */
                if (poll(&p, 1, stale ? HOST_ADDRS_RETRY_MS : -1) < 0)
                        continue;
                if (!host_addrs_changed(sub) && !stale)
                        continue;
                /* the whole set again: an address may sit on two interfaces, and lost
                 * events (ENOBUFS) say nothing of what changed */
                stale = host_addrs_dump(&a, &n) < 0;
                if (!stale)
                        host_addrs_set(a, n);
        }
        return NULL;
}

int egress_host_addrs_follow(int sub, const pthread_attr_t *attr)
{
        pthread_t t;

        return pthread_create(&t, attr, host_addrs_follow, (void *)(intptr_t)sub) == 0 ? 0 : -1;
}

static bool host_addrs_has(int family, const unsigned char *a)
{
        bool found = false;

        pthread_rwlock_rdlock(&host_lock);
        for (size_t i = 0; i < n_host_addrs && !found; i++)
                found = net_host_addr_holds(&host_addrs[i], family, a);
        pthread_rwlock_unlock(&host_lock);
        return found;
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

        if (host_addrs_has(family, a))
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
