/* How long the kernel takes to attach csandbox's precompiled seccomp program: 1000 forked
 * children each time the seccomp() call alone (the launch's only seccomp cost, since the
 * program is compiled at build time). Built and run by bench/seccomp. */
#include "common/error.h"
#include "policy/seccomp.h"

#include <linux/seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
        enum spec_seccomp kind =
            argc > 1 && strcmp(argv[1], "strict") == 0 ? SPEC_SECCOMP_STRICT : SPEC_SECCOMP_DEFAULT;
        struct cs_error err;
        struct sock_fprog prog;
        const int runs = 1000;
        double total = 0;

        if (seccomp_builtin(kind, &prog, &err) < 0) {
                fprintf(stderr, "%s\n", err.msg);
                return 1;
        }
        for (int i = 0; i < runs; i++) {
                int p[2];
                double d = 0;
                pid_t c;

                if (pipe(p) < 0)
                        return 1;
                c = fork();
                if (c == 0) {
                        double a, b;

                        prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
                        a = now();
                        syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
                        b = now();
                        d = b - a;
                        _exit(write(p[1], &d, sizeof(d)) == sizeof(d) ? 0 : 1);
                }
                if (read(p[0], &d, sizeof(d)) != sizeof(d))
                        return 1;
                waitpid(c, NULL, 0);
                close(p[0]);
                close(p[1]);
                total += d;
        }
        printf("%s: %u instructions, seccomp() attach mean %.1f us over %d runs\n",
               kind == SPEC_SECCOMP_STRICT ? "strict" : "default", prog.len, total / runs * 1e6,
               runs);
        return 0;
}
