/* The spec in words: its enums' names and parsers, the limits as users write them, and the
 * JSON that --plan prints (secrets redacted). */
#include "spec.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/path.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define EGRESS_PORT_TEXT_(x)  #x
#define EGRESS_PORT_TEXT_X(x) EGRESS_PORT_TEXT_(x)
#define EGRESS_PORT_TEXT      EGRESS_PORT_TEXT_X(SPEC_EGRESS_PORT)

const char *spec_net_name(enum spec_net n)
{
        static const char *const names[] = {[SPEC_NET_NONE] = "none",
                                            [SPEC_NET_HOST] = "host",
                                            [SPEC_NET_PASTA] = "pasta",
                                            [SPEC_NET_RELAY] = "relay"};
        return names[n];
}

const char *spec_seccomp_name(enum spec_seccomp k)
{
        static const char *const names[] = {[SPEC_SECCOMP_DEFAULT] = "default",
                                            [SPEC_SECCOMP_STRICT] = "strict",
                                            [SPEC_SECCOMP_NONE] = "none",
                                            [SPEC_SECCOMP_FILE] = "file"};
        return names[k];
}

static cJSON *json_str_or_null(const char *s)
{
        return s ? cJSON_CreateString(s) : cJSON_CreateNull();
}

/* What an allowlist session's network is, as runner/egress_ns.c sets it up. */
static void egress_network_json(cJSON *n, const struct sandbox_spec *s)
{
        cJSON *lo = cJSON_AddArrayToObject(n, "loopback_addresses");

        cJSON_AddBoolToObject(n, "pasta", false);
        cJSON_AddItemToArray(lo, cJSON_CreateString("127.0.0.1"));
        cJSON_AddItemToArray(lo, cJSON_CreateString("::1"));
        cJSON_AddItemToArray(lo, cJSON_CreateString(SPEC_EGRESS_ADDR4));
        cJSON_AddItemToArray(lo, cJSON_CreateString(SPEC_EGRESS_ADDR6));
        cJSON_AddStringToObject(n, "interfaces", "lo only");
        cJSON_AddStringToObject(n, "routes", "every IPv4 and IPv6 destination to lo");
        cJSON_AddStringToObject(
            n, "tcp",
            "every connection (IPv4 and IPv6) to csandbox's proxy (port " EGRESS_PORT_TEXT
            " in the session, a process outside it), which connects "
            "from the host's network only to allowed hosts");
        cJSON_AddStringToObject(n, "dns",
                                "every UDP port 53 query (resolv.conf: " SPEC_NET_DNS
                                ") to csandbox's resolver, which answers allowed names only");
        cJSON_AddStringToObject(n, "other", "other UDP (QUIC too) and ICMP: dropped");
        cJSON_AddStringToObject(n, "http_proxy",
                                "http://" SPEC_EGRESS_ADDR4 ":" EGRESS_PORT_TEXT
                                " (CONNECT only; no proxy variable is set)");
        cJSON_AddItemToObject(
            n, "host_loopback",
            s->map_host_loopback
                ? cJSON_CreateString(SPEC_NET_HOST_LOOPBACK " (the host's 127.0.0.1, HTTP only)")
                : cJSON_CreateNull());
}

