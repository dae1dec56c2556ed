/* A commit's tar form, streamed into its digest: headers, sorted xattrs, file data, and hard
 * links by inode (one file, then hard-link entries to its first name). */
#include "build-commit-ctx.h"

#include "../../common/cleanup.h"
#include "../../common/error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

la_ssize_t commit_tar_sink(struct archive *a, void *opaque, const void *buf, size_t len)
{
        struct commit_ctx *x = opaque;

        (void)a;
        EVP_DigestUpdate(x->md, buf, len);
        if (x->tap)
                x->tap(x->tap_opaque, buf, len);
        return (la_ssize_t)len;
}

static uint64_t link_hash(dev_t dev, ino_t ino)
{
        return ((uint64_t)ino * 0x9e3779b97f4a7c15ull) ^ (uint64_t)dev;
}

/* The first name of the file st (more than one name), or NULL after recording path as it. */
const char *commit_link_first(struct commit_ctx *x, const struct stat *st, const char *path)
{
        size_t i;

        if ((x->n_links + 1) * 2 > x->links_cap) {
                size_t ncap = x->links_cap ? x->links_cap * 2 : 256;
                struct link_rec *nl = calloc(ncap, sizeof(*nl));

                if (!nl)
                        return NULL; /* then a copy: still a correct layer */
                for (size_t j = 0; j < x->links_cap; j++) {
                        if (!x->links[j].path)
                                continue;
                        for (i = link_hash(x->links[j].dev, x->links[j].ino) & (ncap - 1);
                             nl[i].path; i = (i + 1) & (ncap - 1))
                                ;
                        nl[i] = x->links[j];
                }
                free(x->links);
                x->links = nl;
                x->links_cap = ncap;
        }
        for (i = link_hash(st->st_dev, st->st_ino) & (x->links_cap - 1); x->links[i].path;
             i = (i + 1) & (x->links_cap - 1))
                if (x->links[i].dev == st->st_dev && x->links[i].ino == st->st_ino)
                        return x->links[i].path;
        x->links[i] = (struct link_rec){st->st_dev, st->st_ino, strdup(path)};
        if (x->links[i].path)
                x->n_links++;
        return NULL;
}

static int name_ptr_cmp(const void *a, const void *b)
{
        return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The xattrs a step left on fd (file capabilities, ACLs, user.*; not the overlay's own),
 * sorted by name, into the tar entry: they are part of the layer, so of its diff_id. */
static int tar_xattrs(struct commit_ctx *x, int fd, const char *path)
{
        _cleanup_free_ char *list = malloc(XATTR_LIST_MAX_LEN);
        _cleanup_free_ char *value = malloc(XATTR_VALUE_MAX_LEN);
        _cleanup_free_ const char **names = NULL;
        ssize_t n = list ? flistxattr(fd, list, XATTR_LIST_MAX_LEN) : -1;
        size_t count = 0;

        if (!list || !value)
                return cs_error_set(x->err, ENOMEM, "xattrs of `%s`", path);
        if (n < 0)
                return errno == ENOTSUP ? 0 : cs_error_set(x->err, errno, "xattrs of `%s`", path);
        for (ssize_t i = 0; i < n; i += (ssize_t)strlen(list + i) + 1)
                count++;
        names = calloc(count + 1, sizeof(*names));
        if (!names)
                return cs_error_set(x->err, ENOMEM, "xattrs of `%s`", path);
        count = 0;
        for (ssize_t i = 0; i < n; i += (ssize_t)strlen(list + i) + 1)
                if (commit_layer_xattr(list + i))
                        names[count++] = list + i;
        qsort(names, count, sizeof(*names), name_ptr_cmp);
        for (size_t i = 0; i < count; i++) {
                ssize_t len = fgetxattr(fd, names[i], value, XATTR_VALUE_MAX_LEN);

                if (len < 0)
                        return cs_error_set(x->err, errno, "xattr %s of `%s`", names[i], path);
                archive_entry_xattr_add_entry(x->e, names[i], value, (size_t)len);
        }
        return 0;
}

int commit_tar_header(struct commit_ctx *x, const char *path, mode_t mode, uid_t uid, gid_t gid,
                      time_t mtime, int64_t size, const char *symlink, const char *hardlink,
                      int xattr_fd)
{
        archive_entry_clear(x->e);
        if (xattr_fd >= 0 && tar_xattrs(x, xattr_fd, path) < 0)
                return -1;
        archive_entry_set_pathname(x->e, path);
        archive_entry_set_mode(x->e, mode);
        archive_entry_set_uid(x->e, uid);
        archive_entry_set_gid(x->e, gid);
        archive_entry_set_mtime(x->e, mtime, 0);
        archive_entry_set_size(x->e, size);
        if (symlink)
                archive_entry_set_symlink(x->e, symlink);
        if (hardlink)
                archive_entry_set_hardlink(x->e, hardlink);
        if (archive_write_header(x->a, x->e) < ARCHIVE_WARN)
                return cs_error_setx(x->err, EIO, "the layer's tar, at `%s`: %s", path,
                                     archive_error_string(x->a));
        return 0;
}

int commit_tar_data(struct commit_ctx *x, int fd, int64_t size, const char *shown)
{
        for (int64_t left = size; left > 0;) {
                ssize_t n = read(fd, x->buf, left < COMMIT_BUF ? (size_t)left : COMMIT_BUF);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return cs_error_set(x->err, n < 0 ? errno : EIO, "read `%s`", shown);
                if (archive_write_data(x->a, x->buf, (size_t)n) < 0)
                        return cs_error_setx(x->err, EIO, "the layer's tar, at `%s`: %s", shown,
                                             archive_error_string(x->a));
                left -= n;
        }
        return 0;
}
