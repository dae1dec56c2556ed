/* The decisions that depend on this machine, made into the spec before --plan prints it and
 * before the launch: the launch then runs the spec as it is, and --plan shows what runs. */
#include "internal.h"

#include "../common/error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

int runner_tun_usable(struct cs_error *why)
{
        int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC), e;
        struct stat st;

        if (fd >= 0) {
                /* a container engine may mask a device with a bind of /dev/null */
                bool tun =
                    fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == makedev(10, 200);

                close(fd);
                if (tun)
                        return 0;
                cs_error_setx(why, ENODEV, "/dev/net/tun is not the tun device (10:200)");
                diagnose_tun(why, ENODEV);
                return -ENODEV;
        }
        e = errno;
        if (e != EACCES && e != EPERM && e != ENOENT && e != ENXIO && e != ENODEV)
                return 0; /* not the device's absence: pasta's own error says more */
        cs_error_setx(why, e, "/dev/net/tun %s (%s)",
                      e == EACCES || e == EPERM ? "is not usable by your user" : "cannot be opened",
                      strerror(e));
        diagnose_tun(why, e);
        return -e;
}

/* pasta's network (run's, `exec --net pasta`'s) where it cannot be had: none where the
 * machine has no network, else csandbox's relay where /dev/net/tun cannot be used. Said
 * once, before the launch (and by --plan). */
static int net_fallback(struct sandbox_spec *s, struct cs_error *err)
{
        struct cs_error why = {0};
        char *fix;
        int r;

        if (s->net != SPEC_NET_PASTA || s->egress != SPEC_EGRESS_OPEN)
                return 0;
        if (runner_no_network()) {
                /* a container started with --network none: neither pasta nor the relay
                 * could reach anything from here */
                s->net = SPEC_NET_NONE;
                s->map_host_loopback = false;
                return spec_warn(s, err, "csandbox: the session has no network: %s",
                                 runner_no_network_words());
        }
        if (runner_tun_usable(&why) == 0)
                return 0;
        s->net = SPEC_NET_RELAY;
        /* diagnose_tun's cause, then its fix (a hint after ". ") on a line of its own */
        fix = strstr(why.msg, ". ");
        if (fix)
                *fix = '\0', fix += 2;
        r = spec_warn(s, err,
                      "csandbox: the session's network is csandbox's relay, TCP and DNS only "
                      "(no UDP, ICMP or connections into the session): %s, and pasta needs it",
                      why.msg);
        if (r >= 0 && fix)
                r = spec_warn(s, err, "csandbox: for the full network: %s", fix);
        return r;
}

int runner_spec_complete(struct sandbox_spec *s, struct cs_error *err)
{
        int r = runner_check_network(s, err);

        if (r >= 0 && s->package_broker && !s->map_range) {
                /* The broker needs uid 0 mapped, which only the subordinate range gives. */
                struct cs_error why = {0};

                s->map_range = true;
                if (idmap_check_range(s, NULL, &why) < 0) {
                        s->map_range = false;
                        s->package_broker = false;
                        /* nor a layer for it */
                        for (size_t i = 0; i < s->n_layer_dirs; i++)
                                free(s->layer_dirs[i]);
                        s->n_layer_dirs = 0;
                        r = spec_warn(s, err,
                                      "csandbox: sudo cannot install packages in this session: "
                                      "it needs a subordinate id range, and %s",
                                      why.msg);
                }
        }
        if (r >= 0)
                r = net_fallback(s, err);
        if (r >= 0 && s->net == SPEC_NET_PASTA) {
                char *helper = spec_net_helper(s);
                const char *base = helper ? strrchr(helper, '/') : NULL;

                if (base && strcmp(base + 1, "slirp4netns") == 0)
                        r = spec_warn(s, err,
                                      "csandbox: pasta is not installed; using %s for the "
                                      "sandbox's network",
                                      helper);
                free(helper);
        }
        return r;
}
