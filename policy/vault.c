/* Infisical Agent Vault (reference §8.9, §2.1 item 5, §2.2): the .env keys split out, the
 * pre-flight, the re-launch through `infisical agent-vault run`, and the session's share of
 * what the CLI sets. */
#include "vault.h"
#include "bind.h"
#include "stage_util.h"

#include "../common/base64.h"
#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"
#include "../common/path.h"
#include "../common/sha256.h"
#include "../common/spawn.h"
#include "../common/strbuf.h"
#include "../common/strv.h"
#include "../image/store/store.h"
#include "../spec/spec.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define VAULT_TTL          "24h"
#define VAULT_HELPER_MS    10000 /* the helper's own 5 s bound on the request, and its start */
#define VAULT_ANSWER_MAX   ((size_t)1 << 20)
#define VAULT_PROXY_CA_MAX ((size_t)1 << 20)
#define SYSTEM_BUNDLE_MAX  ((size_t)16 << 20)

/* The keys a profile may set (after the prefix); BUNDLE turns the vault on. */
static const char *const vault_keys[] = {"BUNDLE", "PROXY", "CA_FINGERPRINT", "INFISICAL_PROFILE",
                                         "NO_PROXY"};

/* claude's own hosts never go through the proxy: the API, the login hosts, the browser
 * extension's. Through it, the proxy would see every prompt and the profile's own tokens,
 * and a proxy outage would stop claude. Both spellings of each domain, as clients differ on
 * whether ".x" covers x itself. */
static const char vault_no_proxy[] = ".anthropic.com,claude.ai,.claude.ai,claude.com,.claude.com,"
                                     ".claudeusercontent.com";

/* What `infisical agent-vault run` sets for the command it starts. */
static const char *const proxy_url_vars[] = {"HTTPS_PROXY", "HTTP_PROXY", "https_proxy",
                                             "http_proxy"};
static const char *const session_vars[] = {"HTTPS_PROXY",        "HTTP_PROXY",
                                           "https_proxy",        "http_proxy",
                                           "OPENCLAW_PROXY_URL", "NO_PROXY",
                                           "no_proxy",           "NODE_USE_ENV_PROXY",
                                           "SSL_CERT_FILE",      "NODE_EXTRA_CA_CERTS",
                                           "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
                                           "GIT_SSL_CAINFO",     "DENO_CERT"};
static const char *const ca_vars[] = {"SSL_CERT_FILE",  "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE",
                                      "CURL_CA_BUNDLE", "GIT_SSL_CAINFO",      "DENO_CERT"};

/* The system CA bundle, where distributions keep it (Debian and its kin, Alpine and Arch;
 * Fedora and RHEL; openSUSE; the older RHEL name; the BSD-style name). The host's first is
 * the one combined with the proxy's CA; a sandbox gets the combined file over each of them
 * its root has, so every default a TLS library uses trusts the proxy too. */
