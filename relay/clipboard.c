/* The clipboard relay (reference §5): a unix socket of csandbox's, bound into the sandbox,
 * answering each request by running the host's wl-paste with arguments the rule allows
 * under a time and size bound. The socket's name in the state dir (0700) lives as long as
 * the session: the runner finds every bind source again by name in its own mount
 * namespace. A name left by a killed launch is removed by the next. */
#include "relay-private.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"
#include "../common/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#define CLIPBOARD_TIMEOUT_MS 10000 /* the reference's bound on wl-paste */
#define CLIPBOARD_READ_SECS  5     /* and on reading the request */
#define CLIPBOARD_MAX_BYTES  ((size_t)64 << 20)
#define CLIPBOARD_PREFIX     "clipboard-"

int relay_clipboard_listen(struct relay_clipboard *c, int dir_fd, const char *shown,
                           int *ret_path_fd, struct cs_error *err)
{
        char name[64], what[PATH_MAX + 64];
        int r;

        snprintf(name, sizeof(name), CLIPBOARD_PREFIX "%d.sock", (int)getpid());
        snprintf(what, sizeof(what), "the clipboard relay's socket in %s", shown);
        relay_sweep(dir_fd, CLIPBOARD_PREFIX, NULL);
        r = relay_socket_listen(dir_fd, name, 0, &c->listen_fd, ret_path_fd, what, err);
        if (r < 0)
                return r;
        c->dir_fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3);
        snprintf(c->name, sizeof(c->name), "%s", name);
        return 0;
}

static void reply(int conn, const char *head, const char *body, size_t len)
{
        if (cs_write_all(conn, head, strlen(head)) == 0 && body)
                (void)!cs_write_all(conn, body, len);
}

/* One request: read its line, check it, run wl-paste, answer. */
static void clipboard_answer(const struct relay_clipboard *c, int conn)
{
        struct timeval rt = {.tv_sec = CLIPBOARD_READ_SECS}, wt = {.tv_sec = 30};
        char line[RELAY_CLIPBOARD_REQUEST_MAX + 1], *nl = NULL, *save = NULL, *tok;
        char *argv[RELAY_CLIPBOARD_ARGS_MAX + 2] = {"wl-paste"};
        _cleanup_(cs_capture_free) struct cs_capture out = {0};
        size_t len = 0, n = 1;
        const char *bad;
        char msg[160];

        setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &rt, sizeof(rt));
        setsockopt(conn, SOL_SOCKET, SO_SNDTIMEO, &wt, sizeof(wt));
        while (len < sizeof(line) - 1 && !(nl = memchr(line, '\n', len))) {
                ssize_t r = read(conn, line + len, sizeof(line) - 1 - len);

                if (r <= 0)
                        return;
                len += (size_t)r;
        }
        if (!nl && !(nl = memchr(line, '\n', len))) {
                reply(conn, "ERR request too long\n", NULL, 0);
                return;
        }
        *nl = '\0';
        for (tok = strtok_r(line, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
                if (n > RELAY_CLIPBOARD_ARGS_MAX) {
                        reply(conn, "ERR too many arguments\n", NULL, 0);
                        return;
                }
                argv[n++] = tok;
        }
        argv[n] = NULL;
        if (!c->allowed(argv + 1, n - 1, &bad)) {
                snprintf(msg, sizeof(msg), "ERR argument not allowed: %.64s\n", bad);
                for (char *q = msg + 4; *q && q[1]; q++)
                        if ((unsigned char)*q < 0x20 || (unsigned char)*q == 0x7f)
                                *q = '?';
                reply(conn, msg, NULL, 0);
                return;
        }
        if (cs_spawn_capture(&(struct cs_spawn){.path = c->wl_paste,
                                                .argv = argv,
                                                .timeout_ms = CLIPBOARD_TIMEOUT_MS,
                                                .max = CLIPBOARD_MAX_BYTES},
                             &out) < 0) {
                reply(conn, "ERR wl-paste could not be started on the host\n", NULL, 0);
                return;
        }
        if (cs_capture_ok(&out)) {
                reply(conn, "OK\n", out.out, out.len);
                return;
        }
        if (out.timed_out)
                snprintf(msg, sizeof(msg), "ERR wl-paste did not answer within 10 s\n");
        else if (out.too_big)
                snprintf(msg, sizeof(msg), "ERR the clipboard holds more than %zu MiB\n",
                         CLIPBOARD_MAX_BYTES >> 20);
        else
                snprintf(msg, sizeof(msg), "ERR wl-paste failed on the host (exit %d)\n",
                         WIFEXITED(out.status) ? WEXITSTATUS(out.status)
                                               : 128 + WTERMSIG(out.status));
        reply(conn, msg, NULL, 0);
}

int relay_clipboard_start(struct relay_clipboard *c, struct cs_error *err)
{
        pid_t pid;

        if (c->listen_fd < 0)
                return 0;
        pid = relay_fork(&c->listen_fd, 1, "the clipboard relay", err);
        if (pid < 0)
                return (int)pid;
        if (pid == 0) {
                for (;;) {
                        int conn = accept4(3, NULL, NULL, SOCK_CLOEXEC);

                        if (conn < 0) {
                                if (errno == EINTR || errno == ECONNABORTED)
                                        continue;
                                _exit(1);
                        }
                        clipboard_answer(c, conn);
                        close(conn);
                }
        }
        c->pid = pid;
        close(c->listen_fd);
        c->listen_fd = -1;
        return 0;
}

void relay_clipboard_close(struct relay_clipboard *c)
{
        relay_stop(&c->pid);
        if (c->listen_fd >= 0)
                close(c->listen_fd);
        c->listen_fd = -1;
        if (c->dir_fd >= 0) {
                unlinkat(c->dir_fd, c->name, 0);
                close(c->dir_fd);
        }
        c->dir_fd = -1;
        free(c->wl_paste);
        c->wl_paste = NULL;
}
