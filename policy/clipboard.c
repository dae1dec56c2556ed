/* The clipboard (reference §5) without the Wayland socket, which would hand a session screen
 * capture and input injection: csandbox listens on a unix socket of its own, bound into the
 * sandbox at BRIDGE_CLIPBOARD_SOCK, and answers each request by running the host's
 * wl-paste with the arguments the reference allows (a list of the types, or the content of
 * one text/ or image/ type) under a time and size bound. Inside, the csandbox-wl-paste shim
 * stands in for wl-paste, first on PATH, and talks to it. The socket's name in the state
 * dir (0700) lives as long as the session: the runner finds every bind source again by
 * name in its own mount namespace. A name left by a killed launch is removed by the next. */
#include "bridges.h"
#include "plan.h"

#include "common/cleanup.h"
#include "common/error.h"
#include "common/fileio.h"
#include "common/path.h"
#include "common/spawn.h"

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
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define CLIPBOARD_ARGS_MAX   16
#define CLIPBOARD_TIMEOUT_MS 10000 /* the reference's bound on wl-paste */
#define CLIPBOARD_READ_SECS  5     /* and on reading the request */
#define CLIPBOARD_MAX_BYTES  ((size_t)64 << 20)
#define CLIPBOARD_SHIM       "csandbox-wl-paste"

static bool mime_allowed(const char *v)
{
        if (strncmp(v, "text/", 5) != 0 && strncmp(v, "image/", 6) != 0)
                return false;
        for (; *v; v++)
                if (!((*v >= 'a' && *v <= 'z') || (*v >= 'A' && *v <= 'Z') ||
                      (*v >= '0' && *v <= '9') || strchr("/.+-_;=", *v)))
                        return false;
        return true;
}

bool clipboard_args_allowed(char *const *argv, size_t n, const char **ret_bad)
{
        /* The reference's list, and --primary: claude reads the primary selection with it
         * (`wl-paste --primary --no-newline`), a read like the others. */
        static const char *const flags[] = {"-l", "--list-types", "-t", "--type",
                                            "-n", "--no-newline", "-p", "--primary"};

        for (size_t i = 0; i < n; i++) {
                bool ok = mime_allowed(argv[i]) ||
                          (strncmp(argv[i], "--type=", 7) == 0 && mime_allowed(argv[i] + 7));

                for (size_t f = 0; !ok && f < sizeof(flags) / sizeof(flags[0]); f++)
                        ok = strcmp(argv[i], flags[f]) == 0;
                if (!ok) {
                        *ret_bad = argv[i];
                        return false;
                }
        }
        return true;
}

/* Remove the relay sockets of launches that were killed: nothing listens on them. */
/* clipboard-PID.sock: whether csandbox PID (of this pid namespace) still runs. */
static bool launch_alive(const char *name)
{
        char *end;
        long pid = strtol(name + 10, &end, 10);

        if (pid <= 0 || strcmp(end, ".sock") != 0)
                return true;
        return kill((pid_t)pid, 0) == 0 || errno != ESRCH;
}

static void clipboard_sweep(int state_fd)
{
        int dfd = openat(state_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
        struct dirent *e;

        if (!d) {
                if (dfd >= 0)
                        close(dfd);
                return;
        }
        while ((e = readdir(d))) {
                struct sockaddr_un sa = {.sun_family = AF_UNIX};
                int s;

                if (strncmp(e->d_name, "clipboard-", 10) != 0 || e->d_type != DT_SOCK)
                        continue;
                snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/%.60s", dfd,
                         e->d_name);
                s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                /* Nobody listens; or the launch that made it is gone and its relay, killed
                 * with it, is still on its way out (its backlog would accept). */
                if (s >= 0 && ((connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 &&
                                errno == ECONNREFUSED) ||
                               !launch_alive(e->d_name)))
                        unlinkat(dfd, e->d_name, 0);
                if (s >= 0)
                        close(s);
        }
        closedir(d);
}