/* SPEC_NET_RELAY: the same namespace and rules, every destination but the host's own. */
static void relay_network_json(cJSON *n, const struct sandbox_spec *s)
{
        cJSON *lo = cJSON_AddArrayToObject(n, "loopback_addresses");

        cJSON_AddBoolToObject(n, "pasta", false);
        cJSON_AddItemToArray(lo, cJSON_CreateString("127.0.0.1"));
        cJSON_AddItemToArray(lo, cJSON_CreateString("::1"));
        cJSON_AddItemToArray(lo, cJSON_CreateString(SPEC_EGRESS_ADDR4));
        cJSON_AddItemToArray(lo, cJSON_CreateString(SPEC_EGRESS_ADDR6));
        cJSON_AddStringToObject(n, "interfaces", "lo only");
        cJSON_AddStringToObject(n, "routes", "every IPv4 and IPv6 destination to lo");
        cJSON_AddStringToObject(
            n, "tcp",
            "every connection (IPv4 and IPv6) to csandbox's relay (port " EGRESS_PORT_TEXT
            " in the session, a process outside it), which connects from the host's network "
            "to the connection's own destination, never to the host's own, loopback or "
            "link-local addresses, nor a denied range");
        cJSON_AddStringToObject(n, "dns",
                                "every UDP port 53 query (resolv.conf: " SPEC_NET_DNS
                                ") to csandbox's resolver: A and AAAA through the host's "
                                "resolver for every name not denied, other types an empty "
                                "answer");
        cJSON_AddStringToObject(n, "other",
                                "other UDP (QUIC too), ICMP and connections into the session: "
                                "none");
        cJSON_AddItemToObject(n, "host_loopback",
                              s->map_host_loopback ? cJSON_CreateString(SPEC_NET_HOST_LOOPBACK
                                                                        " (the host's 127.0.0.1)")
                                                   : cJSON_CreateNull());
}

static cJSON *spec_mount_to_json(const struct spec_mount *m)
{
        cJSON *o = cJSON_CreateObject();
        char mode[16];

        cJSON_AddStringToObject(o, "kind", spec_mount_kind_name(m->kind));
        cJSON_AddStringToObject(o, "dest", m->dest);
        if (m->source)
                cJSON_AddStringToObject(o, "source", m->source);
        cJSON_AddBoolToObject(o, "readonly", (m->flags & SPEC_MOUNT_RO) != 0);
        cJSON_AddBoolToObject(o, "optional", (m->flags & SPEC_MOUNT_OPTIONAL) != 0);
        if (m->flags & SPEC_MOUNT_DEVICES)
                cJSON_AddBoolToObject(o, "devices", true);
        if (m->kind == SPEC_MOUNT_DIR || m->kind == SPEC_MOUNT_TMPFS ||
            m->kind == SPEC_MOUNT_FILE) {
                snprintf(mode, sizeof(mode), "%04o", (unsigned)m->mode);
                cJSON_AddStringToObject(o, "mode", mode);
        }
        if (m->kind == SPEC_MOUNT_FILE) {
                cJSON_AddNumberToObject(o, "size", (double)m->data_len);
                if (m->flags & SPEC_MOUNT_SECRET)
                        cJSON_AddBoolToObject(o, "secret", true);
        }
        return o;
}

const char *spec_tty_name(enum spec_tty t)
{
        switch (t) {
        case SPEC_TTY_AUTO:
                return "auto";
        case SPEC_TTY_PTY:
                return "pty";
        case SPEC_TTY_INHERIT:
                return "inherit";
        }
        return "unknown";
}

bool spec_tty_parse(const char *v, enum spec_tty *ret)
{
        for (enum spec_tty t = SPEC_TTY_AUTO; t <= SPEC_TTY_INHERIT; t++)
                if (strcmp(v, spec_tty_name(t)) == 0) {
                        *ret = t;
                        return true;
                }
        return false;
}

static const char *const proc_names[] = {[SPEC_PROC_AUTO] = "auto",
                                         [SPEC_PROC_FRESH] = "fresh",
                                         [SPEC_PROC_BIND] = "bind",
                                         [SPEC_PROC_NONE] = "none"};

const char *spec_proc_name(enum spec_proc p)
{
        return (size_t)p < sizeof(proc_names) / sizeof(proc_names[0]) ? proc_names[p] : "?";
}

const char *spec_userns_limit_name(enum spec_userns_limit l)
{
        static const char *const names[SPEC_USERNS_LIMIT_N] = {
            [SPEC_USERNS_INOTIFY_WATCHES] = "max_inotify_watches",
            [SPEC_USERNS_INOTIFY_INSTANCES] = "max_inotify_instances",
            [SPEC_USERNS_USER_NAMESPACES] = "max_user_namespaces",
        };

        return (size_t)l < SPEC_USERNS_LIMIT_N ? names[l] : "?";
}

