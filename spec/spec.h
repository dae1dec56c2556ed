/* struct sandbox_spec: THE contract between the producers (the `exec` flags, policy/plan.c)
 * and the one consumer, the runner. Everything a launch does is described here before any
 * namespace exists, so it can be validated up front and printed (`--plan`). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

struct cs_error;
typedef struct cJSON cJSON;

enum spec_root {
        SPEC_ROOT_HOST, /* the embedded default: the host's / read-only, homes hidden */
        SPEC_ROOT_DIR,  /* a directory tree (--rootfs), or an image: its layers as lower dirs */
};

enum spec_mount_kind {
        SPEC_MOUNT_BIND,    /* source_fd: the host object; recursive; nosuid,nodev always */
        SPEC_MOUNT_TMPFS,   /* an empty tmpfs at dest */
        SPEC_MOUNT_DIR,     /* create a directory (in a tmpfs-backed layer only) */
        SPEC_MOUNT_FILE,    /* a read-only file with content from memory (data) */
        SPEC_MOUNT_SYMLINK, /* source: the link target */
        SPEC_MOUNT_PROC,    /* a fresh proc, or a read-only bind of /proc where refused */
        SPEC_MOUNT_DEV,     /* a minimal /dev: tmpfs, device binds, devpts, shm */
        SPEC_MOUNT_COPY,    /* a tmpfs at dest holding a copy of the directory source_fd */
};

/* What a SPEC_MOUNT_COPY copies at most (more is left out, with a warning). */
#define SPEC_COPY_MAX_BYTES   ((size_t)64 << 20)
#define SPEC_COPY_MAX_ENTRIES 4096
#define SPEC_COPY_MAX_DEPTH   64

enum {
        SPEC_MOUNT_RO = 1u << 0,       /* read-only, covering every submount */
        SPEC_MOUNT_OPTIONAL = 1u << 1, /* a missing source (tmpfs: destination) is skipped */
        SPEC_MOUNT_SECRET = 1u << 2,   /* FILE data is redacted in plan output */
        SPEC_MOUNT_DEFAULT = 1u << 4,  /* what every sandbox gets; a flag on the same path wins */
        SPEC_MOUNT_DEVICES = 1u << 5,  /* BIND: device nodes stay usable (no nodev) */
};

struct spec_mount {
        enum spec_mount_kind kind;
        unsigned flags;
        char *source;      /* BIND: the host path as given (--plan and messages only); SYMLINK:
                            * target; FILE: where data came from */
        int source_fd;     /* BIND: O_PATH fd of the source, opened once by the producer;
                            * COPY: the directory, O_RDONLY */
        char *source_real; /* BIND: where source_fd is, as the kernel names it */
        char *dest;        /* absolute, normalised path inside the sandbox */
        char *data;        /* FILE only */
        size_t data_len;
        mode_t mode; /* DIR, TMPFS, FILE; 0 = the kind's default */
        size_t seq;  /* insertion order, to keep command-line order among equals */
};

/* One srt settings file behind egress entries: what was read, by fd. */
struct spec_egress_file {
        char *path; /* as given (messages only) */
        char *what; /* the flag or setting that named it */
        int fd;     /* the file, O_RDONLY: the entries came from this fd */
        int dir_fd; /* its directory as opened on the way (O_PATH) */
};

enum spec_net {
        SPEC_NET_NONE,  /* own netns, loopback up */
        SPEC_NET_HOST,  /* the host's netns */
        SPEC_NET_PASTA, /* own netns + pasta (the networking issue) */
        /* own netns whose TCP and DNS csandbox's proxy and resolver relay from the host's
         * network, to any host but the host itself (runner/egress_ns.c): no tun, no pasta */
        SPEC_NET_RELAY,
};

