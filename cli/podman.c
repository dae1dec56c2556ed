/* csandbox's `podman`/`docker`: the subcommands, and `run`, whose options become
 * `csandbox exec` flags (podman_parse.c) that parse_exec turns into the sandbox and
 * exec_launch starts: exec and podman share one parser and one launch. */
#include "podman.h"
#include "cli.h"
#include "cmd_exec.h"
#include "../runner/runner.h"
#include "../spec/spec.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/strv.h"
#include "../image/store/store.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char usage_podman[] =
    "Usage: %s COMMAND [OPTIONS] [ARG...]\n"
    "\n"
    "csandbox's own podman: each container is a csandbox sandbox (csandbox exec --image).\n"
    "\n"
    "Commands:\n"
    "  run [OPTIONS] IMAGE [COMMAND [ARG...]]   run a container (see run --help)\n"
    "  ps [-a] [-q] [--format FORMAT]           the containers of run -d\n"
    "  logs [-f] CONTAINER                      a detached container's output\n"
    "  stop [-t SECONDS] CONTAINER...           SIGTERM, then SIGKILL after SECONDS (10)\n"
    "  kill [-s SIGNAL] CONTAINER...            send SIGNAL (KILL)\n"
    "  wait CONTAINER...                        wait for it to exit, print its status\n"
    "  rm [-f] CONTAINER...                     remove a stopped container (-f: any)\n"
    "  exec [-it] [-u USER] [-w DIR] [-e K=V] CONTAINER COMMAND...\n"
    "                                           run a command in a running container\n"
    "  pull, build, images, rmi, inspect, tag   images (csandbox's image store)\n"
    "  save [-o FILE] IMAGE, load [-i FILE]     an image as an archive, and back\n"
    "  volume create|ls|inspect|rm|exists       named volumes (directories of csandbox's)\n"
    "  info, version [--format FORMAT]          about csandbox's podman\n"
    "\n"
    "Exit status: 125 when csandbox fails (a bad option, an unknown image, a missing bind\n"
    "source), 126 when the command cannot be executed, 127 when it is not found, else the\n"
    "container's own (128+N for signal N).\n";

static const char usage_run[] =
    "Usage: %s run [OPTIONS] IMAGE [COMMAND [ARG...]]\n"
    "\n"
    "  -i, --interactive          keep stdin connected (else it is /dev/null)\n"
    "  -t, --tty                  give the container a terminal of its own\n"
    "  --rm                       remove a detached container when it exits\n"
    "  -d, --detach               run in the background; print its ID\n"
    "  -e, --env NAME=VALUE|NAME  set a variable (NAME alone: your value, if set)\n"
    "  --env-file FILE            NAME=VALUE lines\n"
    "  -v, --volume SRC:DST[:ro|rw|z|Z]\n"
    "                             bind the host path SRC (absolute) at DST\n"
    "  --mount type=bind,source=SRC,target=DST[,readonly] | type=tmpfs,target=DST\n"
    "  --tmpfs DST                an empty tmpfs at DST\n"
    "  -w, --workdir DIR          working directory (default: the image's, else /)\n"
    "  -u, --user USER[:GROUP]    names or ids of the image's /etc/passwd and /etc/group\n"
    "  --entrypoint CMD|JSON      replace the image's Entrypoint (and its Cmd)\n"
    "  --network, --net none|host|default|bridge|slirp4netns|pasta\n"
    "                             none: loopback only; every other: the network of who\n"
    "                             runs podman (inside a session, the session's)\n"
    "  --name NAME                a unique name\n"
    "  -h, --hostname NAME        hostname (default: the short container ID)\n"
    "  --read-only                keep the image's root read-only (default: writable, the\n"
    "                             writes vanish with the container)\n"
    "  --pull missing|never|always  when to pull the image (missing)\n"
    "  -q, --quiet                no pull progress\n"
    "  -p, --publish [HOST:]PORT  the container shares your network: PORT is reachable as\n"
    "                             it is; a different HOST port is relayed to it\n"
    "  -m, --memory SIZE          a memory limit (as exec's --memory)\n"
    "  --init, --platform (this machine's), --label, --add-host: accepted (the last two\n"
    "                             ignored, with a note)\n"
    "\n"
    "Any other option is refused, naming it.\n";

