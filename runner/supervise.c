/* csandbox while the sandbox runs: one poll loop over the signals (signalfd), pid 1's
 * control socket, the terminal relay and the network helper's ready pipe, until pid 1 is
 * reaped. */
#include "relay.h"

#include "../common/cleanup.h"
#include "../common/error.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The helper's ready pipe: true once it says ready (stop watching), false when it failed. */
static bool helper_ready(int fd)
{
        char buf[64];
        ssize_t n;

        do
                n = read(fd, buf, sizeof(buf));
        while (n < 0 && errno == EINTR);
        return n > 0;
}

int runner_supervise(struct tty_link *t, pid_t pid, int sfd, int helper_fd, int *ret_wstatus,
                     struct cs_error *err)
{
        struct timespec t0;
        bool helper_failed = false;
        /* 132 KiB of buffers: on the heap, not the stack. */
        _cleanup_free_ struct relay *r = calloc(1, sizeof(*r));
        int e;

        if (!r)
                return cs_error_set(err, ENOMEM, "supervise the sandbox");
        r->t = t;
        r->pid = pid;
        r->master = -1;
        r->in_open = t->in_fd >= 0;
        ttymodes_init(&r->modes);
        relay_open_out(r);
        clock_gettime(CLOCK_MONOTONIC, &t0);

        while (!r->exited) {
                struct pollfd p[6];
                int i_in = -1, i_pty = -1, i_out = -1, i_ctl = -1, i_helper = -1, n = 0;
                int timeout = -1;
                short pty_events = 0;

                p[n++] = (struct pollfd){.fd = sfd, .events = POLLIN};
                if (helper_fd >= 0) {
                        struct timespec now;

                        clock_gettime(CLOCK_MONOTONIC, &now);
                        timeout =
                            NET_HELPER_TIMEOUT_MS - (int)((now.tv_sec - t0.tv_sec) * 1000 +
                                                          (now.tv_nsec - t0.tv_nsec) / 1000000);
                        if (timeout < 0)
                                timeout = 0;
                        i_helper = n;
                        p[n++] = (struct pollfd){.fd = helper_fd, .events = POLLIN};
                }
                if (t->ctl[0] >= 0) {
                        i_ctl = n;
                        p[n++] = (struct pollfd){.fd = t->ctl[0], .events = POLLIN};
                }
                if (r->pty_open) {
                        if (r->in_open && r->fg && r->in_len < sizeof(r->in_buf)) {
                                i_in = n;
                                p[n++] = (struct pollfd){.fd = t->in_fd, .events = POLLIN};
                        }
                        /* Read the pty only while there is room: a payload writing faster
                         * than the terminal reads blocks in its write. */
                        if (r->out_len < RELAY_OUT_FULL)
                                pty_events |= POLLIN;
                        if (r->in_len)
                                pty_events |= POLLOUT;
                        if (pty_events) {
                                i_pty = n;
                                p[n++] = (struct pollfd){.fd = r->master, .events = pty_events};
                        }
                }
                if (r->out_open && r->out_len) {
                        i_out = n;
                        p[n++] = (struct pollfd){.fd = r->out, .events = POLLOUT};
                }
                int ready = poll(p, (nfds_t)n, timeout);

                if (ready < 0) {
                        if (errno == EINTR)
                                continue;
                        e = errno;
                        goto fail;
                }
                if (i_helper >= 0 && (ready == 0 || p[i_helper].revents)) {
                        if (ready > 0 && helper_ready(helper_fd)) {
                                helper_fd = -1;
                        } else if (!helper_failed) {
                                /* No network is coming: end the session; it is reaped below. */
                                helper_failed = true;
                                helper_fd = -1;
                                kill(pid, SIGKILL);
                        }
                }
                if (i_ctl >= 0 && p[i_ctl].revents)
                        relay_ctl_read(r);
                /* What was just read is written at once (all fds but the caller's input
                 * are non-blocking): a poll round trip per chunk halves throughput. */
                if (i_in >= 0 && p[i_in].revents && r->in_open)
                        relay_in_read(r);
                if (i_pty >= 0 && r->master >= 0 && r->pty_open &&
                    (p[i_pty].revents & (POLLIN | POLLHUP | POLLERR)))
                        while (relay_pty_read(r) > 0 && r->out_len < RELAY_OUT_FULL)
                                ;
                if (r->in_len && r->master >= 0 && r->pty_open)
                        relay_pty_write(r);
                if (r->out_len && r->out_open && (i_out < 0 || p[i_out].revents || r->own_out >= 0))
                        relay_out_write(r);
                if (p[0].revents & POLLIN) {
                        struct signalfd_siginfo si;
                        ssize_t got = read(sfd, &si, sizeof(si));

                        if (got < 0 && (errno == EINTR || errno == EAGAIN))
                                continue;
                        if (got != sizeof(si)) {
                                e = got < 0 ? errno : EIO;
                                goto fail;
                        }
                        relay_signal(r, &si);
                }
        }
        relay_finish(r);
        *ret_wstatus = r->wstatus;
        return helper_failed ? 1 : 0;
fail:
        kill(pid, SIGKILL);
        waitpid(pid, &r->wstatus, 0);
        relay_finish(r);
        return cs_error_set(err, e, "supervise the sandbox");
}
