/* The session's terminal inside runner/: the control socket between csandbox and pid 1
 * (tty.c) and csandbox's relay (relay.c), which runner_supervise (supervise.c) drives. */
#pragma once
#include "internal.h"
#include "ttymodes.h"

#include <signal.h>
#include <stddef.h>
#include <sys/signalfd.h>
#include <sys/types.h>
#include <termios.h>

#define RELAY_IN_BUF  4096
#define RELAY_OUT_BUF (64 * 1024)
/* The pty is read while the output buffer has room for a read and what the filter adds. */
#define RELAY_OUT_FULL (RELAY_OUT_BUF - TTYMODES_FILTER_EXTRA)

/* Messages between csandbox and pid 1 on the control socket (one byte each). */
enum { CTL_MASTER = 'm', CTL_STOPPED = 'z', CTL_CONTINUE = 'c' };
/* One message, with fd passed along when >= 0: 0 or -errno. */
int tty_ctl_send(int ctl, char msg, int fd);
/* One message; *ret_fd is a passed fd or -1. 0 at EOF, -errno on error. */
int tty_ctl_recv(int ctl, char *ret_msg, int *ret_fd);

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
        bool paused;    /* every process of the session stopped (runner_pause_from) */
        int wstatus;
        struct termios saved;
        int saved_ldisc;
        struct ttymodes modes;
        size_t in_len, out_len;
        char in_buf[RELAY_IN_BUF];
        char out_buf[RELAY_OUT_BUF];
        char pty_buf[RELAY_OUT_BUF]; /* a read of the pty, before the filter */
};

/* Where the pty's output goes (an opening of our own when it is the caller's terminal). */
void relay_open_out(struct relay *r);
/* Our own sequences to the caller's terminal (never to a pipe), after the session's. */
void relay_out_emit(struct relay *r, const char *seq, size_t len);
/* A message of pid 1's on the control socket: the pty's master, or the session stopped. */
void relay_ctl_read(struct relay *r);
/* The caller's input into the buffer for the pty. */
void relay_in_read(struct relay *r);
/* > 0: bytes read; 0: nothing now; -1: nobody inside holds the pty any more (EIO). */
int relay_pty_read(struct relay *r);
void relay_pty_write(struct relay *r);
void relay_out_write(struct relay *r);
/* A signal for csandbox: pid 1's end, a resize, or one to pass on. */
void relay_signal(struct relay *r, const struct signalfd_siginfo *si);
/* After pid 1 is gone: what the session wrote last, then the terminal as it was. */
void relay_finish(struct relay *r);
