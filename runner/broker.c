/* The package broker: `sudo apt-get install NAME` inside, without setuid and without giving
 * the payload any privilege.
 *
 * pid 1 starts it before it drops its capabilities. The broker becomes uid 0 of the
 * sandbox's user namespace (the subordinate range maps it), keeps only the capabilities the
 * spec gives it (policy/plan_broker.c decides them: what a package manager needs to own and
 * write the session's files, never SYS_ADMIN), sets no_new_privs, takes the payload's seccomp
 * filter, and listens on SPEC_BROKER_SOCKET. csandbox's sudo (cli/sudo_shim.c) sends it an argv
 * and its three stdio descriptors; the broker runs the spec's package manager only when the
 * request is one of broker_check's forms, in a session of its own, with a fixed environment,
 * and answers with the exit status.
 *
 * In an image session what it installs lands in the session's writable root. On the embedded
 * default (the spec's layer_dirs) the host's system is read-only: at the first request that
 * passes broker_check, the broker asks the mount helper pid 1 started beside it
 * (host_layer.c, the one process holding CAP_SYS_ADMIN, for that one sequence) to put a
 * writable layer of the session over /usr, /etc and the package databases; installs land in
 * that layer. Either way they go with the session. */
#include "internal.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../policy/seccomp.h"

#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define BROKER_MAX_ARGS 256
#define BROKER_MAX_MSG  (64u << 10)

/* What each family may be asked: the subcommands, then the options (an option ending in '='
 * takes the rest of the word as its value, from a fixed set for the dnf ones). */
static const char *const apt_subcommands[] = {"install", "reinstall", "remove",     "purge",
                                              "update",  "upgrade",   "autoremove", NULL};
static const char *const apt_options[] = {"-y",
                                          "--yes",
                                          "--assume-yes",
                                          "-q",
                                          "-qq",
                                          "--quiet",
                                          "--no-install-recommends",
                                          "--install-suggests",
                                          "--fix-broken",
                                          "-f",
                                          NULL};
static const char *const dnf_subcommands[] = {"install", "reinstall", "remove",    "erase",
                                              "upgrade", "update",    "makecache", NULL};
static const char *const dnf_options[] = {"-y",
                                          "--assumeyes",
                                          "-q",
                                          "--quiet",
                                          "--nodocs",
                                          "--refresh",
                                          "--setopt=install_weak_deps=False",
                                          "--setopt=install_weak_deps=0",
                                          NULL};
static const char *const apk_subcommands[] = {"add", "del", "update", "upgrade", NULL};
static const char *const apk_options[] = {"--no-cache", "-q", "--quiet", "--no-progress", NULL};

static bool in_list(const char *const *list, const char *word)
{
        for (; *list; list++)
                if (strcmp(*list, word) == 0)
                        return true;
        return false;
}

