/* The session's terminal and process group. The sandbox always runs in a session of its
 * own (pid 1 calls setsid, the payload leads its own process group), so kill(0, ...),
 * PRIO_PGRP and IOPRIO_WHO_PGRP from inside reach nobody outside. When one of our stdin,
 * stdout, stderr is a terminal, the payload gets a pty of the sandbox's own devpts in its
 * place and csandbox relays bytes between that pty and the caller's terminal, as ssh -t and
 * podman -t do: nothing inside holds the caller's terminal, so nothing inside can change its
 * modes or line discipline, steal its foreground or push input into it. */
#include "internal.h"
#include "relay.h"

#include "../common/cleanup.h"
#include "../common/error.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Our fds a and b are the same terminal. */
static bool same_terminal(const struct tty_link *t, int a, int b)
{
        struct stat sa, sb;

        return a >= 0 && b >= 0 && (t->tty_fds & (1u << a)) && (t->tty_fds & (1u << b)) &&
               fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_rdev == sb.st_rdev;
}

int tty_prepare(const struct sandbox_spec *s, struct tty_link *t, struct cs_error *err)
{
        int first_tty = -1;

        memset(t, 0, sizeof(*t));
        t->ctl[0] = t->ctl[1] = -1;
        t->in_fd = t->out_fd = t->raw_fd = t->size_fd = -1;
        for (int fd = 2; fd >= 0; fd--)
                if (isatty(fd)) {
                        t->tty_fds |= 1u << fd;
                        first_tty = fd;
                }
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, t->ctl) < 0)
                return cs_error_set(err, errno, "create the socket to the sandbox's pid 1");
        t->plain = s->tty_plain;
        t->pty = spec_tty_wants_pty(s);
        if (!t->pty)
                return 0;
        /* auto: exactly the fds that are terminals, so isatty() inside answers as outside
         * and `csandbox exec ls | wc -l` counts plain lines; pty: all three, as script does. */
        t->pty_fds = s->tty == SPEC_TTY_PTY ? 7u : t->tty_fds;
        if (t->pty_fds & 1u)
                t->in_fd = 0;
        t->out_fd = t->pty_fds & 2u ? 1 : t->pty_fds & 4u ? 2 : 0;
        if ((t->pty_fds & 1u) && (t->tty_fds & 1u))
                t->raw_fd = 0;
        if (t->tty_fds & (1u << t->out_fd))
                t->size_fd = t->out_fd;
        else
                t->size_fd = first_tty;
        /* The pty starts with the caller's modes (erase, intr, iutf8...), as ssh passes them. */
        if (first_tty >= 0 && tcgetattr(t->raw_fd >= 0 ? t->raw_fd : first_tty, &t->termios) == 0)
                t->have_termios = true;
        /* With our stdout elsewhere, the caller's terminal stays a terminal to those who
         * write to it (raw input only). Output processing then happens once, there, as
         * without a sandbox: not on the pty as well, or each newline would get two CRs. */
        t->keep_opost = t->raw_fd >= 0 && !same_terminal(t, t->raw_fd, 1);
        if ((t->tty_fds & (1u << t->out_fd)) &&
            (t->keep_opost || !same_terminal(t, t->raw_fd, t->out_fd)))
                t->termios.c_oflag &= ~(tcflag_t)OPOST;
        if (t->size_fd >= 0)
                ioctl(t->size_fd, TIOCGWINSZ, &t->ws);
        return 0;
}

void tty_link_close(struct tty_link *t)
{
        for (int i = 0; i < 2; i++)
                if (t->ctl[i] >= 0) {
                        close(t->ctl[i]);
                        t->ctl[i] = -1;
                }
}

int tty_ctl_send(int ctl, char msg, int fd)
{
        char cbuf[CMSG_SPACE(sizeof(int))] = {0};
        struct iovec iov = {.iov_base = &msg, .iov_len = 1};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};

        if (fd >= 0) {
                struct cmsghdr *c;

                mh.msg_control = cbuf;
                mh.msg_controllen = sizeof(cbuf);
                c = CMSG_FIRSTHDR(&mh);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(c), &fd, sizeof(int));
        }
        return sendmsg(ctl, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) == 1 ? 0 : -errno;
}

