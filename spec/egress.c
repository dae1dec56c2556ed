/* The egress policy of a spec: its mode, its allowed hosts (names, "*.name", optional
 * ports, address ranges), and the two questions csandbox's proxy and resolver ask of it. */
#include "spec.h"

#include "../common/error.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* What claude itself connects to before and while it works: its API, the login pages and
 * token endpoint, and its telemetry intake (the names its binary carries). */
static const char *const builtin_hosts[] = {
    "api.anthropic.com:443",
    "claude.ai:443",
    "platform.claude.com:443",
    "mcp-proxy.anthropic.com:443",
    "http-intake.logs.us5.datadoghq.com:443",
};

const char *spec_egress_name(enum spec_egress e)
{
        switch (e) {
        case SPEC_EGRESS_OPEN:
                return "open";
        case SPEC_EGRESS_ALLOWLIST:
                return "allowlist";
        case SPEC_EGRESS_NONE:
                return "none";
        }
        return "?";
}

bool spec_egress_parse(const char *v, enum spec_egress *ret)
{
        for (int e = SPEC_EGRESS_OPEN; e <= SPEC_EGRESS_NONE; e++)
                if (strcmp(v, spec_egress_name((enum spec_egress)e)) == 0) {
                        *ret = (enum spec_egress)e;
                        return true;
                }
        return false;
}

void spec_egress_free(struct sandbox_spec *s)
{
        for (size_t i = 0; i < s->n_egress_hosts; i++) {
                free(s->egress_hosts[i].text);
                free(s->egress_hosts[i].name);
        }
        free(s->egress_hosts);
        free(s->egress_log);
        s->egress_hosts = NULL;
        s->n_egress_hosts = 0;
        s->egress_log = NULL;
}

/* Labels of letters, digits, '-' and '_', 1 to 63 bytes each, neither starting nor ending
 * with '-', 253 in all. */
static bool name_valid(const char *n, size_t len)
{
        size_t label = 0;

        if (len == 0 || len > 253)
                return false;
        for (size_t i = 0; i <= len; i++) {
                if (i == len || n[i] == '.') {
                        if (label == 0 || label > 63 || n[i - 1] == '-' || n[i - label] == '-')
                                return false;
                        label = 0;
                } else if (isalnum((unsigned char)n[i]) || n[i] == '-' || n[i] == '_') {
                        label++;
                } else {
                        return false;
                }
        }
        return true;
}

static bool range_parse(const char *text, struct spec_egress_host *h)
{
        char buf[64], *slash, *end;
        unsigned long prefix;

        if (strlen(text) >= sizeof(buf))
                return false;
        strcpy(buf, text);
        slash = strchr(buf, '/');
        if (slash)
                *slash = '\0';
        if (inet_pton(AF_INET, buf, h->addr) == 1)
                h->family = AF_INET;
        else if (inet_pton(AF_INET6, buf, h->addr) == 1)
                h->family = AF_INET6;
        else
                return false;
        prefix = h->family == AF_INET ? 32 : 128;
        if (slash) {
                if (!isdigit((unsigned char)slash[1]))
                        return false;
                errno = 0;
                prefix = strtoul(slash + 1, &end, 10);
                if (errno || *end || prefix > (h->family == AF_INET ? 32u : 128u))
                        return false;
        }
        h->prefix = (unsigned)prefix;
        return true;
}

int spec_egress_add(struct sandbox_spec *s, const char *pattern, bool builtin, const char *what,
                    struct cs_error *err)
{
        struct spec_egress_host h = {.builtin = builtin}, *n;
        const char *host = pattern, *colon;
        size_t len;

        if (s->n_egress_hosts >= SPEC_EGRESS_MAX_HOSTS)
                return cs_error_setx(err, E2BIG, "%s: more than %d hosts", what,
                                     SPEC_EGRESS_MAX_HOSTS);
        if (!range_parse(pattern, &h)) {
                h.family = 0;
                if (strncmp(host, "*.", 2) == 0) {
                        h.wildcard = true;
                        host += 2;
                }
                colon = strchr(host, ':');
                len = colon ? (size_t)(colon - host) : strlen(host);
                if (len && host[len - 1] == '.')
                        len--;
                if (colon) {
                        char *end;
                        unsigned long port;

                        errno = 0;
                        port = isdigit((unsigned char)colon[1]) ? strtoul(colon + 1, &end, 10) : 0;
                        if (errno || port == 0 || port > 65535 || *end)
                                len = 0;
                        h.port = (uint16_t)port;
                }
                if (!name_valid(host, len))
                        return cs_error_setx(err, EINVAL,
                                             "%s `%.300s`: not a host pattern; give a name "
                                             "(example.com), its subdomains (*.example.com), "
                                             "either with an optional :PORT, or an address "
                                             "range (192.0.2.0/24, 2001:db8::/32)",
                                             what, pattern);
                h.name = strndup(host, len);
                if (!h.name)
                        return cs_error_set(err, ENOMEM, "%s", what);
                for (char *c = h.name; *c; c++)
                        *c = (char)tolower((unsigned char)*c);
        }
        h.text = strdup(pattern);
        n = h.text ? realloc(s->egress_hosts, (s->n_egress_hosts + 1) * sizeof(*n)) : NULL;
        if (!n) {
                free(h.text);
                free(h.name);
                return cs_error_set(err, ENOMEM, "%s", what);
        }
        s->egress_hosts = n;
        s->egress_hosts[s->n_egress_hosts++] = h;
        return 0;
}

