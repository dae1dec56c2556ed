/* probe: a static multi-call helper placed inside sandboxes by the integration tests.
 * `probe` / `probe report` prints what the process sees as one JSON object; the other
 * subcommands are the small actions the tests need (write, read, exit, signals, sleepers,
 * connect). It only uses libc, never crashes on a missing file, and every call that a
 * seccomp profile may deny is made with harmless arguments (mostly invalid ones, so the
 * kernel's own answer, e.g. EFAULT, differs from the filter's EPERM/ENOSYS). */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

extern char **environ;

static int first; /* JSON: no comma before the next member */

static void json_str(const char *s)
{
        putchar('"');
        for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
                if (*p == '"' || *p == '\\')
                        printf("\\%c", *p);
                else if (*p == '\n')
                        fputs("\\n", stdout);
                else if (*p == '\t')
                        fputs("\\t", stdout);
                else if (*p < 0x20 || *p >= 0x7f)
                        printf("\\u%04x", *p); /* bytes as code points: lossless enough */
                else
                        putchar(*p);
        }
        putchar('"');
}

static void key(const char *k)
{
        if (!first)
                putchar(',');
        first = 0;
        json_str(k);
        putchar(':');
}

static void kv_str(const char *k, const char *v)
{
        key(k);
        if (v)
                json_str(v);
        else
                fputs("null", stdout);
}

static void kv_int(const char *k, long long v)
{
        key(k);
        printf("%lld", v);
}

static void open_obj(const char *k)
{
        if (k)
                key(k);
        putchar('{');
        first = 1;
}

static void open_arr(const char *k)
{
        key(k);
        putchar('[');
        first = 1;
}

static void close_obj(void)
{
        putchar('}');
        first = 0;
}

static void close_arr(void)
{
        putchar(']');
        first = 0;
}

static void item_str(const char *s)
{
        if (!first)
                putchar(',');
        first = 0;
        json_str(s);
}

/* "ok" for 0, else the errno's symbolic name (glibc's table: one source of truth). */
static const char *errno_name(int e)
{
        static char buf[32];
        if (e == 0)
                return "ok";
        const char *n = strerrorname_np(e);
        if (n)
                return n;
        snprintf(buf, sizeof(buf), "E%d", e);
        return buf;
}

static int signal_number(const char *s)
{
        if (s[0] >= '0' && s[0] <= '9')
                return atoi(s);
        if (!strncmp(s, "SIG", 3))
                s += 3;
        for (int sig = 1; sig < NSIG; sig++) {
                const char *n = sigabbrev_np(sig);
                if (n && !strcmp(n, s))
                        return sig;
        }
        return -1;
}

static const char *signal_name(int sig)
{
        static char buf[24];
        const char *n = sigabbrev_np(sig);
        if (n)
                snprintf(buf, sizeof(buf), "SIG%s", n);
        else
                snprintf(buf, sizeof(buf), "SIG%d", sig);
        return buf;
}

/* The whole file, NUL-terminated, or NULL; bounded so a huge file cannot hurt. */
static char *slurp(const char *path)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return NULL;
        size_t cap = 1 << 20, len = 0;
        char *buf = malloc(cap + 1);
        if (!buf) {
                close(fd);
                return NULL;
        }
        for (;;) {
                ssize_t n = read(fd, buf + len, cap - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                len += (size_t)n;
                if (len == cap)
                        break;
        }
        close(fd);
        buf[len] = '\0';
        return buf;
}

/* The value of "Name:\t..." in /proc/self/status, whitespace trimmed. */
static void status_field(const char *status, const char *name, char *out, size_t outlen)
{
        out[0] = '\0';
        size_t nl = strlen(name);
        for (const char *p = status; p && *p;) {
                if (!strncmp(p, name, nl) && p[nl] == ':') {
                        p += nl + 1;
                        while (*p == ' ' || *p == '\t')
                                p++;
                        size_t n = strcspn(p, "\n");
                        if (n >= outlen)
                                n = outlen - 1;
                        memcpy(out, p, n);
                        out[n] = '\0';
                        return;
                }
                p = strchr(p, '\n');
                if (p)
                        p++;
        }
}

static void kv_file(const char *k, const char *path)
{
        char *s = slurp(path);
        kv_str(k, s);
        free(s);
}

static void kv_link(const char *k, const char *path)
{
        char buf[4096];
        ssize_t n = readlink(path, buf, sizeof(buf) - 1);
        if (n < 0) {
                kv_str(k, NULL);
                return;
        }
        buf[n] = '\0';
        kv_str(k, buf);
}

