/* The first bytes of a connection and DNS queries, read with every length checked against
 * what was received (see egress_wire.h). */
#include "egress_wire.h"

#include <ctype.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>

static unsigned get16(const uint8_t *p)
{
        return (unsigned)p[0] << 8 | p[1];
}

static void put16(uint8_t *p, unsigned v)
{
        p[0] = (uint8_t)(v >> 8);
        p[1] = (uint8_t)v;
}

/* A host name into name: lower case, a safe alphabet, no empty label; one trailing dot
 * (the root) is dropped. */
static bool name_take(const uint8_t *p, size_t len, char *name)
{
        if (len && p[len - 1] == '.')
                len--;
        if (len == 0 || len >= EGRESS_NAME_MAX)
                return false;
        for (size_t i = 0; i < len; i++) {
                int c = tolower(p[i]);

                if (!(isalnum(c) || c == '-' || c == '_' || c == '.') || (c & 0x80))
                        return false;
                /* no empty label: nothing starts with, doubles or (now) ends with a dot */
                if (c == '.' && (i == 0 || i == len - 1 || p[i - 1] == '.'))
                        return false;
                name[i] = (char)c;
        }
        name[len] = '\0';
        return true;
}

/* A ClientHello in one TLS record (all clients send it so): its server_name. */
static enum egress_first tls_name(const uint8_t *b, size_t len, char *name)
{
        size_t rec, end, p, n;
        bool found = false;

        if (len < 5)
                return EGRESS_FIRST_MORE;
        rec = get16(b + 3);
        if (b[1] != 3 || rec < 4 || rec > EGRESS_FIRST_MAX - 5)
                return EGRESS_FIRST_UNKNOWN;
        if (len < 5 + rec)
                return EGRESS_FIRST_MORE;
        end = 5 + rec;
        if (b[5] != 1) /* client_hello */
                return EGRESS_FIRST_UNKNOWN;
        n = (size_t)b[6] << 16 | get16(b + 7);
        if (9 + n < end)
                end = 9 + n;
        p = 9 + 2 + 32; /* version, random */
        if (p + 1 > end)
                return EGRESS_FIRST_UNKNOWN;
        p += 1 + b[p]; /* session id */
        if (p + 2 > end)
                return EGRESS_FIRST_UNKNOWN;
        p += 2 + get16(b + p); /* cipher suites */
        if (p + 1 > end)
                return EGRESS_FIRST_UNKNOWN;
        p += 1 + b[p]; /* compression methods */
        if (p + 2 > end)
                return EGRESS_FIRST_NO_NAME; /* no extensions */
        n = get16(b + p);
        p += 2;
        if (p + n < end)
                end = p + n;
        while (p + 4 <= end) {
                unsigned type = get16(b + p);
                size_t elen = get16(b + p + 2), q, qend;

                p += 4;
                if (p + elen > end)
                        return EGRESS_FIRST_UNKNOWN;
                if (type == 0xfe0d) /* encrypted_client_hello: the real name is hidden */
                        return EGRESS_FIRST_NO_NAME;
                if (type == 0 && !found) {
                        /* server_name_list: one host_name entry */
                        if (elen < 5 || get16(b + p) + 2u > elen || b[p + 2] != 0)
                                return EGRESS_FIRST_UNKNOWN;
                        q = p + 3;
                        qend = q + 2 + get16(b + q);
                        if (qend > p + elen || !name_take(b + q + 2, qend - q - 2, name))
                                return EGRESS_FIRST_UNKNOWN;
                        found = true;
                }
                p += elen;
        }
        return found ? EGRESS_FIRST_TLS : EGRESS_FIRST_NO_NAME;
}

/* An HTTP/1 request's head: its one Host header, without a port. */
static enum egress_first http_name(const uint8_t *b, size_t len, char *name)
{
        const uint8_t *end = NULL, *p, *line;
        bool found = false;
        size_t i;

