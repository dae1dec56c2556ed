/* `csandbox-import --vault-ca HOST:PORT`: the Agent Vault pre-flight's one request (reference
 * §8.9), GET http://HOST:PORT/_agent-vault/ca, asked directly (never through a proxy the
 * environment names) within 5 s. It lives in the helper because it needs libcurl, which the
 * binary every launch starts does not load. Exit 0 with the answer's body on stdout; exit 1
 * with one line saying why on stdout. */
#include "cmd_image.h"

#include <curl/curl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VAULT_CA_TIMEOUT_MS 5000L
#define VAULT_CA_MAX        (1u << 20) /* a certificate and a few short fields */

struct body {
        char *s;
        size_t len;
        bool too_big;
};

static size_t body_add(char *data, size_t size, size_t n, void *ctx)
{
        struct body *b = ctx;
        size_t add = size * n;
        char *s;

        if (b->len + add > VAULT_CA_MAX) {
                b->too_big = true;
                return 0;
        }
        s = realloc(b->s, b->len + add + 1);
        if (!s)
                return 0;
        memcpy(s + b->len, data, add);
        b->s = s;
        b->len += add;
        s[b->len] = '\0';
        return add;
}

int cmd_vault_ca(int argc, char **argv)
{
        char url[1024], errbuf[CURL_ERROR_SIZE] = "";
        struct body b = {0};
        long status = 0;
        bool ok = false;
        CURLcode rc;
        CURL *h;

        if (argc != 1 || !argv[0][0] || strpbrk(argv[0], "/?#@ \t\r\n") ||
            snprintf(url, sizeof(url), "http://%s/_agent-vault/ca", argv[0]) >= (int)sizeof(url)) {
                printf("the proxy address `%.200s` is not HOST:PORT\n", argc ? argv[0] : "");
                return 1;
        }
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0 || !(h = curl_easy_init())) {
                printf("libcurl could not start\n");
                return 1;
        }
        curl_easy_setopt(h, CURLOPT_URL, url);
        /* Directly: no proxy from http_proxy, all_proxy or anywhere else. */
        curl_easy_setopt(h, CURLOPT_PROXY, "");
        curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http");
        curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, VAULT_CA_TIMEOUT_MS);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, body_add);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
        rc = curl_easy_perform(h);
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_cleanup(h);
        if (b.too_big)
                printf("its answer is larger than %u bytes\n", VAULT_CA_MAX);
        else if (rc != CURLE_OK)
                printf("%s\n", errbuf[0] ? errbuf : curl_easy_strerror(rc));
        else if (status != 200)
                printf("it answered HTTP %ld\n", status);
        else if (!b.s || memchr(b.s, '\0', b.len))
                printf("its answer is empty or not text\n");
        else
                ok = fwrite(b.s, 1, b.len, stdout) == b.len;
        free(b.s);
        return ok ? 0 : 1;
}
