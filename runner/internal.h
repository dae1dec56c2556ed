/* runner/'s own interface, for its files alone: the steps that execute a struct
 * sandbox_spec (the public ones are in runner.h). */
#pragma once
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>

#include "runner.h"

/* Signals csandbox and its pid 1 pass on to the payload. */
#define RUNNER_FORWARDED_SIGNALS                                                                   \
        {                                                                                          \
                SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH, SIGTSTP              \
        }

/* The session's terminal, decided before clone (tty.c); pid 1 and the payload read their
 * copy. */
struct tty_link {
        bool pty;         /* the payload gets a pty of the sandbox's own devpts */
        unsigned tty_fds; /* bit n: our fd n (0, 1, 2) is a terminal */
        unsigned pty_fds; /* bit n: the payload's fd n is the pty (else our fd n as it is) */
        int in_fd;        /* our fd relayed into the pty, or -1 */
        int out_fd;       /* our fd the pty's output goes to, or -1 */
        int raw_fd;       /* the caller's terminal put in raw mode while relayed, or -1 */
        int size_fd;      /* the terminal whose window size the pty takes, or -1 */
        bool keep_opost;  /* raw_fd keeps its output processing (our stdout is not it) */
        bool plain;       /* the spec's tty_plain: no title push and pop */
        bool have_termios;
        struct termios termios; /* the pty's initial modes: the caller's */
        struct winsize ws;
        int ctl[2]; /* SOCK_SEQPACKET: [0] csandbox's end, [1] pid 1's */
};
int tty_prepare(const struct sandbox_spec *s, struct tty_link *t, struct cs_error *err);
void tty_link_close(struct tty_link *t);
/* pid 1: a session of its own; with a pty, allocate it in the sandbox's devpts, make it the
 * session's terminal and pass its master to csandbox. *ret_slave: the pty or -1. */
int tty_child_session(const struct tty_link *t, int *ret_slave, struct cs_error *err);
/* The payload, before exec_payload: its own process group, the pty's foreground job, the
 * pty on the fds that get it. */
int tty_payload_attach(const struct tty_link *t, int slave, struct cs_error *err);
/* pid 1: tell csandbox the payload stopped; whether csandbox asked to continue it. */
void tty_child_report_stopped(const struct tty_link *t);
bool tty_child_continue_wanted(const struct tty_link *t);
/* csandbox, once the child is released: relay the pty, pass signals on, follow the
 * session's job control, until pid 1 is reaped (*ret_wstatus); the caller's terminal is
 * restored when it returns. helper_fd (or -1): the network helper's ready pipe, watched
 * until a byte comes; when it closes first or nothing comes within NET_HELPER_TIMEOUT_MS,
 * the sandbox is killed and 1 returned (the caller says why). */
int runner_supervise(struct tty_link *t, pid_t pid, int sfd, int helper_fd, int *ret_wstatus,
                     struct cs_error *err);

/* Put csandbox (and so everything it starts next) under the spec's memory and CPU limits,
 * in a transient scope of the user's systemd; when that cannot be done, a warning saying
 * why, and the launch goes on. */
void cgroup_apply_limits(const struct sandbox_spec *s);

/* pid 1's set-up: record an adaptation (printing its note when that is due). */
void runner_note(unsigned bit);
/* The launch, before clone: which notes are due, and a fresh record for the child; after
 * the session: what it adapted to, and a marker for each note printed (notes.c). */
void runner_notes_begin(void);
/* Whether runner_notes_quiet() was called (doctor). */
bool runner_notes_all_quiet(void);
void runner_notes_end(void);

/* A message for the user at run time (its text starts "csandbox: "), one line of stderr
 * (warn.c); what is known before the launch goes into the spec's warnings instead. */
__attribute__((format(printf, 1, 2))) void runner_warn(const char *fmt, ...);

/* Whether /proc is this process's pid namespace's (/proc/self is us). Under a bound /proc
 * (csandbox's fallback where the kernel refuses a fresh one) it is an outer namespace's. */
bool runner_proc_is_ours(void);
/* pid (of our pid namespace) as /proc names it: the same, or under an outer namespace's
 * /proc the pid it has there, which /proc/PID paths and the helpers given a pid need. */