/* Where the session's network may connect (spec/egress.c, runner/egress_ns.c). */
enum spec_egress {
        SPEC_EGRESS_OPEN,      /* anywhere (the network mode decides) */
        SPEC_EGRESS_ALLOWLIST, /* only the allowed hosts, through csandbox's proxy */
        SPEC_EGRESS_NONE,      /* nowhere: no network (SPEC_NET_NONE) */
};

/* One allowed host: a name ("example.com"), its subdomains ("*.example.com"), either with
 * an optional port, or an address range (CIDR). */
struct spec_egress_host {
        char *text;    /* as given */
        char *name;    /* lower case, without "*." and a trailing dot; NULL: a range */
        bool wildcard; /* "*.name": strict subdomains of name */
        bool builtin;  /* what claude itself needs */
        bool deny;     /* a denied host or range: wins over every allowed one */
        uint16_t port; /* 0: any */
        int family;    /* a range: AF_INET or AF_INET6 */
        unsigned char addr[16];
        unsigned prefix;
};

#define SPEC_EGRESS_MAX_HOSTS 512

enum spec_seccomp {
        SPEC_SECCOMP_DEFAULT,
        SPEC_SECCOMP_STRICT,
        SPEC_SECCOMP_NONE,
        SPEC_SECCOMP_FILE, /* an OCI/Docker JSON profile at seccomp_path */
};

enum spec_proc {
        SPEC_PROC_AUTO,  /* a fresh proc; where the kernel refuses one, a read-only bind of /proc */
        SPEC_PROC_FRESH, /* a fresh proc, or the launch fails saying why */
        SPEC_PROC_BIND,  /* a read-only bind of the visible /proc (its pid namespace shows) */
        SPEC_PROC_NONE,  /* an empty read-only /proc */
};

enum spec_tty {
        SPEC_TTY_AUTO,    /* a pty relay when stdin, stdout or stderr is a terminal */
        SPEC_TTY_PTY,     /* always a pty relay, stdin, stdout and stderr through it */
        SPEC_TTY_INHERIT, /* the caller's terminal passed in as it is (no relay) */
};

/* A further overlay lower dir beneath the root tree (an image's layer). */
struct spec_lower {
        int fd;     /* O_PATH|O_DIRECTORY, opened once by the producer */
        char *path; /* as given (--plan and messages only) */
        char *real; /* where fd is, as the kernel names it */
};

/* The most lower dirs an overlay stacks (the kernel's limit). */
#define SPEC_MAX_LOWERS 500

struct spec_env_var {
        char *name;
        char *value;
        bool secret; /* redacted in plan output */
};

struct spec_rlimit {
        int resource;
        struct rlimit limit;
};

/* A package manager the broker may run: the base name a request names, and the image's
 * program it runs for it. */
struct spec_broker_manager {
        char *name;
        char *path;
};

/* The limits of the sandbox's user namespace a producer may set (userns_limits). */
enum spec_userns_limit {
        SPEC_USERNS_INOTIFY_WATCHES,
        SPEC_USERNS_INOTIFY_INSTANCES,
        SPEC_USERNS_USER_NAMESPACES,
        SPEC_USERNS_LIMIT_N
};

struct sandbox_spec {
        enum spec_root root;
        char *root_path; /* SPEC_ROOT_DIR: the tree as given (--plan and messages only) */
        int root_fd;     /* SPEC_ROOT_DIR: O_PATH fd of the tree, opened once by the producer */
        char *root_real; /* SPEC_ROOT_DIR: where root_fd is, as the kernel names it */
        bool writable;   /* an overlay with a tmpfs upper dir stays writable */
        struct spec_lower *lowers; /* SPEC_ROOT_DIR: lower dirs beneath root_fd, top first */
        size_t n_lowers;
        /* SPEC_ROOT_DIR: the overlay's upper and work dirs on disk (O_PATH, one filesystem,
         * the caller's), so that the payload's writes outlive the session: a build step's
         * new layer. -1: a tmpfs upper. The spec owns them (spec_set_root_upper). */
        int upper_fd, work_fd;