int clipboard_plan(struct sandbox_spec *s, const struct profile *p, struct plan_bridges *b,
                   struct cs_error *err)
{
        _cleanup_free_ char *wl = cs_find_program("wl-paste");
        _cleanup_free_ char *shim = NULL;
        _cleanup_close_ int shim_fd = -1, sock = -1, fd = -1;
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        char name[64];
        struct stat st;
        mode_t old;
        int r;

        if (!wl)
                return cs_error_setx(err, ENOENT,
                                     "CLAUDE_PROFILE_SANDBOX_CLIPBOARD is set, but 'wl-paste' "
                                     "is not found on this host (no PATH entry has it). The "
                                     "sandbox reads the clipboard through the host's wl-paste: "
                                     "install wl-clipboard, or unset "
                                     "CLAUDE_PROFILE_SANDBOX_CLIPBOARD");
        r = plan_shim_open(CLIPBOARD_SHIM, "the clipboard (csandbox's wl-paste for inside)",
                           &shim_fd, &shim, err);
        if (r < 0)
                return r;
        snprintf(name, sizeof(name), "clipboard-%d.sock", (int)getpid());
        snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/%s", p->state_fd, name);
        sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (sock < 0)
                return cs_error_set(err, errno,
                                    "make the clipboard relay's socket (unset "
                                    "CLAUDE_PROFILE_SANDBOX_CLIPBOARD to launch without it)");
        clipboard_sweep(p->state_fd);
        old = umask(0177);
        r = bind(sock, (struct sockaddr *)&sa, sizeof(sa));
        umask(old);
        if (r < 0 || listen(sock, 16) < 0)
                return cs_error_set(err, errno,
                                    "make the clipboard relay's socket in %s (unset "
                                    "CLAUDE_PROFILE_SANDBOX_CLIPBOARD to launch without it)",
                                    p->state_dir);
        b->clipboard_dir = fcntl(p->state_fd, F_DUPFD_CLOEXEC, 3);
        snprintf(b->clipboard_name, sizeof(b->clipboard_name), "%s", name);
        fd = openat(p->state_fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode))
                return cs_error_setx(err, EIO,
                                     "the clipboard relay's socket in %s was replaced as it "
                                     "was made (something else writes that directory); launch "
                                     "again",
                                     p->state_dir);
        r = bridge_dir(s, err);
        if (r >= 0)
                r = spec_add_bind(s, 0, &fd, "clipboard relay", BRIDGE_CLIPBOARD_SOCK, err);
        if (r >= 0)
                r = spec_add_bind(s, SPEC_MOUNT_RO, &shim_fd, shim,
                                  PLAN_HOME "/.local/bin/wl-paste", err);
        if (r < 0)
                return r;
        b->clipboard_fd = cs_take_fd(&sock);
        b->wl_paste = cs_take_ptr(&wl);
        return 0;
}

static void reply(int conn, const char *head, const char *body, size_t len)
{
        if (cs_write_all(conn, head, strlen(head)) == 0 && body)
                (void)!cs_write_all(conn, body, len);
}

