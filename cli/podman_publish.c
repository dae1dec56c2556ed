/* `run -p HOST:CONTAINER`: a container shares the network of whoever runs podman, so its
 * port CONTAINER is already reachable there; a different HOST port gets a relay, a child
 * of the container's supervisor that listens on HOST (in the caller's network namespace,
 * which needs no privilege above port 1023) and joins each connection to the container's
 * 127.0.0.1:CONTAINER. The relay dies with the supervisor (PDEATHSIG), as the container
 * does. */
#include "podman.h"

#include "../common/error.h"
#include "../common/fileio.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

/* A socket listening on ip (every address, v4 and v6, when empty) and port. */
static int listen_on(const char *ip, unsigned short port)
{
        struct sockaddr_in6 a6 = {
            .sin6_family = AF_INET6, .sin6_port = htons(port), .sin6_addr = IN6ADDR_ANY_INIT};
        struct sockaddr_in a4 = {
            .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_ANY)};
        int one = 1, zero = 0, fd, e;
        bool v6 = ip[0] ? inet_pton(AF_INET6, ip, &a6.sin6_addr) == 1 : true;

        if (ip[0] && !v6 && inet_pton(AF_INET, ip, &a4.sin_addr) != 1)
                return -EINVAL;
        fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 && v6 && !ip[0]) { /* no IPv6 here: every IPv4 address */
                v6 = false;
                fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        }
        if (fd < 0)
                return -errno;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (v6 && !ip[0])
                setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
        if ((v6 ? bind(fd, (struct sockaddr *)&a6, sizeof(a6))
                : bind(fd, (struct sockaddr *)&a4, sizeof(a4))) < 0 ||
            listen(fd, 64) < 0) {
                e = errno;
                close(fd);
                return -e;
        }
        return fd;
}

int podman_publish_listen(const struct podman_run *r, int *fds, struct cs_error *err)
{
        for (size_t i = 0; i < r->n_publish; i++) {
                const struct podman_port *p = &r->publish[i];
                int fd;

                fds[i] = -1;
                if (p->host == p->ctr)
                        continue;
                fd = listen_on(p->ip, p->host);
                if (fd < 0)
                        return cs_error_set(err, -fd,
                                            "run: -p %s%s%u:%u: cannot listen on port %u (%s); "
                                            "choose another host port",
                                            p->ip, p->ip[0] ? ":" : "", p->host, p->ctr, p->host,
                                            fd == -EACCES ? "a port below 1024 needs privilege"
                                                          : "in use?");
                fds[i] = fd;
        }
        return 0;
}

/* One connection: bytes both ways until both sides are done. */
static _Noreturn void relay_conn(int a, unsigned short port)
{
        struct sockaddr_in t = {.sin_family = AF_INET,
                                .sin_port = htons(port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        struct sockaddr_in6 t6 = {
            .sin6_family = AF_INET6, .sin6_port = htons(port), .sin6_addr = IN6ADDR_LOOPBACK_INIT};
        int b = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        bool a_in = true, b_in = true;
        char buf[65536];

        /* the container's loopback: 127.0.0.1, else ::1 (a server listening on that alone) */
        if (b >= 0 && connect(b, (struct sockaddr *)&t, sizeof(t)) < 0) {
                close(b);
                b = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (b >= 0 && connect(b, (struct sockaddr *)&t6, sizeof(t6)) < 0)
                        _exit(1);
        }
        if (b < 0)
                _exit(1);
        while (a_in || b_in) {
                struct pollfd p[2] = {{.fd = a_in ? a : -1, .events = POLLIN},
                                      {.fd = b_in ? b : -1, .events = POLLIN}};

                if (poll(p, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        _exit(1);
                }
                for (int i = 0; i < 2; i++) {
                        int from = i ? b : a, to = i ? a : b;
                        ssize_t n;

                        if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                                continue;
                        n = read(from, buf, sizeof(buf));
                        if (n <= 0) {
                                shutdown(to, SHUT_WR);
                                if (i)
                                        b_in = false;
                                else
                                        a_in = false;
                                continue;
                        }
                        if (cs_write_all(to, buf, (size_t)n) < 0)
                                _exit(0);
                }
        }
        _exit(0);
}

static _Noreturn void relay_main(const struct podman_run *r, const int *fds)
{
        struct pollfd p[PODMAN_PUBLISH_MAX];
        size_t n = 0;
        unsigned short ports[PODMAN_PUBLISH_MAX];

        signal(SIGCHLD, SIG_IGN); /* each connection's child reaps itself */
        for (size_t i = 0; i < r->n_publish; i++)
                if (fds[i] >= 0) {
                        p[n].fd = fds[i];
                        p[n].events = POLLIN;
                        ports[n++] = r->publish[i].ctr;
                }
        for (;;) {
                if (poll(p, n, -1) < 0 && errno != EINTR)
                        _exit(1);
                for (size_t i = 0; i < n; i++) {
                        int c;
                        pid_t pid;

                        if (!(p[i].revents & POLLIN))
                                continue;
                        c = accept4(p[i].fd, NULL, NULL, SOCK_CLOEXEC);
                        if (c < 0)
                                continue;
                        pid = fork();
                        if (pid == 0) {
                                prctl(PR_SET_PDEATHSIG, SIGKILL);
                                for (size_t k = 0; k < n; k++)
                                        close(p[k].fd);
                                relay_conn(c, ports[i]);
                        }
                        close(c);
                }
        }
}

int podman_publish_start(const struct podman_run *r, int *fds)
{
        bool any = false;
        pid_t pid, parent = getpid();

        for (size_t i = 0; i < r->n_publish; i++)
                any |= fds[i] >= 0;
        if (!any)
                return 0;
        fflush(NULL);
        pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                sigset_t none;

                sigemptyset(&none);
                sigprocmask(SIG_SETMASK, &none, NULL);
                /* the supervisor's death (even by SIGKILL) ends the relay, as the container */
                if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
                        _exit(0);
                /* ours: only the listening sockets (no stdio, no lock, no source fd) */
                for (int fd = 0; fd < 3; fd++)
                        close(fd);
                relay_main(r, fds);
        }
        for (size_t i = 0; i < r->n_publish; i++)
                if (fds[i] >= 0) {
                        close(fds[i]);
                        fds[i] = -1;
                }
        return 0;
}
