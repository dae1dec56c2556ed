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
