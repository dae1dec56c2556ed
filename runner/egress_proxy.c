/* The egress allowlist's proxy (SPEC_EGRESS_ALLOWLIST; the session's side is egress_ns.c,
 * the resolver egress_dns.c): a process of csandbox's outside the session's namespaces,
 * non-dumpable, serving the sockets made in the session's namespace. Each connection gets a
 * thread (at most EGRESS_MAX_CONNS at once, and EGRESS_RESERVED more for claude's own hosts)
 * that reads its first bytes (EGRESS_FIRST_WAIT seconds for all of them, however slowly they
 * drip), decides, and relays until both ends are done or EGRESS_IDLE seconds pass without a
 * byte; it never decrypts. On a plain HTTP/1 connection every request the client sends is
 * judged, not only the first. */
#include "egress.h"
#include "egress_int.h"

#include "runner.h"

#include "../common/error.h"
#include "../common/fileio.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <linux/netfilter_ipv4.h>
#include <netdb.h>
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
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef IP6T_SO_ORIGINAL_DST
#define IP6T_SO_ORIGINAL_DST 80
#endif

/* The slots: EGRESS_MAX_CONNS for any connection (one still sending its first bytes
 * included), then EGRESS_RESERVED for connections that name one of claude's own hosts, so a
 * session's flood cannot starve claude. A reserved slot whose connection has named nothing
 * yet is given to a newer connection when all are taken: a client sends its first bytes at
 * once, a flood of silent connections then holds none for long. */
struct slot {
        int fd;            /* -1: free */
        unsigned long seq; /* which connection holds it */
        bool named;        /* it named a built-in host: kept */
};
static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned general;
static struct slot reserve[EGRESS_RESERVED];
static unsigned long accepted;
/* Threads serving connections, those ending after their reserved slot was taken included:
 * at most EGRESS_MAX_CONNS + 2 * EGRESS_RESERVED. */
static atomic_uint threads;

struct conn {
        int fd;
        int slot; /* -1: a general one, else reserve[slot] */
        unsigned long seq;
};

/* One chunk from src to dst: through pipe (spliced, the bytes never copied to the proxy)
 * when there is one, else through buf. 1 moved, 0 src ended, -1 an error. */
static int relay_chunk(int src, int dst, const int pipe[2], uint8_t *buf)
{
        ssize_t n;

        if (pipe[0] < 0) {
                do
                        n = read(src, buf, EGRESS_RELAY_BUF);
                while (n < 0 && errno == EINTR);
                if (n <= 0)
                        return (int)n;
                return cs_write_all(dst, buf, (size_t)n) < 0 ? -1 : 1;
        }
        do
                n = splice(src, NULL, pipe[1], NULL, EGRESS_RELAY_PIPE, SPLICE_F_MOVE);
        while (n < 0 && errno == EINTR);
        if (n <= 0)
                return (int)n;
        while (n > 0) {
                ssize_t m = splice(pipe[0], NULL, dst, NULL, (size_t)n, SPLICE_F_MOVE);

                if (m < 0 && errno == EINTR)
                        continue;
                if (m <= 0)
                        return -1;
                n -= m;
        }
        return 1;
}

/* Both ways until both ends are done. Spliced through a pipe per direction when the
 * descriptors can be had (the payload's bytes then never pass through the proxy's
 * memory), else read and written through buf. */
