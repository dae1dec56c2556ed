/* csandbox while the sandbox runs: one poll loop over the signals (signalfd), pid 1's
 * control socket, the terminal relay and the network helper's ready pipe, until pid 1 is
 * reaped. */
#include "relay.h"

#include "../common/cleanup.h"
#include "../common/error.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/nsfs.h>
#include <sys/ioctl.h>
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

#define PAUSE_AGAIN_MS 1000

static int pause_fd = -1;

void runner_pause_from(int fd)
{
        pause_fd = fd;
}

/* pid's parent and how many pid namespaces it is seen in (its NSpid line); false: gone. */
static bool proc_parent(pid_t pid, pid_t *ppid, int *depth)
{
        char path[64], line[256];
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        f = fopen(path, "re");
        if (!f)
                return false;
        *ppid = -1;
        *depth = 0;
        while (fgets(line, sizeof(line), f)) {
                if (strncmp(line, "PPid:", 5) == 0)
                        *ppid = (pid_t)atoi(line + 5);
                else if (strncmp(line, "NSpid:", 6) == 0)
                        for (char *c = strtok(line + 6, " \t\n"); c; c = strtok(NULL, " \t\n"))
                                ++*depth;
        }
        fclose(f);
        return true;
}

/* One process of the session in the sandbox's own pid namespace (a child of pid 1 seen in
 * as many pid namespaces), -1 if there is none. Not pid 1 itself: its memory is csandbox's
 * and not dumpable, so the kernel would not let us reach its namespaces through it. */
static pid_t session_member(pid_t pid1)
{
        _cleanup_closedir_ DIR *d = opendir("/proc");
        struct dirent *de;
        pid_t ppid;
        int depth1, depth;

        if (!d || !proc_parent(pid1, &ppid, &depth1))
                return -1;
        while ((de = readdir(d))) {
                pid_t pid = (pid_t)atoi(de->d_name);

                if (pid > 0 && proc_parent(pid, &ppid, &depth) && ppid == pid1 && depth == depth1)
                        return pid;
        }
        return -1;
}

/* sig to every process of the session but pid 1 (csandbox's own, which only reaps and
 * forwards), from inside its pid namespace: kill(-1) there reaches each one, nested pid
 * namespaces too, and the kernel holds a signal to many processes for a fork in progress,
 * so no child is missed. The pid namespace's owner, not the member's user namespace (a
 * nested one, perhaps), is entered first: a pid namespace is entered with CAP_SYS_ADMIN
 * over it and in one's own user namespace, which the session's creator has there. */
static void session_signal(pid_t pid1, int sig)
{
        pid_t member = session_member(pid1), p;

        if (member < 0)
                return; /* nothing runs but pid 1 */
        p = fork();
        if (p == 0) {
                char path[64];
                int pidns, userns;
                pid_t q, ppid;
                int depth;

                snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)member);
                pidns = open(path, O_RDONLY | O_CLOEXEC);
                /* Still that process, not a reused pid. */
                if (pidns < 0 || !proc_parent(member, &ppid, &depth) || ppid != pid1)
                        _exit(1);
                userns = ioctl(pidns, NS_GET_USERNS);
                if (userns < 0 || setns(userns, CLONE_NEWUSER) < 0 ||
                    setns(pidns, CLONE_NEWPID) < 0)
                        _exit(1);
                q = fork();
                if (q == 0)
                        _exit(kill(-1, sig) < 0 ? 1 : 0);
                while (q > 0 && waitpid(q, NULL, 0) < 0 && errno == EINTR)
                        ;
                _exit(0);
        }
        while (p > 0 && waitpid(p, NULL, 0) < 0 && errno == EINTR)
                ;
}

/* The change journal's word: the last byte counts. EOF: it is gone (the session ends with
 * what it judged, the rest by the session's record). */
static void pause_read(struct relay *r)
{
        char buf[64];
        ssize_t n = read(pause_fd, buf, sizeof(buf));

        if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
                pause_fd = -1;
                return;
        }
        if (n <= 0)
                return;
        r->paused = buf[n - 1] == 'p';
        session_signal(r->pid, r->paused ? SIGSTOP : SIGCONT);
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
                struct pollfd p[7];
                int i_in = -1, i_pty = -1, i_out = -1, i_ctl = -1, i_helper = -1, i_pause = -1,
                    n = 0;
                int timeout = -1;
                short pty_events = 0;
                bool pause_wait = false;

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
                if (pause_fd >= 0) {
                        i_pause = n;
                        p[n++] = (struct pollfd){.fd = pause_fd, .events = POLLIN};
                }
                /* Paused: stopped again each second, should a process have started since
                 * (the payload itself, when the pause came during the set-up). */
                if (r->paused && (timeout < 0 || timeout > PAUSE_AGAIN_MS)) {
                        timeout = PAUSE_AGAIN_MS;
                        pause_wait = true;
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
                if (i_helper >= 0 && ((ready == 0 && !pause_wait) || p[i_helper].revents)) {
                        if (ready > 0 && helper_ready(helper_fd)) {
                                helper_fd = -1;
                        } else if (!helper_failed) {
                                /* No network is coming: end the session; it is reaped below. */
                                helper_failed = true;
                                helper_fd = -1;
                                kill(pid, SIGKILL);
                        }
                }
                if (i_pause >= 0 && p[i_pause].revents)
                        pause_read(r);
                else if (ready == 0 && pause_wait)
                        session_signal(pid, SIGSTOP);
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