/* Run fn in a forked child and report how it went: fn returns an errno (0 = ok). */
static const char *in_child(int (*fn)(void))
{
        static char buf[32];
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0)
                return errno_name(errno);
        if (pid == 0)
                _exit(fn() & 0xff);
        int st;
        while (waitpid(pid, &st, 0) < 0)
                if (errno != EINTR)
                        return "ECHILD";
        if (WIFSIGNALED(st)) {
                snprintf(buf, sizeof(buf), "%s", signal_name(WTERMSIG(st)));
                return buf;
        }
        return errno_name(WEXITSTATUS(st));
}

static int pty_request; /* which ioctl the tty child issues */

/* TIOCSTI only works on the caller's controlling tty (otherwise the kernel itself says
 * EPERM), so the child makes a fresh pty its controlling terminal first. */
static int tty_child(void)
{
        if (setsid() < 0)
                return errno;
        int m = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (m < 0)
                return errno;
        if (unlockpt(m) < 0)
                return errno;
        char *name = ptsname(m);
        if (!name)
                return errno;
        int s = open(name, O_RDWR | O_CLOEXEC); /* no O_NOCTTY: becomes ours */
        if (s < 0)
                return errno;
        ioctl(s, TIOCSCTTY, 0);
        char c = ' ';
        char sub = 0x7f; /* no such TIOCLINUX subcode: harmless where it reaches the kernel */
        long r;
        if (pty_request == 0)
                r = syscall(SYS_ioctl, s, (unsigned long)TIOCSTI, &c);
        else if (pty_request == 1)
                r = syscall(SYS_ioctl, s, 0x100000000UL | TIOCSTI, &c);
        else if (pty_request == 2)
                r = syscall(SYS_ioctl, s, (unsigned long)TIOCLINUX, &sub);
        else {
                int ldisc = N_TTY; /* what it has: harmless where it reaches the kernel */
                r = syscall(SYS_ioctl, s, 0x100000000UL | TIOCSETD, &ldisc);
        }
        return r < 0 ? errno : 0;
}

static int unshare_user_child(void)
{
        return unshare(CLONE_NEWUSER) < 0 ? errno : 0;
}

/* mount needs CAP_SYS_ADMIN, which only a nested user namespace gives back; the result
 * reported is the mount call's own. */
static int mount_child(void)
{
        unshare(CLONE_NEWUSER | CLONE_NEWNS);
        return mount("probe", "/tmp", "tmpfs", 0, "size=16k") < 0 ? errno : 0;
}

#ifdef __x86_64__
static int keyctl_i386_child(void)
{
        long ret = 288; /* i386 __NR_keyctl; KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING */
        __asm__ volatile("int $0x80" : "+a"(ret) : "b"(0), "c"(-3), "d"(0) : "memory");
        return ret < 0 && ret > -4096 ? (int)-ret : 0;
}

/* In a child too: a filter that denies the x32 ABI whole kills the caller. */
static int keyctl_x32_child(void)
{
        return syscall(0x40000000 | SYS_keyctl, 0, -3, 0) < 0 ? errno : 0;
}
#endif

static const char *sys_result(long r)
{
        return errno_name(r < 0 ? errno : 0);
}

static void report_blocked(void)
{
        open_obj("blocked");
        pty_request = 0;
        kv_str("tiocsti", in_child(tty_child));
        pty_request = 1;
        kv_str("tiocsti_high", in_child(tty_child));
        pty_request = 2;
        kv_str("tioclinux", in_child(tty_child));
        kv_str("keyctl", sys_result(syscall(SYS_keyctl, 0 /* GET_KEYRING_ID */, -3, 0)));
        /* A NULL type is refused by the kernel with EFAULT before any key is made. */
        kv_str("add_key", sys_result(syscall(SYS_add_key, NULL, "probe", "x", 1, -2)));
        kv_str("bpf", sys_result(syscall(SYS_bpf, 0x7fff, NULL, 0)));
        kv_str("perf_event_open", sys_result(syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0)));
        /* UFFD_USER_MODE_ONLY passes the sysctl gate; the O_RDWR bit makes it EINVAL. */
        kv_str("userfaultfd", sys_result(syscall(SYS_userfaultfd, 1 | O_RDWR)));
        kv_str("io_uring_setup", sys_result(syscall(SYS_io_uring_setup, 1, NULL)));
        kv_str("clone3", sys_result(syscall(SYS_clone3, NULL, 0)));
        kv_str("unshare_user", in_child(unshare_user_child));
        kv_str("mount", in_child(mount_child));
#ifdef __x86_64__
        kv_str("keyctl_x32", in_child(keyctl_x32_child));
        kv_str("keyctl_i386", in_child(keyctl_i386_child));
#endif
        pty_request = 3;
        kv_str("tiocsetd_high", in_child(tty_child));
        close_obj();
}