static void relay(int a, int b, uint8_t *buf)
{
        int fd[2] = {a, b}, pipes[2][2] = {{-1, -1}, {-1, -1}};
        bool open[2] = {true, true};

        if (pipe2(pipes[0], O_CLOEXEC) < 0 || pipe2(pipes[1], O_CLOEXEC) < 0) {
                for (int i = 0; i < 2; i++)
                        for (int j = 0; j < 2; j++)
                                if (pipes[i][j] >= 0)
                                        close(pipes[i][j]);
                pipes[0][0] = pipes[0][1] = pipes[1][0] = pipes[1][1] = -1;
        }
        while (open[0] || open[1]) {
                struct pollfd p[2] = {{open[0] ? a : -1, POLLIN, 0}, {open[1] ? b : -1, POLLIN, 0}};
                int r = 0;

                /* The relay is the session's whole network, as pasta is: an idle ssh
                 * session is not cut there. */
                int ready = poll(p, 2, egress_pol->net == SPEC_NET_RELAY ? -1 : EGRESS_IDLE * 1000);

                if (ready < 0 && errno == EINTR)
                        continue;
                if (ready <= 0)
                        break; /* an error, or nothing either way for EGRESS_IDLE seconds */
                for (int i = 0; i < 2 && r >= 0; i++) {
                        if (!open[i] || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                                continue;
                        r = relay_chunk(fd[i], fd[1 - i], pipes[i], buf);
                        if (r == 0) {
                                open[i] = false;
                                shutdown(fd[1 - i], SHUT_WR);
                        }
                }
                if (r < 0)
                        break;
        }
        for (int i = 0; i < 2; i++)
                for (int j = 0; j < 2; j++)
                        if (pipes[i][j] >= 0)
                                close(pipes[i][j]);
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
 * target, and 0 means connect, relay, and say "200" first (the caller's connect). -1:
 * refused (answered 403, logged). */
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
        else if (!spec_egress_name_allowed(egress_pol, target, tport))
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
                            egress_addr_forbidden(a->ai_family, b) ||
                            spec_egress_addr_denied(egress_pol, a->ai_family, b))
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
                egress_refuse("tcp", target, AF_INET, NULL, tport, why);
                (void)!write(c, forbidden, sizeof(forbidden) - 1);
                return -1;
        }
        return 0;
}

/* read(2) of what arrives before deadline (CLOCK_MONOTONIC): the first bytes get
 * EGRESS_FIRST_WAIT seconds in all, so a client dripping a byte at a time holds its slot
 * no longer than one that sends nothing. 0 when the time is up. */
static ssize_t read_by(int c, uint8_t *buf, size_t len, const struct timespec *deadline)
{
        for (;;) {
                struct timespec now;
                struct pollfd p = {c, POLLIN, 0};
                long long ms;
                ssize_t n;

                clock_gettime(CLOCK_MONOTONIC, &now);
                ms = (long long)(deadline->tv_sec - now.tv_sec) * 1000 +
                     (deadline->tv_nsec - now.tv_nsec) / 1000000;
                if (ms <= 0)
                        return 0;
                if (poll(&p, 1, (int)ms) < 0) {
                        if (errno == EINTR)
                                continue;
                        return -1;
                }
                if (!p.revents)
                        continue;
                n = read(c, buf, len);
                if (n < 0 && (errno == EINTR || errno == EAGAIN))
                        continue;
                return n;
        }
}

/* Who judges the requests of a plain HTTP/1 connection. */
enum judge {
        JUDGE_LOOPBACK, /* the mapped host loopback: a proxy request must name an allowed host */
        JUDGE_NAMED,    /* an allowed name's address: each Host allowed and resolved there */
        JUDGE_RANGE,    /* an allowed range's address: no name denied */
};

/* Why the request head h[..n] may not pass on a connection to addr:port, or NULL; name gets
 * the name judged (for the log). */
static const char *judge_head(enum judge j, const uint8_t *h, size_t n, int family,
                              const unsigned char *addr, unsigned port, char *name)
{
        char target[EGRESS_NAME_MAX];
        uint16_t tport;
        int t = egress_proxy_target(h, n, target, &tport);

        name[0] = '\0';
        if (t != 0 && t != 1)
                return j == JUDGE_LOOPBACK ? "the host's loopback takes HTTP requests only"
                                           : "a request target that names no host to check";
        if (t == 1) {
                snprintf(name, EGRESS_NAME_MAX, "%s", target);
                if (spec_egress_name_denied(egress_pol, target, tport))
                        return "a proxy request for a denied name";
                /* on an allowed range too: a forward proxy listening there would
                 * otherwise connect the session anywhere */
                if (!spec_egress_name_allowed(egress_pol, target, tport))
                        return "a proxy request for a name not allowed";
        }
        if (j == JUDGE_LOOPBACK)
                return NULL; /* the Host of a request of the host's own server */
        if (egress_first_name(h, n, name) != EGRESS_FIRST_HTTP)
                return j == JUDGE_RANGE ? NULL : "an HTTP request without a Host";
        if (spec_egress_name_denied(egress_pol, name, (uint16_t)port))
                return "a denied name";
        if (j == JUDGE_RANGE)
                return NULL;
        if (!spec_egress_name_allowed(egress_pol, name, (uint16_t)port))
                return "name not allowed";
        if (!egress_seen_has(name, family, addr))
                return "address not one the session's resolver gave for the name";
        return NULL;
}