/* A package name (with a version or architecture): never a path, an option or a URL. */
static bool package_name(const char *w)
{
        size_t n = strlen(w);

        if (n == 0 || n > 255 ||
            !((w[0] >= 'a' && w[0] <= 'z') || (w[0] >= 'A' && w[0] <= 'Z') ||
              (w[0] >= '0' && w[0] <= '9')))
                return false;
        return strspn(w,
                      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+._~:=@-") ==
               n;
}

int broker_check(const struct sandbox_spec *s, char *const *argv, const char **ret_path, char *why,
                 size_t why_len)
{
        const char *const *subs = NULL, *const *opts = NULL;
        const char *sub = NULL;

        *ret_path = NULL;
        if (!argv[0]) {
                snprintf(why, why_len, "no command given");
                return -EINVAL;
        }
        *ret_path = spec_broker_manager(s, argv[0]);
        if (!*ret_path) {
                size_t n =
                    (size_t)snprintf(why, why_len, "sudo here runs only a package manager (");

                for (size_t i = 0; i < s->n_broker_managers && n < why_len; i++)
                        n += (size_t)snprintf(why + n, why_len - n, "%s%s",
                                              i == 0                          ? ""
                                              : i + 1 == s->n_broker_managers ? " or "
                                                                              : ", ",
                                              s->broker_managers[i].name);
                if (n < why_len)
                        snprintf(why + n, why_len - n, "), not %.64s", argv[0]);
                return -EPERM;
        }
        if (argv[0][0] == 'a' && argv[0][1] == 'p' && argv[0][2] == 't')
                subs = apt_subcommands, opts = apt_options;
        else if (strcmp(argv[0], "apk") == 0)
                subs = apk_subcommands, opts = apk_options;
        else
                subs = dnf_subcommands, opts = dnf_options;
        for (size_t i = 1; argv[i]; i++) {
                const char *w = argv[i];

                if (w[0] == '-') {
                        if (!in_list(opts, w)) {
                                snprintf(why, why_len,
                                         "%s: the option %.64s is not one sudo passes here "
                                         "(allowed: the assume-yes, quiet and recommends "
                                         "options)",
                                         argv[0], w);
                                return -EPERM;
                        }
                } else if (!sub) {
                        if (!in_list(subs, w)) {
                                snprintf(why, why_len,
                                         "%s %.64s: sudo here installs, removes and updates "
                                         "packages only",
                                         argv[0], w);
                                return -EPERM;
                        }
                        sub = w;
                } else if (!package_name(w)) {
                        snprintf(why, why_len,
                                 "%s %s: %.64s is not a package name (a file, a URL or an "
                                 "option is not taken: packages come from the image's own "
                                 "repositories)",
                                 argv[0], sub, w);
                        return -EPERM;
                }
        }
        if (!sub) {
                snprintf(why, why_len, "%s: say what to do (for example: %s install NAME)", argv[0],
                         argv[0]);
                return -EINVAL;
        }
        return 0;
}

/* The package manager writes the session's system, not the work tree: dpkg backs up its
 * database with a hard link and packages carry setuid files. Under the default profile it
 * takes that program without the host-trust rules (the image build's); it runs only the
 * forms broker_check accepts, from the image's own repositories. */
static const struct sock_fprog *broker_filter(const struct sock_fprog *filter,
                                              struct sock_fprog *buf)
{
        struct sock_fprog def;
        struct cs_error ignored;

        if (filter && seccomp_builtin(SPEC_SECCOMP_DEFAULT, &def, &ignored) == 0 &&
            filter->filter == def.filter && seccomp_builtin_image_build(buf) == 0)
                return buf;
        return filter;
}

/* The host directories a session has writable (the work tree, the profile dir, --bind):
 * the spec's binds without SPEC_MOUNT_RO. */
static bool host_writable(const struct spec_mount *m)
{
        return m->kind == SPEC_MOUNT_BIND && !(m->flags & SPEC_MOUNT_RO);
}

static int read_only_at(int fd)
{
        struct mount_attr a = {.attr_set = MOUNT_ATTR_RDONLY};

        return mount_setattr(fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof(a)) < 0 ? -errno : 0;
}

/* The package manager runs as the broker's root, and the session can plant links at any
 * time (before the first sudo, and while apt runs) in the /var apt and dpkg write: /var is
 * the session's own tmpfs and the payload owns its directories, so no check by fd before
 * a run can hold. What holds is where the broker's writes can land: in a mount namespace of
 * its own, every host directory bound writable is read-only (the broker, with no
 * CAP_SYS_ADMIN, cannot undo it), so whatever link apt or dpkg follows, a file it writes
 * lands in the session's own filesystems (gone with it) or fails with EROFS, and nothing
 * owned by a subordinate id reaches the work tree or the profile dir. Made before the
 * payload exists, while paths are still as the spec laid them out. */
int broker_own_mounts(const struct sandbox_spec *s)
{
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return -errno;
        for (size_t i = 0; i < s->n_mounts; i++) {
                _cleanup_close_ int fd = -1;
                int r;

                if (!host_writable(&s->mounts[i]))
                        continue;
                fd = open(s->mounts[i].dest, O_PATH | O_CLOEXEC);
                r = fd < 0 ? -errno : read_only_at(fd);
                /* Absent, or covered by a later mount (not a mount's root there): nothing
                 * reaches it by that path in this namespace. */
                if (r == -ENOENT || r == -EINVAL)
                        continue;
                if (r < 0)
                        return r;
        }
        return 0;
}

/* This process's mount namespace as an fd setns takes: from its pidfd (Linux 6.11), which
 * needs no /proc (a session's may be empty); else /proc/self/ns/mnt. */
#ifndef PIDFD_GET_MNT_NAMESPACE
#define PIDFD_GET_MNT_NAMESPACE _IO(0xFF, 3)
#endif
static int broker_own_namespace(void)
{
        _cleanup_close_ int pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
        int fd = pidfd >= 0 ? ioctl(pidfd, PIDFD_GET_MNT_NAMESPACE, 0) : -1;

        if (fd < 0)
                fd = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

int broker_clone_read_only(const struct sandbox_spec *s, int clone, const char *dir)
{
        size_t n = strlen(dir);

        for (size_t i = 0; i < s->n_mounts; i++) {
                const char *dest = s->mounts[i].dest;
                _cleanup_close_ int fd = -1;
                struct open_how how = {.flags = O_PATH | O_CLOEXEC,
                                       .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS |
                                                  RESOLVE_NO_MAGICLINKS};
                int r;

                if (!host_writable(&s->mounts[i]) || strncmp(dest, dir, n) != 0 || dest[n] != '/')
                        continue;
                fd = (int)syscall(SYS_openat2, clone, dest + n + 1, &how, sizeof(how));
                r = fd < 0 ? -errno : read_only_at(fd);
                if (r == -ENOENT || r == -EINVAL)
                        continue;
                if (r < 0)
                        return r;
        }
        return 0;
}

/* The broker's own privilege: uid 0 of the namespace, the capabilities the spec gives it,
 * bounded. */
static int broker_become_root(const struct sandbox_spec *s, const struct sock_fprog *filter)
{
        /* Dropped: the broker has no error channel but its return value. */
        struct cs_error ignored;
        struct sock_fprog own;

        if (setgroups(0, NULL) < 0 || setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
                return -errno;
        if (exec_keep_capabilities(s->broker_caps, &ignored) < 0)
                return -EPERM;
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return -errno;
        filter = broker_filter(filter, &own);
        if (filter && syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, filter) < 0)
                return -errno;
        return 0;
}

/* One request: NUL-separated words, with the caller's stdin, stdout and stderr. */
static int broker_receive(int conn, char *buf, size_t len, char **argv, int fds[3])
{
        union {
                struct cmsghdr h;
                char space[CMSG_SPACE(3 * sizeof(int))];
        } ctl;
        struct iovec iov = {.iov_base = buf, .iov_len = len - 1};
        struct msghdr mh = {.msg_iov = &iov,
                            .msg_iovlen = 1,
                            .msg_control = ctl.space,
                            .msg_controllen = sizeof(ctl.space)};
        struct cmsghdr *c;
        ssize_t n = recvmsg(conn, &mh, MSG_CMSG_CLOEXEC);
        size_t argc = 0;

        fds[0] = fds[1] = fds[2] = -1;
        if (n <= 0)
                return -EIO;
        c = CMSG_FIRSTHDR(&mh);
        if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                size_t got = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);

                memcpy(fds, CMSG_DATA(c), (got < 3 ? got : 3) * sizeof(int));
                for (size_t i = 3; i < got; i++) {
                        int extra;

                        memcpy(&extra, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                        close(extra);
                }
        }
        if (fds[0] < 0 || fds[1] < 0 || fds[2] < 0 || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
            buf[n - 1] != '\0')
                return -EINVAL;
        buf[n] = '\0';
        for (char *w = buf; w < buf + n && argc < BROKER_MAX_ARGS; w += strlen(w) + 1)
                argv[argc++] = w;
        argv[argc] = NULL;
        return argc == 0 || argc >= BROKER_MAX_ARGS ? -E2BIG : 0;
}

static void broker_env_add(const struct sandbox_spec *s, char **env, size_t *n, const char *name)
{
        const char *v = spec_env_get(s, name);

        if (v && asprintf(&env[*n], "%s=%s", name, v) >= 0)
                (*n)++;
}

static int broker_run(const struct sandbox_spec *s, const char *path, char *const *argv, int fds[3],
                      int conn)
{
        char *env[16] = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                         "HOME=/root", "USER=root", "LOGNAME=root"};
        size_t n_env = 4;
        int status = 0, pidfd;
        pid_t pid;

        broker_env_add(s, env, &n_env, "TERM");
        broker_env_add(s, env, &n_env, "LANG");
        broker_env_add(s, env, &n_env, "http_proxy");
        broker_env_add(s, env, &n_env, "https_proxy");
        pid = fork();
        if (pid < 0) {
                for (size_t i = 4; i < n_env; i++)
                        free(env[i]);
                return 126 << 8;
        }
        if (pid == 0) {
                /* Its own session: the terminal it was given is not its controlling one, so
                 * it reads and writes it as a file, and the session's job control is not
                 * its. */
                setsid();
                if (dup2(fds[0], 0) < 0 || dup2(fds[1], 1) < 0 || dup2(fds[2], 2) < 0 ||
                    chdir("/") < 0)
                        _exit(126);
                execve(path, argv, env);
                dprintf(2, "sudo: %s: %s\n", path, strerror(errno));
                _exit(errno == ENOENT ? 127 : 126);
        }
        /* The caller going away (its sudo killed) ends the package manager too. */
        pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        for (;;) {
                struct pollfd p[2] = {{.fd = pidfd, .events = POLLIN}, {.fd = conn, .events = 0}};

                if (pidfd < 0 || poll(p, 2, -1) < 0) {
                        if (pidfd >= 0 && errno == EINTR)
                                continue;
                        break;
                }
                if (p[0].revents)
                        break;
                if (p[1].revents & (POLLHUP | POLLERR))
                        kill(-pid, SIGKILL);
        }
        if (pidfd >= 0)
                close(pidfd);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        for (size_t i = 4; i < n_env; i++)
                free(env[i]);
        return status;
}

