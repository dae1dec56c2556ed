/* Reference §5, the bridges, as one kernel allows them: a unix socket bound into the
 * sandbox's mount namespace works across network namespaces, so no TCP relay, no token and
 * no host-loopback mapping are needed. The SSH agents are reached through csandbox's own
 * filtering relay (agent_relay.c), never bound as they are. The reference's other sandbox
 * settings csandbox does not implement yet are named, never silently ignored. */
#include "bridges.h"

#include "common/cleanup.h"
#include "common/error.h"
#include "common/path.h"
#include "common/spawn.h"
#include "common/fileio.h"

#include <cjson/cJSON.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#define AGENT_DIR     BRIDGE_DIR
#define AGENT_MAX     AGENT_RELAY_MAX
#define AGENT_TIMEOUT 5 /* seconds, as the reference bounds `ssh-add -l` */

enum agent_state { AGENT_DEAD, AGENT_EMPTY, AGENT_KEYS };

struct agent {
        char *path;
        int fd; /* O_PATH of the socket: probed and bound through it, never the path again */
        enum agent_state state;
};

static bool read_full(int fd, void *buf, size_t len)
{
        for (size_t got = 0; got < len;) {
                ssize_t n = read(fd, (char *)buf + got, len - got);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return false;
                got += (size_t)n;
        }
        return true;
}

/* What `ssh-add -l` tells (exit 0 keys, 1 live but none, else dead), by asking the agent
 * for its identities (SSH_AGENTC_REQUEST_IDENTITIES) over the socket opened as fd. */
static enum agent_state agent_probe(int fd)
{
        static const unsigned char request[] = {0, 0, 0, 1, 11};
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        struct timeval tv = {.tv_sec = AGENT_TIMEOUT};
        _cleanup_close_ int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        unsigned char head[4], body[5];
        uint32_t len, n;

        snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d", fd);
        if (s < 0 || setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
            setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0 ||
            connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
            write(s, request, sizeof(request)) != (ssize_t)sizeof(request) ||
            !read_full(s, head, sizeof(head)))
                return AGENT_DEAD;
        memcpy(&len, head, 4);
        len = ntohl(len);
        if (len < 1 || len > 256 * 1024)
                return AGENT_DEAD;
        if (len < 5 || !read_full(s, body, 5))
                return AGENT_EMPTY; /* an answer, without identities (a failure reply) */
        memcpy(&n, body + 1, 4);
        return body[0] == 12 && ntohl(n) > 0 ? AGENT_KEYS : AGENT_EMPTY;
}

/* The sandbox's own /run/claude-sandbox (0700), once. */
int bridge_dir(struct sandbox_spec *s, struct cs_error *err)
{
        for (size_t i = 0; i < s->n_mounts; i++)
                if (strcmp(s->mounts[i].dest, BRIDGE_DIR) == 0)
                        return 0;
        int r = spec_add_mount(s, SPEC_MOUNT_TMPFS, 0, NULL, BRIDGE_DIR, err);

        if (r >= 0)
                s->mounts[s->n_mounts - 1].mode = 0700;
        return r;
}

/* A host socket of ours, opened once (O_PATH) and checked: what every bridge binds. */
int bridge_socket_open(const char *path)
{
        struct stat st;
        int fd = open(path, O_PATH | O_CLOEXEC);

        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode) || st.st_uid != getuid()) {
                close(fd);
                return -EPERM;
        }
        return fd;
}

static int agent_open(const char *path, struct agent *ret)
{
        int fd = bridge_socket_open(path);

        if (fd < 0)
                return fd;
        ret->path = strdup(path);
        ret->fd = fd;
        ret->state = ret->path ? agent_probe(fd) : AGENT_DEAD;
        return 0;
}

/* CLAUDE_PROFILE_SANDBOX_SSH_AGENT: $SSH_AUTH_SOCK and ~/.1password/agent.sock, each probed;
 * dead ones dropped, keyed ones first, each relayed (listing and signing only) from
 * /run/claude-sandbox/ssh-agent-<i>.sock (a directory of the sandbox's own, 0700, never
 * under /run/user/<uid>), SSH_AUTH_SOCK the first. */