        struct spec_mount *mounts;
        size_t n_mounts;

        uid_t uid, gid; /* ids inside */
        uid_t host_uid; /* the caller's ids, mapped onto uid/gid */
        gid_t host_gid;
        bool map_range; /* 65536 ids through newuidmap/newgidmap */
        /* The payload's own ids where they differ from uid/gid (which the caller maps to):
         * a build step runs as the Containerfile's USER in a namespace where the caller is
         * root. Needs map_range. */
        bool payload_ids;
        uid_t payload_uid;
        gid_t payload_gid;
        /* Capabilities the payload keeps (bit n: capability n), its bounding set cut to
         * them, with no_new_privs and the filter as always: a build step's root. Only for a
         * payload of uid 0. 0: none, as every session. */
        uint64_t payload_caps;
        /* The package broker (runner/broker.c) at SPEC_BROKER_SOCKET, which needs uid 0
         * mapped, so map_range. Whether the caller has a range is decided before the launch
         * (runner_spec_complete): without one, a warning says why and the spec has no broker.
         * The producer decides its capabilities (bit n: capability n) and the package
         * managers it runs (policy/plan_broker.c); the runner changes none of it. */
        bool package_broker;
        uint64_t broker_caps;
        struct spec_broker_manager *broker_managers;
        size_t n_broker_managers;
        /* The embedded default's writable layer for the broker (doc/packages-default.md):
         * the session's directories (absolute, normalised: /usr, /etc, the shown parts of
         * /var) over which the first request mounts an overlay whose upper is a tmpfs of
         * the session, prepared by runner/host_layer.c. None: the broker installs into the
         * image's own writable root. */
        char **layer_dirs;
        size_t n_layer_dirs;

        char *hostname; /* NULL: keep "csandbox" */
        enum spec_net net;
        bool net_fixed;         /* the producer offers no --net choice (run): messages name none */
        bool map_host_loopback; /* pasta: 169.254.1.2 reaches the host's 127.0.0.1 */
        /* SPEC_EGRESS_ALLOWLIST goes with SPEC_NET_PASTA's addresses but starts no pasta:
         * csandbox's proxy and resolver are the session's only way out. */
        enum spec_egress egress;
        struct spec_egress_host *egress_hosts;
        size_t n_egress_hosts;
        char *egress_log; /* each refusal one line; NULL: counted only */
        /* srt settings files the list was read from (policy/egress_file.c), held open so
         * that the file judged once every bind is known is the one that was read. */
        struct spec_egress_file *egress_files;
        size_t n_egress_files;

        struct spec_env_var *env; /* built from scratch, in order */
        size_t n_env;

        char *cwd;         /* working directory inside; NULL: / */
        bool cwd_optional; /* cwd is the caller's: fall back to / when it is missing inside */
        char **argv;       /* NULL-terminated */
        size_t argc;

        enum spec_seccomp seccomp;
        char *seccomp_path;

        struct spec_rlimit *rlimits; /* set in the payload just before exec */
        size_t n_rlimits;

        enum spec_tty tty;
        /* A container engine's relay: the pty's bytes reach the caller's terminal as they
         * are, without the title push and pop around a session that sets a title. */
        bool tty_plain;
        /* The payload starts with every signal at its default action, as an OCI runtime
         * starts a container's process, not with what csandbox's caller ignored (a shell's
         * `&` job ignores SIGINT and SIGQUIT, which must still reach the container). */
        bool signals_default;
        enum spec_proc proc; /* what the SPEC_MOUNT_PROC mount is */

        uint64_t memory_max; /* bytes; 0: no limit */
        unsigned cpu_milli;  /* thousandths of a CPU; 0: no limit */
        /* Limits of the sandbox's own user namespace (/proc/sys/user/<name>), written by
         * pid 1 before the payload starts. The kernel charges what the session takes to the
         * caller's count too, so a lower limit here leaves the rest of the caller's to
         * csandbox's own processes outside (the change journal's inotify watches). -1:
         * left as the kernel makes them (no limit below the caller's). */
        long userns_limits[SPEC_USERNS_LIMIT_N];

