/* What it costs to decide on a file operation before anyone else can see it: a seccomp
 * filter that hands the calls which create names (open with O_CREAT, mkdir, rename, link,
 * symlink) to a supervisor, which reads the path from the caller's memory, judges its last
 * component and lets the call go on. Built and run by bench/mediation.
 *
 *   mediation run none|allow|notify CMD ARGS...  run CMD (and everything it starts) under
 *                                                the mode; notify supervises from here
 *   mediation loop N DIR                         the micro workload: ns per operation
 *
 * none: no filter; allow: the same filter answering ALLOW everywhere (the cost of running
 * the program); notify: SECCOMP_RET_USER_NOTIF for the name-creating calls. The launcher
 * forks in every mode so that all three pay the same fork. MEDIATION_STATS=FILE appends
 * the supervisor's counts to FILE. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef SECCOMP_USER_NOTIF_FLAG_CONTINUE
#define SECCOMP_USER_NOTIF_FLAG_CONTINUE (1UL << 0)
#endif

#if defined(__x86_64__)
#define BENCH_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define BENCH_AUDIT_ARCH AUDIT_ARCH_AARCH64
#else
#error "bench/mediation: add this architecture's AUDIT_ARCH"
#endif

enum mode { MODE_NONE, MODE_ALLOW, MODE_NOTIFY };

/* The calls that create a name, with the argument indexes of the path(s) they name (-1: none).
 * flag_arg >= 0: only when that argument has O_CREAT (a plain open must stay cheap). */
struct watched {
        long nr;
        int path_arg[2];
        int dirfd_arg;
        int flag_arg;
};

static const struct watched watched[] = {
    {SYS_renameat, {1, 3}, 2, -1},  {SYS_renameat2, {1, 3}, 2, -1}, {SYS_linkat, {1, 3}, 2, -1},
    {SYS_symlinkat, {2, 0}, 1, -1}, {SYS_mkdirat, {1, -1}, 0, -1},  {SYS_openat, {1, -1}, 0, 2},
    {SYS_openat2, {1, -1}, 0, -1}, /* its flags sit behind a pointer: always asked */
#ifdef SYS_rename
    {SYS_rename, {1, 0}, -1, -1},   {SYS_link, {1, 0}, -1, -1},     {SYS_symlink, {1, 0}, -1, -1},
    {SYS_mkdir, {0, -1}, -1, -1},   {SYS_creat, {0, -1}, -1, -1},   {SYS_open, {0, -1}, -1, 1},
#endif
};
#define N_WATCHED (sizeof(watched) / sizeof(watched[0]))

/* Names git and claude interpret when they appear in a work tree or profile. */
static const char *const interpreted[] = {
    ".git",        ".claude",        ".mcp.json",     "config",
    "hooks",       "CLAUDE.md",      "settings.json", "settings.local.json",
    ".gitmodules", ".gitattributes", "commondir",     "gitdir",
    "HEAD",
};

static int build_filter(struct sock_filter *f, __u32 action)
{
        int n = 0;

        f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                                              offsetof(struct seccomp_data, arch));
        f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, BENCH_AUDIT_ARCH, 1, 0);
        f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
        for (size_t i = 0; i < N_WATCHED; i++) {
                f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                                                      offsetof(struct seccomp_data, nr));
                if (watched[i].flag_arg < 0) {
                        f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
                                                              (__u32)watched[i].nr, 0, 1);
                        f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, action);
                        continue;
                }
                /* The low word of the flags argument (little-endian: the first). */
                f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
                                                      (__u32)watched[i].nr, 0, 4);
                f[n++] = (struct sock_filter)BPF_STMT(
                    BPF_LD | BPF_W | BPF_ABS,
                    offsetof(struct seccomp_data, args[watched[i].flag_arg]));
                f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, O_CREAT, 0, 1);
                f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, action);
                f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
        }
        f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
        return n;
}

static void die(const char *what)
{
        perror(what);
        exit(125);
}

