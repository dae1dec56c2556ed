/* csandbox's own `podman` and `docker`: `csandbox podman ARGS`, `csandbox docker ARGS`, or
 * csandbox started under the name podman or docker. Containers are sandboxes of
 * `csandbox exec --image`: run's options become exec's flags, parsed by parse_exec and
 * launched as exec launches. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

struct cs_error;

/* argv[0] is the name it was called by (podman or docker), argv[1] the subcommand; the
 * exit status, as podman's (125 for csandbox's own errors). */
int podman_main(int argc, char **argv);

/* pull, build, images, rmi, inspect, tag (cli/podman_images.c): prog is "podman" or
 * "docker", argv[0] the subcommand; returns the exit status. */
int podman_images_main(const char *prog, int argc, char **argv);

#define PODMAN_PUBLISH_MAX 16

enum podman_pull { PODMAN_PULL_MISSING, PODMAN_PULL_NEVER, PODMAN_PULL_ALWAYS };

/* `run`'s options, parsed as podman parses them. */
struct podman_run {
        char **exec_args; /* `csandbox exec` flags for what maps onto them (no --image) */
        size_t n_exec_args;
        char *image;
        char **cmd; /* COMMAND [ARG...] after the image; may be empty */
        size_t n_cmd;
        char **entrypoint; /* --entrypoint as a word list (a JSON array or one string) */
        size_t n_entrypoint;
        bool has_entrypoint;
        char *user; /* -u as given; NULL: the image's User */
        char *name;
        char *workdir;
        char *hostname;
        char *net; /* csandbox exec's --net value */
        bool interactive, tty, rm, detach, quiet, help, read_only, home_set;
        /* accepted to be ignored, each with a note: --label, the first --add-host */
        bool labels, memory;
        char *add_host;
        struct podman_port {
                unsigned short host, ctr;
                char ip[46]; /* the host address to listen on; "": every one */
        } publish[PODMAN_PUBLISH_MAX];
        size_t n_publish;
        enum podman_pull pull;
};

/* argv: what follows `run`. Fills r (podman_run_free it); -EINVAL with a message naming the
 * option for anything not supported. getenv answers `-e NAME`. */
int podman_run_parse(int argc, char **argv, struct podman_run *r, struct cs_error *err);
void podman_run_free(struct podman_run *r);

/* -p (cli/podman_publish.c): fds[i] a listening socket on each HOST port that differs
 * from its CONTAINER port, else -1 (taken before the container starts: a port in use is an
 * error then); start forks the relay, a child of the caller (the supervisor) that dies with
 * it, and closes the fds. */
int podman_publish_listen(const struct podman_run *r, int *fds, struct cs_error *err);
int podman_publish_start(const struct podman_run *r, int *fds);

/* Named volumes (cli/podman_volume.c): directories under
 * ${XDG_DATA_HOME:-~/.local/share}/csandbox/volumes/NAME/_data. *ret (free it) is the
 * volume's directory; create: make it when missing (as run does), else -ENOENT naming it. */
int podman_volume_path(const char *name, bool create, char **ret, struct cs_error *err);
/* `volume create|ls|rm|inspect|exists|prune`: argv[0] is "volume". */
int podman_volume_main(const char *prog, int argc, char **argv);
/* `exec [-i] [-t] [-u USER] [-w DIR] [-e K=V] CONTAINER CMD...` (cli/podman_exec.c) */
int podman_exec(const char *prog, int argc, char **argv);
/* `info` and `version [--format]` */
int podman_info(const char *prog, int argc, char **argv);
int podman_version(const char *prog, int argc, char **argv);
/* `--version`: "podman version X.Y.Z+csandbox" */
void podman_print_short_version(const char *prog);

/* The containers of `run -d` (cli/podman_state.c): ps, logs, stop, rm, kill, wait. prog is
 * the name podman was called by, argv[0] the subcommand. */
int podman_ps(const char *prog, int argc, char **argv);
int podman_logs(const char *prog, int argc, char **argv);
int podman_stop(const char *prog, int argc, char **argv);
int podman_rm(const char *prog, int argc, char **argv);
int podman_kill(const char *prog, int argc, char **argv);
int podman_wait(const char *prog, int argc, char **argv);

/* A detached container's record, before its supervisor starts. */
struct podman_ctr {
        char id[65];
        char *name;
        char *image;
        char *command;
        long long created;  /* unix seconds */
        long long finished; /* 0 while it runs */
        long long pid;      /* the supervisor (csandbox), 0 before it started */
        unsigned long long starttime;
        int exit_code; /* -1 while it runs */
        bool rm;
};

/* The state directory ($XDG_RUNTIME_DIR/csandbox/containers, else
 * /tmp/csandbox-containers-UID), created 0700 and checked to be ours; an O_DIRECTORY fd. */
int podman_state_open(int *ret_fd, struct cs_error *err);
/* Reserve c->name (unique, else -EEXIST naming it) and c->id (64 hex digits, made here when
 * c->id holds none), and write the record; under the state dir's lock. */
int podman_ctr_create(int rootfd, struct podman_ctr *c, struct cs_error *err);
/* Rewrite the record, atomically. */
int podman_ctr_save(int rootfd, const struct podman_ctr *c, struct cs_error *err);
/* The log file of the container, opened for appending. */
int podman_ctr_log_open(int rootfd, const char *id, struct cs_error *err);
/* Remove the record and log of id. */
int podman_ctr_remove(int rootfd, const char *id, struct cs_error *err);
/* Whether a name is taken by a recorded container (-EEXIST naming it). */
int podman_name_check(int rootfd, const char *name, struct cs_error *err);
void podman_ctr_free(struct podman_ctr *c);
/* The container a name, a full ID or a unique ID prefix names (podman_ctr_free it). */
int podman_ctr_lookup(int rootfd, const char *ref, struct podman_ctr *ret, struct cs_error *err);
/* Whether its supervisor still runs (the same process: pid and start time). */
bool podman_ctr_running(const struct podman_ctr *c);
/* /proc/PID/stat's start time, 0 when pid is gone. */
unsigned long long podman_proc_starttime(long long pid);