static void report_interfaces(void)
{
        open_arr("interfaces");
        FILE *f = fopen("/proc/net/dev", "re");
        int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        char line[512];
        int lineno = 0;
        while (f && fgets(line, sizeof(line), f)) {
                if (++lineno <= 2)
                        continue; /* two header lines */
                char *colon = strchr(line, ':');
                if (!colon)
                        continue;
                *colon = '\0';
                char *name = line + strspn(line, " ");
                if (!first)
                        putchar(',');
                putchar('{');
                first = 1;
                kv_str("name", name);
                struct ifreq ifr;
                memset(&ifr, 0, sizeof(ifr));
                snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
                key("up");
                if (sock >= 0 && ioctl(sock, SIOCGIFFLAGS, &ifr) == 0)
                        fputs(ifr.ifr_flags & IFF_UP ? "true" : "false", stdout);
                else
                        fputs("null", stdout);
                close_obj();
        }
        if (f)
                fclose(f);
        if (sock >= 0)
                close(sock);
        close_arr();
}

static void report_lines(const char *k, const char *path)
{
        open_arr(k);
        char *s = slurp(path);
        for (char *p = s, *nl; p && *p; p = nl + 1) {
                nl = strchr(p, '\n');
                if (nl)
                        *nl = '\0';
                item_str(p);
                if (!nl)
                        break;
        }
        free(s);
        close_arr();
}

/* Numeric entries of /proc (the processes this pid namespace sees) and open fds. */
static void report_dir_numbers(const char *k, const char *path, int with_target)
{
        open_arr(k);
        DIR *d = opendir(path);
        while (d) {
                struct dirent *e = readdir(d);
                if (!e)
                        break;
                if (e->d_name[0] < '0' || e->d_name[0] > '9')
                        continue;
                if (with_target && atoi(e->d_name) == dirfd(d))
                        continue;
                if (!first)
                        putchar(',');
                if (!with_target) {
                        printf("%d", atoi(e->d_name));
                        first = 0;
                        continue;
                }
                putchar('{');
                first = 1;
                kv_int("fd", atoi(e->d_name));
                char p[512];
                snprintf(p, sizeof(p), "%s/%s", path, e->d_name);
                kv_link("target", p);
                close_obj();
        }
        if (d)
                closedir(d);
        close_arr();
}

/* NUL-separated arguments as an array. */
static void report_cmdline(const char *k, const char *path)
{
        char buf[4096];
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
        if (fd >= 0)
                close(fd);
        open_arr(k);
        for (ssize_t i = 0; i < n; i += (ssize_t)strlen(buf + i) + 1) {
                buf[n] = '\0';
                item_str(buf + i);
        }
        close_arr();
}

/* "writable": {PATH: errno of opening it for appending, without creating or writing}. */
static void report_writable(const char *paths)
{
        char buf[8192];

        if (!paths)
                return;
        snprintf(buf, sizeof(buf), "%s", paths);
        open_obj("writable");
        for (char *save = NULL, *p = strtok_r(buf, ":", &save); p; p = strtok_r(NULL, ":", &save)) {
                int fd = open(p, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOCTTY);
                kv_str(p, errno_name(fd < 0 ? errno : 0));
                if (fd >= 0)
                        close(fd);
        }
        close_obj();
}