static int send_fd(int sock, int fd)
{
        char cbuf[CMSG_SPACE(sizeof(int))] = {0};
        char byte = 'l';
        struct iovec iov = {&byte, 1};
        struct msghdr msg = {
            .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);

        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
        return sendmsg(sock, &msg, 0) == 1 ? 0 : -1;
}

static int recv_fd(int sock)
{
        char cbuf[CMSG_SPACE(sizeof(int))] = {0};
        char byte;
        struct iovec iov = {&byte, 1};
        struct msghdr msg = {
            .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
        struct cmsghdr *c;
        int fd;

        if (recvmsg(sock, &msg, 0) != 1)
                return -1;
        c = CMSG_FIRSTHDR(&msg);
        if (c == NULL || c->cmsg_type != SCM_RIGHTS)
                return -1;
        memcpy(&fd, CMSG_DATA(c), sizeof(int));
        return fd;
}

/* Read a NUL-terminated string from the target, a page at a time: a path that ends just
 * before an unmapped page must not fail the whole read. */
static ssize_t read_target_string(pid_t pid, unsigned long addr, char *buf, size_t size)
{
        size_t got = 0;
        long page = sysconf(_SC_PAGESIZE);

        while (got < size - 1) {
                size_t chunk = (size_t)page - ((addr + got) % (size_t)page);
                struct iovec local, remote;
                ssize_t r;

                if (chunk > size - 1 - got)
                        chunk = size - 1 - got;
                local = (struct iovec){buf + got, chunk};
                remote = (struct iovec){(void *)(addr + got), chunk};
                r = process_vm_readv(pid, &local, 1, &remote, 1, 0);
                if (r <= 0)
                        return -1;
                if (memchr(buf + got, '\0', (size_t)r) != NULL)
                        return (ssize_t)strlen(buf);
                got += (size_t)r;
        }
        buf[size - 1] = '\0';
        return (ssize_t)got;
}

static const char *last_component(char *path)
{
        size_t len = strlen(path);
        char *slash;

        while (len > 1 && path[len - 1] == '/')
                path[--len] = '\0';
        slash = strrchr(path, '/');
        return slash != NULL ? slash + 1 : path;
}

static int is_interpreted(const char *name)
{
        for (size_t i = 0; i < sizeof(interpreted) / sizeof(interpreted[0]); i++)
                if (strcmp(name, interpreted[i]) == 0)
                        return 1;
        return 0;
}

struct stats {
        unsigned long notifications, matched, unreadable, gone;
};

/* One request: read each path it names, judge the last component; for an interpreted name
 * find out where it is being made (the directory fd or cwd, as the host sees it), which a
 * real mediator needs before it can decide. Then check the request is still alive (the
 * pid may have been reused while we read) and let it continue. */
static void handle(int listener, struct seccomp_notif *req, struct seccomp_notif_resp *resp,
                   struct stats *st)
{
        const struct watched *w = NULL;
        char path[PATH_MAX];

        st->notifications++;
        for (size_t i = 0; i < N_WATCHED; i++)
                if (watched[i].nr == req->data.nr)
                        w = &watched[i];
        for (int k = 0; w != NULL && k < 2; k++) {
                if (w->path_arg[k] < 0)
                        continue;
                if (read_target_string(req->pid, req->data.args[w->path_arg[k]], path,
                                       sizeof(path)) < 0) {
                        st->unreadable++;
                        continue;
                }
                if (is_interpreted(last_component(path))) {
                        char proc[64], where[PATH_MAX];
                        int dirfd =
                            w->dirfd_arg >= 0 ? (int)req->data.args[w->dirfd_arg] : AT_FDCWD;

                        st->matched++;
                        if (path[0] == '/')
                                continue;
                        if (dirfd == AT_FDCWD)
                                snprintf(proc, sizeof(proc), "/proc/%d/cwd", req->pid);
                        else
                                snprintf(proc, sizeof(proc), "/proc/%d/fd/%d", req->pid, dirfd);
                        if (readlink(proc, where, sizeof(where)) < 0)
                                st->unreadable++;
                }
        }
        if (ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &req->id) < 0)
                st->gone++;
        resp->id = req->id;
        resp->val = 0;
        resp->error = 0;
        resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
        if (ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, resp) < 0 && errno != ENOENT)
                die("SECCOMP_IOCTL_NOTIF_SEND");
}

