/* `csandbox doctor`'s kernel probes (probe.h): each done for real in a child or with the
 * launch's own checks, so the verdict is what a launch would meet. */
#include "probe.h"
#include "runner.h"

#include "../common/error.h"

#include <errno.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

int runner_probe_userns(struct cs_error *err)
{
        int status;
        pid_t pid = fork();

        if (pid == 0)
                _exit(unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0 ? 0 : (errno & 0x7f));
        if (pid < 0)
                return cs_error_set(err, errno, "cannot start a test process");
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return cs_error_set(err, errno, "cannot start a test process");
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
                return 0;
        cs_error_set(err, WIFEXITED(status) ? WEXITSTATUS(status) : EPERM,
                     "cannot create a user namespace");
        diagnose_userns(err);
        return err->err > 0 ? -err->err : -EPERM;
}

int runner_probe_map_range(struct cs_error *err)
{
        struct sandbox_spec s;
        int r;

        spec_init(&s);
        s.map_range = true;
        s.host_uid = getuid();
        r = idmap_check_range(&s, "--map-range", err);
        spec_free(&s);
        return r;
}
