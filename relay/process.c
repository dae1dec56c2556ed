/* What both relays share: their process beside csandbox, their listening sockets, and the
 * sweep of what a killed launch left in the state dir. */
#include "relay-private.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define RELAY_FDS_MAX (2 * RELAY_AGENT_MAX)

pid_t relay_fork(const int *fds, size_t n, const char *what, struct cs_error *err)
{
        pid_t parent = getpid(), pid;
        int keep[RELAY_FDS_MAX], high = RELAY_FDS_MAX + 3, null;
        sigset_t none;

        if (n > RELAY_FDS_MAX)
                return cs_error_setx(err, EINVAL, "start %s: too many sockets", what);
        fflush(NULL);
        pid = fork();
        if (pid < 0)
                return cs_error_set(err, errno, "start %s", what);
        if (pid > 0)
                return pid;
        /* It lives as long as csandbox, apart from the terminal's signals. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
                _exit(0);
        setsid();
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_IGN);
        null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null >= 0) {
                dup2(null, 0);
                dup2(null, 1);
                dup2(null, 2);
        }
        /* The fds to 3.., everything else closed: first above every target, so that no
         * dup2 overwrites one still to be moved. */
        for (size_t i = 0; i < n; i++)
                high = high > fds[i] ? high : fds[i] + 1;
        for (size_t i = 0; i < n; i++)
                if ((keep[i] = fcntl(fds[i], F_DUPFD, high)) < 0)
                        _exit(1);
        for (size_t i = 0; i < n; i++)
                if (dup2(keep[i], 3 + (int)i) < 0)
                        _exit(1);
        close_range(3 + (unsigned)n, ~0u, 0);
        return 0;
}

void relay_stop(pid_t *pid)
{
        if (*pid <= 0)
                return;
        kill(*pid, SIGKILL);
        while (waitpid(*pid, NULL, 0) < 0 && errno == EINTR)
                ;
        *pid = 0;
}

/* PREFIX<pid>.<rest>: whether csandbox <pid> (of this pid namespace) still runs. */
static bool launch_alive(const char *name, const char *prefix)
{
        char *end;
        long pid = strtol(name + strlen(prefix), &end, 10);

        if (pid <= 0 || *end != '.')
                return true;
        return kill((pid_t)pid, 0) == 0 || errno != ESRCH;
}

void relay_sweep(int dir_fd, const char *prefix, const char *sock_in_dir)
{
        int dfd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
        struct dirent *e;

        if (!d) {
                if (dfd >= 0)
                        close(dfd);
                return;
        }
        while ((e = readdir(d))) {
                struct sockaddr_un sa = {.sun_family = AF_UNIX};
                unsigned char want = sock_in_dir ? DT_DIR : DT_SOCK;
                struct cs_error ignored;
                int s;

                if (strncmp(e->d_name, prefix, strlen(prefix)) != 0 ||
                    (e->d_type != want && e->d_type != DT_UNKNOWN) || strlen(e->d_name) > 60)
                        continue;
                snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/%s%s%s", dfd,
                         e->d_name, sock_in_dir ? "/" : "", sock_in_dir ? sock_in_dir : "");
                s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                /* (Not a missing socket: a live launch may be between mkdir and bind.) */
                if (s >= 0 && ((connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 &&
                                errno == ECONNREFUSED) ||
                               !launch_alive(e->d_name, prefix)))
                        (void)cs_remove_at(dfd, e->d_name, &ignored);
                if (s >= 0)
                        close(s);
        }
        closedir(d);
}

int relay_socket_listen(int dir_fd, const char *name, int sock_flags, int *ret_listen,
                        int *ret_path_fd, const char *what, struct cs_error *err)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        _cleanup_close_ int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | sock_flags, 0);
        struct stat st;
        mode_t old;
        int r, fd;

        if (s < 0)
                return cs_error_set(err, errno, "make %s", what);
        snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/%s", dir_fd, name);
        old = umask(0177);
        r = bind(s, (struct sockaddr *)&sa, sizeof(sa));
        umask(old);
        if (r < 0 || listen(s, 16) < 0)
                return cs_error_set(err, errno, "make %s", what);
        fd = openat(dir_fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode)) {
                if (fd >= 0)
                        close(fd);
                return cs_error_setx(err, EIO,
                                     "%s was replaced as it was made (something else writes "
                                     "that directory); launch again",
                                     what);
        }
        *ret_listen = cs_take_fd(&s);
        *ret_path_fd = fd;
        return 0;
}