static int egress_list(struct sandbox_spec *s, const char *list, bool deny, const char *what,
                       struct cs_error *err)
{
        for (const char *p = list; *p;) {
                const char *e = strchr(p, ',');
                size_t len = e ? (size_t)(e - p) : strlen(p);
                char item[320];

                while (len && isspace((unsigned char)*p))
                        p++, len--;
                while (len && isspace((unsigned char)p[len - 1]))
                        len--;
                if (len >= sizeof(item))
                        return cs_error_setx(err, EINVAL, "%s: the entry `%.40s...` is too long",
                                             what, p);
                if (len) {
                        memcpy(item, p, len);
                        item[len] = '\0';
                        if ((deny ? spec_egress_deny(s, item, what, err)
                                  : spec_egress_add(s, item, false, what, err)) < 0)
                                return -err->err;
                }
                if (!e)
                        break;
                p = e + 1;
        }
        return 0;
}

int spec_egress_add_list(struct sandbox_spec *s, const char *list, const char *what,
                         struct cs_error *err)
{
        return egress_list(s, list, false, what, err);
}

int spec_egress_deny(struct sandbox_spec *s, const char *pattern, const char *what,
                     struct cs_error *err)
{
        int r = spec_egress_add(s, pattern, false, what, err);

        if (r >= 0)
                s->egress_hosts[s->n_egress_hosts - 1].deny = true;
        return r;
}

int spec_egress_deny_list(struct sandbox_spec *s, const char *list, const char *what,
                          struct cs_error *err)
{
        return egress_list(s, list, true, what, err);
}

int spec_egress_add_builtin(struct sandbox_spec *s, struct cs_error *err)
{
        for (size_t i = 0; i < s->n_egress_hosts; i++)
                if (s->egress_hosts[i].builtin)
                        return 0;
        for (size_t i = 0; i < sizeof(builtin_hosts) / sizeof(builtin_hosts[0]); i++)
                if (spec_egress_add(s, builtin_hosts[i], true, "built-in host", err) < 0)
                        return -err->err;
        return 0;
}

static bool name_matches(const struct spec_egress_host *h, const char *name, uint16_t port)
{
        size_t nl = strlen(name), hl;

        if (!h->name || (port && h->port && h->port != port))
                return false;
        hl = strlen(h->name);
        if (!h->wildcard)
                return strcmp(name, h->name) == 0;
        return nl > hl + 1 && name[nl - hl - 1] == '.' && strcmp(name + nl - hl, h->name) == 0;
}

bool spec_egress_name_allowed(const struct sandbox_spec *s, const char *name, uint16_t port)
{
        bool allowed = false;

        for (size_t i = 0; i < s->n_egress_hosts; i++) {
                const struct spec_egress_host *h = &s->egress_hosts[i];

                if (!name_matches(h, name, port))
                        continue;
                /* a denied name with a port denies that port; for DNS (port 0) only a deny
                 * of every port refuses the name */
                if (h->deny && (port || !h->port))
                        return false;
                if (!h->deny)
                        allowed = true;
        }
        return allowed;
}

static bool range_holds(const struct spec_egress_host *h, int family, const unsigned char *a)
{
        unsigned whole = h->prefix / 8, rest = h->prefix % 8;

        if (h->name || h->family != family || memcmp(h->addr, a, whole) != 0)
                return false;
        return !rest || ((h->addr[whole] ^ a[whole]) & (0xff << (8 - rest)) & 0xff) == 0;
}

bool spec_egress_addr_denied(const struct sandbox_spec *s, int family, const void *addr)
{
        for (size_t i = 0; i < s->n_egress_hosts; i++)
                if (s->egress_hosts[i].deny && range_holds(&s->egress_hosts[i], family, addr))
                        return true;
        return false;
}

bool spec_egress_addr_allowed(const struct sandbox_spec *s, int family, const void *addr,
                              uint16_t port)
{
        bool allowed = false;

        (void)port;
        for (size_t i = 0; i < s->n_egress_hosts; i++) {
                const struct spec_egress_host *h = &s->egress_hosts[i];

                if (!range_holds(h, family, addr))
                        continue;
                if (h->deny)
                        return false;
                allowed = true;
        }
        return allowed;
}

int spec_egress_finish(struct sandbox_spec *s, const char *what, struct cs_error *err)
{
        if (s->egress == SPEC_EGRESS_NONE) {
                if (s->net == SPEC_NET_HOST)
                        return cs_error_setx(err, EINVAL,
                                             "%s none: the sandbox cannot have the host's "
                                             "network (--net host) and no network at once",
                                             what);
                s->net = SPEC_NET_NONE;
                s->map_host_loopback = false;
                return 0;
        }
        if (s->egress != SPEC_EGRESS_ALLOWLIST)
                return 0;
        if (s->net == SPEC_NET_HOST)
                return cs_error_setx(err, EINVAL,
                                     "%s allowlist: the host's network (--net host) cannot be "
                                     "filtered; drop --net host",
                                     what);
        s->net = SPEC_NET_PASTA;
        return spec_egress_add_builtin(s, err);
}

bool spec_egress_name_denied(const struct sandbox_spec *s, const char *name, uint16_t port)
{
        for (size_t i = 0; i < s->n_egress_hosts; i++) {
                const struct spec_egress_host *h = &s->egress_hosts[i];

                /* as above: for DNS (port 0) only a deny of every port refuses the name */
                if (h->deny && name_matches(h, name, port) && (port || !h->port))
                        return true;
        }
        return false;
}
