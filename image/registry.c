/* The OCI distribution API (v2) client: manifests, the token dance and verified, parallel,
 * resumable blob downloads into an OCI layout. HTTP, TLS and redirects are libcurl's;
 * references, credentials and CAs come from registry-access.c. */
#include "registry.h"
#include "registry-private.h"

#include "store-private.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"

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
        const char *protos = g->o->tls_verify ? "https" : "http,https";

        if (!c)
                return NULL;
        errbuf[0] = '\0';
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, protos);
        curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, protos);
        curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
        curl_easy_setopt(c, CURLOPT_MAXREDIRS, 8L);
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, g->o->tls_verify ? 1L : 0L);
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, g->o->tls_verify ? 2L : 0L);
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
        /* a stalled transfer is a transient failure, retried where it stopped */
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
        curl_easy_setopt(c, CURLOPT_USERAGENT, USER_AGENT);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, resp_header);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, h);
        if (g->ca && g->o->tls_verify) {
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

static void backoff(int attempt)
{
        struct timespec ts = {.tv_nsec = (250L << attempt) * 1000000L};

        while (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
        }
        nanosleep(&ts, NULL);
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
                                     g->ref->host);
        if (strncmp(realm, "https://", 8) != 0 &&
            !(strncmp(realm, "http://", 7) == 0 && !g->o->tls_verify))
                return cs_error_setx(err, EPROTO,
                                     "the registry %s sends for tokens to `%.200s`, which is not "
                                     "https (--tls-verify=false allows plain http)",
                                     g->ref->host, realm);
        if (!scope[0])
                snprintf(scope, sizeof(scope), "repository:%s:pull", g->ref->repo);
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
                if (!(curl_transient(rc) || (rc == CURLE_OK && http_transient(code))))
                        break;
                backoff(attempt);
        }
        curl_easy_cleanup(c);
        if (rc != CURLE_OK) {
                free(body.buf);
                return cs_error_setx(err, EIO, "get a token for %s from `%.200s`: %s", g->ref->host,
                                     realm, errbuf[0] ? errbuf : curl_easy_strerror(rc));
        }
        if (code != 200) {
                free(body.buf);
                return cs_error_setx(err, EACCES,
                                     "the token service `%.200s` refused access to %s (HTTP "
                                     "%ld); %s%s%s",
                                     realm, g->ref->repo, code,
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
                                     g->ref->host, g->ref->repo, g->creds.file);
        return cs_error_setx(err, EACCES,
                             "the registry %s needs credentials for %s: log in with podman or "
                             "docker login (csandbox reads $REGISTRY_AUTH_FILE, "
                             "$XDG_RUNTIME_DIR/containers/auth.json, "
                             "~/.config/containers/auth.json, ~/.docker/config.json)",
                             g->ref->host, g->ref->repo);
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
                         g->ref->host);
        return buf;
}

/* GET a manifest into memory, bounded by max, authenticating and retrying as needed. */
static int reg_get_manifest(struct reg *g, const char *reference, char **ret, size_t *ret_len,
                            struct cs_error *err)
{
        char url[1200], errbuf[CURL_ERROR_SIZE], words[200], hint[400];
        struct membuf body = {.max = OCI_MANIFEST_MAX};
        bool authed = false;
        struct resp h;
        long code = 0;
        CURLcode rc = CURLE_OK;

