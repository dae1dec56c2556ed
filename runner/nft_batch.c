/* The egress session's nftables rules as one nf_tables netlink batch, built here and sent
 * in one write: nothing is parsed, no library is loaded (libnftables took milliseconds to
 * load and parse the same rules at every launch). What egress_ns.c loads:
 *
 *   table inet csandbox_egress {
 *    chain nat_out { type nat hook output priority -100; policy accept;
 *     ip daddr 127.0.0.0/8 return; ip6 daddr ::1 return
 *     meta l4proto tcp redirect to :TCP_PORT
 *     udp dport 53 redirect to :DNS_PORT }
 *    chain filter_out { type filter hook output priority 0; policy drop;
 *     ct state established,related accept
 *     ip daddr 127.0.0.0/8 accept; ip daddr ADDR4 accept
 *     ip6 daddr ::1 accept; ip6 daddr ADDR6 accept } }
 *
 * Each rule is the expressions nft itself generates for it (`nft --debug=netlink`): a
 * family's address is checked after `meta nfproto`, a port after `meta l4proto`. */
#include "nft_batch.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define BATCH_MAX 8192
#define NEST_MAX  8

struct batch {
        _Alignas(struct nlmsghdr) char buf[BATCH_MAX];
        size_t len;
        struct nlmsghdr *msg;  /* the message being built */
        size_t nest[NEST_MAX]; /* offsets of the open nested attributes */
        unsigned depth;
        uint32_t seq;
        bool over;
};

static void *put(struct batch *b, size_t len)
{
        size_t at = b->len, aligned = NLMSG_ALIGN(len);

        if (b->over || at + aligned > sizeof(b->buf)) {
                b->over = true;
                return NULL;
        }
        memset(b->buf + at, 0, aligned);
        b->len += aligned;
        if (b->msg)
                b->msg->nlmsg_len = (uint32_t)(b->len - (size_t)((char *)b->msg - b->buf));
        return b->buf + at;
}

static void msg_begin(struct batch *b, uint16_t type, uint16_t flags, uint8_t family,
                      uint16_t res_id)
{
        struct nlmsghdr *nh;
        struct nfgenmsg *g;

        b->msg = NULL;
        nh = put(b, sizeof(*nh));
        if (!nh)
                return;
        nh->nlmsg_len = sizeof(*nh);
        nh->nlmsg_type = type;
        nh->nlmsg_flags = (uint16_t)(NLM_F_REQUEST | flags);
        nh->nlmsg_seq = ++b->seq;
        b->msg = nh;
        g = put(b, sizeof(*g));
        if (g) {
                g->nfgen_family = family;
                g->version = NFNETLINK_V0;
                g->res_id = htons(res_id);
        }
}

static void attr(struct batch *b, uint16_t type, const void *data, size_t len)
{
        struct nlattr *a = put(b, NLA_HDRLEN + len);

        if (!a)
                return;
        a->nla_type = type;
        a->nla_len = (uint16_t)(NLA_HDRLEN + len);
        memcpy((char *)a + NLA_HDRLEN, data, len);
}

static void attr_str(struct batch *b, uint16_t type, const char *s)
{
        attr(b, type, s, strlen(s) + 1);
}

static void attr_be32(struct batch *b, uint16_t type, uint32_t v)
{
        uint32_t be = htonl(v);

        attr(b, type, &be, sizeof(be));
}

static void nest_begin(struct batch *b, uint16_t type)
{
        size_t at = b->len;
        struct nlattr *a = put(b, NLA_HDRLEN);

        if (!a || b->depth == NEST_MAX) {
                b->over = true;
                return;
        }
        a->nla_type = (uint16_t)(type | NLA_F_NESTED);
        b->nest[b->depth++] = at;
}

static void nest_end(struct batch *b)
{
        struct nlattr *a;

        if (b->over || !b->depth)
                return;
        a = (struct nlattr *)(b->buf + b->nest[--b->depth]);
        a->nla_len = (uint16_t)(b->len - b->nest[b->depth]);
}

/* ---- expressions ---------------------------------------------------------------------- */

static void expr_begin(struct batch *b, const char *name)
{
        nest_begin(b, NFTA_LIST_ELEM);
        attr_str(b, NFTA_EXPR_NAME, name);
        nest_begin(b, NFTA_EXPR_DATA);
}

static void expr_end(struct batch *b)
{
        nest_end(b);
        nest_end(b);
}

static void meta(struct batch *b, uint32_t key)
{
        expr_begin(b, "meta");
        attr_be32(b, NFTA_META_DREG, NFT_REG_1);
        attr_be32(b, NFTA_META_KEY, key);
        expr_end(b);
}

static void cmp(struct batch *b, uint32_t op, const void *data, size_t len)
{
        expr_begin(b, "cmp");
        attr_be32(b, NFTA_CMP_SREG, NFT_REG_1);
        attr_be32(b, NFTA_CMP_OP, op);
        nest_begin(b, NFTA_CMP_DATA);
        attr(b, NFTA_DATA_VALUE, data, len);
        nest_end(b);
        expr_end(b);
}