static int report(int argc, char **argv)
{
        char *status = slurp("/proc/self/status");
        char buf[256];
        open_obj(NULL);
        /* First, before this probe forks anything. */
        report_dir_numbers("procs", "/proc", 0);
        report_dir_numbers("fds", "/proc/self/fd", 1);
        kv_int("uid", getuid());
        kv_int("gid", getgid());
        kv_int("euid", geteuid());
        kv_int("egid", getegid());
        open_arr("groups");
        gid_t groups[256];
        int n = getgroups(256, groups);
        for (int i = 0; i < n; i++) {
                printf("%s%u", first ? "" : ",", (unsigned)groups[i]);
                first = 0;
        }
        close_arr();
        kv_file("uid_map", "/proc/self/uid_map");
        kv_file("gid_map", "/proc/self/gid_map");
        kv_file("setgroups", "/proc/self/setgroups");
        open_obj("caps");
        static const char *const caps[] = {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"};
        for (size_t i = 0; i < 5; i++) {
                status_field(status, caps[i], buf, sizeof(buf));
                kv_str(caps[i], status ? buf : NULL);
        }
        close_obj();
        status_field(status, "NoNewPrivs", buf, sizeof(buf));
        kv_int("no_new_privs", buf[0] ? atoi(buf) : -1);
        status_field(status, "Seccomp", buf, sizeof(buf));
        kv_int("seccomp", buf[0] ? atoi(buf) : -1);
        kv_int("prctl_no_new_privs", prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0));
        status_field(status, "SigBlk", buf, sizeof(buf));
        kv_str("sigblk", buf);
        status_field(status, "SigIgn", buf, sizeof(buf));
        kv_str("sigign", buf);
        kv_int("pid", getpid());
        kv_int("ppid", getppid());
        kv_file("pid1_comm", "/proc/1/comm");
        report_cmdline("pid1_cmdline", "/proc/1/cmdline");
        open_obj("ns");
        static const char *const nss[] = {"user", "mnt", "pid", "ipc", "uts", "net", "cgroup"};
        for (size_t i = 0; i < sizeof(nss) / sizeof(nss[0]); i++) {
                char p[64];
                snprintf(p, sizeof(p), "/proc/self/ns/%s", nss[i]);
                kv_link(nss[i], p);
        }
        close_obj();
        struct utsname u;
        kv_str("hostname", uname(&u) == 0 ? u.nodename : NULL);
        char cwd[4096];
        kv_str("cwd", getcwd(cwd, sizeof(cwd)));
        open_arr("argv");
        for (int i = 0; i < argc; i++)
                item_str(argv[i]);
        close_arr();
        open_obj("env");
        for (char **e = environ; e && *e; e++) {
                char *eq = strchr(*e, '=');
                if (!eq)
                        continue;
                *eq = '\0';
                kv_str(*e, eq + 1);
                *eq = '=';
        }
        close_obj();
        report_lines("mountinfo", "/proc/self/mountinfo");
        report_interfaces();
        report_blocked();
        report_writable(getenv("CSB_FAKE_CLAUDE_WRITABLE"));
        close_obj();
        putchar('\n');
        free(status);
        return 0;
}

static int cmd_write(const char *path, const char *content)
{
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0644);
        int e = 0;
        if (fd < 0)
                e = errno;
        else if (write(fd, content, strlen(content)) < 0 || close(fd) < 0)
                e = errno;
        printf("{\"errno\":\"%s\"}\n", errno_name(e));
        return 0;
}

static int cmd_setxattr(const char *path, const char *name, const char *value)
{
        int e = setxattr(path, name, value, strlen(value), 0) < 0 ? errno : 0;

        printf("{\"errno\":\"%s\"}\n", errno_name(e));
        return 0;
}

static int cmd_read(const char *path)
{
        errno = 0;
        char *s = slurp(path);
        open_obj(NULL);
        kv_str("errno", errno_name(s ? 0 : errno));
        kv_str("content", s);
        close_obj();
        putchar('\n');
        free(s);
        return 0;
}

static int cmd_stat(const char *path)
{
        struct stat st;
        open_obj(NULL);
        if (lstat(path, &st) < 0) {
                kv_str("errno", errno_name(errno));
                close_obj();
                putchar('\n');
                return 0;
        }
        kv_str("errno", "ok");
        const char *type = S_ISREG(st.st_mode)   ? "file"
                           : S_ISDIR(st.st_mode) ? "dir"
                           : S_ISLNK(st.st_mode) ? "symlink"
                           : S_ISCHR(st.st_mode) ? "char"
                           : S_ISBLK(st.st_mode) ? "block"
                                                 : "other";
        kv_str("type", type);
        char mode[8];
        snprintf(mode, sizeof(mode), "%04o", (unsigned)(st.st_mode & 07777));
        kv_str("mode", mode);
        kv_int("uid", st.st_uid);
        kv_int("gid", st.st_gid);
        kv_int("size", st.st_size);
        kv_link("target", path);
        close_obj();
        putchar('\n');
        return 0;
}

static int cmd_ls(const char *path)
{
        DIR *d = opendir(path);
        open_obj(NULL);
        kv_str("errno", errno_name(d ? 0 : errno));
        open_arr("entries");
        while (d) {
                struct dirent *e = readdir(d);
                if (!e)
                        break;
                if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
                        item_str(e->d_name);
        }
        if (d)
                closedir(d);
        close_arr();
        close_obj();
        putchar('\n');
        return 0;
}

static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
        got_signal = sig;
}

/* Prints "ready", waits for one signal, prints its name, then dies of it (exit 128+N where
 * its default is to be ignored), so both the delivery and the exit status are visible. */
static int cmd_wait_signal(void)
{
        static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH};
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_signal;
        for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
                sigaction(sigs[i], &sa, NULL);
        puts("ready");
        fflush(stdout);
        while (!got_signal)
                pause();
        int sig = got_signal;
        puts(signal_name(sig));
        fflush(stdout);
        signal(sig, SIG_DFL);
        if (sig != SIGWINCH) {
                sigset_t set;
                sigemptyset(&set);
                sigaddset(&set, sig);
                sigprocmask(SIG_UNBLOCK, &set, NULL);
                raise(sig);
        }
        return 128 + sig;
}

