/* Who a registry is and how csandbox may speak to it: image references, the credential
 * files podman and docker write, the registry's own CAs, authentication challenges. */
#include "registry.h"
#include "registry-private.h"

#include "../store/store-write.h"

#include "../../common/cleanup.h"
#include "../../common/error.h"
#include "../../common/fileio.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define AUTH_FILE_MAX (1u << 20) /* an auth.json or config.json */

/* ---- references ---- */

const char *registry_api_host(const char *host)
{
        return strcmp(host, REGISTRY_DEFAULT) == 0 ? REGISTRY_DOCKER_HUB_API : host;
}

static bool repo_char_ok(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
               c == '-' || c == '/';
}

static int ref_fail(const char *s, const char *why, struct cs_error *err)
{
        return cs_error_setx(err, EINVAL,
                             "image pull: `%.300s` is not an image reference: %s (expected "
                             "[HOST[:PORT]/]NAME[:TAG][@sha256:DIGEST])",
                             s, why);
}

int registry_ref_parse(const char *s, struct registry_ref *ret, struct cs_error *err)
{
        struct registry_ref r = {0};
        char buf[512], *at, *slash, *colon, *path;
        size_t len = strlen(s);

        if (len == 0 || len >= sizeof(buf) - 16)
                return ref_fail(s, "empty or too long", err);
        memcpy(buf, s, len + 1);
        if ((at = strchr(buf, '@'))) {
                *at = '\0';
                if (oci_digest_check(at + 1, "the digest", err) < 0)
                        return ref_fail(s, "only sha256 digests of 64 lowercase hex digits", err);
                snprintf(r.digest, sizeof(r.digest), "%s", at + 1);
        }
        slash = strrchr(buf, '/');
        colon = strrchr(buf, ':');
        if (colon && (!slash || colon > slash)) {
                *colon = '\0';
                if (!colon[1] || strlen(colon + 1) >= sizeof(r.tag) ||
                    !(isalnum((unsigned char)colon[1]) || colon[1] == '_'))
                        return ref_fail(s, "bad tag", err);
                for (const char *p = colon + 1; *p; p++)
                        if (!isalnum((unsigned char)*p) && !strchr("_.-", *p))
                                return ref_fail(s, "bad tag", err);
                snprintf(r.tag, sizeof(r.tag), "%s", colon + 1);
        }
        if (!r.tag[0] && !r.digest[0])
                snprintf(r.tag, sizeof(r.tag), "latest");
        path = buf;
        slash = strchr(buf, '/');
        if (slash &&
            (memchr(buf, '.', (size_t)(slash - buf)) || memchr(buf, ':', (size_t)(slash - buf)) ||
             (slash - buf == 9 && strncmp(buf, "localhost", 9) == 0))) {
                *slash = '\0';
                for (const char *p = buf; *p; p++)
                        if (!isalnum((unsigned char)*p) && !strchr(".-:[]", *p))
                                return ref_fail(s, "bad registry host", err);
                if (!buf[0] || strlen(buf) >= sizeof(r.host))
                        return ref_fail(s, "bad registry host", err);
                /* docker's legacy spelling of docker.io names the same images */
                snprintf(r.host, sizeof(r.host), "%s",
                         strcmp(buf, REGISTRY_DOCKER_HUB_INDEX) == 0 ? REGISTRY_DEFAULT : buf);
                path = slash + 1;
        } else {
                snprintf(r.host, sizeof(r.host), "%s", REGISTRY_DEFAULT);
        }
        if (!path[0] || strlen(path) >= sizeof(r.repo) - 8)
                return ref_fail(s, "no image name", err);
        for (const char *p = path; *p; p++) {
                bool sep = *p == '/' || *p == '.' || *p == '_' || *p == '-';
                if (!repo_char_ok(*p))
                        return ref_fail(s, "names are lowercase letters, digits and . _ - /", err);
                if (sep && (p == path || !p[1] || p[-1] == '/' ||
                            (*p == '/' && !isalnum((unsigned char)p[-1]))))
                        return ref_fail(s,
                                        "a name component is empty or starts or ends with a "
                                        "separator",
                                        err);
        }
        if (strcmp(r.host, REGISTRY_DEFAULT) == 0 && !strchr(path, '/'))
                snprintf(r.repo, sizeof(r.repo), "library/%s", path);
        else
                snprintf(r.repo, sizeof(r.repo), "%s", path);
        if (r.tag[0])
                snprintf(r.name, sizeof(r.name), "%s/%s:%s", r.host, r.repo, r.tag);
        else
                snprintf(r.name, sizeof(r.name), "%s/%s@%s", r.host, r.repo, r.digest);
        *ret = r;
        return 0;
}

