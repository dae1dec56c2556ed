/* The processes csandbox runs beside a session: the clipboard relay and the SSH agents'
 * relay. Each serves sockets that the plan binds into the sandbox and lives as long as
 * csandbox (a process of its own, killed with it). What they may forward is decided in
 * policy/ and handed in as a rule; here are only sockets, processes and loops. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct cs_error;

#define RELAY_AGENT_MAX     2            /* $SSH_AUTH_SOCK and 1Password's */
#define RELAY_AGENT_MSG_MAX (256 * 1024) /* one agent message, either way */
/* The clipboard's request: the wl-paste arguments separated by single spaces, then '\n', at
 * most this long (policy/bridge_paths.h says it to the shim inside), at most this many. */
#define RELAY_CLIPBOARD_REQUEST_MAX 1024
#define RELAY_CLIPBOARD_ARGS_MAX    16

/* Whether a wl-paste argument list may run; *ret_bad names the first that may not. */
typedef bool (*relay_clipboard_rule)(char *const *argv, size_t n, const char **ret_bad);
/* Whether an SSH agent request (its message, without the length) may reach the agent. */
typedef bool (*relay_agent_rule)(const unsigned char *msg, size_t len);

struct relay_clipboard {
        int listen_fd;  /* the listening socket, until the relay takes it; or -1 */
        char *wl_paste; /* the host's wl-paste it runs (owned) */
        relay_clipboard_rule allowed;
        pid_t pid;  /* the relay, once started, or 0 */
        int dir_fd; /* the directory holding its socket's name, or -1 */
        char name[64];
};

struct relay_agents {
        size_t n;
        int listen[RELAY_AGENT_MAX]; /* the sandbox's sockets, until the relay takes them */
        int agent[RELAY_AGENT_MAX];  /* O_PATH of each real agent's socket, checked */
        relay_agent_rule allowed;
        int dir_fd; /* the directory holding dir_name, or -1 */
        char dir_name[64];
        pid_t pid; /* the relay, once started, or 0 */
};

/* Both relays of a session; zeroed by relay_set_init (nothing open). */
struct relay_set {
        struct relay_clipboard clipboard;
        struct relay_agents agents;
};

void relay_set_init(struct relay_set *r);
/* Start whichever relay has sockets to serve; 0 when there is nothing to serve. */
int relay_set_start(struct relay_set *r, struct cs_error *err);
/* Stop the relays, remove their sockets, close what they hold; again, nothing. */
void relay_set_close(struct relay_set *r);

/* The clipboard relay's socket clipboard-PID.sock made in dir_fd (0600, listening), names of
 * killed launches swept first; *ret_path_fd: its O_PATH (for the bind). shown: the dir in
 * messages. */
int relay_clipboard_listen(struct relay_clipboard *c, int dir_fd, const char *shown,
                           int *ret_path_fd, struct cs_error *err);

/* The agents' relay: a directory ssh-agent-PID.RANDOM of its own in dir_fd (0700, made, never
 * found; those of killed launches swept first) with socket i in it for agent i (a->agent[i],
 * a->n set by the caller); *ret_path_fds[i]: the sockets' O_PATHs (for the binds). */
int relay_agents_listen(struct relay_agents *a, int dir_fd, const char *shown,
                        int ret_path_fds[RELAY_AGENT_MAX], struct cs_error *err);
