/* Settings filtering (reference §3): the sandbox's copy of a profile settings.json and
 * shared-settings.json, parsed and printed as Python does (common/pyjson.c). */
#include "settings.h"

#include "common/cleanup.h"
#include "common/error.h"
#include "common/pyjson.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SETTINGS_MAX_BYTES ((size_t)4 << 20)

const char *const settings_sandbox_deny_prefixes[4] = {
    "Bash(sudo",
    "Read(~/.ssh",
    "Edit(~/.ssh",
    "Read(~/.aws",
};

/* ---- the filters ---- */

static bool deny_rule_stripped(const char *rule)
{
        for (size_t i = 0; i < 4; i++)
                if (strncmp(rule, settings_sandbox_deny_prefixes[i],
                            strlen(settings_sandbox_deny_prefixes[i])) == 0)
                        return true;
        return false;
}

/* §3.1 deny strip: only a top-level object with an object "permissions" holding a list
 * "deny"; string rules with one of the prefixes go, everything else stays in order. */
static bool strip_sandbox_denies(cJSON *root)
{
        cJSON *perms = pyjson_member_get(root, "permissions");
        cJSON *deny = pyjson_member_get(perms, "deny");
        cJSON *c, *next;
        bool stripped = false;

        if (!cJSON_IsObject(perms) || !cJSON_IsArray(deny))
                return false;
        for (c = deny->child; c; c = next) {
                next = c->next;
                if (cJSON_IsString(c) && deny_rule_stripped(c->valuestring)) {
                        cJSON_Delete(cJSON_DetachItemViaPointer(deny, c));
                        stripped = true;
                }
        }
        return stripped;
}

static int copy_verbatim(const char *raw, size_t len, char **ret, size_t *ret_len)
{
        char *buf = malloc(len + 1);

        if (!buf)
                return -ENOMEM;
        memcpy(buf, raw, len);
        buf[len] = '\0';
        *ret = buf;
        *ret_len = len;
        return 0;
}

/* Whether root now says bypass mode was accepted, having been changed to (a false or a
 * repeated key replaced by one true at the end). */
static bool accept_bypass_in(cJSON *root)
{
        cJSON *have = pyjson_member_get(root, SETTINGS_BYPASS_ACCEPTED);

        if (!cJSON_IsObject(root) || cJSON_IsTrue(have))
                return false;
        while ((have = pyjson_member_get(root, SETTINGS_BYPASS_ACCEPTED)))
                cJSON_Delete(cJSON_DetachItemViaPointer(root, have));
        return cJSON_AddTrueToObject(root, SETTINGS_BYPASS_ACCEPTED) != NULL;
}

int settings_profile_copy(const char *raw, size_t len, bool accept_bypass, char **ret,
                          size_t *ret_len, bool *ret_stripped, struct cs_error *err)
{
        struct pyjson_parser ps = {0};
        cJSON *root = NULL;
        struct strbuf out = {0};
        bool stripped, accepted;
        int r;

        if (len > SETTINGS_MAX_BYTES)
                return cs_error_setx(err, EFBIG,
                                     "settings.json is %zu bytes, over the limit of %zu bytes", len,
                                     SETTINGS_MAX_BYTES);
        ps.start = ps.p = (const unsigned char *)raw;
        ps.end = ps.p + len;
        ps.surrogatepass = true;
        /* json.loads(bytes) decodes with utf-8-sig: a leading BOM is dropped. */
        if (len >= 3 && memcmp(raw, "\xef\xbb\xbf", 3) == 0)
                ps.p += 3;
        r = pyjson_parse(&ps, &root);
        if (r < 0)
                return cs_error_set(err, -r, "parse settings.json");
        stripped = root && strip_sandbox_denies(root);
        accepted = root && accept_bypass && accept_bypass_in(root);
        /* Unparseable (or deeper than we parse), or nothing to change: the file as it is. */
        if (!stripped && !accepted) {
                cJSON_Delete(root);
                r = copy_verbatim(raw, len, ret, ret_len);
                if (r < 0)
                        return cs_error_set(err, -r, "copy settings.json");
                *ret_stripped = false;
                return 0;
        }
        r = pyjson_print(&out, root, 2, 0);
        cJSON_Delete(root);
        if (r < 0) {
                free(out.s);
                return cs_error_set(err, ENOMEM, "print settings.json");
        }
        *ret = out.s;
        *ret_len = out.len;
        *ret_stripped = stripped;
        return 0;
}

