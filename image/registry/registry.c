/* The OCI distribution API (v2) client: manifests, the token dance and verified, parallel,
 * resumable blob downloads into an OCI layout. HTTP, TLS and redirects are libcurl's;
 * references, credentials and CAs come from registry-access.c. */
#include "registry.h"
#include "registry-private.h"

#include "../store/store-write.h"

#include "../../common/cleanup.h"
#include "../../common/error.h"
#include "../../common/fileio.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- HTTP ---- */

static void header_value(const char *line, size_t n, const char *name, char *out, size_t max)
{
        size_t nl = strlen(name), v;

        if (n <= nl || strncasecmp(line, name, nl) != 0)
                return;
        for (v = nl; v < n && (line[v] == ' ' || line[v] == '\t'); v++)
                ;
        while (n > v && (line[n - 1] == '\r' || line[n - 1] == '\n' || line[n - 1] == ' '))
                n--;
        snprintf(out, max, "%.*s", (int)(n - v), line + v);
}

static size_t resp_header(char *line, size_t size, size_t nitems, void *opaque)
{
        struct resp *h = opaque;
        size_t n = size * nitems;

        if (n >= 5 && strncmp(line, "HTTP/", 5) == 0)
                memset(h, 0, sizeof(*h));
        header_value(line, n, "www-authenticate:", h->challenge, sizeof(h->challenge));
        header_value(line, n, "content-type:", h->content_type, sizeof(h->content_type));
        header_value(line, n, "content-range:", h->content_range, sizeof(h->content_range));
        header_value(line, n, "retry-after:", h->retry_after, sizeof(h->retry_after));
        return n;
}

struct membuf {
        char *buf;
        size_t len, max;
        bool over;
};

static size_t membuf_write(char *p, size_t size, size_t nitems, void *opaque)
{
        struct membuf *m = opaque;
        size_t n = size * nitems;
        char *nb;

        if (m->len + n > m->max) {
                m->over = true;
                return 0;
        }
        nb = realloc(m->buf, m->len + n + 1);
        if (!nb)
                return 0;
        m->buf = nb;
        memcpy(m->buf + m->len, p, n);
        m->len += n;
        m->buf[m->len] = '\0';
        return n;
}

CURL *reg_easy(struct reg *g, const char *url, struct resp *h, char errbuf[CURL_ERROR_SIZE])
{
        CURL *c = curl_easy_init();
        const char *protos = g->tls_verify ? "https" : "http,https";

        if (!c)
                return NULL;
        errbuf[0] = '\0';
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, protos);
        curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, protos);
        curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
        curl_easy_setopt(c, CURLOPT_MAXREDIRS, 8L);
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, g->tls_verify ? 1L : 0L);
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, g->tls_verify ? 2L : 0L);
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
        /* a stalled transfer is a transient failure, retried where it stopped */
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
        curl_easy_setopt(c, CURLOPT_USERAGENT, USER_AGENT);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, resp_header);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, h);
        if (g->ca && g->tls_verify) {
                struct curl_blob blob = {
                    .data = g->ca, .len = g->ca_len, .flags = CURL_BLOB_NOCOPY};
                curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &blob);
        }
        /* credentials go to the registry only: libcurl drops them on a redirect elsewhere */
        if (g->auth == CURLAUTH_BEARER) {
                curl_easy_setopt(c, CURLOPT_HTTPAUTH, CURLAUTH_BEARER);
                curl_easy_setopt(c, CURLOPT_XOAUTH2_BEARER, g->token);
        } else if (g->auth == CURLAUTH_BASIC) {
                curl_easy_setopt(c, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
                curl_easy_setopt(c, CURLOPT_USERNAME, g->creds.user);
                curl_easy_setopt(c, CURLOPT_PASSWORD, g->creds.pass);
        }
        return c;
}

bool curl_transient(CURLcode rc)
{
        switch (rc) {
        case CURLE_COULDNT_CONNECT:
        case CURLE_PARTIAL_FILE:
        case CURLE_RECV_ERROR:
        case CURLE_SEND_ERROR:
        case CURLE_OPERATION_TIMEDOUT:
        case CURLE_GOT_NOTHING:
        case CURLE_HTTP2:
        case CURLE_HTTP2_STREAM:
                return true;
        default:
                return false;
        }
}

