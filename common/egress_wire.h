/* The bytes csandbox's egress proxy and resolver (runner/egress_proxy.c, egress_dns.c)
 * read from a session: the name a TCP connection's first bytes give (a TLS ClientHello's
 * SNI, an HTTP/1 Host), and a DNS query. Bounded, no allocation; everything in them is hostile. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#define EGRESS_NAME_MAX  254   /* a DNS name, its NUL included */
#define EGRESS_FIRST_MAX 16384 /* what the proxy reads at most before it decides */

enum egress_first {
        EGRESS_FIRST_MORE = 0,     /* not enough bytes yet */
        EGRESS_FIRST_TLS = 1,      /* name: the ClientHello's server name */
        EGRESS_FIRST_HTTP = 2,     /* name: the Host header's, without its port */
        EGRESS_FIRST_NO_NAME = -1, /* TLS without SNI, or with an encrypted ClientHello */
        EGRESS_FIRST_UNKNOWN = -2, /* neither TLS nor HTTP/1, or malformed */
};

/* What the first len bytes of a connection say; name (EGRESS_NAME_MAX bytes) lower case,
 * without a trailing dot, only letters, digits, '-', '_' and '.' (an address literal
 * stays as it is, and is never an allowed name). */
enum egress_first egress_first_name(const uint8_t *buf, size_t len, char *name);

/* Where an HTTP/1 request asks a proxy to connect: 1 with name and port (a CONNECT target,
 * or an absolute URI's authority, port 80 or 443 by default); 0 for a request of the server
 * itself (origin form: "/path", "*"); 2 when the request line is not complete yet; -1 for
 * anything else (not HTTP/1, userinfo in the URI, an address literal, a bad name). */
int egress_proxy_target(const uint8_t *buf, size_t len, char *name, uint16_t *port);

/* A bounded streaming reader of the HTTP/1 requests a client sends on one connection, so
 * the proxy judges every request of it (pipelined, keep-alive), not only the first: each
 * step says what the bytes at the front of the buffer are. A request's head must be whole
 * in EGRESS_FIRST_MAX bytes; its body is passed by Content-Length or the chunked coding
 * (trailers included). What two servers could read two ways is refused: Content-Length with
 * Transfer-Encoding, differing Content-Lengths, a coding other than chunked, a bad chunk
 * size, a folded header line, a bare CR or LF, a control byte. */
enum egress_http_what {
        EGRESS_HTTP_MORE = 0, /* the front is incomplete: nothing taken, read more after it */
        EGRESS_HTTP_HEAD,     /* a whole request head: judge it, then pass it on */
        EGRESS_HTTP_BODY,     /* body bytes (chunk sizes and trailers included): pass them on */
        EGRESS_HTTP_SKIP,     /* empty lines before a request line: dropped */
        EGRESS_HTTP_BAD,      /* malformed or ambiguous: end the connection (why says why) */
};

#define EGRESS_HTTP_CONNECT 1u /* flags of a head: a CONNECT */
#define EGRESS_HTTP_UPGRADE 2u /* asks to switch protocols (an Upgrade header) */

struct egress_http {
        int state;
        uint64_t left;   /* body or chunk bytes still to pass */
        size_t trailer;  /* trailer bytes so far */
        unsigned flags;  /* of the last head */
        const char *why; /* of the last EGRESS_HTTP_BAD */
};

void egress_http_init(struct egress_http *h);
/* What the front of buf[..len] is: *what, and how many bytes of it (0 for MORE and BAD).
 * After a head flagged CONNECT or UPGRADE every further byte is BODY (the caller decides
 * whether the server switched). */
size_t egress_http_step(struct egress_http *h, const uint8_t *buf, size_t len,
                        enum egress_http_what *what);

struct egress_dns_query {
        uint16_t id;
        uint16_t qtype;
        uint16_t qclass;
        uint8_t rd;
        size_t question_end; /* offset of the byte after the question */
        char name[EGRESS_NAME_MAX];
};

/* 0: one well-formed standard query; -1: anything else. */
int egress_dns_parse(const uint8_t *msg, size_t len, struct egress_dns_query *q);

/* The answer to q (whose message is msg) in out (cap bytes, at least 512): rcode, and the
 * n addresses (4 or 16 bytes each, by q's type) as records with ttl. Its length, or 0. */
size_t egress_dns_answer(const uint8_t *msg, const struct egress_dns_query *q, unsigned rcode,
                         const uint8_t (*addrs)[16], size_t n, uint32_t ttl, uint8_t *out,
                         size_t cap);

#define EGRESS_DNS_NOERROR  0
#define EGRESS_DNS_FORMERR  1
#define EGRESS_DNS_SERVFAIL 2
#define EGRESS_DNS_NXDOMAIN 3
#define EGRESS_DNS_REFUSED  5
#define EGRESS_DNS_A        1
#define EGRESS_DNS_AAAA     28
