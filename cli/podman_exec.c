/* `podman exec`: a command in a running container, as nsenter runs one. The container's
 * supervisor (its record's pid) has the container's pid 1 as a child, and pid 1 the
 * payload: from a pidfd of the payload, setns joins its user, mount, pid, ipc, uts, net and
 * cgroup namespaces at once (pid 1 is csandbox's own, not dumpable, so the kernel would not
 * let us in through it). The command then gets what the payload got: the container's root,
 * its one id, its environment and directory, no capability, no_new_privs and the default
 * seccomp filter. With -t it gets a pty of the container's own devpts, relayed as run -t
 * relays: the caller's terminal is never handed in. */
#include "podman.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"
#include "../image/store/store.h"
#include "../policy/seccomp.h"

#include <cap-ng.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#ifndef TIOCGPTPEER
#define TIOCGPTPEER _IO('T', 0x41)
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

static const char usage_exec[] =
    "Usage: %s exec [OPTIONS] CONTAINER COMMAND [ARG...]\n"
    "\n"
    "  -i, --interactive          keep stdin connected (else it is /dev/null)\n"
    "  -t, --tty                  a terminal of the container's own\n"
    "  -u, --user USER[:GROUP]    the container's /etc/passwd names or ids; the container\n"
    "                             has one id (its run's --user), so only that one\n"
    "  -w, --workdir DIR          working directory (default: the container's)\n"
    "  -e, --env NAME=VALUE|NAME  set a variable (NAME alone: your value, if set)\n"
    "\n"
    "The container is one of run -d's (ps lists them).\n";

struct exec_opts {
        bool interactive, tty, help;
        const char *user, *workdir;
        char **env; /* NAME=VALUE */
        size_t n_env;
};

static int strv_push_owned(struct exec_opts *o, char *item);

