/* Infisical and Pulumi logins for the sandbox (reference §2.1 item 5): read on the host,
 * where the keyring and ~/.pulumi are, and passed in as the variables the CLIs read. */
#include "logins.h"

#include "../common/base64.h"
#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"
#include "../common/path.h"
#include "../common/pyjson.h"
#include "../common/spawn.h"
#include "../common/strbuf.h"
#include "../common/strv.h"
#include "../spec/spec.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define CONFIG_MAX         ((size_t)1 << 20)
#define SECRET_TOOL_MS     10000 /* the reference's bound on the keyring lookup */
#define SECRET_TOOL_MAX    ((size_t)256 << 10)
#define JWT_EXPIRY_SLACK_S 30 /* a token this close to its end counts as expired, as the CLI's */

/* A user's JSON file under home; NULL when it is missing or not JSON. */
static cJSON *home_json(const struct profile_config *c, const char *rel)
{
        _cleanup_free_ char *path = cs_path_join(c->home, rel), *buf = NULL;
        struct cs_error ignored = {0};
        size_t len;

        if (!path || cs_read_file_at(AT_FDCWD, path, CONFIG_MAX, false, &buf, &len, &ignored) < 0)
                return NULL;
        return cJSON_ParseWithLength(buf, len);
}

static bool home_exists(const struct profile_config *c, const char *rel)
{
        _cleanup_free_ char *path = cs_path_join(c->home, rel);

        return path && faccessat(AT_FDCWD, path, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

/* A JWT is usable when its payload has a numeric exp more than 30 s away. */
static bool jwt_live(const char *token)
{
        const char *a = strchr(token, '.'), *b = a ? strchr(a + 1, '.') : NULL;
        _cleanup_free_ unsigned char *payload = NULL;
        const cJSON *exp;
        cJSON *o;
        size_t len;
        bool live;

        if (!a || !b || strchr(b + 1, '.') ||
            cs_base64_decode(a + 1, (size_t)(b - a - 1), true, &payload, &len) < 0)
                return false;
        o = cJSON_ParseWithLength((const char *)payload, len);
        exp = cJSON_GetObjectItemCaseSensitive(o, "exp");
        live = cJSON_IsNumber(exp) && exp->valuedouble > (double)time(NULL) + JWT_EXPIRY_SLACK_S;
        cJSON_Delete(o);
        return live;
}

/* The login's access token from the keyring (`secret-tool lookup service infisical-cli
 * username EMAIL` prints the CLI's JSON record, the token in "JTWToken" as the CLI spells
 * it); NULL when there is none or it has expired. */
static char *infisical_token(const char *secret_tool, const char *email)
{
        _cleanup_(cs_capture_free) struct cs_capture cap = {0};
        char *argv[] = {"secret-tool", "lookup",      "service", "infisical-cli",
                        "username",    (char *)email, NULL};
        const cJSON *tok;
        char *ret = NULL;
        cJSON *o;

        if (cs_spawn_capture(&(struct cs_spawn){.path = secret_tool,
                                                .argv = argv,
                                                .timeout_ms = SECRET_TOOL_MS,
                                                .max = SECRET_TOOL_MAX},
                             &cap) < 0 ||
            !cs_capture_ok(&cap) || !cap.len)
                return NULL;
        o = cJSON_ParseWithLength(cap.out, cap.len);
        tok = cJSON_GetObjectItemCaseSensitive(o, "JTWToken");
        if (cJSON_IsString(tok) && !strpbrk(tok->valuestring, "\n\r") && jwt_live(tok->valuestring))
                ret = strdup(tok->valuestring);
        if (o && cJSON_IsString(tok))
                explicit_bzero(tok->valuestring, strlen(tok->valuestring));
        cJSON_Delete(o);
        return ret;
}

/* The host name of a URL ("https://eu.example.com/api" -> "eu.example.com"), lower-cased. */
static void url_host(const char *url, char *out, size_t size)
{
        const char *p = strstr(url, "://"), *at;
        size_t n;

        p = p ? p + 3 : url;
        n = strcspn(p, "/?#");
        at = memchr(p, '@', n);
        if (at) {
                n -= (size_t)(at + 1 - p);
                p = at + 1;
        }
        if (*p == '[')
                n = strcspn(p, "]") + 1 <= n ? strcspn(p, "]") + 1 : n;
        else
                n = strcspn(p, ":/?#") < n ? strcspn(p, ":/?#") : n;
        if (n >= size)
                n = size - 1;
        for (size_t i = 0; i < n; i++)
                out[i] = (char)tolower((unsigned char)p[i]);
        out[n] = '\0';
}

/* An allowlist entry names a login: with an '@', its email exactly; else a domain equal to,
 * or a parent of, the email's domain or the login's Infisical host. */
static bool login_matches(const char *entry, const char *email, const char *domain)
{
        char lower[512], host[256];
        const char *names[2];

        snprintf(lower, sizeof(lower), "%s", email);
        for (char *c = lower; *c; c++)
                *c = (char)tolower((unsigned char)*c);
        if (strchr(entry, '@'))
                return strcmp(entry, lower) == 0;
        url_host(domain, host, sizeof(host));
        names[0] = strrchr(lower, '@') ? strrchr(lower, '@') + 1 : lower;
        names[1] = host;
        for (size_t i = 0; i < 2; i++) {
                size_t n = strlen(names[i]), e = strlen(entry);

                if (!*names[i])
                        continue;
                if (strcmp(names[i], entry) == 0 ||
                    (n > e && names[i][n - e - 1] == '.' && strcmp(names[i] + n - e, entry) == 0))
                        return true;
        }
        return false;
}

struct login {
        const char *email, *domain;
        char *token;
        bool active;
};

int plan_add_infisical(struct sandbox_spec *s, const struct profile_config *c,
                       struct stage_warnings *warn, struct cs_error *err)
{
        _cleanup_free_ char *secret_tool = NULL, *json = NULL;
        char **allow = NULL, **seen = NULL;
        size_t n_allow = 0, n_seen = 0, n = 0;
        struct login logins[64];
        const cJSON *users, *user, *active;
        cJSON *config = NULL, *list = NULL;
        size_t primary = 0;
        int r = 0;

        if (!c->infisical)
                return 0;
        if (profile_forward_env_split(c->infisical, &allow, &n_allow) < 0)
                return cs_error_set(err, ENOMEM, "CLAUDE_PROFILE_SANDBOX_INFISICAL");
        if (n_allow == 0)
                return 0;
        secret_tool = cs_find_program("secret-tool");
        if (!secret_tool) {
                strv_free(&allow, &n_allow);
                return stage_warn(warn, err,
                                  "Warning: CLAUDE_PROFILE_SANDBOX_INFISICAL is set, but "
                                  "secret-tool is not installed, so the Infisical logins cannot "
                                  "be read from the keyring and none is passed in. Install "
                                  "libsecret's tools (the package providing secret-tool).");
        }
        config = home_json(c, ".infisical/infisical-config.json");
        users = cJSON_GetObjectItemCaseSensitive(config, "loggedInUsers");
        if (!cJSON_IsArray(users))
                users = NULL;
        active = cJSON_GetObjectItemCaseSensitive(config, "loggedInUserEmail");
        for (size_t i = 0; r >= 0 && i < n_allow; i++) {
                bool matched = false;

                for (char *ch = allow[i]; *ch; ch++)
                        *ch = (char)tolower((unsigned char)*ch);
                cJSON_ArrayForEach(user, users)
                {
                        const cJSON *em = cJSON_GetObjectItemCaseSensitive(user, "email");
                        const cJSON *dom = cJSON_GetObjectItemCaseSensitive(user, "domain");
                        const char *email = cJSON_IsString(em) ? em->valuestring : "";
                        const char *domain = cJSON_IsString(dom) ? dom->valuestring : "";
                        char *tok;

                        if (!login_matches(allow[i], email, domain))
                                continue;
                        matched = true;
                        if (!*email || strv_has(seen, n_seen, email) ||
                            n >= sizeof(logins) / sizeof(logins[0]))
                                continue;
                        tok = infisical_token(secret_tool, email);
                        if (!tok) {
                                r = stage_warn(warn, err,
                                               "Warning: the Infisical login %s has no valid "
                                               "token in the keyring (expired? run `infisical "
                                               "login` on the host); it is not passed in.",
                                               email);
                                continue;
                        }
                        if (strv_push_dup(&seen, &n_seen, email) < 0) {
                                free(tok);
                                r = cs_error_set(err, ENOMEM, "Infisical logins");
                                break;
                        }
                        logins[n++] =
                            (struct login){.email = email,
                                           .domain = domain,
                                           .token = tok,
                                           .active = cJSON_IsString(active) &&
                                                     strcmp(active->valuestring, email) == 0};
                }
                if (r >= 0 && !matched)
                        r = stage_warn(warn, err,
                                       "Warning: no Infisical login of the host's matches `%s` "
                                       "(from CLAUDE_PROFILE_SANDBOX_INFISICAL); `infisical "
                                       "login` on the host adds one.",
                                       allow[i]);
        }
        if (r >= 0 && n > 0) {
                list = cJSON_CreateArray();
                for (size_t i = 0; i < n; i++) {
                        cJSON *o = cJSON_CreateObject();

                        cJSON_AddStringToObject(o, "email", logins[i].email);
                        cJSON_AddStringToObject(o, "domain", logins[i].domain);
                        cJSON_AddStringToObject(o, "token", logins[i].token);
                        cJSON_AddItemToArray(list, o);
                        if (logins[i].active && !logins[primary].active)
                                primary = i;
                }
                /* As json.dumps writes it, which is what the reference passes. */
                struct strbuf b = {0};

                if (pyjson_print(&b, list, 0, 0) < 0 || b.oom) {
                        free(b.s);
                        r = cs_error_set(err, ENOMEM, "Infisical logins");
                } else {
                        json = b.s;
                }
                if (r >= 0)
                        r = spec_env_set(s, "INFISICAL_TOKEN", logins[primary].token, true, err);
                if (r >= 0)
                        r = spec_env_set(s, "INFISICAL_API_URL", logins[primary].domain, false,
                                         err);
                if (r >= 0)
                        r = spec_env_set(s, "INFISICAL_DOMAIN", logins[primary].domain, false, err);
                if (r >= 0)
                        r = spec_env_set(s, "CLAUDE_SANDBOX_INFISICAL", json, true, err);
        }
        for (size_t i = 0; i < n; i++) {
                explicit_bzero(logins[i].token, strlen(logins[i].token));
                free(logins[i].token);
        }
        if (json)
                explicit_bzero(json, strlen(json));
        cJSON_Delete(list);
        cJSON_Delete(config);
        strv_free(&allow, &n_allow);
        strv_free(&seen, &n_seen);
        return r;
}

int plan_add_pulumi(struct sandbox_spec *s, const struct profile_config *c,
                    struct stage_warnings *warn, struct cs_error *err)
{
        cJSON *creds;
        const cJSON *cur, *tokens, *tok = NULL;
        int r;

        if (!c->pulumi)
                return 0;
        creds = home_json(c, ".pulumi/credentials.json");
        cur = cJSON_GetObjectItemCaseSensitive(creds, "current");
        tokens = cJSON_GetObjectItemCaseSensitive(creds, "accessTokens");
        /* Only a Pulumi Cloud backend (https) has a token; s3://, file:// and the rest none. */
        if (cJSON_IsString(cur) && strncmp(cur->valuestring, "https://", 8) == 0 &&
            cJSON_IsObject(tokens))
                tok = cJSON_GetObjectItemCaseSensitive(tokens, cur->valuestring);
        if (cJSON_IsString(tok) && *tok->valuestring && !strpbrk(tok->valuestring, "\n\r"))
                r = spec_env_set(s, "PULUMI_ACCESS_TOKEN", tok->valuestring, true, err);
        else if (!creds)
                /* say what is there: a missing file is not one without a token */
                r = stage_warn(warn, err,
                               "Warning: CLAUDE_PROFILE_SANDBOX_PULUMI is set, but %s/.pulumi/"
                               "credentials.json %s (`pulumi login` on the host makes it), so "
                               "pulumi is not logged in in the sandbox.",
                               c->home,
                               home_exists(c, ".pulumi/credentials.json") ? "cannot be read as JSON"
                                                                          : "does not exist");
        else
                r = stage_warn(warn, err,
                               "Warning: CLAUDE_PROFILE_SANDBOX_PULUMI is set, but %s/.pulumi/"
                               "credentials.json has no Pulumi Cloud token for its current "
                               "backend (`pulumi login` on the host makes one), so pulumi is not "
                               "logged in in the sandbox.",
                               c->home);
        if (cJSON_IsString(tok))
                explicit_bzero(tok->valuestring, strlen(tok->valuestring));
        cJSON_Delete(creds);
        return r;
}

char *logins_briefing(const struct sandbox_spec *s)
{
        const char *raw = spec_env_get(s, "CLAUDE_SANDBOX_INFISICAL");
        const char *domain = spec_env_get(s, "INFISICAL_DOMAIN");
        struct strbuf b = {0};
        const cJSON *e;
        cJSON *list;
        bool first = true;

        if (!raw)
                return NULL;
        list = cJSON_Parse(raw);
        sb_puts(&b, " The infisical CLI is logged in: INFISICAL_TOKEN and INFISICAL_API_URL name "
                    "your primary login (");
        sb_puts(&b, domain ? domain : "");
        sb_puts(&b, "), so `infisical secrets --projectId ... --env ...` works without more "
                    "flags. The logins passed in (JSON in $CLAUDE_SANDBOX_INFISICAL): ");
        cJSON_ArrayForEach(e, list)
        {
                const cJSON *em = cJSON_GetObjectItemCaseSensitive(e, "email");
                const cJSON *dom = cJSON_GetObjectItemCaseSensitive(e, "domain");

                sb_puts(&b, first ? "" : ", ");
                sb_puts(&b, cJSON_IsString(em) ? em->valuestring : "?");
                sb_puts(&b, " (");
                sb_puts(&b, cJSON_IsString(dom) ? dom->valuestring : "?");
                sb_puts(&b, ")");
                first = false;
        }
        sb_puts(&b, ". For another login, give its --token and --domain from that JSON: the "
                    "domain in the environment wins over a repository's .infisical.json, so "
                    "always give --domain for a login that is not the primary. The tokens "
                    "expire after about ten days and the keyring stays on the host: a new "
                    "launch brings fresh ones.");
        cJSON_Delete(list);
        if (b.oom) {
                free(b.s);
                return NULL;
        }
        return b.s;
}
