/* COPY and ADD of `csandbox image build`, as docker and podman build do them: sources are
 * globs in the context (or another stage's root), a directory's contents are copied, a
 * local tar is unpacked by ADD. The context and the step's root are hostile trees: the
 * context is read with openat2(RESOLVE_BENEATH) and then by fd, entry by entry, never
 * following a link; the destination is resolved inside the root (RESOLVE_IN_ROOT, so
 * Debian's /lib -> usr/lib is taken) and every file is created by fd with O_EXCL|O_NOFOLLOW.
 * Hard links within a copied directory become separate files (as COPY without --link). */
#include "build-private.h"
#include "../oci/digest.h"
#include "../layer/layer.h"
#include "../store/store.h"

#include "../../common/cleanup.h"
#include "../../common/error.h"
#include "../../common/fileio.h"
#include "../../common/path.h"
#include "../../common/resolve.h"
#include "../../common/strv.h"

#include <archive.h>
#include <archive_entry.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PASSWD_MAX (4u << 20)

struct copy_ctx {
        const struct build_copy *c;
        int root_fd;    /* the step's root; -1 for a digest only */
        EVP_MD_CTX *md; /* what is copied (or, with no root, would be) is hashed */
        struct build_ignore *ign;
        bool chown_set, chmod_set;
        uid_t uid;
        gid_t gid;
        mode_t chmod;
        uint64_t bytes, entries;
        struct cs_error *err;
};

static void md_add(struct copy_ctx *x, const void *p, size_t len)
{
        EVP_DigestUpdate(x->md, p, len);
}

static void md_str(struct copy_ctx *x, const char *s)
{
        md_add(x, s, strlen(s) + 1);
}

static void md_num(struct copy_ctx *x, unsigned long long v)
{
        char b[32];

        snprintf(b, sizeof(b), "%llo", v);
        md_str(x, b);
}

/* len bytes of fd from its start into the digest: fewer means it changed meanwhile. */
static int md_fd(struct copy_ctx *x, int fd, uint64_t len, const char *shown)
{
        char buf[65536];
        uint64_t off = 0;

        while (off < len) {
                ssize_t n =
                    pread(fd, buf, len - off < sizeof(buf) ? len - off : sizeof(buf), (off_t)off);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return cs_error_set(x->err, n < 0 ? errno : EAGAIN, "%s: read `%s`%s",
                                            x->c->what, shown,
                                            n < 0 ? "" : " (it changed while it was copied)");
                md_add(x, buf, (size_t)n);
                off += (uint64_t)n;
        }
        return 0;
}

static int budget(struct copy_ctx *x, uint64_t bytes, const char *shown)
{
        if (++x->entries > LAYER_DEFAULT_MAX_ENTRIES)
                return cs_error_setx(x->err, E2BIG, "%s: more than %llu files to copy", x->c->what,
                                     (unsigned long long)LAYER_DEFAULT_MAX_ENTRIES);
        if (bytes > LAYER_DEFAULT_MAX_SIZE - x->bytes)
                return cs_error_setx(x->err, EFBIG,
                                     "%s: `%s` takes the copy beyond the limit of %llu bytes",
                                     x->c->what, shown, (unsigned long long)LAYER_DEFAULT_MAX_SIZE);
        x->bytes += bytes;
        return 0;
}

/* "a/b" + "/" + "c", or "c" when a is empty; NULL past the path limit or on ENOMEM. */
static char *path_join(const char *a, const char *b)
{
        char *s = NULL;

        if (strlen(a) + strlen(b) + 2 > LAYER_DEFAULT_MAX_PATH)
                return NULL;
        if (asprintf(&s, "%s%s%s", a, *a && *b ? "/" : "", b) < 0)
                return NULL;
        return s;
}

static int src_open(struct copy_ctx *x, const char *rel, int flags)
{
        if (x->c->from_context)
                return cs_open_beneath_links(x->c->src_root_fd, rel, flags);
        return cs_open_in_root(x->c->src_root_fd, *rel ? rel : ".", flags);
}

/* ---- shared with build-commit.c ---- */

static int name_cmp(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

void build_names_free(char **v, size_t n)
{
        strv_free(&v, &n);
}

int build_list_dir(int dfd, size_t max, char ***ret, size_t *ret_n, const char *shown,
                   struct cs_error *err)
{
        int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_closedir_ DIR *d = fd < 0 ? NULL : fdopendir(fd);
        struct dirent *de;
        char **v = NULL;
        size_t n = 0;

        if (!d) {
                if (fd >= 0)
                        close(fd);
                return cs_error_set(err, errno, "read the directory `%s`", *shown ? shown : ".");
        }
        while ((errno = 0, de = readdir(d))) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (n >= max) {
                        strv_free(&v, &n);
                        return cs_error_setx(err, E2BIG,
                                             "the directory `%s` has more than %zu entries",
                                             *shown ? shown : ".", max);
                }
                if (strv_push_dup(&v, &n, de->d_name) < 0) {
                        strv_free(&v, &n);
                        return cs_error_set(err, ENOMEM, "read `%s`", shown);
                }
        }
        if (errno) {
                strv_free(&v, &n);
                return cs_error_set(err, errno, "read the directory `%s`", *shown ? shown : ".");
        }
        if (n)
                qsort(v, n, sizeof(*v), name_cmp);
        *ret = v;
        *ret_n = n;
        return 0;
}