static int fail(const char *prog, const struct cs_error *err)
{
        fprintf(stderr, "%s: %s\n", prog, err->msg);
        return err->status ? err->status : CS_EXIT_SETUP;
}

static int pull_image(const char *prog, const char *image, bool quiet)
{
        char *quiet_argv[] = {"pull", "--quiet", (char *)image, NULL};
        char *plain_argv[] = {"pull", (char *)image, NULL};

        return quiet ? podman_images_main(prog, 3, quiet_argv)
                     : podman_images_main(prog, 2, plain_argv);
}

/* Whether the store has image (a shared open, released at once). */
static bool image_present(const char *image)
{
        struct image_ref img = {.lock_fd = -1};
        struct cs_error ignored = {0};
        int r = store_open_image(image, &img, &ignored);

        image_ref_free(&img);
        return r >= 0;
}

static int push_all(char ***v, size_t *n, char *const *items, size_t count)
{
        for (size_t i = 0; i < count; i++)
                if (strv_push_dup(v, n, items[i]) < 0)
                        return -ENOMEM;
        return 0;
}

static int push(char ***v, size_t *n, const char *a)
{
        return strv_push_dup(v, n, a);
}

/* What the container runs, as podman composes it: the Entrypoint (--entrypoint's, else the
 * image's) followed by the COMMAND (else, without --entrypoint, the image's Cmd). */
static int compose_argv(const struct podman_run *r, const struct image_ref *img,
                        struct sandbox_spec *s, struct cs_error *err)
{
        char **v = NULL;
        size_t n = 0;
        int ret = 0;

        if (r->has_entrypoint)
                ret = push_all(&v, &n, r->entrypoint, r->n_entrypoint);
        else
                for (char **e = img->config.entrypoint; e && *e && ret == 0; e++)
                        ret = push(&v, &n, *e);
        if (ret == 0 && r->n_cmd)
                ret = push_all(&v, &n, r->cmd, r->n_cmd);
        else if (ret == 0 && !r->has_entrypoint)
                for (char **e = img->config.cmd; e && *e && ret == 0; e++)
                        ret = push(&v, &n, *e);
        if (ret < 0)
                ret = cs_error_set(err, ENOMEM, "run");
        else if (n == 0)
                ret = cs_error_setx(err, EINVAL,
                                    "run: %s has no Entrypoint or Cmd and no command was given",
                                    r->image);
        else
                ret = spec_set_argv(s, (int)n, v, err);
        strv_free(&v, &n);
        return ret;
}

/* podman's HOME: the image's, else that of the user (here / or, for root, /root). */
static bool image_sets_home(const struct image_ref *img)
{
        for (char **e = img->config.env; e && *e; e++)
                if (strncmp(*e, "HOME=", 5) == 0)
                        return true;
        return false;
}

static char *join_command(char *const *v)
{
        size_t len = 1;
        char *out;

        for (size_t i = 0; v && v[i]; i++)
                len += strlen(v[i]) + 1;
        out = calloc(1, len);
        if (!out)
                return NULL;
        for (size_t i = 0; v && v[i]; i++) {
                if (i)
                        strcat(out, " ");
                strcat(out, v[i]);
        }
        return out;
}

/* podman's default names: two words, here from a small list, made unique by the record. */
static void default_name(char *buf, size_t len)
{
        static const char *const adj[] = {"brave", "calm",  "eager", "fond", "keen",
                                          "quiet", "sharp", "swift", "tidy", "wise"};
        static const char *const noun[] = {"otter", "heron", "lynx", "finch", "maple",
                                           "cedar", "tern",  "vole", "wren",  "ibis"};
        unsigned int rnd[3] = {0};

        if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
                rnd[0] = (unsigned)time(NULL);
        snprintf(buf, len, "%s_%s_%u", adj[rnd[0] % 10], noun[rnd[1] % 10], rnd[2] % 10000);
}