/* One request: read its line, check it, run wl-paste, answer. */
static void serve_one(int conn, const char *wl_paste)
{
        struct timeval rt = {.tv_sec = CLIPBOARD_READ_SECS}, wt = {.tv_sec = 30};
        char line[BRIDGE_CLIPBOARD_REQUEST_MAX + 1], *nl = NULL, *save = NULL, *tok;
        char *argv[CLIPBOARD_ARGS_MAX + 2] = {"wl-paste"};
        _cleanup_(cs_capture_free) struct cs_capture c = {0};
        size_t len = 0, n = 1;
        const char *bad;
        char msg[160];

        setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &rt, sizeof(rt));
        setsockopt(conn, SOL_SOCKET, SO_SNDTIMEO, &wt, sizeof(wt));
        while (len < sizeof(line) - 1 && !(nl = memchr(line, '\n', len))) {
                ssize_t r = read(conn, line + len, sizeof(line) - 1 - len);

                if (r <= 0)
                        return;
                len += (size_t)r;
        }
        if (!nl && !(nl = memchr(line, '\n', len))) {
                reply(conn, "ERR request too long\n", NULL, 0);
                return;
        }
        *nl = '\0';
        for (tok = strtok_r(line, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
                if (n > CLIPBOARD_ARGS_MAX) {
                        reply(conn, "ERR too many arguments\n", NULL, 0);
                        return;
                }
                argv[n++] = tok;
        }
        argv[n] = NULL;
        if (!clipboard_args_allowed(argv + 1, n - 1, &bad)) {
                snprintf(msg, sizeof(msg), "ERR argument not allowed: %.64s\n", bad);
                for (char *q = msg + 4; *q && q[1]; q++)
                        if ((unsigned char)*q < 0x20 || (unsigned char)*q == 0x7f)
                                *q = '?';
                reply(conn, msg, NULL, 0);
                return;
        }
        if (cs_spawn_capture(&(struct cs_spawn){.path = wl_paste,
                                                .argv = argv,
                                                .timeout_ms = CLIPBOARD_TIMEOUT_MS,
                                                .max = CLIPBOARD_MAX_BYTES},
                             &c) < 0) {
                reply(conn, "ERR wl-paste could not be started on the host\n", NULL, 0);
                return;
        }
        if (cs_capture_ok(&c)) {
                reply(conn, "OK\n", c.out, c.len);
                return;
        }
        if (c.timed_out)
                snprintf(msg, sizeof(msg), "ERR wl-paste did not answer within 10 s\n");
        else if (c.too_big)
                snprintf(msg, sizeof(msg), "ERR the clipboard holds more than %zu MiB\n",
                         CLIPBOARD_MAX_BYTES >> 20);
        else
                snprintf(msg, sizeof(msg), "ERR wl-paste failed on the host (exit %d)\n",
                         WIFEXITED(c.status) ? WEXITSTATUS(c.status) : 128 + WTERMSIG(c.status));
        reply(conn, msg, NULL, 0);
}

int clipboard_start(struct plan_bridges *b, struct cs_error *err)
{
        pid_t parent = getpid(), pid;

        if (b->clipboard_fd < 0)
                return 0;
        fflush(NULL);
        pid = fork();
        if (pid < 0)
                return cs_error_set(err, errno, "start the clipboard relay");
        if (pid == 0) {
                sigset_t none;
                int null = open("/dev/null", O_RDWR | O_CLOEXEC);

                /* It lives as long as csandbox, apart from the terminal's signals. */
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != parent)
                        _exit(0);
                setsid();
                sigemptyset(&none);
                sigprocmask(SIG_SETMASK, &none, NULL);
                signal(SIGPIPE, SIG_IGN);
                if (null >= 0) {
                        dup2(null, 0);
                        dup2(null, 1);
                        dup2(null, 2);
                }
                if (dup2(b->clipboard_fd, 3) < 0)
                        _exit(1);
                close_range(4, ~0u, 0);
                for (;;) {
                        int conn = accept4(3, NULL, NULL, SOCK_CLOEXEC);

                        if (conn < 0) {
                                if (errno == EINTR || errno == ECONNABORTED)
                                        continue;
                                _exit(1);
                        }
                        serve_one(conn, b->wl_paste);
                        close(conn);
                }
        }
        b->clipboard_pid = pid;
        close(b->clipboard_fd);
        b->clipboard_fd = -1;
        return 0;
}

void clipboard_close(struct plan_bridges *b)
{
        if (b->clipboard_pid > 0) {
                kill(b->clipboard_pid, SIGKILL);
                while (waitpid(b->clipboard_pid, NULL, 0) < 0 && errno == EINTR)
                        ;
                b->clipboard_pid = 0;
        }
        if (b->clipboard_fd >= 0)
                close(b->clipboard_fd);
        b->clipboard_fd = -1;
        if (b->clipboard_dir >= 0) {
                unlinkat(b->clipboard_dir, b->clipboard_name, 0);
                close(b->clipboard_dir);
        }
        b->clipboard_dir = -1;
        free(b->wl_paste);
        b->wl_paste = NULL;
}
