/* The worker of `image build`'s steps: a child that is root of a user namespace with the
 * build's id map (privileges.h) and of a mount namespace of its own. It mounts the step's
 * overlay, makes COPY, ADD and WORKDIR's changes in it, gives a USER's RUN what it must own,
 * turns the upper dir into a layer (build_layer_commit), and removes what killed builds
 * left in the store's tmp/. */
#include "worker.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"
#include "../runner/runner.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
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
 * subordinate range when it has one) and of a mount namespace of its own. */
int worker_run(struct build_ctx *b, const struct worker_job *j, struct worker_result *res,
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
        build_privileges_spec(b->priv, 0, 0, &map);
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