pid_t runner_pid_in_proc(pid_t pid);

/* The id map entries (inside, outside, count; up to three) that put inside on the caller's
 * host id and ids 0..65535 around it on the subordinate range from sub_start; the number
 * of values written to out. */
int idmap_range_args(unsigned inside, unsigned long host, unsigned long sub_start,
                     unsigned long out[9]);

/* Child side, before anything is mounted: clone every host path the spec binds (so a
 * later tmpfs cannot hide it), then assemble the new root and pivot into it. */
int mounts_setup(const struct sandbox_spec *s, struct cs_error *err);

/* pasta's way into child's user and network namespaces: fds, opened while child may still
 * be opened by its pid (it turns undumpable before its payload starts). -errno. */
int netns_helper_nsopen(const struct sandbox_spec *s, pid_t child, const struct net_helper *h,
                        int ret_fds[2], struct cs_error *err);
/* Attach the helper to the network namespace of child; pasta through nsfds (taken, closed
 * here), or, when they are -1, through fds it opens itself. */
int netns_helper_start(const struct sandbox_spec *s, pid_t child, int nsfds[2],
                       struct net_helper *h, struct cs_error *err);
/* timeout_ms 0: it has failed already (the ready pipe closed, or nothing in time): say why. */
int netns_helper_wait_ready(struct net_helper *h, int timeout_ms, struct cs_error *err);
/* The sandbox's rules "to ADDR unreachable" for the host's addresses: right after the local
 * table (the sandbox's own addresses). */
#define NET_RULE_PRIORITY 1
/* Addresses that are local inside the sandbox by construction need no rule. */
bool net_addr_needs_rule(const struct sandbox_spec *s, const struct net_host_addr *a);
/* RTM_NEWRULE (never a second of one: -EEXIST) or RTM_DELRULE of a's rule, acknowledged;
 * 0 or -errno. */
int net_rule_unreachable(int nl, unsigned short type, const struct net_host_addr *a, uint32_t seq);
/* The host's addresses followed by a pasta session's rules (netwatch.c): a process outside
 * the session, subscribed to the host's address events, with a netlink socket of child's
 * network namespace; it reconciles the rules with the host's addresses at once and after
 * every change. Started while child can still be opened by its pid. */
struct net_watch {
        pid_t pid; /* -1: none */
};
int net_watch_start(const struct sandbox_spec *s, pid_t child, struct net_watch *w,
                    struct cs_error *err);
/* Safe to repeat. */
void net_watch_stop(struct net_watch *w);
/* Child side, in the new netns: loopback up; with a helper, every host address gets an
 * unreachable rule so the helper cannot carry a connection to the host itself. */
int netns_setup(const struct sandbox_spec *s, const struct net_helper *h, struct cs_error *err);

/* Parent, before clone: the configuration pasta would choose, from the host's routes. */
void netconf_host_pick(const struct sandbox_spec *s, struct net_tap_conf *ret);
/* pasta's options that make it agree with c; n: argv entries used so far; returns the new
 * count (at most 12 added). text holds the strings. */
int netconf_pasta_args(const struct net_tap_conf *c, char **argv, size_t n,
                       char text[5][INET6_ADDRSTRLEN]);
/* Child, in the new netns before anything else: a socket woken by new links (an fd). */
int netconf_tap_watch(struct cs_error *err);
/* Whether this kernel lets the payload start before pasta attaches to the tap (the
 * neighbour queue survives the attach), for c's families. */
bool netconf_tap_handoff(const struct net_tap_conf *c);
/* In the sandbox's user and network namespaces, before pasta starts: make c's tap,
 * persistent, for pasta to attach to; nothing when it exists. -errno. */
int netconf_tap_make(const struct net_tap_conf *c);
/* pid 1: bring the tap up with c's addresses and routes. watch >= 0: wait for pasta to
 * make it first; -1: it exists (netconf_tap_make), and its neighbours are set to wait for
 * pasta. */
int netconf_tap_up(const struct net_tap_conf *c, int watch, struct cs_error *err);

