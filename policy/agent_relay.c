/* The SSH agents (reference §5) through a filtering relay: a bound agent socket would let a
 * session delete the host's keys (`ssh-add -D`), lock the agent with a passphrase the user
 * does not know (`ssh-add -x`) or add keys of its own. The sandbox gets a socket of
 * csandbox's instead; for each connection the relay connects to the real agent and forwards
 * only what listing and signing need: REQUEST_IDENTITIES, SIGN_REQUEST and the
 * session-bind@openssh.com extension that OpenSSH's client sends before it signs. Every
 * other request is answered SSH_AGENT_FAILURE without reaching the agent; the agent's
 * replies pass through unchanged. Framing (draft-miller-ssh-agent §3): uint32 big-endian
 * length, then the message; either side's message longer than AGENT_RELAY_MSG_MAX closes
 * the connection. The sockets live in a directory of their own (0700, a random name) in
 * the state dir, as long as the session; a killed launch's is removed by the next. */
#include "bridges.h"

#include "common/cleanup.h"
#include "common/error.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define RELAY_CONN_MAX  16 /* connections served at once; more wait in the backlog */
#define RELAY_DIR_TRIES 16

#define SSH_AGENT_FAILURE             5
#define SSH_AGENTC_REQUEST_IDENTITIES 11
#define SSH_AGENTC_SIGN_REQUEST       13
#define SSH_AGENTC_EXTENSION          27
#define SSH_AGENT_SESSION_BIND        "session-bind@openssh.com"
#define RELAY_DIR_PREFIX              "ssh-agent-"

struct agent_relay {
        size_t n;
        int listen[AGENT_RELAY_MAX]; /* the sandbox's sockets, until the relay takes them */
        int agent[AGENT_RELAY_MAX];  /* O_PATH of each real agent's socket, checked */
        int state_fd;                /* the state dir, holding dir_name */
        char dir_name[64];
        pid_t pid; /* the relay, once started, or 0 */
};

