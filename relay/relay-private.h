/* Internal to relay/: what both relays share: their process, and the sweep of what killed
 * launches left in the state dir. */
#pragma once
#include "relay.h"

#include <stddef.h>
#include <sys/types.h>

/* A relay's process: forked with fds[0..n-1] at 3.. and every other fd closed, stdio on
 * /dev/null, its own session (apart from the terminal's signals), no blocked signals,
 * SIGPIPE ignored, killed when csandbox ends. 0 in the child, the pid in the parent. */
pid_t relay_fork(const int *fds, size_t n, const char *what, struct cs_error *err);
/* Kill and reap *pid (when > 0); 0 after. */
void relay_stop(pid_t *pid);
/* The entries of dir_fd named PREFIX<pid>.<rest> that killed launches left: nobody listens on
 * their socket (the entry itself, or sock_in_dir inside it when it is a directory), or the
 * launch <pid> is gone (its relay, killed with it, may still be on its way out: its backlog
 * would accept). Each is removed, a directory with what it holds. */
void relay_sweep(int dir_fd, const char *prefix, const char *sock_in_dir);
/* A unix socket bound at dir_fd/name (mode 0600) and listening; *ret_path_fd its O_PATH,
 * checked to be the socket just made. */
int relay_socket_listen(int dir_fd, const char *name, int sock_flags, int *ret_listen,
                        int *ret_path_fd, const char *what, struct cs_error *err);

/* Each relay's own part of relay_set_start and relay_set_close (clipboard.c, agent.c). */
int relay_clipboard_start(struct relay_clipboard *c, struct cs_error *err);
void relay_clipboard_close(struct relay_clipboard *c);
int relay_agents_start(struct relay_agents *a, struct cs_error *err);
void relay_agents_close(struct relay_agents *a);
