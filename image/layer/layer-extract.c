/* One tar entry onto the tree being unpacked (layer_apply): names, types, links, modes and
 * owners under the limits, each resolved beneath the tree's root by fd. */
#include "layer-private.h"

#include "../../common/cleanup.h"
#include "../../common/error.h"
#include "../../common/fileio.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

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

static void entry_rec(struct layer_tree *t, struct archive_entry *e, struct meta_rec *rec)
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
        if (t->add && t->add_opts.chown_set) {
                rec->uid = t->add_opts.uid;
                rec->gid = t->add_opts.gid;
        }
        if (t->add && t->add_opts.chmod_set)
                rec->mode = (rec->mode & S_IFMT) | (t->add_opts.chmod & 07777);
}

/* ADD: the owner set on the entry itself (a layer's owners go to its metadata file). */
static int own_at(struct layer_tree *t, int pfd, const char *base, const struct meta_rec *rec,
                  const char *shown, struct cs_error *err)
{
        if (t->add && fchownat(pfd, base, rec->uid, rec->gid, AT_SYMLINK_NOFOLLOW) < 0)
                return cs_error_set(err, errno, "entry `%s`: chown to %u:%u", shown, rec->uid,
                                    rec->gid);
        return 0;
}

static void apply_xattrs(struct layer_tree *t, struct archive_entry *e, int fd)
{
        const char *name;
        const void *value;
        size_t size;

        if (archive_entry_xattr_reset(e) == 0)
                return;
        while (archive_entry_xattr_next(e, &name, &value, &size) == ARCHIVE_OK)
                /* the overlay's own: an image may not fake whiteouts or opaque dirs */
                if (strncmp(name, "user.overlay.", 13) == 0 ||
                    strncmp(name, "trusted.overlay.", 16) == 0 ||
                    fsetxattr(fd, name, value, size, 0) < 0)
                        t->stats.skipped_xattrs++;
}

static int write_file(struct layer_tree *t, struct archive *a, struct archive_entry *e,
                      const struct meta_rec *rec, int pfd, const char *base, const char *shown,
                      struct cs_error *err)
{
        _cleanup_close_ int fd = -1;
        int64_t size = archive_entry_size(e);
        const void *buf;
        size_t len;
        la_int64_t off;
        int r;

        if (size < 0)
                size = 0;
        if ((uint64_t)size > layer_budget_left(t))
                return cs_error_setx(
                    err, EFBIG,
                    "entry `%s` (%lld bytes) would take the image beyond the limit "
                    "of %llu unpacked bytes (--max-size)",
                    shown, (long long)size, (unsigned long long)t->lim.max_size);
        t->stats.size += (uint64_t)size;
        if (t->add) /* a layer's stream counts its bytes as it is read */
                atomic_fetch_add(&t->budget->stream, (uint64_t)size);
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
        /* the owner first: chown clears setuid and setgid */
        if (t->add && fchown(fd, rec->uid, rec->gid) < 0)
                return cs_error_set(err, errno, "entry `%s`: chown to %u:%u", shown, rec->uid,
                                    rec->gid);
        if (layer_fchmod(fd, rec->mode & 07777) < 0)
                return cs_error_set(err, errno, "entry `%s`: chmod", shown);
        if (rec->mtime_set) {
                struct timespec ts[2] = {{.tv_nsec = UTIME_OMIT},
                                         {.tv_sec = rec->mtime_sec, .tv_nsec = rec->mtime_nsec}};
                (void)futimens(fd, ts);
        }
        return 0;
}

bool is_whiteout(const struct stat *st)
{
        return S_ISCHR(st->st_mode) && st->st_rdev == makedev(0, 0);
}

/* user.overlay.opaque="y" on the directory pfd/base ("" for pfd itself): lower layers'
 * entries of it stay hidden, this layer's show. */