static void sleep_seconds(const char *s)
{
        unsigned left = (unsigned)atoi(s);
        while (left > 0)
                left = sleep(left);
}

/* A grandchild (re-exec'd, so the marker is in its argv) that outlives its parent. */
static int cmd_spawn_sleeper(const char *seconds, const char *marker, int then_exit)
{
        fflush(stdout);
        pid_t child = fork();
        if (child == 0) {
                if (fork() == 0) {
                        execl("/proc/self/exe", "probe", "sleep", seconds, marker, (char *)NULL);
                        _exit(127);
                }
                _exit(0);
        }
        if (child > 0)
                waitpid(child, NULL, 0);
        puts("ready");
        fflush(stdout);
        if (!then_exit)
                sleep_seconds(seconds);
        return 0;
}

/* A connect that gives up after 3 s, so an address that drops packets answers quickly. */
static int connect_bounded(int fd, const struct sockaddr *sa, socklen_t len)
{
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int e = 0;
        socklen_t el = sizeof(e);

        fcntl(fd, F_SETFL, O_NONBLOCK);
        if (connect(fd, sa, len) == 0)
                return 0;
        if (errno != EINPROGRESS)
                return errno;
        if (poll(&p, 1, 3000) <= 0)
                return ETIMEDOUT;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) < 0)
                return errno;
        return e;
}

static int parse_addr(const char *host, const char *port, struct sockaddr_storage *ss,
                      socklen_t *len)
{
        struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

        memset(ss, 0, sizeof(*ss));
        if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
                in4->sin_family = AF_INET;
                in4->sin_port = htons((uint16_t)atoi(port));
                *len = sizeof(*in4);
                return 0;
        }
        if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
                in6->sin6_family = AF_INET6;
                in6->sin6_port = htons((uint16_t)atoi(port));
                *len = sizeof(*in6);
                return 0;
        }
        return -1;
}

static int cmd_connect(const char *host, const char *port)
{
        struct sockaddr_storage ss;
        socklen_t len;
        int fd, e;

        if (parse_addr(host, port, &ss, &len) < 0) {
                printf("{\"errno\":\"EINVAL\"}\n");
                return 0;
        }
        fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        e = fd < 0 ? errno : connect_bounded(fd, (struct sockaddr *)&ss, len);
        if (fd >= 0)
                close(fd);
        printf("{\"errno\":\"%s\"}\n", errno_name(e));
        return 0;
}

/* connect-unix NAME: a leading @ names an abstract socket. */
static int cmd_connect_unix(const char *name)
{
        struct sockaddr_un sun = {.sun_family = AF_UNIX};
        size_t n = strlen(name);
        socklen_t len;
        int fd, e;

        if (n >= sizeof(sun.sun_path))
                return 2;
        memcpy(sun.sun_path, name, n);
        if (name[0] == '@')
                sun.sun_path[0] = '\0';
        len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        e = fd < 0 ? errno : (connect(fd, (struct sockaddr *)&sun, len) < 0 ? errno : 0);
        if (fd >= 0)
                close(fd);
        printf("{\"errno\":\"%s\"}\n", errno_name(e));
        return 0;
}