/* ---- credentials: the files podman and docker write ---- */

void registry_creds_free(struct registry_creds *c)
{
        if (c->pass)
                explicit_bzero(c->pass, strlen(c->pass));
        free(c->user);
        free(c->pass);
        free(c->file);
        memset(c, 0, sizeof(*c));
}

/* A registry host as auth files key it: Docker Hub's three names are one (docker login
 * writes https://index.docker.io/v1/, podman login docker.io). */
static void auth_host_normalize(char *host, size_t n)
{
        size_t hl = strcspn(host, "/");

        if ((hl == strlen(REGISTRY_DEFAULT) && strncmp(host, REGISTRY_DEFAULT, hl) == 0) ||
            (hl == strlen(REGISTRY_DOCKER_HUB_API) &&
             strncmp(host, REGISTRY_DOCKER_HUB_API, hl) == 0)) {
                char rest[600];
                size_t il = strlen(REGISTRY_DOCKER_HUB_INDEX);

                snprintf(rest, sizeof(rest), "%s", host + hl);
                if (il + strlen(rest) < n) {
                        memcpy(host, REGISTRY_DOCKER_HUB_INDEX, il);
                        memcpy(host + il, rest, strlen(rest) + 1);
                }
        }
}

/* As containers/image reads a key: "https://host/v1/" (a URL, docker's form) -> "host", the
 * path dropped; "host/ns" (podman's per-namespace keys) stays; Docker Hub's names -> one. */
static void auth_key_normalize(const char *key, char *ret, size_t n)
{
        bool url = false;
        size_t len;

        if (strncmp(key, "https://", 8) == 0)
                key += 8, url = true;
        else if (strncmp(key, "http://", 7) == 0)
                key += 7, url = true;
        snprintf(ret, n, "%s", key);
        if (url)
                ret[strcspn(ret, "/")] = '\0';
        len = strlen(ret);
        while (len && ret[len - 1] == '/')
                ret[--len] = '\0';
        auth_host_normalize(ret, n);
}

static int auth_decode(const char *b64, const char *file, struct registry_creds *ret,
                       struct cs_error *err)
{
        size_t len = strlen(b64), pad = 0;
        _cleanup_free_ unsigned char *out = NULL;
        char *colon;
        int n;

        if (len == 0 || len % 4 != 0 || len > 16384)
                return cs_error_setx(err, EINVAL,
                                     "credentials in `%s`: the `auth` field is not "
                                     "base64 of USER:PASSWORD",
                                     file);
        out = calloc(1, len + 1);
        if (!out)
                return cs_error_set(err, ENOMEM, "%s", file);
        n = EVP_DecodeBlock(out, (const unsigned char *)b64, (int)len);
        while (pad < 2 && b64[len - 1 - pad] == '=')
                pad++;
        if (n < 0 || (size_t)n < pad)
                return cs_error_setx(err, EINVAL,
                                     "credentials in `%s`: the `auth` field is not "
                                     "base64 of USER:PASSWORD",
                                     file);
        out[n - (int)pad] = '\0';
        colon = strchr((char *)out, ':');
        if (!colon || memchr(out, '\0', (size_t)n - pad))
                return cs_error_setx(err, EINVAL,
                                     "credentials in `%s`: the `auth` field is not "
                                     "base64 of USER:PASSWORD",
                                     file);
        *colon = '\0';
        ret->user = strdup((char *)out);
        ret->pass = strdup(colon + 1);
        ret->file = strdup(file);
        explicit_bzero(out, len);
        if (!ret->user || !ret->pass || !ret->file) {
                registry_creds_free(ret);
                return cs_error_set(err, ENOMEM, "%s", file);
        }
        return 1;
}

