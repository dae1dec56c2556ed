/* srt settings files as egress entries (egress_file.h). */
#include "egress_file.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"
#include "../common/resolve.h"
#include "../spec/spec.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define EGRESS_FILE_MAX ((size_t)1 << 20)
/* Directories walked up from the file at most: a path is shorter than PATH_MAX / 2 steps. */
#define EGRESS_FILE_DEPTH 2048

#define MOVE_IT "move it where no session can write (e.g. ~/.config) and name it there"

static int srt_list(struct sandbox_spec *s, cJSON *net, const char *key, bool deny,
                    const char *what, struct cs_error *err)
{
        cJSON *list = cJSON_GetObjectItemCaseSensitive(net, key), *e;

        if (!list)
                return 0;
        if (!cJSON_IsArray(list))
                return cs_error_setx(err, EINVAL, "%s: network.%s is not a list of strings", what,
                                     key);
        cJSON_ArrayForEach(e, list)
        {
                if (!cJSON_IsString(e))
                        return cs_error_setx(err, EINVAL,
                                             "%s: network.%s holds something other than a "
                                             "string",
                                             what, key);
                if ((deny ? spec_egress_deny(s, e->valuestring, what, err)
                          : spec_egress_add(s, e->valuestring, false, what, err)) < 0)
                        return -err->err;
        }
        return 0;
}

/* Open path once. Links on the path are followed once, by realpath (a dotfile manager's
 * ~/.config/x.json -> ~/dotfiles/x.json): what is judged is the file opened, by identity
 * (egress_file_check), whatever name led to it. The resolved path is then opened with no
 * link on the way, so the object judged is the one read, even if a link changes meanwhile. */
static int open_file(const char *path, const char *what, int *ret_dir, int *ret_fd,
                     struct cs_error *err)
{
        _cleanup_close_ int dir = -1, fd = -1;
        _cleanup_free_ char *dirname = NULL, *real = realpath(path, NULL);
        const char *base;
        struct stat sb;

        if (!real)
                return cs_error_set(err, errno, "%s %s", what, path);
        base = strrchr(real, '/') + 1;
        if (!*base)
                return cs_error_setx(err, EINVAL, "%s %s: not a regular file", what, path);
        dirname = base - 1 == real ? strdup("/") : strndup(real, (size_t)(base - 1 - real));
        if (!dirname)
                return cs_error_set(err, ENOMEM, "%s %s", what, path);
        dir = cs_open_no_links(AT_FDCWD, dirname, O_PATH | O_DIRECTORY);
        if (dir >= 0)
                fd = openat(dir, base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (dir < 0 || fd < 0) {
                if (errno == ELOOP)
                        return cs_error_setx(err, ELOOP,
                                             "%s %s: a link on its path changed while it was "
                                             "opened (%s); try again",
                                             what, path, real);
                return cs_error_set(err, errno, "%s %s", what, path);
        }
        if (fstat(fd, &sb) < 0)
                return cs_error_set(err, errno, "%s %s", what, path);
        if (!S_ISREG(sb.st_mode))
                return cs_error_setx(err, EINVAL, "%s %s: not a regular file", what, path);
        /* Another link may lie anywhere, in a directory the session writes too, and no
         * search finds it: the session would rewrite the next launch's list through it. */
        if (sb.st_nlink > 1)
                return cs_error_setx(err, EPERM,
                                     "%s %s: the file has %ju links, and another may lie "
                                     "where the session can write, through which it could "
                                     "widen its own allowlist: give it a single link (cp it "
                                     "to a new file, remove the old one) where no session "
                                     "can write (e.g. ~/.config)",
                                     what, path, (uintmax_t)sb.st_nlink);
        if ((uintmax_t)sb.st_size > EGRESS_FILE_MAX)
                return cs_error_setx(err, EFBIG, "%s %s is larger than the limit of %zu bytes",
                                     what, path, EGRESS_FILE_MAX);
        *ret_dir = cs_take_fd(&dir);
        *ret_fd = cs_take_fd(&fd);
        return 0;
}

static int keep_file(struct sandbox_spec *s, const char *path, const char *what, int *dir, int *fd,
                     struct cs_error *err)
{
        struct spec_egress_file *grown =
            realloc(s->egress_files, (s->n_egress_files + 1) * sizeof(*grown));
        struct spec_egress_file *f;