/* ---- sources ---- */

/* A source word made a path relative to the source root: leading '/'s and `.` dropped,
 * `..` taken back (out of the context: refused; above another stage's root: its root). */
static int src_normalize(struct copy_ctx *x, const char *word, char **ret)
{
        _cleanup_free_ char *p = strdup(word);
        char *w;

        if (!p)
                return cs_error_set(x->err, ENOMEM, "%s", x->c->what);
        if (strlen(p) > LAYER_DEFAULT_MAX_PATH)
                return cs_error_setx(x->err, ENAMETOOLONG, "%s: source `%.64s...` is too long",
                                     x->c->what, word);
        build_path_clean(p);
        w = p;
        while (*w == '/')
                w++;
        if (strcmp(w, "..") == 0 || strncmp(w, "../", 3) == 0) {
                char shown[256];

                layer_sanitize(word, shown, sizeof(shown));
                return cs_error_setx(x->err, EPERM,
                                     "%s: source `%s` is outside the %s; COPY and ADD can only "
                                     "name files inside it",
                                     x->c->what, shown,
                                     x->c->from_context ? "build context" : "source stage's root");
        }
        if (strcmp(w, ".") == 0)
                w = "";
        *ret = strdup(w);
        return *ret ? 0 : cs_error_set(x->err, ENOMEM, "%s", x->c->what);
}

static bool ignored(struct copy_ctx *x, const char *rel)
{
        return x->c->from_context && *rel && build_ignore_excludes(x->ign, rel);
}

/* `\x` of a literal component of a glob is x. */
static void unescape(char *s)
{
        char *o = s;

        for (; *s; s++) {
                if (*s == '\\' && s[1])
                        s++;
                *o++ = *s;
        }
        *o = '\0';
}

/* The paths that the components left in rest match under prefix, appended in order. */
static int glob_expand(struct copy_ctx *x, const char *prefix, const char *rest, char ***out,
                       size_t *n_out)
{
        const char *end = strchrnul(rest, '/');
        _cleanup_free_ char *comp = strndup(rest, (size_t)(end - rest));
        const char *next = *end ? end + 1 : end;
        struct build_glob *g = NULL;
        _cleanup_close_ int dfd = -1;
        char **names = NULL;
        size_t n = 0;
        int r;

        if (!comp)
                return cs_error_set(x->err, ENOMEM, "%s", x->c->what);
        if (!build_glob_has_wildcard(comp, strlen(comp))) {
                _cleanup_free_ char *p = NULL;

                unescape(comp);
                p = path_join(prefix, comp);
                if (!p)
                        return cs_error_setx(x->err, ENAMETOOLONG, "%s: a source path is too long",
                                             x->c->what);
                if (!*next)
                        return strv_push(out, n_out, cs_take_ptr(&p)) < 0
                                   ? cs_error_set(x->err, ENOMEM, "%s", x->c->what)
                                   : 0;
                return glob_expand(x, p, next, out, n_out);
        }
        dfd = src_open(x, prefix, O_RDONLY | O_DIRECTORY);
        if (dfd < 0)
                return 0; /* nothing there matches */
        r = build_glob_compile(comp, false, &g, x->err);
        if (r == 0)
                r = build_list_dir(dfd, BUILD_MAX_DIR_ENTRIES, &names, &n, prefix, x->err);
        for (size_t i = 0; r == 0 && i < n; i++) {
                _cleanup_free_ char *p = NULL;

                if (!build_glob_match(g, names[i]))
                        continue;
                p = path_join(prefix, names[i]);
                if (!p)
                        r = cs_error_setx(x->err, ENAMETOOLONG, "%s: a source path is too long",
                                          x->c->what);
                else if (*n_out >= BUILD_MAX_DIR_ENTRIES)
                        r = cs_error_setx(x->err, E2BIG, "%s: more than %d sources", x->c->what,
                                          BUILD_MAX_DIR_ENTRIES);
                else if (!*next)
                        r = ignored(x, p) ? 0
                            : strv_push(out, n_out, cs_take_ptr(&p)) < 0
                                ? cs_error_set(x->err, ENOMEM, "%s", x->c->what)
                                : 0;
                else
                        r = glob_expand(x, p, next, out, n_out);
        }
        build_names_free(names, n);
        build_glob_free(g);
        return r;
}