/* {profile} in every string value, recursively; keys untouched. */
static int fill_profile(cJSON *node, const char *name)
{
        static const char placeholder[] = "{profile}";
        const size_t plen = sizeof(placeholder) - 1;

        if (cJSON_IsString(node) && strstr(node->valuestring, placeholder)) {
                struct strbuf b = {0};
                const char *s = node->valuestring, *hit;

                sb_add(&b, "", 0);
                while ((hit = strstr(s, placeholder))) {
                        sb_add(&b, s, (size_t)(hit - s));
                        sb_puts(&b, name);
                        s = hit + plen;
                }
                sb_puts(&b, s);
                if (b.oom || !cJSON_SetValuestring(node, b.s)) {
                        free(b.s);
                        return -ENOMEM;
                }
                free(b.s);
                return 0;
        }
        if (cJSON_IsArray(node) || cJSON_IsObject(node))
                for (cJSON *c = node->child; c; c = c->next)
                        if (fill_profile(c, name) < 0)
                                return -ENOMEM;
        return 0;
}

static bool url_unsafe(unsigned char c)
{
        return c == '\t' || c == '\r' || c == '\n';
}

static bool scheme_char(unsigned char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || pyjson_is_digit(c) || c == '+' ||
               c == '-' || c == '.';
}

/* §3.2: urllib.parse.urlsplit + urlunsplit with only the host swapped when it is a
 * loopback name. *ret_new is NULL when the URL is left alone. */