/* The detached supervisor's side: record itself, run, record the exit, or go (--rm). */
static _Noreturn void detached_child(int rootfd, struct podman_ctr *c, struct sandbox_spec *s,
                                     int ready_fd, const struct podman_run *r, int *pub_fds)
{
        struct cs_error err = {0};
        int status = CS_EXIT_SETUP, log_fd, null_fd;

        setsid();
        log_fd = podman_ctr_log_open(rootfd, c->id, &err);
        null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (log_fd < 0 || null_fd < 0 || dup2(null_fd, STDIN_FILENO) < 0 ||
            dup2(log_fd, STDOUT_FILENO) < 0 || dup2(log_fd, STDERR_FILENO) < 0)
                _exit(CS_EXIT_SETUP);
        close(log_fd);
        close(null_fd);
        c->pid = getpid();
        c->starttime = podman_proc_starttime(c->pid);
        if (podman_ctr_save(rootfd, c, &err) < 0)
                _exit(CS_EXIT_SETUP);
        if (podman_publish_start(r, pub_fds) < 0)
                _exit(CS_EXIT_SETUP);
        (void)!write(ready_fd, "1", 1);
        close(ready_fd);
        if (exec_launch(s, &status, &err) < 0) {
                fprintf(stderr, "csandbox: %s\n", err.msg);
                status = err.status ? err.status : CS_EXIT_SETUP;
        }
        c->exit_code = status;
        c->finished = (long long)time(NULL);
        if (c->rm)
                (void)podman_ctr_remove(rootfd, c->id, &err);
        else
                (void)podman_ctr_save(rootfd, c, &err);
        _exit(0);
}

static int run_detached(const char *prog, const struct podman_run *r, int rootfd,
                        struct sandbox_spec *s, const char *id, int *pub_fds)
{
        struct podman_ctr c = {0};
        struct cs_error err = {0};
        char name[64], got = 0;
        int pipefd[2], ret;
        pid_t pid;

        snprintf(c.id, sizeof(c.id), "%s", id);
        if (!r->name)
                default_name(name, sizeof(name));
        c.name = strdup(r->name ? r->name : name);
        c.image = strdup(r->image);
        c.command = join_command(s->argv);
        c.created = (long long)time(NULL);
        c.exit_code = -1;
        c.rm = r->rm;
        if (!c.name || !c.image || !c.command) {
                podman_ctr_free(&c);
                cs_error_set(&err, ENOMEM, "run");
                return fail(prog, &err);
        }
        ret = podman_ctr_create(rootfd, &c, &err);
        if (ret < 0) {
                podman_ctr_free(&c);
                return fail(prog, &err);
        }
        if (pipe2(pipefd, O_CLOEXEC) < 0) {
                cs_error_set(&err, errno, "run -d: pipe");
                (void)podman_ctr_remove(rootfd, c.id, &(struct cs_error){0});
                podman_ctr_free(&c);
                return fail(prog, &err);
        }
        fflush(NULL);
        pid = fork();
        if (pid < 0) {
                cs_error_set(&err, errno, "run -d: fork");
                (void)podman_ctr_remove(rootfd, c.id, &(struct cs_error){0});
                podman_ctr_free(&c);
                return fail(prog, &err);
        }
        if (pid == 0) {
                close(pipefd[0]);
                detached_child(rootfd, &c, s, pipefd[1], r, pub_fds);
        }
        close(pipefd[1]);
        while (read(pipefd[0], &got, 1) < 0 && errno == EINTR)
                ;
        close(pipefd[0]);
        if (got != '1') {
                (void)podman_ctr_remove(rootfd, c.id, &(struct cs_error){0});
                fprintf(stderr, "%s: run -d: the container's supervisor failed to start\n", prog);
                podman_ctr_free(&c);
                return CS_EXIT_SETUP;
        }
        printf("%s\n", c.id);
        podman_ctr_free(&c);
        return fflush(stdout) == 0 ? 0 : CS_EXIT_SETUP;
}