        /* What the producers decided the user should hear before the launch (a fallback,
         * something left out), one message each without a trailing newline; --plan shows
         * them and the command line prints them. */
        char **warnings;
        size_t n_warnings;
};

#define SPEC_DEFAULT_PATH     "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define SPEC_DEFAULT_HOSTNAME "csandbox"
#define SPEC_PATH_MAX         4096

/* The user-mode network's fixed addresses inside (pasta and slirp4netns alike). */
#define SPEC_NET_CIDR          "169.254.1.0/24"
#define SPEC_NET_HOST_LOOPBACK "169.254.1.2" /* the host's 127.0.0.1, when mapped */
#define SPEC_NET_DNS           "169.254.1.3" /* forwarded to the host's resolver */
/* An egress allowlist session's own (runner/egress_ns.c): its loopback's addresses, its source
 * for every destination, and the ports of csandbox's proxy and resolver there. */
#define SPEC_EGRESS_ADDR4    "169.254.1.1"
#define SPEC_EGRESS_ADDR6    "fd00:c5b::1"
#define SPEC_EGRESS_PORT     15001
#define SPEC_EGRESS_DNS_PORT 15353
#define SPEC_BROKER_DIR      "/run/csandbox" /* a tmpfs with the broker's socket */
#define SPEC_BROKER_SOCKET   SPEC_BROKER_DIR "/packages.sock"

void spec_init(struct sandbox_spec *s);
void spec_free(struct sandbox_spec *s);

/* Normalise an absolute path inside the sandbox: collapse "//" and ".", refuse ".." and
 * relative paths (what names the path is `what`, e.g. "--bind destination"). */
int spec_normalize_dest(const char *path, const char *what, char **ret, struct cs_error *err);

/* Any kind but SPEC_MOUNT_BIND, whose source enters only as an fd (spec_add_bind). */
int spec_add_mount(struct sandbox_spec *s, enum spec_mount_kind kind, unsigned flags,
                   const char *source, const char *dest, struct cs_error *err);
/* A bind of the host object *source_fd (opened once by the producer, which checked it); the spec
 * owns the fd from here on, even on failure
 * (*source_fd becomes -1). source is the path shown by --plan and in messages. */
int spec_add_bind(struct sandbox_spec *s, unsigned flags, int *source_fd, const char *source,
                  const char *dest, struct cs_error *err);
/* SPEC_ROOT_DIR on the directory *fd (opened once by the producer); the spec owns the fd
 * from here on, even on failure. path is what --plan and messages show. */
int spec_set_root_dir(struct sandbox_spec *s, int *fd, const char *path, struct cs_error *err);
/* SPEC_ROOT_DIR on the n layer dirs fds (top first; duplicated, the caller keeps its own):
 * the first is the root tree, the rest lower dirs beneath it in the overlay. paths are what
 * --plan and messages show. */
int spec_set_root_layers(struct sandbox_spec *s, const int *fds, char *const *paths, size_t n,
                         struct cs_error *err);
/* The overlay's upper and work dirs on disk (see upper_fd), duplicated: the caller keeps
 * its own. */
int spec_set_root_upper(struct sandbox_spec *s, int upper_fd, int work_fd, struct cs_error *err);
/* A read-only file at dest holding a copy of data (len bytes). */
/* A tmpfs at dest with a copy of the directory *dir_fd (O_RDONLY, taken), made by the runner
 * inside the sandbox: links as links, files with their modes, bounded by SPEC_COPY_MAX_*.
 * source names it in --plan and messages. */
int spec_add_copy(struct sandbox_spec *s, int *dir_fd, const char *source, const char *dest,
                  struct cs_error *err);
