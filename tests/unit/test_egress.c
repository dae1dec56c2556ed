/* Unit tests for the egress policy (spec/egress.c) and the bytes its proxy and resolver
 * read (common/egress_wire.c). */
#include "common/egress_wire.h"
#include "common/error.h"
#include "spec/spec.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include "check.h"

static void test_patterns_and_matching(void)
{
        struct sandbox_spec s;
        struct cs_error err = {0};
        unsigned char a[16];

        spec_init(&s);
        CHECK(spec_egress_add_list(&s,
                                   " Example.COM , *.svc.test:8443, 192.0.2.0/24, 2001:db8::/32",
                                   "--allow-host", &err) == 0);
        CHECK(s.n_egress_hosts == 4);
        CHECK(spec_egress_name_allowed(&s, "example.com", 443));
        CHECK(spec_egress_name_allowed(&s, "example.com", 0));
        CHECK(!spec_egress_name_allowed(&s, "www.example.com", 443));
        CHECK(spec_egress_name_allowed(&s, "a.svc.test", 8443));
        CHECK(!spec_egress_name_allowed(&s, "a.svc.test", 443));
        CHECK(spec_egress_name_allowed(&s, "a.svc.test", 0)); /* DNS: any port */
        CHECK(!spec_egress_name_allowed(&s, "svc.test", 8443));
        CHECK(!spec_egress_name_allowed(&s, "evilsvc.test", 8443));
        inet_pton(AF_INET, "192.0.2.77", a);
        CHECK(spec_egress_addr_allowed(&s, AF_INET, a, 80));
        inet_pton(AF_INET, "192.0.3.1", a);
        CHECK(!spec_egress_addr_allowed(&s, AF_INET, a, 80));
        inet_pton(AF_INET6, "2001:db8:ffff::1", a);
        CHECK(spec_egress_addr_allowed(&s, AF_INET6, a, 80));
        inet_pton(AF_INET6, "2001:db9::1", a);
        CHECK(!spec_egress_addr_allowed(&s, AF_INET6, a, 80));
        spec_free(&s);
        PASS();
}

static void test_bad_patterns_name_the_setting(void)
{
        static const char *const bad[] = {"a b",    "*.",           "x.com:0", "x.com:70000",
                                          "x.com:", "192.0.2.0/33", "-",       "a..b",
                                          "*",      "ex/am.ple"};
        struct sandbox_spec s;

        spec_init(&s);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct cs_error err = {0};

                CHECKF(spec_egress_add(&s, bad[i], false, "--allow-host", &err) < 0, "%s", bad[i]);
                CHECKF(strstr(err.msg, "--allow-host") != NULL, "%s", err.msg);
        }
        CHECK(s.n_egress_hosts == 0);
        spec_free(&s);
        PASS();
}

static void test_allowlist_mode(void)
{
        struct sandbox_spec s;
        struct cs_error err = {0};

        spec_init(&s);
        s.egress = SPEC_EGRESS_ALLOWLIST;
        CHECK(spec_egress_finish(&s, "--egress", &err) == 0);
        CHECK(s.net == SPEC_NET_PASTA);
        CHECK(spec_egress_name_allowed(&s, "api.anthropic.com", 443));
        CHECK(!spec_egress_name_allowed(&s, "api.anthropic.com", 80));
        CHECK(spec_net_helper(&s) == NULL); /* no pasta */
        spec_free(&s);
        spec_init(&s);
        s.egress = SPEC_EGRESS_ALLOWLIST;
        s.net = SPEC_NET_HOST;
        CHECK(spec_egress_finish(&s, "--egress", &err) < 0);
        spec_free(&s);
        spec_init(&s);
        s.egress = SPEC_EGRESS_NONE;
        s.net = SPEC_NET_PASTA;
        CHECK(spec_egress_finish(&s, "--egress", &err) == 0 && s.net == SPEC_NET_NONE);
        spec_free(&s);
        PASS();
}

