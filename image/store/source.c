#include "source.h"

#include "../layer/layer.h"

#include "../../common/cleanup.h"
#include "../../common/error.h"
#include "../../common/fileio.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MEMBER_LINK_HOPS 8

int source_open(const char *path, bool is_tar, struct image_source *ret, struct cs_error *err)
{
        struct image_source s = {.is_tar = is_tar, .dir_fd = -1, .member_fd = -1};

        if (is_tar) {
                s.tar_path = strdup(path);
                if (!s.tar_path)
                        return cs_error_set(err, ENOMEM, "%s", path);
        } else {
                s.dir_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (s.dir_fd < 0)
                        return cs_error_set(err, errno, "open the image layout `%s`", path);
        }
        *ret = s;
        return 0;
}

void source_close(struct image_source *s)
{
        if (s->a)
                archive_read_free(s->a);
        s->a = NULL;
        if (s->member_fd >= 0)
                close(s->member_fd);
        s->member_fd = -1;
        if (s->dir_fd >= 0)
                close(s->dir_fd);
        s->dir_fd = -1;
        free(s->tar_path);
        s->tar_path = NULL;
}

/* Resolve a symlink target relative to the member's directory, lexically, inside the
 * archive. */
static int member_link_target(const char *member, const char *target, char **ret,
                              struct cs_error *err)
{
        _cleanup_free_ char *joined = NULL;
        char *out, *o, *p;
        const char *slash = strrchr(member, '/');

        if (target[0] == '/')
                target++;
        else if (slash && asprintf(&joined, "%.*s/%s", (int)(slash - member), member, target) < 0)
                return cs_error_set(err, ENOMEM, "archive member `%s`", member);
        if (!joined && !(joined = strdup(target)))
                return cs_error_set(err, ENOMEM, "archive member `%s`", member);
        out = calloc(1, strlen(joined) + 1);
        if (!out)
                return cs_error_set(err, ENOMEM, "archive member `%s`", member);
        o = out;
        for (p = strtok(joined, "/"); p; p = strtok(NULL, "/")) {
                if (strcmp(p, ".") == 0)
                        continue;
                if (strcmp(p, "..") == 0) {
                        char *up = strrchr(out, '/');
                        if (o == out) {
                                free(out);
                                return cs_error_setx(err, EPERM,
                                                     "archive member `%.200s` links outside the "
                                                     "archive",
                                                     member);
                        }
                        o = up ? up : out;
                        *o = '\0';
                        continue;
                }
                if (o != out)
                        *o++ = '/';
                o = stpcpy(o, p);
        }
        *ret = out;
        return 0;
}

static int tar_open(struct image_source *s, struct cs_error *err)
{
        if (s->a)
                archive_read_free(s->a);
        s->a = archive_read_new();
        if (!s->a)
                return cs_error_set(err, ENOMEM, "%s", s->tar_path);
        archive_read_support_format_tar(s->a);
        if (archive_read_open_filename(s->a, s->tar_path, 1 << 16) != ARCHIVE_OK)
                return cs_error_setx(err, EINVAL, "open the archive `%s`: %s", s->tar_path,
                                     archive_error_string(s->a));
        return 0;
}

int source_open_member(struct image_source *s, const char *member, struct cs_error *err)
{
        _cleanup_free_ char *want = NULL;
        int hops = 0, r;

        if (!s->is_tar) {
                int fd;
                struct stat st;

                if (s->member_fd >= 0)
                        close(s->member_fd);
                s->member_fd = -1;
                fd = source_open_in_root(s->dir_fd, member, O_RDONLY, err);
                if (fd < 0)
                        return fd == -ENOENT
                                   ? cs_error_setx(err, ENOENT, "`%s` is missing from the image",
                                                   member)
                                   : fd;
                if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                        close(fd);
                        return cs_error_setx(err, EINVAL, "`%s` is not a regular file", member);
                }
                s->member_fd = fd;
                return 0;
        }
        r = layer_path_normalize(member, MEMBER_PATH_MAX, &want, err);
        if (r < 0)
                return r;
restart:
        r = tar_open(s, err);
        if (r < 0)
                return r;
        for (;;) {
                _cleanup_free_ char *name = NULL;
                struct archive_entry *e;
                /* Dropped: a member name that cannot be normalised is never the one asked for. */
                struct cs_error ignored;
                const char *link;

                r = archive_read_next_header(s->a, &e);
                if (r == ARCHIVE_EOF)
                        return cs_error_setx(err, ENOENT, "`%s` is missing from the archive", want);
                if (r < ARCHIVE_WARN)
                        return cs_error_setx(err, EINVAL, "read the archive `%s`: %s", s->tar_path,
                                             archive_error_string(s->a));
                if (!archive_entry_pathname(e) ||
                    layer_path_normalize(archive_entry_pathname(e), MEMBER_PATH_MAX, &name,
                                         &ignored) < 0)
                        continue;
                if (strcmp(name, want) != 0)
                        continue;
                if (++hops > MEMBER_LINK_HOPS)
                        return cs_error_setx(err, ELOOP, "archive member `%s`: too many links",
                                             want);
                if ((link = archive_entry_hardlink(e))) {
                        char *next = NULL;
                        r = layer_path_normalize(link, MEMBER_PATH_MAX, &next, err);
                        if (r < 0)
                                return r;
                        free(want);
                        want = next;
                        goto restart;
                }
                if (archive_entry_filetype(e) == AE_IFLNK) {
                        char *next = NULL;
                        r = member_link_target(want, archive_entry_symlink(e), &next, err);
                        if (r < 0)
                                return r;
                        free(want);
                        want = next;
                        goto restart;
                }
                if (archive_entry_filetype(e) != AE_IFREG)
                        return cs_error_setx(err, EINVAL, "archive member `%s` is not a file",
                                             want);
                return 0;
        }
}

