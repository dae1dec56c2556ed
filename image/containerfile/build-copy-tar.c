/* ADD of a local tar: the archive read (plain, gz, bz2, xz, zst) and hashed as the copy's
 * digest wants it, its entries unpacked by the layer extractor's rules (layer.h). */
#include "build-copy-ctx.h"
#include "../layer/layer.h"

#include "../../common/cleanup.h"
#include "../../common/error.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
                copy_md_add(t->x, t->buf, (size_t)n);
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
int copy_unpack_tar(struct copy_ctx *x, int in, const struct stat *st, int dest_fd, bool probe,
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