static void test_http_host(void)
{
        char name[EGRESS_NAME_MAX];
        const char *req = "GET / HTTP/1.1\r\nAccept: */*\r\nhOsT:  Example.com:8080 \r\n\r\n";

        CHECK(egress_first_name((const uint8_t *)req, strlen(req), name) == EGRESS_FIRST_HTTP);
        CHECK(strcmp(name, "example.com") == 0);
        CHECK(egress_first_name((const uint8_t *)req, 20, name) == EGRESS_FIRST_MORE);
        req = "GET / HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\n\r\n";
        CHECK(egress_first_name((const uint8_t *)req, strlen(req), name) == EGRESS_FIRST_UNKNOWN);
        req = "GET / HTTP/1.1\r\nX: y\r\n\r\n";
        CHECK(egress_first_name((const uint8_t *)req, strlen(req), name) == EGRESS_FIRST_UNKNOWN);
        /* found by fuzz_egress_first (corpus/egress_first/crash-trailing-dots) */
        req = "GET a/xs/\r\nHost\nHost: -Hb.............\r\n\r\n";
        CHECK(egress_first_name((const uint8_t *)req, strlen(req), name) == EGRESS_FIRST_UNKNOWN);
        req = "GET / HTTP/1.1\r\nHost: a..b\r\n\r\n";
        CHECK(egress_first_name((const uint8_t *)req, strlen(req), name) == EGRESS_FIRST_UNKNOWN);
        req = "GET / HTTP/1.1\r\nHost: .a.b\r\n\r\n";
        CHECK(egress_first_name((const uint8_t *)req, strlen(req), name) == EGRESS_FIRST_UNKNOWN);
        req = "GET / HTTP/1.1\r\nHost: a.b.\r\n\r\n";
        CHECK(egress_first_name((const uint8_t *)req, strlen(req), name) == EGRESS_FIRST_HTTP &&
              strcmp(name, "a.b") == 0);
        req = "\x05\x01\x00";
        CHECK(egress_first_name((const uint8_t *)req, 3, name) == EGRESS_FIRST_UNKNOWN);
        PASS();
}

/* A minimal ClientHello with one server_name (or none). */
static size_t hello(uint8_t *b, const char *sni)
{
        size_t n = sni ? strlen(sni) : 0, p = 0, ext = sni ? 9 + n : 0;
        size_t body = 2 + 32 + 1 + 4 + 2 + 2 + ext;

        b[p++] = 0x16, b[p++] = 3, b[p++] = 1;
        b[p++] = (uint8_t)((body + 4) >> 8), b[p++] = (uint8_t)(body + 4);
        b[p++] = 1, b[p++] = 0, b[p++] = (uint8_t)(body >> 8), b[p++] = (uint8_t)body;
        b[p++] = 3, b[p++] = 3;
        memset(b + p, 7, 32), p += 32;
        b[p++] = 0;                                        /* session id */
        b[p++] = 0, b[p++] = 2, b[p++] = 0x13, b[p++] = 1; /* one cipher suite */
        b[p++] = 1, b[p++] = 0;                            /* null compression */
        b[p++] = (uint8_t)(ext >> 8), b[p++] = (uint8_t)ext;
        if (sni) {
                b[p++] = 0, b[p++] = 0, b[p++] = (uint8_t)((n + 5) >> 8), b[p++] = (uint8_t)(n + 5);
                b[p++] = (uint8_t)((n + 3) >> 8), b[p++] = (uint8_t)(n + 3), b[p++] = 0;
                b[p++] = (uint8_t)(n >> 8), b[p++] = (uint8_t)n;
                memcpy(b + p, sni, n), p += n;
        }
        return p;
}

static void test_tls_sni(void)
{
        uint8_t b[512];
        char name[EGRESS_NAME_MAX];
        size_t n = hello(b, "API.Example.com");

        CHECK(egress_first_name(b, n, name) == EGRESS_FIRST_TLS);
        CHECK(strcmp(name, "api.example.com") == 0);
        CHECK(egress_first_name(b, n - 1, name) == EGRESS_FIRST_MORE);
        n = hello(b, NULL);
        CHECK(egress_first_name(b, n, name) == EGRESS_FIRST_NO_NAME);
        n = hello(b, "bad name");
        CHECK(egress_first_name(b, n, name) == EGRESS_FIRST_UNKNOWN);
        PASS();
}

