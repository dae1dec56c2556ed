/* Clone into the namespaces, write the id maps, release the child, supervise. */
#include "runner.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"
#include "egress.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* The notes (runner.h): `shared` is a page the launch's child writes its adaptations into
 * (MAP_SHARED, made before clone), `quiet` what the child leaves unsaid. */
static struct {
        bool all_quiet;   /* doctor: the caller prints them */
        unsigned quiet;   /* this launch: bits not to print */
        unsigned seen;    /* OR of every launch's */
        unsigned *shared; /* the child's record of this launch */
} notes;

static const struct {
        unsigned bit;
        const char *marker; /* NULL: never printed at a launch */
        const char *text;
} note_texts[] = {
    {RUNNER_NOTE_HOSTNAME, NULL, NULL},
    {RUNNER_NOTE_PROC_BIND, "proc-bind",
     "csandbox: note (shown once on this machine): the kernel refused the sandbox a fresh "
     "/proc (the container masks parts of its /proc), so csandbox binds the container's /proc "
     "read-only and sessions see its processes; start the container with --security-opt "
     "unmask=ALL (podman) or --security-opt systempaths=unconfined (Docker) for a /proc of "
     "the sandbox's own (`exec --proc=none` gives an empty one instead)"},
};

void runner_notes_quiet(void)
{
        notes.all_quiet = true;
}

unsigned runner_notes_seen(void)
{
        return notes.seen;
}

void runner_note(unsigned bit)
{
        if (notes.shared)
                __atomic_or_fetch(notes.shared, bit, __ATOMIC_RELAXED);
        if (notes.all_quiet || (notes.quiet & bit))
                return;
        for (size_t i = 0; i < sizeof(note_texts) / sizeof(note_texts[0]); i++)
                if (note_texts[i].bit == bit && note_texts[i].text)
                        fprintf(stderr, "%s\n", note_texts[i].text);
}

/* ${XDG_STATE_HOME:-$HOME/.local/state}/csandbox/notes/<name>, or NULL. */
static char *note_marker(const char *name)
{
        const char *state = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
        char *path = NULL;
        int r;

        if (state && state[0] == '/')
                r = asprintf(&path, "%s/csandbox/notes/%s", state, name);
        else if (home && home[0] == '/')
                r = asprintf(&path, "%s/.local/state/csandbox/notes/%s", home, name);
        else
                return NULL;
        return r < 0 ? NULL : path;
}

/* Before clone: which notes were shown on this machine already. */
static void notes_begin(void)
{
        notes.quiet = RUNNER_NOTE_HOSTNAME;
        for (size_t i = 0; i < sizeof(note_texts) / sizeof(note_texts[0]); i++) {
                _cleanup_free_ char *m =
                    note_texts[i].marker ? note_marker(note_texts[i].marker) : NULL;

                if (m && access(m, F_OK) == 0)
                        notes.quiet |= note_texts[i].bit;
        }
        if (!notes.shared) {
                void *page = mmap(NULL, sizeof(unsigned), PROT_READ | PROT_WRITE,
                                  MAP_SHARED | MAP_ANONYMOUS, -1, 0);

                notes.shared = page == MAP_FAILED ? NULL : page;
        }
        if (notes.shared)
                *notes.shared = 0;
}

/* The marker of a note shown, made in the user's own state dir (the marker itself never
 * through a link). */
