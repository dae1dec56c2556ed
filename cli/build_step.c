/* One step of `image build` that writes a layer: the new layer's upper dir in the store's
 * tmp/, written by a RUN in csandbox's own sandbox (the runner, with that dir as the
 * overlay's upper) or by COPY, ADD and WORKDIR in a worker process that is root of a user
 * namespace with the same id map; the same worker then makes the upper dir a layer
 * (build_layer_commit), and the layer is moved into the store. */
#include "build.h"
#include "cli.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"
#include "../image/import-private.h"
#include "../image/store-private.h"
#include "../policy/seccomp.h"
#include "../runner/runner.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/openat2.h>
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/file.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef FSCONFIG_SET_FLAG
#define FSCONFIG_SET_FLAG   0
#define FSCONFIG_SET_STRING 1
#define FSCONFIG_CMD_CREATE 6
#endif

/* What a build step's root keeps: the capabilities container engines give a build. */
#define BUILD_CAPS                                                                                 \
        ((1ull << CAP_CHOWN) | (1ull << CAP_DAC_OVERRIDE) | (1ull << CAP_FOWNER) |                 \
         (1ull << CAP_FSETID) | (1ull << CAP_KILL) | (1ull << CAP_SETGID) | (1ull << CAP_SETUID) | \
         (1ull << CAP_SETPCAP) | (1ull << CAP_NET_BIND_SERVICE) | (1ull << CAP_NET_RAW) |          \
         (1ull << CAP_SYS_CHROOT) | (1ull << CAP_MKNOD) | (1ull << CAP_AUDIT_WRITE) |              \
         (1ull << CAP_SETFCAP))

void build_layers_free(struct build_layers *l)
{
        for (size_t i = 0; i < l->n; i++) {
                free(l->diff_ids[i]);
                if (l->held[i] >= 0)
                        close(l->held[i]);
                if (l->diff_fds[i] >= 0)
                        close(l->diff_fds[i]);
        }
        free(l->diff_ids);
        free(l->held);
        free(l->diff_fds);
        *l = (struct build_layers){0};
}

int build_layers_add(struct build_layers *l, const char *diff_id, int held_fd, struct cs_error *err)
{
        _cleanup_close_ int held = held_fd;
        char **ids = realloc(l->diff_ids, (l->n + 1) * sizeof(*ids));
        int *h, *d;

        if (ids)
                l->diff_ids = ids;
        h = ids ? realloc(l->held, (l->n + 1) * sizeof(*h)) : NULL;
        if (h)
                l->held = h;
        d = h ? realloc(l->diff_fds, (l->n + 1) * sizeof(*d)) : NULL;
        if (d)
                l->diff_fds = d;
        if (!d || !(ids[l->n] = strdup(diff_id)))
                return cs_error_set(err, ENOMEM, "build");
        d[l->n] = openat(held, LAYER_DIFF, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (d[l->n] < 0) {
                free(ids[l->n]);
                return cs_error_set(err, errno, "the layer %s", diff_id);
        }
        h[l->n] = cs_take_fd(&held);
        l->n++;
        return 0;
}

int build_layers_copy(struct build_layers *dst, const struct build_layers *src,
                      struct cs_error *err)
{
        for (size_t i = 0; i < src->n; i++) {
                int fd = fcntl(src->held[i], F_DUPFD_CLOEXEC, 3);

                if (fd < 0)
                        return cs_error_set(err, errno, "build");
                if (build_layers_add(dst, src->diff_ids[i], fd, err) < 0)
                        return -1;
        }
        return 0;
}

/* A detached overlay of l's layers (plus one empty dir when there are none), with the
 * upper and work dirs or read-only: its mount fd. */
static int overlay_open(const struct build_layers *l, int empty, int upper, int work,
                        struct cs_error *err)
{
        _cleanup_close_ int fs = (int)syscall(SYS_fsopen, "overlay", 1 /* FSOPEN_CLOEXEC */);
        char path[32];
        int m;

        if (fs < 0)
                return cs_error_set(err, errno, "overlayfs");
        for (size_t k = 0; k < l->n || (k == 0 && l->n == 0); k++) {
                /* through this namespace's copy of its mount, as overlayfs wants */
                _cleanup_close_ int fd = mnt_reopen_here(l->n ? l->diff_fds[l->n - 1 - k] : empty,
                                                         "a layer of the step", err);

                if (fd < 0)
                        return fd;
                snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
                if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "lowerdir+", path, 0) < 0)
                        return cs_error_set(err, errno, "overlay lower dir %zu", k + 1);
        }
        if (upper >= 0) {
                snprintf(path, sizeof(path), "/proc/self/fd/%d", upper);
                if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "upperdir", path, 0) < 0)
                        return cs_error_set(err, errno, "overlay upper dir");
                snprintf(path, sizeof(path), "/proc/self/fd/%d", work);
                if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "workdir", path, 0) < 0)
                        return cs_error_set(err, errno, "overlay work dir");
        }
        if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_FLAG, "userxattr", NULL, 0) < 0 ||
            syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return cs_error_set(err, errno,
                                    "mount the step's overlay (overlayfs in a user namespace "
                                    "needs Linux 5.11 or later)");
        m = (int)syscall(SYS_fsmount, fs, 1 /* FSMOUNT_CLOEXEC */,
                         MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                             (upper < 0 ? MOUNT_ATTR_RDONLY : 0));
        if (m < 0)
                return cs_error_set(err, errno, "mount the step's overlay");
        return m;
}