ssize_t source_read(struct image_source *s, void *buf, size_t len, struct cs_error *err)
{
        ssize_t n;

        if (!s->is_tar) {
                do
                        n = read(s->member_fd, buf, len);
                while (n < 0 && errno == EINTR);
                if (n < 0)
                        return cs_error_set(err, errno, "read the image");
                return n;
        }
        n = archive_read_data(s->a, buf, len);
        if (n < 0)
                return cs_error_setx(err, EIO, "read the archive `%s`: %s", s->tar_path,
                                     archive_error_string(s->a));
        return n;
}

int source_read_member(struct image_source *s, const char *member, size_t max, char **ret_buf,
                       size_t *ret_len, struct cs_error *err)
{
        _cleanup_free_ char *buf = NULL;
        size_t len = 0, cap = 0;
        int r = source_open_member(s, member, err);

        if (r < 0)
                return r;
        if (!s->is_tar)
                return cs_read_fd(s->member_fd, member, max, ret_buf, ret_len, err);
        for (;;) {
                ssize_t n;

                if (len == cap) {
                        char *nb;

                        if (cap > max)
                                return cs_error_setx(err, EFBIG,
                                                     "`%s` is larger than the limit of %zu bytes",
                                                     member, max);
                        cap = cap ? cap * 2 : 8192;
                        nb = realloc(buf, cap + 1);
                        if (!nb)
                                return cs_error_set(err, ENOMEM, "%s", member);
                        buf = nb;
                }
                n = source_read(s, buf + len, cap - len, err);
                if (n < 0)
                        return (int)n;
                if (n == 0)
                        break;
                len += (size_t)n;
                if (len > max)
                        return cs_error_setx(
                            err, EFBIG, "`%s` is larger than the limit of %zu bytes", member, max);
        }
        if (!buf && !(buf = malloc(1)))
                return cs_error_set(err, ENOMEM, "%s", member);
        buf[len] = '\0';
        *ret_buf = cs_take_ptr(&buf);
        *ret_len = len;
        return 0;
}

int source_detect_tar(const char *path, enum image_format *ret, struct cs_error *err)
{
        struct archive *a = archive_read_new();
        struct archive_entry *e;
        bool index = false, layout = false, docker = false;
        int r;

        if (!a)
                return cs_error_set(err, ENOMEM, "%s", path);
        archive_read_support_filter_gzip(a);
        archive_read_support_filter_zstd(a);
        archive_read_support_filter_xz(a);
        archive_read_support_filter_bzip2(a);
        archive_read_support_format_tar(a);
        if (archive_read_open_filename(a, path, 1 << 16) != ARCHIVE_OK) {
                r = cs_error_setx(err, EINVAL,
                                  "`%s` is neither an OCI layout directory nor a tar archive: %s",
                                  path, archive_error_string(a));
                archive_read_free(a);
                return r;
        }
        r = archive_read_next_header(a, &e);
        if ((r == ARCHIVE_OK || r == ARCHIVE_WARN) &&
            archive_filter_code(a, 0) != ARCHIVE_FILTER_NONE) {
                archive_read_free(a);
                *ret = IMAGE_FORMAT_ROOTFS_TAR; /* image archives are plain tars */
                return 0;
        }
        /* headers only: the file reader seeks over the data */
        for (; r == ARCHIVE_OK || r == ARCHIVE_WARN; r = archive_read_next_header(a, &e)) {
                const char *n = archive_entry_pathname(e);

                if (!n)
                        continue;
                if (strncmp(n, "./", 2) == 0)
                        n += 2;
                index |= strcmp(n, "index.json") == 0;
                layout |= strcmp(n, "oci-layout") == 0;
                docker |= strcmp(n, "manifest.json") == 0;
        }
        if (r != ARCHIVE_EOF) {
                r = cs_error_setx(err, EINVAL, "read the archive `%s`: %s", path,
                                  archive_error_string(a));
                archive_read_free(a);
                return r;
        }
        archive_read_free(a);
        *ret = (index && layout) ? IMAGE_FORMAT_OCI_ARCHIVE
               : docker          ? IMAGE_FORMAT_DOCKER_ARCHIVE
                                 : IMAGE_FORMAT_ROOTFS_TAR;
        return 0;
}
