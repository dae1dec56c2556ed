#include "layer.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#define IO_BUF (256u << 10)

/* What the image says about one path; the tree on disk is owned by the caller. */
struct meta_rec {
        char *path;
        uint32_t uid, gid, mode;
        uint32_t layer; /* the layer that last created it: whiteouts only hide lower layers */
        int64_t mtime_sec;
        int32_t mtime_nsec;
        bool mtime_set;
};

struct layer_tree {
        int root_fd;
        struct layer_limits lim;
        struct layer_stats stats;
        uint64_t stream_total; /* uncompressed bytes over all layers, against lim.max_size */
        uint32_t layer;
        struct meta_rec *slots;
        size_t cap, n;
        /* The parent directory of the previous entry: tars list siblings together. */
        char *cache_path;
        int cache_fd;
        char *buf;
};

/* The decompression pipeline: blob bytes -> libarchive raw format (gunzip/unzstd) ->
 * hashed and counted -> libarchive tar reader. */
struct layer_pipe {
        layer_read_fn read;
        void *opaque;
        struct cs_error *err;
        bool input_failed, limit_hit, raw_eof;
        struct archive *raw;
        EVP_MD_CTX *md;
        uint64_t bytes, budget;
        unsigned char inbuf[IO_BUF];
};

/* ---- the ownership table: path -> what the image recorded ---- */

static uint64_t path_hash(const char *s)
{
        uint64_t h = 1469598103934665603ull;

        for (; *s; s++)
                h = (h ^ (unsigned char)*s) * 1099511628211ull;
        return h;
}

static struct meta_rec *meta_find(struct layer_tree *t, const char *path)
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

static int meta_set(struct layer_tree *t, const char *path, const struct meta_rec *v,
                    struct cs_error *err)
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

static bool created_in_this_layer(struct layer_tree *t, const char *path)
{
        struct meta_rec *r = meta_find(t, path);

        return r && r->layer == t->layer;
}

/* ---- tree operations, all relative to directory fds ---- */

int layer_tree_new(int root_fd, const struct layer_limits *lim, struct layer_tree **ret,
                   struct cs_error *err)
{
        struct layer_tree *t = calloc(1, sizeof(*t));

        if (!t || !(t->buf = malloc(IO_BUF))) {
                free(t);
                return cs_error_set(err, ENOMEM, "layer extraction");
        }
        t->root_fd = root_fd;
        t->lim = *lim;
        t->cache_fd = -1;
        *ret = t;
        return 0;
}

static void cache_drop(struct layer_tree *t)
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
        for (size_t i = 0; i < t->cap; i++)
                free(t->slots[i].path);
        free(t->slots);
        free(t->buf);
        free(t);
}

const struct layer_stats *layer_tree_stats(const struct layer_tree *t)
{
        return &t->stats;
}

/* Open (O_PATH) the directory at rel under the rootfs without following any symlink;
 * missing directories are created when create is set (they get the default image
 * ownership: root, 0755). Returns a new fd the caller closes, or < 0 (-ENOENT without a
 * message when a directory is missing and create is not set). */
static int tree_dup(int fd, struct cs_error *err)
{
        int r = fcntl(fd, F_DUPFD_CLOEXEC, 3);

        return r < 0 ? cs_error_set(err, errno, "dup a directory fd") : r;
}

