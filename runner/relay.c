/* csandbox's side of the session's terminal: the relay between the caller's terminal and
 * the sandbox's pty, and the session's job control as the caller's shell sees it. The loop
 * that drives it is runner_supervise (supervise.c). */
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
#include <sys/wait.h>
#include <unistd.h>

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
        /* Others write to this terminal too (the reader of our stdout's pipe, stderr): it
         * keeps its output processing, or their lines would staircase. */
        if (r->t->keep_opost)
                raw.c_oflag = r->saved.c_oflag;
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

void relay_out_emit(struct relay *r, const char *seq, size_t len);

static void take_terminal(struct relay *r)
{
        char set[TTYMODES_SET_MAX];

        r->fg = in_foreground(r);
        if (r->fg) {
                terminal_raw(r);
                if (r->modes_off) {
                        /* The caller's title saved again, when suspend popped it. */
                        if (r->modes.title)
                                relay_out_emit(r, TTYMODES_TITLE_PUSH, strlen(TTYMODES_TITLE_PUSH));
                        relay_out_emit(r, set, ttymodes_set(&r->modes, set));
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

/* The relay's output goes to the caller's terminal (and not to a pipe or a file). */
static bool out_is_terminal(const struct relay *r)
{
        return r->out_open && r->t->out_fd >= 0 && (r->t->tty_fds & (1u << r->t->out_fd));
}

/* > 0: bytes read; 0: nothing now; -1: nobody inside holds the pty any more (EIO). */
int relay_pty_read(struct relay *r)
{
        size_t room = sizeof(r->out_buf) - r->out_len;
        bool tty = out_is_terminal(r) && !r->t->plain;
        ssize_t n;

        if (room <= TTYMODES_FILTER_EXTRA)
                return 0;
        /* A terminal gets the title push in front of the session's first title change (so
         * the output goes through the filter); anything else the session's bytes alone. */
        n = read(r->master, tty ? r->pty_buf : r->out_buf + r->out_len,
                 room - TTYMODES_FILTER_EXTRA);
        if (n > 0) {
                if (tty) {
                        r->out_len += ttymodes_filter(&r->modes, r->pty_buf, (size_t)n,
                                                      r->out_buf + r->out_len);
                } else {
                        ttymodes_feed(&r->modes, r->out_buf + r->out_len, (size_t)n);
                        if (r->out_open)
                                r->out_len += (size_t)n;
                }
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

void relay_pty_write(struct relay *r)
{
        if (buf_write(r->master, r->in_buf, &r->in_len) < 0)
                r->pty_open = false;
}

void relay_in_read(struct relay *r)
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

void relay_out_write(struct relay *r)
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
                relay_out_write(r);
        }
}

/* Our own sequences to the caller's terminal (never to a pipe), after the session's. */
void relay_out_emit(struct relay *r, const char *seq, size_t len)
{
        out_flush(r);
        if (!len || !r->out_open || !(r->t->tty_fds & (1u << r->t->out_fd)))
                return;
        memcpy(r->out_buf, seq, len);
        r->out_len = len;
        out_flush(r);
}

/* The session stopped (Ctrl-Z inside, or a stop signal): give the caller's shell its
 * terminal back as it was, what the session changed undone, and stop with it. SIGCONT
 * (relay_signal) takes it again. */
static void suspend(struct relay *r)
{
        char reset[TTYMODES_RESTORE_MAX];

        relay_out_emit(r, reset, ttymodes_restore(&r->modes, reset));
        r->modes_off = true;
        terminal_restore(r);
        r->fg = false;
        kill(getpid(), SIGSTOP);
}

void relay_ctl_read(struct relay *r)
{
        char msg;
        int fd, n;

        n = tty_ctl_recv(r->t->ctl[0], &msg, &fd);
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
        /* Stopped by the pause, not by the user: csandbox stays. */
        if (msg == CTL_STOPPED && r->t->tty_fds && !r->paused)
                suspend(r);
}

/* A signal for csandbox: pid 1's end, a resize, or one to pass on. */
void relay_signal(struct relay *r, const struct signalfd_siginfo *si)
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
                        if (!r->paused)
                                tty_ctl_send(r->t->ctl[0], CTL_CONTINUE, -1);
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
        /* A paused session would keep the signal pending, and must not run blind to take
         * it: the user ends it. */
        if (r->paused && (si->ssi_signo == SIGTERM || si->ssi_signo == SIGINT ||
                          si->ssi_signo == SIGHUP || si->ssi_signo == SIGQUIT))
                kill(r->pid, SIGKILL);
}

void relay_open_out(struct relay *r)
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

/* After pid 1 is gone: what the session wrote last, then what it changed in the terminal's
 * state undone (before csandbox prints a word, so what it prints is seen), then the
 * caller's own modes. */
void relay_finish(struct relay *r)
{
        char reset[TTYMODES_RESTORE_MAX];

        /* Everything inside is gone, so the pty holds all it ever will. */
        while (r->master >= 0 && r->pty_open) {
                if (r->out_len >= RELAY_OUT_FULL)
                        out_flush(r);
                if (relay_pty_read(r) <= 0)
                        break;
        }
        out_flush(r);
        /* The start of an escape sequence held back for a title push that never came. */
        if (r->out_open)
                r->out_len += ttymodes_flush(&r->modes, r->out_buf + r->out_len);
        out_flush(r);
        if (!r->modes_off) /* else they are off already */
                relay_out_emit(r, reset, ttymodes_restore(&r->modes, reset));
        terminal_restore(r);
        if (r->master >= 0)
                close(r->master);
        if (r->own_out >= 0)
                close(r->own_out);
}
