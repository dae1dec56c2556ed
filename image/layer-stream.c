/* A layer's stream: blob bytes through libarchive's raw reader (gzip, zstd or none), hashed
 * and counted against the limits, into its tar reader, entry by entry onto the tree. */
#include "layer-private.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"

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
#include <sys/xattr.h>
#include <unistd.h>

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
        if (atomic_fetch_add(&p->budget->stream, len) + len > p->max) {
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
        p->budget = t->budget;
        p->max = t->lim.max_size;
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
        t->stats.stream += p->bytes;
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