static int record_foreground(const struct podman_run *r, int rootfd, const struct sandbox_spec *s,
                             const char *id, struct podman_ctr *c, struct cs_error *err)
{
        int ret;

        snprintf(c->id, sizeof(c->id), "%s", id);
        c->name = strdup(r->name);
        c->image = strdup(r->image);
        c->command = join_command(s->argv);
        c->created = (long long)time(NULL);
        c->exit_code = -1;
        c->rm = true;
        c->pid = getpid();
        c->starttime = podman_proc_starttime(c->pid);
        if (!c->name || !c->image || !c->command)
                return cs_error_set(err, ENOMEM, "run");
        ret = podman_ctr_create(rootfd, c, err);
        if (ret < 0)
                c->id[0] = '\0';
        return ret;
}

/* What run accepts to ignore, or honours in its own way, said once each on stderr; -p with
 * --network none refused (that container has no network to publish from). */
static int run_notes(const char *prog, const struct podman_run *r, struct cs_error *err)
{
        bool same = false;

        if (r->labels)
                fprintf(stderr, "%s: note: --label is ignored: csandbox's podman keeps no labels\n",
                        prog);
        if (r->add_host)
                fprintf(stderr,
                        "%s: note: --add-host %s is ignored: the container reads the /etc/hosts "
                        "of its image (with --network none, csandbox's own); add the name there "
                        "or use the address\n",
                        prog, r->add_host);
        if (r->n_publish && r->net && strcmp(r->net, "none") == 0)
                return cs_error_setx(err, EINVAL,
                                     "run: -p: a container with --network none has no network "
                                     "to publish from; drop --network none");
        for (size_t i = 0; i < r->n_publish; i++)
                same |= r->publish[i].host == r->publish[i].ctr;
        if (same)
                fprintf(stderr,
                        "%s: note: the container shares the network of whoever runs %s (in a "
                        "session, the session's), so a port it listens on is reachable there "
                        "as it is; -p PORT:PORT changes nothing\n",
                        prog, prog);
        return 0;
}