int spec_add_file(struct sandbox_spec *s, const char *dest, const char *origin, const void *data,
                  size_t len, unsigned flags, struct cs_error *err);
/* What every sandbox gets: proc at /proc, the minimal /dev, a tmpfs /tmp. */
int spec_add_base_mounts(struct sandbox_spec *s, struct cs_error *err);
/* The embedded default's view of the host's root: its system (/usr, /etc, /opt, the program
 * dirs, the parts of /var programs read) and not its data: every other top-level directory
 * (/srv, /mnt, /media, /boot...) and the rest of /var become empty tmpfs dirs, a top-level
 * file an empty one; /home, /root, /var/tmp, /run and home (may be NULL) are empty too. */
int spec_add_host_view(struct sandbox_spec *s, const char *home, struct cs_error *err);

/* /etc/hostname, /etc/hosts and /etc/resolv.conf generated for the sandbox's own network
 * (none for --net host, which shares the host's). Call once net and hostname are final. */
int spec_add_net_files(struct sandbox_spec *s, struct cs_error *err);

/* Put parents before children: a stable sort by destination depth, so command-line order
 * holds among mounts of equal depth. */
void spec_sort_mounts(struct sandbox_spec *s);

/* The payload gets limit for resource (the caller's own, where csandbox raised it for
 * itself). */
int spec_add_rlimit(struct sandbox_spec *s, int resource, const struct rlimit *limit,
                    struct cs_error *err);
int spec_env_set(struct sandbox_spec *s, const char *name, const char *value, bool secret,
                 struct cs_error *err);
void spec_env_unset(struct sandbox_spec *s, const char *name);
const char *spec_env_get(const struct sandbox_spec *s, const char *name);
/* KEY=VALUE lines; blank lines and lines starting with '#' are skipped. origin names the
 * source in errors ("--env-file x"). */
int spec_env_parse(struct sandbox_spec *s, const char *buf, size_t len, const char *origin,
                   bool secret, struct cs_error *err);
bool spec_env_name_valid(const char *name);

/* Limits as the user writes them: a whole number of MiB (at least 16), and a number of CPUs
 * from 0.01 to 1024 with up to three decimals. what names the flag or variable in errors
 * ("--memory ", "CLAUDE_PROFILE_SANDBOX_CPUS="). */
int spec_parse_memory_mib(const char *what, const char *v, uint64_t *ret_bytes,
                          struct cs_error *err);
int spec_parse_cpus(const char *what, const char *v, unsigned *ret_milli, struct cs_error *err);

int spec_set_argv(struct sandbox_spec *s, int argc, char *const *argv, struct cs_error *err);

/* Each warning a line on stderr (what every producer prints before a launch). */
void spec_print_warnings(const struct sandbox_spec *s);
/* Add a warning (see warnings); -ENOMEM with err set when it cannot be kept. */
__attribute__((format(printf, 3, 4))) int spec_warn(struct sandbox_spec *s, struct cs_error *err,
                                                    const char *fmt, ...);
/* The broker may run name as path (both copied). */
int spec_broker_allow(struct sandbox_spec *s, const char *name, const char *path,
                      struct cs_error *err);
/* The broker's host layer covers dir (copied; absolute, normalised, not /). */
int spec_layer_dir_add(struct sandbox_spec *s, const char *dir, struct cs_error *err);
/* The manager the broker runs for name (a base name), or NULL. */
const char *spec_broker_manager(const struct sandbox_spec *s, const char *name);
/* spec_free's part for the above. */
void spec_decided_free(struct sandbox_spec *s);

/* The spec as JSON (secrets redacted). Caller frees with cJSON_Delete. */
/* Whether the spec holds together, before any namespace exists: every mount has what its kind
 * needs (an open source, data, a target) at an absolute normalised dest, the root is the one
 * its kind says, a command, an absolute cwd, a hostname the kernel takes, valid variable
 * names, a seccomp file with its path, pasta's options only with pasta, known modes. The
 * error names the field. Every producer's spec passes; the runner and --plan check it. */