static int perr(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int perr(int status, const char *fmt, ...)
{
        va_list ap;

        fputs("Error: ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        return status;
}

static int add_env(struct exec_opts *o, const char *v)
{
        const char *eq = strchr(v, '=');
        char *item;

        if (v[0] == '\0' || v[0] == '=')
                return perr(CS_EXIT_SETUP, "exec: --env `%s`: expected NAME=VALUE or NAME", v);
        if (!eq) {
                const char *val = getenv(v); /* podman: NAME alone takes the caller's value */

                if (!val)
                        return 0;
                if (asprintf(&item, "%s=%s", v, val) < 0)
                        return CS_EXIT_SETUP;
        } else if (!(item = strdup(v))) {
                return CS_EXIT_SETUP;
        }
        if (strv_push_owned(o, item) < 0)
                return CS_EXIT_SETUP;
        return 0;
}

/* exec's options end at the container's name: what follows is the command's. Returns the
 * index of the container's name, or -(status+1) (0 after --help). */
static int parse(int argc, char **argv, struct exec_opts *o)
{
        int i;

        for (i = 1; i < argc; i++) {
                const char *a = argv[i], *v = NULL;

                if (strcmp(a, "--") == 0)
                        return i + 1;
                if (a[0] != '-' || a[1] == '\0')
                        return i;
                if (a[1] == '-') {
                        const char *eq = strchr(a, '=');
                        size_t len = eq ? (size_t)(eq - a) : strlen(a);
                        char name[32];

                        snprintf(name, sizeof(name), "%.*s", (int)(len < 31 ? len : 31), a);
                        if (strcmp(name, "--interactive") == 0 || strcmp(name, "--tty") == 0 ||
                            strcmp(name, "--help") == 0) {
                                bool on = !eq || strcmp(eq + 1, "true") == 0;

                                if (eq && !on && strcmp(eq + 1, "false") != 0)
                                        return -(perr(CS_EXIT_SETUP,
                                                      "exec: %s: expected true or false", a) +
                                                 1);
                                if (name[2] == 'i')
                                        o->interactive = on;
                                else if (name[2] == 't')
                                        o->tty = on;
                                else
                                        o->help = on;
                                if (o->help)
                                        return -1;
                                continue;
                        }
                        if (strcmp(name, "--user") != 0 && strcmp(name, "--workdir") != 0 &&
                            strcmp(name, "--env") != 0)
                                return -(perr(CS_EXIT_SETUP,
                                              "exec: %s is not supported by csandbox's podman "
                                              "(-i, -t, -u, -w, -e are)",
                                              name) +
                                         1);
                        v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
                        if (!v)
                                return -(perr(CS_EXIT_SETUP, "exec: %s needs a value", name) + 1);
                        if (name[2] == 'u')
                                o->user = v;
                        else if (name[2] == 'w')
                                o->workdir = v;
                        else if (add_env(o, v) != 0)
                                return -(CS_EXIT_SETUP + 1);
                        continue;
                }
                for (const char *p = a + 1; *p; p++) {
                        if (*p == 'i' || *p == 't') {
                                *(*p == 'i' ? &o->interactive : &o->tty) = true;
                                continue;
                        }
                        if (*p == 'h')
                                return o->help = true, -1;
                        if (*p != 'u' && *p != 'w' && *p != 'e')
                                return -(perr(CS_EXIT_SETUP,
                                              "exec: -%c is not supported by csandbox's podman "
                                              "(-i, -t, -u, -w, -e are)",
                                              *p) +
                                         1);
                        v = p[1] ? p + 1 : (i + 1 < argc ? argv[++i] : NULL);
                        if (!v)
                                return -(perr(CS_EXIT_SETUP, "exec: -%c needs a value", *p) + 1);
                        if (*p == 'u')
                                o->user = v;
                        else if (*p == 'w')
                                o->workdir = v;
                        else if (add_env(o, v) != 0)
                                return -(CS_EXIT_SETUP + 1);
                        break;
                }
        }
        return i;
}

/* pid's parent and its depth in pid namespaces (NSpid's count); false: gone. */
static bool proc_parent(pid_t pid, pid_t *ppid, int *depth)
{
        char path[64], line[256];
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        f = fopen(path, "re");
        if (!f)
                return false;
        *ppid = -1;
        *depth = 0;
        while (fgets(line, sizeof(line), f)) {
                if (strncmp(line, "PPid:", 5) == 0)
                        *ppid = (pid_t)atoi(line + 5);
                else if (strncmp(line, "NSpid:", 6) == 0)
                        for (char *c = strtok(line + 6, " \t\n"); c; c = strtok(NULL, " \t\n"))
                                ++*depth;
        }
        fclose(f);
        return true;
}

/* A child of parent seen in depth pid namespaces, -1 if none. */
static pid_t child_at(pid_t parent, int depth)
{
        _cleanup_closedir_ DIR *d = opendir("/proc");
        struct dirent *de;

        while (d && (de = readdir(d))) {
                pid_t pid = (pid_t)atoi(de->d_name), ppid;
                int dep;

                if (pid > 0 && proc_parent(pid, &ppid, &dep) && ppid == parent && dep == depth)
                        return pid;
        }
        return -1;
}

/* The container's environment (the payload's, NUL-separated), then -e's. */
static char **build_env(pid_t member, const struct exec_opts *o)
{
        _cleanup_free_ char *buf = NULL;
        struct cs_error err = {0};
        char path[64], **env;
        size_t len = 0, n = 0, cap;

        snprintf(path, sizeof(path), "/proc/%d/environ", (int)member);
        if (cs_read_file_at(AT_FDCWD, path, 1u << 20, true, &buf, &len, &err) < 0)
                return NULL;
        cap = o->n_env + 1;
        for (size_t i = 0; i < len; i++)
                cap += buf[i] == '\0';
        env = calloc(cap + 1, sizeof(char *));
        if (!env)
                return NULL;
        for (size_t i = 0; i < len; i += strlen(buf + i) + 1)
                if (strchr(buf + i, '='))
                        env[n++] = strdup(buf + i);
        for (size_t k = 0; k < o->n_env; k++) {
                size_t klen = (size_t)(strchr(o->env[k], '=') - o->env[k]) + 1;
                size_t j;

                for (j = 0; j < n; j++)
                        if (env[j] && strncmp(env[j], o->env[k], klen) == 0)
                                break;
                free(j < n ? env[j] : NULL);
                env[j] = strdup(o->env[k]);
                if (j == n)
                        n++;
        }
        return env;
}

/* In the container's namespaces: -u USER resolved in its /etc/passwd and /etc/group. The
 * container maps one id, which we already are; another cannot be had. */
static int resolve_user(const char *user)
{
        _cleanup_free_ char *passwd = NULL, *group = NULL;
        struct cs_error err = {0};
        size_t len;
        uid_t uid;
        gid_t gid;

        (void)cs_read_file_at(AT_FDCWD, "/etc/passwd", 1u << 20, false, &passwd, &len, &err);
        (void)cs_read_file_at(AT_FDCWD, "/etc/group", 1u << 20, false, &group, &len, &err);
        if (image_lookup_user(passwd, group, user, &uid, &gid, &err) < 0)
                /* podman: a user the container lacks is a command that cannot run */
                return perr(err.err == ENOENT ? CS_EXIT_NOEXEC : CS_EXIT_SETUP,
                            "exec: --user %s: %s", user, err.msg);
        if (uid != getuid() || gid != getgid())
                return perr(CS_EXIT_SETUP,
                            "exec: --user %s: the container has one id, %u:%u (its run's "
                            "--user); start it with --user %s to run commands as that user",
                            user, (unsigned)getuid(), (unsigned)getgid(), user);
        return 0;
}

/* The namespaces of member that are not ours already: a container with the network of
 * whoever runs it shares ours, which its user namespace does not own (joining it would need
 * a capability over it). */
static int ns_flags(pid_t member)
{
        static const struct {
                const char *name;
                int flag;
        } ns[] = {{"user", CLONE_NEWUSER},    {"mnt", CLONE_NEWNS},  {"pid", CLONE_NEWPID},
                  {"ipc", CLONE_NEWIPC},      {"uts", CLONE_NEWUTS}, {"net", CLONE_NEWNET},
                  {"cgroup", CLONE_NEWCGROUP}};
        int flags = 0;

        for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
                char path[64];
                struct stat mine, theirs;

                snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)member, ns[i].name);
                if (stat(path, &theirs) < 0) {
                        flags |= ns[i].flag; /* setns says why */
                        continue;
                }
                snprintf(path, sizeof(path), "/proc/self/ns/%s", ns[i].name);
                if (stat(path, &mine) < 0 || mine.st_ino != theirs.st_ino ||
                    mine.st_dev != theirs.st_dev)
                        flags |= ns[i].flag;
        }
        return flags;
}