        snprintf(url, sizeof(url), "%s/v2/%s/manifests/%s", g->base, g->ref->repo, reference);
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
                if (rc == CURLE_SSL_CONNECT_ERROR && !g->o->tls_verify &&
                    strncmp(g->base, "https://", 8) == 0) {
                        snprintf(g->base, sizeof(g->base), "http://%s", g->ref->host);
                        snprintf(url, sizeof(url), "%s/v2/%s/manifests/%s", g->base, g->ref->repo,
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
                        if (++attempt < ATTEMPTS)
                                backoff(attempt);
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
                                     g->ref->host, g->ref->repo, code, words,
                                     g->creds.user ? "; check the credentials in `" : "",
                                     g->creds.user ? g->creds.file : "", g->creds.user ? "`" : "");
        if (code == 404)
                return cs_error_setx(err, ENOENT,
                                     "the registry %s has no image %s (HTTP 404%s); check the "
                                     "name and the tag",
                                     g->ref->host, g->ref->name, words);
        return cs_error_setx(err, EIO, "fetch the manifest of %s from %s: HTTP %ld%s", g->ref->name,
                             g->base, code, words);
}

/* ---- the pull ---- */

static void reg_free(struct reg *g)
{
        free(g->ca);
        registry_creds_free(&g->creds);
        if (g->token)
                explicit_bzero(g->token, strlen(g->token));
        free(g->token);
}

static int manifest_verified(struct reg *g, const char *reference, const char *digest, int64_t size,
                             char **ret, size_t *ret_len, char ret_digest[], struct cs_error *err)
{
        _cleanup_free_ char *body = NULL;
        unsigned char sum[32];
        unsigned int n = 32;
        size_t len;
        int r = reg_get_manifest(g, reference, &body, &len, err);

        if (r < 0)
                return r;
        EVP_Digest(body, len, sum, &n, EVP_sha256(), NULL);
        oci_digest_format(sum, ret_digest);
        if (digest && digest[0] && strcmp(ret_digest, digest) != 0)
                return cs_error_setx(err, EINVAL,
                                     "the manifest %s of %s from %s has digest %s (corrupt or "
                                     "tampered image)",
                                     digest, g->ref->name, g->base, ret_digest);
        if (size >= 0 && (int64_t)len != size)
                return cs_error_setx(err, EINVAL,
                                     "the manifest %s of %s has %zu bytes, not the %lld its "
                                     "index declares (corrupt or tampered image)",
                                     digest, g->ref->name, len, (long long)size);
        *ret = cs_take_ptr(&body);
        *ret_len = len;
        return 0;
}

static int layout_write(int dirfd, const char *manifest, size_t len, const char *digest,
                        struct cs_error *err)
{
        _cleanup_json_ cJSON *m = cJSON_ParseWithLength(manifest, len);
        _cleanup_json_ cJSON *index = cJSON_CreateObject();
        _cleanup_free_ char *text = NULL;
        const char *mt = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "mediaType"));
        cJSON *list, *d;
        char path[100];
        int r;

        _cleanup_close_ int bfd = openat(dirfd, "blobs/sha256", O_PATH | O_DIRECTORY | O_CLOEXEC);

        if (bfd < 0)
                return cs_error_set(err, errno, "open the download directory");
        snprintf(path, sizeof(path), "%.64s", store_digest_hex(digest));
        r = cs_write_file_once(bfd, path, manifest, len, 0600, err);
        if (r < 0)
                return r;
        if (!index || !cJSON_AddNumberToObject(index, "schemaVersion", 2) ||
            !(list = cJSON_AddArrayToObject(index, "manifests")) || !(d = cJSON_CreateObject()) ||
            !cJSON_AddItemToArray(list, d) ||
            !cJSON_AddStringToObject(d, "mediaType",
                                     mt ? mt : "application/vnd.oci.image.manifest.v1+json") ||
            !cJSON_AddStringToObject(d, "digest", digest) ||
            !cJSON_AddNumberToObject(d, "size", (double)len) || !(text = cJSON_Print(index)))
                return cs_error_set(err, ENOMEM, "index.json");
        r = cs_write_file_once(dirfd, "index.json", text, strlen(text), 0600, err);
        if (r == 0)
                r = cs_write_file_once(dirfd, "oci-layout", "{\"imageLayoutVersion\":\"1.0.0\"}",
                                       30, 0600, err);
        return r;
}

