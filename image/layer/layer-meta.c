/* The tree being unpacked: its directories, opened relative to fds, and its ownership table
 * (path -> what the layer's tar recorded), with what the layers beneath the one being
 * unpacked say about a directory its tar omits. */
#include "layer-private.h"

#include "../../common/cleanup.h"
#include "../../common/error.h"
#include "../../common/fileio.h"
#include "../../common/resolve.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- tree operations, all relative to directory fds ---- */

int layer_tree_new(int root_fd, const struct layer_limits *lim, struct layer_tree **ret,
                   struct cs_error *err)
{
        struct layer_tree *t = calloc(1, sizeof(*t));

        if (!t) {
                free(t);
                return cs_error_set(err, ENOMEM, "layer extraction");
        }
        t->root_fd = root_fd;
        t->lim = *lim;
        t->budget = lim->shared ? lim->shared : &t->own;
        t->cache_fd = -1;
        *ret = t;
        return 0;
}

int layer_tree_new_add(int dest_fd, const struct layer_limits *lim,
                       const struct layer_add_opts *opts, struct layer_tree **ret,
                       struct cs_error *err)
{
        int r = layer_tree_new(dest_fd, lim, ret, err);

        if (r < 0)
                return r;
        (*ret)->add = true;
        (*ret)->add_opts = *opts;
        return 0;
}

void cache_drop(struct layer_tree *t)
{
        if (t->cache_fd >= 0)
                close(t->cache_fd);
        t->cache_fd = -1;
        free(t->cache_path);
        t->cache_path = NULL;
}

void layer_tree_free(struct layer_tree *t)
{
        if (!t)
                return;
        cache_drop(t);
        lower_meta_free(t);
        for (size_t i = 0; i < t->n_pending; i++) {
                free(t->pending[i].path);
                free(t->pending[i].target);
        }
        free(t->pending);
        for (size_t i = 0; i < t->cap; i++)
                free(t->slots[i].path);
        free(t->slots);
        free(t);
}

const struct layer_stats *layer_tree_stats(const struct layer_tree *t)
{
        return &t->stats;
}

/* Open (O_PATH) the directory at rel under the layer's tree without following any symlink;
 * missing directories are created when create is set. Returns a new fd the caller closes, or < 0
 * (-ENOENT without a message when a directory is missing and create is not set). */
static int tree_dup(int fd, struct cs_error *err)
{
        int r = fcntl(fd, F_DUPFD_CLOEXEC, 3);

        return r < 0 ? cs_error_set(err, errno, "dup a directory fd") : r;
}

int tree_open_dir(struct layer_tree *t, const char *rel, bool create, const char *entry,
                  struct cs_error *err)
{
        _cleanup_close_ int cur = -1;
        _cleanup_free_ char *walked = NULL;
        char shown[256];
        const char *p = rel;
        size_t wl = 0;