/* Answer requests until no task uses the filter any more (POLLHUP), reaping whatever
 * ends meanwhile (we are a subreaper: orphans of the workload come back to us). */
static int supervise(int listener, pid_t child, int sigfd)
{
        struct seccomp_notif_sizes sizes;
        struct seccomp_notif *req;
        struct seccomp_notif_resp *resp;
        struct stats st = {0};
        int status = 0, child_done = 0;
        const char *stats_file = getenv("MEDIATION_STATS");

        if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) < 0)
                die("SECCOMP_GET_NOTIF_SIZES");
        req = calloc(1, sizes.seccomp_notif);
        resp = calloc(1, sizes.seccomp_notif_resp);
        if (req == NULL || resp == NULL)
                die("calloc");
        for (;;) {
                struct pollfd p[2] = {{listener, POLLIN, 0}, {sigfd, POLLIN, 0}};
                int n = listener >= 0 ? 2 : 1;

                if (listener < 0) {
                        p[0] = p[1];
                        if (child_done)
                                break;
                }
                if (poll(p, (nfds_t)n, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        die("poll");
                }
                for (int i = 0; i < n; i++) {
                        if (p[i].fd == sigfd && (p[i].revents & POLLIN)) {
                                struct signalfd_siginfo si;
                                pid_t r;
                                int s;

                                if (read(sigfd, &si, sizeof(si)) < 0)
                                        die("read signalfd");
                                while ((r = waitpid(-1, &s, WNOHANG)) > 0)
                                        if (r == child) {
                                                status = s;
                                                child_done = 1;
                                        }
                        } else if (p[i].fd == listener && (p[i].revents & POLLIN)) {
                                memset(req, 0, sizes.seccomp_notif);
                                if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, req) < 0) {
                                        if (errno == EINTR || errno == ENOENT)
                                                continue;
                                        die("SECCOMP_IOCTL_NOTIF_RECV");
                                }
                                handle(listener, req, resp, &st);
                        } else if (p[i].fd == listener && (p[i].revents & (POLLHUP | POLLERR))) {
                                close(listener);
                                listener = -1;
                        }
                }
        }
        if (stats_file != NULL) {
                FILE *f = fopen(stats_file, "a");

                if (f != NULL) {
                        fprintf(f, "notifications %lu matched %lu unreadable %lu gone %lu\n",
                                st.notifications, st.matched, st.unreadable, st.gone);
                        fclose(f);
                }
        }
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int run(enum mode mode, char **argv)
{
        struct sock_filter insns[4 + 5 * N_WATCHED];
        struct sock_fprog prog = {0};
        int sv[2], sigfd, listener = -1;
        sigset_t chld;
        pid_t child;

        prog.len = (unsigned short)build_filter(insns, mode == MODE_NOTIFY ? SECCOMP_RET_USER_NOTIF
                                                                           : SECCOMP_RET_ALLOW);
        prog.filter = insns;
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
                die("socketpair");
        sigemptyset(&chld);
        sigaddset(&chld, SIGCHLD);
        sigprocmask(SIG_BLOCK, &chld, NULL);
        sigfd = signalfd(-1, &chld, SFD_CLOEXEC);
        if (sigfd < 0)
                die("signalfd");
        prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        child = fork();
        if (child < 0)
                die("fork");
        if (child == 0) {
                sigprocmask(SIG_UNBLOCK, &chld, NULL);
                close(sv[0]);
                if (mode != MODE_NONE) {
                        unsigned flags = mode == MODE_NOTIFY ? SECCOMP_FILTER_FLAG_NEW_LISTENER : 0;
                        int fd;

                        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                                die("PR_SET_NO_NEW_PRIVS");
                        fd = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog);
                        if (fd < 0)
                                die("seccomp");
                        /* The workload must not hold the listener: it could answer for
                         * itself. */
                        if (mode == MODE_NOTIFY && (send_fd(sv[1], fd) < 0 || close(fd) < 0))
                                die("send listener");
                }
                close(sv[1]);
                execvp(argv[0], argv);
                die(argv[0]);
        }
        close(sv[1]);
        if (mode == MODE_NOTIFY) {
                listener = recv_fd(sv[0]);
                if (listener < 0)
                        die("receive listener");
        }
        close(sv[0]);
        return supervise(listener, child, sigfd);
}