static const char *const system_bundles[] = {
    "/etc/ssl/certs/ca-certificates.crt", "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/ssl/ca-bundle.pem", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"};

#define N(a) (sizeof(a) / sizeof((a)[0]))

void vault_free(struct plan_vault *v)
{
        if (!v)
                return;
        free(v->bundle);
        free(v->proxy);
        free(v->fingerprint);
        free(v->infisical_profile);
        free(v->no_proxy);
        free(v->why);
        free(v->exec_path);
        strv_free(&v->exec_argv, &v->n_exec_argv);
        for (size_t i = 0; i < v->n_session; i++)
                explicit_bzero(v->session[i], strlen(v->session[i]));
        strv_free(&v->session, &v->n_session);
        free(v->ca_bundle);
        memset(v, 0, sizeof(*v));
}

/* A name from the .env, shown with no terminal escapes. */
static void shown_name(struct strbuf *b, const char *s)
{
        for (size_t i = 0; s[i] && i < 128; i++)
                sb_putc(b, (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i]);
}

/* SHA256: and 32 bytes as two upper-case hex digits each, colon-separated. */
static bool fingerprint_valid(const char *f)
{
        if (strncmp(f, "SHA256", 6) != 0)
                return false;
        f += 6;
        for (int i = 0; i < 32; i++, f += 3)
                if (f[0] != ':' || !isxdigit((unsigned char)f[1]) ||
                    !isxdigit((unsigned char)f[2]) || islower((unsigned char)f[1]) ||
                    islower((unsigned char)f[2]))
                        return false;
        return *f == '\0';
}

/* NO_PROXY's hosts, each trimmed, the empty ones dropped, joined with ','. */
static char *no_proxy_list(const char *value)
{
        struct strbuf b = {0};
        char **hosts = NULL;
        size_t n = 0;

        if (profile_forward_env_split(value, &hosts, &n) < 0)
                return NULL;
        sb_puts(&b, "");
        for (size_t i = 0; i < n; i++) {
                sb_puts(&b, i ? "," : "");
                sb_puts(&b, hosts[i]);
        }
        strv_free(&hosts, &n);
        if (b.oom) {
                free(b.s);
                return NULL;
        }
        return b.s;
}

int vault_split(const struct profile *p, struct profile_env *env, struct plan_vault *v,
                struct cs_error *err)
{
        const char *val[N(vault_keys)] = {NULL};
        struct strbuf problems = {0};
        size_t o = 0, plen = strlen(VAULT_PREFIX);
        int r = 0;

        memset(v, 0, sizeof(*v));
        /* Out of the list first, whatever the checks below find. */
        for (size_t i = 0; i < env->n; i++) {
                const char *key = env->names[i] + plen;
                size_t k;

                if (strncmp(env->names[i], VAULT_PREFIX, plen) != 0) {
                        env->names[o] = env->names[i];
                        env->values[o++] = env->values[i];
                        continue;
                }
                v->had_keys = true;
                for (k = 0; k < N(vault_keys); k++)
                        if (strcmp(key, vault_keys[k]) == 0)
                                break;
                if (k < N(vault_keys)) {
                        val[k] = env->values[i];
                        env->values[i] = NULL; /* freed below, once copied */
                } else {
                        sb_puts(&problems, problems.len ? "; " : "");
                        shown_name(&problems, env->names[i]);
                        sb_puts(&problems, " is not one of its settings");
                }
                free(env->names[i]);
                if (env->values[i]) {
                        explicit_bzero(env->values[i], strlen(env->values[i]));
                        free(env->values[i]);
                }
        }
        env->n = o;
        if (val[0] && *val[0])
                for (size_t k = 1; k < 3; k++)
                        if (!val[k] || !*val[k]) {
                                sb_puts(&problems, problems.len ? "; " : "");
                                sb_puts(&problems, VAULT_PREFIX);
                                sb_puts(&problems, vault_keys[k]);
                                sb_puts(&problems,
                                        " is not set, and " VAULT_PREFIX "BUNDLE needs it");
                        }
        if (val[2] && *val[2]) {
                _cleanup_free_ char *up = strdup(val[2]);

                for (char *c = up; c && *c; c++)
                        *c = (char)toupper((unsigned char)*c);
                if (up && !fingerprint_valid(up)) {
                        sb_puts(&problems, problems.len ? "; " : "");
                        sb_puts(&problems,
                                VAULT_PREFIX "CA_FINGERPRINT is not a SHA-256 "
                                             "fingerprint written SHA256:9F:2C:... (32 bytes), "
                                             "as the proxy's page shows it");
                }
                if (up && !problems.len && val[0] && *val[0])
                        v->fingerprint = cs_take_ptr(&up);
        }
        if (problems.oom) {
                r = cs_error_set(err, ENOMEM, "%s/.env", p->dir);
        } else if (problems.len) {
                r = cs_error_setx(err, EINVAL,
                                  "The Agent Vault settings in %s/.env cannot be used: %s. Its "
                                  "settings are " VAULT_PREFIX "BUNDLE, PROXY and CA_FINGERPRINT "
                                  "(BUNDLE turns it on and needs the other two), and "
                                  "INFISICAL_PROFILE and NO_PROXY (optional), each after the "
                                  "prefix " VAULT_PREFIX ". Fix the file (claude-profile env %s "
                                  "--set KEY=VALUE, or --unset KEY), or remove " VAULT_PREFIX
                                  "BUNDLE to launch without Agent Vault",
                                  p->dir, problems.s, p->name);
        } else if (val[0] && *val[0]) {
                v->bundle = strdup(val[0]);
                v->proxy = strdup(val[1]);
                v->infisical_profile = strdup(val[3] ? val[3] : "");
                v->no_proxy = no_proxy_list(val[4] ? val[4] : "");
                if (!v->bundle || !v->proxy || !v->infisical_profile || !v->no_proxy ||
                    !v->fingerprint)
                        r = cs_error_set(err, ENOMEM, "%s/.env", p->dir);
        }
        for (size_t k = 0; k < N(vault_keys); k++)
                if (val[k]) {
                        explicit_bzero((char *)val[k], strlen(val[k]));
                        free((char *)val[k]);
                }
        free(problems.s);
        if (r < 0)
                vault_free(v);
        return r;
}

/* The PEM certificate's SHA-256, as the proxy's page writes it; NULL when it is not one. */
static char *pem_fingerprint(const char *pem)
{
        static const char begin[] = "-----BEGIN CERTIFICATE-----";
        static const char end[] = "-----END CERTIFICATE-----";
        const char *b = strstr(pem, begin), *e;
        _cleanup_free_ unsigned char *der = NULL;
        unsigned char md[32];
        size_t len;
        char *out;

        if (!b)
                return NULL;
        b += strlen(begin);
        e = strstr(b, end);
        if (!e || cs_base64_decode(b, (size_t)(e - b), false, &der, &len) < 0 || len == 0)
                return NULL;
        cs_sha256(der, len, md);
        out = malloc(7 + 32 * 3);
        if (!out)
                return NULL;
        strcpy(out, "SHA256");
        for (int i = 0; i < 32; i++)
                sprintf(out + 6 + i * 3, ":%02X", md[i]);
        return out;
}

/* Why the vault cannot be used for this launch, or NULL (*ret_oom on ENOMEM). */
static char *vault_preflight(const struct plan_vault *v, const char *infisical, bool *ret_oom)
{
        _cleanup_free_ char *helper = cs_self_sibling("csandbox-import");
        _cleanup_(cs_capture_free) struct cs_capture c = {0};
        _cleanup_free_ char *served = NULL;
        char *argv[] = {"csandbox-import", "--vault-ca", v->proxy, NULL};
        const cJSON *cert;
        cJSON *answer;
        char *why = NULL;
        int r;

        *ret_oom = false;
        if (!infisical)
                r = asprintf(&why, "the infisical CLI (`%s`) is not installed, or not on PATH",
                             v->exec_path ? v->exec_path : "infisical");
        else if (!helper ||
                 cs_spawn_capture(&(struct cs_spawn){.path = helper,
                                                     .argv = argv,
                                                     .timeout_ms = VAULT_HELPER_MS,
                                                     .max = VAULT_ANSWER_MAX + 4096},
                                  &c) < 0 ||
                 !c.out)
                r = asprintf(&why, "csandbox-import, which asks the proxy, could not run (%s)",
                             helper ? helper : "/proc/self/exe unreadable");
        else if (!cs_capture_ok(&c))
                r = asprintf(&why, "the proxy at %s did not serve its CA (%.*s)", v->proxy,
                             (int)strcspn(c.out, "\n"),
                             c.timed_out ? "no answer within 5 s" : c.out);
        else
                r = 0;
        if (r < 0) {
                *ret_oom = true;
                return NULL;
        }
        if (why)
                return why;
        answer = cJSON_ParseWithLength(c.out, c.len);
        cert = cJSON_GetObjectItemCaseSensitive(answer, "certificate");
        served = cJSON_IsString(cert) ? pem_fingerprint(cert->valuestring) : NULL;
        cJSON_Delete(answer);
        if (!served)
                r = asprintf(&why,
                             "the proxy at %s did not serve its CA (its answer has no PEM "
                             "certificate)",
                             v->proxy);
        else if (strcmp(served, v->fingerprint) != 0)
                r = asprintf(&why, "the proxy at %s serves the CA %s, not the pinned %s", v->proxy,
                             served, v->fingerprint);
        if (r < 0) {
                *ret_oom = true;
                return NULL;
        }
        return why;
}

static int vault_exec_argv(struct plan_vault *v, const struct profile_config *c,
                           char *const *self_argv, struct cs_error *err)
{
        _cleanup_free_ char *no_proxy = NULL;
        const char *fixed[] = {"agent-vault", "run", "--silent"};
        int r = 0;

        if (asprintf(&no_proxy, "%s%s%s", vault_no_proxy, *v->no_proxy ? "," : "", v->no_proxy) <
            0) {
                no_proxy = NULL;
                return cs_error_set(err, ENOMEM, "the Agent Vault command");
        }
        r |= strv_push_dup(&v->exec_argv, &v->n_exec_argv, c->infisical_bin);
        for (size_t i = 0; i < N(fixed); i++)
                r |= strv_push_dup(&v->exec_argv, &v->n_exec_argv, fixed[i]);
        if (*v->infisical_profile) {
                r |= strv_push_dup(&v->exec_argv, &v->n_exec_argv, "--profile");
                r |= strv_push_dup(&v->exec_argv, &v->n_exec_argv, v->infisical_profile);
        }
        const char *rest[] = {"--access-bundle",  v->bundle,      "--proxy", v->proxy,
                              "--ca-fingerprint", v->fingerprint, "--ttl",   VAULT_TTL,
                              "--no-proxy",       no_proxy,       "--"};
        for (size_t i = 0; i < N(rest); i++)
                r |= strv_push_dup(&v->exec_argv, &v->n_exec_argv, rest[i]);
        for (size_t i = 0; self_argv && self_argv[i]; i++)
                r |= strv_push_dup(&v->exec_argv, &v->n_exec_argv, self_argv[i]);
        return r < 0 ? cs_error_set(err, ENOMEM, "the Agent Vault command") : 0;
}

/* The host's system bundle: the first of system_bundles that is a readable regular file. */
static int system_bundle_read(char **ret, size_t *ret_len, const char **ret_path,
                              struct cs_error *err)
{
        for (size_t i = 0; i < N(system_bundles); i++) {
                struct cs_error ignored = {0};

                if (cs_read_file_at(AT_FDCWD, system_bundles[i], SYSTEM_BUNDLE_MAX, false, ret,
                                    ret_len, &ignored) == 0) {
                        *ret_path = system_bundles[i];
                        return 0;
                }
        }
        return cs_error_setx(err, ENOENT,
                             "Cannot build the CA bundle for Agent Vault: this host has no "
                             "system CA bundle at any of the usual paths (%s, %s, ...). Install "
                             "the ca-certificates package",
                             system_bundles[0], system_bundles[1]);
}

/* §8.5: <data>/csandbox/agent-vault/ca-bundle-<16 hex>.pem, the host's system bundle and the
 * proxy's CA (the file the CLI's SSL_CERT_FILE names), written once, atomically. */
static int vault_ca_bundle(struct plan_vault *v, const struct profile_config *c,
                           const char *proxy_ca_path, struct cs_error *err)
{
        _cleanup_free_ char *sys = NULL, *ca = NULL, *dir = NULL, *content = NULL;
        _cleanup_close_ int dfd = -1;
        size_t sys_len, ca_len;
        const char *sys_path;
        char hex[17], name[64];
        struct stat st;
        int r;

        r = system_bundle_read(&sys, &sys_len, &sys_path, err);
        if (r < 0)
                return r;
        r = cs_read_file_at(AT_FDCWD, proxy_ca_path, VAULT_PROXY_CA_MAX, false, &ca, &ca_len, err);
        if (r < 0)
                return cs_error_wrap(err,
                                     "Cannot build the CA bundle for Agent Vault: the proxy's CA "
                                     "(SSL_CERT_FILE from infisical agent-vault run)");
        while (sys_len > 0 && isspace((unsigned char)sys[sys_len - 1]))
                sys_len--;
        if (asprintf(&content, "%.*s\n%s", (int)sys_len, sys, ca) < 0) {
                content = NULL;
                return cs_error_set(err, ENOMEM, "the Agent Vault CA bundle");
        }
        if (stage_sha256_hex16(content, strlen(content), hex) < 0)
                return cs_error_setx(err, EIO, "sha256 of the Agent Vault CA bundle failed");
        snprintf(name, sizeof(name), "ca-bundle-%s.pem", hex);
        if (asprintf(&dir, "%s/csandbox/agent-vault", c->data_home) < 0) {
                dir = NULL;
                return cs_error_set(err, ENOMEM, "the Agent Vault CA bundle");
        }
        r = stage_open_dir_parents(dir, &dfd, err);
        if (r >= 0 && fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                r = cs_write_file_once(dfd, name, content, strlen(content), 0644, err);
        if (r < 0)
                return cs_error_wrap(err, "Cannot build the CA bundle for Agent Vault");
        v->ca_bundle = cs_path_join(dir, name);
        return v->ca_bundle ? 0 : cs_error_set(err, ENOMEM, "the Agent Vault CA bundle");
}

/* The launch infisical started: its variables, out of this process's environment. */
static int vault_take_session(struct plan_vault *v, struct cs_error *err)
{
        const char *https = getenv("HTTPS_PROXY"), *cert = getenv("SSL_CERT_FILE");

        if (!https || !*https || !cert || !*cert)
                return cs_error_setx(err, EINVAL,
                                     VAULT_RUN_ENV
                                     " is set, but HTTPS_PROXY or SSL_CERT_FILE is "
                                     "not, so this launch was not started by `infisical "
                                     "agent-vault run`. Unset " VAULT_RUN_ENV " and launch again");
        for (size_t i = 0; i < N(session_vars); i++) {
                const char *val = getenv(session_vars[i]);
                char *e;

                if (!val)
                        continue;
                if (asprintf(&e, "%s=%s", session_vars[i], val) < 0 ||
                    strv_push(&v->session, &v->n_session, e) < 0)
                        return cs_error_set(err, ENOMEM, "the Agent Vault session");
                unsetenv(session_vars[i]);
        }
        unsetenv(VAULT_RUN_ENV);
        return 0;
}

/* The session's value of name, or NULL. */
static const char *session_get(const struct plan_vault *v, const char *name)
{
        size_t n = strlen(name);

        for (size_t i = 0; i < v->n_session; i++)
                if (strncmp(v->session[i], name, n) == 0 && v->session[i][n] == '=')
                        return v->session[i] + n + 1;
        return NULL;
}

int vault_route(struct plan_vault *v, const struct profile_config *c, const char *name,
                char *const *self_argv, struct cs_error *err)
{
        const char *run = getenv(VAULT_RUN_ENV);
        _cleanup_free_ char *infisical = NULL;
        bool oom;
        int r;

        if (!v->bundle)
                return 0; /* the profile did not opt in */
        if (run && strcmp(run, name) == 0) {
                v->state = VAULT_ACTIVE;
                r = vault_take_session(v, err);
                if (r >= 0)
                        r = vault_ca_bundle(v, c, session_get(v, "SSL_CERT_FILE"), err);
                return r;
        }
        infisical = cs_find_program(c->infisical_bin);
        if (infisical && access(infisical, X_OK) < 0) {
                free(infisical);
                infisical = NULL;
        }
        v->exec_path = strdup(c->infisical_bin);
        if (!v->exec_path)
                return cs_error_set(err, ENOMEM, "Agent Vault");
        v->why = vault_preflight(v, infisical, &oom);
        if (oom)
                return cs_error_set(err, ENOMEM, "Agent Vault");
        if (v->why) {
                v->state = VAULT_UNAVAILABLE;
                return 0;
        }
        free(v->exec_path);
        v->exec_path = cs_take_ptr(&infisical);
        v->state = VAULT_EXEC;
        return vault_exec_argv(v, c, self_argv, err);
}

bool vault_secret_var(const char *name)
{
        for (size_t i = 0; i < N(proxy_url_vars); i++)
                if (strcmp(name, proxy_url_vars[i]) == 0)
                        return true;
        return strcmp(name, "OPENCLAW_PROXY_URL") == 0;
}

static bool is_ca_var(const char *name)
{
        for (size_t i = 0; i < N(ca_vars); i++)
                if (strcmp(name, ca_vars[i]) == 0)
                        return true;
        return false;
}

/* name=value into the NULL-terminated env, replacing name's entries. */
static int env_replace(char ***env, size_t *n, const char *name, const char *value)
{
        size_t len = strlen(name), o = 0;
        char *e;

        for (size_t i = 0; i < *n; i++) {
                if (strncmp((*env)[i], name, len) == 0 && (*env)[i][len] == '=')
                        free((*env)[i]);
                else
                        (*env)[o++] = (*env)[i];
        }
        *n = o;
        if (*env)
                (*env)[o] = NULL;
        if (asprintf(&e, "%s=%s", name, value) < 0)
                return -ENOMEM;
        return strv_push(env, n, e);
}

int vault_host_env(const struct plan_vault *v, char ***env, size_t *n)
{
        if (v->state != VAULT_ACTIVE)
                return 0;
        for (size_t i = 0; i < v->n_session; i++) {
                const char *eq = strchr(v->session[i], '=');
                _cleanup_free_ char *name = strndup(v->session[i], (size_t)(eq - v->session[i]));

                if (!name || env_replace(env, n, name, is_ca_var(name) ? v->ca_bundle : eq + 1) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* Where the root keeps its system bundle: each of system_bundles it has (the embedded
 * default's resolved on the host, once each), the first of them the CA variables' value;
 * an image without any gets the first name, made in its overlay. */
static int root_bundles(const struct image_ref *img, char ***ret, size_t *ret_n)
{
        for (size_t i = 0; i < N(system_bundles); i++) {
                char real[PATH_MAX];
                struct stat st;

                if (img) {
                        struct cs_error ignored = {0};
                        int fd = image_open_file(img, system_bundles[i], &ignored);

                        if (fd < 0)
                                continue;
                        close(fd);
                        if (strv_add_unique(ret, ret_n, system_bundles[i]) < 0)
                                return -ENOMEM;
                } else if (realpath(system_bundles[i], real) && stat(real, &st) == 0 &&
                           S_ISREG(st.st_mode)) {
                        if (strv_add_unique(ret, ret_n, real) < 0)
                                return -ENOMEM;
                }
        }
        if (*ret_n == 0 && strv_push_dup(ret, ret_n, system_bundles[0]) < 0)
                return -ENOMEM;
        return 0;
}

int vault_sandbox(const struct plan_vault *v, struct sandbox_spec *s, const struct image_ref *img,
                  struct cs_error *err)
{
        _cleanup_free_ char *no_proxy = NULL;
        char **dests = NULL;
        size_t n_dests = 0;
        const char *session_np;
        int r;

        if (v->state != VAULT_ACTIVE && v->state != VAULT_UNAVAILABLE)
                return 0;
        r = spec_env_set(s, VAULT_STATE_ENV, v->state == VAULT_ACTIVE ? "active" : "unavailable",
                         false, err);
        if (r < 0 || v->state != VAULT_ACTIVE)
                return r;
        /* The proxy URLs carry the session's token. */
        for (size_t i = 0; r >= 0 && i < N(proxy_url_vars); i++) {
                const char *val = session_get(v, proxy_url_vars[i]);

                if (val)
                        r = spec_env_set(s, proxy_url_vars[i], val, true, err);
        }
        /* The host's loopback, where bridged services and loopback hooks answer, by the
         * address and the names the sandbox has for it. */
        session_np = session_get(v, "NO_PROXY");
        if (asprintf(&no_proxy,
                     "%s%s" SPEC_NET_HOST_LOOPBACK
                     ",host.containers.internal,host.csandbox.internal",
                     session_np ? session_np : "", session_np && *session_np ? "," : "") < 0) {
                no_proxy = NULL;
                return cs_error_set(err, ENOMEM, "NO_PROXY");
        }
        if (r >= 0)
                r = spec_env_set(s, "NO_PROXY", no_proxy, false, err);
        if (r >= 0)
                r = spec_env_set(s, "no_proxy", no_proxy, false, err);
        if (r >= 0)
                r = spec_env_set(s, "NODE_USE_ENV_PROXY", "1", false, err);
        if (r >= 0 && root_bundles(img, &dests, &n_dests) < 0)
                r = cs_error_set(err, ENOMEM, "the CA bundle's paths");
        for (size_t i = 0; r >= 0 && i < N(ca_vars); i++)
                r = spec_env_set(s, ca_vars[i], dests[0], false, err);
        /* Read-only over the root's own bundle(s), after the host's trust store when that is
         * mounted: the deeper destination goes on top. */
        for (size_t i = 0; r >= 0 && i < n_dests; i++)
                r = plan_bind_host(s, v->ca_bundle, dests[i], SPEC_MOUNT_RO, err);
        strv_free(&dests, &n_dests);
        return r;
}

const char *vault_briefing(const struct sandbox_spec *s)
{
        const char *state = spec_env_get(s, VAULT_STATE_ENV);

        if (state && strcmp(state, "active") == 0)
                return " Credentials are brokered by Infisical Agent Vault: HTTP and HTTPS go "
                       "through its proxy, which puts the real credential on requests to the "
                       "services this session's access bundle covers. Token variables such as "
                       "GH_TOKEN hold stand-ins, not secrets; tools use them as they are and "
                       "authenticate. HTTPS_PROXY and HTTP_PROXY hold this session's token: "
                       "never print, log or copy them.";
        if (state && strcmp(state, "unavailable") == 0)
                return " Agent Vault could not be used when this session started, so no "
                       "credentials are brokered, and requests to services that need one will "
                       "fail to authenticate. Tell the user; do not look for credentials "
                       "anywhere else.";
        return "";
}

char *vault_exec_json(const struct plan_vault *v, const char *name)
{
        cJSON *o = cJSON_CreateObject(), *argv, *env;
        bool secret = false;
        char *out;

        cJSON_AddStringToObject(o, "launch", "agent-vault");
        cJSON_AddStringToObject(o, "why",
                                "the profile's .env sets " VAULT_PREFIX "BUNDLE, and the proxy "
                                "serves the pinned CA");
        cJSON_AddStringToObject(o, "path", v->exec_path);
        argv = cJSON_AddArrayToObject(o, "argv");
        for (size_t i = 0; i < v->n_exec_argv; i++) {
                cJSON_AddItemToArray(argv,
                                     cJSON_CreateString(secret ? "<redacted>" : v->exec_argv[i]));
                secret = strcmp(v->exec_argv[i], "--access-bundle") == 0;
        }
        env = cJSON_AddObjectToObject(o, "env_added");
        cJSON_AddStringToObject(env, VAULT_RUN_ENV, name);
        cJSON_AddStringToObject(o, "then",
                                "infisical starts this csandbox run again with the proxy and CA "
                                "variables; `infisical agent-vault run ... -- csandbox plan` "
                                "shows that launch");
        out = cJSON_Print(o);
        cJSON_Delete(o);
        return out;
}
