/* Staged copies for a sandboxed launch (reference §1.4, §2.4–§2.10). The profile dir and
 * the work tree are writable by the previous sandbox session, so everything read from them
 * is opened relative to a dir fd with O_NOFOLLOW and typed with fstat on the opened fd;
 * every file written goes into the state dir through cs_write_file_atomic. */
#include "stage.h"

#include "common/cleanup.h"
#include "common/error.h"
#include "common/fileio.h"
#include "common/sha256.h"
#include "policy/profile.h"
#include "policy/settings.h"
#include "policy/worktree.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#define SETTINGS_MAX      ((size_t)4 << 20)
#define HOST_FILE_MAX     ((size_t)16 << 20) /* ~/.gitconfig, ~/.ssh/known_hosts */
#define HOOKS_MAX_BYTES   ((size_t)64 << 20)
#define HOOKS_MAX_ENTRIES 4096
#define TREE_MAX_DEPTH    64
#define GIT_OUTPUT_MAX    ((size_t)64 << 10)

#define SANDBOX_GITCONFIG "/home/appuser/.gitconfig"

void stage_warnings_free(struct stage_warnings *w)
{
        if (!w)
                return;
        for (size_t i = 0; i < w->n; i++)
                free(w->msgs[i]);
        free(w->msgs);
        w->msgs = NULL;
        w->n = 0;
}

static int warn_add(struct stage_warnings *w, struct cs_error *err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int warn_add(struct stage_warnings *w, struct cs_error *err, const char *fmt, ...)
{
        char *msg = NULL, **msgs;
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&msg, fmt, ap);
        va_end(ap);
        if (r < 0)
                return cs_error_set(err, ENOMEM, "record a warning");
        msgs = realloc(w->msgs, (w->n + 1) * sizeof(*msgs));
        if (!msgs) {
                free(msg);
                return cs_error_set(err, ENOMEM, "record a warning");
        }
        msgs[w->n++] = msg;
        w->msgs = msgs;
        return 0;
}

static char *path_join(const char *a, const char *b)
{
        char *s = NULL;

        if (asprintf(&s, "%s/%s", a, b) < 0)
                return NULL;
        return s;
}

/* The first 16 hex digits of sha256(s): the reference's key for per-path copies. */
static int sha256_hex16(const void *data, size_t len, char out[17])
{
        unsigned char md[32];
        int r = cs_sha256(data, len, md);

        if (r < 0)
                return r;
        for (int i = 0; i < 8; i++)
                snprintf(out + 2 * i, 3, "%02x", md[i]);
        return 0;
}

/* mkdir NAME (mode, existing is fine) under dirfd and open it; a symlink there is refused. */
static int open_subdir(int dirfd, const char *name, const char *shown, mode_t mode, int *ret_fd,
                       struct cs_error *err)
{
        int fd;

        if (mkdirat(dirfd, name, mode) < 0 && errno != EEXIST)
                return cs_error_set(err, errno, "create %s", shown);
        fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 && errno == ELOOP)
                return cs_error_setx(err, ELOOP,
                                     "%s is a symlink; csandbox made it a directory and does not "
                                     "follow a link there. Remove it and launch again",
                                     shown);
        if (fd < 0)
                return cs_error_set(err, errno, "open %s", shown);
        *ret_fd = fd;
        return 0;
}

/* mkdir -p for the host user's own data dirs (not writable by the sandbox). */
static int mkdir_parents(const char *path, mode_t mode, struct cs_error *err)
{
        _cleanup_free_ char *p = strdup(path);

        if (!p)
                return cs_error_set(err, ENOMEM, "create %s", path);
        for (char *s = p + 1; *s; s++) {
                if (*s != '/')
                        continue;
                *s = '\0';
                if (mkdir(p, mode) < 0 && errno != EEXIST)
                        return cs_error_set(err, errno, "create %s", p);
                *s = '/';
        }
        if (mkdir(p, mode) < 0 && errno != EEXIST)
                return cs_error_set(err, errno, "create %s", p);
        return 0;
}

static int open_dir_parents(const char *path, int *ret_fd, struct cs_error *err)
{
        int r = mkdir_parents(path, 0700, err), fd;

        if (r < 0)
                return r;
        fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return cs_error_set(err, errno, "open %s", path);
        *ret_fd = fd;
        return 0;
}

int stage_settings(const struct profile *p, char **ret_path, struct stage_warnings *warn,
                   struct cs_error *err)
{
        _cleanup_free_ char *src = path_join(p->dir, "settings.json");
        _cleanup_free_ char *dest = path_join(p->state_dir, "settings.json");
        _cleanup_free_ char *raw = NULL;
        _cleanup_free_ char *content = NULL;
        _cleanup_close_ int fd = -1;
        size_t raw_len = 0, len = 0;
        bool stripped;
        struct stat st;
        int r;

