/* Clone into the namespaces, write the id maps, release the child, supervise. */
#include "internal.h"

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
                                runner_child_main(s, net, filter, tty, syncp[0], errp[1], -1, -1);
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

        runner_notes_begin();
        r = launch_body(s, filter, early, ret_status, err);
        runner_notes_end();
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
        int syncp[2] = {-1, -1}, errp[2] = {-1, -1}, tapp[2] = {-1, -1}, nsfds[2] = {-1, -1};
        char said = 0; /* pid 1 on pasta's tap: 'h' made, 'w' waits for pasta's own */
        _cleanup_close_ int sfd = -1;
        __attribute__((cleanup(egress_proxy_stop))) struct egress_proxy proxy = {.pid = -1};
        __attribute__((cleanup(net_watch_stop))) struct net_watch watch = {.pid = -1};
        /* csandbox's proxy and resolver: the allowlist's, or the relay's open network */
        bool egress = s->egress == SPEC_EGRESS_ALLOWLIST || s->net == SPEC_NET_RELAY;
        int egp[2] = {-1, -1};
        sigset_t mask, oldmask;
        unsigned long flags;
        int wstatus = 0, r;
        pid_t pid;

        r = spec_validate(s, err);
        if (r >= 0)
                r = idmap_check_range(s, "--map-range", err);
        if (r < 0)
                return r;
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
        /* pid 1 makes pasta's tap before pasta starts, and says when it has (tapp). */
        if (!use_early && s->net == SPEC_NET_PASTA && !egress && net.kind == NET_HELPER_PASTA &&
            net.tap.early && netconf_tap_handoff(&net.tap) && pipe2(tapp, O_CLOEXEC) < 0) {
                r = errno;
                close(syncp[0]), close(syncp[1]), close(errp[0]), close(errp[1]);
                return cs_error_set(err, r, "pipe");
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
                if (tapp[0] >= 0)
                        close(tapp[0]), close(tapp[1]);
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
                if (tapp[0] >= 0)
                        close(tapp[0]);
                runner_child_main(s, &net, filter, &tty, syncp[0], errp[1], egp[1], tapp[1]);
                _exit(CS_EXIT_SETUP);
        }
        close(syncp[0]);
        close(errp[1]);
        if (egp[1] >= 0)
                close(egp[1]);
        close(tty.ctl[1]);
        tty.ctl[1] = -1;

        /* Without the handoff (tapp), pasta starts first: its start-up (to its tap, about
         * 8 ms, which pid 1 waits for) then overlaps the id maps; it needs none, as it enters
         * the namespaces as their owner. With it, pid 1 makes pasta's tap while we write
         * the maps and says whether it did ('h'; 'w': it waits for pasta's own); pasta
         * starts after that, attaches to the tap instead of making one, and cannot find it
         * busy. It then shares the machine with pid 1's mounts only, not with newuidmap and
         * newgidmap. slirp4netns after the maps, as it always started. */
        r = 0;
        if (tapp[0] < 0 && s->net == SPEC_NET_PASTA && !egress && net.kind == NET_HELPER_PASTA &&
            !use_early)
                r = netns_helper_start(s, pid, NULL, &net, err);
        /* the maps belong to the user namespace, the holder's when pid 1 joined it */
        if (r >= 0)
                r = idmap_write(use_early ? early->holder : pid, s, err);
        if (r >= 0 && s->net == SPEC_NET_PASTA && net.kind == NET_HELPER_SLIRP4NETNS)
                r = netns_helper_start(s, pid, NULL, &net, err);
        if (tapp[0] >= 0) {
                ssize_t n;

                close(tapp[1]);
                do
                        n = read(tapp[0], &said, 1);
                while (n < 0 && errno == EINTR);
                close(tapp[0]);
                /* EOF: pid 1 failed already; its own message says why. Else by fd, while
                 * pid 1 waits for us and can still be opened by its pid. */
                if (r >= 0 && n != 1)
                        r = cs_error_setx(err, EIO, "the sandbox's first process failed");
                if (r >= 0)
                        r = netns_helper_nsopen(s, pid, &net, nsfds, err);
        }
        /* The host's addresses followed by the session's unreachable rules; pid 1 can still
         * be opened by its pid. */
        if (r >= 0 && s->net == SPEC_NET_PASTA && !egress)
                r = net_watch_start(s, pid, &watch, err);
        /* Release the child: it assembles the root while the network helper starts. */
        if (r >= 0 && write(syncp[1], "g", 1) != 1)
                r = cs_error_set(err, errno, "release the sandbox");
        if (r >= 0 && nsfds[0] >= 0)
                r = netns_helper_start(s, pid, nsfds, &net, err);
        for (int i = 0; i < 2; i++)
                if (nsfds[i] >= 0)
                        close(nsfds[i]);
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
                runner_child_message(errp[0], err);
                close(errp[0]);
                if (err->err == EPERM)
                        diagnose_userns(err);
                return r;
        }

        /* With pid 1 configuring pasta's tap, pasta may still fail after the payload
         * started: then the session ends with pasta's reason, as if it had never started. */
        r = runner_supervise(&tty, pid, sfd,
                             s->net == SPEC_NET_PASTA && net.tap.early ? net.ready_fd : -1,
                             &wstatus, err);
        /* pasta gave up: when pid 1 failed first (its namespaces went with it, and so
         * pasta's target), the child's own error is the cause to report. */
        if (r == 1) {
                r = -1;
                if (!runner_child_message(errp[0], err))
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
        net_watch_stop(&watch);
        /* doctor's throwaway sessions (quiet) have no refusals worth a line */
        proxy.report = !runner_notes_all_quiet();
        egress_proxy_stop(&proxy);
        sigprocmask(SIG_SETMASK, &oldmask, NULL);
        if (runner_child_message(errp[0], err)) {
                close(errp[0]);
                return -1;
        }
        close(errp[0]);
        *ret_status = exit_status_of(wstatus);
        return 0;
}