int spec_validate(const struct sandbox_spec *s, struct cs_error *err);
cJSON *spec_to_json(const struct sandbox_spec *s);
const char *spec_mount_kind_name(enum spec_mount_kind k);
const char *spec_net_name(enum spec_net n);
/* With SPEC_NET_PASTA, the user-mode network helper that will run: pasta, or slirp4netns
 * where pasta is not installed, found on PATH (absolute entries); NULL when neither is (or
 * for another network). The one place this is decided: --plan prints it, the runner starts
 * it. free() the result. */
char *spec_net_helper(const struct sandbox_spec *s);
const char *spec_seccomp_name(enum spec_seccomp k);
/* spec/egress.c */
const char *spec_egress_name(enum spec_egress e);
bool spec_egress_parse(const char *v, enum spec_egress *ret);
/* One host pattern (see struct spec_egress_host); `what` names the flag or setting. */
int spec_egress_add(struct sandbox_spec *s, const char *pattern, bool builtin, const char *what,
                    struct cs_error *err);
/* A comma list of patterns. */
int spec_egress_add_list(struct sandbox_spec *s, const char *list, const char *what,
                         struct cs_error *err);
/* The hosts claude itself needs, unless there already. */
int spec_egress_add_builtin(struct sandbox_spec *s, struct cs_error *err);
/* A denied host pattern, or each of a comma list (--deny-host,
 * CLAUDE_PROFILE_SANDBOX_DENY_HOSTS): a name or range that matches it is never reached,
 * whatever allows it. */
int spec_egress_deny(struct sandbox_spec *s, const char *pattern, const char *what,
                     struct cs_error *err);
int spec_egress_deny_list(struct sandbox_spec *s, const char *list, const char *what,
                          struct cs_error *err);
/* Whether a denied range holds the address. */
bool spec_egress_addr_denied(const struct sandbox_spec *s, int family, const void *addr);
/* name (lower case, no trailing dot) on port (0: any, for DNS) is allowed. */
bool spec_egress_name_allowed(const struct sandbox_spec *s, const char *name, uint16_t port);
/* Whether a denied entry matches name on port (0: DNS, then only a deny of every port). */
bool spec_egress_name_denied(const struct sandbox_spec *s, const char *name, uint16_t port);
/* Whether name on port is one of claude's own hosts (the built-in list), and not denied. */
bool spec_egress_name_builtin(const struct sandbox_spec *s, const char *name, uint16_t port);
/* addr (4 or 16 bytes) on port is inside an allowed range. */
bool spec_egress_addr_allowed(const struct sandbox_spec *s, int family, const void *addr,
                              uint16_t port);
void spec_egress_free(struct sandbox_spec *s);
/* After the producer set egress: none means no network; allowlist means the session's own
 * network (SPEC_NET_PASTA's addresses, csandbox's proxy instead of pasta) and the built-in
 * hosts. what names the setting or flag in errors. */
int spec_egress_finish(struct sandbox_spec *s, const char *what, struct cs_error *err);
const char *spec_tty_name(enum spec_tty t);
const char *spec_proc_name(enum spec_proc p);
/* The limit's file name in /proc/sys/user ("max_inotify_watches"). */
const char *spec_userns_limit_name(enum spec_userns_limit l);
/* "auto", "fresh", "bind" or "none" from --proc; false for anything else. */
bool spec_proc_parse(const char *v, enum spec_proc *ret);
/* "auto", "pty" or "inherit" from --tty; false for anything else. */
bool spec_tty_parse(const char *v, enum spec_tty *ret);
/* Whether this launch gives the sandbox a pty: the mode, and for auto whether one of our
 * stdin, stdout, stderr is a terminal right now. */
bool spec_tty_wants_pty(const struct sandbox_spec *s);