/* After a CONNECT or an Upgrade was passed on: whether the server switched (2xx to a
 * CONNECT, 101 to an Upgrade). Its status line is peeked, not taken, so it still reaches
 * the client through the splice. */
static bool switched(int out, bool connect)
{
        struct timeval tv = {EGRESS_IDLE, 0};
        char st[12];
        ssize_t n;

        setsockopt(out, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        do
                n = recv(out, st, sizeof(st), MSG_PEEK | MSG_WAITALL);
        while (n < 0 && errno == EINTR);
        tv.tv_sec = 0;
        setsockopt(out, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        if (n != (ssize_t)sizeof(st) || memcmp(st, "HTTP/1.", 7) != 0 || st[8] != ' ')
                return false;
        return connect ? st[9] == '2' : memcmp(st + 9, "101", 3) == 0;
}

/* A plain HTTP/1 connection: the client's bytes read through buf (have of them there
 * already) request by request, each head judged before it passes; the server's spliced
 * back as they come. A refused request ends the connection (nothing of it is sent). A
 * CONNECT or an Upgrade must be the connection's first request (clients open a new one
 * for it) and not on the host's loopback for an Upgrade (a switched stream there could
 * carry HTTP/2 requests to any host through a proxy); what the client sends after it waits
 * for the server's answer: switched, the rest is relayed as it is, to the server that
 * took the judged request; not, the server gets nothing more. */
static void relay_http(int c, int out, uint8_t *buf, size_t have, enum judge j, int family,
                       const unsigned char *addr, unsigned port)
{
        struct egress_http h;
        int pipes[2] = {-1, -1};
        uint8_t *back = NULL;
        bool from_c = true, from_s = true, first = true;
        char name[EGRESS_NAME_MAX];

        egress_http_init(&h);
        if (pipe2(pipes, O_CLOEXEC) < 0) {
                pipes[0] = pipes[1] = -1;
                back = malloc(EGRESS_RELAY_BUF);
                if (!back)
                        return;
        }
        while (from_c || from_s) {
                struct pollfd p[2] = {{from_c && have < EGRESS_FIRST_MAX ? c : -1, POLLIN, 0},
                                      {from_s ? out : -1, POLLIN, 0}};
                int ready;

                while (from_c && have) {
                        enum egress_http_what w;
                        size_t n = egress_http_step(&h, buf, have, &w);
                        const char *why = NULL;

                        if (w == EGRESS_HTTP_MORE)
                                break;
                        if (w == EGRESS_HTTP_BAD)
                                why = h.why;
                        else if (w == EGRESS_HTTP_HEAD) {
                                why = judge_head(j, buf, n, family, addr, port, name);
                                if (!why && h.flags && !first)
                                        why = "a CONNECT or Upgrade after the connection's "
                                              "first request";
                                if (!why && (h.flags & EGRESS_HTTP_UPGRADE) && j == JUDGE_LOOPBACK)
                                        why = "an Upgrade on the host's loopback";
                                first = false;
                        }
                        if (why) {
                                egress_refuse("tcp", w == EGRESS_HTTP_HEAD ? name : NULL, family,
                                              addr, port, why);
                                goto end;
                        }
                        if (w != EGRESS_HTTP_SKIP && cs_write_all(out, buf, n) < 0)
                                goto end;
                        memmove(buf, buf + n, have - n);
                        have -= n;
                        if (w == EGRESS_HTTP_HEAD && h.flags) {
                                if (switched(out, h.flags & EGRESS_HTTP_CONNECT)) {
                                        if (cs_write_all(out, buf, have) == 0)
                                                relay(c, out, buf);
                                        goto end;
                                }
                                /* refused: whatever the client sent after it is no request
                                 * of a tunnel, and never judged */
                                shutdown(out, SHUT_WR);
                                from_c = false;
                                have = 0;
                        }
                }
                if (!from_c && !from_s)
                        break;
                p[0].fd = from_c && have < EGRESS_FIRST_MAX ? c : -1;
                ready = poll(p, 2, EGRESS_IDLE * 1000);
                if (ready < 0 && errno == EINTR)
                        continue;
                if (ready <= 0)
                        break; /* an error, or nothing either way for EGRESS_IDLE seconds */
                if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
                        int r = relay_chunk(out, c, pipes, back);

                        if (r < 0)
                                break;
                        if (r == 0) {
                                from_s = false;
                                shutdown(c, SHUT_WR);
                        }
                }
                if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
                        ssize_t n = read(c, buf + have, EGRESS_FIRST_MAX - have);

                        if (n < 0 && (errno == EINTR || errno == EAGAIN))
                                continue;
                        if (n < 0)
                                break;
                        if (n == 0) {
                                /* an unfinished head is never judged, so never sent */
                                from_c = false;
                                have = 0;
                                shutdown(out, SHUT_WR);
                        }
                        have += (size_t)n;
                }
        }
end:
        if (pipes[0] >= 0) {
                close(pipes[0]);
                close(pipes[1]);
        }
        free(back);
}

