/* runner/'s netlink requests (rtnetlink): one message built in a buffer, sent, and its
 * acknowledgement read (netconf.c; egress_ns.c and netns.c use it too). */
#pragma once
#include <linux/netlink.h>
#include <stdbool.h>
#include <stddef.h>

struct net_host_addr;

/* One request: its header, the family's header after it, then its attributes. */
struct nl_msg {
        union {
                struct nlmsghdr nh;
                char raw[320];
        };
};

/* Start m as a request of type with flags (NLM_F_REQUEST is added); the family's header of
 * hdr bytes, zeroed, is returned for the caller to fill. */
void *netlink_begin(struct nl_msg *m, unsigned short type, unsigned short flags, size_t hdr);
/* Append one attribute of len bytes (the callers' attributes fit m: at most a few
 * addresses and numbers). */
void netlink_attr(struct nl_msg *m, unsigned short type, const void *data, size_t len);
/* One netlink request answered by an acknowledgement, 0 or -errno. */
int netlink_request(int nl, struct nlmsghdr *req);
/* RTM_NEWADDR: addr (4 or 16 bytes by family) with prefix on interface idx; IPv6 without
 * duplicate detection, usable at once. */
int netlink_addr_add(int nl, int idx, int family, const unsigned char *addr, unsigned char prefix);
/* One dump request; each message of the answer goes to fn. 0 or -errno. */
int netlink_dump(int nl, unsigned short type, unsigned char family,
                 void (*fn)(const struct nlmsghdr *nh, void *opaque), void *opaque);

/* The host's addresses followed (hostaddrs.c), for the egress proxy's refusals and pasta
 * sessions' unreachable rules. A socket of the caller's network namespace told of every
 * address added or removed (non-blocking), -errno; subscribed before the first dump, so
 * nothing is missed between. */
int host_addrs_subscribe(void);
/* How soon a follower tries again after a dump or a rule failed; the session's watcher
 * waits twice as long after each failure in a row, up to the most. */
#define HOST_ADDRS_RETRY_MS     100
#define HOST_ADDRS_RETRY_MAX_MS 10000
/* Every address of the caller's network namespace, each once (IPv4's local address, as
 * getifaddrs gives it): *ret (malloc'd, NULL when none) and *ret_n. 0 or -errno. */
int host_addrs_dump(struct net_host_addr **ret, size_t *ret_n);
/* A growing list of addresses, as the dumps above collect them. */
struct net_addr_list {
        struct net_host_addr *a;
        size_t n, cap;
        bool failed; /* out of memory: the list is short */
};
/* h appended to l (each once when unique). */
void net_addr_list_push(struct net_addr_list *l, const struct net_host_addr *h, bool unique);
/* Drain sub's events: true when an address was added or removed, or events were lost
 * (ENOBUFS): the caller dumps the whole set again. */
bool host_addrs_changed(int sub);