        if (!src || !dest)
                return cs_error_set(err, ENOMEM, "stage settings.json");
        fd = openat(p->dir_fd, "settings.json",
                    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT) {
                /* A file to mount over; the runtime would otherwise create it on the host. */
                _cleanup_close_ int nfd =
                    openat(p->dir_fd, "settings.json",
                           O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);

                if (nfd < 0 && errno != EEXIST)
                        return cs_error_set(err, errno, "create %s", src);
                if (nfd >= 0 && cs_write_all(nfd, "{}\n", 3) < 0)
                        return cs_error_set(err, errno, "write %s", src);
                fd = openat(p->dir_fd, "settings.json",
                            O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        }
        if (fd < 0 && errno == ELOOP) {
                /* Never read through it: a link to another profile's files would get them
                 * copied into this sandbox. */
                r = warn_add(warn, err,
                             "Warning: %s is a symlink, so the sandbox gets empty settings "
                             "instead of reading through it. Replace it with a regular file to "
                             "use these settings in the sandbox.",
                             src);
                if (r < 0)
                        return r;
                content = strdup("{}\n");
                if (!content)
                        return cs_error_set(err, ENOMEM, "stage settings.json");
                len = 3;
        } else {
                if (fd < 0)
                        return cs_error_set(err, errno, "Could not read %s", src);
                if (fstat(fd, &st) < 0)
                        return cs_error_set(err, errno, "Could not read %s", src);
                if (!S_ISREG(st.st_mode))
                        return cs_error_setx(err, EINVAL,
                                             "Could not read %s: it is not a regular file", src);
                r = cs_read_fd(fd, src, SETTINGS_MAX, &raw, &raw_len, err);
                if (r < 0)
                        return cs_error_wrap(err, "Could not read the profile's settings");
                r = settings_profile_copy(raw, raw_len, &content, &len, &stripped, err);
                if (r < 0)
                        return cs_error_wrap(err, "%s", src);
        }
        r = cs_write_file_atomic(p->state_fd, "settings.json", content, len, 0600, err);
        if (r < 0)
                return cs_error_wrap(err,
                                     "Could not write the sandbox's copy of settings.json to %s "
                                     "(without it the sandbox would change the profile's real "
                                     "settings)",
                                     dest);
        *ret_path = cs_take_ptr(&dest);
        return 0;
}

int stage_chrome(const struct profile *p, char **ret_path, struct cs_error *err)
{
        _cleanup_free_ char *path = path_join(p->state_dir, "chrome");
        _cleanup_close_ int fd = -1;
        int r;

        if (!path)
                return cs_error_set(err, ENOMEM, "stage chrome");
        r = open_subdir(p->state_fd, "chrome", path, 0700, &fd, err);
        if (r < 0)
                return r;
        *ret_path = cs_take_ptr(&path);
        return 0;
}

/* A file of the host user's own (links followed, as the reference does): copied into the
 * state dir as `name`, or *ret_path NULL when it is missing or not a regular file. */
static int stage_host_file(const struct profile *p, const char *source, const char *name,
                           char **ret_path, struct cs_error *err)
{
        _cleanup_free_ char *dest = path_join(p->state_dir, name);
        _cleanup_free_ char *buf = NULL;
        _cleanup_close_ int fd = -1;
        struct stat st;
        size_t len = 0;
        int r;

        if (!dest)
                return cs_error_set(err, ENOMEM, "stage %s", source);
        fd = open(source, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0 && (errno == ENOENT || errno == ENOTDIR || errno == ELOOP)) {
                *ret_path = NULL;
                return 0;
        }
        if (fd < 0)
                return cs_error_set(err, errno, "open %s", source);
        if (fstat(fd, &st) < 0)
                return cs_error_set(err, errno, "stat %s", source);
        if (!S_ISREG(st.st_mode)) {
                *ret_path = NULL;
                return 0;
        }
        r = cs_read_fd(fd, source, HOST_FILE_MAX, &buf, &len, err);
        if (r < 0)
                return r;
        r = cs_write_file_atomic(p->state_fd, name, buf, len, 0600, err);
        if (r < 0)
                return cs_error_wrap(err, "copy %s into %s", source, p->state_dir);
        *ret_path = cs_take_ptr(&dest);
        return 0;
}

int stage_gitconfig(const struct profile *p, const char *home, char **ret_path,
                    struct cs_error *err)
{
        _cleanup_free_ char *src = path_join(home, ".gitconfig");