/* Every source word expanded: its paths relative to the source root, in order. */
static int sources_expand(struct copy_ctx *x, char ***ret, size_t *ret_n)
{
        char **v = NULL;
        size_t n = 0;
        int r = 0;

        for (size_t i = 0; r == 0 && i < x->c->n_srcs; i++) {
                _cleanup_free_ char *norm = NULL;
                size_t before = n;
                char shown[256];

                layer_sanitize(x->c->srcs[i], shown, sizeof(shown));
                r = src_normalize(x, x->c->srcs[i], &norm);
                if (r < 0)
                        break;
                if (!build_glob_has_wildcard(norm, strlen(norm))) {
                        if (ignored(x, norm))
                                r = cs_error_setx(x->err, ENOENT,
                                                  "%s: source `%s` is excluded by the ignore "
                                                  "file (.containerignore or .dockerignore); take "
                                                  "it back with a `!` pattern",
                                                  x->c->what, shown);
                        else if (strv_push(&v, &n, cs_take_ptr(&norm)) < 0)
                                r = cs_error_set(x->err, ENOMEM, "%s", x->c->what);
                        continue;
                }
                r = glob_expand(x, "", norm, &v, &n);
                if (r == 0 && n == before)
                        r = cs_error_setx(
                            x->err, ENOENT, "%s: no file in the %s matches `%s`", x->c->what,
                            x->c->from_context ? "build context" : "source stage", shown);
        }
        if (r < 0) {
                strv_free(&v, &n);
                return r;
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

/* The source at rel opened (O_RDONLY, links taken while they stay inside) and stat'ed. */
static int src_open_checked(struct copy_ctx *x, const char *rel, struct stat *st, char shown[256])
{
        int fd = src_open(x, rel, O_RDONLY | O_NONBLOCK);

        layer_sanitize(*rel ? rel : ".", shown, 256);
        if (fd < 0) {
                if (errno == EXDEV || errno == ELOOP)
                        return cs_error_setx(x->err, EPERM,
                                             "%s: source `%s` is a symlink that leads out of the "
                                             "build context; copy what it points to into the "
                                             "context instead",
                                             x->c->what, shown);
                if (errno == ENOENT || errno == ENOTDIR)
                        return cs_error_setx(x->err, ENOENT, "%s: source `%s` is not in the %s",
                                             x->c->what, shown,
                                             x->c->from_context ? "build context" : "source stage");
                return cs_error_set(x->err, errno, "%s: open source `%s`", x->c->what, shown);
        }
        if (fstat(fd, st) < 0 || (!S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode))) {
                close(fd);
                return cs_error_setx(x->err, EINVAL,
                                     "%s: source `%s` is neither a file nor a directory",
                                     x->c->what, shown);
        }
        return fd;
}

/* ---- the destination ---- */

static mode_t perm_of(struct copy_ctx *x, const struct stat *st)
{
        return x->chmod_set ? x->chmod : st->st_mode & 07777;
}

/* Owner, then mode (chown clears setuid/setgid), then mtime. */
static int set_attrs(struct copy_ctx *x, int fd, mode_t mode, const struct timespec *mtime,
                     uid_t uid, gid_t gid, const char *shown)
{
        if (fchown(fd, uid, gid) < 0)
                return cs_error_set(x->err, errno, "%s: chown `%s` to %u:%u", x->c->what, shown,
                                    (unsigned)uid, (unsigned)gid);
        if (fchmod(fd, mode) < 0)
                return cs_error_set(x->err, errno, "%s: chmod `%s`", x->c->what, shown);
        if (mtime) {
                struct timespec ts[2] = {{.tv_nsec = UTIME_OMIT}, *mtime};
                (void)futimens(fd, ts);
        }
        return 0;
}

/* Whatever is at dfd/name removed, unless it is a directory and keep_dir: 1 then. */
static int clear_at(struct copy_ctx *x, int dfd, const char *name, bool keep_dir, const char *shown)
{
        struct stat st;
        int r;

        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT
                           ? 0
                           : cs_error_set(x->err, errno, "%s: stat `%s`", x->c->what, shown);
        if (S_ISDIR(st.st_mode) && keep_dir)
                return 1;
        r = cs_remove_at(dfd, name, x->err);
        return r < 0 ? cs_error_wrap(x->err, "%s: replace `%s`", x->c->what, shown) : 0;
}

/* The directory name in dfd (whose path in the root is full), opened O_RDONLY: an existing
 * one is kept, a symlink taken when it leads to a directory inside the root (as /lib ->
 * usr/lib), anything else replaced by a new directory (mode, owner: the copy's). */
static int dest_dir(struct copy_ctx *x, int dfd, const char *name, const char *full, mode_t mode,
                    uid_t uid, gid_t gid, bool *ret_made)
{
        int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        int r;

        *ret_made = false;
        if (fd >= 0)
                return fd;
        if (errno != ENOENT) {
                if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
                        fd = cs_open_in_root(x->root_fd, full, O_RDONLY | O_DIRECTORY);
                        if (fd >= 0)
                                return fd;
                }
                r = clear_at(x, dfd, name, false, full);
                if (r < 0)
                        return r;
        }
        if (mkdirat(dfd, name, 0700) < 0)
                return cs_error_set(x->err, errno, "%s: create the directory `%s`", x->c->what,
                                    full);
        fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return cs_error_set(x->err, errno, "%s: open `%s`", x->c->what, full);
        *ret_made = true;
        r = set_attrs(x, fd, mode, NULL, uid, gid, full);
        if (r < 0) {
                close(fd);
                return r;
        }
        return fd;
}