static int make_opaque(int pfd, const char *base, const char *shown, struct cs_error *err)
{
        _cleanup_close_ int fd =
            openat(pfd, *base ? base : ".", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

        if (fd < 0 || fsetxattr(fd, "user.overlay.opaque", "y", 1, 0) < 0)
                return cs_error_set(err, errno,
                                    "opaque directory `%s`: set the xattr user.overlay.opaque "
                                    "(the image store's filesystem must support user xattrs)",
                                    shown);
        return 0;
}

/* Whiteouts hide what the lower layers hold; an entry of this layer itself is never hidden
 * by its own layer's whiteout, in whichever order the tar lists them. */
static int apply_whiteout(struct layer_tree *t, const char *parent, const char *base,
                          const char *shown, struct cs_error *err)
{
        _cleanup_free_ char *victim = NULL;
        _cleanup_close_ int pfd = -1;
        const char *name = base + 4;
        struct stat st;

        if (strcmp(base, ".wh..wh..opq") == 0) {
                pfd = tree_open_dir(t, parent, true, shown, err);
                return pfd < 0 ? pfd : make_opaque(pfd, "", shown, err);
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
                return 0;
        pfd = tree_open_dir(t, parent, true, shown, err);
        if (pfd < 0)
                return pfd;
        if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
                return 0; /* a directory made for this layer's own entries, or a whiteout */
        if (mknodat(pfd, name, S_IFCHR, makedev(0, 0)) < 0)
                return cs_error_set(err, errno,
                                    "whiteout `%s`: create the overlay whiteout (a 0/0 character "
                                    "device, which an unprivileged user may make on Linux 5.8 or "
                                    "later, on a filesystem mounted without nodev restrictions "
                                    "for it)",
                                    shown);
        return 0;
}

int layer_tree_add_entry(struct layer_tree *t, struct archive *a, struct archive_entry *e,
                         struct cs_error *err)
{
        return apply_entry(t, a, e, err);
}

int apply_entry(struct layer_tree *t, struct archive *a, struct archive_entry *e,
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
        /* ADD takes an absolute name under the destination, as docker does */
        while (t->add && name && *name == '/')
                name++;
        if (t->add && (!name || !*name))
                return 0;
        t->stats.entries++;
        if (atomic_fetch_add(&t->budget->entries, 1) + 1 > t->lim.max_entries)
                return cs_error_setx(err, E2BIG,
                                     "the image has more than %llu entries (--max-entries)",
                                     (unsigned long long)t->lim.max_entries);
        r = layer_path_normalize(name, t->lim.max_path, &rel, err);
        if (r < 0)
                return r;
        entry_rec(t, e, &rec);
        if (!*rel && t->add)
                return 0; /* the destination itself is the copy's, not the archive's */
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
        if (!t->add && strncmp(base, ".wh.", 4) == 0)
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

                while (t->add && *hardlink == '/')
                        hardlink++;
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
                if (tfd < 0 && tfd != -ENOENT)
                        return cs_error_wrap(err, "hard link `%s`", shown);
                if (t->add && (tfd < 0 || fstatat(tfd, tbase, &st, AT_SYMLINK_NOFOLLOW) < 0))
                        return cs_error_setx(err, ENOENT,
                                             "hard link `%s` names no file of the destination "
                                             "(an archive may only link to its earlier entries)",
                                             shown);
                if (tfd < 0 || fstatat(tfd, tbase, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                    is_whiteout(&st)) {
                        /* an overlay layer cannot link into another: the file is copied
                         * once the lower layers are known (layer_tree_set_lowers) */
                        r = replace_existing(t, pfd, base, false, &is_dir, err);
                        if (r == 0)
                                r = pending_link_add(t, key, tkey, err);
                        return r < 0 ? r : meta_set(t, key, &rec, err);
                }
                if (S_ISDIR(st.st_mode))
                        return cs_error_setx(err, ENOENT,
                                             "hard link `%s`: its target `%s` is a directory",
                                             shown, tkey);
                if (fstatat(pfd, base, &cur, AT_SYMLINK_NOFOLLOW) == 0 && cur.st_ino == st.st_ino &&
                    cur.st_dev == st.st_dev)
                        return 0;
                r = replace_existing(t, pfd, base, false, &is_dir, err);
                if (r == 0 && layer_link_or_copy(t, tfd, tbase, pfd, base) < 0)
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
                        r = write_file(t, a, e, &rec, pfd, base, shown, err);
                break;
        case AE_IFDIR: {
                _cleanup_close_ int dfd = -1;
                struct stat old;
                /* this layer's whiteout, then the directory: nothing lower shows in it */
                bool opaque =
                    fstatat(pfd, base, &old, AT_SYMLINK_NOFOLLOW) == 0 && is_whiteout(&old);

                r = replace_existing(t, pfd, base, true, &is_dir, err);
                if (r < 0)
                        break;
                if (!is_dir && mkdirat(pfd, base, 0700) < 0) {
                        r = cs_error_set(err, errno, "entry `%s`: create the directory", shown);
                        break;
                }
                if (opaque && !t->add && (r = make_opaque(pfd, base, shown, err)) < 0)
                        break;
                if ((r = own_at(t, pfd, base, &rec, shown, err)) < 0)
                        break;
                /* u+rwx until the end, so later entries can be written into it */
                if (layer_fchmodat(pfd, base, (rec.mode & 07777) | 0700) < 0) {
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
                if ((r = own_at(t, pfd, base, &rec, shown, err)) < 0)
                        break;
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