static int add_ssh_agents(struct sandbox_spec *s, const struct profile_config *c,
                          const struct profile *p, struct plan_bridges *b,
                          struct stage_warnings *warn, struct cs_error *err)
{
        const char *env = getenv("SSH_AUTH_SOCK");
        _cleanup_free_ char *onepassword = cs_path_join(c->home, ".1password/agent.sock");
        const char *paths[AGENT_MAX] = {env && env[0] == '/' ? env : NULL, onepassword};
        struct agent agents[AGENT_MAX] = {{.fd = -1}, {.fd = -1}};
        size_t n = 0;
        int r = 0;

        for (size_t i = 0; i < AGENT_MAX; i++)
                if (paths[i] && agent_open(paths[i], &agents[n]) == 0) {
                        if (agents[n].state != AGENT_DEAD) {
                                n++;
                                continue;
                        }
                        close(agents[n].fd);
                        free(agents[n].path);
                        agents[n] = (struct agent){.fd = -1};
                }
        if (n == 2 && agents[1].state == AGENT_KEYS && agents[0].state != AGENT_KEYS) {
                struct agent t = agents[0];

                agents[0] = agents[1];
                agents[1] = t;
        }
        if (n == 0)
                return stage_warn(
                    warn, err,
                    "Warning: CLAUDE_PROFILE_SANDBOX_SSH_AGENT is set but no live SSH "
                    "agent was found (SSH_AUTH_SOCK or ~/.1password/agent.sock), so "
                    "ssh in the sandbox has no keys. Check 'ssh-add -l'.");
        r = bridge_dir(s, err);
        if (r >= 0) {
                int fds[AGENT_MAX];
                char *names[AGENT_MAX];

                for (size_t i = 0; i < n; i++) {
                        fds[i] = cs_take_fd(&agents[i].fd);
                        names[i] = agents[i].path;
                }
                r = agent_relay_plan(s, p, fds, names, n, &b->relays.agents, err);
        }
        if (r >= 0)
                r = spec_env_set(s, "SSH_AUTH_SOCK", AGENT_DIR "/ssh-agent-0.sock", false, err);
        for (size_t i = 0; i < n; i++) {
                if (agents[i].fd >= 0)
                        close(agents[i].fd);
                free(agents[i].path);
        }
        return r;
}

#define GH_TIMEOUT_MS 10000 /* the reference's bound on `gh auth token` */
#define GH_TOKEN_MAX  4096

/* `gh auth token`'s stdout (the host's gh, found by absolute PATH entries, in the caller's
 * environment: gh needs its config and keyring), within the timeout; NULL when there is no
 * gh, it fails or it takes longer (then it is killed). */
static char *gh_auth_token(const char **ret_why)
{
        _cleanup_free_ char *gh = cs_find_program("gh");
        _cleanup_(cs_capture_free) struct cs_capture c = {0};
        char *argv[] = {"gh", "auth", "token", NULL};
        size_t len;

        *ret_why = "gh is not installed";
        if (!gh)
                return NULL;
        if (cs_spawn_capture(
                &(struct cs_spawn){
                    .path = gh, .argv = argv, .timeout_ms = GH_TIMEOUT_MS, .max = GH_TOKEN_MAX},
                &c) < 0) {
                *ret_why = "gh could not be started";
                return NULL;
        }
        len = c.len;
        while (len > 0 && strchr("\n\r ", c.out[len - 1]))
                c.out[--len] = '\0';
        *ret_why = c.timed_out                       ? "gh did not answer within 10 s"
                   : c.too_big || !cs_capture_ok(&c) ? "gh failed (logged out?)"
                   : len == 0 || strlen(c.out) != len || strpbrk(c.out, "\n\r")
                       ? "gh printed no token"
                       : NULL;
        return *ret_why ? NULL : strdup(c.out);
}

int plan_add_gh_token(struct sandbox_spec *s, const struct profile_config *c,
                      struct stage_warnings *warn, struct cs_error *err)
{
        const char *why;
        char *tok;
        int r;

