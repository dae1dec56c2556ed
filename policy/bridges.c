/* Reference §5, the bridges, as one kernel allows them: a host agent's unix socket bound
 * into the sandbox's mount namespace works across network namespaces, so no TCP relay, no
 * token and no host-loopback mapping are needed. Today: the SSH agents. The reference's
 * other sandbox settings csandbox does not implement yet are named, never silently
 * ignored. */
#include "bridges.h"

#include "common/cleanup.h"
#include "common/error.h"
#include "common/path.h"

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
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define AGENT_DIR     "/run/claude-sandbox"
#define AGENT_MAX     2
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

static int agent_open(const char *path, struct agent *ret)
{
        struct stat st;
        int fd = open(path, O_PATH | O_CLOEXEC);

        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode) || st.st_uid != getuid()) {
                close(fd);
                return -EPERM;
        }
        ret->path = strdup(path);
        ret->fd = fd;
        ret->state = ret->path ? agent_probe(fd) : AGENT_DEAD;
        return 0;
}

/* CLAUDE_PROFILE_SANDBOX_SSH_AGENT: $SSH_AUTH_SOCK and ~/.1password/agent.sock, each probed;
 * dead ones dropped, keyed ones first, bound at /run/claude-sandbox/ssh-agent-<i>.sock (a
 * directory of the sandbox's own, 0700, never under /run/user/<uid>), SSH_AUTH_SOCK the
 * first. */
static int add_ssh_agents(struct sandbox_spec *s, const struct profile_config *c,
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
        r = spec_add_mount(s, SPEC_MOUNT_TMPFS, 0, NULL, AGENT_DIR, err);
        if (r >= 0)
                s->mounts[s->n_mounts - 1].mode = 0700;
        for (size_t i = 0; r >= 0 && i < n; i++) {
                char dest[64];

                snprintf(dest, sizeof(dest), AGENT_DIR "/ssh-agent-%zu.sock", i);
                r = spec_add_bind(s, 0, &agents[i].fd, agents[i].path, dest, err);
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

/* The reference's settings that would change a session, which csandbox does not give yet:
 * said once each, so nobody believes them applied. */
static int warn_unsupported(struct stage_warnings *warn, struct cs_error *err)
{
        static const struct {
                const char *name, *what;
        } unsupported[] = {
            {"CLAUDE_PROFILE_SANDBOX_CHROME", "claude's --chrome"},
            {"CLAUDE_PROFILE_SANDBOX_RAM_MIB", "a memory limit"},
            {"CLAUDE_PROFILE_SANDBOX_CPUS", "a CPU limit"},
        };
        int r = 0;

        for (size_t i = 0; r >= 0 && i < sizeof(unsupported) / sizeof(unsupported[0]); i++) {
                const char *v = getenv(unsupported[i].name);

                if (v && *v)
                        r = stage_warn(warn, err,
                                       "Warning: %s is set, but csandbox does not give the "
                                       "sandbox %s yet; the session starts without it.",
                                       unsupported[i].name, unsupported[i].what);
        }
        return r;
}

#define GH_TIMEOUT_MS 10000 /* the reference's bound on `gh auth token` */
#define GH_TOKEN_MAX  4096

static long now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* `gh auth token`'s stdout (the host's gh, found by absolute PATH entries, in the caller's
 * environment: gh needs its config and keyring), cut at GH_TOKEN_MAX, within the timeout;
 * NULL when there is no gh, it fails or it takes longer (then it is killed). */
static char *gh_auth_token(const char **ret_why)
{
        extern char **environ;
        _cleanup_free_ char *gh = cs_find_program("gh");
        char *argv[] = {"gh", "auth", "token", NULL};
        char buf[GH_TOKEN_MAX + 1];
        posix_spawn_file_actions_t fa;
        posix_spawnattr_t attr;
        int pipefd[2], status = -1, r;
        size_t len = 0;
        long deadline = now_ms() + GH_TIMEOUT_MS;
        bool timed_out = false;
        pid_t pid;

        *ret_why = "gh is not installed";
        if (!gh || pipe2(pipefd, O_CLOEXEC) < 0)
                return NULL;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
        posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
        /* A group of its own: a timeout kills whatever gh started too. */
        posix_spawnattr_init(&attr);
        posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
        posix_spawnattr_setpgroup(&attr, 0);
        r = posix_spawn(&pid, gh, &fa, &attr, argv, environ);
        posix_spawnattr_destroy(&attr);
        if (r != 0) {
                posix_spawn_file_actions_destroy(&fa);
                close(pipefd[0]);
                close(pipefd[1]);
                *ret_why = "gh could not be started";
                return NULL;
        }
        posix_spawn_file_actions_destroy(&fa);
        close(pipefd[1]);
        for (;;) {
                struct pollfd p = {.fd = pipefd[0], .events = POLLIN};
                long left = deadline - now_ms();
                ssize_t n;

                if (left <= 0 || poll(&p, 1, (int)left) == 0) {
                        timed_out = true;
                        break;
                }
                n = read(pipefd[0], buf + len, sizeof(buf) - 1 - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                len += (size_t)n;
                if (len == sizeof(buf) - 1)
                        break;
        }
        close(pipefd[0]);
        if (timed_out)
                kill(-pid, SIGKILL);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        explicit_bzero(buf + len, sizeof(buf) - len);
        while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r' || buf[len - 1] == ' '))
                len--;
        buf[len] = '\0';
        *ret_why = timed_out                                   ? "gh did not answer within 10 s"
                   : !WIFEXITED(status) || WEXITSTATUS(status) ? "gh failed (logged out?)"
                   : len == 0 || memchr(buf, '\0', len) || strpbrk(buf, "\n\r")
                       ? "gh printed no token"
                       : NULL;
        if (*ret_why) {
                explicit_bzero(buf, sizeof(buf));
                return NULL;
        }
        char *tok = strdup(buf);
        explicit_bzero(buf, sizeof(buf));
        return tok;
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

int plan_add_bridges(struct sandbox_spec *s, const struct profile_config *c,
                     struct stage_warnings *warn, struct cs_error *err)
{
        int r = warn_unsupported(warn, err);

        if (r >= 0 && c->ssh_agent)
                r = add_ssh_agents(s, c, warn, err);
        return r;
}