static int podman_run_cmd(const char *prog, int argc, char **argv)
{
        struct podman_run r;
        struct sandbox_spec s;
        struct image_ref img = {.lock_fd = -1};
        struct cs_error err = {0};
        char **ev = NULL, id[65], hostname[13];
        unsigned char rnd[32];
        size_t en = 0;
        bool plan, help, spec_made = false;
        int rootfd = -1, status = CS_EXIT_SETUP, ret;
        struct rlimit nofile;
        bool raised;
        int pub_fds[PODMAN_PUBLISH_MAX];
        struct podman_ctr fg = {0};

        for (size_t i = 0; i < PODMAN_PUBLISH_MAX; i++)
                pub_fds[i] = -1;
        ret = podman_run_parse(argc - 1, argv + 1, &r, &err);
        if (ret < 0) {
                podman_run_free(&r);
                return fail(prog, &err);
        }
        if (r.help) {
                printf(usage_run, prog);
                podman_run_free(&r);
                return 0;
        }
        ret = run_notes(prog, &r, &err);
        if (ret < 0)
                goto fail;
        if (r.detach || r.name) {
                /* a name is checked before anything starts; only -d records one */
                ret = podman_state_open(&rootfd, &err);
                if (ret >= 0 && r.name)
                        ret = podman_name_check(rootfd, r.name, &err);
                if (ret < 0)
                        goto fail;
        }
        if (r.pull == PODMAN_PULL_ALWAYS ||
            (r.pull == PODMAN_PULL_MISSING && !image_present(r.image))) {
                status = pull_image(prog, r.image, r.quiet);
                if (status != 0)
                        goto out;
                status = CS_EXIT_SETUP;
        }

        /* The container's ID (a detached one's record takes it), its short form the
         * default hostname, as podman's. */
        if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd)) {
                cs_error_set(&err, errno, "run: getrandom");
                goto fail;
        }
        for (size_t i = 0; i < sizeof(rnd); i++)
                snprintf(id + 2 * i, 3, "%02x", rnd[i]);
        snprintf(hostname, sizeof(hostname), "%.12s", id);

        /* The exec flags podman's options and defaults stand for. */
        ret = 0;
        ret |= push(&ev, &en, "--image");
        ret |= push(&ev, &en, r.image);
        if (!r.read_only)
                ret |= push(&ev, &en, "--writable");
        ret |= push(&ev, &en, "--net");
        ret |= push(&ev, &en, r.net ? r.net : "host");
        ret |= push(&ev, &en, "--hostname");
        ret |= push(&ev, &en, r.hostname ? r.hostname : hostname);
        if (r.tty)
                ret |= push(&ev, &en, "--tty=pty");
        if (r.workdir) {
                ret |= push(&ev, &en, "--chdir");
                ret |= push(&ev, &en, r.workdir);
        }
        ret |= push_all(&ev, &en, r.exec_args, r.n_exec_args);
        /* a COMMAND for parse_exec to hold; compose_argv sets the real one */
        ret |= push(&ev, &en, "--");
        ret |= push(&ev, &en, "/");
        if (ret < 0) {
                cs_error_set(&err, ENOMEM, "run");
                goto fail;
        }

        raised = raise_nofile_limit(&nofile);
        ret = parse_exec((int)en, ev, &s, &img, &plan, &help, &err);
        spec_made = true;
        if (ret >= 0 && raised)
                ret = spec_add_rlimit(&s, RLIMIT_NOFILE, &nofile, &err);
        if (ret >= 0)
                ret = compose_argv(&r, &img, &s, &err);
        if (ret >= 0 && r.user) {
                uid_t uid = 0;
                gid_t gid = 0;

                ret = image_resolve_user(&img, r.user, &uid, &gid, &err);
                if (ret < 0) {
                        /* podman: a user the image lacks is a command that cannot run */
                        if (ret == -ENOENT)
                                err.status = CS_EXIT_NOEXEC;
                        cs_error_wrap(&err, "run: --user %s", r.user);
                } else {
                        s.uid = uid;
                        s.gid = gid;
                }
        }
        if (ret >= 0 && !r.workdir &&
            !(img.config.working_dir && img.config.working_dir[0] == '/')) {
                /* podman: the image's WorkingDir, else / (never the caller's directory) */
                free(s.cwd);
                s.cwd = strdup("/");
                s.cwd_optional = false;
                if (!s.cwd)
                        ret = cs_error_set(&err, ENOMEM, "run");
        }
        if (ret >= 0 && !r.home_set && !image_sets_home(&img)) {
                /* exec's default HOME (the caller's) unless an --env-file gave another */
                const char *caller = getenv("HOME"), *now = spec_env_get(&s, "HOME");

                if (!now || strcmp(now, caller && caller[0] == '/' ? caller : "/") == 0)
                        ret = spec_env_set(&s, "HOME", s.uid == 0 ? "/root" : "/", false, &err);
        }
        if (ret >= 0)
                ret = runner_spec_complete(&s, &err);
        if (ret < 0)
                goto fail;
        /* as podman: the terminal gets the container's bytes as they are, and signals
         * reach the container's process at their default actions */
        s.tty_plain = true;
        s.signals_default = true;
        spec_print_warnings(&s);
        /* the published ports are taken before anything starts: a port in use is 125 */
        if (podman_publish_listen(&r, pub_fds, &err) < 0)
                goto fail;

        if (r.detach) {
                status = run_detached(prog, &r, rootfd, &s, id, pub_fds);
                goto out;
        }
        if (!r.interactive) {
                int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

                if (null_fd < 0 || dup2(null_fd, STDIN_FILENO) < 0) {
                        cs_error_set(&err, errno, "run: /dev/null as stdin");
                        if (null_fd >= 0)
                                close(null_fd);
                        goto fail;
                }
                close(null_fd);
        }
        if (podman_publish_start(&r, pub_fds) < 0) {
                cs_error_set(&err, errno, "run: -p: start the port relay");
                goto fail;
        }
        /* a named container is recorded while it runs, so ps lists it and exec reaches it;
         * it goes when it exits (a supervisor killed leaves a record the next reader drops) */
        if (r.name && record_foreground(&r, rootfd, &s, id, &fg, &err) < 0)
                goto fail;
        if (exec_launch(&s, &status, &err) < 0)
                status = fail(prog, &err);
        if (fg.id[0])
                (void)podman_ctr_remove(rootfd, fg.id, &(struct cs_error){0});
        goto out;