        if (!grown)
                return cs_error_set(err, ENOMEM, "%s %s", what, path);
        s->egress_files = grown;
        f = &grown[s->n_egress_files];
        f->path = strdup(path);
        f->what = strdup(what);
        if (!f->path || !f->what) {
                free(f->path);
                free(f->what);
                return cs_error_set(err, ENOMEM, "%s %s", what, path);
        }
        f->dir_fd = cs_take_fd(dir);
        f->fd = cs_take_fd(fd);
        s->n_egress_files++;
        return 0;
}

int egress_file_load(struct sandbox_spec *s, const char *path, const char *what,
                     struct cs_error *err)
{
        _cleanup_close_ int dir = -1, fd = -1;
        char *buf = NULL;
        size_t len = 0;
        cJSON *root, *net;
        int r = open_file(path, what, &dir, &fd, err);

        if (r < 0)
                return r;
        /* From the fd judged above and later: a file swapped on the path after the open
         * is not what is read. */
        r = cs_read_fd(fd, path, EGRESS_FILE_MAX, &buf, &len, err);
        if (r < 0)
                return cs_error_wrap(err, "%s", what);
        root = cJSON_ParseWithLength(buf, len);
        free(buf);
        net = root ? cJSON_GetObjectItemCaseSensitive(root, "network") : NULL;
        if (!cJSON_IsObject(net)) {
                cJSON_Delete(root);
                return cs_error_setx(err, EINVAL,
                                     "%s %s: not a settings file with a \"network\" object "
                                     "(network.allowedDomains, network.deniedDomains)",
                                     what, path);
        }
        r = srt_list(s, net, "allowedDomains", false, what, err);
        if (r >= 0)
                r = srt_list(s, net, "deniedDomains", true, what, err);
        cJSON_Delete(root);
        if (r < 0)
                return r;
        return keep_file(s, path, what, &dir, &fd, err);
}

/* Something the session can write: a read-write bind's source, or a root's upper dir. */
struct writable {
        int fd;
        const char *name;
        dev_t dev;
        ino_t ino;
        /* Its filesystem (mountinfo's major:minor, the same for every btrfs subvolume) and
         * its path within it, found when first asked; err: not found. */
        bool placed;
        int place_err;
        char *fs_dev, *fs_path;
};

static int mount_id(int fd, uint64_t *ret)
{
        struct statx sx;

        if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_MNT_ID, &sx) < 0)
                return -errno;
        if (!(sx.stx_mask & STATX_MNT_ID))
                return -ENOSYS;
        *ret = sx.stx_mnt_id;
        return 0;
}

/* mountinfo writes space, tab, newline and backslash as \ooo. */
static void unescape(char *s)
{
        char *o = s;

        for (const char *p = s; *p;) {
                if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' &&
                    p[3] >= '0' && p[3] <= '7') {
                        *o++ = (char)(((p[1] - '0') << 6) | ((p[2] - '0') << 3) | (p[3] - '0'));
                        p += 4;
                } else {
                        *o++ = *p++;
                }
        }
        *o = '\0';
}

struct mount_place {
        char *dev;   /* major:minor */
        char *root;  /* the directory of its filesystem it shows: "/" but for a subtree bind */
        char *point; /* where it is mounted */
};

static void mount_place_free(struct mount_place *m)
{
        free(m->dev);
        free(m->root);
        free(m->point);
        *m = (struct mount_place){0};
}

/* The mount id's line of /proc/self/mountinfo. */
static int mount_place(uint64_t id, struct mount_place *ret)
{
        _cleanup_fclose_ FILE *f = fopen("/proc/self/mountinfo", "re");
        _cleanup_free_ char *line = NULL;
        size_t cap = 0;

        if (!f)
                return -errno;
        while (getline(&line, &cap, f) > 0) {
                char *save = NULL, *field = strtok_r(line, " ", &save), *dev, *root, *point;

                if (!field || strtoull(field, NULL, 10) != id)
                        continue;
                strtok_r(NULL, " ", &save); /* parent */
                dev = strtok_r(NULL, " ", &save);
                root = strtok_r(NULL, " ", &save);
                point = strtok_r(NULL, " ", &save);
                if (!dev || !root || !point)
                        return -EINVAL;
                unescape(root);
                unescape(point);
                ret->dev = strdup(dev);
                ret->root = strdup(root);
                ret->point = strdup(point);
                if (!ret->dev || !ret->root || !ret->point) {
                        mount_place_free(ret);
                        return -ENOMEM;
                }
                return 0;
        }
        return -ENOENT;
}