/* The absolute destination path split in components ("" for /) and opened: missing
 * directories are made 0755, the last with the copy's owner when last_owned, the others
 * 0:0. */
static int dest_open_dirs(struct copy_ctx *x, const char *path, bool last_owned)
{
        _cleanup_close_ int cur = cs_open_in_root(x->root_fd, "/", O_RDONLY | O_DIRECTORY);
        const char *p = path;
        uid_t uid = x->uid;
        gid_t gid = x->gid;

        if (cur < 0)
                return cs_error_set(x->err, errno, "%s: open the root", x->c->what);
        while (*p == '/')
                p++;
        while (*p) {
                const char *end = strchrnul(p, '/');
                _cleanup_free_ char *comp = strndup(p, (size_t)(end - p));
                _cleanup_free_ char *full = strndup(path, (size_t)(end - path));
                bool made, last;
                int next;

                if (!comp || !full)
                        return cs_error_set(x->err, ENOMEM, "%s", x->c->what);
                while (*end == '/')
                        end++;
                last = !*end;
                next = cs_open_in_root(x->root_fd, full, O_RDONLY | O_DIRECTORY);
                if (next < 0 && errno == ENOENT) {
                        next = dest_dir(x, cur, comp, full, 0755, last && last_owned ? uid : 0,
                                        last && last_owned ? gid : 0, &made);
                        if (next < 0)
                                return next;
                } else if (next < 0) {
                        char shown[256];

                        layer_sanitize(full, shown, sizeof(shown));
                        return cs_error_set(x->err, errno,
                                            "%s: destination `%s` cannot be a directory",
                                            x->c->what, shown);
                }
                close(cur);
                cur = next;
                p = end;
        }
        return cs_take_fd(&cur);
}

/* ---- copying ---- */

