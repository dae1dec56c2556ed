/* The payload's last steps before execve. Order matters: capabilities go while we still
 * hold CAP_SETPCAP for the bounding set; no_new_privs before the filter (an unprivileged
 * process may only install one then); the filter last, so it need not allow our own setup. */
#include "internal.h"

#include "../common/error.h"
#include "../common/fileio.h"

#include <cap-ng.h>
#include <grp.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

int exec_drop_capabilities(struct cs_error *err)
{
        capng_clear(CAPNG_SELECT_ALL);
        if (capng_apply(CAPNG_SELECT_ALL) != 0)
                return cs_error_setx(err, EPERM, "drop capabilities");
        /* Ambient capabilities are cleared by capng_apply(ALL) on libcap-ng >= 0.8; make
         * sure on older ones too. */
        prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
        return 0;
}

/* A build step's root: the capabilities in caps stay (effective, permitted, inheritable, and
 * the bounding set cut to them), so that an exec as uid 0 under no_new_privs keeps them. */
int exec_keep_capabilities(uint64_t caps, struct cs_error *err)
{
        capng_clear(CAPNG_SELECT_ALL);
        for (unsigned c = 0; c <= CAP_LAST_CAP && c < 64; c++)
                if (caps & (1ull << c) && capng_update(CAPNG_ADD,
                                                       CAPNG_EFFECTIVE | CAPNG_PERMITTED |
                                                           CAPNG_INHERITABLE | CAPNG_BOUNDING_SET,
                                                       c) != 0)
                        return cs_error_setx(err, EINVAL, "keep capability %u", c);
        if (capng_apply(CAPNG_SELECT_ALL) != 0)
                return cs_error_setx(err, EPERM, "keep the build step's capabilities");
        prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
        return 0;
}

/* The payload's capabilities and, for a build step, its own ids. A uid other than 0 cuts
 * the bounding set while CAP_SETPCAP is still there; the change of uid then clears the rest. */
static int exec_set_identity(const struct sandbox_spec *s, struct cs_error *err)
{
        bool other = s->payload_ids && s->payload_uid != 0;

        if (other) {
                capng_clear(CAPNG_SELECT_BOUNDS);
                if (capng_apply(CAPNG_SELECT_BOUNDS) != 0)
                        return cs_error_setx(err, EPERM, "drop the bounding set");
        }
        if (s->payload_ids && (setresgid(s->payload_gid, s->payload_gid, s->payload_gid) < 0 ||
                               setresuid(s->payload_uid, s->payload_uid, s->payload_uid) < 0))
                return cs_error_set(err, errno, "become uid %u gid %u", (unsigned)s->payload_uid,
                                    (unsigned)s->payload_gid);
        if (other) {
                capng_clear(CAPNG_SELECT_CAPS);
                if (capng_apply(CAPNG_SELECT_CAPS) != 0)
                        return cs_error_setx(err, EPERM, "drop capabilities");
                prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
                return 0;
        }
        return s->payload_caps ? exec_keep_capabilities(s->payload_caps, err)
                               : exec_drop_capabilities(err);
}

static char **build_environ(const struct sandbox_spec *s)
{
        char **env = calloc(s->n_env + 1, sizeof(*env));

        if (!env)
                return NULL;
        for (size_t i = 0; i < s->n_env; i++)
                if (asprintf(&env[i], "%s=%s", s->env[i].name, s->env[i].value) < 0)
                        return NULL;
        return env;
}

/* Everything but stdio gets close-on-exec. */
static void mark_fds_cloexec(void)
{
        syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC);
}

void exec_payload(const struct sandbox_spec *s, const struct sock_fprog *filter, int errfd)
{
        struct cs_error err = {0};
        const char *cwd = s->cwd ? s->cwd : "/";
        extern char **environ;
        sigset_t none;
        char **env;
        int e;

        if (chdir(cwd) < 0) {
                if (!s->cwd_optional) {
                        cs_error_set(&err, errno, "--chdir %s: cannot enter it inside the sandbox",
                                     s->cwd);
                        runner_child_fail(errfd, &err);
                }
                if (chdir("/") < 0) {
                        cs_error_set(&err, errno, "chdir /");
                        runner_child_fail(errfd, &err);
                }
        }
        if (s->map_range && setgroups(0, NULL) < 0) {
                cs_error_set(&err, errno, "drop supplementary groups");
                runner_child_fail(errfd, &err);
        }
        for (size_t i = 0; i < s->n_rlimits; i++)
                if (setrlimit(s->rlimits[i].resource, &s->rlimits[i].limit) < 0) {
                        cs_error_set(&err, errno, "set rlimit %d", s->rlimits[i].resource);
                        runner_child_fail(errfd, &err);
                }
        if (exec_set_identity(s, &err) < 0)
                runner_child_fail(errfd, &err);
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
                cs_error_set(&err, errno, "set no_new_privs");
                runner_child_fail(errfd, &err);
        }
        env = build_environ(s);
        if (!env) {
                cs_error_set(&err, ENOMEM, "build the environment");
                runner_child_fail(errfd, &err);
        }
        mark_fds_cloexec();
        if (s->signals_default)
                for (int sig = 1; sig < NSIG; sig++)
                        if (sig != SIGKILL && sig != SIGSTOP)
                                signal(sig, SIG_DFL);
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        if (filter && syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, filter) < 0) {
                cs_error_set(&err, errno, "load the seccomp filter");
                runner_child_fail(errfd, &err);
        }
        /* execvp searches the PATH of our own environment: make it the sandbox's. */
        environ = env;
        execvp(s->argv[0], s->argv);
        e = errno;
        if (e == ENOENT) {
                cs_error_set(&err, 0, "%s: command not found%s", s->argv[0],
                             strchr(s->argv[0], '/') ? " inside the sandbox"
                                                     : " in the sandbox's PATH");
                err.status = CS_EXIT_NOTFOUND;
        } else {
                cs_error_set(&err, e, "%s: cannot execute", s->argv[0]);
                err.status = CS_EXIT_NOEXEC;
        }
        runner_child_fail(errfd, &err);
}
