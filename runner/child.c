/* The sandbox's first process, in its new namespaces: every step of the set-up (the
 * network, the hostname, the root, the session's terminal, the package broker) happens
 * here, before it becomes the sandbox's pid 1 (init_run), which then only starts the
 * payload, reaps and forwards signals. */
#include "internal.h"

#include "../common/error.h"
#include "egress.h"

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

/* The limits of the sandbox's own user namespace (the spec's userns_limits). The kernel
 * resolves /proc/sys/user to the writer's user namespace's table and lets a holder of
 * CAP_SYS_RESOURCE in that namespace write it: pid 1, before it drops its capabilities.
 * The session's counts go to the caller's too, so this only ever lowers what it gets. */
static void userns_limits_set(const struct sandbox_spec *s)
{
        const char *failed = NULL;
        int e = 0;

        for (size_t i = 0; i < SPEC_USERNS_LIMIT_N; i++) {
                const char *name = spec_userns_limit_name((enum spec_userns_limit)i);
                char path[64], v[32];
                int fd, len;

                if (s->userns_limits[i] < 0)
                        continue;
                snprintf(path, sizeof(path), "/proc/sys/user/%s", name);
                len = snprintf(v, sizeof(v), "%ld\n", s->userns_limits[i]);
                fd = open(path, O_WRONLY | O_CLOEXEC);
                if (fd < 0 || write(fd, v, (size_t)len) != len) {
                        failed = failed ? failed : name;
                        e = e ? e : errno;
                }
                if (fd >= 0)
                        close(fd);
        }
        /* Inside a container engine /proc/sys is read-only: that is said once already (the
         * bound /proc's note), and a journal out of watches says what to raise when it
         * pauses the session; a launch on claude's terminal says nothing more. */
        if (failed && e != EROFS && runner_note_first("userns-limits"))
                fprintf(stderr,
                        "csandbox: note (shown once on this machine): the session's user "
                        "namespace keeps the kernel's limits (/proc/sys/user/%s: %s; a "
                        "container engine mounts /proc/sys read-only), so a session may use "
                        "up your inotify watches; csandbox then pauses it until its change "
                        "journal can watch every directory again\n",
                        failed, strerror(e));
}

void runner_child_main(const struct sandbox_spec *s, const struct net_helper *net,
                       const struct sock_fprog *filter, const struct tty_link *tty, int syncfd,
                       int errfd, int egress_fd, int tapfd)
{
        struct cs_error err = {0};
        /* The helper configures the network and says so (netready), or pid 1 configures
         * pasta's tap itself: made here before pasta starts (handoff), or as soon as pasta
         * has made it (tap_watch). */
        bool early =
            s->net == SPEC_NET_PASTA && s->egress != SPEC_EGRESS_ALLOWLIST && net->tap.early;
        bool netready =
            s->net == SPEC_NET_PASTA && s->egress != SPEC_EGRESS_ALLOWLIST && !net->tap.early;
        bool handoff = early && netconf_tap_handoff(&net->tap);
        int tap_watch = -1, slave = -1, r;
        char go;

        /* csandbox dying, even by SIGKILL, takes pid 1 and so the whole pid namespace. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) {
                cs_error_set(&err, errno, "set the sandbox's parent-death signal");
                runner_child_fail(errfd, &err);
        }
        /* pasta's tap, before pasta exists (csandbox starts it on our word): the payload
         * then need not wait for it. When pasta runs already (`run`'s early network), the
         * tap is there or pasta makes it. Any failure: pasta makes it, as before. */
        if (handoff && tapfd >= 0) {
                r = netconf_tap_make(&net->tap);
                if (r < 0)
                        handoff = false;
        }
        if (handoff && !if_nametoindex(net->tap.ifname))
                handoff = false;
        if (tapfd >= 0) {
                if (write(tapfd, handoff ? "h" : "w", 1) != 1)
                        _exit(CS_EXIT_SETUP);
                close(tapfd);
        }
        /* EOF here means the parent died or gave up before writing our id maps: there is
         * nobody to tell. */
        if (read(syncfd, &go, 1) != 1)
                _exit(CS_EXIT_SETUP);
        if (!netready) {
                close(syncfd);
                syncfd = -1;
        }

        userns_limits_set(s);
        if (s->net != SPEC_NET_HOST && netns_setup(s, net, &err) < 0)
                runner_child_fail(errfd, &err);
        if (egress_fd >= 0 && egress_ns_setup(egress_fd, &err) < 0) {
                static const char allowlist[] = "egress allowlist: ";

                /* the relay's set-up is the allowlist's: say whose it was */
                if (s->net == SPEC_NET_RELAY &&
                    strncmp(err.msg, allowlist, sizeof(allowlist) - 1) == 0) {
                        struct cs_error relay = {.err = err.err, .status = err.status};

                        snprintf(relay.msg, sizeof(relay.msg),
                                 "the session's network (csandbox's relay): %.1900s",
                                 err.msg + sizeof(allowlist) - 1);
                        err = relay;
                }
                runner_child_fail(errfd, &err);
        }
        if (early && !handoff) {
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
        /* A session of its own, and with a pty the sandbox's own, made its terminal. */
        if (tty_child_session(tty, &slave, &err) < 0)
                runner_child_fail(errfd, &err);
        /* pasta's tap is configured now (made by pasta when it had to, and then waited
         * for), while pasta may still be starting; any other user-mode network was
         * configured while we mounted, and the payload starts only once it is there.
         * EOF: the helper failed and csandbox reports why. */
        if (early) {
                if (netconf_tap_up(&net->tap, tap_watch, &err) < 0)
                        runner_child_fail(errfd, &err);
                if (tap_watch >= 0)
                        close(tap_watch);
        } else if (syncfd >= 0) {
                if (read(syncfd, &go, 1) != 1)
                        _exit(CS_EXIT_SETUP);
                close(syncfd);
        }
        broker_start(s, filter);
        init_run(s, filter, tty, slave, errfd);
}