/* Whether a is b or a directory above it (both absolute, normalised). */
static bool path_within(const char *a, const char *b)
{
        size_t l = strlen(a);

        if (strcmp(a, "/") == 0)
                return true;
        return strncmp(a, b, l) == 0 && (b[l] == '\0' || b[l] == '/');
}

/* w's filesystem and path within it: its mount's root joined with where w lies beneath
 * that mount's point (the kernel's name of the fd, so no link or rename bends it). */
static int place(struct writable *w)
{
        struct mount_place m = {0};
        char link[64], name[PATH_MAX];
        const char *rel;
        uint64_t id = 0;
        ssize_t n;
        int r;

        if (w->placed)
                return w->place_err;
        w->placed = true;
        r = mount_id(w->fd, &id);
        if (r >= 0)
                r = mount_place(id, &m);
        if (r < 0)
                return w->place_err = r;
        snprintf(link, sizeof(link), "/proc/self/fd/%d", w->fd);
        n = readlink(link, name, sizeof(name) - 1);
        if (n > 0 && n < (ssize_t)sizeof(name) - 1) {
                name[n] = '\0';
                r = name[0] == '/' && path_within(m.point, name) ? 0 : -ENOENT;
        } else {
                r = n < 0 ? -errno : -ENAMETOOLONG;
        }
        if (r >= 0) {
                rel = strcmp(m.point, "/") == 0 ? name : name + strlen(m.point);
                if (strcmp(m.root, "/") == 0)
                        r = asprintf(&w->fs_path, "%s", *rel ? rel : "/");
                else
                        r = asprintf(&w->fs_path, "%s%s", m.root, rel);
                if (r < 0) {
                        w->fs_path = NULL;
                        r = -ENOMEM;
                } else {
                        w->fs_dev = m.dev;
                        m.dev = NULL;
                        r = 0;
                }
        }
        mount_place_free(&m);
        return w->place_err = r;
}

static int refuse(const struct spec_egress_file *f, const struct writable *w, const char *how,
                  struct cs_error *err)
{
        return cs_error_setx(
            err, EPERM,
            "%s %s: the session can write it (it lies in %s, which the "
            "session has read-write%s), so it could widen its own allowlist: " MOVE_IT,
            f->what, f->path, w->name, how);
}

/* Whether the object sb (the file, or a directory above it, on mount id) is something the
 * session can write. Two ways to be: the object is a writable root itself (by dev and
 * inode, whatever name or bind shows it; walking up meets every directory beneath a root on
 * the same mount), or the object's mount shows a directory inside a writable root (a bind
 * of a subtree, whose ".." leaves the part of the tree below the root unwalked). For the
 * second, the mount's root field in /proc/self/mountinfo, found by the statx mount id, is
 * compared with the writable root's own place in the same filesystem: a file handle
 * (name_to_handle_at) says which object one is but not what lies above it. */
static int judge_one(const struct spec_egress_file *f, struct writable *ws, size_t n,
                     const struct stat *sb, uint64_t id, bool new_mount, struct cs_error *err)
{
        struct mount_place m = {0};
        int r = 0;

        for (size_t i = 0; i < n; i++)
                if (ws[i].dev == sb->st_dev && ws[i].ino == sb->st_ino)
                        return refuse(f, &ws[i], "", err);
        if (!new_mount || !n)
                return 0;
        r = mount_place(id, &m);
        if (r < 0)
                return cs_error_set(err, -r,
                                    "%s %s: cannot tell whether the session can write it: its "
                                    "mount is not in /proc/self/mountinfo",
                                    f->what, f->path);
        for (size_t i = 0; r >= 0 && i < n; i++) {
                char how[PATH_MAX + 64];
                int p = place(&ws[i]);

                /* unplaced: refused only where it may be the same filesystem */
                if (p < 0 && ws[i].dev == sb->st_dev)
                        r = cs_error_set(err, -p,
                                         "%s %s: cannot tell whether the session can write "
                                         "it: where %s lies within its filesystem is unknown",
                                         f->what, f->path, ws[i].name);
                else if (p >= 0 && strcmp(ws[i].fs_dev, m.dev) == 0 &&
                         path_within(ws[i].fs_path, m.root)) {
                        snprintf(how, sizeof(how), "; %s shows a directory inside it", m.point);
                        r = refuse(f, &ws[i], how, err);
                }
        }
        mount_place_free(&m);
        return r;
}