static int rewrite_loopback_url(const char *url, char **ret_new, struct cs_error *err)
{
        _cleanup_free_ char *u = NULL;
        const char *scheme = NULL, *rest, *netloc_end, *at, *hostport, *colon, *host_end;
        size_t scheme_len = 0, i, o = 0, n = strlen(url);
        struct strbuf b = {0};
        const char *path, *hash, *qmark, *query = NULL, *frag = NULL;
        size_t path_len, query_len = 0, frag_len = 0;
        char host[16];

        *ret_new = NULL;
        /* urlsplit strips leading C0 controls and spaces and drops tab, CR and LF. */
        i = 0;
        for (;;) {
                if (i < n && (unsigned char)url[i] <= 0x20)
                        i++;
                else if (i + 1 < n && (unsigned char)url[i] == 0xc0 &&
                         (unsigned char)url[i + 1] == 0x80)
                        i += 2;
                else
                        break;
        }
        u = malloc(n - i + 1);
        if (!u)
                return cs_error_set(err, ENOMEM, "rewrite a hook URL");
        for (; i < n; i++)
                if (!url_unsafe((unsigned char)url[i]))
                        u[o++] = url[i];
        u[o] = '\0';

        rest = u;
        colon = strchr(u, ':');
        if (colon && colon > u && ((u[0] >= 'a' && u[0] <= 'z') || (u[0] >= 'A' && u[0] <= 'Z'))) {
                const char *q;

                for (q = u; q < colon && scheme_char((unsigned char)*q); q++)
                        ;
                if (q == colon) {
                        scheme = u;
                        scheme_len = (size_t)(colon - u);
                        rest = colon + 1;
                }
        }
        if (strncmp(rest, "//", 2) != 0)
                return 0;
        rest += 2;
        netloc_end = rest + strcspn(rest, "/?#");
        {
                const char *lb = memchr(rest, '[', (size_t)(netloc_end - rest));
                const char *rb = memchr(rest, ']', (size_t)(netloc_end - rest));

                if (!lb != !rb)
                        return cs_error_setx(err, EINVAL,
                                             "hook URL %s has an unbalanced '[' or ']' in its host",
                                             url);
        }
        at = NULL;
        for (const char *q = rest; q < netloc_end; q++)
                if (*q == '@')
                        at = q;
        hostport = at ? at + 1 : rest;
        colon = memchr(hostport, ':', (size_t)(netloc_end - hostport));
        host_end = colon ? colon : netloc_end;
        if ((size_t)(host_end - hostport) >= sizeof(host))
                return 0;
        for (i = 0; hostport + i < host_end; i++) {
                char c = hostport[i];

                host[i] = (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
        }
        host[i] = '\0';
        if (strcmp(host, "127.0.0.1") != 0 && strcmp(host, "localhost") != 0)
                return 0;

        path = netloc_end;
        hash = strchr(path, '#');
        if (hash) {
                frag = hash + 1;
                frag_len = strlen(frag);
        }
        path_len = hash ? (size_t)(hash - path) : strlen(path);
        qmark = memchr(path, '?', path_len);
        if (qmark) {
                query = qmark + 1;
                query_len = path_len - (size_t)(query - path);
                path_len = (size_t)(qmark - path);
        }
        sb_add(&b, "", 0);
        for (i = 0; i < scheme_len; i++) {
                char c = scheme[i];

                sb_putc(&b, (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c);
        }
        if (scheme)
                sb_putc(&b, ':');
        sb_puts(&b, "//");
        sb_add(&b, rest, (size_t)(hostport - rest));
        sb_puts(&b, "169.254.1.2");
        sb_add(&b, host_end, (size_t)(netloc_end - host_end));
        sb_add(&b, path, path_len);
        /* urlunsplit drops an empty query or fragment with its delimiter. */
        if (query_len) {
                sb_putc(&b, '?');
                sb_add(&b, query, query_len);
        }
        if (frag_len) {
                sb_putc(&b, '#');
                sb_add(&b, frag, frag_len);
        }
        if (b.oom) {
                free(b.s);
                return cs_error_set(err, ENOMEM, "rewrite a hook URL");
        }
        *ret_new = b.s;
        return 0;
}

static int rewrite_loopback_hooks(cJSON *root, bool *ret_rewrote, struct cs_error *err)
{
        cJSON *hooks = pyjson_member_get(root, "hooks");
        _cleanup_free_ cJSON **keys = NULL;
        _cleanup_free_ cJSON **events = NULL;
        size_t n, i;
        bool rewrote = false;

        *ret_rewrote = false;
        if (!cJSON_IsObject(hooks))
                return 0;
        if (pyjson_object_members(hooks, &keys, &events, &n) < 0)
                return cs_error_set(err, ENOMEM, "rewrite hooks");
        for (i = 0; i < n; i++) {
                cJSON *group;

                if (!cJSON_IsArray(events[i]))
                        continue;
                cJSON_ArrayForEach(group, events[i])
                {
                        cJSON *handlers = pyjson_member_get(group, "hooks"), *h;

                        if (!cJSON_IsObject(group) || !cJSON_IsArray(handlers))
                                continue;
                        cJSON_ArrayForEach(h, handlers)
                        {
                                cJSON *type = pyjson_member_get(h, "type"),
                                      *url = pyjson_member_get(h, "url");
                                char *new_url = NULL;
                                int r;

                                if (!cJSON_IsObject(h) || !cJSON_IsString(type) ||
                                    strcmp(type->valuestring, "http") != 0 || !cJSON_IsString(url))
                                        continue;
                                r = rewrite_loopback_url(url->valuestring, &new_url, err);
                                if (r < 0)
                                        return r;
                                if (!new_url)
                                        continue;
                                if (!cJSON_SetValuestring(url, new_url)) {
                                        free(new_url);
                                        return cs_error_set(err, ENOMEM, "rewrite hooks");
                                }
                                free(new_url);
                                rewrote = true;
                        }
                }
        }
        *ret_rewrote = rewrote;
        return 0;
}

int settings_shared(const char *raw, size_t len, const char *origin, const char *name, bool sandbox,
                    char **ret, bool *ret_host_loopback, struct cs_error *err)
{
        struct pyjson_parser ps = {0};
        cJSON *root = NULL;
        struct strbuf out = {0};
        bool host_loopback = false;
        int r, line, col;

        if (len > SETTINGS_MAX_BYTES)
                return cs_error_setx(err, EFBIG,
                                     "Can't read %s: it is %zu bytes, over the limit of %zu",
                                     origin, len, SETTINGS_MAX_BYTES);
        ps.start = ps.p = (const unsigned char *)raw;
        ps.end = ps.p + len;
        /* read_text() then json.loads(str): strict UTF-8, and a BOM is an error. */
        if (len >= 3 && memcmp(raw, "\xef\xbb\xbf", 3) == 0)
                return cs_error_setx(err, EINVAL,
                                     "Can't read %s: it starts with a UTF-8 byte order mark, "
                                     "which JSON does not allow",
                                     origin);
        r = pyjson_parse(&ps, &root);
        if (r < 0)
                return cs_error_set(err, -r, "Can't read %s", origin);
        if (!root) {
                pyjson_error_position(&ps, &line, &col);
                return cs_error_setx(err, EINVAL,
                                     "Can't read %s: invalid JSON (%s) at line %d column %d",
                                     origin, ps.why ? ps.why : "syntax error", line, col);
        }
        if (!cJSON_IsObject(root)) {
                cJSON_Delete(root);
                return cs_error_setx(err, EINVAL, "%s must hold a JSON object.", origin);
        }
        r = fill_profile(root, name);
        if (r == 0 && sandbox) {
                r = rewrite_loopback_hooks(root, &host_loopback, err);
                if (r < 0) {
                        cJSON_Delete(root);
                        return cs_error_wrap(err, "%s", origin);
                }
                strip_sandbox_denies(root);
        }
        if (r == 0)
                r = pyjson_print(&out, root, 0, 0);
        cJSON_Delete(root);
        if (r < 0) {
                free(out.s);
                return cs_error_set(err, ENOMEM, "Can't read %s", origin);
        }
        *ret = out.s;
        *ret_host_loopback = host_loopback;
        return 0;
}

bool settings_args_have(char *const *args, size_t n, const char *flag)
{
        size_t flen = strlen(flag);

        for (size_t i = 0; i < n; i++)
                if (args[i] && strncmp(args[i], flag, flen) == 0 &&
                    (args[i][flen] == '\0' || args[i][flen] == '='))
                        return true;
        return false;
}