/* dns-a NAME SERVER: one UDP query for an A record; prints the first answer's address. */
static int cmd_dns_a(const char *name, const char *server)
{
        unsigned char q[512], a[1500];
        struct sockaddr_storage ss;
        struct pollfd p;
        socklen_t len;
        size_t n = 12;
        ssize_t got;
        char addr[INET_ADDRSTRLEN] = "";
        int fd, e = 0;

        memset(q, 0, sizeof(q));
        q[0] = 0x43, q[1] = 0x53; /* id */
        q[2] = 0x01;              /* recursion desired */
        q[5] = 1;                 /* one question */
        for (const char *l = name; *l;) {
                const char *dot = strchr(l, '.');
                size_t ln = dot ? (size_t)(dot - l) : strlen(l);

                if (ln == 0 || ln > 63 || n + ln + 6 > sizeof(q))
                        return 2;
                q[n++] = (unsigned char)ln;
                memcpy(q + n, l, ln);
                n += ln;
                l += ln + (dot ? 1 : 0);
        }
        q[n++] = 0;
        q[n++] = 0, q[n++] = 1; /* type A */
        q[n++] = 0, q[n++] = 1; /* class IN */
        if (parse_addr(server, "53", &ss, &len) < 0)
                return 2;
        fd = socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || sendto(fd, q, n, 0, (struct sockaddr *)&ss, len) < 0) {
                e = errno;
        } else {
                p.fd = fd;
                p.events = POLLIN;
                if (poll(&p, 1, 3000) <= 0) {
                        e = ETIMEDOUT;
                } else if ((got = recv(fd, a, sizeof(a), 0)) < 12) {
                        e = got < 0 ? errno : EPROTO;
                } else {
                        /* Skip the question, then take the first A answer. */
                        size_t i = n;
                        unsigned ancount = (unsigned)(a[6] << 8 | a[7]);

                        for (unsigned k = 0; k < ancount && i + 12 <= (size_t)got; k++) {
                                unsigned type, rdlen;

                                if ((a[i] & 0xc0) == 0xc0)
                                        i += 2;
                                else
                                        while (i < (size_t)got && a[i])
                                                i += a[i] + 1u;
                                if (i + 10 > (size_t)got)
                                        break;
                                type = (unsigned)(a[i] << 8 | a[i + 1]);
                                rdlen = (unsigned)(a[i + 8] << 8 | a[i + 9]);
                                i += 10;
                                if (type == 1 && rdlen == 4 && i + 4 <= (size_t)got) {
                                        inet_ntop(AF_INET, a + i, addr, sizeof(addr));
                                        break;
                                }
                                i += rdlen;
                        }
                }
        }
        if (fd >= 0)
                close(fd);
        printf("{\"errno\":\"%s\",\"address\":\"%s\"}\n", errno_name(e), addr);
        return 0;
}

/* Terminal subcommands (the pty relay's tests). */

static void tty_raw(int fd)
{
        struct termios t;
        if (tcgetattr(fd, &t) == 0) {
                cfmakeraw(&t);
                tcsetattr(fd, TCSANOW, &t);
        }
}

