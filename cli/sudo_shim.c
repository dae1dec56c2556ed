/* csandbox-sudo: `sudo` inside a session (an image's, or the embedded default's). There is no
 * setuid inside a csandbox session; this hands its command and its stdin, stdout and stderr to the
 * session's package broker (runner/broker.c) over SPEC_BROKER_SOCKET, which runs a package manager
 * as the namespace's root when the request is one it allows, and exits with its status.
 * Linked statically: it runs in images whose libraries csandbox does not know. */
#include "../spec/spec.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define REQUEST_MAX (64u << 10)

static int usage(void)
{
        fputs("usage: sudo [-n] [-E] [--] apt-get|apt|dnf|yum|microdnf|apk SUBCOMMAND "
              "[OPTION...] [PACKAGE...]\n"
              "In this csandbox session sudo installs, removes and updates packages of the "
              "session's own filesystem, or of its writable layer over the host's system "
              "(gone when the session ends); it runs nothing else.\n",
              stderr);
        return 1;
}

int main(int argc, char **argv)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX, .sun_path = SPEC_BROKER_SOCKET};
        static char req[REQUEST_MAX];
        union {
                struct cmsghdr h;
                char space[CMSG_SPACE(3 * sizeof(int))];
        } ctl;
        int fds[3] = {0, 1, 2}, status, i = 1, s;
        const char *cmd;
        size_t len = 0;
        ssize_t n;

        /* sudo's options that change nothing here; any other is refused. */
        for (; i < argc && argv[i][0] == '-'; i++) {
                if (strcmp(argv[i], "--") == 0) {
                        i++;
                        break;
                }
                if (strcmp(argv[i], "-n") && strcmp(argv[i], "-E") && strcmp(argv[i], "-H") &&
                    strcmp(argv[i], "--non-interactive") && strcmp(argv[i], "--preserve-env"))
                        return usage();
        }
        if (i >= argc)
                return usage();
        /* The broker finds the manager itself: only its base name goes. */
        cmd = strrchr(argv[i], '/') ? strrchr(argv[i], '/') + 1 : argv[i];
        for (int j = i; j < argc; j++) {
                const char *w = j == i ? cmd : argv[j];
                size_t a = strlen(w) + 1;

                if (len + a > sizeof(req)) {
                        fputs("sudo: the command is too long\n", stderr);
                        return 1;
                }
                memcpy(req + len, w, a);
                len += a;
        }
        s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                fprintf(stderr,
                        "sudo: this session cannot install packages (%s: %s): csandbox said "
                        "why when it started it. The package broker needs a subordinate id "
                        "range: an entry for your user in /etc/subuid and /etc/subgid (as "
                        "root: usermod --add-subuids 100000-165535 --add-subgids "
                        "100000-165535 USER), outside any no_new_privs sandbox\n",
                        SPEC_BROKER_SOCKET, strerror(errno));
                return 1;
        }
        {
                struct iovec iov = {.iov_base = req, .iov_len = len};
                struct msghdr mh = {.msg_iov = &iov,
                                    .msg_iovlen = 1,
                                    .msg_control = ctl.space,
                                    .msg_controllen = sizeof(ctl.space)};
                struct cmsghdr *c = CMSG_FIRSTHDR(&mh);

                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(fds));
                memcpy(CMSG_DATA(c), fds, sizeof(fds));
                do
                        n = sendmsg(s, &mh, 0);
                while (n < 0 && errno == EINTR);
                if (n != (ssize_t)len) {
                        fprintf(stderr, "sudo: the package broker did not take the request: %s\n",
                                strerror(n < 0 ? errno : EIO));
                        return 1;
                }
        }
        do
                n = read(s, &status, sizeof(status));
        while (n < 0 && errno == EINTR);
        if (n != sizeof(status)) {
                fputs("sudo: the package broker went away without an answer\n", stderr);
                return 1;
        }
        if (WIFEXITED(status))
                return WEXITSTATUS(status);
        return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}
