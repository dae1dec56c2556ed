/* The sandbox's own network namespace: loopback up, nothing else. */
#include "runner.h"

#include "../common/cleanup.h"
#include "../common/error.h"

#include <errno.h>
#include <net/if.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

int netns_loopback_up(struct cs_error *err)
{
        _cleanup_close_ int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        struct ifreq ifr;

        if (fd < 0)
                return cs_error_set(err, errno, "bring up loopback: socket");
        memset(&ifr, 0, sizeof(ifr));
        strcpy(ifr.ifr_name, "lo");
        if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
                return cs_error_set(err, errno, "bring up loopback: get flags of lo");
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
                return cs_error_set(err, errno, "bring up loopback: set lo up");
        return 0;
}