/* Every object from the file up to "/": the file, the directory it was opened in, then
 * ".." by fd, which crosses a mount's root to the directory above its mount point. */
static int judge(const struct spec_egress_file *f, struct writable *ws, size_t n,
                 struct cs_error *err)
{
        _cleanup_close_ int cur = fcntl(f->fd, F_DUPFD_CLOEXEC, 3);
        struct stat prev = {0};
        uint64_t prev_id = 0;

        if (cur < 0)
                return cs_error_set(err, errno, "%s %s", f->what, f->path);
        for (int depth = 0; depth < EGRESS_FILE_DEPTH; depth++) {
                struct stat sb;
                uint64_t id = 0;
                int r = fstat(cur, &sb) < 0 ? -errno : mount_id(cur, &id), next;

                if (r < 0)
                        return cs_error_set(err, -r, "%s %s: find its mount", f->what, f->path);
                /* "/" is its own ".." */
                if (depth > 1 && sb.st_dev == prev.st_dev && sb.st_ino == prev.st_ino &&
                    id == prev_id)
                        return 0;
                r = judge_one(f, ws, n, &sb, id, depth == 0 || id != prev_id, err);
                if (r < 0)
                        return r;
                next = openat(depth == 0 ? f->dir_fd : cur, depth == 0 ? "." : "..",
                              O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (next < 0)
                        return cs_error_set(err, errno, "%s %s: open a directory above it", f->what,
                                            f->path);
                close(cur);
                cur = next;
                prev = sb;
                prev_id = id;
        }
        return cs_error_setx(err, ELOOP, "%s %s: more than %d directories deep", f->what, f->path,
                             EGRESS_FILE_DEPTH);
}

static int add_writable(struct writable *ws, size_t *n, int fd, const char *name)
{
        struct stat sb;

        if (fd < 0)
                return 0;
        if (fstat(fd, &sb) < 0)
                return -errno;
        ws[*n] = (struct writable){.fd = fd, .name = name, .dev = sb.st_dev, .ino = sb.st_ino};
        (*n)++;
        return 0;
}

int egress_file_check(const struct sandbox_spec *s, struct cs_error *err)
{
        struct writable *ws;
        size_t n = 0;
        int r = 0;

        if (!s->n_egress_files)
                return 0;
        ws = calloc(s->n_mounts + 2, sizeof(*ws));
        if (!ws)
                return cs_error_set(err, ENOMEM, "judge the egress file");
        for (size_t i = 0; r >= 0 && i < s->n_mounts; i++) {
                const struct spec_mount *m = &s->mounts[i];

                if (m->kind == SPEC_MOUNT_BIND && !(m->flags & SPEC_MOUNT_RO))
                        r = add_writable(ws, &n, m->source_fd,
                                         m->source_real ? m->source_real : m->source);
        }
        /* a root's upper dir on disk takes the session's writes */
        if (r >= 0)
                r = add_writable(ws, &n, s->upper_fd, "the root's upper directory");
        if (r >= 0)
                r = add_writable(ws, &n, s->work_fd, "the root's work directory");
        if (r < 0)
                r = cs_error_set(err, -r, "judge the egress file: a read-write bind's source");
        for (size_t i = 0; r >= 0 && i < s->n_egress_files; i++)
                r = judge(&s->egress_files[i], ws, n, err);
        for (size_t i = 0; i < n; i++) {
                free(ws[i].fs_dev);
                free(ws[i].fs_path);
        }
        free(ws);
        return r;
}
