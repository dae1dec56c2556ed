/* runner/'s netlink requests (rtnetlink): one message built in a buffer, sent, and its
 * acknowledgement read (netconf.c; egress_ns.c and netns.c use it too). */
#pragma once
#include <linux/netlink.h>
#include <stddef.h>

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