static uint32_t be32(const unsigned char *p)
{
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

bool agent_request_allowed(const unsigned char *msg, size_t len)
{
        static const char name[] = SSH_AGENT_SESSION_BIND;
        uint32_t n;

        if (len < 1)
                return false;
        switch (msg[0]) {
        case SSH_AGENTC_REQUEST_IDENTITIES:
        case SSH_AGENTC_SIGN_REQUEST:
                return true;
        case SSH_AGENTC_EXTENSION:
                if (len < 5)
                        return false;
                n = be32(msg + 1);
                return n == sizeof(name) - 1 && len - 5 >= n && memcmp(msg + 5, name, n) == 0;
        default:
                return false;
        }
}

/* ssh-agent-PID.XXXXXX: whether csandbox PID (of this pid namespace) still runs. */
static bool launch_alive(const char *name)
{
        char *end;
        long pid = strtol(name + strlen(RELAY_DIR_PREFIX), &end, 10);

        if (pid <= 0 || *end != '.')
                return true;
        return kill((pid_t)pid, 0) == 0 || errno != ESRCH;
}

static void relay_dir_remove(int state_fd, const char *name)
{
        int dfd = openat(state_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

        if (dfd >= 0) {
                for (size_t i = 0; i < AGENT_RELAY_MAX; i++) {
                        char sock[32];

                        snprintf(sock, sizeof(sock), "%zu.sock", i);
                        unlinkat(dfd, sock, 0);
                }
                close(dfd);
        }
        unlinkat(state_fd, name, AT_REMOVEDIR);
}

/* The relay directories of launches that were killed: nobody listens on their sockets, or
 * the launch that made them is gone (and its relay, killed with it, may still be on its way
 * out: its backlog would accept). */
static void relay_sweep(int state_fd)
{
        int dfd = openat(state_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
        struct dirent *e;

        if (!d) {
                if (dfd >= 0)
                        close(dfd);
                return;
        }
        while ((e = readdir(d))) {
                struct sockaddr_un sa = {.sun_family = AF_UNIX};
                int s;

                if (strncmp(e->d_name, RELAY_DIR_PREFIX, strlen(RELAY_DIR_PREFIX)) != 0 ||
                    (e->d_type != DT_DIR && e->d_type != DT_UNKNOWN) || strlen(e->d_name) > 60)
                        continue;
                snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/%s/0.sock", dfd,
                         e->d_name);
                s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                /* (Not a missing socket: a live launch may be between mkdir and bind.) */
                if (s >= 0 && ((connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 &&
                                errno == ECONNREFUSED) ||
                               !launch_alive(e->d_name)))
                        relay_dir_remove(dfd, e->d_name);
                if (s >= 0)
                        close(s);
        }
        closedir(d);
}

/* ssh-agent-PID.XXXXXX in the state dir, made (never found) with mode 0700; its fd. */
static int relay_dir_make(struct agent_relay *r, const struct profile *p, struct cs_error *err)
{
        static const char chars[] =
            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        struct stat st;
        int fd;

        for (int i = 0; i < RELAY_DIR_TRIES; i++) {
                unsigned char rnd[8];
                char suffix[sizeof(rnd) + 1];

                if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
                        return cs_error_set(err, errno ? errno : EIO,
                                            "make the SSH agent relay's directory");
                for (size_t k = 0; k < sizeof(rnd); k++)
                        suffix[k] = chars[rnd[k] % (sizeof(chars) - 1)];
                suffix[sizeof(rnd)] = '\0';
                snprintf(r->dir_name, sizeof(r->dir_name), RELAY_DIR_PREFIX "%d.%s", (int)getpid(),
                         suffix);
                if (mkdirat(p->state_fd, r->dir_name, 0700) == 0)
                        break;
                if (errno != EEXIST || i == RELAY_DIR_TRIES - 1) {
                        r->dir_name[0] = '\0';
                        return cs_error_set(err, errno,
                                            "make the SSH agent relay's directory in %s (unset "
                                            "CLAUDE_PROFILE_SANDBOX_SSH_AGENT to launch without "
                                            "it)",
                                            p->state_dir);
                }
        }
        fd = openat(p->state_fd, r->dir_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        /* The umask may have taken bits; only the user, whatever it says. */
        if (fd < 0 || fstat(fd, &st) < 0 || st.st_uid != getuid() || fchmod(fd, 0700) < 0) {
                if (fd >= 0)
                        close(fd);
                return cs_error_setx(err, EIO,
                                     "the SSH agent relay's directory in %s was replaced as it "
                                     "was made (something else writes that directory); launch "
                                     "again",
                                     p->state_dir);
        }
        return fd;
}

/* Socket i of the relay, listening in dir_fd, and its O_PATH for the bind. */
static int relay_socket(int dir_fd, size_t i, int *ret_listen, int *ret_path, struct cs_error *err)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        _cleanup_close_ int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        char name[32];
        struct stat st;
        mode_t old;
        int r, fd;

        snprintf(name, sizeof(name), "%zu.sock", i);
        snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/%s", dir_fd, name);
        if (s < 0)
                return cs_error_set(err, errno, "make the SSH agent relay's socket");
        old = umask(0177);
        r = bind(s, (struct sockaddr *)&sa, sizeof(sa));
        umask(old);
        if (r < 0 || listen(s, 16) < 0)
                return cs_error_set(err, errno, "make the SSH agent relay's socket");
        fd = openat(dir_fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode)) {
                if (fd >= 0)
                        close(fd);
                return cs_error_setx(err, EIO, "the SSH agent relay's socket was replaced");
        }
        *ret_listen = cs_take_fd(&s);
        *ret_path = fd;
        return 0;
}

int agent_relay_plan(struct sandbox_spec *s, const struct profile *p, int *agent_fds,
                     char *const *paths, size_t n, struct agent_relay **ret, struct cs_error *err)
{
        struct agent_relay *r = calloc(1, sizeof(*r));
        _cleanup_close_ int dir_fd = -1;
        int res = 0;

        if (!r) {
                for (size_t i = 0; i < n; i++)
                        close(agent_fds[i]);
                return cs_error_set(err, ENOMEM, "plan the SSH agent relay");
        }
        r->state_fd = -1;
        for (size_t i = 0; i < AGENT_RELAY_MAX; i++)
                r->listen[i] = r->agent[i] = -1;
        for (size_t i = 0; i < n && i < AGENT_RELAY_MAX; i++) {
                r->agent[i] = agent_fds[i];
                agent_fds[i] = -1;
        }
        r->n = n < AGENT_RELAY_MAX ? n : AGENT_RELAY_MAX;
        *ret = r;
        r->state_fd = fcntl(p->state_fd, F_DUPFD_CLOEXEC, 3);
        if (r->state_fd < 0)
                return cs_error_set(err, errno, "plan the SSH agent relay");
        relay_sweep(p->state_fd);
        dir_fd = relay_dir_make(r, p, err);
        if (dir_fd < 0)
                return dir_fd;
        for (size_t i = 0; res >= 0 && i < r->n; i++) {
                char dest[64], what[PATH_MAX + 64];
                int fd = -1;

                res = relay_socket(dir_fd, i, &r->listen[i], &fd, err);
                if (res < 0)
                        break;
                snprintf(dest, sizeof(dest), BRIDGE_DIR "/ssh-agent-%zu.sock", i);
                snprintf(what, sizeof(what), "ssh-agent relay to %s", paths[i]);
                res = spec_add_bind(s, 0, &fd, what, dest, err);
        }
        return res;
}

/* One connection: the session's end, the agent's, and the one message in flight. */
struct conn {
        int client, agent; /* client -1: the slot is free */
        enum { READ_REQUEST, WRITE_AGENT, READ_REPLY, WRITE_CLIENT } phase;
        unsigned char *buf; /* 4 + AGENT_RELAY_MSG_MAX */
        size_t len, off;    /* bytes in buf; of them, written */
};

/* Read toward one whole frame: 1 when it is there, 0 for more, -1 to close (end, error,
 * an empty or oversized message). */
static int frame_read(int fd, struct conn *c)
{
        for (;;) {
                uint32_t body = c->len < 4 ? 0 : be32(c->buf);
                size_t want = c->len < 4 ? 4 : 4 + (size_t)body;
                ssize_t n;

                if (c->len >= 4 && (body == 0 || body > AGENT_RELAY_MSG_MAX))
                        return -1;
                if (c->len == want)
                        return 1;
                n = read(fd, c->buf + c->len, want - c->len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                        return 0;
                if (n <= 0)
                        return -1;
                c->len += (size_t)n;
        }
}

static int frame_write(int fd, struct conn *c)
{
        while (c->off < c->len) {
                ssize_t n = send(fd, c->buf + c->off, c->len - c->off, MSG_NOSIGNAL);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                        return 0;
                if (n < 0)
                        return -1;
                c->off += (size_t)n;
        }
        return 1;
}

static void conn_close(struct conn *c)
{
        close(c->client);
        close(c->agent);
        free(c->buf);
        *c = (struct conn){.client = -1, .agent = -1};
}

/* Move c on as far as it goes without blocking; false when it is done with. */
static bool conn_step(struct conn *c)
{
        for (;;) {
                int r;

                switch (c->phase) {
                case READ_REQUEST:
                        r = frame_read(c->client, c);
                        if (r <= 0)
                                return r == 0;
                        c->off = 0;
                        if (agent_request_allowed(c->buf + 4, c->len - 4)) {
                                c->phase = WRITE_AGENT;
                        } else {
                                static const unsigned char failure[] = {0, 0, 0, 1,
                                                                        SSH_AGENT_FAILURE};

                                memcpy(c->buf, failure, sizeof(failure));
                                c->len = sizeof(failure);
                                c->phase = WRITE_CLIENT;
                        }
                        break;
                case WRITE_AGENT:
                        r = frame_write(c->agent, c);
                        if (r <= 0)
                                return r == 0;
                        c->len = 0;
                        c->phase = READ_REPLY;
                        break;
                case READ_REPLY:
                        r = frame_read(c->agent, c);
                        if (r <= 0)
                                return r == 0;
                        c->off = 0;
                        c->phase = WRITE_CLIENT;
                        break;
                case WRITE_CLIENT:
                        r = frame_write(c->client, c);
                        if (r <= 0)
                                return r == 0;
                        c->len = 0;
                        c->phase = READ_REQUEST;
                        break;
                }
        }
}

/* A new connection on listening socket lfd, paired with a connection to the agent at
 * agent_fd; nothing when either fails (the session sees no agent). */
static void conn_open(struct conn *c, int lfd, int agent_fd)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        int client = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), agent;

        if (client < 0)
                return;
        snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d", agent_fd);
        agent = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        *c = (struct conn){.client = client, .agent = agent};
        if (agent < 0 || connect(agent, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
            !(c->buf = malloc(4 + AGENT_RELAY_MSG_MAX)))
                conn_close(c);
}

/* The relay's loop: listening sockets at 3.., the agents' O_PATH fds at 3 + n.. */
static _Noreturn void relay_serve(size_t n)
{
        struct conn conns[RELAY_CONN_MAX];
        struct pollfd pfd[AGENT_RELAY_MAX + RELAY_CONN_MAX];

        for (size_t i = 0; i < RELAY_CONN_MAX; i++)
                conns[i] = (struct conn){.client = -1, .agent = -1};
        for (;;) {
                size_t used = 0, free_slot = RELAY_CONN_MAX;

                for (size_t i = 0; i < RELAY_CONN_MAX; i++) {
                        struct conn *c = &conns[i];
                        bool to_client = c->phase == READ_REQUEST || c->phase == WRITE_CLIENT;
                        bool reading = c->phase == READ_REQUEST || c->phase == READ_REPLY;

                        if (c->client < 0) {
                                free_slot = free_slot < i ? free_slot : i;
                                pfd[n + i] = (struct pollfd){.fd = -1};
                                continue;
                        }
                        used++;
                        pfd[n + i] = (struct pollfd){.fd = to_client ? c->client : c->agent,
                                                     .events = reading ? POLLIN : POLLOUT};
                }
                for (size_t i = 0; i < n; i++)
                        pfd[i] = (struct pollfd){.fd = used < RELAY_CONN_MAX ? 3 + (int)i : -1,
                                                 .events = POLLIN};
                if (poll(pfd, n + RELAY_CONN_MAX, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        _exit(1);
                }
                for (size_t i = 0; i < RELAY_CONN_MAX; i++)
                        if (pfd[n + i].revents && !conn_step(&conns[i]))
                                conn_close(&conns[i]);
                /* One accept a round: a slot is free for it. */
                for (size_t i = 0; i < n && free_slot < RELAY_CONN_MAX; i++)
                        if (pfd[i].revents & POLLIN) {
                                conn_open(&conns[free_slot], 3 + (int)i, 3 + (int)(n + i));
                                break;
                        }
        }
}

int agent_relay_start(struct agent_relay *r, struct cs_error *err)
{
        pid_t parent = getpid(), pid;

        if (!r || r->n == 0 || r->pid > 0)
                return 0;
        fflush(NULL);
        pid = fork();
        if (pid < 0)
                return cs_error_set(err, errno, "start the SSH agent relay");
        if (pid == 0) {
                int keep[2 * AGENT_RELAY_MAX], high = 2 * AGENT_RELAY_MAX + 3, null;
                sigset_t none;

                /* It lives as long as csandbox, apart from the terminal's signals. */
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != parent)
                        _exit(0);
                setsid();
                sigemptyset(&none);
                sigprocmask(SIG_SETMASK, &none, NULL);
                signal(SIGPIPE, SIG_IGN);
                null = open("/dev/null", O_RDWR | O_CLOEXEC);
                if (null >= 0) {
                        dup2(null, 0);
                        dup2(null, 1);
                        dup2(null, 2);
                }
                /* The listening sockets to 3.., the agents after them, everything else
                 * closed: first above every target, so that no dup2 overwrites one. */
                for (size_t i = 0; i < r->n; i++) {
                        high = high > r->listen[i] ? high : r->listen[i] + 1;
                        high = high > r->agent[i] ? high : r->agent[i] + 1;
                }
                for (size_t i = 0; i < r->n; i++) {
                        keep[i] = fcntl(r->listen[i], F_DUPFD, high);
                        keep[r->n + i] = fcntl(r->agent[i], F_DUPFD, high);
                        if (keep[i] < 0 || keep[r->n + i] < 0)
                                _exit(1);
                }
                for (size_t i = 0; i < 2 * r->n; i++)
                        if (dup2(keep[i], 3 + (int)i) < 0)
                                _exit(1);
                close_range(3 + 2 * (unsigned)r->n, ~0u, 0);
                relay_serve(r->n);
        }
        r->pid = pid;
        for (size_t i = 0; i < r->n; i++) {
                close(r->listen[i]);
                r->listen[i] = -1;
        }
        return 0;
}

void agent_relay_close(struct agent_relay **rp)
{
        struct agent_relay *r = *rp;

        if (!r)
                return;
        if (r->pid > 0) {
                kill(r->pid, SIGKILL);
                while (waitpid(r->pid, NULL, 0) < 0 && errno == EINTR)
                        ;
        }
        for (size_t i = 0; i < AGENT_RELAY_MAX; i++) {
                if (r->listen[i] >= 0)
                        close(r->listen[i]);
                if (r->agent[i] >= 0)
                        close(r->agent[i]);
        }
        if (r->state_fd >= 0) {
                if (r->dir_name[0])
                        relay_dir_remove(r->state_fd, r->dir_name);
                close(r->state_fd);
        }
        free(r);
        *rp = NULL;
}
