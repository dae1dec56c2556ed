/* The SSH agents' relay (reference §5): the sandbox gets sockets of csandbox's; for each
 * connection the relay connects to the real agent and forwards the requests the rule allows,
 * answering every other one SSH_AGENT_FAILURE without reaching the agent; the agent's replies
 * pass through unchanged. Framing (draft-miller-ssh-agent §3): uint32 big-endian length,
 * then the message; either side's message longer than RELAY_AGENT_MSG_MAX closes the
 * connection. The sockets live in a directory of their own (0700, a random name) in the
 * state dir, as long as the session; a killed launch's is removed by the next. */
#include "relay-private.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define RELAY_CONN_MAX    16 /* connections served at once; more wait in the backlog */
#define RELAY_DIR_TRIES   16
#define SSH_AGENT_FAILURE 5
#define AGENTS_PREFIX     "ssh-agent-"

/* ssh-agent-PID.XXXXXX in dir_fd, made (never found) with mode 0700; its fd. */
static int agents_dir_make(struct relay_agents *a, int dir_fd, const char *shown,
                           struct cs_error *err)
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
                snprintf(a->dir_name, sizeof(a->dir_name), AGENTS_PREFIX "%d.%s", (int)getpid(),
                         suffix);
                if (mkdirat(dir_fd, a->dir_name, 0700) == 0)
                        break;
                if (errno != EEXIST || i == RELAY_DIR_TRIES - 1) {
                        a->dir_name[0] = '\0';
                        return cs_error_set(err, errno,
                                            "make the SSH agent relay's directory in %s", shown);
                }
        }
        fd = openat(dir_fd, a->dir_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        /* The umask may have taken bits; only the user, whatever it says. */
        if (fd < 0 || fstat(fd, &st) < 0 || st.st_uid != getuid() || fchmod(fd, 0700) < 0) {
                if (fd >= 0)
                        close(fd);
                return cs_error_setx(err, EIO,
                                     "the SSH agent relay's directory in %s was replaced as it "
                                     "was made (something else writes that directory); launch "
                                     "again",
                                     shown);
        }
        return fd;
}

int relay_agents_listen(struct relay_agents *a, int dir_fd, const char *shown,
                        int ret_path_fds[RELAY_AGENT_MAX], struct cs_error *err)
{
        _cleanup_close_ int dfd = -1;
        int r = 0;

        for (size_t i = 0; i < RELAY_AGENT_MAX; i++)
                ret_path_fds[i] = -1;
        a->dir_fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3);
        if (a->dir_fd < 0)
                return cs_error_set(err, errno, "plan the SSH agent relay");
        relay_sweep(dir_fd, AGENTS_PREFIX, "0.sock");
        dfd = agents_dir_make(a, dir_fd, shown, err);
        if (dfd < 0)
                return dfd;
        for (size_t i = 0; r >= 0 && i < a->n; i++) {
                char name[32];

                snprintf(name, sizeof(name), "%zu.sock", i);
                r = relay_socket_listen(dfd, name, SOCK_NONBLOCK, &a->listen[i], &ret_path_fds[i],
                                        "the SSH agent relay's socket", err);
        }
        return r;
}

