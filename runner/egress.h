/* SPEC_EGRESS_ALLOWLIST (runner/egress_ns.c, egress_proxy.c, egress_dns.c): the session's namespace
 * routes everything to its own loopback, where nftables hands TCP to csandbox's proxy and DNS to
 * its resolver; both listen on sockets made in the session's namespace and run outside it, in
 * csandbox. */
#pragma once
#include <stdbool.h>
#include <sys/types.h>

struct sandbox_spec;
struct cs_error;

struct egress_proxy {
        pid_t pid; /* -1: not started */
        const char *log_path;
        unsigned long *refused; /* shared with the proxy */
        bool report;            /* the session ran: stop says what was refused */
        bool relay;             /* SPEC_NET_RELAY: stop speaks only of refusals */
};

/* Child side, in the session's new network namespace with its capabilities, before the
 * payload exists: routes, nftables rules, the listening sockets, sent over sock. An error
 * names what the kernel refused; the launch then fails (never an open network). */
int egress_ns_setup(int sock, struct cs_error *err);

/* Parent side: receive the sockets from sock and start the proxy and resolver. */
int egress_proxy_start(const struct sandbox_spec *s, int sock, struct egress_proxy *p,
                       struct cs_error *err);

/* Stop it; when it served a session, one line on stderr counts the refusals and names the
 * log. Safe to repeat. */
void egress_proxy_stop(struct egress_proxy *p);