bool spec_proc_parse(const char *v, enum spec_proc *ret)
{
        for (size_t i = 0; i < sizeof(proc_names) / sizeof(proc_names[0]); i++)
                if (strcmp(v, proc_names[i]) == 0) {
                        *ret = (enum spec_proc)i;
                        return true;
                }
        return false;
}

bool spec_tty_wants_pty(const struct sandbox_spec *s)
{
        if (s->tty == SPEC_TTY_AUTO)
                return isatty(0) || isatty(1) || isatty(2);
        return s->tty == SPEC_TTY_PTY;
}

cJSON *spec_to_json(const struct sandbox_spec *s)
{
        cJSON *o = cJSON_CreateObject();
        cJSON *root = cJSON_AddObjectToObject(o, "root");
        cJSON *mounts, *ns, *ids, *env, *argv, *sc, *tty;

        cJSON_AddStringToObject(root, "kind", s->root == SPEC_ROOT_HOST ? "host" : "dir");
        cJSON_AddItemToObject(root, "path", json_str_or_null(s->root_path));
        cJSON_AddBoolToObject(root, "writable", s->writable || s->upper_fd >= 0);
        if (s->upper_fd >= 0)
                cJSON_AddBoolToObject(root, "upper_on_disk", true);
        if (s->root == SPEC_ROOT_DIR) {
                /* the overlay's lower dirs, top first */
                cJSON *layers = cJSON_AddArrayToObject(root, "layers");

                cJSON_AddItemToArray(layers, json_str_or_null(s->root_path));
                for (size_t i = 0; i < s->n_lowers; i++)
                        cJSON_AddItemToArray(layers, json_str_or_null(s->lowers[i].path));
        }

        mounts = cJSON_AddArrayToObject(o, "mounts");
        for (size_t i = 0; i < s->n_mounts; i++)
                cJSON_AddItemToArray(mounts, spec_mount_to_json(&s->mounts[i]));

        ns = cJSON_AddArrayToObject(o, "namespaces");
        static const char *const always[] = {"user", "mount", "pid", "ipc", "uts"};
        for (size_t i = 0; i < 5; i++)
                cJSON_AddItemToArray(ns, cJSON_CreateString(always[i]));
        if (s->net != SPEC_NET_HOST)
                cJSON_AddItemToArray(ns, cJSON_CreateString("net"));

        ids = cJSON_AddObjectToObject(o, "ids");
        cJSON_AddNumberToObject(ids, "uid", s->uid);
        cJSON_AddNumberToObject(ids, "gid", s->gid);
        cJSON_AddNumberToObject(ids, "host_uid", s->host_uid);
        cJSON_AddNumberToObject(ids, "host_gid", s->host_gid);
        cJSON_AddBoolToObject(ids, "map_range", s->map_range);
        if (s->payload_ids) {
                cJSON_AddNumberToObject(ids, "payload_uid", s->payload_uid);
                cJSON_AddNumberToObject(ids, "payload_gid", s->payload_gid);
        }
        if (s->payload_caps) {
                char caps[20];

                snprintf(caps, sizeof(caps), "%016llx", (unsigned long long)s->payload_caps);
                cJSON_AddStringToObject(ids, "payload_caps", caps);
        }
        cJSON_AddBoolToObject(o, "package_broker", s->package_broker);
        if (s->package_broker) {
                cJSON *b = cJSON_AddObjectToObject(o, "broker");
                cJSON *mg = cJSON_AddObjectToObject(b, "managers");
                char caps[20];

                snprintf(caps, sizeof(caps), "%016llx", (unsigned long long)s->broker_caps);
                cJSON_AddStringToObject(b, "caps", caps);
                for (size_t i = 0; i < s->n_broker_managers; i++)
                        cJSON_AddStringToObject(mg, s->broker_managers[i].name,
                                                s->broker_managers[i].path);
                if (s->n_layer_dirs) {
                        cJSON *l = cJSON_AddArrayToObject(b, "host_layer");

                        for (size_t i = 0; i < s->n_layer_dirs; i++)
                                cJSON_AddItemToArray(l, cJSON_CreateString(s->layer_dirs[i]));
                }
        }

        cJSON_AddStringToObject(o, "hostname", s->hostname ? s->hostname : SPEC_DEFAULT_HOSTNAME);
        /* an allowlist session's network is csandbox's proxy, not pasta's (spec->net stays
         * pasta: a network namespace of the session's own) */
        cJSON_AddStringToObject(o, "net",
                                s->net == SPEC_NET_PASTA && s->egress == SPEC_EGRESS_ALLOWLIST
                                    ? "egress-proxy"
                                    : spec_net_name(s->net));
        if (s->net == SPEC_NET_RELAY)
                cJSON_AddBoolToObject(o, "map_host_loopback", s->map_host_loopback);
        if (s->net == SPEC_NET_PASTA) {
                char *helper = spec_net_helper(s);

                cJSON_AddBoolToObject(o, "map_host_loopback", s->map_host_loopback);
                cJSON_AddItemToObject(o, "net_helper", json_str_or_null(helper));
                free(helper);
        }

        {
                cJSON *eg = cJSON_AddObjectToObject(o, "egress");
                cJSON *hosts, *deny;

                cJSON_AddStringToObject(eg, "mode", spec_egress_name(s->egress));
                if (s->net == SPEC_NET_RELAY) {
                        deny = cJSON_AddArrayToObject(eg, "deny");
                        for (size_t i = 0; i < s->n_egress_hosts; i++)
                                if (s->egress_hosts[i].deny)
                                        cJSON_AddItemToArray(
                                            deny, cJSON_CreateString(s->egress_hosts[i].text));
                        relay_network_json(cJSON_AddObjectToObject(eg, "network"), s);
                }
                if (s->egress == SPEC_EGRESS_ALLOWLIST) {
                        hosts = cJSON_AddArrayToObject(eg, "allow");
                        deny = cJSON_AddArrayToObject(eg, "deny");
                        for (size_t i = 0; i < s->n_egress_hosts; i++) {
                                cJSON *h = cJSON_CreateObject();

                                cJSON_AddStringToObject(h, "host", s->egress_hosts[i].text);
                                if (s->egress_hosts[i].builtin)
                                        cJSON_AddBoolToObject(h, "builtin", true);
                                cJSON_AddItemToArray(s->egress_hosts[i].deny ? deny : hosts, h);
                        }
                        cJSON_AddItemToObject(eg, "log", json_str_or_null(s->egress_log));
                        egress_network_json(cJSON_AddObjectToObject(eg, "network"), s);
                }
        }

        env = cJSON_AddArrayToObject(o, "env");
        for (size_t i = 0; i < s->n_env; i++) {
                cJSON *e = cJSON_CreateObject();

                cJSON_AddStringToObject(e, "name", s->env[i].name);
                cJSON_AddStringToObject(e, "value",
                                        s->env[i].secret ? "<redacted>" : s->env[i].value);
                cJSON_AddItemToArray(env, e);
        }
        cJSON_AddItemToObject(o, "cwd", json_str_or_null(s->cwd));
        argv = cJSON_AddArrayToObject(o, "argv");
        for (size_t i = 0; i < s->argc; i++)
                cJSON_AddItemToArray(argv, cJSON_CreateString(s->argv[i]));
        sc = cJSON_AddObjectToObject(o, "seccomp");
        cJSON_AddStringToObject(sc, "profile", spec_seccomp_name(s->seccomp));
        cJSON_AddItemToObject(sc, "path", json_str_or_null(s->seccomp_path));
        tty = cJSON_AddObjectToObject(o, "tty");
        cJSON_AddStringToObject(tty, "mode", spec_tty_name(s->tty));
        cJSON_AddBoolToObject(tty, "pty", spec_tty_wants_pty(s));
        cJSON_AddStringToObject(o, "proc", spec_proc_name(s->proc));
        {
                cJSON *lim = cJSON_AddObjectToObject(o, "limits");

                if (s->memory_max)
                        cJSON_AddNumberToObject(lim, "memory_bytes", (double)s->memory_max);
                else
                        cJSON_AddNullToObject(lim, "memory_bytes");
                if (s->cpu_milli)
                        cJSON_AddNumberToObject(lim, "cpus", s->cpu_milli / 1000.0);
                else
                        cJSON_AddNullToObject(lim, "cpus");
        }
        {
                cJSON *ul = cJSON_AddObjectToObject(o, "userns_limits");

                for (size_t i = 0; i < SPEC_USERNS_LIMIT_N; i++) {
                        const char *name = spec_userns_limit_name((enum spec_userns_limit)i);

                        if (s->userns_limits[i] >= 0)
                                cJSON_AddNumberToObject(ul, name, (double)s->userns_limits[i]);
                        else
                                cJSON_AddNullToObject(ul, name);
                }
        }
        if (s->n_rlimits) {
                cJSON *rl = cJSON_AddArrayToObject(o, "rlimits");

                for (size_t i = 0; i < s->n_rlimits; i++) {
                        cJSON *e = cJSON_CreateObject();

                        cJSON_AddNumberToObject(e, "resource", s->rlimits[i].resource);
                        cJSON_AddNumberToObject(e, "soft", (double)s->rlimits[i].limit.rlim_cur);
                        cJSON_AddNumberToObject(e, "hard", (double)s->rlimits[i].limit.rlim_max);
                        cJSON_AddItemToArray(rl, e);
                }
        }
        {
                cJSON *w = cJSON_AddArrayToObject(o, "warnings");

                for (size_t i = 0; i < s->n_warnings; i++)
                        cJSON_AddItemToArray(w, cJSON_CreateString(s->warnings[i]));
        }
        return o;
}