bool http_transient(long code)
{
        return code == 408 || code == 429 || code == 500 || code == 502 || code == 503 ||
               code == 504;
}

double reg_retry_delay(const struct reg *g, long code, const struct resp *h, int attempt,
                       struct cs_error *err)
{
        double backoff = 0.25 * (1 << attempt);
        char *end;
        long secs;

        if (!h || !h->retry_after[0])
                return backoff;
        errno = 0;
        secs = strtol(h->retry_after, &end, 10);
        if (errno || end == h->retry_after || *end || secs < 0)
                return backoff; /* an HTTP date: the backoff is as good a guess */
        if (secs > RETRY_AFTER_MAX)
                return cs_error_setx(err, EAGAIN,
                                     "the registry %s answered HTTP %ld (%s) and asks to wait %ld "
                                     "s before the next request; log in to it (`podman login "
                                     "%s`: a logged-in pull usually has a higher limit), pull "
                                     "through a mirror (a [[registry]] mirror in "
                                     "registries.conf), or try again later",
                                     g->ref->host, code,
                                     code == 429 ? "too many requests" : "unavailable", secs,
                                     g->ref->host),
                       -1;
        return secs > backoff ? (double)secs : backoff;
}

static void sleep_s(double s)
{
        struct timespec ts = {.tv_sec = (time_t)s,
                              .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};

        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

/* The registry's own words from an error answer ({"errors":[{"code","message"}]}),
 * printable and short. */
static void error_words(const char *body, size_t len, char *out, size_t max)
{
        _cleanup_json_ cJSON *j = body ? cJSON_ParseWithLength(body, len) : NULL;
        const cJSON *e = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "errors"), 0);
        const char *code = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "code"));
        const char *msg = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "message"));

        out[0] = '\0';
        if (code || msg)
                snprintf(out, max, ": %.60s%s%.120s", code ? code : "", code && msg ? " " : "",
                         msg ? msg : "");
        for (char *p = out; *p; p++)
                if (!isprint((unsigned char)*p))
                        *p = '?';
}