        if (!c->gh)
                return 0;
        tok = gh_auth_token(&why);
        if (!tok)
                return stage_warn(warn, err,
                                  "Warning: CLAUDE_PROFILE_SANDBOX_GH is set, but `gh auth token` "
                                  "gave no token (%s), so GH_TOKEN is not set in the sandbox.",
                                  why);
        r = spec_env_set(s, "GH_TOKEN", tok, true, err);
        explicit_bzero(tok, strlen(tok));
        free(tok);
        return r;
}

#define GPG_HOME         "/home/appuser/.gnupg"
#define GPG_TIMEOUT_MS   10000
#define GPG_KEYRING_MAX  ((size_t)16 << 20)
#define GPG_SOCKPATH_MAX 4096

/* One gpgconf/gpg run of the host's, stdout kept; NULL (with *why) when it fails. */
static char *gpg_tool(const char *tool, char *const *argv, size_t max, size_t *ret_len,
                      const char **why)
{
        _cleanup_free_ char *path = cs_find_program(tool);
        _cleanup_(cs_capture_free) struct cs_capture c = {0};

        if (!path) {
                *why = "gnupg is not installed on this host";
                return NULL;
        }
        if (cs_spawn_capture(
                &(struct cs_spawn){
                    .path = path, .argv = argv, .timeout_ms = GPG_TIMEOUT_MS, .max = max},
                &c) < 0 ||
            !cs_capture_ok(&c)) {
                *why = c.timed_out ? "gnupg did not answer within 10 s" : "gnupg failed";
                return NULL;
        }
        *ret_len = c.len;
        return cs_take_ptr(&c.out);
}

/* gpgconf prints a path with '%' escapes ("%3a" for ':'); decoded in place. */
static void gpgconf_unescape(char *s)
{
        char *o = s;

        for (; *s; s++) {
                unsigned v;

                if (s[0] == '%' && s[1] && s[2] && sscanf(s + 1, "%2x", &v) == 1 && v) {
                        *o++ = (char)v;
                        s += 2;
                } else {
                        *o++ = *s;
                }
        }
        *o = '\0';
}

/* The gpg-agent's extra socket, the restricted one made for forwarding (it signs and
 * decrypts; it does not export secret keys or change the agent's settings), started with
 * `gpgconf --launch gpg-agent` when it is missing. */
static int gpg_agent_socket(char **ret_path, const char **why)
{
        char *list[] = {"gpgconf", "--list-dirs", "agent-extra-socket", NULL};
        char *launch[] = {"gpgconf", "--launch", "gpg-agent", NULL};
        size_t len;
        char *path = gpg_tool("gpgconf", list, GPG_SOCKPATH_MAX, &len, why), *nl;
        int fd;

        if (!path)
                return -ENOENT;
        if ((nl = strchr(path, '\n')))
                *nl = '\0';
        gpgconf_unescape(path);
        fd = path[0] == '/' ? bridge_socket_open(path) : -EINVAL;
        if (fd == -ENOENT) {
                free(gpg_tool("gpgconf", launch, 4096, &len, why));
                fd = bridge_socket_open(path);
        }
        if (fd < 0) {
                *why = fd == -EPERM ? "its extra socket is not a socket of this user's"
                                    : "its extra socket does not exist (the agent is not running)";
                free(path);
                return fd;
        }
        *ret_path = path;
        return fd;
}

/* The gpg-agent (§5): its extra socket at ~/.gnupg/S.gpg-agent in a GNUPGHOME of the
 * sandbox's own (a 0700 tmpfs) whose gpg.conf says no-autostart (a gpg that finds the
 * socket gone must not start an agent of its own that would unlink it), and the host's
 * public keyring as pubring.gpg, which gpg reads as it is: no import step inside. */
static int add_gpg(struct sandbox_spec *s, struct plan_bridges *b, struct stage_warnings *warn,
                   struct cs_error *err)
{
        static const char conf[] = "no-autostart\n";
        char *export[] = {"gpg", "--batch", "--export", NULL};
        _cleanup_free_ char *sock = NULL, *keyring = NULL;
        const char *why = NULL;
        size_t keyring_len = 0;
        int fd, r;