static void note_mark(const char *name)
{
        /* Dropped: without the marker the note shows again next time. */
        struct cs_error ignored;
        _cleanup_free_ char *m = note_marker(name);
        _cleanup_close_ int fd = -1;
        char *slash;

        if (!m)
                return;
        slash = strrchr(m, '/');
        *slash = '\0';
        if (cs_mkdir_parents(m, 0700, &ignored) < 0)
                return;
        *slash = '/';
        fd = open(m, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
}

bool runner_note_first(const char *name)
{
        _cleanup_free_ char *m = note_marker(name);

        if (m && access(m, F_OK) == 0)
                return false;
        note_mark(name);
        return true;
}

/* After the launch: what it adapted to, and a marker for each note it printed. */
static void notes_end(void)
{
        unsigned got = notes.shared ? __atomic_load_n(notes.shared, __ATOMIC_RELAXED) : 0;

        notes.seen |= got;
        if (notes.all_quiet)
                return;
        for (size_t i = 0; i < sizeof(note_texts) / sizeof(note_texts[0]); i++)
                if ((got & note_texts[i].bit) && !(notes.quiet & note_texts[i].bit) &&
                    note_texts[i].marker)
                        note_mark(note_texts[i].marker);
}

/* A child-side failure travels to the parent as one status byte and the message. */
void runner_child_fail(int errfd, const struct cs_error *err)
{
        unsigned char status = (unsigned char)(err->status ? err->status : CS_EXIT_SETUP);
        char buf[1 + CS_ERROR_MAX];
        size_t len = strlen(err->msg);

        buf[0] = (char)status;
        memcpy(buf + 1, err->msg, len);
        if (errfd >= 0)
                (void)!write(errfd, buf, len + 1);
        _exit(status);
}

/* SPEC_EGRESS_ALLOWLIST: pid 1's end of the socket that hands csandbox the proxy's
 * sockets (runner/egress_ns.c); -1 otherwise. */
static int egress_child_fd = -1;

static void child_main(const struct sandbox_spec *s, const struct net_helper *net,
                       const struct sock_fprog *filter, const struct tty_link *tty, int syncfd,
                       int errfd)
{
        struct cs_error err = {0};
        /* The helper configures the network and says so (netready), or pid 1 configures
         * pasta's tap itself as soon as it appears (tap_watch). */
        bool netready =
            s->net == SPEC_NET_PASTA && s->egress != SPEC_EGRESS_ALLOWLIST && !net->tap.early;
        int tap_watch = -1;
        char go;

        /* csandbox dying, even by SIGKILL, takes pid 1 and so the whole pid namespace. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) {
                cs_error_set(&err, errno, "set the sandbox's parent-death signal");
                runner_child_fail(errfd, &err);
        }
        /* EOF here means the parent died or gave up before writing our id maps: there is
         * nobody to tell. */
        if (read(syncfd, &go, 1) != 1)
                _exit(CS_EXIT_SETUP);
        if (!netready) {
                close(syncfd);
                syncfd = -1;
        }

        if (s->net != SPEC_NET_HOST && netns_setup(s, net, &err) < 0)
                runner_child_fail(errfd, &err);
        if (egress_child_fd >= 0 && egress_ns_setup(egress_child_fd, &err) < 0)
                runner_child_fail(errfd, &err);
        if (s->net == SPEC_NET_PASTA && net->tap.early) {
                tap_watch = netconf_tap_watch(&err);
                if (tap_watch < 0)
                        runner_child_fail(errfd, &err);
        }
        /* Container engines' seccomp profiles allow sethostname only with CAP_SYS_ADMIN in
         * the outer namespace; the name is cosmetic, so keep the one we have. */
        if (sethostname(s->hostname ? s->hostname : SPEC_DEFAULT_HOSTNAME,
                        strlen(s->hostname ? s->hostname : SPEC_DEFAULT_HOSTNAME)) < 0)
                runner_note(RUNNER_NOTE_HOSTNAME);
        if (mounts_setup(s, &err) < 0) {
                if (err.err == EPERM)
                        diagnose_setup(&err);
                runner_child_fail(errfd, &err);
        }
        init_run(s, filter, tty, errfd, net, syncfd, tap_watch);
}

/* The message a failed child left, if any; sets err and its status. */
static bool child_message(int errfd, struct cs_error *err)
{
        char buf[1 + CS_ERROR_MAX];
        ssize_t n;

        do
                n = read(errfd, buf, sizeof(buf) - 1);
        while (n < 0 && errno == EINTR);
        if (n <= 1)
                return false;
        buf[n] = '\0';
        snprintf(err->msg, sizeof(err->msg), "%s", buf + 1);
        err->status = (unsigned char)buf[0];
        err->err = 0;
        return true;
}

static int exit_status_of(int wstatus)
{
        if (WIFEXITED(wstatus))
                return WEXITSTATUS(wstatus);
        if (WIFSIGNALED(wstatus))
                return 128 + WTERMSIG(wstatus);
        return CS_EXIT_SETUP;
}

bool raise_nofile_limit(struct rlimit *ret_orig)
{
        struct rlimit rl;

        /* One fd per bind source is open from planning until the root is assembled. */
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= rl.rlim_max || rl.rlim_cur >= 8192)
                return false;
        *ret_orig = rl;
        rl.rlim_cur = rl.rlim_max < 8192 ? rl.rlim_max : 8192;
        return setrlimit(RLIMIT_NOFILE, &rl) == 0;
}

