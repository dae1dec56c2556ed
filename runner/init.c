/* pid 1 of the sandbox (after systemd-nspawn's stub pid 1), once the set-up is done
 * (child.c): keep signals blocked and read them from a signalfd, start the payload, drop
 * every capability and every inherited fd but the two it reads, pass signals on to the
 * payload, reap every orphan, and leave with the payload's status. Leaving tears the pid
 * namespace down, so nothing the payload started outlives it. */
#include "internal.h"

#include "../common/error.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* Reap what is there; leave with the payload's status once it is gone; tell csandbox when
 * the payload stopped, so it can stop with it (job control of the whole session). */
static void reap(const struct tty_link *tty, pid_t payload)
{
        for (;;) {
                int status;
                pid_t w = waitpid(-1, &status, WNOHANG | WUNTRACED);

                if (w <= 0)
                        return;
                if (w != payload)
                        continue;
                if (WIFSTOPPED(status)) {
                        tty_child_report_stopped(tty);
                        continue;
                }
                if (WIFEXITED(status))
                        _exit(WEXITSTATUS(status));
                _exit(128 + WTERMSIG(status));
        }
}

/* Close every fd but those in keep (ascending, >= 0). */
static void close_all_but(const int *keep, size_t n)
{
        unsigned from = 0;

        for (size_t i = 0; i <= n; i++) {
                unsigned to = i < n ? (unsigned)keep[i] : ~0U;

                if (to > from)
                        syscall(SYS_close_range, from, to - 1, 0);
                from = to + 1;
        }
}

void init_run(const struct sandbox_spec *s, const struct sock_fprog *filter,
              const struct tty_link *tty, int slave, int errfd)
{
        static const int forwarded[] = RUNNER_FORWARDED_SIGNALS;
        struct cs_error err = {0};
        sigset_t mask;
        pid_t payload;
        int sfd, ctl = tty->ctl[1];

        /* The mask csandbox blocked is inherited; read the same signals here. */
        sigemptyset(&mask);
        for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
                sigaddset(&mask, forwarded[i]);
        sigaddset(&mask, SIGCHLD);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        sfd = signalfd(-1, &mask, SFD_CLOEXEC);
        if (sfd < 0) {
                cs_error_set(&err, errno, "pid 1: signalfd");
                runner_child_fail(errfd, &err);
        }
        /* Not dumpable before the payload exists: until it has closed them below, pid 1
         * holds csandbox's fds, and a payload of the same uid must never reach them through
         * /proc/1/fd (the payload's own exec makes it dumpable again). */
        prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
        payload = fork();
        if (payload < 0) {
                cs_error_set(&err, errno, "pid 1: fork the payload");
                runner_child_fail(errfd, &err);
        }
        if (payload == 0) {
                close(sfd);
                if (tty_payload_attach(tty, slave, &err) < 0)
                        runner_child_fail(errfd, &err);
                exec_payload(s, filter, errfd);
        }
        /* Both sides set the group, so a signal to it cannot come before it exists. */
        setpgid(payload, payload);
        /* pid 1 needs no privilege to reap and forward; keep none the payload could borrow. */
        if (exec_drop_capabilities(&err) < 0) {
                kill(payload, SIGKILL);
                runner_child_fail(errfd, &err);
        }
        prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        /* From here on pid 1 only reaps and forwards: it keeps its signalfd and the
         * terminal's control socket, and nothing else it inherited (the caller's stdio, the
         * pty, the set-up's pipe to csandbox, the spec's sources). */
        {
                int keep[2];
                size_t n = 0;

                if (ctl >= 0 && ctl < sfd)
                        keep[n++] = ctl;
                keep[n++] = sfd;
                if (ctl > sfd)
                        keep[n++] = ctl;
                close_all_but(keep, n);
        }

        for (;;) {
                struct pollfd p[2] = {{.fd = sfd, .events = POLLIN}, {.fd = ctl, .events = POLLIN}};
                struct signalfd_siginfo si;
                ssize_t n;

                if (poll(p, 2, -1) < 0 && errno != EINTR)
                        _exit(CS_EXIT_SETUP);
                if (p[1].revents & (POLLHUP | POLLERR))
                        ctl = -1; /* csandbox is gone; its death signal ends us */
                else if ((p[1].revents & POLLIN) && tty_child_continue_wanted(tty)) {
                        kill(-payload, SIGCONT);
                        kill(-payload, SIGWINCH);
                }
                if (!(p[0].revents & POLLIN))
                        continue;
                n = read(sfd, &si, sizeof(si));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n != sizeof(si))
                        _exit(CS_EXIT_SETUP);
                if (si.ssi_signo == SIGCHLD) {
                        reap(tty, payload);
                } else {
                        /* From csandbox, or the kernel's SIGHUP when the pty hangs up (it
                         * goes to the session's leader, us). A stop goes to the whole job,
                         * as a terminal sends it. */
                        kill(si.ssi_signo == SIGTSTP ? -payload : payload, (int)si.ssi_signo);
                }
        }
}
