/* The session's terminal and process group. The sandbox always runs in a session of its
 * own (pid 1 calls setsid, the payload leads its own process group), so kill(0, ...),
 * PRIO_PGRP and IOPRIO_WHO_PGRP from inside reach nobody outside. When one of our stdin,
 * stdout, stderr is a terminal, the payload gets a pty of the sandbox's own devpts in its
 * place and csandbox relays bytes between that pty and the caller's terminal, as ssh -t and
 * podman -t do: nothing inside holds the caller's terminal, so nothing inside can change its
 * modes or line discipline, steal its foreground or push input into it. */
#include "runner.h"
#include "ttymodes.h"

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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RELAY_IN_BUF  4096
#define RELAY_OUT_BUF (64 * 1024)

/* Messages between csandbox and pid 1 on the control socket (one byte each). */
enum { CTL_MASTER = 'm', CTL_STOPPED = 'z', CTL_CONTINUE = 'c' };

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

static int ctl_send(int ctl, char msg, int fd)
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

/* One message; *ret_fd is a passed fd or -1. 0 at EOF, -errno on error. */
static int ctl_recv(int ctl, char *ret_msg, int *ret_fd)
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
        r = ctl_send(t->ctl[1], CTL_MASTER, master);
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
        ctl_send(t->ctl[1], CTL_STOPPED, -1);
}

bool tty_child_continue_wanted(const struct tty_link *t)
{
        char msg;
        int fd;

        while (ctl_recv(t->ctl[1], &msg, &fd) > 0) {
                if (fd >= 0)
                        close(fd);
                if (msg == CTL_CONTINUE)
                        return true;
        }
        return false;
}

/* csandbox's side. */
struct relay {
        struct tty_link *t;
        pid_t pid;
        int master;     /* -1 until pid 1 passes it, and after a hangup */
        int out;        /* where the pty's output goes */
        int own_out;    /* our own non-blocking opening of the caller's terminal, or -1 */
        bool in_open;   /* stdin is read into the pty */
        bool pty_open;  /* the pty has a reader or writer inside */
        bool out_open;  /* output can still be written */
        bool raw;       /* the caller's terminal is raw; saved holds its modes */
        bool fg;        /* we are the terminal's foreground job (or it has no job control) */
        bool exited;    /* pid 1 is reaped */
        bool modes_off; /* the session's modes are switched off while it is suspended */
        int wstatus;
        struct termios saved;
        int saved_ldisc;
        struct ttymodes modes;
        size_t in_len, out_len;
        char in_buf[RELAY_IN_BUF];
        char out_buf[RELAY_OUT_BUF];
};

/* Input the caller's terminal holds in canonical mode, read as the lines it is before raw
 * mode: n_tty keeps an EOF key (^D typed ahead, or the one script(1) sends when its own input
 * ends) as a NUL byte in its buffer, and raw mode would hand that NUL out as if typed, to be
 * echoed by the pty to the caller's screen. The EOF key itself is passed on instead. */
static void typeahead_take(struct relay *r)
{
        const struct termios *tio = &r->saved;
        int fd = r->t->raw_fd;

        if (!(tio->c_lflag & ICANON) || !r->in_open)
                return;
        while (r->in_len < sizeof(r->in_buf)) {
                struct pollfd p = {.fd = fd, .events = POLLIN};
                size_t room = sizeof(r->in_buf) - r->in_len;
                unsigned char last;
                ssize_t n;

                /* Readable in canonical mode: a whole line or an EOF is there, so the read
                 * returns at once. */
                if (poll(&p, 1, 0) <= 0 || (p.revents & (POLLHUP | POLLERR | POLLNVAL)) ||
                    !(p.revents & POLLIN))
                        return;
                n = read(fd, r->in_buf + r->in_len, room);
                if (n < 0)
                        return;
                r->in_len += (size_t)n;
                if ((size_t)n == room || tio->c_cc[VEOF] == _POSIX_VDISABLE)
                        continue;
                last = n ? (unsigned char)r->in_buf[r->in_len - 1] : 0;
                /* 0 bytes: an EOF alone; a line without its end: one the EOF key ended. */
                if (n == 0 || (last != '\n' && (last != tio->c_cc[VEOL] || !last) &&
                               (last != tio->c_cc[VEOL2] || !last)))
                        r->in_buf[r->in_len++] = (char)tio->c_cc[VEOF];
        }
}

