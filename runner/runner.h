/* The runner's public face: what cli/ and policy/ (and the image build) call to execute a
 * struct sandbox_spec. Everything else the runner does is declared in runner/internal.h,
 * for runner/ alone. */
#pragma once
#include <linux/filter.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "../spec/spec.h"

struct cs_error;
struct net_early;

/* Bind sources are fds from planning on: a soft RLIMIT_NOFILE of 1024 would cap a plan
 * (every submodule git dir is one) far below the spec's mount limit. */
/* Raise our soft RLIMIT_NOFILE (to 8192 or the hard limit) before the sources are opened;
 * true with the caller's limit in *ret_orig when it was raised, for the payload to get back. */
bool raise_nofile_limit(struct rlimit *ret_orig);

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
/* Why the kernel refuses the sandbox a fresh /proc where csandbox runs (a container, a pod,
 * a plain unshare, another csandbox), and what gives one there, as clauses. */
void runner_proc_words(const char **cause, const char **fix);
/* Whether csandbox's own network namespace routes nowhere but loopback (a container started
 * with --network none): csandbox's proxy and pasta have nothing to reach. */
bool runner_no_network(void);
/* That said in a clause with the fix where csandbox runs (a container, a pod, a machine). */
const char *runner_no_network_words(void);
/* An allowlist session where runner_no_network(): a warning in the spec saying so. */
int runner_check_network(struct sandbox_spec *s, struct cs_error *err);
/* Whether csandbox runs in a Kubernetes pod (its wording of a fix differs from an engine's). */
bool runner_in_pod(void);
/* Whether the note called name is due: true the first time on this machine for this user
 * (and from then on a marker in ${XDG_STATE_HOME:-~/.local/state}/csandbox/notes/ says it
 * was shown), false after; true when no marker can be read or made. */
bool runner_note_first(const char *name);

/* While the next session runs, a byte read from fd pauses it ('p': every process of the
 * session stopped, again each second while paused) or resumes it ('r'); a signal that
 * would end it ends a paused one at once (SIGKILL). -1: none. The change journal's word. */
void runner_pause_from(int fd);

/* Every producer, before --plan prints its spec and before the launch: the decisions that
 * depend on this machine (the subordinate range a package broker needs, else no broker and
 * a warning; slirp4netns for a missing pasta, with a warning). The launch changes nothing. */
int runner_spec_complete(struct sandbox_spec *s, struct cs_error *err);
/* 0 when /dev/net/tun opens as the tun device (pasta's need); else why not, with
 * diagnose_tun's fix for where csandbox runs, in why, and -errno. No process started. */
int runner_tun_usable(struct cs_error *why);

/* Validate, clone into the namespaces, supervise; *ret_status is the exit status csandbox
 * should return (the payload's, 128+N, or 125/126/127). */
int launch_run(const struct sandbox_spec *s, const struct sock_fprog *filter, int *ret_status,
               struct cs_error *err);
/* The same in the namespaces of early (NULL or not started: as launch_run) when they fit
 * the spec (--net pasta, the same map_host_loopback); otherwise early is stopped and the
 * launch makes its own. early is stopped when the session ends. */
int launch_run_early(const struct sandbox_spec *s, const struct sock_fprog *filter,
                     struct net_early *early, int *ret_status, struct cs_error *err);

/* Parent side: write the child's uid/gid maps (one id, or ranges through newuidmap). */
int idmap_write(pid_t child, const struct sandbox_spec *s, struct cs_error *err);
/* Parent side, before anything exists: whether the caller's subordinate range can be mapped.
 * flag: the option that asked for it, named in the error with "or drop" it; NULL: the
 * caller says why it wanted the range. */
int idmap_check_range(const struct sandbox_spec *s, const char *flag, struct cs_error *err);

/* fd (a directory opened before this mount namespace was made) again, through this
 * namespace's copy of its mount: overlayfs takes an upper dir only from a mount of the
 * namespace that mounts it. The same directory (its path looked up without a symlink, then
 * checked by inode) or an error naming what. */
int mnt_reopen_here(int fd, const char *what, struct cs_error *err);

enum net_helper_kind { NET_HELPER_PASTA, NET_HELPER_SLIRP4NETNS };
struct net_host_addr {
        int family; /* AF_INET or AF_INET6 */
        unsigned char bytes[16];
        unsigned char prefix; /* 0: the one address; else a local route's prefix length (the
                               * host answers every address of it: `ip route add local`) */
};
/* Whether a (family's bytes) is h or lies in h's prefix. */
bool net_host_addr_holds(const struct net_host_addr *h, int family, const unsigned char *a);
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
/* Kill the helper (if started) and release what find gathered; safe to repeat. */
void netns_helper_stop(struct net_helper *h);

/* Append the likely reason user namespaces are unavailable, and its fix, to err. */
void diagnose_userns(struct cs_error *err);