        if (!src)
                return cs_error_set(err, ENOMEM, "stage .gitconfig");
        return stage_host_file(p, src, "gitconfig", ret_path, err);
}

int stage_host_known_hosts(const struct profile *p, const char *home, char **ret_path,
                           struct cs_error *err)
{
        _cleanup_free_ char *src = path_join(home, ".ssh/known_hosts");

        if (!src)
                return cs_error_set(err, ENOMEM, "stage known_hosts");
        return stage_host_file(p, src, "host_known_hosts", ret_path, err);
}

int stage_user_known_hosts(const struct profile *p, char **ret_path, struct cs_error *err)
{
        _cleanup_free_ char *path = path_join(p->state_dir, "known_hosts");
        _cleanup_close_ int fd = -1;
        struct stat st;

        if (!path)
                return cs_error_set(err, ENOMEM, "stage known_hosts");
        /* Created when missing, never truncated: keys accepted inside persist. */
        fd = openat(p->state_fd, "known_hosts",
                    O_RDONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0600);
        if (fd < 0 && errno == ELOOP)
                return cs_error_setx(err, ELOOP,
                                     "%s is a symlink, which csandbox never creates there; "
                                     "remove it and launch again",
                                     path);
        if (fd < 0)
                return cs_error_set(err, errno, "create %s", path);
        if (fstat(fd, &st) < 0)
                return cs_error_set(err, errno, "stat %s", path);
        if (!S_ISREG(st.st_mode))
                return cs_error_setx(err, EINVAL, "%s is not a regular file; remove it", path);
        *ret_path = cs_take_ptr(&path);
        return 0;
}

/* Copy an open fd's bytes: copy_file_range, else read/write (the fds start at offset 0). */
static int copy_fd_bytes(int in, int out)
{
        char buf[65536];
        bool plain = false;

        for (;;) {
                ssize_t n;

                if (!plain) {
                        n = copy_file_range(in, NULL, out, NULL, (size_t)1 << 30, 0);
                        if (n < 0 &&
                            (errno == EXDEV || errno == EINVAL || errno == ENOSYS ||
                             errno == EOPNOTSUPP || errno == EPERM) &&
                            lseek(out, 0, SEEK_CUR) == 0) {
                                plain = true;
                                continue;
                        }
                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n < 0)
                                return -errno;
                        if (n == 0)
                                return 0;
                        continue;
                }
                n = read(in, buf, sizeof(buf));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return 0;
                if (cs_write_all(out, buf, (size_t)n) < 0)
                        return -errno;
        }
}

struct tree_budget {
        size_t bytes, entries;
        const char *skipped; /* first entry skipped for its type */
};

/* Copy the tree under src into dst: links as links (never followed), regular files with
 * their permission bits, dirs recursively; other types are skipped. */