static void write_all(int fd, const void *buf, size_t len)
{
        const char *p = buf;
        while (len > 0) {
                ssize_t n = write(fd, p, len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return;
                p += n;
                len -= (size_t)n;
        }
}

/* Which fds are terminals, the window size, the process group and session as seen inside. */
static int cmd_tty_info(void)
{
        struct winsize ws = {0};
        first = 1;
        putchar('{');
        open_arr("isatty");
        for (int fd = 0; fd < 3; fd++)
                printf("%s%d", fd ? "," : "", isatty(fd));
        close_arr();
        ioctl(0, TIOCGWINSZ, &ws);
        kv_int("rows", ws.ws_row);
        kv_int("cols", ws.ws_col);
        kv_int("foreground", tcgetpgrp(0) == getpgrp());
        kv_int("pgrp_leader", getpgrp() == getpid());
        kv_int("session_leader", getsid(0) == getpid());
        close_obj();
        putchar('\n');
        return 0;
}

/* Raw stdin, "ready", then exactly N bytes copied from stdin to stdout as they come. */
static int cmd_tty_echo(const char *count)
{
        long left = atol(count);
        char buf[4096];
        tty_raw(0);
        write_all(1, "ready\n", 6);
        while (left > 0) {
                ssize_t n = read(0, buf, left < (long)sizeof(buf) ? (size_t)left : sizeof(buf));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return 1;
                write_all(1, buf, (size_t)n);
                left -= n;
        }
        return 0;
}

/* "size ROWS COLS" at the start and after each of COUNT SIGWINCHes. */
static int cmd_tty_winch(const char *count)
{
        int left = atoi(count);
        sigset_t set;
        int sig;
        sigemptyset(&set);
        sigaddset(&set, SIGWINCH);
        sigprocmask(SIG_BLOCK, &set, NULL);
        for (;;) {
                struct winsize ws = {0};
                ioctl(1, TIOCGWINSZ, &ws);
                printf("size %d %d\n", ws.ws_row, ws.ws_col);
                fflush(stdout);
                if (left-- <= 0)
                        return 0;
                sigwait(&set, &sig);
        }
}

/* As a full-screen program killed mid-session: raw mode, the alternate screen, a hidden
 * cursor, bracketed paste, mouse reports and a kitty keyboard push, then "ready" and sleep. */
static int cmd_tty_modes(const char *seconds)
{
        static const char on[] = "\033[?1049h\033[?25l\033[?2004h\033[?1000;1006h\033[>1u";
        tty_raw(0);
        write_all(1, on, sizeof(on) - 1);
        write_all(1, "ready\n", 6);
        sleep_seconds(seconds);
        return 0;
}

static const char *tty_attack_one(int fd)
{
        struct termios t;
        if (tcgetattr(fd, &t) < 0)
                return errno_name(errno);
        t.c_lflag &= ~(tcflag_t)(ECHO | ICANON);
        t.c_cc[VINTR] = _POSIX_VDISABLE;
        t.c_cc[VEOF] = 'q';
        if (tcsetattr(fd, TCSANOW, &t) < 0)
                return errno_name(errno);
        if (tcsetpgrp(fd, getpgrp()) < 0)
                return errno_name(errno);
        return "ok";
}

/* What a hostile payload does to every terminal it can reach: its stdio and /dev/tty. */
static int cmd_tty_attack(void)
{
        int tty = open("/dev/tty", O_RDWR | O_NOCTTY);
        int ldisc = 27; /* N_NULL: the terminal drops everything from then on */
        signal(SIGTTOU, SIG_IGN);
        first = 1;
        putchar('{');
        kv_str("fd0", tty_attack_one(0));
        kv_str("fd1", tty_attack_one(1));
        kv_str("fd2", tty_attack_one(2));
        kv_str("dev_tty", tty < 0 ? errno_name(errno) : tty_attack_one(tty));
        kv_str("tiocsetd", sys_result(syscall(SYS_ioctl, 0, (unsigned long)TIOCSETD, &ldisc)));
        close_obj();
        putchar('\n');
        return 0;
}

/* Process-group calls on "my group" (0): they must reach nobody outside the sandbox. */
static int cmd_pgrp_attack(void)
{
        signal(SIGTERM, SIG_IGN);
        signal(SIGHUP, SIG_IGN);
        first = 1;
        putchar('{');
        kv_str("setpriority", sys_result(setpriority(PRIO_PGRP, 0, 19)));
        /* IOPRIO_WHO_PGRP, IOPRIO_CLASS_IDLE */
        kv_str("ioprio_set", sys_result(syscall(SYS_ioprio_set, 2, 0, 3 << 13)));
        kv_str("kill_term", sys_result(kill(0, SIGTERM)));
        kv_str("kill_hup", sys_result(kill(0, SIGHUP)));
        close_obj();
        putchar('\n');
        return 0;
}

static int usage(void)
{
        fputs("usage: probe [report [ARG...]] | write PATH [CONTENT] | read PATH | setxattr PATH "
              "NAME VALUE | stat PATH |"
              " ls PATH | exit N | kill-self SIG | wait-signal | sleep SECONDS |"
              " spawn-sleeper SECONDS MARKER [--exit] | connect HOST PORT | connect-unix NAME |"
              " dns-a NAME SERVER | tty-info | tty-echo N | tty-winch COUNT |"
              " tty-modes SECONDS | tty-attack | pgrp-attack | as UID GID PROG [ARG...]\n",
              stderr);
        return 2;
}

/* As a fake claude: POST to every http hook URL in the --settings JSON, as claude would run
 * the hook (the network tests check it arrives on the host). */
static void fake_claude_hooks(int argc, char **argv)
{
        for (int i = 1; i + 1 < argc; i++) {
                const char *p;

                if (strcmp(argv[i], "--settings") != 0)
                        continue;
                for (p = argv[i + 1]; (p = strstr(p, "\"url\": \"http://")); p++) {
                        char host[256], port[16] = "80", path[1024] = "/";
                        const char *h = p + strlen("\"url\": \"http://"), *end = strchr(h, '"');
                        const char *slash, *colon, *at;
                        struct sockaddr_storage ss;
                        socklen_t len;
                        char req[1400];
                        int fd;

                        if (!end)
                                break;
                        slash = memchr(h, '/', (size_t)(end - h));
                        if (!slash)
                                slash = end;
                        at = memchr(h, '@', (size_t)(slash - h));
                        if (at)
                                h = at + 1;
                        colon = memchr(h, ':', (size_t)(slash - h));
                        snprintf(host, sizeof(host), "%.*s", (int)((colon ? colon : slash) - h), h);
                        if (colon)
                                snprintf(port, sizeof(port), "%.*s", (int)(slash - colon - 1),
                                         colon + 1);
                        if (slash < end)
                                snprintf(path, sizeof(path), "%.*s", (int)(end - slash), slash);
                        if (parse_addr(host, port, &ss, &len) < 0)
                                continue;
                        fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
                        if (fd < 0)
                                continue;
                        if (connect_bounded(fd, (struct sockaddr *)&ss, len) == 0) {
                                fcntl(fd, F_SETFL, 0);
                                snprintf(req, sizeof(req),
                                         "POST %s HTTP/1.0\r\nContent-Length: 2\r\n\r\n{}", path);
                                if (write(fd, req, strlen(req)) > 0)
                                        (void)!read(fd, req, sizeof(req));
                        }
                        close(fd);
                }
        }
}

/* As a fake claude: add an MCP server to the profile's .claude.json, as a session could. */
static void fake_claude_mcp_add(const char *name)
{
        char path[4096];
        const char *dir = getenv("CLAUDE_CONFIG_DIR");
        FILE *f;

        snprintf(path, sizeof(path), "%s/.claude.json", dir ? dir : ".");
        f = fopen(path, "w");
        if (f) {
                fprintf(f, "{\"mcpServers\": {\"%s\": {\"command\": \"/bin/true\"}}}\n", name);
                fclose(f);
        }
}

/* as UID GID PROG ARG...: run PROG as UID:GID with no supplementary groups, as su or
 * runuser would in a RUN step (a build's root switching to a user). */
static int cmd_as(char **argv)
{
        uid_t uid = (uid_t)strtoul(argv[2], NULL, 10);
        gid_t gid = (gid_t)strtoul(argv[3], NULL, 10);

        if (setgroups(0, NULL) < 0 || setgid(gid) < 0 || setuid(uid) < 0) {
                perror("probe as");
                return 125;
        }
        execv(argv[4], argv + 4);
        perror("probe as: exec");
        return 127;
}

int main(int argc, char **argv)
{
        const char *cmd = argc > 1 ? argv[1] : "report";
        const char *base = strrchr(argv[0], '/');

        /* Placed as `claude` (csandbox run's tests): report what claude would see. */
        if (strcmp(base ? base + 1 : argv[0], "claude") == 0) {
                const char *exit_code = getenv("CSB_FAKE_CLAUDE_EXIT");

                if (getenv("CSB_FAKE_CLAUDE_HOOK"))
                        fake_claude_hooks(argc, argv);
                if (getenv("CSB_FAKE_CLAUDE_MCP_ADD"))
                        fake_claude_mcp_add(getenv("CSB_FAKE_CLAUDE_MCP_ADD"));
                if (getenv("CSB_FAKE_CLAUDE_TTY"))
                        return cmd_tty_info();
                report(argc, argv);
                return exit_code ? atoi(exit_code) : 0;
        }
        if (!strcmp(cmd, "report"))
                return report(argc, argv);
        if (!strcmp(cmd, "write") && argc >= 3)
                return cmd_write(argv[2], argc >= 4 ? argv[3] : "probe\n");
        if (!strcmp(cmd, "as") && argc >= 5)
                return cmd_as(argv);
        if (!strcmp(cmd, "read") && argc >= 3)
                return cmd_read(argv[2]);
        if (!strcmp(cmd, "setxattr") && argc >= 5)
                return cmd_setxattr(argv[2], argv[3], argv[4]);
        if (!strcmp(cmd, "stat") && argc >= 3)
                return cmd_stat(argv[2]);
        if (!strcmp(cmd, "ls") && argc >= 3)
                return cmd_ls(argv[2]);
        if (!strcmp(cmd, "exit") && argc >= 3)
                return atoi(argv[2]);
        if (!strcmp(cmd, "kill-self") && argc >= 3) {
                int sig = signal_number(argv[2]);
                if (sig <= 0)
                        return usage();
                sigset_t set;
                sigemptyset(&set);
                sigaddset(&set, sig);
                signal(sig, SIG_DFL);
                sigprocmask(SIG_UNBLOCK, &set, NULL);
                kill(getpid(), sig);
                return 1; /* still alive: the signal was not fatal */
        }
        if (!strcmp(cmd, "wait-signal"))
                return cmd_wait_signal();
        if (!strcmp(cmd, "sleep") && argc >= 3) {
                sleep_seconds(argv[2]);
                return 0;
        }
        if (!strcmp(cmd, "spawn-sleeper") && argc >= 4)
                return cmd_spawn_sleeper(argv[2], argv[3], argc >= 5 && !strcmp(argv[4], "--exit"));
        if (!strcmp(cmd, "connect") && argc >= 4)
                return cmd_connect(argv[2], argv[3]);
        if (!strcmp(cmd, "connect-unix") && argc >= 3)
                return cmd_connect_unix(argv[2]);
        if (!strcmp(cmd, "dns-a") && argc >= 4)
                return cmd_dns_a(argv[2], argv[3]);
        if (!strcmp(cmd, "tty-info"))
                return cmd_tty_info();
        if (!strcmp(cmd, "tty-echo") && argc >= 3)
                return cmd_tty_echo(argv[2]);
        if (!strcmp(cmd, "tty-winch") && argc >= 3)
                return cmd_tty_winch(argv[2]);
        if (!strcmp(cmd, "tty-modes") && argc >= 3)
                return cmd_tty_modes(argv[2]);
        if (!strcmp(cmd, "tty-attack"))
                return cmd_tty_attack();
        if (!strcmp(cmd, "pgrp-attack"))
                return cmd_pgrp_attack();
        return usage();
}