/* The child's fds that get the pty (bit n: fd n): with -t all three, as podman; else each
 * that is a terminal of ours, as run relays them: csandbox never hands a container the
 * caller's terminal. */
static unsigned pty_fds_of(const struct exec_opts *o)
{
        unsigned fds = 0;

        if (o->tty)
                return 7u;
        for (int fd = o->interactive ? 0 : 1; fd < 3; fd++)
                if (isatty(fd))
                        fds |= 1u << fd;
        return fds;
}

static _Noreturn void exec_child(const struct exec_opts *o, int master, unsigned pty_fds,
                                 int cwd_fd, const struct sock_fprog *filter, char **env,
                                 char **argv)
{
        extern char **environ;
        sigset_t none;
        int e;

        prctl(PR_SET_PDEATHSIG, SIGKILL);
        /* a session of its own: the caller's terminal is not its controlling terminal (no
         * /dev/tty reaches it), and with a pty that pty is */
        if (setsid() < 0)
                _exit(perr(CS_EXIT_SETUP, "exec: setsid: %s", strerror(errno)));
        if (master >= 0) {
                int slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY);

                if (slave < 0 || ioctl(slave, TIOCSCTTY, 0) < 0)
                        _exit(perr(CS_EXIT_SETUP, "exec: the container's terminal: %s",
                                   strerror(errno)));
                for (int fd = 0; fd < 3; fd++)
                        if ((pty_fds & (1u << fd)) && dup2(slave, fd) < 0)
                                _exit(perr(CS_EXIT_SETUP, "exec: the container's terminal: %s",
                                           strerror(errno)));
                if (slave > 2)
                        close(slave);
                close(master);
        }
        if (!o->interactive && !(pty_fds & 1u)) {
                int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

                if (null_fd < 0 || dup2(null_fd, 0) < 0)
                        _exit(perr(CS_EXIT_SETUP, "exec: /dev/null: %s", strerror(errno)));
        }
        if (o->workdir ? chdir(o->workdir) < 0 : (cwd_fd < 0 || fchdir(cwd_fd) < 0))
                if (o->workdir || chdir("/") < 0)
                        _exit(perr(CS_EXIT_SETUP, "exec: --workdir %s: %s", o->workdir,
                                   strerror(errno)));
        /* every capability setns gave us in the container's user namespace goes */
        capng_clear(CAPNG_SELECT_BOTH);
        if (capng_apply(CAPNG_SELECT_BOTH) != 0)
                _exit(perr(CS_EXIT_SETUP, "exec: drop capabilities"));
        prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                _exit(perr(CS_EXIT_SETUP, "exec: no_new_privs: %s", strerror(errno)));
        syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC);
        for (int sig = 1; sig < NSIG; sig++)
                if (sig != SIGKILL && sig != SIGSTOP)
                        signal(sig, SIG_DFL);
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, filter) < 0)
                _exit(perr(CS_EXIT_SETUP, "exec: load the seccomp filter: %s", strerror(errno)));
        environ = env;
        execvp(argv[0], argv);
        e = errno;
        if (e == ENOENT)
                _exit(perr(CS_EXIT_NOTFOUND, "exec: %s: command not found in the container%s",
                           argv[0], strchr(argv[0], '/') ? "" : "'s PATH"));
        _exit(perr(CS_EXIT_NOEXEC, "exec: %s: cannot execute: %s", argv[0], strerror(e)));
}