        /* a method token, then a space */
        for (i = 0; i < len && i < 16 && isupper(b[i]); i++)
                ;
        if (i == len)
                return i < 16 ? EGRESS_FIRST_MORE : EGRESS_FIRST_UNKNOWN;
        if (i == 0 || b[i] != ' ')
                return EGRESS_FIRST_UNKNOWN;
        for (i = 3; i < len && !end; i++)
                if (b[i - 3] == '\r' && b[i - 2] == '\n' && b[i - 1] == '\r' && b[i] == '\n')
                        end = b + i - 1;
        if (!end)
                return len >= 8192 ? EGRESS_FIRST_UNKNOWN : EGRESS_FIRST_MORE;
        line = memchr(b, '\n', (size_t)(end - b));
        while (line && line + 1 < end) {
                const uint8_t *next, *v, *ve;

                line++;
                next = memchr(line, '\n', (size_t)(end - line) + 1);
                if (!next)
                        break;
                if ((size_t)(next - line) > 5 && strncasecmp((const char *)line, "host:", 5) == 0) {
                        if (found)
                                return EGRESS_FIRST_UNKNOWN; /* two Host headers */
                        v = line + 5;
                        ve = next;
                        if (ve > v && ve[-1] == '\r')
                                ve--;
                        while (v < ve && (*v == ' ' || *v == '\t'))
                                v++;
                        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
                                ve--;
                        if (v < ve && *v == '[')
                                return EGRESS_FIRST_UNKNOWN; /* an IPv6 literal */
                        for (p = v; p < ve && *p != ':'; p++)
                                ;
                        if (!name_take(v, (size_t)(p - v), name))
                                return EGRESS_FIRST_UNKNOWN;
                        found = true;
                }
                line = next;
        }
        return found ? EGRESS_FIRST_HTTP : EGRESS_FIRST_UNKNOWN;
}

enum egress_first egress_first_name(const uint8_t *buf, size_t len, char *name)
{
        name[0] = '\0';
        if (len == 0)
                return EGRESS_FIRST_MORE;
        if (len > EGRESS_FIRST_MAX)
                len = EGRESS_FIRST_MAX;
        if (buf[0] == 0x16)
                return tls_name(buf, len, name);
        return http_name(buf, len, name);
}

int egress_dns_parse(const uint8_t *msg, size_t len, struct egress_dns_query *q)
{
        size_t p = 12, n = 0;

        memset(q, 0, sizeof(*q));
        if (len < 12 || len > 4096)
                return -1;
        q->id = (uint16_t)get16(msg);
        /* a query (QR 0), opcode QUERY, one question, no answers */
        if ((msg[2] & 0x80) || (msg[2] & 0x78) || get16(msg + 4) != 1 || get16(msg + 6) != 0 ||
            get16(msg + 8) != 0)
                return -1;
        q->rd = msg[2] & 1;
        for (;;) {
                size_t l;

                if (p >= len)
                        return -1;
                l = msg[p++];
                if (l == 0)
                        break;
                if (l > 63 || p + l > len || n + l + 1 >= EGRESS_NAME_MAX)
                        return -1; /* also compression pointers, never in a question */
                if (n)
                        q->name[n++] = '.';
                for (size_t i = 0; i < l; i++) {
                        int c = tolower(msg[p + i]);

                        if (!(isalnum(c) || c == '-' || c == '_') || (c & 0x80))
                                return -1;
                        q->name[n++] = (char)c;
                }
                p += l;
        }
        q->name[n] = '\0';
        if (n == 0 || p + 4 > len)
                return -1;
        q->qtype = (uint16_t)get16(msg + p);
        q->qclass = (uint16_t)get16(msg + p + 2);
        q->question_end = p + 4;
        return 0;
}

size_t egress_dns_answer(const uint8_t *msg, const struct egress_dns_query *q, unsigned rcode,
                         const uint8_t (*addrs)[16], size_t n, uint32_t ttl, uint8_t *out,
                         size_t cap)
{
        size_t alen = q->qtype == EGRESS_DNS_AAAA ? 16 : 4, p, count = 0;

        if (cap < 512 || q->question_end > cap || q->question_end < 12)
                return 0;
        memcpy(out, msg, q->question_end);
        out[2] = (uint8_t)(0x80 | q->rd);         /* a response, opcode QUERY, RD as asked */
        out[3] = (uint8_t)(0x80 | (rcode & 0xf)); /* recursion available */
        put16(out + 6, 0);
        put16(out + 8, 0);
        put16(out + 10, 0);
        p = q->question_end;
        for (size_t i = 0; i < n && rcode == EGRESS_DNS_NOERROR; i++) {
                if (p + 12 + alen > 512)
                        break;
                put16(out + p, 0xc00c); /* the question's name */
                put16(out + p + 2, q->qtype);
                put16(out + p + 4, 1);
                out[p + 6] = (uint8_t)(ttl >> 24);
                out[p + 7] = (uint8_t)(ttl >> 16);
                out[p + 8] = (uint8_t)(ttl >> 8);
                out[p + 9] = (uint8_t)ttl;
                put16(out + p + 10, (unsigned)alen);
                memcpy(out + p + 12, addrs[i], alen);
                p += 12 + alen;
                count++;
        }
        put16(out + 6, (unsigned)count);
        return p;
}