        if (t->cache_path && strcmp(t->cache_path, rel) == 0)
                return tree_dup(t->cache_fd, err);
        cache_drop(t);
        layer_sanitize(entry, shown, sizeof(shown));
        walked = malloc(strlen(rel) + 1);
        if (!walked)
                return cs_error_set(err, ENOMEM, "entry `%s`", shown);
        walked[0] = '\0';
        cur = openat(t->root_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (cur < 0)
                return cs_error_set(err, errno, "open the rootfs");
        while (*p) {
                const char *end = strchrnul(p, '/');
                size_t clen = (size_t)(end - p);
                char comp[256];
                int next;

                memcpy(comp, p, clen);
                comp[clen] = '\0';
                if (wl)
                        walked[wl++] = '/';
                memcpy(walked + wl, comp, clen + 1);
                wl += clen;
                next = openat(cur, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (next < 0 && errno == ENOENT && create) {
                        /* its attributes come from the lower layers (layer_tree_set_lowers) */
                        struct meta_rec rec = {.mode = S_IFDIR | 0755, .implicit = true};
                        int r;

                        if (mkdirat(cur, comp, 0755) < 0 && errno != EEXIST)
                                return cs_error_set(err, errno, "entry `%s`: create `%s`", shown,
                                                    walked);
                        /* ADD: a directory it makes is the copy's owner's */
                        if (t->add && t->add_opts.chown_set &&
                            fchownat(cur, comp, t->add_opts.uid, t->add_opts.gid,
                                     AT_SYMLINK_NOFOLLOW) < 0)
                                return cs_error_set(err, errno, "entry `%s`: chown `%s`", shown,
                                                    walked);
                        r = meta_set(t, walked, &rec, err);
                        if (r < 0)
                                return r;
                        next = openat(cur, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                }
                if (next < 0) {
                        struct stat st;
                        int e = errno;

                        if (e == ENOENT)
                                return -ENOENT; /* the caller decides whether that is fine */
                        if (fstatat(cur, comp, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                            S_ISLNK(st.st_mode))
                                return cs_error_setx(
                                    err, ELOOP,
                                    "entry `%s`: `%s` is a symlink; a tar entry "
                                    "may not be written through a symlink (it "
                                    "could point outside the tree it unpacks into)",
                                    shown, walked);
                        if (e == ENOTDIR)
                                return cs_error_setx(err, ENOTDIR,
                                                     "entry `%s`: `%s` is not a directory", shown,
                                                     walked);
                        return cs_error_set(err, e, "entry `%s`: open `%s`", shown, walked);
                }
                close(cur);
                cur = next;
                p = *end ? end + 1 : end;
        }
        t->cache_path = strdup(rel);
        if (!t->cache_path)
                return cs_error_set(err, ENOMEM, "entry `%s`", shown);
        t->cache_fd = cs_take_fd(&cur);
        return tree_dup(t->cache_fd, err);
}

void split_path(char *rel, const char **ret_parent, const char **ret_base)
{
        char *slash = strrchr(rel, '/');

        if (slash) {
                *slash = '\0';
                *ret_parent = rel;
                *ret_base = slash + 1;
        } else {
                *ret_parent = "";
                *ret_base = rel;
        }
}

/* ---- the ownership table: path -> what the image recorded ---- */

static uint64_t path_hash(const char *s)
{
        uint64_t h = 1469598103934665603ull;

        for (; *s; s++)
                h = (h ^ (unsigned char)*s) * 1099511628211ull;
        return h;
}

struct meta_rec *meta_find(struct layer_tree *t, const char *path)
{
        size_t i;

        if (!t->cap)
                return NULL;
        for (i = path_hash(path) & (t->cap - 1); t->slots[i].path; i = (i + 1) & (t->cap - 1))
                if (strcmp(t->slots[i].path, path) == 0)
                        return &t->slots[i];
        return NULL;
}

static int meta_grow(struct layer_tree *t, struct cs_error *err)
{
        size_t ncap = t->cap ? t->cap * 2 : 4096;
        struct meta_rec *ns = calloc(ncap, sizeof(*ns));

        if (!ns)
                return cs_error_set(err, ENOMEM, "ownership table");
        for (size_t j = 0; j < t->cap; j++) {
                size_t i;

                if (!t->slots[j].path)
                        continue;
                for (i = path_hash(t->slots[j].path) & (ncap - 1); ns[i].path;
                     i = (i + 1) & (ncap - 1))
                        ;
                ns[i] = t->slots[j];
        }
        free(t->slots);
        t->slots = ns;
        t->cap = ncap;
        return 0;
}

int meta_set(struct layer_tree *t, const char *path, const struct meta_rec *v, struct cs_error *err)
{
        struct meta_rec *r = meta_find(t, path);
        size_t i;
        int ret;

        if (r) {
                char *keep = r->path;
                *r = *v;
                r->path = keep;
                r->layer = t->layer;
                return 0;
        }
        if ((t->n + 1) * 10 >= t->cap * 7 && (ret = meta_grow(t, err)) < 0)
                return ret;
        for (i = path_hash(path) & (t->cap - 1); t->slots[i].path; i = (i + 1) & (t->cap - 1))
                ;
        t->slots[i] = *v;
        t->slots[i].layer = t->layer;
        if (!(t->slots[i].path = strdup(path)))
                return cs_error_set(err, ENOMEM, "ownership table");
        t->n++;
        return 0;
}

bool created_in_this_layer(struct layer_tree *t, const char *path)
{
        struct meta_rec *r = meta_find(t, path);

        return r && r->layer == t->layer;
}

/* "\ooo" escapes of the metadata file undone in place; false for a malformed one. */
static bool path_unescape(char *s)
{
        char *o = s;

        for (char *p = s; *p; p++) {
                if (*p != '\\') {
                        *o++ = *p;
                        continue;
                }
                if (p[1] < '0' || p[1] > '3' || p[2] < '0' || p[2] > '7' || p[3] < '0' ||
                    p[3] > '7')
                        return false;
                *o++ = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
                p += 3;
        }
        *o = '\0';
        return true;
}

/* Lower layer k's ownership table from its metadata file, read the first time it is asked
 * for; NULL when it cannot be read (the directory then keeps the default owner). */
static struct layer_tree *lower_meta(struct layer_tree *t, size_t k)
{
        _cleanup_free_ char *line = NULL;
        struct layer_tree *m;
        size_t cap = 0;
        FILE *f;
        int fd;

        if (t->lower_meta[k])
                return t->lower_meta[k];
        m = calloc(1, sizeof(*m));
        if (!m)
                return NULL;
        m->cache_fd = -1;
        t->lower_meta[k] = m;
        fd = openat(t->lowers[k], LAYER_META, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 || !(f = fdopen(fd, "r"))) {
                if (fd >= 0)
                        close(fd);
                return m;
        }
        while (getline(&line, &cap, f) > 0) {
                /* Dropped: a table that cannot grow leaves the owner at its default. */
                struct cs_error ignored;
                struct meta_rec rec = {0};
                char *path = NULL, *nl = strchr(line, '\n');
                int n = 0;

                if (nl)
                        *nl = '\0';
                if (sscanf(line, "%o %u %u %n", &rec.mode, &rec.uid, &rec.gid, &n) != 3 || !n)
                        continue;
                path = line + n;
                if (path_unescape(path) && meta_set(m, path, &rec, &ignored) < 0)
                        break;
        }
        fclose(f);
        return m;
}

bool layer_lowers_record(struct layer_tree *t, const char *path, uint32_t *ret_mode,
                         uint32_t *ret_uid, uint32_t *ret_gid)
{
        for (size_t k = 0; k < t->n_lowers; k++) {
                struct layer_tree *m = lower_meta(t, k);
                const struct meta_rec *rec = m ? meta_find(m, path) : NULL;

                if (rec) {
                        *ret_mode = rec->mode;
                        *ret_uid = rec->uid;
                        *ret_gid = rec->gid;
                        return true;
                }
        }
        return false;
}

int layer_lowers_not_roots(struct layer_tree *t,
                           int (*each)(void *opaque, const char *path, uint32_t mode, uint32_t uid,
                                       uint32_t gid),
                           void *opaque)
{
        for (size_t k = 0; k < t->n_lowers; k++) {
                struct layer_tree *m = lower_meta(t, k);

                for (size_t i = 0; m && i < m->cap; i++) {
                        const struct meta_rec *rec = &m->slots[i];
                        bool above = false;
                        int r;

                        if (!rec->path || (rec->uid == 0 && rec->gid == 0))
                                continue;
                        /* the topmost layer's record of a path is the one that counts */
                        for (size_t j = 0; j < k && !above; j++)
                                above = lower_meta(t, j) && meta_find(lower_meta(t, j), rec->path);
                        if (above)
                                continue;
                        r = each(opaque, rec->path, rec->mode, rec->uid, rec->gid);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

void lower_meta_free(struct layer_tree *t)
{
        for (size_t k = 0; t->lower_meta && k < t->n_lowers; k++)
                if (t->lower_meta[k]) {
                        for (size_t i = 0; i < t->lower_meta[k]->cap; i++)
                                free(t->lower_meta[k]->slots[i].path);
                        free(t->lower_meta[k]->slots);
                        free(t->lower_meta[k]);
                }
        free(t->lower_meta);
        t->lower_meta = NULL;
}

/* What the topmost lower layer holding anything at path holds: an O_PATH fd of it (and
 * of that layer's tree, *ret_diff), its stat and that layer's record of it (NULL when it
 * has none). -1 when no layer holds it, or something that is not a directory on the way
 * (a whiteout, a file, a symlink) hides the lower ones. */
static int lower_find(struct layer_tree *t, const char *path, struct stat *st,
                      const struct meta_rec **ret_rec, int *ret_diff)
{
        for (size_t k = 0; k < t->n_lowers; k++) {
                _cleanup_close_ int diff =
                    openat(t->lowers[k], LAYER_DIFF, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                int fd = diff < 0 ? -1 : cs_open_beneath(diff, path, O_PATH);
                struct layer_tree *m;

                if (fd < 0 && errno == ENOENT)
                        continue;
                if (fd < 0 || fstat(fd, st) < 0) {
                        if (fd >= 0)
                                close(fd);
                        return -1;
                }
                m = lower_meta(t, k);
                *ret_rec = m ? meta_find(m, *path ? path : ".") : NULL;
                *ret_diff = cs_take_fd(&diff);
                return fd;
        }
        return -1;
}

/* Overlayfs shows a directory with the attributes of the topmost layer that holds it, so a
 * directory this layer's tar omits (but has entries under) gets what the topmost lower layer
 * holding it as a directory recorded: mode and mtime from its tree, owner from its metadata.
 * A whiteout, a file or a symlink in the way hides the lower ones: false, the default. */
bool inherit_dir(struct layer_tree *t, const char *path, struct meta_rec *rec)
{
        const struct meta_rec *lr = NULL;
        _cleanup_close_ int diff = -1;
        struct stat st;
        _cleanup_close_ int fd = lower_find(t, path, &st, &lr, &diff);

        *rec = (struct meta_rec){.mode = S_IFDIR | 0755};
        if (fd < 0 || !S_ISDIR(st.st_mode))
                return false;
        rec->mode = S_IFDIR | (st.st_mode & 07777);
        rec->mtime_set = true;
        rec->mtime_sec = st.st_mtim.tv_sec;
        rec->mtime_nsec = (int32_t)st.st_mtim.tv_nsec;
        if (lr) {
                rec->uid = lr->uid;
                rec->gid = lr->gid;
        }
        return true;
}

int lower_open_file(struct layer_tree *t, const char *path, struct meta_rec *ret_rec)
{
        const struct meta_rec *lr = NULL;
        _cleanup_close_ int diff = -1;
        struct stat st;
        _cleanup_close_ int fd = lower_find(t, path, &st, &lr, &diff);

        if (fd < 0 || !S_ISREG(st.st_mode))
                return -ENOENT;
        *ret_rec = lr ? *lr : (struct meta_rec){.mode = st.st_mode};
        ret_rec->path = NULL;
        return cs_open_beneath(diff, path, O_RDONLY);
}

/* A hard link whose target only a lower layer holds: base in pfd becomes a copy of that
 * file, counted against the size limit; *rec gets what the lower layer recorded of it. */
static int copy_from_lower(struct layer_tree *t, const char *target, int pfd, const char *base,
                           const char *shown, struct meta_rec *rec, struct cs_error *err)
{
        _cleanup_close_ int in = lower_open_file(t, target, rec);
        _cleanup_close_ int out = -1;
        uint64_t copied = 0;
        struct stat st;
        int r;

        if (in < 0)
                return cs_error_setx(err, ENOENT,
                                     "hard link `%s`: its target `%s` is not a file of the image",
                                     shown, target);
        if (fstat(in, &st) < 0)
                return cs_error_set(err, errno, "hard link `%s`: stat its target", shown);
        if ((uint64_t)st.st_size > layer_budget_left(t))
                return cs_error_setx(err, EFBIG,
                                     "hard link `%s` would take the image beyond the limit of "
                                     "%llu unpacked bytes (--max-size)",
                                     shown, (unsigned long long)t->lim.max_size);
        t->stats.size += (uint64_t)st.st_size;
        atomic_fetch_add(&t->budget->stream, (uint64_t)st.st_size);
        out = openat(pfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (out < 0)
                return cs_error_set(err, errno, "hard link `%s`: create its copy", shown);
        r = cs_copy_fd_len(in, out, (uint64_t)st.st_size, &copied);
        if (r == 0 && copied != (uint64_t)st.st_size)
                r = -EIO;
        if (r < 0)
                return cs_error_set(err, -r, "hard link `%s`: copy its target", shown);
        if (layer_fchmod(out, st.st_mode & 07777) < 0)
                return cs_error_set(err, errno, "hard link `%s`: chmod", shown);
        return 0;
}

int layer_fchmod(int fd, mode_t mode)
{
        if (fchmod(fd, mode) == 0)
                return 0;
        if (errno != EPERM || !(mode & (S_ISUID | S_ISGID)))
                return -1;
        return fchmod(fd, mode & ~(mode_t)(S_ISUID | S_ISGID));
}

int layer_fchmodat(int dirfd, const char *name, mode_t mode)
{
        if (fchmodat(dirfd, name, mode, 0) == 0)
                return 0;
        if (errno != EPERM || !(mode & (S_ISUID | S_ISGID)))
                return -1;
        return fchmodat(dirfd, name, mode & ~(mode_t)(S_ISUID | S_ISGID), 0);
}

int layer_link_or_copy(struct layer_tree *t, int tfd, const char *tbase, int pfd, const char *base)
{
        _cleanup_close_ int in = -1, out = -1;
        uint64_t copied = 0;
        struct stat st;
        int r;

        if (linkat(tfd, tbase, pfd, base, 0) == 0)
                return 0;
        if (errno != EXDEV)
                return -1;
        in = openat(tfd, tbase, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (in < 0 || fstat(in, &st) < 0)
                return -1;
        if ((uint64_t)st.st_size > layer_budget_left(t)) {
                errno = EFBIG;
                return -1;
        }
        t->stats.size += (uint64_t)st.st_size;
        atomic_fetch_add(&t->budget->stream, (uint64_t)st.st_size);
        out = openat(pfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (out < 0)
                return -1;
        r = cs_copy_fd_len(in, out, (uint64_t)st.st_size, &copied);
        if (r == 0 && copied != (uint64_t)st.st_size)
                r = -EIO;
        if (r < 0) {
                errno = -r;
                return -1;
        }
        return layer_fchmod(out, st.st_mode & 07777);
}

int pending_link_add(struct layer_tree *t, const char *path, const char *target,
                     struct cs_error *err)
{
        if (t->n_pending == t->cap_pending) {
                size_t ncap = t->cap_pending ? t->cap_pending * 2 : 16;
                struct pending_link *np = realloc(t->pending, ncap * sizeof(*np));

                if (!np)
                        return cs_error_set(err, ENOMEM, "hard link `%s`", path);
                t->pending = np;
                t->cap_pending = ncap;
        }
        t->pending[t->n_pending] = (struct pending_link){strdup(path), strdup(target)};
        if (!t->pending[t->n_pending].path || !t->pending[t->n_pending].target) {
                free(t->pending[t->n_pending].path);
                free(t->pending[t->n_pending].target);
                return cs_error_set(err, ENOMEM, "hard link `%s`", path);
        }
        t->n_pending++;
        return 0;
}

/* A pending link made: unless a later entry of the layer took its place, a link to its
 * target when the layer holds it now (a link to an earlier pending one), else a copy of
 * the lower layers' file. */
static int pending_resolve(struct layer_tree *t, const struct pending_link *l, struct cs_error *err)
{
        _cleanup_free_ char *path = strdup(l->path), *target = strdup(l->target);
        _cleanup_close_ int pfd = -1, tfd = -1;
        const char *parent, *base, *tparent, *tbase;
        char shown[256];
        struct meta_rec rec, *own;
        struct stat st;
        int r;

        if (!path || !target)
                return cs_error_set(err, ENOMEM, "hard link `%s`", l->path);
        layer_sanitize(l->path, shown, sizeof(shown));
        split_path(path, &parent, &base);
        split_path(target, &tparent, &tbase);
        pfd = tree_open_dir(t, parent, false, l->path, err);
        if (pfd == -ENOENT || (pfd >= 0 && fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0))
                return 0; /* replaced by a later entry of its layer */
        if (pfd < 0)
                return pfd;
        tfd = tree_open_dir(t, tparent, false, l->target, err);
        if (tfd >= 0 && fstatat(tfd, tbase, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) {
                if (layer_link_or_copy(t, tfd, tbase, pfd, base) < 0)
                        return cs_error_set(err, errno, "hard link `%s`", shown);
                own = meta_find(t, l->target);
                rec = own ? *own : (struct meta_rec){.mode = st.st_mode};
        } else {
                r = copy_from_lower(t, l->target, pfd, base, shown, &rec, err);
                if (r < 0)
                        return r;
        }
        rec.implicit = false;
        return meta_set(t, l->path, &rec, err);
}

int layer_tree_set_lowers(struct layer_tree *t, const int *layer_dirs, size_t n,
                          struct cs_error *err)
{
        struct meta_rec root;
        int r;

        lower_meta_free(t);
        cache_drop(t);
        t->lowers = layer_dirs;
        t->n_lowers = n;
        t->lower_meta = n ? calloc(n, sizeof(*t->lower_meta)) : NULL;
        if (n && !t->lower_meta)
                return cs_error_set(err, ENOMEM, "layer extraction");
        for (size_t i = 0; i < t->cap; i++) {
                struct meta_rec *m = &t->slots[i];

                if (m->path && m->implicit) {
                        inherit_dir(t, m->path, &root);
                        m->mode = root.mode;
                        m->uid = root.uid;
                        m->gid = root.gid;
                        m->mtime_set = root.mtime_set;
                        m->mtime_sec = root.mtime_sec;
                        m->mtime_nsec = root.mtime_nsec;
                }
        }
        /* the merged root takes its attributes from the top layer: keep the lower one's */
        if (!meta_find(t, ".") && n && inherit_dir(t, "", &root) &&
            (r = meta_set(t, ".", &root, err)) < 0)
                return r;
        for (size_t i = 0; i < t->n_pending; i++) {
                r = pending_resolve(t, &t->pending[i], err);
                if (r < 0)
                        return cs_error_wrap(err, "hard link `%s`", t->pending[i].path);
        }
        cache_drop(t);
        return 0;
}