static void terminal_raw(struct relay *r)
{
        struct termios raw;
        int fd = r->t->raw_fd;

        if (fd < 0)
                return;
        /* The modes to restore are read when we take the terminal, not again while we hold
         * it (a SIGCONT while running re-applies raw mode over whatever the shell set). */
        if (!r->raw) {
                if (tcgetattr(fd, &r->saved) < 0)
                        return;
                if (ioctl(fd, TIOCGETD, &r->saved_ldisc) < 0)
                        r->saved_ldisc = -1;
                typeahead_take(r);
        }
        raw = r->saved;
        cfmakeraw(&raw);
        /* From a background job this stops us with SIGTTOU until the shell hands us the
         * terminal: a job in the background must not take the terminal from the shell. */
        if (tcsetattr(fd, TCSANOW, &raw) == 0)
                r->raw = true;
}

/* The caller's terminal exactly as it was: every termios field and the line discipline. */
static void terminal_restore(struct relay *r)
{
        int fd = r->t->raw_fd, ldisc;

        if (!r->raw)
                return;
        tcsetattr(fd, TCSANOW, &r->saved);
        if (r->saved_ldisc >= 0 && ioctl(fd, TIOCGETD, &ldisc) == 0 && ldisc != r->saved_ldisc)
                ioctl(fd, TIOCSETD, &r->saved_ldisc);
        r->raw = false;
}

/* A background job leaves the terminal to the shell: it does not read it or change its modes
 * (that would stop it with SIGTTIN/SIGTTOU); `fg` continues us and we take it then. */
static bool in_foreground(const struct relay *r)
{
        pid_t fg;

        if (r->t->raw_fd < 0)
                return true;
        fg = tcgetpgrp(r->t->raw_fd);
        return fg < 0 || fg == getpgrp();
}

static void pty_resize(struct relay *r)
{
        struct winsize ws;

        if (r->master >= 0 && r->t->size_fd >= 0 && ioctl(r->t->size_fd, TIOCGWINSZ, &ws) == 0)
                ioctl(r->master, TIOCSWINSZ, &ws);
}

static void out_emit(struct relay *r, const char *seq, size_t len);

static void take_terminal(struct relay *r)
{
        char set[TTYMODES_SET_MAX];

        r->fg = in_foreground(r);
        if (r->fg) {
                terminal_raw(r);
                if (r->modes_off) {
                        /* The caller's title again, as at the start (suspend popped it). */
                        out_emit(r, TTYMODES_TITLE_PUSH, strlen(TTYMODES_TITLE_PUSH));
                        out_emit(r, set, ttymodes_set(&r->modes, set));
                }
                r->modes_off = false;
        }
        pty_resize(r);
}

/* The caller's terminal is gone: hang the pty up too, which is what ends a session. */
static void hangup(struct relay *r)
{
        r->in_open = false;
        r->out_open = false;
        r->out_len = 0;
        r->pty_open = false;
        if (!r->exited) /* after the reap its pid may be someone else's */
                kill(r->pid, SIGHUP);
        if (r->master >= 0) {
                close(r->master);
                r->master = -1;
        }
}

/* > 0: bytes read; 0: nothing now; -1: nobody inside holds the pty any more (EIO). */
static int pty_read(struct relay *r)
{
        ssize_t n = read(r->master, r->out_buf + r->out_len, sizeof(r->out_buf) - r->out_len);

        if (n > 0) {
                ttymodes_feed(&r->modes, r->out_buf + r->out_len, (size_t)n);
                if (r->out_open)
                        r->out_len += (size_t)n;
                return 1;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        r->pty_open = false;
        return -1;
}

/* Write what fits from the front of buf; -1 once fd is gone for good. */
static int buf_write(int fd, char *buf, size_t *len)
{
        ssize_t n = write(fd, buf, *len);

        if (n > 0) {
                memmove(buf, buf + n, *len - (size_t)n);
                *len -= (size_t)n;
        } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
                return -1;
        }
        return 0;
}