static int reg_token(struct reg *g, const char *challenge, struct cs_error *err)
{
        char realm[1024], service[256], scope[512], url[2400], errbuf[CURL_ERROR_SIZE];
        _cleanup_free_ char *esc_service = NULL, *esc_scope = NULL;
        struct membuf body = {.max = TOKEN_MAX};
        _cleanup_json_ cJSON *j = NULL;
        struct resp h;
        const char *tok;
        long code = 0;
        CURLcode rc = CURLE_OK;
        CURL *c;

        registry_challenge_param(challenge, "realm", realm, sizeof(realm));
        registry_challenge_param(challenge, "service", service, sizeof(service));
        registry_challenge_param(challenge, "scope", scope, sizeof(scope));
        if (!realm[0])
                return cs_error_setx(err, EPROTO,
                                     "the registry %s asks for a bearer token but names no realm",
                                     g->ep->host);
        if (strncmp(realm, "https://", 8) != 0 &&
            !(strncmp(realm, "http://", 7) == 0 && !g->tls_verify))
                return cs_error_setx(err, EPROTO,
                                     "the registry %s sends for tokens to `%.200s`, which is not "
                                     "https (--tls-verify=false allows plain http)",
                                     g->ep->host, realm);
        if (!scope[0])
                snprintf(scope, sizeof(scope), "repository:%s:pull", g->ep->repo);
        c = reg_easy(g, realm, &h, errbuf);
        if (!c || !(esc_service = curl_easy_escape(c, service, 0)) ||
            !(esc_scope = curl_easy_escape(c, scope, 0))) {
                curl_easy_cleanup(c);
                return cs_error_set(err, ENOMEM, "token request");
        }
        snprintf(url, sizeof(url), "%s%cservice=%s&scope=%s", realm, strchr(realm, '?') ? '&' : '?',
                 esc_service, esc_scope);
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
        curl_easy_setopt(c, CURLOPT_XOAUTH2_BEARER, NULL);
        if (g->creds.user) {
                curl_easy_setopt(c, CURLOPT_USERNAME, g->creds.user);
                curl_easy_setopt(c, CURLOPT_PASSWORD, g->creds.pass);
        } else {
                curl_easy_setopt(c, CURLOPT_HTTPAUTH, CURLAUTH_NONE);
        }
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, membuf_write);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
        for (int attempt = 0; attempt < ATTEMPTS; attempt++) {
                body.len = 0;
                rc = curl_easy_perform(c);
                curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
                double wait;

                if (!(curl_transient(rc) || (rc == CURLE_OK && http_transient(code))))
                        break;
                wait = reg_retry_delay(g, code, rc == CURLE_OK ? &h : NULL, attempt, err);
                if (wait < 0) {
                        curl_easy_cleanup(c);
                        free(body.buf);
                        return -EAGAIN;
                }
                sleep_s(wait);
        }
        curl_easy_cleanup(c);
        if (rc != CURLE_OK) {
                free(body.buf);
                return cs_error_setx(err, EIO, "get a token for %s from `%.200s`: %s", g->ep->host,
                                     realm, errbuf[0] ? errbuf : curl_easy_strerror(rc));
        }
        if (code != 200) {
                free(body.buf);
                return cs_error_setx(err, EACCES,
                                     "the token service `%.200s` refused access to %s (HTTP "
                                     "%ld); %s%s%s",
                                     realm, g->ep->repo, code,
                                     g->creds.user ? "check the credentials in `"
                                                   : "log in with podman or docker login, whose "
                                                     "auth files csandbox reads",
                                     g->creds.user ? g->creds.file : "", g->creds.user ? "`" : "");
        }
        j = cJSON_ParseWithLength(body.buf, body.len);
        free(body.buf);
        tok = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "token"));
        if (!tok)
                tok = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "access_token"));
        if (!tok || !tok[0])
                return cs_error_setx(err, EPROTO, "the token service `%.200s` sent no token",
                                     realm);
        free(g->token);
        g->token = strdup(tok);
        if (!g->token)
                return cs_error_set(err, ENOMEM, "token");
        g->auth = CURLAUTH_BEARER;
        return 0;
}

/* Answer a 401: a token for Bearer, the stored credentials for Basic. */
int reg_authenticate(struct reg *g, const char *challenge, struct cs_error *err)
{
        if (strncasecmp(challenge, "bearer ", 7) == 0)
                return reg_token(g, challenge, err);
        if (strncasecmp(challenge, "basic", 5) == 0 && g->creds.user && g->auth != CURLAUTH_BASIC) {
                g->auth = CURLAUTH_BASIC;
                return 0;
        }
        if (g->creds.user)
                return cs_error_setx(err, EACCES,
                                     "the registry %s refused the credentials for %s from `%s`",
                                     g->ep->host, g->ep->repo, g->creds.file);
        return cs_error_setx(err, EACCES,
                             "the registry %s needs credentials for %s: log in with podman or "
                             "docker login (csandbox reads $REGISTRY_AUTH_FILE, "
                             "$XDG_RUNTIME_DIR/containers/auth.json, "
                             "~/.config/containers/auth.json, ~/.docker/config.json)",
                             g->ep->host, g->ep->repo);
}

/* What to do about a failed TLS handshake. */
static const char *tls_hint(const struct reg *g, CURLcode rc, char *buf, size_t max)
{
        buf[0] = '\0';
        if (rc == CURLE_SSL_CONNECT_ERROR)
                snprintf(buf, max, " (a registry that speaks plain http needs --tls-verify=false)");
        else if (rc == CURLE_PEER_FAILED_VERIFICATION && g->ca_dir[0])
                snprintf(buf, max, " (with the CAs of `%.300s` added)", g->ca_dir);
        else if (rc == CURLE_PEER_FAILED_VERIFICATION)
                snprintf(buf, max,
                         " (if your own CA signed it, put the CA in "
                         "~/.config/containers/certs.d/%s/ca.crt; --tls-verify=false skips the "
                         "check, for a test registry only)",
                         g->ep->host);
        return buf;
}

