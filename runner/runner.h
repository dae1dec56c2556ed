/* Internal interface of runner/: the steps that execute a struct sandbox_spec. */
#pragma once
#include <linux/filter.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/ioctl.h>
#include <sys/types.h>
#include <termios.h>

#include "../spec/spec.h"

struct cs_error;
struct nlmsghdr;
struct net_early;

/* Signals csandbox and its pid 1 pass on to the payload. */
#define RUNNER_FORWARDED_SIGNALS                                                                   \
        {                                                                                          \
                SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH, SIGTSTP              \
        }

/* Bind sources are fds from planning on: a soft RLIMIT_NOFILE of 1024 would cap a plan
 * (every submodule git dir is one) far below the spec's mount limit. */
/* Raise our soft RLIMIT_NOFILE (to 8192 or the hard limit) before the sources are opened;
 * true with the caller's limit in *ret_orig when it was raised, for the payload to get back. */
bool raise_nofile_limit(struct rlimit *ret_orig);

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
int tty_supervise(struct tty_link *t, pid_t pid, int sfd, int helper_fd, int *ret_wstatus,
                  struct cs_error *err);

/* Put csandbox (and so everything it starts next) under the spec's memory and CPU limits,
 * in a transient scope of the user's systemd; when that cannot be done, a warning saying
 * why, and the launch goes on. */
void cgroup_apply_limits(const struct sandbox_spec *s);

/* Where the machine made a launch adapt (bits): the sandbox keeps the outer hostname
 * (sethostname refused, as podman's default seccomp profile does without CAP_SYS_ADMIN), or
 * its /proc is the outer one bound read-only (the kernel refused a fresh one). */
enum {
        RUNNER_NOTE_HOSTNAME = 1u << 0,
        RUNNER_NOTE_PROC_BIND = 1u << 1,
};
/* The sandbox's set-up says nothing of these adaptations; the caller reads them from
 * runner_notes_seen() after the launch (doctor, which prints each once). Without it, the
 * /proc note prints on the first launch of this machine and user only (a marker in
 * ${XDG_STATE_HOME:-~/.local/state}/csandbox/notes/), before the payload starts; the
 * hostname is never worth a line on a session's terminal. */
void runner_notes_quiet(void);
/* The adaptations of every launch so far, OR'ed. */
unsigned runner_notes_seen(void);
/* Whether the note called name is due: true the first time on this machine for this user
 * (and from then on a marker in ${XDG_STATE_HOME:-~/.local/state}/csandbox/notes/ says it
 * was shown), false after; true when no marker can be read or made. */
bool runner_note_first(const char *name);
/* pid 1's set-up: record an adaptation (printing its note when that is due). */
void runner_note(unsigned bit);

/* A message for the user at run time (its text starts "csandbox: "), one line of stderr
 * (warn.c); what is known before the launch goes into the spec's warnings instead. */
__attribute__((format(printf, 1, 2))) void runner_warn(const char *fmt, ...);

/* Every producer, before --plan prints its spec and before the launch: the decisions that
 * depend on this machine (the subordinate range a package broker needs, else no broker and
 * a warning; slirp4netns for a missing pasta, with a warning). The launch changes nothing. */
int runner_spec_complete(struct sandbox_spec *s, struct cs_error *err);

/* Validate, clone into the namespaces, supervise; *ret_status is the exit status csandbox
 * should return (the payload's, 128+N, or 125/126/127). */
int launch_run(const struct sandbox_spec *s, const struct sock_fprog *filter, int *ret_status,
               struct cs_error *err);
/* The same in the namespaces of early (NULL or not started: as launch_run) when they fit
 * the spec (--net pasta, the same map_host_loopback); otherwise early is stopped and the
 * launch makes its own. early is stopped when the session ends. */
int launch_run_early(const struct sandbox_spec *s, const struct sock_fprog *filter,
                     struct net_early *early, int *ret_status, struct cs_error *err);

/* Whether /proc is this process's pid namespace's (/proc/self is us). Under a bound /proc
 * (csandbox's fallback where the kernel refuses a fresh one) it is an outer namespace's. */
bool runner_proc_is_ours(void);
/* pid (of our pid namespace) as /proc names it: the same, or under an outer namespace's
 * /proc the pid it has there, which /proc/PID paths and the helpers given a pid need. */
pid_t runner_pid_in_proc(pid_t pid);
/* Parent side: write the child's uid/gid maps (one id, or ranges through newuidmap). */
int idmap_write(pid_t child, const struct sandbox_spec *s, struct cs_error *err);
/* Parent side, before anything exists: the caller's subordinate range for --map-range. */
int idmap_check_range(const struct sandbox_spec *s, struct cs_error *err);

/* Child side, before anything is mounted: clone every host path the spec binds (so a
 * later tmpfs cannot hide it), then assemble the new root and pivot into it. */
int mounts_setup(const struct sandbox_spec *s, struct cs_error *err);
/* fd (a directory opened before this mount namespace was made) again, through this
 * namespace's copy of its mount: overlayfs takes an upper dir only from a mount of the
 * namespace that mounts it. The same directory (its path looked up without a symlink, then
 * checked by inode) or an error naming what. */
int mnt_reopen_here(int fd, const char *what, struct cs_error *err);