int registry_creds_parse(const char *buf, size_t len, const char *file, const char *host,
                         const char *repo, struct registry_creds *ret, struct cs_error *err)
{
        _cleanup_json_ cJSON *j = cJSON_ParseWithLength(buf, len);
        const cJSON *auths, *e, *best = NULL;
        char want[600];
        size_t best_len = 0, host_len;

        if (!j || !cJSON_IsObject(j))
                return cs_error_setx(err, EINVAL,
                                     "registry credentials `%s` are not a JSON object; fix or "
                                     "remove the file",
                                     file);
        auths = cJSON_GetObjectItemCaseSensitive(j, "auths");
        snprintf(want, sizeof(want), "%s/%s", host, repo);
        auth_host_normalize(want, sizeof(want));
        host_len = strcspn(want, "/");
        cJSON_ArrayForEach(e, auths)
        {
                char key[600];
                size_t kl;

                if (!e->string || !cJSON_IsObject(e))
                        continue;
                auth_key_normalize(e->string, key, sizeof(key));
                kl = strlen(key);
                if (kl == 0 || strncmp(want, key, kl) != 0 || (want[kl] != '/' && want[kl]))
                        continue;
                if (kl < host_len) /* a key shorter than the host is another host */
                        continue;
                if (kl > best_len) {
                        best = e;
                        best_len = kl;
                }
        }
        if (!best)
                return 0;
        e = cJSON_GetObjectItemCaseSensitive(best, "auth");
        if (!cJSON_IsString(e) || !e->valuestring[0])
                return 0; /* a credential helper's entry: not read here */
        return auth_decode(e->valuestring, file, ret, err);
}

/* registry_creds_parse of a file; 0 when it does not exist. */
static int creds_from_file(const char *file, const char *host, const char *repo,
                           struct registry_creds *ret, struct cs_error *err)
{
        _cleanup_free_ char *buf = NULL;
        size_t len;
        int r = cs_read_file_at(AT_FDCWD, file, AUTH_FILE_MAX, false, &buf, &len, err);

        if (r == -ENOENT || r == -ENOTDIR)
                return 0;
        if (r < 0)
                return cs_error_wrap(err, "registry credentials");
        r = registry_creds_parse(buf, len, file, host, repo, ret, err);
        explicit_bzero(buf, len);
        return r;
}

int registry_creds_find(const char *host, const char *repo, struct registry_creds *ret,
                        struct cs_error *err)
{
        const char *env = getenv("REGISTRY_AUTH_FILE"), *run = getenv("XDG_RUNTIME_DIR");
        const char *home = getenv("HOME");
        char files[4][4096];
        size_t n = 0;

        if (!home || !home[0]) {
                struct passwd *pw = getpwuid(getuid());
                home = pw ? pw->pw_dir : NULL;
        }
        if (env && env[0])
                snprintf(files[n++], sizeof(files[0]), "%s", env);
        if (run && run[0])
                snprintf(files[n++], sizeof(files[0]), "%s/containers/auth.json", run);
        if (home && home[0]) {
                snprintf(files[n++], sizeof(files[0]), "%s/.config/containers/auth.json", home);
                snprintf(files[n++], sizeof(files[0]), "%s/.docker/config.json", home);
        }
        for (size_t i = 0; i < n; i++) {
                int r = creds_from_file(files[i], host, repo, ret, err);
                if (r != 0)
                        return r < 0 ? r : 0;
        }
        return 0;
}

/* ---- trust: a registry's own CAs, where podman and docker look for them ---- */

#define CA_FILE_MAX  (8u << 20)
#define CA_FILES_MAX 64

static int ca_append(char **buf, size_t *len, const char *data, size_t n, const char *what,
                     struct cs_error *err)
{
        char *nb = realloc(*buf, *len + n + 2);

