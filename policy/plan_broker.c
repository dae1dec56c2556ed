/* The package broker's rules, decided with the spec (runner/broker.c only carries them
 * out): which package managers it runs, and the capabilities it holds to do so. */
#include "plan.h"

#include "../common/error.h"

#include <linux/capability.h>

/* The package managers, where images keep them; a request names a base name only. */
static const char *const plan_broker_managers[][2] = {
    {"apt-get", "/usr/bin/apt-get"}, {"apt", "/usr/bin/apt"},           {"dnf", "/usr/bin/dnf"},
    {"yum", "/usr/bin/yum"},         {"microdnf", "/usr/bin/microdnf"}, {"apk", "/sbin/apk"},
};

/* What a package manager needs to own and write the image's files as root, and to stop its
 * own helpers; never CAP_SYS_ADMIN, so no mount can be changed. */
static const unsigned plan_broker_cap_list[] = {CAP_CHOWN,  CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH,
                                                CAP_FOWNER, CAP_FSETID,       CAP_SETUID,
                                                CAP_SETGID, CAP_SETFCAP,      CAP_KILL};

uint64_t plan_broker_caps(void)
{
        uint64_t mask = 0;

        for (size_t i = 0; i < sizeof(plan_broker_cap_list) / sizeof(plan_broker_cap_list[0]); i++)
                mask |= 1ull << plan_broker_cap_list[i];
        return mask;
}

int plan_broker(struct sandbox_spec *s, struct cs_error *err)
{
        int r = 0;

        s->broker_caps = plan_broker_caps();
        for (size_t i = 0;
             r >= 0 && i < sizeof(plan_broker_managers) / sizeof(plan_broker_managers[0]); i++)
                r = spec_broker_allow(s, plan_broker_managers[i][0], plan_broker_managers[i][1],
                                      err);
        return r;
}
