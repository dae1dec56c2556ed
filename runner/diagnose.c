/* Why can't we have a user namespace? Name the cause and the fix, as far as we can see it. */
#include "runner.h"

#include "../common/error.h"
#include "../common/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

static long read_long(const char *path)
{
        struct cs_error ignored;
        char *buf = NULL;
        long v = -1;

        if (cs_read_file_at(AT_FDCWD, path, 4096, false, &buf, NULL, &ignored) == 0) {
                v = strtol(buf, NULL, 10);
                free(buf);
        }
        return v;
}

static bool seccomp_filtered(void)
{
        struct cs_error ignored;
        char *buf = NULL;
        bool r = false;

        if (cs_read_file_at(AT_FDCWD, "/proc/self/status", 1 << 16, false, &buf, NULL, &ignored) ==
            0) {
                const char *p = strstr(buf, "\nSeccomp:");

                r = p && strtol(p + 9, NULL, 10) == 2;
                free(buf);
        }
        return r;
}

void diagnose_userns(struct cs_error *err)
{
        if (read_long("/proc/sys/kernel/unprivileged_userns_clone") == 0) {
                cs_error_hint(err, "Unprivileged user namespaces are disabled "
                                   "(kernel.unprivileged_userns_clone=0); enable them with: sudo "
                                   "sysctl -w kernel.unprivileged_userns_clone=1");
        } else if (read_long("/proc/sys/user/max_user_namespaces") == 0) {
                cs_error_hint(err, "User namespaces are disabled (user.max_user_namespaces=0); "
                                   "enable them with: sudo sysctl -w "
                                   "user.max_user_namespaces=15000");
        } else if (read_long("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == 1) {
                cs_error_hint(err, "AppArmor restricts unprivileged user namespaces "
                                   "(kernel.apparmor_restrict_unprivileged_userns=1); allow "
                                   "csandbox with an AppArmor profile that has `userns,`, or "
                                   "run: sudo sysctl -w "
                                   "kernel.apparmor_restrict_unprivileged_userns=0");
        } else if (seccomp_filtered()) {
                cs_error_hint(err, "This process already runs under a seccomp filter (Seccomp: "
                                   "2 in /proc/self/status), as container engines install; the "
                                   "filter likely refuses new namespaces. Run the container "
                                   "with a seccomp profile that allows clone/unshare of user "
                                   "namespaces (e.g. --security-opt seccomp=unconfined)");
        } else if (err->err == ENOSPC || err->err == EUSERS) {
                cs_error_hint(err, "The limit on user namespaces is reached "
                                   "(user.max_user_namespaces); raise it with sudo sysctl");
        }
}