/* name[..n] as an allowlist name: labels of letters, digits, '-' and '_' joined by single
 * dots, lower-cased, one trailing dot dropped. */
static bool target_name(const uint8_t *a, size_t n, char *name)
{
        if (n && a[n - 1] == '.')
                n--;
        if (n == 0 || n >= EGRESS_NAME_MAX)
                return false;
        for (size_t i = 0; i < n; i++) {
                uint8_t c = a[i];

                if (c == '.' ? (i == 0 || i == n - 1 || a[i - 1] == '.')
                             : !(isalnum(c) || c == '-' || c == '_'))
                        return false;
                name[i] = (char)tolower(c);
        }
        name[n] = '\0';
        return true;
}

int egress_proxy_target(const uint8_t *buf, size_t len, char *name, uint16_t *port)
{
        const uint8_t *eol = NULL, *t, *sp, *a, *end, *colon = NULL;
        size_t m = 0;
        unsigned long v = 0;
        uint16_t dflt = 0;

        *port = 0;
        while (m < len && m < 16 && buf[m] >= 'A' && buf[m] <= 'Z')
                m++;
        if (m < len && (m == 0 || m == 16 || buf[m] != ' '))
                return -1;
        for (size_t i = 0; i + 1 < len; i++)
                if (buf[i] == '\r' && buf[i + 1] == '\n') {
                        eol = buf + i;
                        break;
                }
        if (!eol)
                return len >= EGRESS_FIRST_MAX ? -1 : 2;
        t = buf + m + 1;
        if (t >= eol)
                return -1;
        sp = memchr(t, ' ', (size_t)(eol - t));
        if (!sp || sp == t)
                return -1;
        if (m == 7 && memcmp(buf, "CONNECT", 7) == 0) {
                a = t;
                end = sp;
        } else if (*t == '/' || (*t == '*' && sp == t + 1)) {
                return 0;
        } else if (sp - t > 7 && strncasecmp((const char *)t, "http://", 7) == 0) {
                a = t + 7;
                dflt = 80;
        } else if (sp - t > 8 && strncasecmp((const char *)t, "https://", 8) == 0) {
                a = t + 8;
                dflt = 443;
        } else {
                return -1;
        }
        if (dflt)
                for (end = a; end < sp && *end != '/' && *end != '?' && *end != '#'; end++)
                        ;
        for (const uint8_t *c = a; c < end; c++) {
                if (*c == '@' || *c == '[')
                        return -1; /* userinfo, an address literal: no name to check */
                if (*c == ':')
                        colon = c;
        }
        if (colon) {
                if (colon + 1 == end || end - colon - 1 > 5)
                        return -1;
                for (const uint8_t *c = colon + 1; c < end; c++) {
                        if (!isdigit(*c))
                                return -1;
                        v = v * 10 + (unsigned long)(*c - '0');
                }
                if (v == 0 || v > 65535)
                        return -1;
                *port = (uint16_t)v;
        } else if (!dflt) {
                return -1; /* CONNECT names its port */
        } else {
                *port = dflt;
        }
        return target_name(a, (size_t)((colon ? colon : end) - a), name) ? 1 : -1;
}

/* ---- HTTP/1 requests, one after another ---------------------------------------------- */

enum { H_HEAD, H_LENGTH, H_CHUNK_SIZE, H_CHUNK_DATA, H_CHUNK_END, H_TRAILER, H_OPAQUE };

#define CHUNK_LINE_MAX 4096 /* a chunk-size line, its extensions included */

void egress_http_init(struct egress_http *h)
{
        memset(h, 0, sizeof(*h));
        h->state = H_HEAD;
}