/* The sandbox's first process (child.c): the set-up in its namespaces once csandbox has
 * written the id maps (syncfd), then init_run. Failures go to errfd; egress_fd: its end of
 * the egress proxy's socket, or -1; tapfd: where it says, first thing, that pasta may start
 * (it made pasta's tap, or will wait for pasta's own), or -1 when pasta runs already. */
__attribute__((noreturn)) void runner_child_main(const struct sandbox_spec *s,
                                                 const struct net_helper *net,
                                                 const struct sock_fprog *filter,
                                                 const struct tty_link *tty, int syncfd, int errfd,
                                                 int egress_fd, int tapfd);
/* pid 1 of the sandbox, the set-up done: start the payload (on slave, the pty, when there is
 * one), then only forward signals and reap, and exit with the payload's status. */
__attribute__((noreturn)) void init_run(const struct sandbox_spec *s,
                                        const struct sock_fprog *filter, const struct tty_link *tty,
                                        int slave, int errfd);
/* pid 1, before the payload starts: the package broker of an image session (broker.c). */
void broker_start(const struct sandbox_spec *s, const struct sock_fprog *filter);
/* The embedded default's layer (host_layer.c): pid 1, before it drops its capabilities,
 * starts the mount helper and gets the broker's end of its socket (-1: no layer). */
int host_layer_start(const struct sandbox_spec *s);
/* The broker: have the layer made (once). 0, with how many host directories could not be
 * mirrored and their names; or -errno with why. */
int host_layer_request(int sock, int broker_ns, size_t *ret_unread, char *note, size_t note_len,
                       char *why, size_t why_len);
/* The broker's own mount namespace, made before the payload exists (broker.c): every host
 * directory bound writable is read-only there. 0 or -errno. */
int broker_own_mounts(const struct sandbox_spec *s);
/* In a detached clone of the layer over dir: the spec's writable host binds below dir
 * made read-only, as broker_own_mounts made them in the broker's namespace. */
int broker_clone_read_only(const struct sandbox_spec *s, int clone, const char *dir);
/* The broker, after: the directories a manager expects in the session's own /var. */
void host_layer_var(void);
/* Whether the broker runs argv (a package manager's base name, one of the spec's, and its
 * words): 0 with the manager's path, or -errno with why. */
int broker_check(const struct sandbox_spec *s, char *const *argv, const char **ret_path, char *why,
                 size_t why_len);

/* The payload's last steps: cwd, capabilities, no_new_privs, seccomp, execve. */
__attribute__((noreturn)) void exec_payload(const struct sandbox_spec *s,
                                            const struct sock_fprog *filter, int errfd);
/* Drop every capability (effective, permitted, inheritable, ambient, bounding). */
int exec_drop_capabilities(struct cs_error *err);
int exec_keep_capabilities(uint64_t caps, struct cs_error *err);

/* The same for a step refused inside the new namespaces (loopback, mounts, pivot_root). */
void diagnose_setup(struct cs_error *err);
/* Append why /dev/net/tun cannot be opened (errno e) and the fix where csandbox runs: modprobe
 * on a host, chmod for a root-only node, --device in a container, --dev-bind in csandbox. */
void diagnose_tun(struct cs_error *err, int e);
/* A uid_map with the caller's uid 0 refused: the missing CAP_SETFCAP and the fix where this
 * runs (inside csandbox: the outer's --uid), the cause then named. */
void diagnose_root_map(struct cs_error *err);
/* The staging tmpfs could not be mounted on /tmp (errno e): a root without /tmp, and the fix
 * for a container, a pod or a machine. */
void diagnose_stage(struct cs_error *err, int e);
/* Why the outer csandbox was refused a fresh /proc and how to give it one, as clauses, for
 * where that outer csandbox runs (seen through the /proc it bound in). */
void diagnose_outer_proc(const char **cause, const char **fix);

/* Report a child-side failure through errfd and leave with status (child_fail.c). */
__attribute__((noreturn)) void runner_child_fail(int errfd, const struct cs_error *err);
/* csandbox's side: the message a failed child left on errfd, if any, into err (with its
 * status); false when it left none. */
bool runner_child_message(int errfd, struct cs_error *err);