static int copy_tree(int src, int dst, int depth, struct tree_budget *bud)
{
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        int fd2, r;

        if (depth > TREE_MAX_DEPTH)
                return -ELOOP;
        fd2 = dup(src);
        if (fd2 < 0)
                return -errno;
        d = fdopendir(fd2);
        if (!d) {
                close(fd2);
                return -errno;
        }
        while ((errno = 0, de = readdir(d))) {
                struct stat st;

                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (++bud->entries > HOOKS_MAX_ENTRIES)
                        return -EFBIG;
                if (fstatat(src, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        return -errno;
                if (S_ISLNK(st.st_mode)) {
                        char target[PATH_MAX];
                        ssize_t n = readlinkat(src, de->d_name, target, sizeof(target) - 1);

                        if (n < 0)
                                return -errno;
                        target[n] = '\0';
                        if (symlinkat(target, dst, de->d_name) < 0)
                                return -errno;
                } else if (S_ISREG(st.st_mode)) {
                        _cleanup_close_ int in =
                            openat(src, de->d_name,
                                   O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
                        _cleanup_close_ int out = -1;
                        struct stat st2;

                        if (in < 0 || fstat(in, &st2) < 0)
                                return -errno;
                        if (!S_ISREG(st2.st_mode))
                                return -EINVAL;
                        bud->bytes += (size_t)st2.st_size;
                        if (bud->bytes > HOOKS_MAX_BYTES)
                                return -EFBIG;
                        out = openat(dst, de->d_name,
                                     O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                        if (out < 0)
                                return -errno;
                        r = copy_fd_bytes(in, out);
                        if (r < 0)
                                return r;
                        if (fchmod(out, st2.st_mode & 0777) < 0)
                                return -errno;
                } else if (S_ISDIR(st.st_mode)) {
                        _cleanup_close_ int in = -1, out = -1;

                        in = openat(src, de->d_name,
                                    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (in < 0)
                                return -errno;
                        if (mkdirat(dst, de->d_name, 0700) < 0)
                                return -errno;
                        out = openat(dst, de->d_name,
                                     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (out < 0)
                                return -errno;
                        r = copy_tree(in, out, depth + 1, bud);
                        if (r < 0)
                                return r;
                        if (fchmod(out, st.st_mode & 0777) < 0)
                                return -errno;
                } else if (!bud->skipped) {
                        bud->skipped = "a fifo, socket or device";
                }
        }
        return errno ? -errno : 0;
}

/* Remove the hooks copies of launches that are gone: entries "<key>-<pid>" (every one with
 * our own pid when mine is set, else those whose pid no longer exists). */
static void prune_hook_copies(int rootfd, const char *key, bool mine)
{
        struct cs_error ignored;
        _cleanup_closedir_ DIR *d = NULL;
        int dfd = fcntl(rootfd, F_DUPFD_CLOEXEC, 3);
        size_t klen = key ? strlen(key) : 0;
        struct dirent *de;

        if (dfd < 0 || !(d = fdopendir(dfd))) {
                if (dfd >= 0)
                        close(dfd);
                return;
        }
        while ((de = readdir(d))) {
                const char *dash = strrchr(de->d_name, '-');
                char *end;
                long pid;

                if (!dash || (key && ((size_t)(dash - de->d_name) != klen ||
                                      strncmp(de->d_name, key, klen) != 0)))
                        continue;
                pid = strtol(dash + 1, &end, 10);
                if (*end || pid <= 0)
                        continue;
                if (mine ? pid != getpid() : (kill((pid_t)pid, 0) == 0 || errno != ESRCH))
                        continue;
                /* Best effort: what cannot go now goes with a later launch. */
                (void)cs_remove_at(dirfd(d), de->d_name, &ignored);
        }
}

void stage_release(const struct profile *p)
{
        _cleanup_close_ int rootfd = -1;

        if (p->state_fd < 0)
                return;
        rootfd = openat(p->state_fd, "git-hooks", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (rootfd >= 0)
                prune_hook_copies(rootfd, NULL, true);
}

int stage_git_dir(const struct profile *p, int git_fd, const char *git_dir, char **ret_config,
                  char **ret_hooks_copy, struct stage_warnings *warn, struct cs_error *err)
{
        _cleanup_free_ char *config = path_join(git_dir, "config");
        _cleanup_free_ char *hooks = path_join(git_dir, "hooks");
        _cleanup_free_ char *hooks_root = path_join(p->state_dir, "git-hooks");
        _cleanup_free_ char *copy = NULL;
        _cleanup_close_ int rootfd = -1, cfd = -1, hfd = -1;
        const int gfd = git_fd;
        char key[17], name[40];
        struct cs_error why;
        struct stat st;
        bool config_ok = false, hooks_dir = false;
        int r;

        if (!config || !hooks || !hooks_root)
                return cs_error_set(err, ENOMEM, "stage %s", git_dir);

        if (fstatat(gfd, "config", &st, AT_SYMLINK_NOFOLLOW) == 0) {
                if (S_ISLNK(st.st_mode)) {
                        r = warn_add(warn, err,
                                     "Warning: %s is a symlink, which git does not create, so "
                                     "the sandbox cannot protect it. Check where it points.",
                                     config);
                        if (r < 0)
                                return r;
                }
                config_ok = S_ISREG(st.st_mode);
        }

        if (fstatat(gfd, "hooks", &st, AT_SYMLINK_NOFOLLOW) == 0) {
                if (S_ISLNK(st.st_mode)) {
                        r = warn_add(warn, err,
                                     "Warning: %s is a symlink, which git does not create, so "
                                     "the sandbox cannot protect it. Check where it points.",
                                     hooks);
                        if (r < 0)
                                return r;
                        *ret_config = config_ok ? cs_take_ptr(&config) : NULL;
                        *ret_hooks_copy = NULL;
                        return 0;
                }
                if (!S_ISDIR(st.st_mode)) {
                        /* A copy dir cannot be mounted over a file; git ignores it anyway. */
                        r = warn_add(warn, err,
                                     "Warning: %s is not a directory, so the sandbox does not "
                                     "give it a copy of the hooks.",
                                     hooks);
                        if (r < 0)
                                return r;
                        *ret_config = config_ok ? cs_take_ptr(&config) : NULL;
                        *ret_hooks_copy = NULL;
                        return 0;
                }
                hooks_dir = true;
        } else if (errno != ENOENT) {
                return cs_error_set(err, errno, "stat %s", hooks);
        }

        if (sha256_hex16(hooks, strlen(hooks), key) < 0)
                return cs_error_setx(err, EIO, "sha256 of %s failed", hooks);
        /* One copy per launch, <key>-<pid>: concurrent sessions in one repo each get their
         * own throwaway copy, and none empties another's while it runs. */
        snprintf(name, sizeof(name), "%s-%d", key, (int)getpid());
        copy = path_join(hooks_root, name);
        if (!copy)
                return cs_error_set(err, ENOMEM, "stage %s", hooks);
        r = open_subdir(p->state_fd, "git-hooks", hooks_root, 0700, &rootfd, err);
        if (r < 0)
                return r;
        prune_hook_copies(rootfd, key, false);
        r = open_subdir(rootfd, name, copy, 0700, &cfd, err);
        if (r < 0)
                return r;
        r = cs_empty_dir(cfd, &why);
        if (r < 0)
                return cs_error_setx(err, -r,
                                     "Could not clear the sandbox's copy of %s at %s (%s); "
                                     "remove it with: rm -rf %s and launch again",
                                     hooks, copy, why.msg, copy);
        if (hooks_dir) {
                struct tree_budget bud = {0};

                hfd = openat(gfd, "hooks", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                r = hfd < 0 ? -errno : copy_tree(hfd, cfd, 0, &bud);
                if (r < 0) {
                        r = warn_add(warn, err,
                                     "Warning: could not copy every hook from %s into the "
                                     "sandbox (%s); git in the sandbox runs without the "
                                     "missing ones.",
                                     hooks, strerror(-r));
                        if (r < 0)
                                return r;
                } else if (bud.skipped) {
                        r = warn_add(warn, err,
                                     "Warning: %s holds %s, which the sandbox's copy leaves out.",
                                     hooks, bud.skipped);
                        if (r < 0)
                                return r;
                }
        }
        *ret_config = config_ok ? cs_take_ptr(&config) : NULL;
        *ret_hooks_copy = cs_take_ptr(&copy);
        return 0;
}

int stage_local_settings(const struct profile *p, int dir_fd, const char *local_path,
                         char **ret_copy, struct stage_warnings *warn, struct cs_error *err)
{
        _cleanup_free_ char *raw = NULL;
        _cleanup_free_ char *dest = NULL;
        _cleanup_free_ char *dir = path_join(p->state_dir, "local-settings");
        _cleanup_close_ int lfd = -1;
        const int pfd = dir_fd;
        const char *base, *slash = strrchr(local_path, '/');
        char key[17], name[32];
        size_t len = 0;
        struct stat st;
        int r;

        if (!dir)
                return cs_error_set(err, ENOMEM, "stage %s", local_path);
        if (!slash || slash == local_path || !slash[1])
                return cs_error_setx(err, EINVAL, "%s is not an absolute file path", local_path);
        base = slash + 1;
        if (pfd < 0) {
                *ret_copy = NULL;
                return 0;
        }
        if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                if (errno == ENOENT) {
                        *ret_copy = NULL;
                        return 0;
                }
                return cs_error_set(err, errno, "stat %s", local_path);
        }
        if (S_ISDIR(st.st_mode)) {
                *ret_copy = NULL;
                return 0;
        }
        if (!S_ISLNK(st.st_mode)) {
                r = cs_read_file_at(pfd, base, SETTINGS_MAX, true, &raw, &len, err);
                if (r == -ELOOP)
                        st.st_mode = S_IFLNK; /* swapped for a link since the stat */
                else if (r < 0)
                        return r;
        }
        if (S_ISLNK(st.st_mode)) {
                r = warn_add(warn, err,
                             "Warning: %s is a symlink, so the sandbox gets empty local settings "
                             "there instead of reading through it.",
                             local_path);
                if (r < 0)
                        return r;
                free(raw);
                raw = strdup("{}\n");
                if (!raw)
                        return cs_error_set(err, ENOMEM, "stage %s", local_path);
                len = 3;
        }
        if (sha256_hex16(local_path, strlen(local_path), key) < 0)
                return cs_error_setx(err, EIO, "sha256 of %s failed", local_path);
        snprintf(name, sizeof(name), "%s.json", key);
        dest = path_join(dir, name);
        if (!dest)
                return cs_error_set(err, ENOMEM, "stage %s", local_path);
        r = open_subdir(p->state_fd, "local-settings", dir, 0700, &lfd, err);
        if (r < 0)
                return r;
        r = cs_write_file_atomic(lfd, name, raw, len, 0600, err);
        if (r < 0)
                return cs_error_wrap(err, "copy %s", local_path);
        *ret_copy = cs_take_ptr(&dest);
        return 0;
}

/* shutil.which: the first executable regular file named `name` on PATH. */
static char *find_on_path(const char *name)
{
        const char *path = getenv("PATH");
        _cleanup_free_ char *copy = NULL;
        char *save = NULL, *dir;

        if (strchr(name, '/'))
                return access(name, X_OK) == 0 ? strdup(name) : NULL;
        copy = strdup(path && *path ? path : "/bin:/usr/bin");
        if (!copy)
                return NULL;
        for (dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
                char *cand = path_join(dir, name);
                struct stat st;

                if (cand && stat(cand, &st) == 0 && S_ISREG(st.st_mode) && access(cand, X_OK) == 0)
                        return cand;
                free(cand);
        }
        return NULL;
}

static bool key_is_safe(const char *k)
{
        size_t n = strlen(k);

        if (n == 0 || n > 100 || k[0] == '.')
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((k[i] >= 'a' && k[i] <= 'z') || (k[i] >= 'A' && k[i] <= 'Z') ||
                      (k[i] >= '0' && k[i] <= '9') || k[i] == '.' || k[i] == '-' || k[i] == '_' ||
                      k[i] == '+'))
                        return false;
        return true;
}

static const char *last_component(const char *path, size_t len, size_t *ret_len)
{
        size_t i = len;

        while (i > 0 && path[i - 1] != '/')
                i--;
        *ret_len = len - i;
        return path + i;
}

static bool component_is(const char *path, size_t len, const char *want)
{
        size_t n;
        const char *c = last_component(path, len, &n);

        return n == strlen(want) && memcmp(c, want, n) == 0;
}

/* The version the install layout tells: …/claude/versions/<v> (native installer), or the
 * "version" of the package.json of a node_modules/@anthropic-ai/claude-code* dir above. */
static char *claude_version_key(const char *resolved)
{
        size_t len = strlen(resolved), dir_len, n;
        const char *name = last_component(resolved, len, &n);

        dir_len = len - n - (n < len ? 1 : 0);
        if (component_is(resolved, dir_len, "versions")) {
                size_t gp_len, pn;

                last_component(resolved, dir_len, &pn);
                gp_len = dir_len - pn - (pn < dir_len ? 1 : 0);
                if (component_is(resolved, gp_len, "claude") && key_is_safe(name))
                        return strdup(name);
        }
        for (size_t a = dir_len; a > 0;) {
                size_t an, p_len, pn, gp_len;
                const char *ac = last_component(resolved, a, &an);

                p_len = a - an - (an < a ? 1 : 0);
                last_component(resolved, p_len, &pn);
                gp_len = p_len - pn - (pn < p_len ? 1 : 0);
                if (an >= 11 && memcmp(ac, "claude-code", 11) == 0 &&
                    component_is(resolved, p_len, "@anthropic-ai") &&
                    component_is(resolved, gp_len, "node_modules")) {
                        _cleanup_free_ char *pkg_dir = strndup(resolved, a);
                        _cleanup_free_ char *pkg =
                            pkg_dir ? path_join(pkg_dir, "package.json") : NULL;
                        _cleanup_free_ char *buf = NULL;
                        struct cs_error ignored;
                        cJSON *json, *v;
                        char *key = NULL;
                        size_t blen;

                        if (!pkg || cs_read_file_at(AT_FDCWD, pkg, (size_t)1 << 20, false, &buf,
                                                    &blen, &ignored) < 0)
                                return NULL;
                        json = cJSON_ParseWithLength(buf, blen);
                        v = cJSON_GetObjectItemCaseSensitive(json, "version");
                        if (cJSON_IsString(v) && key_is_safe(v->valuestring))
                                key = strdup(v->valuestring);
                        cJSON_Delete(json);
                        return key;
                }
                a = p_len;
        }
        return NULL;
}

/* A .<key>.<pid>.partial is kept while its pid is alive (a parallel launch copying). */
static bool claude_entry_stale(const char *name)
{
        size_t n = strlen(name), i, j;
        char pid[24];
        long v;

        if (n < 8 || strcmp(name + n - 8, ".partial") != 0)
                return true;
        j = n - 8;
        i = j;
        while (i > 0 && name[i - 1] != '.')
                i--;
        if (i == j || j - i >= sizeof(pid))
                return true;
        for (size_t k = i; k < j; k++)
                if (name[k] < '0' || name[k] > '9')
                        return true;
        memcpy(pid, name + i, j - i);
        pid[j - i] = '\0';
        v = strtol(pid, NULL, 10);
        if (v <= 0 || v > INT_MAX)
                return true;
        return kill((pid_t)v, 0) < 0 && errno == ESRCH;
}

static int prune_claude_cache(int cfd, const char *keep)
{
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        int fd2 = dup(cfd);

        if (fd2 < 0)
                return -errno;
        d = fdopendir(fd2);
        if (!d) {
                close(fd2);
                return -errno;
        }
        while ((errno = 0, de = readdir(d))) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
                    strcmp(de->d_name, keep) == 0 || !claude_entry_stale(de->d_name))
                        continue;
                /* A parallel launch may be pruning the same entry. */
                if (unlinkat(cfd, de->d_name, 0) < 0 && errno != ENOENT)
                        return -errno;
        }
        return errno ? -errno : 0;
}

/* Where the staged copies of claude live: csandbox's data dir, unless its filesystem is
 * mounted noexec (the copy runs from where it lies, through a bind), then
 * $XDG_RUNTIME_DIR's; when neither can execute, an error that says how to fix it. */
static int claude_cache_open(const struct profile_config *c, char **ret_cache, int *ret_fd,
                             struct cs_error *err)
{
        const char *runtime = getenv("XDG_RUNTIME_DIR");
        const char *bases[] = {c->data_home, runtime && runtime[0] == '/' ? runtime : NULL};

        for (size_t i = 0; i < sizeof(bases) / sizeof(bases[0]); i++) {
                _cleanup_free_ char *cache = NULL;
                _cleanup_close_ int fd = -1;
                struct statvfs sv;
                int r;

                if (!bases[i])
                        continue;
                if (asprintf(&cache, "%s/csandbox/claude", bases[i]) < 0)
                        return cs_error_set(err, ENOMEM, "stage claude");
                r = open_dir_parents(cache, &fd, err);
                if (r < 0)
                        return r;
                if (fstatvfs(fd, &sv) < 0)
                        return cs_error_set(err, errno, "statvfs %s", cache);
                if (!(sv.f_flag & ST_NOEXEC)) {
                        *ret_cache = cs_take_ptr(&cache);
                        *ret_fd = cs_take_fd(&fd);
                        return 0;
                }
        }
        return cs_error_setx(err, EACCES,
                             "the staged copy of claude could not execute: %s is on a filesystem "
                             "mounted noexec%s; set XDG_DATA_HOME (or XDG_RUNTIME_DIR) to a "
                             "directory on a filesystem that allows execution, or remount it "
                             "without noexec",
                             c->data_home,
                             bases[1] ? ", and so is $XDG_RUNTIME_DIR"
                                      : " and XDG_RUNTIME_DIR is not set");
}

int stage_claude(const struct profile_config *c, char **ret_path, bool *ret_missing,
                 struct stage_warnings *warn, struct cs_error *err)
{
        _cleanup_free_ char *found = NULL;
        _cleanup_free_ char *resolved = NULL;
        _cleanup_free_ char *key = NULL;
        _cleanup_free_ char *cache = NULL;
        _cleanup_free_ char *dest = NULL;
        _cleanup_close_ int in = -1, cfd = -1;
        char partial[160];
        struct stat st, dst_st;
        int r;

        (void)warn;
        found = find_on_path(c->claude_bin ? c->claude_bin : "claude");
        if (found)
                resolved = realpath(found, NULL);
        if (!found || !resolved) {
                *ret_path = NULL;
                *ret_missing = true;
                return 0;
        }
        in = open(resolved, O_RDONLY | O_NOCTTY | O_CLOEXEC);
        if (in < 0)
                return cs_error_set(err, errno, "open %s", resolved);
        if (fstat(in, &st) < 0)
                return cs_error_set(err, errno, "stat %s", resolved);
        if (!S_ISREG(st.st_mode))
                return cs_error_setx(err, EINVAL, "%s (claude) is not a regular file", resolved);
        key = claude_version_key(resolved);
        if (!key && asprintf(&key, "%llu-%llu-%lld-%lld.%09ld", (unsigned long long)st.st_dev,
                             (unsigned long long)st.st_ino, (long long)st.st_size,
                             (long long)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec) < 0)
                return cs_error_set(err, ENOMEM, "stage claude");
        r = claude_cache_open(c, &cache, &cfd, err);
        if (r < 0)
                return r;
        dest = path_join(cache, key);
        if (!dest)
                return cs_error_set(err, ENOMEM, "stage claude");

        if (fstatat(cfd, key, &dst_st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(dst_st.st_mode)) {
                _cleanup_close_ int out = -1;

                snprintf(partial, sizeof(partial), ".%s.%d.partial", key, (int)getpid());
                (void)unlinkat(cfd, partial, 0);
                out = openat(cfd, partial, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                             0600);
                if (out < 0)
                        return cs_error_set(err, errno, "create %s/%s", cache, partial);
                /* A reflink where the filesystem shares blocks (btrfs, XFS), else a copy. */
                r = ioctl(out, FICLONE, in) == 0 ? 0 : copy_fd_bytes(in, out);
                if (r == 0 && fchmod(out, st.st_mode & 0777) < 0)
                        r = -errno;
                if (r == 0 && fsync(out) < 0)
                        r = -errno;
                /* Never over an existing copy: a concurrent launch may be mounting it. The
                 * first copy to land wins; a link fails with EEXIST instead of replacing. */
                if (r == 0 && linkat(cfd, partial, cfd, key, 0) < 0 && errno != EEXIST)
                        r = -errno;
                (void)unlinkat(cfd, partial, 0);
                if (r < 0)
                        return cs_error_set(err, -r, "could not cache %s as %s", resolved, dest);
        }
        r = prune_claude_cache(cfd, key);
        if (r < 0)
                return cs_error_set(err, -r, "prune %s", cache);
        *ret_path = cs_take_ptr(&dest);
        *ret_missing = false;
        return 0;
}

/* user.name and user.email for cwd as `git config --get` gives them (the last value of
 * each), from one `git config -z --get-regexp`: records "key\nvalue\0". */
static int git_identity_get(const char *cwd, char **ret_name, char **ret_email,
                            struct cs_error *err)
{
        char *args[] = {"config", "-z", "--get-regexp", "^user\\.(name|email)$", NULL};
        _cleanup_free_ char *out = NULL;
        size_t len = 0;
        int r;

        *ret_name = *ret_email = NULL;
        r = worktree_git(cwd, args, true, &out, &len, err);
        if (r < 0 || !out)
                return r;
        for (char *rec = out; rec < out + len;) {
                char *end = memchr(rec, '\0', (size_t)(out + len - rec));
                char *nl = memchr(rec, '\n', end ? (size_t)(end - rec) : 0);
                char **slot = NULL;

                if (!end || !nl)
                        break;
                *nl = '\0';
                if (strcmp(rec, "user.name") == 0)
                        slot = ret_name;
                else if (strcmp(rec, "user.email") == 0)
                        slot = ret_email;
                if (slot) {
                        free(*slot);
                        *slot = strdup(nl + 1);
                        if (!*slot)
                                return cs_error_set(err, ENOMEM, "git identity");
                }
                rec = end + 1;
        }
        return 0;
}

static int append_identity(char **content, const char *section, const char *name, const char *value)
{
        size_t n = strlen(value), o = 0;
        _cleanup_free_ char *quoted = malloc(2 * n + 1);
        char *next = NULL;

        if (!quoted)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                /* A value from a config the work tree could have written: a newline in it
                 * must not start a line of its own in the file we write. */
                if (value[i] == '\n') {
                        quoted[o++] = '\\';
                        quoted[o++] = 'n';
                        continue;
                }
                if (value[i] == '\\' || value[i] == '"')
                        quoted[o++] = '\\';
                quoted[o++] = value[i];
        }
        quoted[o] = '\0';
        if (asprintf(&next, "%s[%s]\n\t%s = \"%s\"\n", *content, section, name, quoted) < 0)
                return -ENOMEM;
        free(*content);
        *content = next;
        return 0;
}

int stage_git_identity(const struct profile_config *c, const char *cwd, char **ret_path,
                       struct cs_error *err)
{
        static const char *const keys[][2] = {{"user", "name"}, {"user", "email"}};
        _cleanup_free_ char *content = strdup("[include]\n\tpath = " SANDBOX_GITCONFIG "\n");
        _cleanup_free_ char *dir = NULL;
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int dfd = -1;
        char hex[17], name[32];
        _cleanup_free_ char *name_value = NULL, *email_value = NULL;
        bool any = false;
        struct stat st;
        int r;

        if (!content)
                return cs_error_set(err, ENOMEM, "git identity");
        r = git_identity_get(cwd, &name_value, &email_value, err);
        if (r < 0)
                return r;
        for (size_t i = 0; i < 2; i++) {
                const char *values[2] = {name_value, email_value};

                if (!values[i])
                        continue;
                if (append_identity(&content, keys[i][0], keys[i][1], values[i]) < 0)
                        return cs_error_set(err, ENOMEM, "git identity");
                any = true;
        }
        if (!any) {
                *ret_path = NULL;
                return 0;
        }
        if (sha256_hex16(content, strlen(content), hex) < 0)
                return cs_error_setx(err, EIO, "sha256 of the git identity failed");
        snprintf(name, sizeof(name), "identity-%s", hex);
        if (asprintf(&dir, "%s/claude-profile/git", c->data_home) < 0)
                return cs_error_set(err, ENOMEM, "git identity");
        path = path_join(dir, name);
        if (!path)
                return cs_error_set(err, ENOMEM, "git identity");
        r = open_dir_parents(dir, &dfd, err);
        if (r < 0)
                return r;
        /* Content-addressed: an existing file already holds exactly this. */
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                r = cs_write_file_once(dfd, name, content, strlen(content), 0644, err);
                if (r < 0)
                        return r;
        }
        *ret_path = cs_take_ptr(&path);
        return 0;
}