static void pty_write(struct relay *r)
{
        if (buf_write(r->master, r->in_buf, &r->in_len) < 0)
                r->pty_open = false;
}

static void in_read(struct relay *r)
{
        ssize_t n = read(r->t->in_fd, r->in_buf + r->in_len, sizeof(r->in_buf) - r->in_len);
        struct termios pt;

        if (n > 0) {
                r->in_len += (size_t)n;
                return;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (r->t->tty_fds & 1u) {
                /* A raw terminal reads 0 or EIO only once it has hung up. */
                hangup(r);
                return;
        }
        /* The end of a pipe: the pty's own end-of-file character, so a reader inside sees
         * EOF as it would at a terminal. */
        r->in_open = false;
        if (r->master >= 0 && tcgetattr(r->master, &pt) == 0 && (pt.c_lflag & ICANON) &&
            r->in_len < sizeof(r->in_buf))
                r->in_buf[r->in_len++] = (char)pt.c_cc[VEOF];
}

static void out_write(struct relay *r)
{
        if (buf_write(r->out, r->out_buf, &r->out_len) < 0) {
                if (r->t->tty_fds & (1u << r->t->out_fd))
                        hangup(r);
                r->out_open = false;
                r->out_len = 0;
        }
}

/* Blocks until the output buffer is written (a slow terminal slows the session; nothing is
 * dropped) or the output is gone. */
static void out_flush(struct relay *r)
{
        while (r->out_open && r->out_len) {
                struct pollfd p = {.fd = r->out, .events = POLLOUT};

                if (poll(&p, 1, -1) < 0 && errno != EINTR)
                        break;
                out_write(r);
        }
}

/* Our own sequences to the caller's terminal (never to a pipe), after the session's. */
static void out_emit(struct relay *r, const char *seq, size_t len)
{
        out_flush(r);
        if (!len || !r->out_open || !(r->t->tty_fds & (1u << r->t->out_fd)))
                return;
        memcpy(r->out_buf, seq, len);
        r->out_len = len;
        out_flush(r);
}

/* The session stopped (Ctrl-Z inside, or a stop signal): give the caller's shell its
 * terminal back as it was, the modes the session switched on off and every other state
 * back to its default, and stop with it. SIGCONT (on_signal) takes it again. */
static void suspend(struct relay *r)
{
        char reset[TTYMODES_RESTORE_MAX];

        out_emit(r, reset, ttymodes_restore(&r->modes, reset));
        r->modes_off = true;
        terminal_restore(r);
        r->fg = false;
        kill(getpid(), SIGSTOP);
}

static void ctl_read(struct relay *r)
{
        char msg;
        int fd, n;

        n = ctl_recv(r->t->ctl[0], &msg, &fd);
        if (n == 0 || (n < 0 && n != -EAGAIN && n != -EINTR)) {
                close(r->t->ctl[0]);
                r->t->ctl[0] = -1;
                return;
        }
        if (n < 0)
                return;
        /* Only a pty master is taken (TIOCGPTN answers on masters alone). */
        if (msg == CTL_MASTER && fd >= 0 && r->master < 0 && r->t->pty &&
            ioctl(fd, TIOCGPTN, &(unsigned){0}) == 0) {
                r->master = fd;
                r->pty_open = true;
                fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
                take_terminal(r);
                return;
        }
        if (fd >= 0)
                close(fd);
        if (msg == CTL_STOPPED && r->t->tty_fds)
                suspend(r);
}

/* A signal for csandbox: pid 1's end, a resize, or one to pass on. */
static void on_signal(struct relay *r, const struct signalfd_siginfo *si)
{
        switch (si->ssi_signo) {
        case SIGCHLD:
                if (waitpid(r->pid, &r->wstatus, WNOHANG) == r->pid)
                        r->exited = true;
                return;
        case SIGCONT:
                /* `fg` or `bg`: take the terminal when it is ours, and continue the session
                 * (SIGWINCH makes a full-screen program redraw). */
                if (r->t->tty_fds) {
                        take_terminal(r);
                        ctl_send(r->t->ctl[0], CTL_CONTINUE, -1);
                }
                return;
        case SIGWINCH:
                if (r->master >= 0 && r->t->size_fd >= 0) {
                        pty_resize(r); /* the kernel signals the pty's foreground job */
                        return;
                }
                break;
        }
        /* Kernel-sent ones too (a Ctrl-C at a terminal we do not relay): the sandbox is in
         * a session of its own and gets nothing from our terminal directly. */
        kill(r->pid, (int)si->ssi_signo);
}

static void relay_open_out(struct relay *r)
{
        char path[64];
        int fd = r->t->out_fd;

        r->out = fd;
        r->own_out = -1;
        r->out_open = fd >= 0;
        if (fd < 0 || !(r->t->tty_fds & (1u << fd)))
                return;
        /* An opening of our own, so O_NONBLOCK does not change the shell's. */
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        r->own_out = open(path, O_WRONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
        if (r->own_out >= 0)
                r->out = r->own_out;
}

/* After pid 1 is gone: what the session wrote last, then the modes it left on and every
 * other state back to its default (before csandbox prints a word, so what it prints is
 * seen), then the caller's own modes. */
static void relay_finish(struct relay *r)
{
        char reset[TTYMODES_RESTORE_MAX];

        /* Everything inside is gone, so the pty holds all it ever will. */
        while (r->master >= 0 && r->pty_open) {
                if (r->out_len == sizeof(r->out_buf))
                        out_flush(r);
                if (pty_read(r) <= 0)
                        break;
        }
        out_flush(r);
        if (!r->modes_off) /* else they are off already */
                out_emit(r, reset, ttymodes_restore(&r->modes, reset));
        terminal_restore(r);
        if (r->master >= 0)
                close(r->master);
        if (r->own_out >= 0)
                close(r->own_out);
}

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

int tty_supervise(struct tty_link *t, pid_t pid, int sfd, int helper_fd, int *ret_wstatus,
                  struct cs_error *err)
{
        struct timespec t0;
        bool helper_failed = false;
        /* 68 KiB of buffers: on the heap, not the stack. */
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
        /* Before the session's first byte; relay_finish (or a suspend) pops it. */
        out_emit(r, TTYMODES_TITLE_PUSH, strlen(TTYMODES_TITLE_PUSH));
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
                        if (r->out_len < sizeof(r->out_buf))
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
                        ctl_read(r);
                /* What was just read is written at once (all fds but the caller's input
                 * are non-blocking): a poll round trip per chunk halves throughput. */
                if (i_in >= 0 && p[i_in].revents && r->in_open)
                        in_read(r);
                if (i_pty >= 0 && r->master >= 0 && r->pty_open &&
                    (p[i_pty].revents & (POLLIN | POLLHUP | POLLERR)))
                        while (pty_read(r) > 0 && r->out_len < sizeof(r->out_buf))
                                ;
                if (r->in_len && r->master >= 0 && r->pty_open)
                        pty_write(r);
                if (r->out_len && r->out_open && (i_out < 0 || p[i_out].revents || r->own_out >= 0))
                        out_write(r);
                if (p[0].revents & POLLIN) {
                        struct signalfd_siginfo si;
                        ssize_t got = read(sfd, &si, sizeof(si));

                        if (got < 0 && (errno == EINTR || errno == EAGAIN))
                                continue;
                        if (got != sizeof(si)) {
                                e = got < 0 ? errno : EIO;
                                goto fail;
                        }
                        on_signal(r, &si);
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
