/* What the files of the egress allowlist share, and nothing else of csandbox's includes:
 * the session's fixed addresses and ports, the limits, the sockets' hand-over from the
 * session's namespace (egress_ns.c) to the proxy (egress_proxy.c), and what the proxy and
 * its resolver (egress_dns.c) ask of each other. */
#pragma once
#include "../common/egress_wire.h"
#include "../spec/spec.h"

#include <pthread.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#define EGRESS_ADDR4       SPEC_EGRESS_ADDR4 /* the session's own address (its source) */
#define EGRESS_ADDR6       SPEC_EGRESS_ADDR6
#define EGRESS_PORT        SPEC_EGRESS_PORT
#define EGRESS_DNS_PORT    SPEC_EGRESS_DNS_PORT
#define EGRESS_MAX_CONNS   256   /* at once; more are refused */
#define EGRESS_RESERVED    32    /* more slots beside them, for claude's own hosts only */
#define EGRESS_FIRST_WAIT  10    /* seconds for a connection's first bytes, all of them */
#define EGRESS_IDLE        600   /* seconds without a byte either way: the connection ends */
#define EGRESS_SEEN_MAX    1024  /* name-address pairs the resolver remembers */
#define EGRESS_LOG_MAX     10000 /* lines; further refusals are only counted */
#define EGRESS_STACK       (128 << 10)
#define EGRESS_RELAY_BUF   16384
#define EGRESS_RELAY_PIPE  (64 << 10) /* spliced at once */
#define EGRESS_DNS_WORKERS 8          /* host lookups at once */
#define EGRESS_DNS_QUEUE   64         /* queries waiting for one; more are answered SERVFAIL */
#define EGRESS_DNS_RATE    20         /* lookups of new names a second, on average; */
#define EGRESS_DNS_BURST   64         /* at most this many at once; more are answered SERVFAIL */

/* The sockets handed over, in this order: TCP IPv4, TCP IPv6, DNS IPv4, DNS IPv6. */
#define EGRESS_FDS 4

/* One message of one byte carrying EGRESS_FDS descriptors (SCM_RIGHTS), built in place
 * for either side; it points into itself, so it is never copied. */
struct egress_fds_msg {
        char byte;
        struct iovec iov;
        /* a cmsghdr's room, aligned as one (not a union with it: its flexible array
         * member may not sit inside this struct) */
        _Alignas(struct cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * EGRESS_FDS)];
        struct msghdr msg;
};

/* m ready for sendmsg carrying fds, or, with fds NULL, for recvmsg. */
void egress_fds_msg(struct egress_fds_msg *m, const int *fds);
/* After recvmsg returned n into m: the descriptors into fds, 0; -1 when m holds none. */
int egress_fds_take(struct egress_fds_msg *m, ssize_t n, int *fds);

/* Shared by the proxy and the resolver (egress_rules.c): the policy, the log (-1: none)
 * and the refusal count (a page csandbox reads at the end). */
extern const struct sandbox_spec *egress_pol;
extern int egress_log_fd;
extern unsigned long *egress_refused;
/* The host's own addresses: subscribed to their changes, then read (a socket, -errno);
 * egress_host_addrs_follow, in the proxy, keeps them current from its events in a thread
 * of attr (-1: none could be had); forget frees the copy left in csandbox. */
int egress_host_addrs_begin(void);
int egress_host_addrs_follow(int sub, const pthread_attr_t *attr);
void egress_host_addrs_forget(void);
/* One line in the session's log (time, what, name, address, port, reason), and the count. */
void egress_refuse(const char *what, const char *name, int family, const void *addr, unsigned port,
                   const char *reason);
/* The host itself: loopback, unspecified, link-local, multicast, the host's addresses, and
 * the clouds' instance metadata services. */
bool egress_addr_forbidden(int family, const unsigned char *a);

/* The resolver's (egress_dns.c). */
bool egress_seen_has(const char *name, int family, const unsigned char *addr);
/* Serve the two DNS sockets (fds[0], fds[1]) from threads of attr; lookups of the host's
 * resolver run in at most EGRESS_DNS_WORKERS threads beside them, so a slow one delays
 * only itself. -1 when a thread or the memory cannot be had. */
int egress_dns_start(const int fds[2], const pthread_attr_t *attr);
