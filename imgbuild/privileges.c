/* The privileges of `image build`'s steps (privileges.h). */
#include "privileges.h"

#include "../runner/runner.h"
#include "../spec/spec.h"

#include <linux/capability.h>
#include <stdio.h>
#include <unistd.h>

/* What a build step's root keeps: the capabilities container engines give a build. */
#define BUILD_ROOT_CAPS                                                                            \
        ((1ull << CAP_CHOWN) | (1ull << CAP_DAC_OVERRIDE) | (1ull << CAP_FOWNER) |                 \
         (1ull << CAP_FSETID) | (1ull << CAP_KILL) | (1ull << CAP_SETGID) | (1ull << CAP_SETUID) | \
         (1ull << CAP_SETPCAP) | (1ull << CAP_NET_BIND_SERVICE) | (1ull << CAP_NET_RAW) |          \
         (1ull << CAP_SYS_CHROOT) | (1ull << CAP_MKNOD) | (1ull << CAP_AUDIT_WRITE) |              \
         (1ull << CAP_SETFCAP))

void build_privileges_decide(struct build_privileges *ret)
{
        struct sandbox_spec probe;
        struct cs_error why = {0};

        *ret = (struct build_privileges){
            .host_uid = getuid(), .host_gid = getgid(), .root_caps = BUILD_ROOT_CAPS};
        spec_init(&probe);
        probe.host_uid = ret->host_uid;
        probe.map_range = true;
        ret->range = idmap_check_range(&probe, NULL, &why) == 0;
        spec_free(&probe);
        if (!ret->range)
                snprintf(ret->why_no_range, sizeof(ret->why_no_range), "%s", why.msg);
}

void build_privileges_spec(const struct build_privileges *p, uid_t uid, gid_t gid,
                           struct sandbox_spec *s)
{
        /* The caller is root of the step (what the layers hold is the caller's); a USER's
         * RUN runs as that user, on one of the subordinate ids. */
        s->host_uid = p->host_uid;
        s->host_gid = p->host_gid;
        s->map_range = p->range;
        if (uid != 0 || gid != 0) {
                s->payload_ids = true;
                s->payload_uid = uid;
                s->payload_gid = gid;
        }
        if (uid == 0)
                s->payload_caps = p->root_caps;
}
