/* The network made ahead of the sandbox: a holder process in a new user and network
 * namespace, which makes pasta's tap (as pid 1 does otherwise), and pasta started on it at
 * once, so that pasta's own start-up runs while the caller is still planning the launch.
 * launch_run then builds the sandbox inside those two namespaces (setns) instead of new
 * ones. */
#include "internal.h"

#include "../common/error.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

void net_early_init(struct net_early *ne)
{
        memset(ne, 0, sizeof(*ne));
        ne->holder = -1;
        ne->user_fd = ne->net_fd = ne->hold_fd = -1;
        ne->net.pid = -1;
        ne->net.ready_fd = ne->net.err_fd = ne->net.exit_fd = -1;
}

void net_early_stop(struct net_early *ne)
{
        if (ne->started)
                netns_helper_stop(&ne->net);
        if (ne->holder > 0) {
                /* Its exit releases the network namespace, which the kernel takes apart at
                 * its own pace: reap it if it is gone already, as pasta. */
                kill(ne->holder, SIGKILL);
                waitpid(ne->holder, NULL, WNOHANG);
        }
        if (ne->user_fd >= 0)
                close(ne->user_fd);
        if (ne->net_fd >= 0)
                close(ne->net_fd);
        if (ne->hold_fd >= 0)
                close(ne->hold_fd);
        net_early_init(ne);
}

bool net_early_start(bool map_host_loopback, struct net_early *ne)
{
        struct sandbox_spec proto;
        /* Dropped: this is only a head start; without it the launch makes its network the
         * usual way and reports any problem then. */
        struct cs_error ignored = {0};
        int p[2], hold[2];
        char path[64], c = 0;
        bool ok = false;

        net_early_init(ne);
        spec_init(&proto);
        proto.net = SPEC_NET_PASTA;
        proto.map_host_loopback = map_host_loopback;
        if (netns_helper_find(&proto, &ne->net, &ignored) < 0 || ne->net.kind != NET_HELPER_PASTA ||
            pipe2(p, O_CLOEXEC) < 0)
                goto out;
        if (pipe2(hold, O_CLOEXEC) < 0) {
                close(p[0]), close(p[1]);
                goto out;
        }
        fflush(NULL);
        ne->holder = fork();
        if (ne->holder == 0) {
                /* The holder: it only keeps the namespaces' first process alive for pasta,
                 * which follows it, until csandbox closes its end of hold. */
                close(p[0]);
                close(hold[1]);
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                c = unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0 ? 'y' : 'n';
                /* pasta's tap, made before pasta starts: pid 1 then configures it and
                 * starts the payload without waiting for pasta (netconf.c). */
                if (c == 'y' && ne->net.tap.early && netconf_tap_handoff(&ne->net.tap))
                        (void)netconf_tap_make(&ne->net.tap);
                if (write(p[1], &c, 1) != 1 || c != 'y')
                        _exit(1);
                (void)!read(hold[0], &c, 1);
                _exit(0);
        }
        close(p[1]);
        close(hold[0]);
        ne->hold_fd = hold[1];
        if (ne->holder < 0 || read(p[0], &c, 1) != 1 || c != 'y') {
                close(p[0]);
                goto out;
        }
        close(p[0]);
        snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)ne->holder);
        ne->user_fd = open(path, O_RDONLY | O_CLOEXEC);
        snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)ne->holder);
        ne->net_fd = open(path, O_RDONLY | O_CLOEXEC);
        if (ne->user_fd < 0 || ne->net_fd < 0 ||
            netns_helper_start(&proto, ne->holder, NULL, &ne->net, &ignored) < 0)
                goto out;
        ne->started = true;
        ne->map_host_loopback = map_host_loopback;
        ok = true;
out:
        spec_free(&proto);
        if (!ok)
                net_early_stop(ne);
        return ok;
}