static bool tchar(uint8_t c)
{
        return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* The length of the line at b (its CRLF included), 0 when no CRLF is within max bytes of
 * len, (size_t)-1 for a bare CR or LF or a control byte other than HT in it. */
static size_t line_len(const uint8_t *b, size_t len, size_t max)
{
        for (size_t i = 0; i < len && i < max; i++) {
                if (b[i] == '\r') {
                        if (i + 1 == len)
                                return 0;
                        return b[i + 1] == '\n' ? i + 2 : (size_t)-1;
                }
                if (b[i] == '\n' || b[i] == 0x7f || (b[i] < 0x20 && b[i] != '\t'))
                        return (size_t)-1;
        }
        return 0;
}

/* A header field line (CRLF excluded): name, colon, value; name[..nlen] and the value
 * without its surrounding blanks. false for a folded line or a malformed name. */
static bool field(const uint8_t *l, size_t n, const uint8_t **v, size_t *vlen, size_t *nlen)
{
        size_t i = 0;

        while (i < n && tchar(l[i]))
                i++;
        if (i == 0 || i == n || l[i] != ':')
                return false; /* also a folded line (SP or HT first) and "Name :" */
        *nlen = i++;
        while (i < n && (l[i] == ' ' || l[i] == '\t'))
                i++;
        while (n > i && (l[n - 1] == ' ' || l[n - 1] == '\t'))
                n--;
        *v = l + i;
        *vlen = n - i;
        return true;
}

static bool named(const uint8_t *l, size_t nlen, const char *name)
{
        return nlen == strlen(name) && strncasecmp((const char *)l, name, nlen) == 0;
}

/* The head b[..n] (its empty line included) into h's next state; NULL or why not. */
static const char *head_take(struct egress_http *h, const uint8_t *b, size_t n)
{
        static const char *const bad_line = "a malformed HTTP/1 request line";
        size_t m = 0, p, l;
        const uint8_t *t, *sp;
        bool has_len = false, chunked = false;
        uint64_t length = 0;

        h->flags = 0;
        while (m < n && m < 16 && b[m] >= 'A' && b[m] <= 'Z')
                m++;
        if (m == 0 || m >= n || b[m] != ' ')
                return bad_line;
        l = line_len(b, n, n);
        if (l == 0 || l == (size_t)-1 || l < m + 12)
                return bad_line;
        t = b + m + 1;
        sp = memchr(t, ' ', l - m - 1);
        if (!sp || sp == t || (size_t)(b + l - 2 - sp) != 9 ||
            (memcmp(sp + 1, "HTTP/1.1", 8) != 0 && memcmp(sp + 1, "HTTP/1.0", 8) != 0))
                return bad_line;
        for (const uint8_t *c = t; c < sp; c++)
                if (*c <= 0x20 || *c >= 0x7f)
                        return bad_line;
        if (m == 7 && memcmp(b, "CONNECT", 7) == 0)
                h->flags |= EGRESS_HTTP_CONNECT;
        for (p = l; p < n;) {
                const uint8_t *v;
                size_t vlen, nlen;

                l = line_len(b + p, n - p, n - p);
                if (l == 0 || l == (size_t)-1)
                        return "a bare CR or LF or a control byte in a request head";
                if (l == 2)
                        break; /* the empty line: the head's end */
                if (!field(b + p, l - 2, &v, &vlen, &nlen))
                        return "a malformed or folded header line";
                if (named(b + p, nlen, "content-length")) {
                        uint64_t x = 0;

                        if (vlen == 0 || vlen > 18)
                                return "a bad Content-Length";
                        for (size_t i = 0; i < vlen; i++) {
                                if (!isdigit(v[i]))
                                        return "a bad Content-Length";
                                x = x * 10 + (uint64_t)(v[i] - '0');
                        }
                        if (has_len && x != length)
                                return "differing Content-Lengths";
                        has_len = true;
                        length = x;
                } else if (named(b + p, nlen, "transfer-encoding")) {
                        if (chunked || vlen != 7 || strncasecmp((const char *)v, "chunked", 7) != 0)
                                return "a Transfer-Encoding other than one chunked";
                        chunked = true;
                } else if (named(b + p, nlen, "upgrade")) {
                        h->flags |= EGRESS_HTTP_UPGRADE;
                }
                p += l;
        }
        if (has_len && chunked)
                return "both Content-Length and Transfer-Encoding";
        if (h->flags)
                h->state = H_OPAQUE;
        else if (chunked)
                h->state = H_CHUNK_SIZE;
        else if (has_len && length)
                h->state = H_LENGTH, h->left = length;
        else
                h->state = H_HEAD; /* a request without either has no body */
        return NULL;
}

static size_t http_bad(struct egress_http *h, enum egress_http_what *what, const char *why)
{
        h->why = why;
        *what = EGRESS_HTTP_BAD;
        return 0;
}

size_t egress_http_step(struct egress_http *h, const uint8_t *buf, size_t len,
                        enum egress_http_what *what)
{
        size_t n, i;
        uint64_t size = 0;

        *what = EGRESS_HTTP_MORE;
        if (len == 0)
                return 0;
        switch (h->state) {
        case H_HEAD:
                if (buf[0] == '\r' || buf[0] == '\n') {
                        /* an empty line before a request (after an old client's POST body) */
                        if (buf[0] == '\n' || len < 2)
                                return buf[0] == '\n' ? http_bad(h, what, "a bare LF") : 0;
                        if (buf[1] != '\n')
                                return http_bad(h, what, "a bare CR");
                        *what = EGRESS_HTTP_SKIP;
                        return 2;
                }
                for (i = 3; i < len && i < EGRESS_FIRST_MAX; i++)
                        if (buf[i] == '\n' && buf[i - 1] == '\r' && buf[i - 2] == '\n' &&
                            buf[i - 3] == '\r')
                                break;
                if (i >= EGRESS_FIRST_MAX)
                        return http_bad(h, what, "a request head longer than the proxy reads");
                if (i >= len)
                        return 0;
                {
                        const char *why = head_take(h, buf, i + 1);

                        if (why)
                                return http_bad(h, what, why);
                }
                *what = EGRESS_HTTP_HEAD;
                return i + 1;
        case H_LENGTH:
        case H_CHUNK_DATA:
                n = len < h->left ? len : (size_t)h->left;
                h->left -= n;
                if (h->left == 0)
                        h->state = h->state == H_LENGTH ? H_HEAD : H_CHUNK_END;
                *what = EGRESS_HTTP_BODY;
                return n;
        case H_CHUNK_END:
                if (len < 2)
                        return 0;
                if (buf[0] != '\r' || buf[1] != '\n')
                        return http_bad(h, what, "a chunk longer than its size");
                h->state = H_CHUNK_SIZE;
                *what = EGRESS_HTTP_BODY;
                return 2;
        case H_CHUNK_SIZE:
                n = line_len(buf, len, CHUNK_LINE_MAX);
                if (n == (size_t)-1 || (n == 0 && len >= CHUNK_LINE_MAX))
                        return http_bad(h, what, "a bad chunk-size line");
                if (n == 0)
                        return 0;
                for (i = 0; i < n - 2 && isxdigit(buf[i]); i++) {
                        if (i == 15)
                                return http_bad(h, what, "a chunk size too large");
                        size =
                            size << 4 | (uint64_t)(isdigit(buf[i]) ? buf[i] - '0'
                                                                   : (tolower(buf[i]) - 'a' + 10));
                }
                if (i == 0)
                        return http_bad(h, what, "a bad chunk size");
                while (i < n - 2 && (buf[i] == ' ' || buf[i] == '\t'))
                        i++;
                if (i < n - 2 && buf[i] != ';')
                        return http_bad(h, what, "a bad chunk size");
                h->left = size;
                h->state = size ? H_CHUNK_DATA : H_TRAILER;
                h->trailer = 0;
                *what = EGRESS_HTTP_BODY;
                return n;
        case H_TRAILER:
                n = line_len(buf, len, EGRESS_FIRST_MAX - h->trailer);
                if (n == (size_t)-1 || (n == 0 && len >= EGRESS_FIRST_MAX - h->trailer))
                        return http_bad(h, what, "a bad or too long trailer");
                if (n == 0)
                        return 0;
                if (n > 2) {
                        const uint8_t *v;
                        size_t vlen, nlen;

                        if (!field(buf, n - 2, &v, &vlen, &nlen))
                                return http_bad(h, what, "a malformed or folded trailer line");
                        h->trailer += n;
                } else {
                        h->state = H_HEAD;
                }
                *what = EGRESS_HTTP_BODY;
                return n;
        default: /* H_OPAQUE */
                *what = EGRESS_HTTP_BODY;
                return len;
        }
}