/* The sandbox's first process inside early's user and network namespaces: an intermediate
 * child joins them (setns), makes the rest (flags) and clones pid 1 as csandbox's own child
 * (CLONE_PARENT), then exits. pid 1's pid, or -errno when the intermediate could not (the
 * caller then makes namespaces of its own). */
static pid_t clone_into_early(const struct net_early *early, unsigned long flags,
                              const struct sandbox_spec *s, const struct net_helper *net,
                              const struct sock_fprog *filter, const struct tty_link *tty,
                              int syncp[2], int errp[2])
{
        int pp[2];
        struct {
                pid_t pid;
                int err;
        } got = {-1, EIO};
        pid_t mid;

        if (pipe2(pp, O_CLOEXEC) < 0)
                return -errno;
        mid = (pid_t)syscall(SYS_clone, SIGCHLD, NULL, NULL, NULL, NULL);
        if (mid < 0) {
                int e = errno;
                close(pp[0]), close(pp[1]);
                return -e;
        }
        if (mid == 0) {
                close(pp[0]);
                got.pid = -1;
                if (setns(early->user_fd, CLONE_NEWUSER) < 0 ||
                    setns(early->net_fd, CLONE_NEWNET) < 0 || unshare((int)flags) < 0) {
                        got.err = errno;
                } else {
                        got.pid = (pid_t)syscall(SYS_clone, CLONE_PARENT | SIGCHLD, NULL, NULL,
                                                 NULL, NULL);
                        got.err = errno;
                        if (got.pid == 0) {
                                close(pp[1]);
                                close(syncp[1]);
                                close(errp[0]);
                                close(tty->ctl[0]);
                                child_main(s, net, filter, tty, syncp[0], errp[1]);
                                _exit(CS_EXIT_SETUP);
                        }
                }
                (void)!write(pp[1], &got, sizeof(got));
                _exit(0);
        }
        close(pp[1]);
        if (read(pp[0], &got, sizeof(got)) != (ssize_t)sizeof(got))
                got.pid = -1, got.err = EIO;
        close(pp[0]);
        while (waitpid(mid, NULL, 0) < 0 && errno == EINTR)
                ;
        return got.pid > 0 ? got.pid : -got.err;
}

int launch_run(const struct sandbox_spec *s, const struct sock_fprog *filter, int *ret_status,
               struct cs_error *err)
{
        return launch_run_early(s, filter, NULL, ret_status, err);
}

static int launch_body(const struct sandbox_spec *s, const struct sock_fprog *filter,
                       struct net_early *early, int *ret_status, struct cs_error *err);

int launch_run_early(const struct sandbox_spec *s, const struct sock_fprog *filter,
                     struct net_early *early, int *ret_status, struct cs_error *err)
{
        int r;

        notes_begin();
        r = launch_body(s, filter, early, ret_status, err);
        notes_end();
        return r;
}

static int launch_body(const struct sandbox_spec *s, const struct sock_fprog *filter,
                       struct net_early *early, int *ret_status, struct cs_error *err)
{
        static const int forwarded[] = RUNNER_FORWARDED_SIGNALS;
        __attribute__((cleanup(net_early_stop))) struct net_early none_early = {
            .holder = -1,
            .user_fd = -1,
            .net_fd = -1,
            .hold_fd = -1,
            .net = {.pid = -1, .ready_fd = -1, .err_fd = -1, .exit_fd = -1}};
        bool use_early;
        __attribute__((cleanup(netns_helper_stop))) struct net_helper net = {
            .pid = -1, .ready_fd = -1, .err_fd = -1, .exit_fd = -1};
        __attribute__((cleanup(tty_link_close))) struct tty_link tty = {.ctl = {-1, -1}};
        struct sandbox_spec ranged;
        int syncp[2] = {-1, -1}, errp[2] = {-1, -1};
        _cleanup_close_ int sfd = -1;
        __attribute__((cleanup(egress_proxy_stop))) struct egress_proxy proxy = {.pid = -1};
        bool egress = s->egress == SPEC_EGRESS_ALLOWLIST;
        int egp[2] = {-1, -1};
        sigset_t mask, oldmask;
        unsigned long flags;
        int wstatus = 0, r;
        pid_t pid;