static double now_ns(void)
{
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* The micro workload: each operation N times in DIR, ns per iteration. */
static int loop(long n, const char *dir)
{
        int d = open(dir, O_DIRECTORY | O_RDONLY);
        double t;

        if (d < 0)
                die(dir);
        close(openat(d, "existing", O_CREAT | O_WRONLY, 0644));

        t = now_ns();
        for (long i = 0; i < n; i++)
                syscall(SYS_getpid);
        printf("getpid (not watched)                 %8.0f\n", (now_ns() - t) / (double)n);

        t = now_ns();
        for (long i = 0; i < n; i++)
                close(openat(d, "existing", O_RDONLY));
        printf("openat(O_RDONLY)+close (flags check) %8.0f\n", (now_ns() - t) / (double)n);

        t = now_ns();
        for (long i = 0; i < n; i++) {
                close(openat(d, "f", O_CREAT | O_WRONLY, 0644));
                unlinkat(d, "f", 0);
        }
        printf("openat(O_CREAT)+close+unlinkat       %8.0f\n", (now_ns() - t) / (double)n);

        t = now_ns();
        for (long i = 0; i < n; i++)
                if (renameat(d, i % 2 ? "moved" : "existing", d, i % 2 ? "existing" : "moved") < 0)
                        die("renameat");
        printf("renameat                             %8.0f\n", (now_ns() - t) / (double)n);

        t = now_ns();
        for (long i = 0; i < n; i++) {
                if (symlinkat("target", d, "l") < 0)
                        die("symlinkat");
                unlinkat(d, "l", 0);
        }
        printf("symlinkat+unlinkat                   %8.0f\n", (now_ns() - t) / (double)n);

        t = now_ns();
        for (long i = 0; i < n; i++) {
                if (mkdirat(d, "sub", 0755) < 0)
                        die("mkdirat");
                unlinkat(d, "sub", AT_REMOVEDIR);
        }
        printf("mkdirat+rmdir                        %8.0f\n", (now_ns() - t) / (double)n);

        t = now_ns();
        for (long i = 0; i < n; i++) {
                if (mkdirat(d, ".git", 0755) < 0)
                        die("mkdirat .git");
                unlinkat(d, ".git", AT_REMOVEDIR);
        }
        printf("mkdirat(.git)+rmdir (interpreted)    %8.0f\n", (now_ns() - t) / (double)n);
        unlinkat(d, "existing", 0);
        return 0;
}

int main(int argc, char **argv)
{
        if (argc >= 4 && strcmp(argv[1], "loop") == 0)
                return loop(atol(argv[2]), argv[3]);
        if (argc >= 4 && strcmp(argv[1], "run") == 0) {
                enum mode m = strcmp(argv[2], "none") == 0     ? MODE_NONE
                              : strcmp(argv[2], "allow") == 0  ? MODE_ALLOW
                              : strcmp(argv[2], "notify") == 0 ? MODE_NOTIFY
                                                               : (enum mode) - 1;

                if ((int)m >= 0)
                        return run(m, argv + 3);
        }
        fprintf(stderr,
                "usage: %s run none|allow|notify CMD [ARGS...]\n"
                "       %s loop N DIR\n",
                argv[0], argv[0]);
        return 125;
}