static void test_dns(void)
{
        static const uint8_t q[] = {0x12, 0x34, 0x01, 0x00, 0,   1,   0,   0,   0, 0, 0, 0, 3,
                                    'A',  'p',  'I',  4,    't', 'e', 's', 't', 0, 0, 1, 0, 1};
        static const uint8_t addrs[1][16] = {{192, 0, 2, 9}};
        struct egress_dns_query d;
        uint8_t out[512];
        size_t len;

        CHECK(egress_dns_parse(q, sizeof(q), &d) == 0);
        CHECK(strcmp(d.name, "api.test") == 0 && d.qtype == 1 && d.qclass == 1 && d.id == 0x1234);
        len = egress_dns_answer(q, &d, EGRESS_DNS_NOERROR, addrs, 1, 60, out, sizeof(out));
        CHECK(len == sizeof(q) + 16);
        CHECK((out[2] & 0x80) && (out[3] & 0xf) == 0 && out[7] == 1);
        CHECK(memcmp(out + len - 4, addrs[0], 4) == 0);
        len = egress_dns_answer(q, &d, EGRESS_DNS_REFUSED, addrs, 1, 60, out, sizeof(out));
        CHECK(len == sizeof(q) && (out[3] & 0xf) == EGRESS_DNS_REFUSED && out[7] == 0);
        CHECK(egress_dns_parse(q, sizeof(q) - 1, &d) < 0);
        {
                uint8_t ptr[sizeof(q)];

                memcpy(ptr, q, sizeof(q));
                ptr[12] = 0xc0; /* a compression pointer in a question */
                CHECK(egress_dns_parse(ptr, sizeof(ptr), &d) < 0);
                memcpy(ptr, q, sizeof(q));
                ptr[2] |= 0x80; /* a response, not a query */
                CHECK(egress_dns_parse(ptr, sizeof(ptr), &d) < 0);
        }
        PASS();
}

static void test_proxy_target(void)
{
        char name[EGRESS_NAME_MAX];
        uint16_t port;
        const char *r;

        r = "GET http://A.example:8080/x?y HTTP/1.1\r\nHost: a.example:8080\r\n\r\n";
        CHECK(egress_proxy_target((const uint8_t *)r, strlen(r), name, &port) == 1);
        CHECK(strcmp(name, "a.example") == 0 && port == 8080);
        r = "GET https://b.example HTTP/1.1\r\n\r\n";
        CHECK(egress_proxy_target((const uint8_t *)r, strlen(r), name, &port) == 1);
        CHECK(strcmp(name, "b.example") == 0 && port == 443);
        r = "CONNECT c.example:22 HTTP/1.1\r\n\r\n";
        CHECK(egress_proxy_target((const uint8_t *)r, strlen(r), name, &port) == 1);
        CHECK(strcmp(name, "c.example") == 0 && port == 22);
        r = "CONNECT c.example HTTP/1.1\r\n\r\n";
        CHECK(egress_proxy_target((const uint8_t *)r, strlen(r), name, &port) == -1);
        r = "POST /hook HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
        CHECK(egress_proxy_target((const uint8_t *)r, strlen(r), name, &port) == 0);
        r = "GET http://user@evil.example@good.example/ HTTP/1.1\r\n\r\n";
        CHECK(egress_proxy_target((const uint8_t *)r, strlen(r), name, &port) == -1);
        r = "GET http://a..example/ HTTP/1.1\r\n\r\n";
        CHECK(egress_proxy_target((const uint8_t *)r, strlen(r), name, &port) == -1);
        r = "GET ftp://x.example/ HTTP/1.1\r\n\r\n";
        CHECK(egress_proxy_target((const uint8_t *)r, strlen(r), name, &port) == -1);
        r = "GET http://x.example/";
        CHECK(egress_proxy_target((const uint8_t *)r, strlen(r), name, &port) == 2);
        r = "\x16\x03\x01";
        CHECK(egress_proxy_target((const uint8_t *)r, strlen(r), name, &port) == -1);
        PASS();
}