/* The embedded default's layer, made at the first request (host_layer.c). 0: made; <0:
 * could not be, said each time. */
static int broker_layer(int layer, int self, int err_fd, bool *made, char *note, size_t note_len)
{
        static int failed;
        static char why[512];
        size_t unread = 0;
        int r;

        if (*made)
                return 0;
        if (failed) {
                dprintf(err_fd,
                        "sudo: this session has no writable layer over the host's system: %s\n",
                        why);
                return failed;
        }
        r = host_layer_request(layer, self, &unread, note, note_len, why, sizeof(why));
        if (r < 0) {
                failed = r;
                dprintf(err_fd,
                        "sudo: this session has no writable layer over the host's system: %s\n",
                        why);
                return r;
        }
        *made = true;
        host_layer_var();
        if (unread && strlen(note) + 64 < note_len) {
                char tmp[4096];

                snprintf(tmp, sizeof(tmp),
                         "%zu directories or files of the host are unreadable to you, so "
                         "nothing can be installed over them here: %.3900s",
                         unread, note);
                snprintf(note, note_len, "%s", tmp);
        }
        return 0;
}

static void broker_serve(const struct sandbox_spec *s, int lfd, int layer, int self)
{
        static char buf[BROKER_MAX_MSG + 1];
        static char note[4096];
        bool made = false;

        for (;;) {
                char *argv[BROKER_MAX_ARGS + 1];
                int fds[3], status;
                const char *path;
                char why[512];
                int conn = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

                if (conn < 0) {
                        if (errno == EINTR || errno == ECONNABORTED)
                                continue;
                        _exit(0);
                }
                if (broker_receive(conn, buf, sizeof(buf), argv, fds) < 0) {
                        status = 125 << 8;
                } else if (broker_check(s, argv, &path, why, sizeof(why)) < 0) {
                        dprintf(fds[2], "sudo: %s\n", why);
                        status = 1 << 8;
                } else if (s->n_layer_dirs &&
                           broker_layer(layer, self, fds[2], &made, note, sizeof(note)) < 0) {
                        status = 1 << 8;
                } else {
                        status = broker_run(s, path, argv, fds, conn);
                        /* A manager that failed may have met a directory the layer lacks. */
                        if (status != 0 && note[0])
                                dprintf(fds[2], "sudo: %s\n", note);
                }
                for (int i = 0; i < 3; i++)
                        if (fds[i] >= 0)
                                close(fds[i]);
                (void)!write(conn, &status, sizeof(status));
                close(conn);
        }
}

