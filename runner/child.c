/* The sandbox's first process, in its new namespaces: every step of the set-up (the
 * network, the hostname, the root, the session's terminal, the package broker) happens
 * here, before it becomes the sandbox's pid 1 (init_run), which then only starts the
 * payload, reaps and forwards signals. */
#include "internal.h"

#include "../common/error.h"
#include "egress.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

void runner_child_main(const struct sandbox_spec *s, const struct net_helper *net,
                       const struct sock_fprog *filter, const struct tty_link *tty, int syncfd,
                       int errfd, int egress_fd)
{
        struct cs_error err = {0};
        /* The helper configures the network and says so (netready), or pid 1 configures
         * pasta's tap itself as soon as it appears (tap_watch). */
        bool netready =
            s->net == SPEC_NET_PASTA && s->egress != SPEC_EGRESS_ALLOWLIST && !net->tap.early;
        int tap_watch = -1, slave = -1;
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
        if (egress_fd >= 0 && egress_ns_setup(egress_fd, &err) < 0)
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
        /* A session of its own, and with a pty the sandbox's own, made its terminal. */
        if (tty_child_session(tty, &slave, &err) < 0)
                runner_child_fail(errfd, &err);
        /* The user-mode network is configured while we mounted; the payload starts only
         * once it is there. EOF: the helper failed and csandbox reports why. */
        if (tap_watch >= 0) {
                if (netconf_tap_up(&net->tap, tap_watch, &err) < 0)
                        runner_child_fail(errfd, &err);
                close(tap_watch);
        } else if (syncfd >= 0) {
                if (read(syncfd, &go, 1) != 1)
                        _exit(CS_EXIT_SETUP);
                close(syncfd);
        }
        broker_start(s, filter);
        init_run(s, filter, tty, slave, errfd);
}