/* The first request's head read whole (by deadline) and judged before anything is
 * connected; false: refused, and logged. */
static bool first_request(int c, uint8_t *buf, size_t *have, const struct timespec *deadline,
                          enum judge j, int family, const unsigned char *addr, unsigned port)
{
        struct egress_http h;
        enum egress_http_what w;
        char name[EGRESS_NAME_MAX] = "";
        const char *why = NULL;
        size_t n;

        for (;;) {
                ssize_t r;

                egress_http_init(&h);
                n = egress_http_step(&h, buf, *have, &w);
                if (w != EGRESS_HTTP_MORE || *have >= EGRESS_FIRST_MAX)
                        break;
                r = read_by(c, buf + *have, EGRESS_FIRST_MAX - *have, deadline);
                if (r <= 0)
                        break;
                *have += (size_t)r;
        }
        if (w == EGRESS_HTTP_HEAD)
                why = judge_head(j, buf, n, family, addr, port, name);
        else if (w == EGRESS_HTTP_BAD)
                why = h.why;
        else if (w != EGRESS_HTTP_SKIP)
                why = "no whole HTTP request head in time";
        if (why)
                egress_refuse("tcp", name, family, addr, port, why);
        return !why;
}

/* A reserved slot's connection has named name on port: kept when it is one of claude's own
 * hosts and the slot is still its own. */
static bool slot_keep(const struct conn *k, const char *name, unsigned port)
{
        bool keep = spec_egress_name_builtin(egress_pol, name, (uint16_t)port);

        pthread_mutex_lock(&slots_lock);
        if (reserve[k->slot].seq != k->seq)
                keep = false; /* given to a newer connection */
        else
                reserve[k->slot].named = keep;
        pthread_mutex_unlock(&slots_lock);
        return keep;
}

static void slot_free(const struct conn *k)
{
        pthread_mutex_lock(&slots_lock);
        if (k->slot < 0)
                general--;
        else if (reserve[k->slot].seq == k->seq)
                reserve[k->slot].fd = -1;
        pthread_mutex_unlock(&slots_lock);
}

/* A slot for the connection c just accepted into k; false: none. */
static bool slot_take(int c, struct conn *k)
{
        int oldest = -1;
        bool ok = true;

        if (atomic_load(&threads) >= EGRESS_MAX_CONNS + 2 * EGRESS_RESERVED)
                return false;
        pthread_mutex_lock(&slots_lock);
        k->fd = c;
        k->seq = ++accepted;
        k->slot = -1;
        if (general < EGRESS_MAX_CONNS) {
                general++;
                goto out;
        }
        /* The relay names no host: its connections never hold a reserved slot (a newer
         * one would end them). */
        if (egress_pol->net == SPEC_NET_RELAY) {
                ok = false;
                goto out;
        }
        for (int i = 0; i < EGRESS_RESERVED && k->slot < 0; i++) {
                if (reserve[i].fd < 0)
                        k->slot = i;
                else if (!reserve[i].named && (oldest < 0 || reserve[i].seq < reserve[oldest].seq))
                        oldest = i;
        }
        if (k->slot < 0 && oldest >= 0) {
                /* its thread wakes with nothing read, and finds its slot taken */
                shutdown(reserve[oldest].fd, SHUT_RDWR);
                k->slot = oldest;
        }
        if (k->slot < 0)
                ok = false;
        else
                reserve[k->slot] = (struct slot){c, k->seq, false};
out:
        pthread_mutex_unlock(&slots_lock);
        return ok;
}