static int copy_file(struct copy_ctx *x, int in, const struct stat *st, int dfd, const char *name,
                     const char *shown)
{
        _cleanup_close_ int out = -1;
        uint64_t copied;
        int r;

        r = budget(x, (uint64_t)st->st_size, shown);
        if (r < 0)
                return r;
        if (x->md) {
                md_str(x, "F");
                md_num(x, perm_of(x, st));
                md_num(x, (unsigned long long)st->st_size);
                if (x->root_fd < 0)
                        return md_fd(x, in, (uint64_t)st->st_size, shown);
        }
        r = clear_at(x, dfd, name, false, shown);
        if (r < 0)
                return r;
        out = openat(dfd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (out < 0)
                return cs_error_set(x->err, errno, "%s: create `%s`", x->c->what, shown);
        r = cs_copy_fd_len(in, out, (uint64_t)st->st_size, &copied);
        if (r < 0)
                return cs_error_set(x->err, -r, "%s: copy `%s`", x->c->what, shown);
        /* the digest of the copy itself, which only this step can write, so a source that
         * changed while it was read and changed back cannot pass as unchanged */
        if (x->md) {
                r = md_fd(x, out, (uint64_t)st->st_size, shown);
                if (r < 0)
                        return r;
        }
        return set_attrs(x, out, perm_of(x, st), &st->st_mtim, x->uid, x->gid, shown);
}

static int copy_symlink(struct copy_ctx *x, int sfd, const char *sname, const struct stat *st,
                        int dfd, const char *name, const char *shown)
{
        char target[LAYER_DEFAULT_MAX_PATH + 1];
        ssize_t n = readlinkat(sfd, sname, target, sizeof(target));
        struct timespec ts[2] = {{.tv_nsec = UTIME_OMIT}, st->st_mtim};
        int r;

        if (n < 0 || (size_t)n >= sizeof(target))
                return cs_error_set(x->err, n < 0 ? errno : ENAMETOOLONG,
                                    "%s: read the symlink `%s`", x->c->what, shown);
        target[n] = '\0';
        r = budget(x, 0, shown);
        if (r < 0)
                return r;
        if (x->md) {
                md_str(x, "L");
                md_str(x, target);
                if (x->root_fd < 0)
                        return 0;
        }
        r = clear_at(x, dfd, name, false, shown);
        if (r < 0)
                return r;
        if (symlinkat(target, dfd, name) < 0)
                return cs_error_set(x->err, errno, "%s: create the symlink `%s`", x->c->what,
                                    shown);
        if (fchownat(dfd, name, x->uid, x->gid, AT_SYMLINK_NOFOLLOW) < 0)
                return cs_error_set(x->err, errno, "%s: chown `%s`", x->c->what, shown);
        (void)utimensat(dfd, name, ts, AT_SYMLINK_NOFOLLOW);
        return 0;
}

/* The directory sfd's entries into dfd: crel is its path relative to the copy (for the
 * digest), srel relative to the source root (for the ignore file), drel the destination's
 * path in the root. */
static int copy_tree(struct copy_ctx *x, int sfd, int dfd, const char *crel, const char *srel,
                     const char *drel, int depth)
{
        char **names = NULL;
        size_t n = 0;
        int r;

        if (depth > LAYER_MAX_DEPTH)
                return cs_error_setx(x->err, ELOOP, "%s: `%s` is more than %d directories deep",
                                     x->c->what, srel, LAYER_MAX_DEPTH);
        r = build_list_dir(sfd, BUILD_MAX_DIR_ENTRIES, &names, &n, srel, x->err);
        for (size_t i = 0; r == 0 && i < n; i++) {
                _cleanup_free_ char *c = path_join(crel, names[i]);
                _cleanup_free_ char *s = path_join(srel, names[i]);
                _cleanup_free_ char *d = path_join(drel, names[i]);
                _cleanup_close_ int in = -1, out = -1;
                char shown[256];
                struct stat st;
                bool made = false, excl;

                if (!c || !s || !d) {
                        r = cs_error_setx(x->err, ENAMETOOLONG, "%s: a path under `%s` is too long",
                                          x->c->what, srel);
                        break;
                }
                layer_sanitize(s, shown, sizeof(shown));
                if (fstatat(sfd, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        r = cs_error_set(x->err, errno, "%s: stat `%s`", x->c->what, shown);
                        break;
                }
                excl = ignored(x, s);
                /* an excluded directory is still walked for what a `!` takes back */
                if (excl && !(S_ISDIR(st.st_mode) && build_ignore_has_exceptions(x->ign)))
                        continue;
                if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
                        continue; /* fifos, sockets, devices: not made in a user namespace */
                if (x->md && !excl)
                        md_str(x, c);
                if (S_ISLNK(st.st_mode)) {
                        r = copy_symlink(x, sfd, names[i], &st, dfd, names[i], shown);
                } else if (S_ISREG(st.st_mode)) {
                        in = openat(sfd, names[i], O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
                        if (in < 0 || fstat(in, &st) < 0 || !S_ISREG(st.st_mode))
                                r = cs_error_set(x->err, in < 0 ? errno : EAGAIN,
                                                 "%s: open `%s` (it changed while it was copied)",
                                                 x->c->what, shown);
                        else
                                r = copy_file(x, in, &st, dfd, names[i], shown);
                } else {
                        in = openat(sfd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (in < 0) {
                                r = cs_error_set(x->err, errno, "%s: open `%s`", x->c->what, shown);
                                break;
                        }
                        r = budget(x, 0, shown);
                        if (r == 0 && x->md && !excl) {
                                md_str(x, "D");
                                md_num(x, perm_of(x, &st));
                        }
                        if (r == 0 && x->md && x->root_fd < 0) {
                                r = copy_tree(x, in, -1, c, s, d, depth + 1);
                                continue;
                        }
                        if (r == 0)
                                r = out =
                                    dest_dir(x, dfd, names[i], d, excl ? 0755 : perm_of(x, &st),
                                             x->uid, x->gid, &made);
                        if (r >= 0)
                                r = copy_tree(x, in, out, c, s, d, depth + 1);
                        /* made only for what a `!` took back: gone again when nothing was */
                        if (r == 0 && excl && made && unlinkat(dfd, names[i], AT_REMOVEDIR) == 0)
                                continue;
                        /* an excluded directory's own mode and mtime are not copied (nor
                         * in the digest) */
                        if (r == 0 && !excl)
                                r = set_attrs(x, out, perm_of(x, &st), &st.st_mtim, x->uid, x->gid,
                                              shown);
                }
        }
        build_names_free(names, n);
        return r;
}

/* ---- ADD of a local tar ---- */

/* The archive's bytes as libarchive reads them: its first `left` (the size it had when it
 * was opened), each hashed on the way when the copy is digested. */
struct tar_src {
        struct copy_ctx *x;
        int fd;
        uint64_t left;
        bool hash;
        char buf[1 << 16];
};

static la_ssize_t tar_src_read(struct archive *a, void *data, const void **ret)
{
        struct tar_src *t = data;
        ssize_t n;

        if (t->left == 0)
                return 0;
        do
                n = read(t->fd, t->buf, t->left < sizeof(t->buf) ? t->left : sizeof(t->buf));
        while (n < 0 && errno == EINTR);
        if (n < 0) {
                archive_set_error(a, errno, "read");
                return -1;
        }
        if (t->hash)
                md_add(t->x, t->buf, (size_t)n);
        t->left -= (uint64_t)n;
        *ret = t->buf;
        return n;
}

/* The archive's entries onto dest_fd by the layer extractor's rules (layer_tree_new_add),
 * within what is left of the copy's limits. */
static int unpack_entries(struct copy_ctx *x, struct archive *a, struct archive_entry *e, int ar,
                          int dest_fd, const char *shown)
{
        struct layer_limits lim = LAYER_LIMITS_DEFAULT;
        struct layer_add_opts opts = {.chown_set = x->chown_set,
                                      .chmod_set = x->chmod_set,
                                      .uid = x->uid,
                                      .gid = x->gid,
                                      .chmod = x->chmod};
        struct layer_tree *t = NULL;
        int r;

        lim.max_size -= x->bytes;
        lim.max_entries -= x->entries;
        r = layer_tree_new_add(dest_fd, &lim, &opts, &t, x->err);
        for (; r == 0 && ar != ARCHIVE_EOF; ar = archive_read_next_header(a, &e)) {
                if (ar < ARCHIVE_WARN)
                        r = cs_error_setx(x->err, EINVAL, "%s: the archive `%s`: %s", x->c->what,
                                          shown, archive_error_string(a));
                else if ((r = layer_tree_add_entry(t, a, e, x->err)) == -EIO)
                        r = cs_error_setx(x->err, EIO, "%s: the archive `%s`: %s", x->c->what,
                                          shown, archive_error_string(a));
                else if (r < 0)
                        cs_error_wrap(x->err, "%s: the archive `%s`", x->c->what, shown);
        }
        /* directories' modes and mtimes last: their entries are written by then */
        if (r == 0)
                r = layer_tree_add_finish(t, x->err);
        if (t) {
                x->bytes += layer_tree_stats(t)->size;
                x->entries += layer_tree_stats(t)->entries;
        }
        layer_tree_free(t);
        if (r < 0 && x->err->err == EINVAL && strstr(x->err->msg, "chown"))
                cs_error_hint(x->err, "the archive's owner is outside the ids the build's user "
                                      "namespace maps (add a range for your user to /etc/subuid "
                                      "and /etc/subgid, or ADD with --chown)");
        return r;
}

/* in (of size st->st_size) unpacked into dest_fd when it is a tar (plain, gz, bz2, xz,
 * zst): 0; 1 when it is no tar (then it is copied as a file). A digested copy hashes every
 * byte of it, those after the archive's end too, as a digest of the file would. */
static int unpack_tar(struct copy_ctx *x, int in, const struct stat *st, int dest_fd, bool probe,
                      const char *shown)
{
        struct archive *a = archive_read_new();
        _cleanup_free_ struct tar_src *src = malloc(sizeof(*src));
        struct archive_entry *e;
        int r = 0, ar;

        if (!a || !src) {
                archive_read_free(a);
                return cs_error_set(x->err, ENOMEM, "%s", x->c->what);
        }
        *src = (struct tar_src){
            .x = x, .fd = in, .left = (uint64_t)st->st_size, .hash = x->md && !probe};
        archive_read_support_format_tar(a);
        archive_read_support_filter_gzip(a);
        archive_read_support_filter_bzip2(a);
        archive_read_support_filter_xz(a);
        archive_read_support_filter_zstd(a);
        if (lseek(in, 0, SEEK_SET) < 0 ||
            archive_read_open(a, src, NULL, tar_src_read, NULL) != ARCHIVE_OK) {
                archive_read_free(a);
                return 1;
        }
        ar = archive_read_next_header(a, &e);
        if (ar < ARCHIVE_WARN || ar == ARCHIVE_EOF) {
                archive_read_free(a);
                /* the probe found a tar: a file that is none now changed meanwhile */
                return probe ? 1
                             : cs_error_setx(x->err, EAGAIN, "%s: `%s` changed while it was copied",
                                             x->c->what, shown);
        }
        if (probe) {
                archive_read_free(a);
                return 0;
        }
        r = unpack_entries(x, a, e, ar, dest_fd, shown);
        while (r == 0 && src->hash && src->left > 0) {
                const void *ignored;
                la_ssize_t n = tar_src_read(a, src, &ignored);

                if (n <= 0)
                        r = cs_error_set(x->err, n < 0 ? errno : EAGAIN, "%s: read `%s`%s",
                                         x->c->what, shown,
                                         n < 0 ? "" : " (it changed while it was copied)");
        }
        archive_read_free(a);
        return r;
}

/* ---- the instruction ---- */

static int chown_resolve(struct copy_ctx *x)
{
        const struct build_copy *c = x->c;
        _cleanup_free_ char *passwd = NULL, *group = NULL;
        const char *files[2] = {"/etc/passwd", "/etc/group"};
        char **bufs[2] = {&passwd, &group};
        size_t len, ulen = strcspn(c->chown, ":");
        bool numeric = ulen > 0;
        int r;

        for (size_t i = 0; i < ulen; i++)
                numeric &= isdigit((unsigned char)c->chown[i]) != 0;
        if (numeric && !c->chown[ulen] && ulen < 10) {
                /* a uid alone: the same number as gid, as docker and buildkit do */
                x->uid = (uid_t)strtoul(c->chown, NULL, 10);
                x->gid = (gid_t)x->uid;
                return 0;
        }
        for (int i = 0; i < 2; i++) {
                _cleanup_close_ int fd =
                    cs_open_in_root(x->root_fd, files[i], O_RDONLY | O_NONBLOCK);
                struct stat st;

                if (fd < 0)
                        continue;
                if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                        continue;
                r = cs_read_fd(fd, files[i], PASSWD_MAX, bufs[i], &len, x->err);
                if (r < 0)
                        return cs_error_wrap(x->err, "%s: --chown=%s", c->what, c->chown);
        }
        r = image_lookup_user(passwd, group, c->chown, &x->uid, &x->gid, x->err);
        return r < 0 ? cs_error_wrap(x->err, "%s: --chown=%s", c->what, c->chown) : 0;
}

static int ctx_init(struct copy_ctx *x, const struct build_copy *c, int root_fd,
                    struct cs_error *err)
{
        *x = (struct copy_ctx){.c = c, .root_fd = root_fd, .err = err};
        if (c->n_srcs == 0)
                return cs_error_setx(err, EINVAL, "%s: no source to copy", c->what);
        if (c->chmod) {
                char *end;
                unsigned long m = strtoul(c->chmod, &end, 8);

                if (!*c->chmod || *end || m > 07777 ||
                    strspn(c->chmod, "01234567") != strlen(c->chmod))
                        return cs_error_setx(err, EINVAL,
                                             "%s: --chmod=%s is not an octal mode (0 to 7777)",
                                             c->what, c->chmod);
                x->chmod_set = true;
                x->chmod = (mode_t)m;
        }
        if (c->from_context && c->n_ignore) {
                int r = build_ignore_compile(c->ignore, c->n_ignore, &x->ign, err);
                if (r < 0)
                        return cs_error_wrap(err, "%s: the ignore file", c->what);
        }
        return 0;
}

/* Whether a destination word names a directory: a trailing '/' or a last `.`/`..`. */
static bool dest_is_dir(const char *d)
{
        size_t n = strlen(d);
        const char *last = strrchr(d, '/');

        last = last ? last + 1 : d;
        return n == 0 || d[n - 1] == '/' || strcmp(last, ".") == 0 || strcmp(last, "..") == 0;
}

static int md_begin(struct copy_ctx *x)
{
        if (!(x->md = digest_new()))
                return cs_error_set(x->err, ENOMEM, "%s", x->c->what);
        return 0;
}

static void md_end(struct copy_ctx *x, char ret[65])
{
        unsigned char sum[32];

        digest_end(x->md, sum);
        for (int i = 0; i < 32; i++)
                snprintf(ret + 2 * i, 3, "%02x", sum[i]);
}

int build_copy_apply(int root_fd, const struct build_copy *c, char ret_digest[65],
                     struct cs_error *err)
{
        struct copy_ctx x;
        _cleanup_free_ char *dest = NULL;
        char **srcs = NULL;
        size_t n = 0;
        bool dir_dest;
        int r;

        r = ctx_init(&x, c, root_fd, err);
        if (r == 0 && ret_digest)
                r = md_begin(&x);
        if (r == 0 && c->chown)
                r = chown_resolve(&x);
        x.chown_set = c->chown != NULL;
        if (r == 0)
                r = sources_expand(&x, &srcs, &n);
        if (r < 0)
                goto out;
        dir_dest = dest_is_dir(c->dest);
        if (n > 1 && !dir_dest) {
                r = cs_error_setx(err, EINVAL,
                                  "%s: with more than one source, the destination `%s` must be a "
                                  "directory ending in `/`",
                                  c->what, c->dest);
                goto out;
        }
        dest = c->dest[0] == '/' ? strdup(c->dest) : cs_path_join(c->workdir, c->dest);
        if (!dest) {
                r = cs_error_set(err, ENOMEM, "%s", c->what);
                goto out;
        }
        build_path_clean(dest);
        for (size_t i = 0; r == 0 && i < n; i++) {
                _cleanup_close_ int in = -1, dfd = -1, existing = -1;
                char shown[256];
                struct stat st;

                in = r = src_open_checked(&x, srcs[i], &st, shown);
                if (r < 0)
                        break;
                if (x.md) {
                        md_str(&x, "S");
                        md_str(&x, srcs[i]);
                }
                if (S_ISDIR(st.st_mode) ||
                    (c->add && unpack_tar(&x, in, &st, -1, true, shown) == 0)) {
                        dfd = r = dest_open_dirs(&x, dest, true);
                        if (r >= 0 && x.md && S_ISDIR(st.st_mode)) {
                                md_str(&x, "D");
                        } else if (r >= 0 && x.md) {
                                /* as the digest sees it: an archive, and its bytes as a file */
                                md_str(&x, "A");
                                md_str(&x, "F");
                                md_num(&x, perm_of(&x, &st));
                                md_num(&x, (unsigned long long)st.st_size);
                        }
                        if (r >= 0 && S_ISDIR(st.st_mode))
                                r = copy_tree(&x, in, dfd, "", srcs[i], dest, 0);
                        else if (r >= 0)
                                r = unpack_tar(&x, in, &st, dfd, false, shown);
                        continue;
                }
                /* a file: into dest when it is a directory, else as dest (from its start:
                 * ADD's probe for an archive has read some of it) */
                if (c->add && lseek(in, 0, SEEK_SET) < 0) {
                        r = cs_error_set(err, errno, "%s: %s", c->what, shown);
                        break;
                }
                existing = cs_open_in_root(root_fd, dest, O_PATH | O_DIRECTORY);
                if (dir_dest || existing >= 0) {
                        const char *base =
                            strrchr(srcs[i], '/') ? strrchr(srcs[i], '/') + 1 : srcs[i];

                        dfd = r = dest_open_dirs(&x, dest, false);
                        if (r >= 0)
                                r = copy_file(&x, in, &st, dfd, base, shown);
                } else {
                        _cleanup_free_ char *parent = strdup(dest);
                        char *slash = parent ? strrchr(parent, '/') : NULL;

                        if (!slash) {
                                r = cs_error_set(err, ENOMEM, "%s", c->what);
                                break;
                        }
                        *slash = '\0';
                        dfd = r = dest_open_dirs(&x, *parent ? parent : "/", false);
                        if (r >= 0)
                                r = copy_file(&x, in, &st, dfd, slash + 1, shown);
                }
        }
        if (r == 0 && x.md)
                md_end(&x, ret_digest);
out:
        EVP_MD_CTX_free(x.md);
        strv_free(&srcs, &n);
        build_ignore_free(x.ign);
        return r < 0 ? r : 0;
}

int build_copy_digest(const struct build_copy *c, char ret[65], struct cs_error *err)
{
        struct copy_ctx x;
        char **srcs = NULL;
        size_t n = 0;
        int r;

        r = ctx_init(&x, c, -1, err);
        if (r == 0)
                r = md_begin(&x);
        if (r == 0)
                r = sources_expand(&x, &srcs, &n);
        for (size_t i = 0; r == 0 && i < n; i++) {
                _cleanup_close_ int in = -1;
                char shown[256];
                struct stat st;

                in = r = src_open_checked(&x, srcs[i], &st, shown);
                if (r < 0)
                        break;
                /* which source, and (for a file) the name it is copied under */
                md_str(&x, "S");
                md_str(&x, srcs[i]);
                if (S_ISDIR(st.st_mode)) {
                        md_str(&x, "D");
                        r = copy_tree(&x, in, -1, "", srcs[i], "", 0);
                } else {
                        /* ADD: whether it is unpacked is part of what it copies */
                        if (c->add && unpack_tar(&x, in, &st, -1, true, shown) == 0)
                                md_str(&x, "A");
                        r = copy_file(&x, in, &st, -1, NULL, shown);
                }
        }
        if (r == 0)
                md_end(&x, ret);
        EVP_MD_CTX_free(x.md);
        strv_free(&srcs, &n);
        build_ignore_free(x.ign);
        return r < 0 ? r : 0;
}