static void copy_winsize(int master)
{
        struct winsize ws;

        for (int fd = 0; fd < 3; fd++)
                if (ioctl(fd, TIOCGWINSZ, &ws) == 0) {
                        ioctl(master, TIOCSWINSZ, &ws);
                        return;
                }
}

/* The pty's output to stdout, stdin (with -i) into it, signals passed on, until the command
 * is gone; its wait status. */
static int supervise(pid_t child, int master, unsigned pty_fds, int sfd, bool interactive)
{
        struct termios saved;
        bool raw = false, in_open = interactive && (pty_fds & 1u), pty_open = master >= 0;
        int wstatus = 0, out = (pty_fds & 2u) || !(pty_fds & 4u) ? 1 : 2;
        char buf[16384];

        if (in_open && isatty(0) && tcgetattr(0, &saved) == 0) {
                struct termios t = saved;

                cfmakeraw(&t);
                raw = tcsetattr(0, TCSADRAIN, &t) == 0;
        }

        for (;;) {
                struct pollfd p[3] = {{.fd = sfd, .events = POLLIN},
                                      {.fd = pty_open ? master : -1, .events = POLLIN},
                                      {.fd = in_open ? 0 : -1, .events = POLLIN}};
                ssize_t n;

                if (poll(p, 3, -1) < 0 && errno != EINTR)
                        break;
                if (p[0].revents & POLLIN) {
                        struct signalfd_siginfo si;

                        if (read(sfd, &si, sizeof(si)) == sizeof(si)) {
                                if (si.ssi_signo == SIGCHLD) {
                                        if (waitpid(child, &wstatus, WNOHANG) == child)
                                                break;
                                } else if (si.ssi_signo == SIGWINCH) {
                                        if (master >= 0)
                                                copy_winsize(master);
                                        else
                                                kill(child, SIGWINCH);
                                } else {
                                        /* in a session of its own, it gets the caller's
                                         * terminal's signals from us */
                                        kill(child, (int)si.ssi_signo);
                                }
                        }
                }
                if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
                        n = read(master, buf, sizeof(buf));
                        if (n <= 0)
                                pty_open = false; /* EIO: nothing holds the pty's other side */
                        else
                                (void)cs_write_all(out, buf, (size_t)n);
                }
                if (p[2].revents & (POLLIN | POLLHUP | POLLERR)) {
                        n = read(0, buf, sizeof(buf));
                        if (n <= 0) {
                                in_open = false;
                                /* the end of a piped stdin, as the pty's reader sees one */
                                if (!raw)
                                        (void)cs_write_all(master, "\004", 1);
                        } else
                                (void)cs_write_all(master, buf, (size_t)n);
                }
        }
        /* what the command wrote last */
        if (master >= 0) {
                ssize_t n;

                fcntl(master, F_SETFL, O_NONBLOCK);
                while ((n = read(master, buf, sizeof(buf))) > 0)
                        (void)cs_write_all(out, buf, (size_t)n);
        }
        if (raw)
                tcsetattr(0, TCSADRAIN, &saved);
        return wstatus;
}