#define MEMORY_MIB_MIN 16
#define MEMORY_MIB_MAX (1ull << 30) /* 1 PiB */
#define CPUS_MILLI_MAX (1024u * 1000u)

int spec_parse_memory_mib(const char *what, const char *v, uint64_t *ret_bytes,
                          struct cs_error *err)
{
        unsigned long long mib = 0;
        const char *p = v;

        for (; *p >= '0' && *p <= '9' && mib <= MEMORY_MIB_MAX; p++)
                mib = mib * 10 + (unsigned)(*p - '0');
        if (*p || p == v || mib < MEMORY_MIB_MIN || mib > MEMORY_MIB_MAX)
                return cs_error_setx(err, EINVAL,
                                     "%s%.32s is not a memory size: give a whole number of MiB "
                                     "from %d to %llu (4096 is 4 GiB)",
                                     what, v, MEMORY_MIB_MIN, MEMORY_MIB_MAX);
        *ret_bytes = (uint64_t)mib << 20;
        return 0;
}

int spec_parse_cpus(const char *what, const char *v, unsigned *ret_milli, struct cs_error *err)
{
        unsigned long long whole = 0, frac = 0, scale = 1000;
        const char *p = v;

        for (; *p >= '0' && *p <= '9' && whole <= CPUS_MILLI_MAX; p++)
                whole = whole * 10 + (unsigned)(*p - '0');
        if (*p == '.' && p > v)
                for (p++; *p >= '0' && *p <= '9' && scale > 1; p++) {
                        scale /= 10;
                        frac += (unsigned)(*p - '0') * scale;
                }
        if (*p || p == v || whole * 1000 + frac < 10 || whole * 1000 + frac > CPUS_MILLI_MAX)
                return cs_error_setx(err, EINVAL,
                                     "%s%.32s is not a number of CPUs: give one from 0.01 to "
                                     "1024, with up to three decimals (1.5 is one and a half)",
                                     what, v);
        *ret_milli = (unsigned)(whole * 1000 + frac);
        return 0;
}

void spec_print_warnings(const struct sandbox_spec *s)
{
        for (size_t i = 0; i < s->n_warnings; i++)
                fprintf(stderr, "%s\n", s->warnings[i]);
}