static void payload(struct batch *b, uint32_t base, uint32_t offset, uint32_t len)
{
        expr_begin(b, "payload");
        attr_be32(b, NFTA_PAYLOAD_DREG, NFT_REG_1);
        attr_be32(b, NFTA_PAYLOAD_BASE, base);
        attr_be32(b, NFTA_PAYLOAD_OFFSET, offset);
        attr_be32(b, NFTA_PAYLOAD_LEN, len);
        expr_end(b);
}

/* reg1 = (reg1 & mask) ^ 0 over len bytes */
static void mask(struct batch *b, const void *m, size_t len)
{
        static const uint8_t zero[16];

        expr_begin(b, "bitwise");
        attr_be32(b, NFTA_BITWISE_SREG, NFT_REG_1);
        attr_be32(b, NFTA_BITWISE_DREG, NFT_REG_1);
        attr_be32(b, NFTA_BITWISE_LEN, (uint32_t)len);
        nest_begin(b, NFTA_BITWISE_MASK);
        attr(b, NFTA_DATA_VALUE, m, len);
        nest_end(b);
        nest_begin(b, NFTA_BITWISE_XOR);
        attr(b, NFTA_DATA_VALUE, zero, len);
        nest_end(b);
        expr_end(b);
}

static void verdict(struct batch *b, int32_t code)
{
        expr_begin(b, "immediate");
        attr_be32(b, NFTA_IMMEDIATE_DREG, NFT_REG_VERDICT);
        nest_begin(b, NFTA_IMMEDIATE_DATA);
        nest_begin(b, NFTA_DATA_VERDICT);
        attr_be32(b, NFTA_VERDICT_CODE, (uint32_t)code);
        nest_end(b);
        nest_end(b);
        expr_end(b);
}

/* redirect to port (the local address of the packet's family) */
static void redirect(struct batch *b, uint16_t port)
{
        uint16_t be = htons(port);

        expr_begin(b, "immediate");
        attr_be32(b, NFTA_IMMEDIATE_DREG, NFT_REG_1);
        nest_begin(b, NFTA_IMMEDIATE_DATA);
        attr(b, NFTA_DATA_VALUE, &be, sizeof(be));
        nest_end(b);
        expr_end(b);
        expr_begin(b, "redir");
        attr_be32(b, NFTA_REDIR_REG_PROTO_MIN, NFT_REG_1);
        expr_end(b);
}

/* ---- tables, chains, rules ------------------------------------------------------------ */

#define TABLE "csandbox_egress"

static void chain(struct batch *b, const char *name, const char *type, int32_t prio,
                  uint32_t policy)
{
        msg_begin(b, NFNL_SUBSYS_NFTABLES << 8 | NFT_MSG_NEWCHAIN, NLM_F_CREATE | NLM_F_ACK,
                  NFPROTO_INET, 0);
        attr_str(b, NFTA_CHAIN_TABLE, TABLE);
        attr_str(b, NFTA_CHAIN_NAME, name);
        nest_begin(b, NFTA_CHAIN_HOOK);
        attr_be32(b, NFTA_HOOK_HOOKNUM, NF_INET_LOCAL_OUT);
        attr_be32(b, NFTA_HOOK_PRIORITY, (uint32_t)prio);
        nest_end(b);
        attr_be32(b, NFTA_CHAIN_POLICY, policy);
        attr_str(b, NFTA_CHAIN_TYPE, type);
}

static void rule_begin(struct batch *b, const char *chain_name)
{
        msg_begin(b, NFNL_SUBSYS_NFTABLES << 8 | NFT_MSG_NEWRULE,
                  NLM_F_CREATE | NLM_F_APPEND | NLM_F_ACK, NFPROTO_INET, 0);
        attr_str(b, NFTA_RULE_TABLE, TABLE);
        attr_str(b, NFTA_RULE_CHAIN, chain_name);
        nest_begin(b, NFTA_RULE_EXPRESSIONS);
}

static void rule_end(struct batch *b)
{
        nest_end(b);
}

/* `ip daddr A[/prefix] VERDICT` or `ip6 daddr A VERDICT` */
static void daddr_rule(struct batch *b, const char *chain_name, int family, const void *a,
                       unsigned prefix, int32_t code)
{
        uint8_t proto = family == AF_INET ? NFPROTO_IPV4 : NFPROTO_IPV6;
        size_t len = family == AF_INET ? 4 : 16;

        rule_begin(b, chain_name);
        meta(b, NFT_META_NFPROTO);
        cmp(b, NFT_CMP_EQ, &proto, 1);
        payload(b, NFT_PAYLOAD_NETWORK_HEADER, family == AF_INET ? 16 : 24, (uint32_t)len);
        if (prefix < len * 8) {
                uint8_t m[16] = {0};

                for (unsigned i = 0; i < prefix; i++)
                        m[i / 8] |= (uint8_t)(0x80 >> (i % 8));
                mask(b, m, len);
        }
        cmp(b, NFT_CMP_EQ, a, len);
        verdict(b, code);
        rule_end(b);
}

