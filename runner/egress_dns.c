/* The egress allowlist's resolver (SPEC_EGRESS_ALLOWLIST; the session's side is
 * egress_ns.c, the proxy egress_proxy.c): every DNS query of the session comes here. A
 * name that is not allowed is answered REFUSED at once, so a query carries nothing out; an
 * A or AAAA query for an allowed name is looked up through the host's resolver
 * (getaddrinfo) by a pool of at most EGRESS_DNS_WORKERS threads, so a name whose lookup
 * hangs delays only its own answer, and at most EGRESS_DNS_QUEUE queries wait for a worker
 * (more are answered SERVFAIL: the memory stays bounded). Lookups of names it has not
 * answered yet take a token of a bucket (EGRESS_DNS_RATE a second, EGRESS_DNS_BURST at
 * most): a wildcard then cannot push thousands of made-up names a second (data, in their
 * labels) to its name servers. The addresses it answers are remembered, as the proxy
 * connects only to an address given for the name. */
#include "egress_int.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define STR_(x) #x
#define STR(x)  STR_(x)

/* ---- what the resolver answered, for the proxy ------------------------------------- */

struct seen {
        char name[EGRESS_NAME_MAX];
        int family;
        unsigned char addr[16];
};

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

static bool seen_name(const char *name)
{
        bool found = false;

        pthread_mutex_lock(&seen_lock);
        for (size_t i = 0; i < seen_n && !found; i++)
                found = strcmp(seen[i].name, name) == 0;
        pthread_mutex_unlock(&seen_lock);
        return found;
}

bool egress_seen_has(const char *name, int family, const unsigned char *addr)
{
        bool found = false;

        pthread_mutex_lock(&seen_lock);
        for (size_t i = 0; i < seen_n && !found; i++)
                found = seen[i].family == family && strcmp(seen[i].name, name) == 0 &&
                        memcmp(seen[i].addr, addr, family == AF_INET ? 4 : 16) == 0;
        pthread_mutex_unlock(&seen_lock);
        return found;
}

/* ---- the queries ------------------------------------------------------------------- */

struct dns_job {
        int fd; /* the socket it came in on, and its answer goes out */
        union {
                struct sockaddr_in in;
                struct sockaddr_in6 in6;
        } peer;
        socklen_t plen;
        struct egress_dns_query q;
        uint8_t msg[512]; /* the query up to its question's end: all an answer repeats */
};

static pthread_mutex_t jobs_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t jobs_ready = PTHREAD_COND_INITIALIZER;
static struct dns_job *jobs; /* a ring of EGRESS_DNS_QUEUE */
static size_t jobs_head, jobs_n;
static unsigned workers, idle;
static const pthread_attr_t *thread_attr;
/* What each worker looks up now (NULL: nothing), so a client's retry of a query still being
 * looked up takes no second worker: the first lookup answers it (a retry repeats its id). */
static const struct dns_job *busy[EGRESS_DNS_WORKERS];

static bool same_query(const struct dns_job *a, const struct dns_job *b)
{
        return a->fd == b->fd && a->plen == b->plen && memcmp(&a->peer, &b->peer, a->plen) == 0 &&
               a->q.id == b->q.id && a->q.qtype == b->q.qtype && strcmp(a->q.name, b->q.name) == 0;
}

/* Under jobs_lock: whether j is queued or being looked up already. */
static bool pending(const struct dns_job *j)
{
        for (size_t i = 0; i < jobs_n; i++)
                if (same_query(&jobs[(jobs_head + i) % EGRESS_DNS_QUEUE], j))
                        return true;
        for (unsigned i = 0; i < workers; i++)
                if (busy[i] && same_query(busy[i], j))
                        return true;
        return false;
}

static void answer(const struct dns_job *j, unsigned rcode, const uint8_t (*addrs)[16], size_t n)
{
        uint8_t a[512];
        size_t len = egress_dns_answer(j->msg, &j->q, rcode, addrs, n, 60, a, sizeof(a));

        if (len)
                sendto(j->fd, a, len, 0, (const struct sockaddr *)&j->peer, j->plen);
}

/* The host's resolver's addresses for an A or AAAA query, never the host's own. */
static void look_up(const struct dns_job *j)
{
        int family = j->q.qtype == EGRESS_DNS_A ? AF_INET : AF_INET6;
        struct addrinfo hints = {.ai_family = family, .ai_socktype = SOCK_STREAM};
        struct addrinfo *res = NULL;
        uint8_t addrs[16][16];
        unsigned rcode = EGRESS_DNS_NOERROR;
        size_t na = 0;
        int e = getaddrinfo(j->q.name, NULL, &hints, &res);

        if (e == EAI_NONAME)
                rcode = EGRESS_DNS_NXDOMAIN;
        else if (e != 0 && e != EAI_NODATA)
                rcode = EGRESS_DNS_SERVFAIL;
        for (struct addrinfo *i = e ? NULL : res; i && na < 16; i = i->ai_next) {
                const unsigned char *ad =
                    family == AF_INET
                        ? (const unsigned char *)&((struct sockaddr_in *)i->ai_addr)->sin_addr
                        : (const unsigned char *)&((struct sockaddr_in6 *)i->ai_addr)->sin6_addr;

                if (i->ai_family != family || egress_addr_forbidden(family, ad))
                        continue;
                memcpy(addrs[na], ad, family == AF_INET ? 4 : 16);
                seen_add(j->q.name, family, ad);
                na++;
        }
        if (res)
                freeaddrinfo(res);
        answer(j, rcode, (const uint8_t(*)[16])addrs, na);
}