/* Where the session's connection c was headed (SO_ORIGINAL_DST, either family): the
 * address in *dst, its family, address bytes and port. -1 (logged) when it has none. */
union egress_dst {
        struct sockaddr sa;
        struct sockaddr_in in;
        struct sockaddr_in6 in6;
};

static int original_dst(int c, union egress_dst *dst, int *family, const unsigned char **addr,
                        unsigned *port)
{
        socklen_t dlen = sizeof(*dst);

        if (getsockopt(c, SOL_IP, SO_ORIGINAL_DST, dst, &dlen) < 0) {
                dlen = sizeof(*dst);
                if (getsockopt(c, SOL_IPV6, IP6T_SO_ORIGINAL_DST, dst, &dlen) < 0) {
                        egress_refuse("tcp", NULL, AF_INET, NULL, 0, "no original destination");
                        return -1;
                }
        }
        *family = dst->sa.sa_family;
        *addr = *family == AF_INET ? (const unsigned char *)&dst->in.sin_addr
                                   : (const unsigned char *)&dst->in6.sin6_addr;
        *port = ntohs(*family == AF_INET ? dst->in.sin_port : dst->in6.sin6_port);
        return 0;
}

/* A connection from the host's network to dst: EGRESS_FIRST_WAIT seconds to connect, then
 * no send timeout. The socket, or -1. Unless the host's own loopback is meant (mapped),
 * the address is judged again once connected: a connect retries its SYN for as long as it
 * waits, and the host may gain the address meanwhile (a VPN, a bridge coming up). */