static uint32_t be32(const unsigned char *p)
{
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* One connection: the session's end, the agent's, and the one message in flight. */
struct conn {
        int client, agent; /* client -1: the slot is free */
        enum conn_phase { READ_REQUEST, WRITE_AGENT, READ_REPLY, WRITE_CLIENT } phase;
        unsigned char *buf; /* 4 + RELAY_AGENT_MSG_MAX */
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

                if (c->len >= 4 && (body == 0 || body > RELAY_AGENT_MSG_MAX))
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

/* c's current phase on fd: read toward the frame or write it out. Once that is done, c goes
 * on to next (a frame written leaves the buffer empty). What frame_read or frame_write
 * returns. */
static int conn_advance(struct conn *c, int fd, enum conn_phase next)
{
        bool out = c->phase == WRITE_AGENT || c->phase == WRITE_CLIENT;
        int r = out ? frame_write(fd, c) : frame_read(fd, c);

        if (r > 0) {
                if (out)
                        c->len = 0;
                c->off = 0;
                c->phase = next;
        }
        return r;
}

static void conn_close(struct conn *c)
{
        close(c->client);
        close(c->agent);
        free(c->buf);
        *c = (struct conn){.client = -1, .agent = -1};
}

/* Move c on as far as it goes without blocking; false when it is done with. */
static bool conn_step(struct conn *c, relay_agent_rule allowed)
{
        for (;;) {
                int r = -1;

                switch (c->phase) {
                case READ_REQUEST:
                        r = conn_advance(c, c->client, WRITE_AGENT);
                        if (r > 0 && !allowed(c->buf + 4, c->len - 4)) {
                                static const unsigned char failure[] = {0, 0, 0, 1,
                                                                        SSH_AGENT_FAILURE};

                                memcpy(c->buf, failure, sizeof(failure));
                                c->len = sizeof(failure);
                                c->phase = WRITE_CLIENT;
                        }
                        break;
                case WRITE_AGENT:
                        r = conn_advance(c, c->agent, READ_REPLY);
                        break;
                case READ_REPLY:
                        r = conn_advance(c, c->agent, WRITE_CLIENT);
                        break;
                case WRITE_CLIENT:
                        r = conn_advance(c, c->client, READ_REQUEST);
                        break;
                }
                if (r <= 0)
                        return r == 0;
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
            !(c->buf = malloc(4 + RELAY_AGENT_MSG_MAX)))
                conn_close(c);
}

/* The relay's loop: listening sockets at 3.., the agents' O_PATH fds at 3 + n.. */
static _Noreturn void agents_serve(size_t n, relay_agent_rule allowed)
{
        struct conn conns[RELAY_CONN_MAX];
        struct pollfd pfd[RELAY_AGENT_MAX + RELAY_CONN_MAX];

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
                        if (pfd[n + i].revents && !conn_step(&conns[i], allowed))
                                conn_close(&conns[i]);
                /* One accept a round: a slot is free for it. */
                for (size_t i = 0; i < n && free_slot < RELAY_CONN_MAX; i++)
                        if (pfd[i].revents & POLLIN) {
                                conn_open(&conns[free_slot], 3 + (int)i, 3 + (int)(n + i));
                                break;
                        }
        }
}

int relay_agents_start(struct relay_agents *a, struct cs_error *err)
{
        int fds[2 * RELAY_AGENT_MAX];
        pid_t pid;

        if (a->n == 0 || a->pid > 0)
                return 0;
        for (size_t i = 0; i < a->n; i++) {
                fds[i] = a->listen[i];
                fds[a->n + i] = a->agent[i];
        }
        pid = relay_fork(fds, 2 * a->n, "the SSH agent relay", err);
        if (pid < 0)
                return (int)pid;
        if (pid == 0)
                agents_serve(a->n, a->allowed);
        a->pid = pid;
        for (size_t i = 0; i < a->n; i++) {
                close(a->listen[i]);
                a->listen[i] = -1;
        }
        return 0;
}

void relay_agents_close(struct relay_agents *a)
{
        relay_stop(&a->pid);
        for (size_t i = 0; i < RELAY_AGENT_MAX; i++) {
                if (a->listen[i] >= 0)
                        close(a->listen[i]);
                if (a->agent[i] >= 0)
                        close(a->agent[i]);
                a->listen[i] = a->agent[i] = -1;
        }
        if (a->dir_fd >= 0) {
                struct cs_error ignored;

                if (a->dir_name[0])
                        (void)cs_remove_at(a->dir_fd, a->dir_name, &ignored);
                close(a->dir_fd);
        }
        a->dir_fd = -1;
        a->dir_name[0] = '\0';
        a->n = 0;
}