static int strv_push_owned(struct exec_opts *o, char *item)
{
        char **v = realloc(o->env, (o->n_env + 2) * sizeof(char *));

        if (!v) {
                free(item);
                return -ENOMEM;
        }
        o->env = v;
        o->env[o->n_env++] = item;
        o->env[o->n_env] = NULL;
        return 0;
}

int podman_exec(const char *prog, int argc, char **argv)
{
        static const int forwarded[] = {SIGINT,  SIGTERM, SIGHUP,   SIGQUIT,
                                        SIGUSR1, SIGUSR2, SIGWINCH, SIGCHLD};
        struct exec_opts o = {0};
        struct cs_error err = {0};
        struct podman_ctr c = {0};
        struct sock_fprog filter = {0};
        pid_t pid1, member, child, ppid;
        int first, rootfd = -1, pidfd = -1, cwd_fd = -1, master = -1, sfd, depth, wstatus;
        int status = CS_EXIT_SETUP;
        unsigned pty_fds;
        bool joined = false;
        char **env = NULL, path[64];
        sigset_t mask;

        first = parse(argc, argv, &o);
        if (first < 0) {
                if (o.help) {
                        printf(usage_exec, prog);
                        status = 0;
                } else {
                        status = -first - 1;
                }
                goto out;
        }
        if (first + 1 >= argc) {
                status = perr(CS_EXIT_SETUP, first >= argc
                                                 ? "exec: give a container and a command"
                                                 : "exec: give a command to run in the container");
                goto out;
        }
        if (o.workdir && o.workdir[0] != '/') {
                status =
                    perr(CS_EXIT_SETUP, "exec: --workdir `%s`: not an absolute path", o.workdir);
                goto out;
        }
        if (podman_state_open(&rootfd, &err) < 0 ||
            podman_ctr_lookup(rootfd, argv[first], &c, &err) < 0) {
                status = perr(CS_EXIT_SETUP, "%s", err.msg);
                goto out;
        }
        /* the supervisor's child in one more pid namespace is pid 1; its child in as many,
         * the payload */
        if (podman_ctr_running(&c) && proc_parent((pid_t)c.pid, &ppid, &depth)) {
                pid1 = child_at((pid_t)c.pid, depth + 1);
                member = pid1 > 0 ? child_at(pid1, depth + 1) : -1;
                pidfd = member > 0 ? (int)syscall(SYS_pidfd_open, member, 0) : -1;
                /* still that process, not a reused pid */
                if (pidfd >= 0 && !(proc_parent(member, &ppid, &depth) && ppid == pid1)) {
                        close(pidfd);
                        pidfd = -1;
                }
        }
        if (pidfd < 0) {
                status = perr(CS_EXIT_SETUP,
                              "exec: container `%s` is not running: can only run commands in "
                              "a running container (start one with %s run -d)",
                              argv[first], prog);
                goto out;
        }
        env = build_env(member, &o);
        snprintf(path, sizeof(path), "/proc/%d/cwd", (int)member);
        cwd_fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (!env || seccomp_builtin(SPEC_SECCOMP_DEFAULT, &filter, &err) < 0) {
                status = perr(CS_EXIT_SETUP, "exec: container `%s`: %s", argv[first],
                              env ? err.msg : "cannot read its environment");
                goto out;
        }
        /* Inside the container's user namespace we hold every capability there, and the
         * container's processes have our uid: not dumpable, so none of them can ptrace us. */
        prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
        joined = true; /* and not dumpable: see the end */
        if (setns(pidfd, ns_flags(member)) < 0) {
                status = perr(CS_EXIT_SETUP, "exec: cannot join container `%s`'s namespaces: %s",
                              argv[first], strerror(errno));
                goto out;
        }
        if (o.user && (status = resolve_user(o.user)) != 0)
                goto out;
        status = CS_EXIT_SETUP;
        pty_fds = pty_fds_of(&o);
        if (pty_fds) {
                master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
                if (master < 0 || unlockpt(master) < 0) {
                        status = perr(CS_EXIT_SETUP, "exec: the container's /dev/ptmx: %s",
                                      strerror(errno));
                        goto out;
                }
                copy_winsize(master);
                /* A caller's terminal left as it is (its stdin is not relayed raw) processes
                 * the output itself, \n to \r\n: the pty then passes it on unprocessed, or
                 * each line would end \r\r\n. Set before the command can write. */
                if (!(o.interactive && (pty_fds & 1u) && isatty(0)) &&
                    isatty((pty_fds & 2u) || !(pty_fds & 4u) ? 1 : 2)) {
                        struct termios t;

                        if (tcgetattr(master, &t) == 0) {
                                t.c_oflag &= ~(tcflag_t)OPOST;
                                tcsetattr(master, TCSANOW, &t);
                        }
                }
        }
        /* we only relay from here on */
        capng_clear(CAPNG_SELECT_BOTH);
        capng_apply(CAPNG_SELECT_BOTH);
        sigemptyset(&mask);
        for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
                sigaddset(&mask, forwarded[i]);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        sfd = signalfd(-1, &mask, SFD_CLOEXEC);
        fflush(NULL);
        child = fork();
        if (child < 0 || sfd < 0) {
                status = perr(CS_EXIT_SETUP, "exec: fork: %s", strerror(errno));
                goto out;
        }
        if (child == 0)
                exec_child(&o, master, pty_fds, cwd_fd, &filter, env, argv + first + 1);
        wstatus = supervise(child, master, pty_fds, sfd, o.interactive);
        status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
out:
        for (size_t i = 0; env && env[i]; i++)
                free(env[i]);
        free(env);
        for (size_t i = 0; i < o.n_env; i++)
                free(o.env[i]);
        free(o.env);
        podman_ctr_free(&c);
        if (rootfd >= 0)
                close(rootfd);
        if (pidfd >= 0)
                close(pidfd);
        if (cwd_fd >= 0)
                close(cwd_fd);
        if (master >= 0)
                close(master);
        /* Everything is freed; what is left is to leave without a sanitizer's exit-time leak
         * check, which stops the process from a tracer thread that a non-dumpable process in
         * another user namespace cannot be traced by (it would wait for it forever). */
        if (joined) {
                fflush(NULL);
                _exit(status);
        }
        return status;
}