/* mkdir -p of an absolute path inside the root, resolved in it. */
static int mkdir_in_root(int root, const char *path, struct cs_error *err)
{
        char buf[4096], *save = NULL;
        _cleanup_close_ int dir = fcntl(root, F_DUPFD_CLOEXEC, 3);

        snprintf(buf, sizeof(buf), "%s", path);
        for (char *c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
                struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                                       .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
                int fd;

                if (dir < 0)
                        return cs_error_set(err, errno, "WORKDIR %s", path);
                if (mkdirat(dir, c, 0755) < 0 && errno != EEXIST)
                        return cs_error_set(err, errno, "WORKDIR %s: create %s", path, c);
                /* a symlink component is followed inside the root, as in the sandbox */
                fd = (int)syscall(SYS_openat2, root, buf, &how, sizeof(how));
                if (fd < 0)
                        return cs_error_set(err, errno, "WORKDIR %s: %s is not a directory", path,
                                            buf);
                close(dir);
                dir = fd;
                if (save && *save)
                        save[-1] = '/';
        }
        return 0;
}

struct give_ctx {
        int root;
        const struct build_run *run;
        struct cs_error *err;
};

static int give_one(void *opaque, const char *path, uint32_t mode, uint32_t uid, uint32_t gid)
{
        struct give_ctx *g = opaque;
        const struct build_run *run = g->run;
        struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                               .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS};
        _cleanup_free_ char *dir = strdup(path);
        char *slash = dir ? strrchr(dir, '/') : NULL;
        const char *base = slash ? slash + 1 : path;
        _cleanup_close_ int dfd = -1;

        /* Every directory another user owns (ids the step maps), so that a RUN finds them
         * as docker's would (a `su` to their owner writes there; ls shows the owner); files
         * only of the step's USER (each costs a copy of the file in the step's layer). */
        if (!(S_ISDIR(mode) && uid <= BUILD_ID_MAX && gid <= BUILD_ID_MAX) &&
            !(run->uid && uid == run->uid) && !(run->gid && gid == run->gid))
                return 0;
        if (!dir)
                return cs_error_set(g->err, ENOMEM, "%s", run->what);
        if (strcmp(path, ".") == 0)
                return 0; /* the root stays root's */
        if (slash)
                *slash = '\0';
        dfd = (int)syscall(SYS_openat2, g->root, slash ? dir : ".", &how, sizeof(how));
        if (dfd < 0)
                return 0; /* hidden or replaced by a later layer: nothing of the user's */
        /* Copied up into the step's layer with the owner the layers record; a link's mode
         * is not its own. A path a later layer removed is simply absent. */
        if (fchownat(dfd, base, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0
                                       : cs_error_set(g->err, errno, "%s: give `%s` to %u:%u",
                                                      run->what, path, uid, gid);
        if (!S_ISLNK(mode) && fchmodat(dfd, base, mode & 07777, 0) < 0)
                return cs_error_set(g->err, errno, "%s: chmod `%s`", run->what, path);
        return 0;
}

/* Before a RUN, in the step's overlay root (the tree on disk is the caller's, which the
 * step sees as root's): the directories the layers' metadata records as another user's or
 * group's get that owner, and so do the USER's own files, so the user writes where the
 * Containerfile gave it a place, and nowhere else. What the step leaves as it was given is
 * dropped from its layer again (build_layer_commit). */
static int give_owned(int root, const struct build_layers *l, const struct build_run *run,
                      struct cs_error *err)
{
        /* only ownership tables: no stream is read against these limits */
        struct layer_limits lim = LAYER_LIMITS_DEFAULT;
        _cleanup_free_ int *dirs = calloc(l->n + 1, sizeof(int));
        struct give_ctx g = {.root = root, .run = run, .err = err};
        struct layer_tree *t = NULL;
        int r;

        if (!dirs)
                return cs_error_set(err, ENOMEM, "%s", run->what);
        for (size_t k = 0; k < l->n; k++)
                dirs[k] = l->held[l->n - 1 - k];
        r = layer_tree_new(root, &lim, &t, err);
        if (r >= 0)
                r = layer_tree_set_lowers(t, dirs, l->n, err);
        if (r >= 0)
                r = layer_lowers_not_roots(t, give_one, &g);
        layer_tree_free(t);
        return r < 0 ? -1 : 0;
}

/* What the worker sends back. */
struct worker_result {
        int r;
        bool empty;
        unsigned char diff_id[32];
        struct layer_stats stats;
        char msg[CS_ERROR_MAX];
};

struct worker_job {
        const struct build_layers *l;
        const struct build_step *st;
        int tfd;            /* tmp/layer-*: diff/, work/, empty/, metadata */
        bool only_remove;   /* the step failed: give the tree back to the caller for removal */
        bool sweep;         /* tfd is the store's tmp/: remove what killed builds left there */
        bool prepare;       /* before a RUN: give_owned */
        uint32_t given_max; /* build_layer_commit's: BUILD_ID_MAX after a prepare, or 0 */
        const char *const *mountpoints;
        size_t n_mountpoints;
};

/* The tmp/layer-* that no build holds any more (killed while a step ran): their files may
 * belong to subordinate ids, which only root of this namespace can remove. */
static int sweep_layers(int tmp, struct cs_error *err)
{
        int fd = openat(tmp, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_closedir_ DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        struct dirent *de;

        if (!d) {
                if (fd >= 0)
                        close(fd);
                return cs_error_set(err, errno, "the store's tmp/");
        }
        while ((de = readdir(d))) {
                _cleanup_close_ int e = -1;

                if (strncmp(de->d_name, "layer-", 6) != 0)
                        continue;
                e = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (e < 0 || flock(e, LOCK_EX | LOCK_NB) < 0)
                        continue; /* a build or import in progress */
                if (cs_remove_at(dirfd(d), de->d_name, err) < 0)
                        return -1;
        }
        return 0;
}

static int worker_body(const struct worker_job *j, struct worker_result *res, struct cs_error *err)
{
        _cleanup_close_ int upper = -1, work = -1, empty = -1, meta = -1, m = -1, from = -1;
        int r;

        if (j->only_remove) {
                /* Dropped: whatever stays is removed by the caller or a later sweep. */
                struct cs_error ignored;
                (void)cs_remove_at(j->tfd, LAYER_DIFF, &ignored);
                (void)cs_remove_at(j->tfd, "work", &ignored);
                return 0;
        }
        if (j->sweep)
                return sweep_layers(j->tfd, err);
        if (j->st->kind != BUILD_STEP_RUN || j->prepare) {
                _cleanup_close_ int u =
                    openat(j->tfd, LAYER_DIFF, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                _cleanup_close_ int w =
                    openat(j->tfd, "work", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

                empty = openat(j->tfd, "empty", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (u < 0 || w < 0 || empty < 0)
                        return cs_error_set(err, errno, "the step's directories");
                /* the overlay takes its upper dir from a mount of this namespace */
                upper = mnt_reopen_here(u, "the step's upper dir", err);
                if (upper < 0)
                        return upper;
                work = mnt_reopen_here(w, "the step's work dir", err);
                if (work < 0)
                        return work;
                m = overlay_open(j->l, empty, upper, work, err);
                if (m < 0)
                        return m;
                if (j->prepare) {
                        r = give_owned(m, j->l, j->st->run, err);
                        close(m);
                        return r;
                }
                if (j->st->kind == BUILD_STEP_MKDIR) {
                        r = mkdir_in_root(m, j->st->mkdir, err);
                } else {
                        struct build_copy c = *j->st->copy;

                        if (j->st->from) {
                                from = overlay_open(j->st->from, empty, -1, -1, err);
                                if (from < 0)
                                        return from;
                                c.src_root_fd = from;
                        }
                        char copied[65] = "";

                        r = build_copy_apply(m, &c, j->st->content ? copied : NULL, err);
                        /* what the context holds as it is copied must be what the key says:
                         * a context changed meanwhile (a session writing the work tree),
                         * even changed back, must neither land in the cache under the old
                         * content nor pass silently */
                        if (r >= 0 && j->st->content && strcmp(copied, j->st->content) != 0)
                                r = cs_error_setx(err, EAGAIN,
                                                  "%s: the build context changed while %s read "
                                                  "it; build again once nothing writes to it",
                                                  j->st->what, c.add ? "ADD" : "COPY");
                }
                if (r < 0)
                        return r;
                close(m); /* the overlay goes with its last reference */
                m = -1;
                if (from >= 0)
                        close(from), from = -1;
        }
        {
                _cleanup_close_ int up =
                    openat(j->tfd, LAYER_DIFF, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                _cleanup_free_ int *lowers = calloc(j->l->n + 1, sizeof(int));

                if (up < 0 || !lowers)
                        return cs_error_set(err, errno ? errno : ENOMEM, "the step's layer");
                for (size_t k = 0; k < j->l->n; k++)
                        lowers[k] = j->l->diff_fds[j->l->n - 1 - k];
                meta = openat(j->tfd, LAYER_META,
                              O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (meta < 0)
                        return cs_error_set(err, errno, "the layer's metadata");
                r = build_layer_commit(up, lowers, j->l->n, j->mountpoints, j->n_mountpoints,
                                       j->given_max, meta, res->diff_id, &res->stats, &res->empty,
                                       err);
                if (r < 0)
                        return r;
        }
        r = cs_remove_at(j->tfd, "work", err);
        if (r >= 0)
                r = cs_remove_at(j->tfd, "empty", err);
        return r;
}

/* Run the job in a child that is root of a new user namespace (0 the caller, 1..65535 its
 * subordinate range when b->range) and of a mount namespace of its own. */
static int worker_run(struct build_ctx *b, const struct worker_job *j, struct worker_result *res,
                      struct cs_error *err)
{
        struct sandbox_spec map;
        int go[2] = {-1, -1}, back[2] = {-1, -1};
        struct worker_result out = {0};
        int status, r;
        ssize_t n;
        pid_t pid;
        char c;

        if (pipe2(go, O_CLOEXEC) < 0 || pipe2(back, O_CLOEXEC) < 0)
                return cs_error_set(err, errno, "pipe");
        pid = fork();
        if (pid < 0) {
                r = cs_error_set(err, errno, "fork");
                goto out;
        }
        if (pid == 0) {
                struct cs_error e = {0};

                close(go[1]);
                close(back[0]);
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0) {
                        out.r = cs_error_set(&e, errno, "a user namespace for the step");
                } else if (write(back[1], "u", 1) != 1 || read(go[0], &c, 1) != 1) {
                        _exit(1);
                } else {
                        out.r = worker_body(j, &out, &e);
                }
                snprintf(out.msg, sizeof(out.msg), "%s", e.msg);
                if (cs_write_all(back[1], &out, sizeof(out)) < 0)
                        _exit(1);
                _exit(0);
        }
        close(go[0]), go[0] = -1;
        close(back[1]), back[1] = -1;
        if (read(back[0], &c, 1) != 1) {
                r = cs_error_setx(err, EIO, "the step's worker failed before its namespace");
                goto reap;
        }
        spec_init(&map);
        map.host_uid = getuid();
        map.host_gid = getgid();
        map.map_range = b->range;
        r = idmap_write(pid, &map, err);
        spec_free(&map);
        if (r < 0)
                goto reap;
        if (write(go[1], "g", 1) != 1) {
                r = cs_error_set(err, errno, "the step's worker");
                goto reap;
        }
        close(go[1]), go[1] = -1;
        n = read(back[0], &out, sizeof(out));
        if (n != (ssize_t)sizeof(out))
                r = cs_error_setx(err, EIO, "the step's worker ended without a result");
        else if (out.r < 0)
                r = cs_error_setx(err, -out.r, "%s", out.msg);
        else
                *res = out, r = 0;
reap:
        if (go[1] >= 0)
                close(go[1]), go[1] = -1;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
out:
        for (int k = 0; k < 2; k++) {
                if (go[k] >= 0)
                        close(go[k]);
                if (back[k] >= 0)
                        close(back[k]);
        }
        return r;
}

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
        /* The caller is root here (what the layers hold is the caller's); a USER's RUN
         * runs as that user, on one of the subordinate ids, and owns what give_owned gave
         * it. */
        s.host_uid = getuid();
        s.host_gid = getgid();
        s.map_range = b->range;
        if (run->uid != 0 || run->gid != 0) {
                s.payload_ids = true;
                s.payload_uid = run->uid;
                s.payload_gid = run->gid;
        }
        if (run->uid == 0)
                s.payload_caps = BUILD_CAPS;
        s.net = b->net ? SPEC_NET_PASTA : SPEC_NET_NONE;
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
        if (r >= 0)
                r = seccomp_builtin(SPEC_SECCOMP_DEFAULT, &filter, err);
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
                r = cs_error_setx(err, ECHILD, "%s: RUN exited with status %d%s%s", run->what,
                                  status,
                                  b->range ? "" : " (it ran without a subordinate id range, ",
                                  b->range ? ""
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

int build_step_do(struct build_ctx *b, const struct build_layers *l, const struct build_step *st,
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
        if (st->kind == BUILD_STEP_RUN && (st->run->uid != 0 || st->run->gid != 0) && !b->range)
                r = cs_error_setx(err, EPERM,
                                  "%s: RUN as the USER %u:%u needs the ids above 0 of the user "
                                  "namespace, which only a subordinate id range gives, and %s",
                                  st->run->what, (unsigned)st->run->uid, (unsigned)st->run->gid,
                                  b->why_no_range);
        else if (st->kind == BUILD_STEP_RUN && b->range) {
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