static void test_denied_names_and_builtin_ones(void)
{
        struct sandbox_spec s;
        struct cs_error err = {0};

        spec_init(&s);
        CHECK(spec_egress_add_list(&s, "*.example.com, 192.0.2.0/24", "--allow-host", &err) == 0);
        CHECK(spec_egress_deny_list(&s, "bad.example.com, port.example.com:8080", "--deny-host",
                                    &err) == 0);
        CHECK(spec_egress_add_builtin(&s, &err) == 0);
        CHECK(spec_egress_name_denied(&s, "bad.example.com", 443));
        CHECK(spec_egress_name_denied(&s, "bad.example.com", 0));
        CHECK(spec_egress_name_denied(&s, "port.example.com", 8080));
        CHECK(!spec_egress_name_denied(&s, "port.example.com", 443));
        CHECK(!spec_egress_name_denied(&s, "port.example.com", 0)); /* DNS stays */
        CHECK(!spec_egress_name_denied(&s, "ok.example.com", 443));
        CHECK(spec_egress_name_builtin(&s, "api.anthropic.com", 443));
        CHECK(!spec_egress_name_builtin(&s, "api.anthropic.com", 8443));
        CHECK(!spec_egress_name_builtin(&s, "ok.example.com", 443));
        /* the multi-tenant telemetry intake is no built-in host */
        CHECK(!spec_egress_name_allowed(&s, "http-intake.logs.us5.datadoghq.com", 443));
        spec_free(&s);
        PASS();
}

/* The framer run over in as the proxy runs it, fed step bytes at a time: the heads' first
 * words joined by '|' into heads, the body bytes counted; false on BAD (why in *bad). */
static bool frame(const char *in, size_t len, size_t step, char *heads, size_t *body,
                  unsigned *flags, const char **bad)
{
        static uint8_t buf[EGRESS_FIRST_MAX];
        struct egress_http h;
        size_t have = 0, fed = 0;

        egress_http_init(&h);
        heads[0] = '\0';
        *body = 0;
        *flags = 0;
        *bad = NULL;
        while (fed < len || have) {
                size_t n = len - fed < step ? len - fed : step;
                enum egress_http_what w = EGRESS_HTTP_MORE;

                if (n > sizeof(buf) - have)
                        n = sizeof(buf) - have;
                memcpy(buf + have, in + fed, n);
                have += n;
                fed += n;
                for (;;) {
                        size_t k = egress_http_step(&h, buf, have, &w);

                        if (w == EGRESS_HTTP_MORE)
                                break;
                        if (w == EGRESS_HTTP_BAD) {
                                *bad = h.why;
                                return false;
                        }
                        if (w == EGRESS_HTTP_HEAD) {
                                size_t m = strcspn((const char *)buf, " ");

                                strcat(heads, heads[0] ? "|" : "");
                                strncat(heads, (const char *)buf, m);
                                *flags |= h.flags;
                        } else if (w == EGRESS_HTTP_BODY)
                                *body += k;
                        memmove(buf, buf + k, have - k);
                        have -= k;
                        if (!have)
                                break;
                }
                if (fed == len && w == EGRESS_HTTP_MORE)
                        break;
        }
        return true;
}