int registry_pull(const struct registry_ref *ref, const struct pull_options *o, int dirfd,
                  struct cs_error *err)
{
        struct reg g = {.ref = ref, .o = o};
        _cleanup_free_ char *body = NULL;
        _cleanup_free_ struct pull_blob *blobs = NULL;
        _cleanup_free_ int64_t *sizes = NULL;
        struct oci_manifest m = {0};
        char digest[OCI_DIGEST_LEN + 1], want[OCI_DIGEST_LEN + 1];
        int64_t size = -1;
        size_t len, n = 0;
        enum oci_kind kind;
        bool stored;
        int r;

        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
                return cs_error_setx(err, EIO, "initialize libcurl");
        snprintf(g.base, sizeof(g.base), "https://%s", ref->host);
        r = registry_creds_find(ref->host, ref->repo, &g.creds, err);
        if (r == 0 && o->tls_verify)
                r = registry_ca_load(ref->host, &g.ca, &g.ca_len, g.ca_dir, sizeof(g.ca_dir), err);
        if (r < 0)
                goto out;
        snprintf(want, sizeof(want), "%s", ref->digest);
        r = manifest_verified(&g, ref->digest[0] ? ref->digest : ref->tag, want, -1, &body, &len,
                              digest, err);
        for (int depth = 0; r == 0; depth++) {
                _cleanup_free_ char *next = NULL;

                r = oci_document_kind(body, len, "the registry's manifest", &kind, err);
                if (r < 0 || kind == OCI_KIND_MANIFEST)
                        break;
                if (depth >= 4) {
                        r = cs_error_setx(err, ELOOP, "image indexes nest too deeply");
                        break;
                }
                r = oci_index_select(body, len, NULL, &o->platform, want, &size, &kind, NULL, err);
                if (r < 0) {
                        r = cs_error_wrap(err, "%s", ref->name);
                        break;
                }
                r = manifest_verified(&g, want, want, size, &next, &len, digest, err);
                if (r == 0) {
                        free(body);
                        body = cs_take_ptr(&next);
                }
        }
        if (r < 0)
                goto out;
        r = oci_manifest_parse(body, len, o->max_layers, &m, err);
        if (r < 0) {
                r = cs_error_wrap(err, "the manifest of %s", ref->name);
                goto out;
        }
        if (m.config_size > (int64_t)OCI_CONFIG_MAX) {
                r = cs_error_setx(err, EFBIG,
                                  "the image config of %s is %lld bytes, over the "
                                  "limit of %u",
                                  ref->name, (long long)m.config_size, OCI_CONFIG_MAX);
                goto out;
        }
        if (mkdirat(dirfd, "blobs", 0700) < 0 || mkdirat(dirfd, "blobs/sha256", 0700) < 0) {
                r = cs_error_set(err, errno, "create the download directory");
                goto out;
        }
        blobs = calloc(m.n_layers + 1, sizeof(*blobs));
        sizes = calloc(m.n_layers + 1, sizeof(*sizes));
        if (!blobs || !sizes) {
                r = cs_error_set(err, ENOMEM, "pull");
                goto out;
        }
        snprintf(blobs[0].digest, sizeof(blobs[0].digest), "%s", m.config_digest);
        blobs[0].total = (uint64_t)m.config_size;
        blobs[0].is_config = true;
        sizes[n++] = m.config_size;
        stored = o->present && o->present(o->present_opaque, digest);
        for (size_t i = 0; i < m.n_layers && !stored; i++) {
                bool seen = false;

                for (size_t k = 0; k < n && !seen; k++)
                        seen = strcmp(blobs[k].digest, m.layers[i].digest) == 0;
                if (seen) /* the same layer twice, or a layer equal to the config */
                        continue;
                snprintf(blobs[n].digest, sizeof(blobs[n].digest), "%s", m.layers[i].digest);
                blobs[n].total = (uint64_t)m.layers[i].size;
                sizes[n++] = m.layers[i].size;
        }
        r = reg_get_blobs(&g, dirfd, blobs, sizes, n, err);
        if (r == 0)
                r = layout_write(dirfd, body, len, digest, err);
out:
        oci_manifest_free(&m);
        reg_free(&g);
        curl_global_cleanup();
        return r;
}

static bool image_stored(void *opaque, const char *digest)
{
        return store_image_present(opaque, digest);
}

int store_pull(struct image_store *s, const struct registry_ref *ref, const struct pull_options *po,
               const struct import_options *io, struct import_result *ret, struct cs_error *err)
{
        struct pull_options p = *po;
        struct import_options o = *io;
        /* Dropped: best effort: what is left in tmp/ is swept by the next import. */
        struct cs_error ignored;
        char tname[64], path[PATH_MAX];
        /* the download lives in tmp/, flocked: invisible to launches, swept if we die */
        _cleanup_close_ int tfd = store_tmp_create(s, "pull", tname, err);
        int r;

        if (tfd < 0)
                return tfd;
        p.present = image_stored;
        p.present_opaque = s;
        p.max_layers = io->limits.max_layers;
        r = registry_pull(ref, &p, tfd, err);
        if (r == 0) {
                snprintf(path, sizeof(path), "%s/tmp/%s", s->root, tname);
                o.source = path;
                o.format = IMAGE_FORMAT_OCI;
                o.name = ref->name;
                o.platform = po->platform;
                r = store_import(s, &o, ret, err);
        }
        (void)store_tmp_remove(s, tname, &ignored);
        return r;
}
