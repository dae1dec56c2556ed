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
        test_name_denied();
        return failures ? 1 : 0;
}