int tty_ctl_recv(int ctl, char *ret_msg, int *ret_fd)
{
        char cbuf[CMSG_SPACE(sizeof(int))];
        struct iovec iov = {.iov_base = ret_msg, .iov_len = 1};
        struct msghdr mh = {
            .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
        ssize_t n = recvmsg(ctl, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

        *ret_fd = -1;
        if (n < 0)
                return -errno;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
                    c->cmsg_len == CMSG_LEN(sizeof(int)))
                        memcpy(ret_fd, CMSG_DATA(c), sizeof(int));
        return (int)n;
}

int tty_child_session(const struct tty_link *t, int *ret_slave, struct cs_error *err)
{
        _cleanup_close_ int master = -1;
        _cleanup_close_ int slave = -1;
        int unlock = 0, r;

        *ret_slave = -1;
        if (setsid() < 0)
                return cs_error_set(err, errno, "pid 1: start a session of its own (setsid)");
        if (!t->pty)
                return 0;
        /* The sandbox's own devpts (mounts.c): its ptys exist only inside. */
        master = open("/dev/pts/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC | O_NOFOLLOW);
        if (master < 0)
                return cs_error_set(err, errno,
                                    "open /dev/pts/ptmx inside the sandbox for its terminal (a "
                                    "mount over /dev hides it; --tty=inherit runs without one)");
        if (ioctl(master, TIOCSPTLCK, &unlock) < 0)
                return cs_error_set(err, errno, "unlock the sandbox's pty");
        /* The slave through the master, never by a path the sandbox could swap. */
        slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (slave < 0)
                return cs_error_set(err, errno, "open the sandbox's pty");
        if (t->have_termios)
                tcsetattr(slave, TCSANOW, &t->termios);
        if (t->ws.ws_row || t->ws.ws_col)
                ioctl(slave, TIOCSWINSZ, &t->ws);
        /* pid 1 leads the pty's session; the payload is a job in it, so its process group
         * is not orphaned and Ctrl-Z's SIGTSTP stops it (in an orphaned group it would
         * be discarded). */
        if (ioctl(slave, TIOCSCTTY, 0) < 0)
                return cs_error_set(err, errno, "make the pty the sandbox's terminal");
        r = tty_ctl_send(t->ctl[1], CTL_MASTER, master);
        if (r < 0)
                return cs_error_set(err, -r, "pass the pty to csandbox");
        *ret_slave = cs_take_fd(&slave);
        return 0;
}

int tty_payload_attach(const struct tty_link *t, int slave, struct cs_error *err)
{
        sigset_t ttou;

        close(t->ctl[1]);
        if (setpgid(0, 0) < 0)
                return cs_error_set(err, errno, "start the payload's process group");
        if (slave < 0)
                return 0;
        /* Until tcsetpgrp returns we are a background job of the pty: SIGTTOU would stop us.
         * exec_payload clears the mask. */
        sigemptyset(&ttou);
        sigaddset(&ttou, SIGTTOU);
        sigprocmask(SIG_BLOCK, &ttou, NULL);
        if (tcsetpgrp(slave, getpid()) < 0)
                return cs_error_set(err, errno, "make the payload the pty's foreground job");
        for (int fd = 0; fd < 3; fd++)
                if ((t->pty_fds & (1u << fd)) && dup2(slave, fd) < 0)
                        return cs_error_set(err, errno, "put the pty on fd %d", fd);
        if (slave > 2)
                close(slave);
        return 0;
}

void tty_child_report_stopped(const struct tty_link *t)
{
        tty_ctl_send(t->ctl[1], CTL_STOPPED, -1);
}

bool tty_child_continue_wanted(const struct tty_link *t)
{
        char msg;
        int fd;

        while (tty_ctl_recv(t->ctl[1], &msg, &fd) > 0) {
                if (fd >= 0)
                        close(fd);
                if (msg == CTL_CONTINUE)
                        return true;
        }
        return false;
}