static int connect_out(const union egress_dst *dst, bool host_loopback)
{
        struct timeval tv = {EGRESS_FIRST_WAIT, 0};
        int family = dst->sa.sa_family, out = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        const unsigned char *addr = family == AF_INET ? (const unsigned char *)&dst->in.sin_addr
                                                      : (const unsigned char *)&dst->in6.sin6_addr;

        if (out < 0)
                return -1;
        setsockopt(out, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        if (connect(out, &dst->sa, family == AF_INET ? sizeof(dst->in) : sizeof(dst->in6)) < 0) {
                close(out);
                return -1;
        }
        if (!host_loopback && egress_addr_forbidden(family, addr)) {
                egress_refuse("tcp", NULL, family, addr,
                              ntohs(family == AF_INET ? dst->in.sin_port : dst->in6.sin6_port),
                              "the host gained the address while connecting");
                close(out);
                return -1;
        }
        tv.tv_sec = 0;
        setsockopt(out, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        return out;
}

/* The end of a connection's thread: its sockets, its slot, its buffer. */
static void *conn_end(struct conn *k, int out, uint8_t *buf)
{
        if (out >= 0)
                close(out);
        slot_free(k);
        close(k->fd);
        free(buf);
        atomic_fetch_sub(&threads, 1);
        return NULL;
}

/* SPEC_NET_RELAY's connection: the session's network, open. Relayed to its original
 * destination at once, nothing read first (a server that speaks first, SSH's or SMTP's, is
 * not kept waiting), unless that is the host itself (its own, loopback and link-local
 * addresses: pasta's sessions cannot reach them either) or a denied range. */
static void *relay_conn_main(void *arg)
{
        struct conn k = *(struct conn *)arg;
        union egress_dst dst = {0};
        const unsigned char *addr;
        uint8_t *buf = NULL;
        unsigned port;
        int family, out = -1;

        free(arg);
        if (original_dst(k.fd, &dst, &family, &addr, &port) < 0)
                return conn_end(&k, out, buf);
        bool loopback = egress_pol->map_host_loopback && family == AF_INET &&
                        memcmp(addr, (const unsigned char[]){169, 254, 1, 2}, 4) == 0;

        if (loopback) {
                /* the host's loopback, mapped as pasta maps it */
                dst.in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        } else if (egress_addr_forbidden(family, addr)) {
                egress_refuse("tcp", NULL, family, addr, port,
                              "the host's own, a loopback or a link-local address");
                return conn_end(&k, out, buf);
        } else if (spec_egress_addr_denied(egress_pol, family, addr)) {
                egress_refuse("tcp", NULL, family, addr, port, "address in a denied range");
                return conn_end(&k, out, buf);
        }
        out = connect_out(&dst, loopback);
        if (out < 0) {
                /* the client sees a reset, as from a refusing host, not an empty reply */
                struct linger l = {1, 0};

                setsockopt(k.fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
                return conn_end(&k, out, buf);
        }
        buf = malloc(EGRESS_RELAY_BUF);
        if (buf)
                relay(k.fd, out, buf);
        return conn_end(&k, out, buf);
}

static void *conn_main(void *arg)
{
        struct conn k = *(struct conn *)arg;
        int c = k.fd, out = -1;
        union egress_dst dst = {0};
        socklen_t dlen = sizeof(dst);
        struct timeval tv = {0, 0};
        struct timespec deadline;
        uint8_t *buf = malloc(EGRESS_FIRST_MAX);
        char name[EGRESS_NAME_MAX] = "";
        enum egress_first kind = EGRESS_FIRST_MORE;
        const unsigned char *addr;
        size_t have = 0;
        unsigned port;
        int family, http = -1; /* enum judge, or -1: spliced as it is */
        bool is_proxied = false;

        free(arg);
        if (!buf || original_dst(c, &dst, &family, &addr, &port) < 0)
                goto out;
        clock_gettime(CLOCK_MONOTONIC, &deadline);
        deadline.tv_sec += EGRESS_FIRST_WAIT;
        while (kind == EGRESS_FIRST_MORE && have < EGRESS_FIRST_MAX) {
                ssize_t n = read_by(c, buf + have, EGRESS_FIRST_MAX - have, &deadline);

                if (n <= 0)
                        break;
                have += (size_t)n;
                kind = egress_first_name(buf, have, name);
        }
        if (k.slot >= 0 && !slot_keep(&k, name, port)) {
                egress_refuse("tcp", name, family, addr, port,
                              "too many connections (the last slots are kept for claude's "
                              "own hosts)");
                goto out;
        }
        if (port == EGRESS_PORT && own_addr(family, addr)) {
                /* a CONNECT's head may take more reads than its Host did */
                while (have < EGRESS_FIRST_MAX && !memmem(buf, have, "\r\n\r\n", 4)) {
                        ssize_t n = read_by(c, buf + have, EGRESS_FIRST_MAX - have, &deadline);

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
        if (egress_pol->map_host_loopback && family == AF_INET &&
            memcmp(addr, (const unsigned char[]){169, 254, 1, 2}, 4) == 0) {
                /* The host's loopback, mapped for the launch's own loopback hooks and for a
                 * proxy of the user's there (Agent Vault's), which connects wherever it is
                 * asked: HTTP only, every request judged (relay_http), and one asking it to
                 * connect somewhere (CONNECT, an absolute URI) must name an allowed host. */
                char target[EGRESS_NAME_MAX];
                uint16_t tport;
                int t = egress_proxy_target(buf, have, target, &tport);

                if (t != 0 && t != 1) {
                        egress_refuse("tcp", NULL, family, addr, port,
                                      "the host's loopback takes HTTP requests only");
                        goto out;
                }
                http = JUDGE_LOOPBACK;
                if (!first_request(c, buf, &have, &deadline, JUDGE_LOOPBACK, family, addr, port))
                        goto out;
                dst.in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
                goto connect;
        }
        if (egress_addr_forbidden(family, addr)) {
                egress_refuse("tcp", name, family, addr, port,
                              "the host's own, a loopback, a link-local or a metadata address");
                goto out;
        }
        if (spec_egress_addr_denied(egress_pol, family, addr)) {
                egress_refuse("tcp", name, family, addr, port, "address in a denied range");
                goto out;
        }
        /* a denied name wins over an allowed range its address is in */
        if ((kind == EGRESS_FIRST_TLS || kind == EGRESS_FIRST_HTTP) &&
            spec_egress_name_denied(egress_pol, name, (uint16_t)port)) {
                egress_refuse("tcp", name, family, addr, port, "a denied name");
                goto out;
        }
        if (spec_egress_addr_allowed(egress_pol, family, addr, (uint16_t)port)) {
                /* HTTP to a range: each request's names checked against the denials */
                char target[EGRESS_NAME_MAX];
                uint16_t tport;
                int t = egress_proxy_target(buf, have, target, &tport);

                if (kind == EGRESS_FIRST_HTTP || t == 0 || t == 1)
                        http = JUDGE_RANGE;
        } else {
                const char *why = NULL;

                if (kind == EGRESS_FIRST_MORE)
                        why = have ? "no server name in the first bytes" : "nothing sent";
                else if (kind == EGRESS_FIRST_NO_NAME)
                        why = "a TLS ClientHello without a server name (or encrypted)";
                else if (kind == EGRESS_FIRST_UNKNOWN)
                        why = "neither TLS with a server name nor HTTP with a Host";
                else if (!spec_egress_name_allowed(egress_pol, name, (uint16_t)port))
                        why = "name not allowed";
                else if (!egress_seen_has(name, family, addr))
                        why = "address not one the session's resolver gave for the name";
                if (why) {
                        egress_refuse("tcp", name, family, addr, port, why);
                        goto out;
                }
                if (kind == EGRESS_FIRST_HTTP)
                        http = JUDGE_NAMED;
        }
        if (http >= 0 &&
            !first_request(c, buf, &have, &deadline, (enum judge)http, family, addr, port))
                goto out;
connect:
        out = connect_out(&dst, http == JUDGE_LOOPBACK);
        if (out < 0)
                goto out;
        setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        if (is_proxied) {
                /* the head was for us: answer it; what followed it is the tunnel's */
                static const uint8_t ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
                const uint8_t *end = memmem(buf, have, "\r\n\r\n", 4) + 4;

                if (cs_write_all(c, ok, sizeof(ok) - 1) == 0 &&
                    cs_write_all(out, end, have - (size_t)(end - buf)) == 0)
                        relay(c, out, buf);
        } else if (http >= 0) {
                relay_http(c, out, buf, have, (enum judge)http, family, addr, port);
        } else if (cs_write_all(out, buf, have) == 0)
                relay(c, out, buf);
out:
        return conn_end(&k, out, buf);
}

static __attribute__((noreturn)) void proxy_main(const int fds[EGRESS_FDS], int addr_sub)
{
        pthread_attr_t attr;
        pthread_t t;
        sigset_t all;

        sigemptyset(&all);
        sigprocmask(SIG_SETMASK, &all, NULL);
        signal(SIGPIPE, SIG_IGN);
        prctl(PR_SET_DUMPABLE, 0);
        /* its own name, for whoever looks at the host's processes */
        prctl(PR_SET_NAME, "csandbox-egress");
        for (int i = 0; i < EGRESS_RESERVED; i++)
                reserve[i].fd = -1;
        {
                /* two sockets and two pipes per connection, and a few of its own */
                struct rlimit nofile;
                rlim_t want = (EGRESS_MAX_CONNS + 2 * EGRESS_RESERVED) * 6 + 64;

                if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < want) {
                        nofile.rlim_cur = nofile.rlim_max < want ? nofile.rlim_max : want;
                        setrlimit(RLIMIT_NOFILE, &nofile);
                }
        }
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, EGRESS_STACK);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (egress_host_addrs_follow(addr_sub, &attr) < 0 || egress_dns_start(fds + 2, &attr) < 0)
                _exit(1);
        for (;;) {
                struct pollfd p[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};

                if (poll(p, 2, -1) < 0)
                        continue;
                for (int i = 0; i < 2; i++) {
                        struct conn *k;
                        int c;

                        if (!(p[i].revents & POLLIN))
                                continue;
                        c = accept4(fds[i], NULL, NULL, SOCK_CLOEXEC);
                        if (c < 0)
                                continue;
                        k = malloc(sizeof(*k));
                        if (!k || !slot_take(c, k)) {
                                free(k);
                                egress_refuse("tcp", NULL, AF_INET, NULL, 0,
                                              "too many connections");
                                close(c);
                                continue;
                        }
                        atomic_fetch_add(&threads, 1);
                        if (pthread_create(&t, &attr,
                                           egress_pol->net == SPEC_NET_RELAY ? relay_conn_main
                                                                             : conn_main,
                                           k) != 0) {
                                atomic_fetch_sub(&threads, 1);
                                slot_free(k);
                                free(k);
                                egress_refuse("tcp", NULL, AF_INET, NULL, 0,
                                              "too many connections");
                                close(c);
                        }
                }
        }
}

int egress_proxy_start(const struct sandbox_spec *s, int sock, struct egress_proxy *p,
                       struct cs_error *err)
{
        int fds[EGRESS_FDS] = {-1, -1, -1, -1}, keep[EGRESS_FDS + 2], addr_sub;
        struct egress_fds_msg m;
        ssize_t n;

        p->pid = -1;
        p->log_path = s->egress_log;
        p->relay = s->net == SPEC_NET_RELAY;
        egress_fds_msg(&m, NULL);
        do
                n = recvmsg(sock, &m.msg, MSG_CMSG_CLOEXEC);
        while (n < 0 && errno == EINTR);
        if (egress_fds_take(&m, n, fds) < 0)
                return cs_error_setx(err, EIO,
                                     "egress allowlist: the session's network was "
                                     "not set up");
        egress_refused = mmap(NULL, sizeof(*egress_refused), PROT_READ | PROT_WRITE,
                              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (egress_refused == MAP_FAILED) {
                egress_refused = NULL;
                for (int i = 0; i < EGRESS_FDS; i++)
                        close(fds[i]);
                return cs_error_set(err, errno, "egress allowlist: the proxy");
        }
        p->refused = egress_refused;
        /* the host's addresses as the proxy starts, and their changes from then on */
        addr_sub = egress_host_addrs_begin();
        if (addr_sub < 0) {
                for (int i = 0; i < EGRESS_FDS; i++)
                        close(fds[i]);
                return cs_error_set(err, -addr_sub,
                                    "egress allowlist: read the host's addresses (netlink)");
        }
        egress_log_fd = -1;
        if (s->egress_log) {
                egress_log_fd =
                    open(s->egress_log,
                         O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
                if (egress_log_fd < 0)
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
                egress_pol = s;
                /* nothing of csandbox's but these: the session's pipes and terminal stay
                 * csandbox's */
                memcpy(keep, fds, sizeof(fds));
                keep[EGRESS_FDS] = egress_log_fd;
                keep[EGRESS_FDS + 1] = addr_sub;
                for (int i = 0; i <= EGRESS_FDS + 1; i++)
                        for (int j = i + 1; j <= EGRESS_FDS + 1; j++)
                                if (keep[j] < keep[i]) {
                                        int t = keep[i];
                                        keep[i] = keep[j];
                                        keep[j] = t;
                                }
                {
                        int from = 3;

                        for (int i = 0; i <= EGRESS_FDS + 1; i++) {
                                if (keep[i] < from)
                                        continue;
                                if (keep[i] > from)
                                        close_range((unsigned)from, (unsigned)keep[i] - 1, 0);
                                from = keep[i] + 1;
                        }
                        close_range((unsigned)from, ~0u, 0);
                }
                proxy_main(fds, addr_sub);
        }
        for (int i = 0; i < EGRESS_FDS; i++)
                close(fds[i]);
        close(addr_sub);
        egress_host_addrs_forget();
        if (egress_log_fd >= 0)
                close(egress_log_fd);
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
                if (!p->report || (p->relay && !*p->refused))
                        ;
                else if (p->relay)
                        fprintf(stderr,
                                "csandbox: relay: %lu connection(s) or queries refused (the "
                                "host's own addresses, denied hosts)%s%s\n",
                                *p->refused, p->log_path ? "; each is in " : "",
                                p->log_path ? p->log_path : "");
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