        fd = gpg_agent_socket(&sock, &why);
        if (fd < 0)
                return stage_warn(warn, err,
                                  "Warning: CLAUDE_PROFILE_SANDBOX_GPG is set but no gpg-agent "
                                  "socket was found (%s), so gpg in the sandbox cannot sign. "
                                  "Check 'gpgconf --launch gpg-agent'.",
                                  why);
        keyring = gpg_tool("gpg", export, GPG_KEYRING_MAX, &keyring_len, &why);
        if (!keyring) {
                r = stage_warn(warn, err,
                               "Warning: `gpg --export` failed (%s), so the sandbox's gpg has no "
                               "public keys and cannot sign.",
                               why);
                if (r < 0) {
                        close(fd);
                        return r;
                }
        }
        r = spec_add_mount(s, SPEC_MOUNT_TMPFS, 0, NULL, GPG_HOME, err);
        if (r >= 0)
                s->mounts[s->n_mounts - 1].mode = 0700;
        if (r >= 0)
                r = spec_add_file(s, GPG_HOME "/gpg.conf", "gpg.conf", conf, sizeof(conf) - 1, 0,
                                  err);
        if (r >= 0 && keyring)
                r = spec_add_file(s, GPG_HOME "/pubring.gpg", "gpg --export", keyring, keyring_len,
                                  0, err);
        if (r >= 0)
                r = spec_add_bind(s, 0, &fd, sock, GPG_HOME "/S.gpg-agent", err);
        else
                close(fd);
        if (r >= 0)
                r = spec_env_set(s, "GNUPGHOME", GPG_HOME, false, err);
        b->gpg = r >= 0;
        return r;
}

int plan_add_bridges(struct sandbox_spec *s, const struct profile_config *c,
                     const struct profile *p, struct plan_bridges *b, struct stage_warnings *warn,
                     struct cs_error *err)
{
        int r = 0;

        if (c->ssh_agent)
                r = add_ssh_agents(s, c, p, b, warn, err);
        if (r >= 0 && c->gpg)
                r = add_gpg(s, b, warn, err);
        if (r >= 0 && c->clipboard)
                r = bridge_dir(s, err);
        if (r >= 0 && c->clipboard)
                r = clipboard_plan(s, p, &b->relays.clipboard, err);
        return r;
}

void bridges_close(struct plan_bridges *b)
{
        relay_set_close(&b->relays);
}

#define CREDENTIALS_MAX (1 << 20)

/* §2.1: with CLAUDE_PROFILE_SANDBOX_CHROME, a login whose OAuth scopes include none that
 * Claude in Chrome works with is said before the launch. No login yet: nothing to say (the
 * login inside gives the scopes). */
int plan_chrome_scopes(const struct profile_config *c, const struct profile *p,
                       struct stage_warnings *warn, struct cs_error *err)
{
        static const char *const wanted[] = {"user:profile", "user:office", "user:ccr_inference"};
        _cleanup_free_ char *raw = NULL;
        /* Dropped: no readable login: nothing to warn about yet. */
        struct cs_error ignored;
        const cJSON *scopes, *it;
        cJSON *doc;
        size_t len = 0;
        bool found = false;

        if (!c->chrome || cs_read_file_at(p->dir_fd, ".credentials.json", CREDENTIALS_MAX, true,
                                          &raw, &len, &ignored) < 0)
                return 0;
        doc = cJSON_ParseWithLength(raw, len);
        explicit_bzero(raw, len);
        scopes = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(doc, "claudeAiOauth"), "scopes");
        if (cJSON_IsArray(scopes))
                cJSON_ArrayForEach(it, scopes)
                {
                        for (size_t i = 0; cJSON_IsString(it) && i < 3; i++)
                                found |= strcmp(it->valuestring, wanted[i]) == 0;
                }
        cJSON_Delete(doc);
        if (found)
                return 0;
        return stage_warn(warn, err,
                          "Warning: CLAUDE_PROFILE_SANDBOX_CHROME is set, but profile '%s' is "
                          "logged in without any scope Claude in Chrome uses (user:profile, "
                          "user:office or user:ccr_inference), so --chrome may not connect. Log "
                          "in again (/login in a session) to get them.",
                          p->name);
}