        if (!nb)
                return cs_error_set(err, ENOMEM, "%s", what);
        memcpy(nb + *len, data, n);
        *len += n;
        nb[(*len)++] = '\n';
        nb[*len] = '\0';
        *buf = nb;
        return 0;
}

/* certs.d/HOST[:PORT]/ *.crt from the first of the user's containers dir, the system's and
 * docker's that exists, added to (never replacing) the default CA bundle. */
int registry_ca_load(const char *host, char **ret_ca, size_t *ret_len, char *ret_dir,
                     size_t dir_max, struct cs_error *err)
{
        const char *cfg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
        char dirs[3][4200];
        _cleanup_closedir_ DIR *d = NULL;
        const char *bundle = NULL;
        struct dirent *de;
        size_t ndirs = 0, nfiles = 0;
        char *buf = NULL;
        size_t len = 0;
        CURL *c;

        if (cfg && cfg[0])
                snprintf(dirs[ndirs++], sizeof(dirs[0]), "%s/containers/certs.d/%s", cfg, host);
        else if (home && home[0])
                snprintf(dirs[ndirs++], sizeof(dirs[0]), "%s/.config/containers/certs.d/%s", home,
                         host);
        snprintf(dirs[ndirs++], sizeof(dirs[0]), "/etc/containers/certs.d/%s", host);
        snprintf(dirs[ndirs++], sizeof(dirs[0]), "/etc/docker/certs.d/%s", host);
        for (size_t i = 0; i < ndirs && !d; i++)
                if ((d = opendir(dirs[i])))
                        snprintf(ret_dir, dir_max, "%.4100s", dirs[i]);
        if (!d)
                return 0;
        c = curl_easy_init();
        if (c && curl_easy_getinfo(c, CURLINFO_CAINFO, &bundle) == CURLE_OK && bundle) {
                _cleanup_free_ char *sys = NULL;
                /* Dropped: no readable system bundle: only the certs.d CAs go in. */
                struct cs_error ignored;
                size_t n;

                if (cs_read_file_at(AT_FDCWD, bundle, CA_FILE_MAX, false, &sys, &n, &ignored) ==
                        0 &&
                    ca_append(&buf, &len, sys, n, bundle, err) < 0) {
                        curl_easy_cleanup(c);
                        return -ENOMEM;
                }
        }
        curl_easy_cleanup(c);
        while ((de = readdir(d))) {
                _cleanup_free_ char *pem = NULL;
                size_t nl = strlen(de->d_name), n;
                int r;

                if (nl < 5 || strcmp(de->d_name + nl - 4, ".crt") != 0)
                        continue;
                if (++nfiles > CA_FILES_MAX) {
                        free(buf);
                        return cs_error_setx(err, E2BIG, "`%s` holds more than %d .crt files",
                                             ret_dir, CA_FILES_MAX);
                }
                r = cs_read_file_at(dirfd(d), de->d_name, CA_FILE_MAX, false, &pem, &n, err);
                if (r == 0)
                        r = ca_append(&buf, &len, pem, n, de->d_name, err);
                if (r < 0) {
                        free(buf);
                        return cs_error_wrap(err, "the registry's CA in `%s`", ret_dir);
                }
        }
        *ret_ca = buf;
        *ret_len = len;
        return 0;
}

void registry_challenge_param(const char *h, const char *key, char *out, size_t max)
{
        size_t kl = strlen(key);
        const char *p = strchr(h, ' ');

        out[0] = '\0';
        while (p && *p) {
                size_t o = 0;
                bool match;

                while (*p == ' ' || *p == ',')
                        p++;
                match = strncasecmp(p, key, kl) == 0 && p[kl] == '=';
                p = strchr(p, '=');
                if (!p)
                        return;
                p++;
                if (*p == '"') {
                        for (p++; *p && *p != '"'; p++) {
                                if (*p == '\\' && p[1])
                                        p++;
                                if (match && o + 1 < max)
                                        out[o++] = *p;
                        }
                        if (*p)
                                p++;
                } else {
                        for (; *p && *p != ','; p++)
                                if (match && o + 1 < max)
                                        out[o++] = *p;
                }
                if (match) {
                        out[o] = '\0';
                        return;
                }
        }
}
