/* The egress session's nftables rules, sent to the kernel as one batch (nft_batch.c). */
#pragma once
#include <stdint.h>

/* In the session's network namespace (CAP_NET_ADMIN there): TCP redirected to tcp_port, DNS
 * to dns_port, the rest but loopback and the session's own addresses addr4/addr6 dropped.
 * 0; -ENOTSUP when no netfilter netlink socket can be had, -EPERM when the kernel refused a
 * message, -EIO when the batch could not be sent: *ret_errno says why. */
int nft_egress_load(uint16_t tcp_port, uint16_t dns_port, const char *addr4, const char *addr6,
                    int *ret_errno);