fail:
        status = fail(prog, &err);
out:
        strv_free(&ev, &en);
        if (spec_made)
                spec_free(&s);
        image_ref_free(&img);
        podman_run_free(&r);
        podman_ctr_free(&fg);
        if (rootfd >= 0)
                close(rootfd);
        for (size_t i = 0; i < PODMAN_PUBLISH_MAX; i++)
                if (pub_fds[i] >= 0)
                        close(pub_fds[i]);
        return status;
}

int podman_main(int argc, char **argv)
{
        _cleanup_free_ char *base_copy = strdup(argv[0] ? argv[0] : "podman");
        const char *prog = base_copy ? basename(base_copy) : "podman";
        const char *cmd = argc > 1 ? argv[1] : NULL;

        if (strcmp(prog, "docker") != 0)
                prog = "podman";
        if (!cmd || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 ||
            strcmp(cmd, "help") == 0) {
                printf(usage_podman, prog);
                return cmd ? 0 : CS_EXIT_SETUP;
        }
        if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-v") == 0) {
                podman_print_short_version(prog);
                return 0;
        }
        if (strcmp(cmd, "version") == 0)
                return podman_version(prog, argc - 1, argv + 1);
        if (strcmp(cmd, "info") == 0)
                return podman_info(prog, argc - 1, argv + 1);
        if (strcmp(cmd, "volume") == 0)
                return podman_volume_main(prog, argc - 1, argv + 1);
        if (strcmp(cmd, "exec") == 0)
                return podman_exec(prog, argc - 1, argv + 1);
        if (strcmp(cmd, "run") == 0)
                return podman_run_cmd(prog, argc - 1, argv + 1);
        if (strcmp(cmd, "ps") == 0)
                return podman_ps(prog, argc - 1, argv + 1);
        if (strcmp(cmd, "logs") == 0)
                return podman_logs(prog, argc - 1, argv + 1);
        if (strcmp(cmd, "stop") == 0)
                return podman_stop(prog, argc - 1, argv + 1);
        if (strcmp(cmd, "rm") == 0)
                return podman_rm(prog, argc - 1, argv + 1);
        if (strcmp(cmd, "kill") == 0)
                return podman_kill(prog, argc - 1, argv + 1);
        if (strcmp(cmd, "wait") == 0)
                return podman_wait(prog, argc - 1, argv + 1);
        if (strcmp(cmd, "pull") == 0 || strcmp(cmd, "build") == 0 || strcmp(cmd, "images") == 0 ||
            strcmp(cmd, "rmi") == 0 || strcmp(cmd, "inspect") == 0 || strcmp(cmd, "tag") == 0 ||
            strcmp(cmd, "load") == 0 || strcmp(cmd, "save") == 0)
                return podman_images_main(prog, argc - 1, argv + 1);
        if (cmd[0] == '-')
                fprintf(stderr, "%s: %s is not supported by csandbox's podman\n", prog, cmd);
        else
                fprintf(stderr, "%s: `%s` is not a command of csandbox's podman; see `%s --help`\n",
                        prog, cmd, prog);
        return CS_EXIT_SETUP;
}
