#include "spawn.h"

#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static long now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Read fd until EOF, the deadline (0: none) or more than max; the buffer grows as needed. */
static void collect(int fd, long deadline, size_t max, struct cs_capture *c)
{
        size_t cap = 0;

        for (;;) {
                struct pollfd p = {.fd = fd, .events = POLLIN};
                long left = deadline ? deadline - now_ms() : -1;
                int ready = 1;
                ssize_t n;

                if (deadline && left > 0)
                        ready = poll(&p, 1, (int)left);
                if (ready < 0 && errno == EINTR)
                        continue;
                if (deadline && (left <= 0 || ready == 0)) {
                        c->timed_out = true;
                        return;
                }
                if (c->len + 4096 + 1 > cap) {
                        size_t want = cap ? 2 * cap : 8192;
                        char *b;

                        if (want > max + 4096 + 1)
                                want = max + 4096 + 1;
                        if (want <= cap) {
                                c->too_big = true;
                                return;
                        }
                        b = malloc(want);
                        if (!b) {
                                c->too_big = true;
                                return;
                        }
                        if (c->out) {
                                memcpy(b, c->out, c->len);
                                explicit_bzero(c->out, cap);
                                free(c->out);
                        }
                        c->out = b;
                        cap = want;
                }
                n = read(fd, c->out + c->len, cap - c->len - 1);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return;
                c->len += (size_t)n;
                if (c->len > max) {
                        c->too_big = true;
                        return;
                }
        }
}

int cs_spawn_start(const struct cs_spawn *sp, struct cs_spawned *ret)
{
        posix_spawn_file_actions_t fa;
        posix_spawnattr_t attr;
        int out[2], in[2] = {-1, -1}, r;
        pid_t pid;

        *ret = (struct cs_spawned){.pid = -1, .out = -1};
        if (pipe2(out, O_CLOEXEC) < 0)
                return -errno;
        if (sp->input && pipe2(in, O_CLOEXEC) < 0) {
                r = -errno;
                close(out[0]);
                close(out[1]);
                return r;
        }
        posix_spawn_file_actions_init(&fa);
        if (sp->input)
                posix_spawn_file_actions_adddup2(&fa, in[0], 0);
        else
                posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_adddup2(&fa, out[1], 1);
        if (!sp->keep_stderr)
                posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
        posix_spawnattr_init(&attr);
        posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                            POSIX_SPAWN_SETSIGDEF);
        posix_spawnattr_setpgroup(&attr, 0);
        {
                sigset_t none, all;

                sigemptyset(&none);
                sigfillset(&all);
                posix_spawnattr_setsigmask(&attr, &none);
                posix_spawnattr_setsigdefault(&attr, &all);
        }
        r = posix_spawn(&pid, sp->path, &fa, &attr, sp->argv, sp->envp ? sp->envp : environ);
        posix_spawnattr_destroy(&attr);
        posix_spawn_file_actions_destroy(&fa);
        close(out[1]);
        if (in[0] >= 0)
                close(in[0]);
        if (r != 0) {
                close(out[0]);
                if (in[1] >= 0)
                        close(in[1]);
                return -r;
        }
        if (sp->input) {
                /* Small inputs only (a pipe's worth): the program reads them before it
                 * prints anything that could fill our side. */
                void (*old)(int) = signal(SIGPIPE, SIG_IGN);

                (void)!cs_write_all(in[1], sp->input, sp->input_len);
                close(in[1]);
                signal(SIGPIPE, old);
        }
        ret->pid = pid;
        ret->out = out[0];
        ret->deadline = sp->timeout_ms ? now_ms() + sp->timeout_ms : 0;
        ret->max = sp->max;
        return 0;
}

void cs_spawn_finish(struct cs_spawned *h, struct cs_capture *ret)
{
        *ret = (struct cs_capture){.status = -1};
        collect(h->out, h->deadline, h->max, ret);
        close(h->out);
        if (ret->timed_out || ret->too_big)
                kill(-h->pid, SIGKILL);
        while (waitpid(h->pid, &ret->status, 0) < 0 && errno == EINTR)
                ;
        if (!ret->out)
                ret->out = calloc(1, 1);
        if (ret->out)
                ret->out[ret->len] = '\0';
        *h = (struct cs_spawned){.pid = -1, .out = -1};
}

void cs_spawn_abort(struct cs_spawned *h)
{
        if (h->pid > 0) {
                close(h->out);
                kill(-h->pid, SIGKILL);
                while (waitpid(h->pid, NULL, 0) < 0 && errno == EINTR)
                        ;
        }
        *h = (struct cs_spawned){.pid = -1, .out = -1};
}

int cs_spawn_capture(const struct cs_spawn *sp, struct cs_capture *ret)
{
        struct cs_spawned h;
        int r = cs_spawn_start(sp, &h);

        *ret = (struct cs_capture){.status = -1};
        if (r < 0)
                return r;
        cs_spawn_finish(&h, ret);
        return 0;
}

bool cs_capture_ok(const struct cs_capture *c)
{
        return c->out && !c->timed_out && !c->too_big && WIFEXITED(c->status) &&
               WEXITSTATUS(c->status) == 0;
}

void cs_capture_free(struct cs_capture *c)
{
        if (c->out) {
                explicit_bzero(c->out, c->len);
                free(c->out);
        }
        *c = (struct cs_capture){.status = -1};
}