/* GET a manifest into memory, bounded by max, authenticating and retrying as needed. */
int reg_get_manifest(struct reg *g, const char *reference, char **ret, size_t *ret_len,
                     struct cs_error *err)
{
        char url[1200], errbuf[CURL_ERROR_SIZE], words[200], hint[400];
        struct membuf body = {.max = OCI_MANIFEST_MAX};
        bool authed = false;
        struct resp h;
        long code = 0;
        CURLcode rc = CURLE_OK;

        snprintf(url, sizeof(url), "%s/v2/%s/manifests/%s", g->base, g->ep->repo, reference);
        for (int attempt = 0; attempt < ATTEMPTS;) {
                struct curl_slist *hdrs = curl_slist_append(NULL, ACCEPT_MANIFESTS);
                CURL *c = reg_easy(g, url, &h, errbuf);
                int r;

                if (!c || !hdrs) {
                        curl_slist_free_all(hdrs);
                        curl_easy_cleanup(c);
                        return cs_error_set(err, ENOMEM, "manifest request");
                }
                curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
                curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, membuf_write);
                curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
                free(body.buf);
                body = (struct membuf){.max = OCI_MANIFEST_MAX};
                rc = curl_easy_perform(c);
                curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
                curl_easy_cleanup(c);
                curl_slist_free_all(hdrs);
                if (body.over) {
                        free(body.buf);
                        return cs_error_setx(err, EFBIG,
                                             "the manifest %s of %s is larger than the limit of "
                                             "%u bytes",
                                             reference, g->ref->name, OCI_MANIFEST_MAX);
                }
                /* --tls-verify=false: https unverified first, then plain http, as podman */
                if (rc == CURLE_SSL_CONNECT_ERROR && !g->tls_verify &&
                    strncmp(g->base, "https://", 8) == 0) {
                        snprintf(g->base, sizeof(g->base), "http://%s",
                                 registry_api_host(g->ep->host));
                        snprintf(url, sizeof(url), "%s/v2/%s/manifests/%s", g->base, g->ep->repo,
                                 reference);
                        continue;
                }
                if (rc == CURLE_OK && code == 401 && !authed) {
                        authed = true;
                        r = reg_authenticate(g, h.challenge, err);
                        if (r < 0) {
                                free(body.buf);
                                return r;
                        }
                        continue;
                }
                if (curl_transient(rc) || (rc == CURLE_OK && http_transient(code))) {
                        double wait = reg_retry_delay(g, rc == CURLE_OK ? code : 0,
                                                      rc == CURLE_OK ? &h : NULL, attempt + 1, err);

                        if (wait < 0) {
                                free(body.buf);
                                return -EAGAIN;
                        }
                        if (++attempt < ATTEMPTS)
                                sleep_s(wait);
                        continue;
                }
                break;
        }
        if (rc != CURLE_OK) {
                free(body.buf);
                return cs_error_setx(err, EIO, "fetch the manifest of %s from %s: %s%s",
                                     g->ref->name, g->base,
                                     errbuf[0] ? errbuf : curl_easy_strerror(rc),
                                     tls_hint(g, rc, hint, sizeof(hint)));
        }
        if (code == 200) {
                *ret = body.buf ? body.buf : strdup("");
                *ret_len = body.len;
                return *ret ? 0 : cs_error_set(err, ENOMEM, "manifest");
        }
        error_words(body.buf, body.len, words, sizeof(words));
        free(body.buf);
        if (code == 401 || code == 403)
                return cs_error_setx(err, EACCES,
                                     "the registry %s refused access to %s (HTTP %ld%s)%s%s%s",
                                     g->ep->host, g->ep->repo, code, words,
                                     g->creds.user ? "; check the credentials in `" : "",
                                     g->creds.user ? g->creds.file : "", g->creds.user ? "`" : "");
        if (code == 404)
                return cs_error_setx(err, ENOENT,
                                     "the registry %s has no image %s (HTTP 404%s); check the "
                                     "name and the tag",
                                     g->ep->host, g->ref->name, words);
        return cs_error_setx(err, EIO, "fetch the manifest of %s from %s: HTTP %ld%s", g->ref->name,
                             g->base, code, words);
}
