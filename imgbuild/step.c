/* One step of `image build` that writes a layer: the new layer's upper dir in the store's
 * tmp/, written by a RUN in csandbox's own sandbox (the runner, with that dir as the
 * overlay's upper) or by COPY, ADD and WORKDIR in a worker process that is root of a user
 * namespace with the same id map; the same worker then makes the upper dir a layer
 * (build_layer_commit), and the layer is moved into the store. */
#include "step.h"
#include "worker.h"
#include "imgbuild.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"
#include "../image/store/store-write.h"
#include "../policy/seccomp.h"
#include "../runner/runner.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Copies a step's output from the pipe to csandbox's own stderr. */
struct relay {
        int from, to;
};

static void *relay_main(void *opaque)
{
        const struct relay *r = opaque;
        char buf[65536];
        ssize_t n;

        while ((n = read(r->from, buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR))
                if (n > 0 && cs_write_all(r->to, buf, (size_t)n) < 0)
                        break;
        return NULL;
}

/* The step's stdout and stderr are never the caller's terminal (a RUN could read what the
 * user types, or change the terminal's modes): a pipe relayed to our stderr, or with
 * --quiet a memfd shown only when the step fails (its last 64 KiB). */
static int run_captured(const struct sandbox_spec *s, const struct sock_fprog *filter, bool quiet,
                        int *status, struct cs_error *err)
{
        _cleanup_close_ int out = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
        _cleanup_close_ int errfd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
        _cleanup_close_ int sink = -1, rd = -1;
        struct relay relay = {.from = -1, .to = -1};
        pthread_t tid;
        bool relaying = false;
        char buf[65536];
        off_t size;
        ssize_t n;
        int p[2], r;

        if (out < 0 || errfd < 0)
                return cs_error_set(err, errno, "the step's output");
        if (quiet) {
                sink = memfd_create("csandbox-build-step", MFD_CLOEXEC);
        } else if (pipe2(p, O_CLOEXEC) == 0) {
                rd = p[0];
                sink = p[1];
                sigset_t all, old;

                relay = (struct relay){.from = rd, .to = errfd};
                /* The relay takes no signal: launch_run waits for SIGCHLD on a signalfd,
                 * and a thread that does not block it would swallow it. */
                sigfillset(&all);
                pthread_sigmask(SIG_SETMASK, &all, &old);
                relaying = pthread_create(&tid, NULL, relay_main, &relay) == 0;
                pthread_sigmask(SIG_SETMASK, &old, NULL);
                if (!relaying) {
                        close(sink);
                        sink = -1;
                }
        }
        if (sink < 0 || dup2(sink, STDOUT_FILENO) < 0 || dup2(sink, STDERR_FILENO) < 0) {
                r = cs_error_set(err, errno ? errno : EIO, "the step's output");
                goto out;
        }
        r = launch_run(s, filter, status, err);
out:
        dup2(out, STDOUT_FILENO);
        dup2(errfd, STDERR_FILENO);
        if (relaying) {
                close(sink); /* the relay sees the end once the sandbox's copies are gone */
                sink = -1;
                pthread_join(tid, NULL);
        }
        if (quiet && sink >= 0 && r >= 0 && *status != 0 && (size = lseek(sink, 0, SEEK_END)) > 0) {
                off_t from = size > (off_t)sizeof(buf) ? size - (off_t)sizeof(buf) : 0;

                n = pread(sink, buf, sizeof(buf), from);
                if (n > 0)
                        (void)!write(STDERR_FILENO, buf, (size_t)n);
        }
        return r;
}

/* RUN in csandbox's sandbox: the layers below, the step's upper dir on disk, root of the
 * namespace with a build's capabilities (or the USER), the network through pasta. */
static int run_sandbox(struct build_ctx *b, const struct build_layers *l,
                       const struct build_run *run, int tfd, char ***ret_mountpoints, size_t *ret_n,
                       struct cs_error *err)
{
        struct sandbox_spec s;
        struct sock_fprog filter = {0};
        _cleanup_free_ int *fds = calloc(l->n + 1, sizeof(int));
        _cleanup_free_ char **paths = calloc(l->n + 1, sizeof(char *));
        _cleanup_close_ int upper = -1, work = -1;
        int status = 0, r;
        size_t argc = 0;

        if (!fds || !paths)
                return cs_error_set(err, ENOMEM, "build");
        if (l->n == 0)
                return cs_error_setx(err, EINVAL,
                                     "%s: RUN needs a shell and a root to run in, and this stage "
                                     "has no layers (FROM scratch): COPY a root first, or build "
                                     "FROM an image",
                                     run->what);
        for (size_t k = 0; k < l->n; k++) {
                fds[k] = l->diff_fds[l->n - 1 - k];
                paths[k] = l->diff_ids[l->n - 1 - k];
        }
        spec_init(&s);
        r = spec_set_root_layers(&s, fds, paths, l->n, err);
        upper = openat(tfd, LAYER_DIFF, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        work = openat(tfd, "work", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (r >= 0 && (upper < 0 || work < 0))
                r = cs_error_set(err, errno, "the step's directories");
        if (r >= 0)
                r = spec_set_root_upper(&s, upper, work, err);
        /* a USER's RUN owns what give_owned gave it */
        build_privileges_spec(b->priv, run->uid, run->gid, &s);
        s.net = b->net == BUILD_NET_PASTA  ? SPEC_NET_PASTA
                : b->net == BUILD_NET_HOST ? SPEC_NET_HOST
                                           : SPEC_NET_NONE;
        s.tty = SPEC_TTY_INHERIT;
        if (r >= 0)
                r = spec_add_mount(&s, SPEC_MOUNT_PROC, SPEC_MOUNT_DEFAULT, NULL, "/proc", err);
        if (r >= 0)
                r = spec_add_mount(&s, SPEC_MOUNT_DEV, SPEC_MOUNT_DEFAULT, NULL, "/dev", err);
        if (r >= 0)
                r = spec_add_net_files(&s, err);
        for (size_t k = 0; r >= 0 && run->env[k]; k++) {
                char *eq = strchr(run->env[k], '=');
                _cleanup_free_ char *name =
                    eq ? strndup(run->env[k], (size_t)(eq - run->env[k])) : NULL;

                r = name ? spec_env_set(&s, name, eq + 1, false, err)
                         : cs_error_set(err, ENOMEM, "build");
        }
        if (r >= 0 && !(s.cwd = strdup(run->cwd)))
                r = cs_error_set(err, ENOMEM, "build");
        while (run->argv[argc])
                argc++;
        if (r >= 0)
                r = spec_set_argv(&s, (int)argc, run->argv, err);
        /* the machine's decisions (e.g. slirp4netns for a missing pasta), said as exec says
         * them */
        if (r >= 0)
                r = runner_spec_complete(&s, err);
        if (r >= 0 && !b->quiet)
                spec_print_warnings(&s);
        if (r >= 0)
                r = seccomp_builtin_image_build(&filter);
        if (r >= 0) {
                /* the mountpoints the sandbox may make in the upper dir, to take out again */
                char **mp = calloc(s.n_mounts + 1, sizeof(char *));

                if (!mp)
                        r = cs_error_set(err, ENOMEM, "build");
                for (size_t k = 0; mp && k < s.n_mounts; k++)
                        if (!(mp[k] = strdup(s.mounts[k].dest)))
                                r = cs_error_set(err, ENOMEM, "build");
                *ret_mountpoints = mp;
                *ret_n = s.n_mounts;
        }
        if (r >= 0)
                r = run_captured(&s, &filter, b->quiet, &status, err);
        spec_free(&s); /* the builtin filter is static */
        if (r >= 0 && status != 0) {
                r = cs_error_setx(
                    err, ECHILD, "%s: RUN exited with status %d%s%s", run->what, status,
                    b->priv->range ? "" : " (it ran without a subordinate id range, ",
                    b->priv->range ? ""
                                   : "so only uid 0 exists inside; a package manager "
                                     "that changes owners needs one in /etc/subuid and "
                                     "/etc/subgid)");
                err->status = 1;
        }
        return r;
}

int build_sweep(struct build_ctx *b, struct cs_error *err)
{
        _cleanup_close_ int tmp = openat(b->store->fd, "tmp", O_PATH | O_DIRECTORY | O_CLOEXEC);
        struct worker_job job = {.tfd = tmp, .sweep = true};
        struct worker_result res;

        if (tmp < 0)
                return cs_error_set(err, errno, "open `%s/tmp`", b->store->root);
        return worker_run(b, &job, &res, err);
}

int build_step_layer(struct build_ctx *b, const struct build_layers *l, const struct build_step *st,
                     char ret_diff_id[OCI_DIGEST_LEN + 1], int *ret_held, struct cs_error *err)
{
        struct worker_job job = {.l = l, .st = st};
        struct worker_result res = {0};
        char tname[64] = "";
        char **mountpoints = NULL;
        size_t n_mp = 0;
        _cleanup_close_ int tfd = -1, llock = -1;
        int r;

        *ret_held = -1;
        ret_diff_id[0] = '\0';
        tfd = store_tmp_create(b->store, "layer", tname, err);
        if (tfd < 0)
                return tfd;
        if (mkdirat(tfd, LAYER_DIFF, 0755) < 0 || mkdirat(tfd, "work", 0700) < 0 ||
            mkdirat(tfd, "empty", 0755) < 0) {
                r = cs_error_set(err, errno, "the step's directories in `%s/tmp/%s`",
                                 b->store->root, tname);
                goto out;
        }
        job.tfd = tfd;
        r = 0;
        if (st->kind == BUILD_STEP_RUN && (st->run->uid != 0 || st->run->gid != 0) &&
            !b->priv->range)
                r = cs_error_setx(err, EPERM,
                                  "%s: RUN as the USER %u:%u needs the ids above 0 of the user "
                                  "namespace, which only a subordinate id range gives, and %s",
                                  st->run->what, (unsigned)st->run->uid, (unsigned)st->run->gid,
                                  b->priv->why_no_range);
        else if (st->kind == BUILD_STEP_RUN && b->priv->range) {
                struct worker_job prep = {.l = l, .st = st, .tfd = tfd, .prepare = true};
                struct worker_result pr;

                r = worker_run(b, &prep, &pr, err);
                job.given_max = r >= 0 ? BUILD_ID_MAX : 0;
        }
        if (r >= 0 && st->kind == BUILD_STEP_RUN)
                r = run_sandbox(b, l, st->run, tfd, &mountpoints, &n_mp, err);
        job.mountpoints = (const char *const *)mountpoints;
        job.n_mountpoints = n_mp;
        if (r >= 0)
                r = worker_run(b, &job, &res, err);
        if (r < 0)
                goto out;
        if (res.empty) {
                r = 0;
                goto out;
        }
        oci_digest_format(res.diff_id, ret_diff_id);
        r = layer_write_info(tfd, &res.stats, err);
        if (r >= 0)
                r = llock = store_layer_lock(b->store, ret_diff_id, err);
        if (r >= 0)
                r = store_layer_commit(b->store, &tfd, tname, ret_diff_id, ret_held, err);
        if (r >= 0)
                tname[0] = '\0';
out:
        if (tname[0]) {
                /* Dropped: best effort; a later sweep of tmp/ takes what is left. */
                struct cs_error ignored;
                struct worker_job rm = {.l = l, .st = st, .tfd = tfd, .only_remove = true};
                struct worker_result rr;

                if (tfd >= 0 && r < 0)
                        (void)worker_run(b, &rm, &rr, &ignored);
                (void)store_tmp_remove(b->store, tname, &ignored);
        }
        if (r < 0 || res.empty)
                ret_diff_id[0] = '\0';
        for (size_t k = 0; mountpoints && k < n_mp; k++)
                free(mountpoints[k]);
        free(mountpoints);
        return r < 0 ? r : 0;
}