static int tree_open_dir(struct layer_tree *t, const char *rel, bool create, const char *entry,
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
                        struct meta_rec rec = {.mode = S_IFDIR | 0755};
                        int r;

                        if (mkdirat(cur, comp, 0755) < 0 && errno != EEXIST)
                                return cs_error_set(err, errno, "entry `%s`: create `%s`", shown,
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
                                    "entry `%s`: `%s` is a symlink; an image entry "
                                    "may not be written through a symlink (it "
                                    "could point outside the rootfs)",
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

static void split_path(char *rel, const char **ret_parent, const char **ret_base)
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

static char *join_path(const char *parent, const char *base)
{
        char *s = NULL;

        if (asprintf(&s, "%s%s%s", parent, *parent ? "/" : "", base) < 0)
                return NULL;
        return s;
}

/* Remove whatever is at base (a lower layer's file, or an earlier entry) so the new entry
 * replaces it; directories go recursively and invalidate the parent cache. */
static int replace_existing(struct layer_tree *t, int pfd, const char *base, bool keep_dir,
                            bool *ret_is_dir, struct cs_error *err)
{
        struct stat st;

        *ret_is_dir = false;
        if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                if (errno == ENOENT)
                        return 0;
                return cs_error_set(err, errno, "stat `%s`", base);
        }
        if (S_ISDIR(st.st_mode)) {
                if (keep_dir) {
                        *ret_is_dir = true;
                        return 0;
                }
                cache_drop(t); /* the cached directory may be inside what goes */
        }
        return cs_remove_at(pfd, base, err);
}

static void entry_rec(struct archive_entry *e, struct meta_rec *rec)
{
        memset(rec, 0, sizeof(*rec));
        rec->uid = (uint32_t)archive_entry_uid(e);
        rec->gid = (uint32_t)archive_entry_gid(e);
        rec->mode = (uint32_t)archive_entry_mode(e);
        if (archive_entry_mtime_is_set(e)) {
                rec->mtime_set = true;
                rec->mtime_sec = archive_entry_mtime(e);
                rec->mtime_nsec = (int32_t)archive_entry_mtime_nsec(e);
        }
}

static void apply_xattrs(struct layer_tree *t, struct archive_entry *e, int fd)
{
        const char *name;
        const void *value;
        size_t size;

        if (archive_entry_xattr_reset(e) == 0)
                return;
        while (archive_entry_xattr_next(e, &name, &value, &size) == ARCHIVE_OK)
                if (fsetxattr(fd, name, value, size, 0) < 0)
                        t->stats.skipped_xattrs++;
}

static int write_file(struct layer_tree *t, struct archive *a, struct archive_entry *e, int pfd,
                      const char *base, const char *shown, struct cs_error *err)
{
        _cleanup_close_ int fd = -1;
        int64_t size = archive_entry_size(e);
        const void *buf;
        size_t len;
        la_int64_t off;
        int r;

        if (size < 0)
                size = 0;
        if ((uint64_t)size > t->lim.max_size - t->stats.size)
                return cs_error_setx(
                    err, EFBIG,
                    "entry `%s` (%lld bytes) would take the image beyond the limit "
                    "of %llu unpacked bytes (--max-size)",
                    shown, (long long)size, (unsigned long long)t->lim.max_size);
        t->stats.size += (uint64_t)size;
        fd = openat(pfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return cs_error_set(err, errno, "entry `%s`: create the file", shown);
        for (;;) {
                r = archive_read_data_block(a, &buf, &len, &off);
                if (r == ARCHIVE_EOF)
                        break;
                if (r < ARCHIVE_WARN)
                        return -EIO; /* reported by the caller, which knows the pipeline */
                if (off < 0 || (uint64_t)off + len > (uint64_t)size)
                        return cs_error_setx(err, EINVAL,
                                             "entry `%s`: data beyond the entry's declared size",
                                             shown);
                for (size_t done = 0; done < len;) {
                        ssize_t n =
                            pwrite(fd, (const char *)buf + done, len - done, off + (off_t)done);
                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n < 0)
                                return cs_error_set(err, errno, "entry `%s`: write", shown);
                        done += (size_t)n;
                }
        }
        if (ftruncate(fd, size) < 0)
                return cs_error_set(err, errno, "entry `%s`: set the size", shown);
        if (archive_entry_xattr_count(e) > 0)
                apply_xattrs(t, e, fd);
        if (fchmod(fd, archive_entry_perm(e) & 07777) < 0)
                return cs_error_set(err, errno, "entry `%s`: chmod", shown);
        if (archive_entry_mtime_is_set(e)) {
                struct timespec ts[2] = {
                    {.tv_nsec = UTIME_OMIT},
                    {.tv_sec = archive_entry_mtime(e), .tv_nsec = archive_entry_mtime_nsec(e)}};
                (void)futimens(fd, ts);
        }
        return 0;
}

static int apply_whiteout(struct layer_tree *t, const char *parent, const char *base,
                          const char *shown, struct cs_error *err)
{
        _cleanup_free_ char *victim = NULL;
        const char *name = base + 4;
        int pfd, r;

        if (strcmp(base, ".wh..wh..opq") == 0) {
                _cleanup_closedir_ DIR *d = NULL;
                _cleanup_close_ int ofd = -1;
                struct dirent *de;
                int fd;

                ofd = pfd = tree_open_dir(t, parent, false, shown, err);
                if (pfd == -ENOENT)
                        return 0;
                if (pfd < 0)
                        return pfd;
                fd = openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (fd < 0 || !(d = fdopendir(fd))) {
                        if (fd >= 0)
                                close(fd);
                        return cs_error_set(err, errno, "opaque directory `%s`", shown);
                }
                cache_drop(t);
                while ((errno = 0, de = readdir(d))) {
                        _cleanup_free_ char *child = NULL;
                        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                                continue;
                        child = join_path(parent, de->d_name);
                        if (!child)
                                return cs_error_set(err, ENOMEM, "opaque directory `%s`", shown);
                        if (created_in_this_layer(t, child))
                                continue;
                        r = cs_remove_at(dirfd(d), de->d_name, err);
                        if (r < 0)
                                return cs_error_wrap(err, "opaque directory `%s`", shown);
                }
                if (errno)
                        return cs_error_set(err, errno, "opaque directory `%s`", shown);
                return 0;
        }
        if (strncmp(base, ".wh..wh.", 8) == 0)
                return 0; /* aufs bookkeeping (.wh..wh.plnk, .wh..wh.aufs), not a whiteout */
        if (!*name || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
                return cs_error_setx(err, EPERM,
                                     "whiteout `%s` names `%s`, which is not a removable entry "
                                     "(it could reach outside the rootfs)",
                                     shown, name);
        victim = join_path(parent, name);
        if (!victim)
                return cs_error_set(err, ENOMEM, "whiteout `%s`", shown);
        if (created_in_this_layer(t, victim))
                return 0; /* a whiteout hides lower layers, never its own layer's entries */
        pfd = tree_open_dir(t, parent, false, shown, err);
        if (pfd == -ENOENT)
                return 0;
        if (pfd < 0)
                return pfd;
        cache_drop(t);
        r = cs_remove_at(pfd, name, err);
        close(pfd);
        return r < 0 ? cs_error_wrap(err, "whiteout `%s`", shown) : 0;
}

static int apply_entry(struct layer_tree *t, struct archive *a, struct archive_entry *e,
                       struct cs_error *err)
{
        _cleanup_free_ char *rel = NULL, *key = NULL;
        const char *name = archive_entry_pathname(e);
        const char *hardlink = archive_entry_hardlink(e);
        const char *parent, *base;
        char shown[256];
        struct meta_rec rec;
        mode_t type = archive_entry_filetype(e);
        _cleanup_close_ int pfd = -1;
        bool is_dir;
        int r;

        if (!name)
                name = archive_entry_pathname_utf8(e);
        layer_sanitize(name, shown, sizeof(shown));
        if (++t->stats.entries > t->lim.max_entries)
                return cs_error_setx(err, E2BIG,
                                     "the image has more than %llu entries (--max-entries)",
                                     (unsigned long long)t->lim.max_entries);
        r = layer_path_normalize(name, t->lim.max_path, &rel, err);
        if (r < 0)
                return r;
        entry_rec(e, &rec);
        if (!*rel) {
                /* the root itself ("./"): only its metadata matters */
                if (type == AE_IFDIR && !hardlink)
                        return meta_set(t, ".", &rec, err);
                return cs_error_setx(err, EINVAL, "entry `%s` names the rootfs itself", shown);
        }
        key = strdup(rel);
        if (!key)
                return cs_error_set(err, ENOMEM, "entry `%s`", shown);
        split_path(rel, &parent, &base);
        if (strncmp(base, ".wh.", 4) == 0)
                return apply_whiteout(t, parent, base, shown, err);

        if (!hardlink && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK) {
                t->stats
                    .skipped_devices++; /* devices, fifos, sockets: not creatable unprivileged */
                return 0;
        }
        pfd = tree_open_dir(t, parent, true, name, err);
        if (pfd == -ENOENT)
                return cs_error_setx(err, ENOENT, "entry `%s`: its directory vanished", shown);
        if (pfd < 0)
                return pfd;

        if (hardlink) {
                _cleanup_free_ char *target = NULL, *tkey = NULL;
                const char *tparent, *tbase;
                struct meta_rec *trec;
                struct stat st, cur;
                _cleanup_close_ int tfd = -1;

                r = layer_path_normalize(hardlink, t->lim.max_path, &target, err);
                if (r < 0)
                        return cs_error_wrap(err, "hard link `%s`", shown);
                if (!*target)
                        return cs_error_setx(err, EPERM, "hard link `%s` points at the rootfs",
                                             shown);
                tkey = strdup(target);
                if (!tkey)
                        return cs_error_set(err, ENOMEM, "entry `%s`", shown);
                split_path(target, &tparent, &tbase);
                tfd = tree_open_dir(t, tparent, false, hardlink, err);
                if (tfd < 0) {
                        if (tfd == -ENOENT)
                                return cs_error_setx(err, ENOENT,
                                                     "hard link `%s`: its target `%s` does not "
                                                     "exist in the rootfs",
                                                     shown, tkey);
                        return cs_error_wrap(err, "hard link `%s`", shown);
                }
                if (fstatat(tfd, tbase, &st, AT_SYMLINK_NOFOLLOW) < 0 || S_ISDIR(st.st_mode))
                        return cs_error_setx(err, ENOENT,
                                             "hard link `%s`: its target `%s` is not a file in "
                                             "the rootfs",
                                             shown, tkey);
                if (fstatat(pfd, base, &cur, AT_SYMLINK_NOFOLLOW) == 0 && cur.st_ino == st.st_ino &&
                    cur.st_dev == st.st_dev)
                        return 0;
                r = replace_existing(t, pfd, base, false, &is_dir, err);
                if (r == 0 && linkat(tfd, tbase, pfd, base, 0) < 0)
                        r = cs_error_set(err, errno, "hard link `%s` to `%s`", shown, tkey);
                if (r < 0)
                        return r;
                trec = meta_find(t, tkey);
                if (trec)
                        rec = *trec;
                return meta_set(t, key, &rec, err);
        }

        switch (type) {
        case AE_IFREG:
                r = replace_existing(t, pfd, base, false, &is_dir, err);
                if (r == 0)
                        r = write_file(t, a, e, pfd, base, shown, err);
                break;
        case AE_IFDIR: {
                _cleanup_close_ int dfd = -1;

                r = replace_existing(t, pfd, base, true, &is_dir, err);
                if (r < 0)
                        break;
                if (!is_dir && mkdirat(pfd, base, 0700) < 0) {
                        r = cs_error_set(err, errno, "entry `%s`: create the directory", shown);
                        break;
                }
                /* u+rwx until the end, so later entries can be written into it */
                if (fchmodat(pfd, base, (archive_entry_perm(e) & 07777) | 0700, 0) < 0) {
                        r = cs_error_set(err, errno, "entry `%s`: chmod", shown);
                        break;
                }
                if (archive_entry_xattr_count(e) > 0) {
                        dfd = openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (dfd >= 0)
                                apply_xattrs(t, e, dfd);
                }
                break;
        }
        case AE_IFLNK: {
                const char *target = archive_entry_symlink(e);

                if (!target)
                        target = archive_entry_symlink_utf8(e);
                if (!target || strlen(target) > t->lim.max_path) {
                        r = cs_error_setx(err, ENAMETOOLONG,
                                          "symlink `%s` has a missing or too long target", shown);
                        break;
                }
                r = replace_existing(t, pfd, base, false, &is_dir, err);
                if (r < 0)
                        break;
                if (symlinkat(target, pfd, base) < 0) {
                        r = cs_error_set(err, errno, "entry `%s`: create the symlink", shown);
                        break;
                }
                if (rec.mtime_set) {
                        struct timespec ts[2] = {
                            {.tv_nsec = UTIME_OMIT},
                            {.tv_sec = rec.mtime_sec, .tv_nsec = rec.mtime_nsec}};
                        (void)utimensat(pfd, base, ts, AT_SYMLINK_NOFOLLOW);
                }
                break;
        }
        default:
                r = 0;
        }
        if (r < 0)
                return r;
        return meta_set(t, key, &rec, err);
}

static la_ssize_t raw_read_cb(struct archive *a, void *opaque, const void **buf)
{
        struct layer_pipe *p = opaque;
        ssize_t n = p->read(p->opaque, p->inbuf, sizeof(p->inbuf), p->err);

        if (n < 0) {
                p->input_failed = true;
                archive_set_error(a, EIO, "reading the blob failed");
                return -1;
        }
        *buf = p->inbuf;
        return n;
}

static la_ssize_t tar_read_cb(struct archive *a, void *opaque, const void **buf)
{
        struct layer_pipe *p = opaque;
        size_t len;
        la_int64_t off;
        int r;

        if (p->raw_eof)
                return 0;
        r = archive_read_data_block(p->raw, buf, &len, &off);
        if (r == ARCHIVE_EOF) {
                p->raw_eof = true;
                return 0;
        }
        if (r < ARCHIVE_WARN) {
                archive_set_error(a, EIO, "decompression failed");
                return -1;
        }
        p->bytes += len;
        if (p->bytes > p->budget) {
                p->limit_hit = true;
                archive_set_error(a, EFBIG, "over the size limit");
                return -1;
        }
        EVP_DigestUpdate(p->md, *buf, len);
        return (la_ssize_t)len;
}

static const char *compression_name(int c)
{
        return c == OCI_COMPRESSION_GZIP   ? "gzip"
               : c == OCI_COMPRESSION_ZSTD ? "zstd"
                                           : "uncompressed";
}

/* Turn a libarchive failure into the error that caused it: the blob read, the size limit,
 * or the archive's own complaint. */
static int pipe_error(struct layer_tree *t, struct layer_pipe *p, struct archive *a,
                      const char *what, const char *stage, struct cs_error *err)
{
        if (p->input_failed)
                return cs_error_wrap(err, "%s", what);
        if (p->limit_hit)
                return cs_error_setx(err, EFBIG,
                                     "%s expands beyond the limit of %llu unpacked bytes for the "
                                     "image (a decompression bomb?); raise --max-size if the image "
                                     "is really that large",
                                     what, (unsigned long long)t->lim.max_size);
        return cs_error_setx(err, EINVAL, "%s: %s: %s", what, stage,
                             archive_error_string(a) ? archive_error_string(a) : "corrupt data");
}

int layer_apply(struct layer_tree *t, const char *what, int expect, layer_read_fn read,
                void *opaque, unsigned char ret_diff_id[32], struct cs_error *err)
{
        struct layer_pipe *p = NULL;
        struct archive *tar = NULL;
        struct archive_entry *e;
        unsigned int mdlen = 32;
        int r, found;

        if (t->layer + 1 > t->lim.max_layers)
                return cs_error_setx(err, E2BIG,
                                     "the image has more than %zu layers (--max-layers)",
                                     t->lim.max_layers);
        t->layer++;
        cache_drop(t);
        p = calloc(1, sizeof(*p));
        if (!p || !(p->md = EVP_MD_CTX_new()) || !EVP_DigestInit_ex(p->md, EVP_sha256(), NULL)) {
                r = cs_error_set(err, ENOMEM, "%s", what);
                goto out;
        }
        p->read = read;
        p->opaque = opaque;
        p->err = err;
        p->budget = t->lim.max_size - t->stream_total;
        p->raw = archive_read_new();
        tar = archive_read_new();
        if (!p->raw || !tar) {
                r = cs_error_set(err, ENOMEM, "%s", what);
                goto out;
        }
        archive_read_support_filter_gzip(p->raw);
        archive_read_support_filter_zstd(p->raw);
        archive_read_support_format_raw(p->raw);
        if (archive_read_open(p->raw, p, NULL, raw_read_cb, NULL) != ARCHIVE_OK ||
            archive_read_next_header(p->raw, &e) != ARCHIVE_OK) {
                r = pipe_error(t, p, p->raw, what, "decompress", err);
                goto out;
        }
        switch (archive_filter_code(p->raw, 0)) {
        case ARCHIVE_FILTER_GZIP:
                found = OCI_COMPRESSION_GZIP;
                break;
        case ARCHIVE_FILTER_ZSTD:
                found = OCI_COMPRESSION_ZSTD;
                break;
        default:
                found = OCI_COMPRESSION_NONE;
        }
        if (expect >= 0 && found != expect) {
                r = cs_error_setx(err, EINVAL, "%s: the blob is %s but its media type says %s",
                                  what, compression_name(found), compression_name(expect));
                goto out;
        }
        archive_read_support_format_tar(tar);
        if (archive_read_open(tar, p, NULL, tar_read_cb, NULL) != ARCHIVE_OK) {
                r = pipe_error(t, p, tar, what, "read the tar", err);
                goto out;
        }
        for (;;) {
                r = archive_read_next_header(tar, &e);
                if (r == ARCHIVE_EOF)
                        break;
                if (r < ARCHIVE_WARN) {
                        r = pipe_error(t, p, tar, what, "read the tar", err);
                        goto out;
                }
                r = apply_entry(t, tar, e, err);
                if (r == -EIO) {
                        r = pipe_error(t, p, tar, what, "read an entry's data", err);
                        goto out;
                }
                if (r < 0) {
                        r = cs_error_wrap(err, "%s", what);
                        goto out;
                }
        }
        /* the diff_id covers the whole stream, including padding after the end marker */
        for (;;) {
                const void *buf;
                la_ssize_t n = tar_read_cb(tar, p, &buf);

                if (n < 0) {
                        r = pipe_error(t, p, tar, what, "read the end of the tar", err);
                        goto out;
                }
                if (n == 0)
                        break;
        }
        t->stream_total += p->bytes;
        EVP_DigestFinal_ex(p->md, ret_diff_id, &mdlen);
        r = 0;
out:
        cache_drop(t);
        if (tar)
                archive_read_free(tar);
        if (p) {
                if (p->raw)
                        archive_read_free(p->raw);
                EVP_MD_CTX_free(p->md);
                free(p);
        }
        return r;
}

/* ---- the final pass ---- */

struct finish_ctx {
        struct layer_tree *t;
        FILE *meta;
        char *path; /* grows as the walk descends */
        size_t path_cap;
        struct cs_error *err;
};

static int meta_line(struct finish_ctx *c, const char *path, const struct stat *st,
                     const struct meta_rec *rec)
{
        char esc[4 * 4096 + 8];
        uint32_t mode = rec ? (rec->mode & 07777) | (st->st_mode & S_IFMT) : st->st_mode;

        if (layer_path_escape(path, esc, sizeof(esc)) < 0)
                return cs_error_setx(c->err, ENAMETOOLONG, "metadata: path too long");
        if (fprintf(c->meta, "%o %u %u %s\n", mode, rec ? rec->uid : 0, rec ? rec->gid : 0, esc) <
            0)
                return cs_error_set(c->err, errno, "write the image metadata");
        return 0;
}

static int finish_dir(struct finish_ctx *c, int dfd, size_t plen)
{
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        if (fd < 0 || !(d = fdopendir(fd))) {
                if (fd >= 0)
                        close(fd);
                return cs_error_set(c->err, errno, "read `%s`", plen ? c->path : ".");
        }
        while ((errno = 0, de = readdir(d))) {
                size_t nlen = strlen(de->d_name), np = plen + (plen ? 1 : 0) + nlen;
                struct meta_rec *rec;
                struct stat st;
                int r;

                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (np + 1 > c->path_cap) {
                        char *nb = realloc(c->path, np + 256);
                        if (!nb)
                                return cs_error_set(c->err, ENOMEM, "metadata");
                        c->path = nb;
                        c->path_cap = np + 256;
                }
                if (plen)
                        c->path[plen] = '/';
                memcpy(c->path + plen + (plen ? 1 : 0), de->d_name, nlen + 1);
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        return cs_error_set(c->err, errno, "stat `%s`", c->path);
                rec = meta_find(c->t, c->path);
                c->t->stats.files++;
                r = meta_line(c, c->path, &st, rec);
                if (r < 0)
                        return r;
                if (S_ISDIR(st.st_mode)) {
                        _cleanup_close_ int sub = openat(
                            dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (sub < 0)
                                return cs_error_set(c->err, errno, "open `%s`", c->path);
                        r = finish_dir(c, sub, np);
                        if (r < 0)
                                return r;
                        if (rec) {
                                struct timespec ts[2] = {
                                    {.tv_nsec = UTIME_OMIT},
                                    {.tv_sec = rec->mtime_sec, .tv_nsec = rec->mtime_nsec}};
                                if (fchmod(sub, rec->mode & 07777) < 0)
                                        return cs_error_set(c->err, errno, "chmod `%s`", c->path);
                                if (rec->mtime_set)
                                        (void)futimens(sub, ts);
                        }
                        c->path[plen] = '\0';
                }
        }
        if (errno)
                return cs_error_set(c->err, errno, "read `%s`", plen ? c->path : ".");
        return 0;
}

int layer_tree_finish(struct layer_tree *t, int meta_fd, struct cs_error *err)
{
        struct finish_ctx c = {.t = t, .err = err};
        struct meta_rec *root = meta_find(t, ".");
        struct stat st;
        int fd, r;

        fd = dup(meta_fd);
        if (fd < 0 || !(c.meta = fdopen(fd, "w"))) {
                if (fd >= 0)
                        close(fd);
                return cs_error_set(err, errno, "write the image metadata");
        }
        c.path_cap = 4096;
        c.path = calloc(1, c.path_cap);
        t->stats.files = 0;
        if (!c.path) {
                r = cs_error_set(err, ENOMEM, "metadata");
                goto out;
        }
        if (fstat(t->root_fd, &st) < 0) {
                r = cs_error_set(err, errno, "stat the rootfs");
                goto out;
        }
        r = meta_line(&c, ".", &st, root);
        if (r == 0)
                r = finish_dir(&c, t->root_fd, 0);
        if (r == 0 && root && root->mtime_set) {
                struct timespec ts[2] = {{.tv_nsec = UTIME_OMIT},
                                         {.tv_sec = root->mtime_sec, .tv_nsec = root->mtime_nsec}};
                (void)futimens(t->root_fd, ts);
        }
        if (r == 0 && fflush(c.meta) != 0)
                r = cs_error_set(err, errno, "write the image metadata");
out:
        free(c.path);
        if (fclose(c.meta) != 0 && r == 0)
                r = cs_error_set(err, errno, "write the image metadata");
        return r;
}
