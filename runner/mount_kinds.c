/* Each mount kind: detached clones of host trees, new filesystems (tmpfs, proc, sysfs,
 * devices) and files and symlinks of the spec, attached through fds (open_tree, fsmount,
 * move_mount), mount_setattr making read-only/nosuid/nodev cover whole subtrees. */
#include "mounts_internal.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"
#include "../common/resolve.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

const char *const mnt_dev_nodes[N_DEV_NODES] = {"null", "zero", "full", "random", "urandom", "tty"};

int mnt_tmpfs_at(struct mnt_state *st, int dst, mode_t mode, const char *dest, struct cs_error *err)
{
        char modestr[16];
        const char *opts[] = {"mode", modestr, NULL, NULL};
        _cleanup_close_ int m = -1;
        int r;

        snprintf(modestr, sizeof(modestr), "%04o", (unsigned)mode);
        r = mnt_new_fs("tmpfs", opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, &m, err);
        if (r < 0)
                return cs_error_set(err, -r, "create a tmpfs for %s", dest);
        mnt_scratch_add(st, m);
        return mnt_attach(m, dst, "a tmpfs", dest, err);
}

int mnt_copy_at(struct mnt_state *st, int dst, const struct spec_mount *m, struct cs_error *err)
{
        struct cs_copy_budget b = {.max_bytes = SPEC_COPY_MAX_BYTES,
                                   .max_entries = SPEC_COPY_MAX_ENTRIES,
                                   .max_depth = SPEC_COPY_MAX_DEPTH};
        char modestr[16];
        const char *opts[] = {"mode", modestr, NULL, NULL};
        _cleanup_close_ int tree = -1, top = -1;
        int r;

        snprintf(modestr, sizeof(modestr), "%04o", (unsigned)(m->mode ? m->mode : 0755));
        r = mnt_new_fs("tmpfs", opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, &tree, err);
        if (r < 0)
                return cs_error_set(err, -r, "create a tmpfs for %s", m->dest);
        top = openat(tree, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (top < 0)
                return cs_error_set(err, errno, "open the tmpfs for %s", m->dest);
        /* What the source holds is the session's to write: a partial copy is a warning (the
         * sandbox then lacks what is missing), never a failed launch. */
        r = cs_copy_tree(m->source_fd, top, &b);
        if (r < 0)
                runner_warn("csandbox: warning: could not copy everything in %s into the sandbox "
                            "(%s); inside, %s lacks what is missing",
                            m->source, strerror(-r), m->dest);
        else if (b.skipped)
                runner_warn("csandbox: warning: %s holds %s, which the sandbox's copy leaves out",
                            m->source, b.skipped);
        mnt_scratch_add(st, tree);
        return mnt_attach(tree, dst, "a copy", m->dest, err);
}

static int proc_bind(int *ret, struct cs_error *err)
{
        int m = mnt_clone_tree(
            AT_FDCWD, "/proc", 0, true,
            MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, err);

        if (m < 0)
                return m;
        *ret = m;
        return 0;
}

/* --proc: auto tries a fresh proc and falls back to a read-only bind of the visible one
 * (saying so once); fresh fails instead, naming the cause; bind never tries; none is an
 * empty read-only tmpfs. */
int mnt_proc_at(int dst, enum spec_proc mode, const char *dest, struct cs_error *err)
{
        static const char *const empty[] = {"mode", "0555", "size", "4k", NULL, NULL};
        _cleanup_close_ int m = -1;
        int r;

        if (mode == SPEC_PROC_NONE) {
                r = mnt_new_fs("tmpfs", empty,
                               MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                                   MOUNT_ATTR_NOEXEC,
                               &m, err);
                if (r < 0)
                        return cs_error_set(err, -r, "create an empty %s (--proc=none)", dest);
                return mnt_attach(m, dst, "an empty proc", dest, err);
        }
        if (mode == SPEC_PROC_BIND) {
                r = proc_bind(&m, err);
                if (r < 0)
                        return cs_error_set(err, -r, "bind the existing /proc on %s (--proc=bind)",
                                            dest);
                return mnt_attach(m, dst, "proc", dest, err);
        }
        r = mnt_new_fs("proc", NULL, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, &m,
                       err);
        if (r == -EPERM && mode == SPEC_PROC_FRESH) {
                /* The kernel's own rule (mount_too_revealing), not a seccomp filter. */
                const char *cause, *fix;

                runner_proc_words(&cause, &fix);
                cs_error_setx(err, EPERM,
                              "the kernel refused a fresh proc for %s (--proc=fresh): the "
                              "visible /proc has overmounts (%s); %s, or launch with "
                              "--proc=bind (the outer /proc, read-only) or --proc=none (an empty "
                              "one)",
                              dest, cause, fix);
                err->cause_named = true;
                return -EPERM;
        }
        if (r == -EPERM) {
                /* The kernel refuses a fresh proc when the visible one has locked
                 * overmounts (container engines mask /proc this way). */
                r = proc_bind(&m, err);
                if (r < 0)
                        return cs_error_set(err, -r, "bind the existing /proc on %s", dest);
                runner_note(RUNNER_NOTE_PROC_BIND);
        } else if (r < 0) {
                return cs_error_set(err, -r, "mount proc on %s", dest);
        }
        return mnt_attach(m, dst, "proc", dest, err);
}

/* The host's /sys lists its interfaces and their MAC addresses (from which its IPv6
 * link-local addresses follow): a sysfs of the sandbox's own network namespace instead. The
 * kernel allows that only when the netns belongs to our user namespace and no outer mount
 * hides part of /sys (container engines mask some); where it is refused, for whatever
 * reason, the network directories are covered. */
int mnt_sysfs(struct mnt_state *st, struct cs_error *err)
{
        static const char *const net_dirs[] = {"/sys/class/net", "/sys/devices/virtual/net"};
        _cleanup_close_ int dst = -1, m = -1;
        int r;

        r = mnt_dest_open(st, "/sys", WANT_DIR, true, &dst, err);
        if (r < 0 || dst < 0)
                return r;
        r = mnt_new_fs("sysfs", NULL,
                       MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
                       &m, err);
        if (r == 0)
                return mnt_attach(m, dst, "sysfs", "/sys", err);
        for (size_t i = 0; i < sizeof(net_dirs) / sizeof(net_dirs[0]); i++) {
                _cleanup_close_ int d = -1;

                r = mnt_dest_open(st, net_dirs[i], WANT_DIR, true, &d, err);
                if (r >= 0 && d >= 0)
                        r = mnt_tmpfs_at(st, d, 0755, net_dirs[i], err);
                if (r < 0)
                        return r;
        }
        return 0;
}

int mnt_dev_at(struct mnt_state *st, int dst, const char *dest, struct cs_error *err)
{
        static const char *const links[][2] = {{"fd", "/proc/self/fd"},
                                               {"stdin", "/proc/self/fd/0"},
                                               {"stdout", "/proc/self/fd/1"},
                                               {"stderr", "/proc/self/fd/2"},
                                               {"ptmx", "pts/ptmx"}};
        static const char *const pts_opts[] = {"newinstance", NULL,   "ptmxmode", "0666",
                                               "mode",        "0620", NULL,       NULL};
        _cleanup_close_ int dev = -1;
        _cleanup_close_ int pts = -1;
        _cleanup_close_ int m = -1;
        int r;

        r = mnt_tmpfs_at(st, dst, 0755, dest, err);
        if (r < 0)
                return r;
        /* dst still names the covered directory; reopen through the path to get the tmpfs. */
        dev = mnt_openat2(st->root, dest, O_PATH | O_DIRECTORY | O_CLOEXEC,
                          RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS, err);
        if (dev < 0)
                return cs_error_set(err, -dev, "open %s", dest);
        for (size_t i = 0; i < N_DEV_NODES; i++) {
                int f, node;

                if (st->dev_trees[i] < 0)
                        continue;
                f = openat(dev, mnt_dev_nodes[i], O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0666);
                if (f < 0)
                        return cs_error_set(err, errno, "create %s/%s", dest, mnt_dev_nodes[i]);
                close(f);
                node = openat(dev, mnt_dev_nodes[i], O_PATH | O_CLOEXEC | O_NOFOLLOW);
                if (node < 0)
                        return cs_error_set(err, errno, "open %s/%s", dest, mnt_dev_nodes[i]);
                r = mnt_attach(st->dev_trees[i], node, mnt_dev_nodes[i], dest, err);
                close(node);
                if (r < 0)
                        return r;
                close(st->dev_trees[i]);
                st->dev_trees[i] = -1;
        }
        for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++)
                if (symlinkat(links[i][1], dev, links[i][0]) < 0)
                        return cs_error_set(err, errno, "create %s/%s", dest, links[i][0]);
        if (mkdirat(dev, "pts", 0755) < 0 || mkdirat(dev, "shm", 01777) < 0)
                return cs_error_set(err, errno, "create %s/pts and shm", dest);
        pts = openat(dev, "pts", O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (pts < 0)
                return cs_error_set(err, errno, "open %s/pts", dest);
        r = mnt_new_fs("devpts", pts_opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, &m, err);
        if (r < 0)
                return cs_error_set(err, -r, "mount devpts on %s/pts", dest);
        r = mnt_attach(m, pts, "devpts", dest, err);
        if (r < 0)
                return r;
        close(pts);
        pts = openat(dev, "shm", O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (pts < 0)
                return cs_error_set(err, errno, "open %s/shm", dest);
        return mnt_tmpfs_at(st, pts, 01777, dest, err);
}

/* A file with content from memory: written to the staging tmpfs, bound read-only. */
int mnt_file_at(const struct spec_mount *m, int dst, struct cs_error *err)
{
        _cleanup_close_ int files = open(STAGE_FILES, O_PATH | O_DIRECTORY | O_CLOEXEC);
        _cleanup_close_ int f = -1;
        _cleanup_close_ int tree = -1;
        char name[32];

        snprintf(name, sizeof(name), "%zu", m->seq);
        if (files < 0)
                return cs_error_set(err, errno, "open " STAGE_FILES);
        f = openat(files, name, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, m->mode ? m->mode : 0444);
        if (f < 0 || cs_write_all(f, m->data, m->data_len) < 0)
                return cs_error_set(err, errno, "write the copy for %s", m->dest);
        tree = mnt_clone_tree(files, name, 0, false,
                              MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, err);
        if (tree < 0)
                return cs_error_set(err, -tree, "clone the copy for %s", m->dest);
        return mnt_attach(tree, dst, "a file", m->dest, err);
}

int mnt_make_symlink(struct mnt_state *st, const struct spec_mount *m, struct cs_error *err)
{
        char path[SPEC_PATH_MAX];
        _cleanup_close_ int parent = -1;
        const char *name;
        char cur[SPEC_PATH_MAX];
        ssize_t n;
        int r;

        r = mnt_dest_parent(st, m->dest, true, path, &parent, &name, err);
        if (r < 0)
                return r;
        n = readlinkat(parent, name, cur, sizeof(cur) - 1);
        if (n >= 0) {
                cur[n] = '\0';
                if (strcmp(cur, m->source) == 0)
                        return 0;
                return cs_error_setx(err, EEXIST, "--symlink %s: a different symlink is there",
                                     m->dest);
        }
        return mnt_create_entry(st, &parent, name, MAKE_SYMLINK, m->source, true, m->dest, err);
}
