/* csandbox-wl-paste: wl-paste inside a sandbox whose clipboard is forwarded
 * (CLAUDE_PROFILE_SANDBOX_CLIPBOARD). It passes its arguments to csandbox's relay over
 * BRIDGE_CLIPBOARD_SOCK and prints what the relay answers; the relay decides what may be
 * read. Linked statically: it runs in images whose libraries csandbox does not know. */
#include "../policy/bridge_paths.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static int write_all(int fd, const char *p, size_t n)
{
        while (n > 0) {
                ssize_t w = write(fd, p, n);

                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0)
                        return -1;
                p += w;
                n -= (size_t)w;
        }
        return 0;
}

int main(int argc, char **argv)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX, .sun_path = BRIDGE_CLIPBOARD_SOCK};
        char req[BRIDGE_CLIPBOARD_REQUEST_MAX], buf[65536], head[256];
        size_t len = 0, hlen = 0;
        ssize_t n;
        char *nl;
        int s;

        for (int i = 1; i < argc; i++) {
                size_t a = strlen(argv[i]);

                if (strpbrk(argv[i], " \n") || len + a + 2 > sizeof(req)) {
                        fprintf(stderr, "wl-paste: argument not supported in the sandbox: %s\n",
                                argv[i]);
                        return 1;
                }
                if (i > 1)
                        req[len++] = ' ';
                memcpy(req + len, argv[i], a);
                len += a;
        }
        req[len++] = '\n';
        s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                fprintf(stderr,
                        "wl-paste: the host's clipboard is not forwarded into this sandbox (%s: "
                        "%s); set CLAUDE_PROFILE_SANDBOX_CLIPBOARD=1 when launching it\n",
                        BRIDGE_CLIPBOARD_SOCK, strerror(errno));
                return 1;
        }
        if (write_all(s, req, len) < 0) {
                perror("wl-paste: the clipboard relay");
                return 1;
        }
        shutdown(s, SHUT_WR);
        /* The status line, then (after OK) the content as it is. */
        while (!(nl = memchr(head, '\n', hlen))) {
                if (hlen == sizeof(head) || (n = read(s, head + hlen, sizeof(head) - hlen)) <= 0) {
                        fprintf(stderr, "wl-paste: the clipboard relay gave no answer\n");
                        return 1;
                }
                hlen += (size_t)n;
        }
        *nl = '\0';
        if (strcmp(head, "OK") != 0) {
                fprintf(stderr, "wl-paste: %s\n",
                        strncmp(head, "ERR ", 4) == 0 ? head + 4 : "the relay refused");
                return 1;
        }
        if (write_all(1, nl + 1, hlen - (size_t)(nl + 1 - head)) < 0)
                return 1;
        while ((n = read(s, buf, sizeof(buf))) > 0)
                if (write_all(1, buf, (size_t)n) < 0)
                        return 1;
        return n < 0 ? 1 : 0;
}