static int build(struct batch *b, uint16_t tcp_port, uint16_t dns_port, const char *addr4,
                 const char *addr6)
{
        static const uint8_t loop4[4] = {127, 0, 0, 0}, loop6[16] = {[15] = 1};
        uint8_t own4[4], own6[16], tcp = IPPROTO_TCP, udp = IPPROTO_UDP;
        uint16_t dns = htons(53);
        /* ct state bits: 1 << (ctinfo + 1), ESTABLISHED 0 and RELATED 1 */
        uint32_t state = 1u << (0 + 1) | 1u << (1 + 1);
        uint32_t zero = 0;

        if (inet_pton(AF_INET, addr4, own4) != 1 || inet_pton(AF_INET6, addr6, own6) != 1)
                return -EINVAL;
        msg_begin(b, NFNL_MSG_BATCH_BEGIN, 0, AF_UNSPEC, NFNL_SUBSYS_NFTABLES);
        msg_begin(b, NFNL_SUBSYS_NFTABLES << 8 | NFT_MSG_NEWTABLE, NLM_F_CREATE | NLM_F_ACK,
                  NFPROTO_INET, 0);
        attr_str(b, NFTA_TABLE_NAME, TABLE);

        chain(b, "nat_out", "nat", -100, NF_ACCEPT);
        daddr_rule(b, "nat_out", AF_INET, loop4, 8, NFT_RETURN);
        daddr_rule(b, "nat_out", AF_INET6, loop6, 128, NFT_RETURN);
        rule_begin(b, "nat_out");
        meta(b, NFT_META_L4PROTO);
        cmp(b, NFT_CMP_EQ, &tcp, 1);
        redirect(b, tcp_port);
        rule_end(b);
        rule_begin(b, "nat_out");
        meta(b, NFT_META_L4PROTO);
        cmp(b, NFT_CMP_EQ, &udp, 1);
        payload(b, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2);
        cmp(b, NFT_CMP_EQ, &dns, 2);
        redirect(b, dns_port);
        rule_end(b);

        chain(b, "filter_out", "filter", 0, NF_DROP);
        rule_begin(b, "filter_out");
        expr_begin(b, "ct");
        attr_be32(b, NFTA_CT_DREG, NFT_REG_1);
        attr_be32(b, NFTA_CT_KEY, NFT_CT_STATE);
        expr_end(b);
        mask(b, &state, 4);
        cmp(b, NFT_CMP_NEQ, &zero, 4);
        verdict(b, NF_ACCEPT);
        rule_end(b);
        daddr_rule(b, "filter_out", AF_INET, loop4, 8, NF_ACCEPT);
        daddr_rule(b, "filter_out", AF_INET, own4, 32, NF_ACCEPT);
        daddr_rule(b, "filter_out", AF_INET6, loop6, 128, NF_ACCEPT);
        daddr_rule(b, "filter_out", AF_INET6, own6, 128, NF_ACCEPT);

        msg_begin(b, NFNL_MSG_BATCH_END, 0, AF_UNSPEC, NFNL_SUBSYS_NFTABLES);
        return b->over ? -E2BIG : 0;
}

int nft_egress_load(uint16_t tcp_port, uint16_t dns_port, const char *addr4, const char *addr6,
                    int *ret_errno)
{
        static struct batch b;
        struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
        uint32_t first, last, acked = 0;
        int fd, r, e = 0;

        memset(&b, 0, sizeof(b));
        r = build(&b, tcp_port, dns_port, addr4, addr6);
        if (r < 0)
                return r;
        /* the acknowledged messages: the table's to the last rule's (not the batch's ends) */
        first = 2;
        last = b.seq - 1;
        fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
        if (fd < 0) {
                *ret_errno = errno;
                return -ENOTSUP;
        }
        if (sendto(fd, b.buf, b.len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0) {
                e = errno;
                close(fd);
                *ret_errno = e;
                return -EIO;
        }
        while (acked < last - first + 1 && !e) {
                _Alignas(struct nlmsghdr) char buf[8192];
                ssize_t n = recv(fd, buf, sizeof(buf), 0);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        e = n < 0 ? errno : EIO;
                        break;
                }
                for (struct nlmsghdr *nh = (struct nlmsghdr *)buf; NLMSG_OK(nh, (size_t)n);
                     nh = NLMSG_NEXT(nh, n)) {
                        const struct nlmsgerr *er = NLMSG_DATA(nh);

                        if (nh->nlmsg_type != NLMSG_ERROR || nh->nlmsg_seq < first ||
                            nh->nlmsg_seq > last)
                                continue;
                        if (er->error) {
                                e = -er->error;
                                break;
                        }
                        acked++;
                }
        }
        close(fd);
        if (e) {
                *ret_errno = e;
                return -EPERM;
        }
        return 0;
}