static void test_http_framer(void)
{
        static const struct {
                const char *in;
                const char *heads; /* NULL: refused */
                size_t body;
                unsigned flags;
        } cases[] = {
            {"GET / HTTP/1.1\r\nHost: a\r\n\r\nGET http://evil/ HTTP/1.1\r\nHost: evil\r\n\r\n",
             "GET|GET", 0, 0},
            {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nGET /"
             "CONNECT x:1 HTTP/1.1\r\n\r\n",
             "POST|CONNECT", 5, EGRESS_HTTP_CONNECT},
            /* a chunked body holding a request line is body; the request after it a head */
            {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n"
             "29;x=\"y\"\r\nGET http://evil/ HTTP/1.1\r\nHost: evil\r\n\r\n\r\n"
             "0\r\nX-T: 1\r\n\r\nPUT / HTTP/1.1\r\nHost: a\r\n\r\n",
             "POST|PUT", 10 + 41 + 2 + 3 + 8 + 2, 0},
            {"\r\nGET / HTTP/1.0\r\n\r\n", "GET", 0, 0},
            {"GET / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc", "GET", 3, 0},
            {"GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\nGET / HTTP/1.1\r\n\r\n",
             "GET", 18, EGRESS_HTTP_UPGRADE},
            {"GET / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", NULL, 0,
             0},
            {"GET / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", NULL, 0, 0},
            {"GET / HTTP/1.1\r\nContent-Length: +3\r\n\r\n", NULL, 0, 0},
            {"GET / HTTP/1.1\r\nContent-Length : 3\r\n\r\n", NULL, 0, 0},
            {"GET / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", NULL, 0, 0},
            {"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
             NULL, 0, 0},
            {"GET / HTTP/1.1\r\nHost: a\r\n b\r\n\r\n", NULL, 0, 0},
            {"GET / HTTP/1.1\nHost: a\r\n\r\n", NULL, 0, 0},
            {"GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n", NULL, 0, 0},
            {"GET / HTTP/2.0\r\n\r\n", NULL, 0, 0},
            {"GET  / HTTP/1.1\r\n\r\n", NULL, 0, 0},
            {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", NULL, 0, 0},
            {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\n", NULL, 0,
             0},
            {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nabGET / HTTP/1.1\r\n", NULL,
             0, 0},
            {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n folded\r\n\r\n", NULL, 0,
             0},
        };
        char heads[256];
        size_t body;
        unsigned flags;
        const char *bad;

        for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++)
                for (size_t step = 1; step <= 4096; step *= 64) {
                        bool ok = frame(cases[i].in, strlen(cases[i].in), step, heads, &body,
                                        &flags, &bad);

                        if (!cases[i].heads) {
                                CHECKF(!ok && bad, "case %zu step %zu: not refused (%s)", i, step,
                                       heads);
                                continue;
                        }
                        CHECKF(ok, "case %zu step %zu: refused: %s", i, step, bad);
                        CHECKF(strcmp(heads, cases[i].heads) == 0 && body == cases[i].body &&
                                   flags == cases[i].flags,
                               "case %zu step %zu: %s %zu %u", i, step, heads, body, flags);
                }
        {
                /* a head that does not end within what the proxy reads */
                static char big[EGRESS_FIRST_MAX + 64];

                memset(big, 'a', sizeof(big) - 1);
                memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
                CHECK(!frame(big, sizeof(big) - 1, 4096, heads, &body, &flags, &bad) && bad);
        }
        PASS();
}

/* The relay's only name check: denied names, a port's deny only for that port (DNS: only
 * a deny of every port refuses the name). */
static void test_name_denied(void)
{
        struct sandbox_spec s;
        struct cs_error err = {0};

        spec_init(&s);
        CHECK(spec_egress_deny_list(&s, "bad.test, *.evil.test, mail.test:25", "--deny-host",
                                    &err) == 0);
        CHECK(spec_egress_name_denied(&s, "bad.test", 0));
        CHECK(spec_egress_name_denied(&s, "bad.test", 443));
        CHECK(spec_egress_name_denied(&s, "a.evil.test", 0));
        CHECK(!spec_egress_name_denied(&s, "evil.test", 0));
        CHECK(!spec_egress_name_denied(&s, "good.test", 0));
        CHECK(!spec_egress_name_denied(&s, "mail.test", 0));
        CHECK(spec_egress_name_denied(&s, "mail.test", 25));
        CHECK(!spec_egress_name_denied(&s, "mail.test", 587));
        spec_free(&s);
        PASS();
}

int main(void)
{
        test_patterns_and_matching();
        test_bad_patterns_name_the_setting();
        test_allowlist_mode();
        test_http_host();
        test_tls_sni();
        test_dns();
        test_proxy_target();
        test_http_framer();
        test_denied_names_and_builtin_ones();
        test_name_denied();
        return failures ? 1 : 0;
}
