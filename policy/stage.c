/* Staged copies for a sandboxed launch (reference §1.4, §2.4–§2.10): the helpers every
 * stage file shares, and the state dir's copies of settings, chrome and the host's git and
 * ssh files. The profile dir and the work tree are writable by the previous sandbox session,
 * so everything read from them is opened relative to a dir fd with O_NOFOLLOW and typed with
 * fstat on the opened fd; every file written goes into the state dir through
 * cs_write_file_atomic. */
#include "stage.h"
#include "stage_util.h"

#include "common/cleanup.h"
#include "common/strv.h"
#include "common/error.h"
#include "common/fileio.h"
#include "common/path.h"
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

#define SETTINGS_MAX  ((size_t)4 << 20)
#define HOST_FILE_MAX ((size_t)16 << 20) /* ~/.gitconfig, ~/.ssh/known_hosts */

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

int stage_warn(struct stage_warnings *w, struct cs_error *err, const char *fmt, ...)
{
        char *msg = NULL;
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&msg, fmt, ap);
        va_end(ap);
        if (r < 0 || strv_push(&w->msgs, &w->n, msg) < 0)
                return cs_error_set(err, ENOMEM, "record a warning");
        return 0;
}

/* The first 16 hex digits of sha256(s): the reference's key for per-path copies. */
int stage_sha256_hex16(const void *data, size_t len, char out[17])
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
int stage_open_subdir(int dirfd, const char *name, const char *shown, mode_t mode, int *ret_fd,
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

int stage_open_dir_parents(const char *path, int *ret_fd, struct cs_error *err)
{
        int r = cs_mkdir_parents(path, 0700, err), fd;

        if (r < 0)
                return r;
        fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return cs_error_set(err, errno, "open %s", path);
        *ret_fd = fd;
        return 0;
}

int stage_settings(const struct profile *p, bool accept_bypass, char **ret_path,
                   struct stage_warnings *warn, struct cs_error *err)
{
        _cleanup_free_ char *src = cs_path_join(p->dir, "settings.json");
        _cleanup_free_ char *dest = cs_path_join(p->state_dir, "settings.json");
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
                r = stage_warn(warn, err,
                               "Warning: %s is a symlink, so the sandbox gets empty settings "
                               "instead of reading through it. Replace it with a regular file to "
                               "use these settings in the sandbox.",
                               src);
                if (r < 0)
                        return r;
                r = settings_profile_copy("{}\n", 3, accept_bypass, &content, &len, &stripped, err);
                if (r < 0)
                        return r;
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
                r = settings_profile_copy(raw, raw_len, accept_bypass, &content, &len, &stripped,
                                          err);
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
        _cleanup_free_ char *path = cs_path_join(p->state_dir, "chrome");
        _cleanup_close_ int fd = -1;
        int r;

        if (!path)
                return cs_error_set(err, ENOMEM, "stage chrome");
        r = stage_open_subdir(p->state_fd, "chrome", path, 0700, &fd, err);
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
        _cleanup_free_ char *dest = cs_path_join(p->state_dir, name);
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
        _cleanup_free_ char *src = cs_path_join(home, ".gitconfig");

        if (!src)
                return cs_error_set(err, ENOMEM, "stage .gitconfig");
        return stage_host_file(p, src, "gitconfig", ret_path, err);
}

int stage_host_known_hosts(const struct profile *p, const char *home, char **ret_path,
                           struct cs_error *err)
{
        _cleanup_free_ char *src = cs_path_join(home, ".ssh/known_hosts");

        if (!src)
                return cs_error_set(err, ENOMEM, "stage known_hosts");
        return stage_host_file(p, src, "host_known_hosts", ret_path, err);
}

int stage_user_known_hosts(const struct profile *p, char **ret_path, struct cs_error *err)
{
        _cleanup_free_ char *path = cs_path_join(p->state_dir, "known_hosts");
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

int stage_local_settings(const struct profile *p, int dir_fd, const char *local_path,
                         char **ret_copy, struct stage_warnings *warn, struct cs_error *err)
{
        _cleanup_free_ char *raw = NULL;
        _cleanup_free_ char *dest = NULL;
        _cleanup_free_ char *dir = cs_path_join(p->state_dir, "local-settings");
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
                r = stage_warn(warn, err,
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
        if (stage_sha256_hex16(local_path, strlen(local_path), key) < 0)
                return cs_error_setx(err, EIO, "sha256 of %s failed", local_path);
        snprintf(name, sizeof(name), "%s.json", key);
        dest = cs_path_join(dir, name);
        if (!dest)
                return cs_error_set(err, ENOMEM, "stage %s", local_path);
        r = stage_open_subdir(p->state_fd, "local-settings", dir, 0700, &lfd, err);
        if (r < 0)
                return r;
        r = cs_write_file_atomic(lfd, name, raw, len, 0600, err);
        if (r < 0)
                return cs_error_wrap(err, "copy %s", local_path);
        *ret_copy = cs_take_ptr(&dest);
        return 0;
}