enum net_helper_kind { NET_HELPER_PASTA, NET_HELPER_SLIRP4NETNS };
struct net_host_addr {
        int family; /* AF_INET or AF_INET6 */
        unsigned char bytes[16];
};
#define NET_HELPER_TIMEOUT_MS 10000
/* The sandbox's interface as csandbox configures it (netconf.c); early false: pasta
 * configures it (--config-net) and the payload waits for pasta to be ready. */
struct net_tap_conf {
        bool early;
        bool has4, has6;
        char ifname[16];
        unsigned char addr4[4], gw4[4], prefix4;
        unsigned char addr6[16], gw6[16], prefix6;
};
struct net_helper {
        enum net_helper_kind kind;
        char path[4096];
        /* What is executed: path, or pasta's own AVX2 build (path + ".avx2", which pasta
         * would otherwise exec itself: one exec and one dynamic link less). */
        char exec_path[4096 + 8];
        pid_t pid;
        int ready_fd; /* readable once the helper has configured the namespace */
        int err_fd;   /* the helper's stderr, shown when it fails */
        int exit_fd;  /* slirp4netns exits when this closes */
        /* The host's addresses, gathered before clone, made unreachable inside. */
        struct net_host_addr *host_addrs;
        size_t n_host_addrs;
        struct net_tap_conf tap; /* pasta only */
};
/* The network made ahead of the launch (netearly.c): a holder process in a new user and
 * network namespace with pasta already started on it. */
struct net_early {
        pid_t holder;        /* -1: none */
        int user_fd, net_fd; /* the holder's namespaces */
        int hold_fd;         /* the holder lives until this closes */
        bool started;        /* pasta runs on them */
        bool map_host_loopback;
        struct net_helper net;
};
void net_early_init(struct net_early *ne);
/* Make the namespaces and start pasta on them, as a sandbox with --net pasta and this
 * map_host_loopback would; false (nothing left running) where that cannot be done, and the
 * launch makes its network as usual. */
bool net_early_start(bool map_host_loopback, struct net_early *ne);
/* Stop pasta and the holder; safe to repeat. */
void net_early_stop(struct net_early *ne);

/* Before anything exists: which helper, and can it work (/dev/net/tun)? */
int netns_helper_find(const struct sandbox_spec *s, struct net_helper *ret, struct cs_error *err);
/* Attach the helper to the network namespace of child. */
int netns_helper_start(const struct sandbox_spec *s, pid_t child, struct net_helper *h,
                       struct cs_error *err);
/* timeout_ms 0: it has failed already (the ready pipe closed, or nothing in time): say why. */
int netns_helper_wait_ready(struct net_helper *h, int timeout_ms, struct cs_error *err);
/* Kill the helper (if started) and release what find gathered; safe to repeat. */
void netns_helper_stop(struct net_helper *h);
/* Child side, in the new netns: loopback up; with a helper, every host address gets an
 * unreachable rule so the helper cannot carry a connection to the host itself. */
int netns_setup(const struct sandbox_spec *s, const struct net_helper *h, struct cs_error *err);

/* One netlink request answered by an acknowledgement: 0 or -errno. */
int netlink_request(int nl, struct nlmsghdr *req);
/* Parent, before clone: the configuration pasta would choose, from the host's routes. */
void netconf_host_pick(const struct sandbox_spec *s, struct net_tap_conf *ret);
/* pasta's options that make it agree with c; n: argv entries used so far; returns the new
 * count (at most 12 added). text holds the strings. */
int netconf_pasta_args(const struct net_tap_conf *c, char **argv, size_t n,
                       char text[5][INET6_ADDRSTRLEN]);
/* Child, in the new netns before anything else: a socket woken by new links (an fd). */
int netconf_tap_watch(struct cs_error *err);
/* pid 1: wait for pasta's tap, then bring it up with c's addresses and routes. */
int netconf_tap_up(const struct net_tap_conf *c, int watch, struct cs_error *err);

/* pid 1 of the sandbox: start the payload, forward signals, reap, exit with its status. */
/* netready_fd: a byte once the helper configured the network (EOF: it failed); tap_watch:
 * configure pasta's tap here (netconf_tap_up) instead. Both -1 without a helper. */
__attribute__((noreturn)) void init_run(const struct sandbox_spec *s,
                                        const struct sock_fprog *filter, const struct tty_link *tty,
                                        int errfd, const struct net_helper *net, int netready_fd,
                                        int tap_watch);
/* pid 1, before the payload starts: the package broker of an image session (broker.c). */
void broker_start(const struct sandbox_spec *s, const struct sock_fprog *filter);
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

/* Append the likely reason user namespaces are unavailable, and its fix, to err. */
void diagnose_userns(struct cs_error *err);
/* The same for a step refused inside the new namespaces (loopback, mounts, pivot_root). */
void diagnose_setup(struct cs_error *err);
/* Append why /dev/net/tun cannot be opened (errno e) and the fix where csandbox runs: modprobe
 * on a host, chmod for a root-only node, --device in a container, --dev-bind in csandbox. */
void diagnose_tun(struct cs_error *err, int e);

/* Report a child-side failure through errfd and leave with status. */
__attribute__((noreturn)) void runner_child_fail(int errfd, const struct cs_error *err);