static void *worker_main(void *arg)
{
        unsigned slot = (unsigned)(uintptr_t)arg;
        struct dns_job j;

        for (;;) {
                pthread_mutex_lock(&jobs_lock);
                idle++;
                while (jobs_n == 0)
                        pthread_cond_wait(&jobs_ready, &jobs_lock);
                idle--;
                j = jobs[jobs_head];
                jobs_head = (jobs_head + 1) % EGRESS_DNS_QUEUE;
                jobs_n--;
                busy[slot] = &j;
                pthread_mutex_unlock(&jobs_lock);
                look_up(&j);
                pthread_mutex_lock(&jobs_lock);
                busy[slot] = NULL;
                pthread_mutex_unlock(&jobs_lock);
        }
        return NULL;
}

/* Under jobs_lock: a token for a lookup of a name not answered yet; false: none left. */
static bool token_take(const char *name)
{
        static double tokens = EGRESS_DNS_BURST;
        static struct timespec last;
        struct timespec now;

        if (seen_name(name))
                return true;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (last.tv_sec || last.tv_nsec)
                tokens += ((double)(now.tv_sec - last.tv_sec) +
                           (double)(now.tv_nsec - last.tv_nsec) / 1e9) *
                          EGRESS_DNS_RATE;
        last = now;
        if (tokens > EGRESS_DNS_BURST)
                tokens = EGRESS_DNS_BURST;
        if (tokens < 1)
                return false;
        tokens -= 1;
        return true;
}

enum queued { QUEUED, QUEUE_FULL, RATE_BOUND };

/* Queue j for a worker, starting one when none is idle and fewer than the bound run; a
 * repeat of a pending query is dropped (its first answers it). */
static enum queued enqueue(const struct dns_job *j)
{
        pthread_t t;
        enum queued queued = QUEUE_FULL;

        pthread_mutex_lock(&jobs_lock);
        if (pending(j)) {
                queued = QUEUED;
        } else if (egress_pol->net != SPEC_NET_RELAY &&
                   !spec_egress_name_builtin(egress_pol, j->q.name, 0) && !token_take(j->q.name)) {
                /* claude's own hosts never wait for the bucket a flood of names empties */
                /* the bound keeps an allowed wildcard from carrying data to its name
                 * servers; the relay's network is open anyway */
                queued = RATE_BOUND;
        } else if (jobs_n < EGRESS_DNS_QUEUE) {
                if (idle <= jobs_n && workers < EGRESS_DNS_WORKERS &&
                    pthread_create(&t, thread_attr, worker_main, (void *)(uintptr_t)workers) == 0)
                        workers++;
                if (workers > 0) {
                        jobs[(jobs_head + jobs_n) % EGRESS_DNS_QUEUE] = *j;
                        jobs_n++;
                        queued = QUEUED;
                        pthread_cond_signal(&jobs_ready);
                }
        }
        pthread_mutex_unlock(&jobs_lock);
        return queued;
}

/* The allowlist answers its allowed names; the relay (SPEC_NET_RELAY) every name not
 * denied. */
static bool name_answered(const char *name)
{
        if (egress_pol->net == SPEC_NET_RELAY)
                return !spec_egress_name_denied(egress_pol, name, 0);
        return spec_egress_name_allowed(egress_pol, name, 0);
}

static void dns_serve(int fd)
{
        uint8_t q[4096];
        struct dns_job j = {.fd = fd};

        for (;;) {
                ssize_t n;

                j.plen = sizeof(j.peer);
                n = recvfrom(fd, q, sizeof(q), 0, (struct sockaddr *)&j.peer, &j.plen);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return;
                }
                if (egress_dns_parse(q, (size_t)n, &j.q) < 0 || j.q.question_end > sizeof(j.msg)) {
                        egress_refuse("dns", NULL, AF_INET, NULL, 53, "a malformed query");
                        continue;
                }
                memcpy(j.msg, q, j.q.question_end);
                if (j.q.qclass != 1 || !name_answered(j.q.name)) {
                        egress_refuse("dns", j.q.name, AF_INET, NULL, 53,
                                      egress_pol->net == SPEC_NET_RELAY ? "a denied name"
                                                                        : "name not allowed");
                        answer(&j, EGRESS_DNS_REFUSED, NULL, 0);
                } else if (j.q.qtype != EGRESS_DNS_A && j.q.qtype != EGRESS_DNS_AAAA) {
                        answer(&j, EGRESS_DNS_NOERROR, NULL, 0); /* no records of that type */
                } else {
                        enum queued e = enqueue(&j);

                        if (e == RATE_BOUND)
                                egress_refuse("dns", j.q.name, AF_INET, NULL, 53,
                                              "too many new names (more than " STR(
                                                  EGRESS_DNS_RATE) " a second)");
                        if (e != QUEUED)
                                answer(&j, EGRESS_DNS_SERVFAIL, NULL, 0);
                }
        }
}

static void *dns_main(void *arg)
{
        dns_serve((int)(intptr_t)arg);
        return NULL;
}

int egress_dns_start(const int fds[2], const pthread_attr_t *attr)
{
        pthread_t t;

        thread_attr = attr;
        seen = calloc(EGRESS_SEEN_MAX, sizeof(*seen));
        jobs = calloc(EGRESS_DNS_QUEUE, sizeof(*jobs));
        if (!seen || !jobs)
                return -1;
        for (int i = 0; i < 2; i++)
                if (pthread_create(&t, attr, dns_main, (void *)(intptr_t)fds[i]) != 0)
                        return -1;
        return 0;
}