        r = spec_validate(s, err);
        if (r >= 0)
                r = idmap_check_range(s, err);
        if (r < 0)
                return r;
        if (s->package_broker && !s->map_range) {
                /* The broker needs uid 0 mapped, which only the subordinate range gives. */
                struct cs_error why = {0};

                ranged = *s;
                ranged.map_range = true;
                if (idmap_check_range(&ranged, &why) < 0) {
                        fprintf(stderr,
                                "csandbox: sudo cannot install packages in this session: it "
                                "needs the subordinate id range that --map-range maps, and %s\n",
                                why.msg);
                        ranged.map_range = false;
                        ranged.package_broker = false;
                }
                s = &ranged;
        }
        if (!early)
                early = &none_early;
        use_early = early->started && s->net == SPEC_NET_PASTA && !egress &&
                    s->map_host_loopback == early->map_host_loopback;
        if (!use_early)
                net_early_stop(early);
        if (use_early) {
                /* pasta is ours now; the holder stays early's until the end */
                net = early->net;
                early->started = false;
        } else if (s->net == SPEC_NET_PASTA && !egress) {
                r = netns_helper_find(s, &net, err);
                if (r < 0)
                        return r;
                if (net.kind == NET_HELPER_SLIRP4NETNS)
                        fprintf(stderr,
                                "csandbox: pasta is not installed; using %s for the "
                                "sandbox's network\n",
                                net.path);
        }
        r = tty_prepare(s, &tty, err);
        if (r < 0)
                return r;
        cgroup_apply_limits(s);

        sigemptyset(&mask);
        for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
                sigaddset(&mask, forwarded[i]);
        sigaddset(&mask, SIGCHLD);
        /* Read when `fg` continues us after the session stopped (tty.c). */
        sigaddset(&mask, SIGCONT);
        if (sigprocmask(SIG_BLOCK, &mask, &oldmask) < 0)
                return cs_error_set(err, errno, "block signals");
        {
                /* A write to the child's pipe after it failed must be an error, not death;
                 * every process we start clears its mask. */
                sigset_t pipe_only;

                sigemptyset(&pipe_only);
                sigaddset(&pipe_only, SIGPIPE);
                sigprocmask(SIG_BLOCK, &pipe_only, NULL);
        }
        sfd = signalfd(-1, &mask, SFD_CLOEXEC);
        if (sfd < 0)
                return cs_error_set(err, errno, "signalfd");
        if (pipe2(syncp, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0)
                return cs_error_set(err, errno, "pipe");
        if (egress && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, egp) < 0)
                return cs_error_set(err, errno, "egress allowlist: socketpair");
        egress_child_fd = egp[1];
        /* Read once the sandbox is gone; never wait on a writer that leaked the pipe. */
        fcntl(errp[0], F_SETFL, O_NONBLOCK);

        flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP;
        fflush(NULL);
        pid = -1;
        if (use_early) {
                pid = clone_into_early(early, flags, s, &net, filter, &tty, syncp, errp);
                if (pid < 0) {
                        /* Those namespaces cannot be joined here (a seccomp profile that
                         * refuses setns): the usual way, with a pasta of its own. */
                        netns_helper_stop(&net);
                        net_early_stop(early);
                        use_early = false;
                        r = netns_helper_find(s, &net, err);
                        if (r < 0) {
                                close(syncp[0]), close(syncp[1]), close(errp[0]), close(errp[1]);
                                return r;
                        }
                }
        }
        if (!use_early) {
                flags |= CLONE_NEWUSER;
                if (s->net != SPEC_NET_HOST)
                        flags |= CLONE_NEWNET;
                pid = (pid_t)syscall(SYS_clone, flags | SIGCHLD, NULL, NULL, NULL, NULL);
        }
        if (pid < 0) {
                r = errno;
                close(syncp[0]), close(syncp[1]), close(errp[0]), close(errp[1]);
                cs_error_set(err, r, "cannot create the sandbox's namespaces");
                diagnose_userns(err);
                return -r;
        }
        if (pid == 0) {
                close(syncp[1]);
                close(errp[0]);
                close(tty.ctl[0]);
                if (egp[0] >= 0)
                        close(egp[0]);
                child_main(s, &net, filter, &tty, syncp[0], errp[1]);
                _exit(CS_EXIT_SETUP);
        }
        close(syncp[0]);
        close(errp[1]);
        if (egp[1] >= 0)
                close(egp[1]);
        egress_child_fd = -1;
        close(tty.ctl[1]);
        tty.ctl[1] = -1;

        /* pasta first: its start-up (to its tap, about 8 ms) then overlaps the id maps
         * (newuidmap and newgidmap take milliseconds); it needs none, as it enters the
         * namespaces as their owner. slirp4netns after them, as it always started. */
        r = 0;
        if (s->net == SPEC_NET_PASTA && !egress && net.kind == NET_HELPER_PASTA && !use_early)
                r = netns_helper_start(s, pid, &net, err);
        /* the maps belong to the user namespace, the holder's when pid 1 joined it */
        if (r >= 0)
                r = idmap_write(use_early ? early->holder : pid, s, err);
        if (r >= 0 && s->net == SPEC_NET_PASTA && net.kind == NET_HELPER_SLIRP4NETNS)
                r = netns_helper_start(s, pid, &net, err);
        /* Release the child: it assembles the root while the network helper starts. */
        if (r >= 0 && write(syncp[1], "g", 1) != 1)
                r = cs_error_set(err, errno, "release the sandbox");
        /* The child makes the proxy's sockets first thing; the proxy runs before the
         * payload can connect anywhere. */
        if (r >= 0 && egress)
                r = egress_proxy_start(s, egp[0], &proxy, err);
        if (egp[0] >= 0)
                close(egp[0]);
        if (r >= 0 && s->net == SPEC_NET_PASTA && !egress && !net.tap.early) {
                r = netns_helper_wait_ready(&net, NET_HELPER_TIMEOUT_MS, err);
                if (r >= 0 && write(syncp[1], "n", 1) != 1)
                        r = cs_error_set(err, errno, "release the sandbox");
        }
        close(syncp[1]);
        if (r < 0) {
                kill(pid, SIGKILL);
                waitpid(pid, NULL, 0);
                netns_helper_stop(&net);
                /* A set-up error of the child's own explains more than ours. */
                child_message(errp[0], err);
                close(errp[0]);
                if (err->err == EPERM)
                        diagnose_userns(err);
                return r;
        }

        /* With pid 1 configuring pasta's tap, pasta may still fail after the payload
         * started: then the session ends with pasta's reason, as if it had never started. */
        r = tty_supervise(&tty, pid, sfd,
                          s->net == SPEC_NET_PASTA && net.tap.early ? net.ready_fd : -1, &wstatus,
                          err);
        /* pasta gave up: when pid 1 failed first (its namespaces went with it, and so
         * pasta's target), the child's own error is the cause to report. */
        if (r == 1) {
                r = -1;
                if (!child_message(errp[0], err))
                        r = netns_helper_wait_ready(&net, 0, err);
                else if (err->err == EPERM)
                        diagnose_userns(err);
        }
        if (r < 0) {
                netns_helper_stop(&net);
                close(errp[0]);
                return r;
        }
        netns_helper_stop(&net);
        /* doctor's throwaway sessions (quiet) have no refusals worth a line */
        proxy.report = !notes.all_quiet;
        egress_proxy_stop(&proxy);
        sigprocmask(SIG_SETMASK, &oldmask, NULL);
        if (child_message(errp[0], err)) {
                close(errp[0]);
                return -1;
        }
        close(errp[0]);
        *ret_status = exit_status_of(wstatus);
        return 0;
}