void broker_start(const struct sandbox_spec *s, const struct sock_fprog *filter)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        pid_t pid;
        int lfd, r, layer, self = -1;

        if (!s->package_broker)
                return;
        /* The mount helper first, while pid 1 still holds what it needs to give it. */
        layer = host_layer_start(s);
        /* Listening before the payload exists: its first sudo must find the socket. */
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", SPEC_BROKER_SOCKET);
        lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        r = lfd < 0 ? -errno : 0;
        if (r >= 0 && (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
                       chmod(SPEC_BROKER_SOCKET, 0666) < 0 || listen(lfd, 8) < 0))
                r = -errno;
        pid = r < 0 ? -1 : fork();
        if (pid < 0) {
                runner_warn("csandbox: the package broker did not start (%s): sudo cannot "
                            "install packages in this session",
                            strerror(r < 0 ? -r : errno));
                if (lfd >= 0)
                        close(lfd);
                if (layer >= 0)
                        close(layer);
                unlink(SPEC_BROKER_SOCKET);
                return;
        }
        if (pid > 0) {
                close(lfd);
                if (layer >= 0)
                        close(layer);
                return;
        }
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        /* Nothing of pid 1's (its pipe to csandbox, the terminal's control socket). */
        if (layer == 3) {
                layer = fcntl(layer, F_DUPFD_CLOEXEC, 5);
                if (layer < 0)
                        _exit(0);
        }
        if (lfd != 3) {
                if (dup3(lfd, 3, O_CLOEXEC) < 0)
                        _exit(0);
                lfd = 3;
        }
        if (layer >= 0 && layer != 4) {
                if (dup3(layer, 4, O_CLOEXEC) < 0)
                        _exit(0);
                layer = 4;
        }
        syscall(SYS_close_range, layer >= 0 ? 5 : 4, ~0U, 0);
        signal(SIGPIPE, SIG_IGN);
        {
                sigset_t none;

                sigemptyset(&none);
                sigprocmask(SIG_SETMASK, &none, NULL);
        }
        r = broker_own_mounts(s);
        /* The mount helper attaches the layer in this namespace too: it joins it by this
         * fd, sent with the first request. */
        if (r >= 0 && layer >= 0)
                r = self = broker_own_namespace();
        if (r >= 0)
                r = broker_become_root(s, filter);
        if (r < 0) {
                runner_warn("csandbox: the package broker did not start (%s): sudo cannot "
                            "install packages in this session",
                            strerror(-r));
                _exit(0);
        }
        broker_serve(s, lfd, layer, self);
        _exit(0);
}
