/* A layer's stream: blob bytes through libarchive's raw reader (gzip, zstd or none), hashed
 * and counted against the limits, into its tar reader, entry by entry onto the tree. */
#include "../oci/digest.h"
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
#include <pthread.h>
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

/* The producer: decompressed bytes, counted against the limit, into the next free slot.
 * Ends at the stream's end, on a failure (its flag set), or when the reader stops. */
static void *produce(void *opaque)
{
        struct layer_pipe *p = opaque;

        for (;;) {
                struct pipe_slot *slot;
                bool failed = false;

                pthread_mutex_lock(&p->lock);
                while (!p->stop && p->filled - p->taken >= PIPE_SLOTS)
                        pthread_cond_wait(&p->changed, &p->lock);
                if (p->stop) {
                        p->done = true;
                        pthread_cond_broadcast(&p->changed);
                        pthread_mutex_unlock(&p->lock);
                        return NULL;
                }
                slot = &p->slots[p->filled % PIPE_SLOTS];
                pthread_mutex_unlock(&p->lock);

                /* Outside the lock: only this thread writes a slot that is not filled. */
                slot->len = 0;
                while (slot->len < PIPE_SLOT_SIZE / 2 && !p->raw_eof && !failed) {
                        const void *buf;
                        size_t len;
                        la_int64_t off;
                        int r = archive_read_data_block(p->raw, &buf, &len, &off);

                        if (r == ARCHIVE_EOF) {
                                p->raw_eof = true;
                                break;
                        }
                        if (r < ARCHIVE_WARN) {
                                p->decompress_failed = !p->input_failed;
                                failed = true;
                                break;
                        }
                        p->bytes += len;
                        if (atomic_fetch_add(&p->budget->stream, len) + len > p->max) {
                                p->limit_hit = failed = true;
                                break;
                        }
                        while (len > 0) {
                                size_t n = PIPE_SLOT_SIZE - slot->len;

                                if (n == 0)
                                        break;
                                if (n > len)
                                        n = len;
                                memcpy(slot->data + slot->len, buf, n);
                                slot->len += n;
                                buf = (const char *)buf + n;
                                len -= n;
                        }
                        if (len > 0) {
                                /* A block larger than the slot's room: hand this slot over
                                 * and carry the rest into the next (rare: blocks are
                                 * smaller than half a slot). */
                                pthread_mutex_lock(&p->lock);
                                p->filled++;
                                pthread_cond_broadcast(&p->changed);
                                while (!p->stop && p->filled - p->taken >= PIPE_SLOTS)
                                        pthread_cond_wait(&p->changed, &p->lock);
                                slot = &p->slots[p->filled % PIPE_SLOTS];
                                pthread_mutex_unlock(&p->lock);
                                if (p->stop)
                                        break;
                                memcpy(slot->data, buf, len);
                                slot->len = len;
                        }
                }
                pthread_mutex_lock(&p->lock);
                if (slot->len > 0)
                        p->filled++;
                if (p->raw_eof || failed || p->stop)
                        p->done = true;
                pthread_cond_broadcast(&p->changed);
                pthread_mutex_unlock(&p->lock);
                if (p->done)
                        return NULL;
        }
}

/* The tar reader's input: the next filled slot, valid until the next call. */
static la_ssize_t tar_read_cb(struct archive *a, void *opaque, const void **buf)
{
        struct layer_pipe *p = opaque;
        struct pipe_slot *slot;

        pthread_mutex_lock(&p->lock);
        if (p->holding) {
                p->taken++;
                p->holding = false;
                pthread_cond_broadcast(&p->changed);
        }
        while (p->filled == p->taken && !p->done)
                pthread_cond_wait(&p->changed, &p->lock);
        if (p->filled == p->taken) {
                /* The producer ended and everything it made has been read. */
                bool failed = p->input_failed || p->limit_hit || p->decompress_failed;

                pthread_mutex_unlock(&p->lock);
                if (!failed)
                        return 0;
                archive_set_error(a, p->limit_hit ? EFBIG : EIO,
                                  p->limit_hit ? "over the size limit" : "decompression failed");
                return -1;
        }
        slot = &p->slots[p->taken % PIPE_SLOTS];
        p->holding = true;
        pthread_mutex_unlock(&p->lock);
        /* The diff_id here, in order, on the thread with time to spare: the producer's
         * decompression is the longer half. */
        EVP_DigestUpdate(p->md, slot->data, slot->len);
        *buf = slot->data;
        return (la_ssize_t)slot->len;
}

/* Stop the producer (if it runs) and wait for it. */
static void pipe_join(struct layer_pipe *p, pthread_t *thread, bool *running)
{
        if (!*running)
                return;
        pthread_mutex_lock(&p->lock);
        p->stop = true;
        pthread_cond_broadcast(&p->changed);
        pthread_mutex_unlock(&p->lock);
        pthread_join(*thread, NULL);
        *running = false;
}

static const char *compression_name(int c)
{
        return c == OCI_COMPRESSION_GZIP   ? "gzip"
               : c == OCI_COMPRESSION_ZSTD ? "zstd"
                                           : "uncompressed";
}

/* Turn a libarchive failure into the error that caused it: the blob read, the size limit,
 * or the archive's own complaint. The producer has ended (pipe_join) before its flags and
 * its own error are read. */
static int pipe_error(struct layer_tree *t, struct layer_pipe *p, struct archive *a,
                      const char *what, const char *stage, struct cs_error *err)
{
        if (p->input_failed) {
                *err = p->read_err;
                return cs_error_wrap(err, "%s", what);
        }
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
        pthread_t thread;
        bool running = false, sync_made = false;
        int r, found;

        if (t->layer + 1 > t->lim.max_layers)
                return cs_error_setx(err, E2BIG,
                                     "the image has more than %zu layers (--max-layers)",
                                     t->lim.max_layers);
        t->layer++;
        cache_drop(t);
        p = calloc(1, sizeof(*p));
        if (!p || !(p->slots = malloc(PIPE_SLOTS * sizeof(*p->slots))) || !(p->md = digest_new())) {
                r = cs_error_set(err, ENOMEM, "%s", what);
                goto out;
        }
        if (pthread_mutex_init(&p->lock, NULL) != 0) {
                r = cs_error_set(err, ENOMEM, "%s", what);
                goto out;
        }
        if (pthread_cond_init(&p->changed, NULL) != 0) {
                pthread_mutex_destroy(&p->lock);
                r = cs_error_set(err, ENOMEM, "%s", what);
                goto out;
        }
        sync_made = true;
        p->read = read;
        p->opaque = opaque;
        p->err = &p->read_err;
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
        /* From here the producer alone reads the blob and the decompressor. */
        r = pthread_create(&thread, NULL, produce, p);
        if (r != 0) {
                r = cs_error_set(err, r, "%s: start the decompression thread", what);
                goto out;
        }
        running = true;
        if (archive_read_open(tar, p, NULL, tar_read_cb, NULL) != ARCHIVE_OK) {
                pipe_join(p, &thread, &running);
                r = pipe_error(t, p, tar, what, "read the tar", err);
                goto out;
        }
        for (;;) {
                r = archive_read_next_header(tar, &e);
                if (r == ARCHIVE_EOF)
                        break;
                if (r < ARCHIVE_WARN) {
                        pipe_join(p, &thread, &running);
                        r = pipe_error(t, p, tar, what, "read the tar", err);
                        goto out;
                }
                r = apply_entry(t, tar, e, err);
                if (r == -EIO) {
                        pipe_join(p, &thread, &running);
                        r = pipe_error(t, p, tar, what, "read an entry's data", err);
                        goto out;
                }
                if (r < 0) {
                        pipe_join(p, &thread, &running);
                        r = cs_error_wrap(err, "%s", what);
                        goto out;
                }
        }
        /* the diff_id covers the whole stream, including padding after the end marker */
        for (;;) {
                const void *buf;
                la_ssize_t n = tar_read_cb(tar, p, &buf);

                if (n < 0) {
                        pipe_join(p, &thread, &running);
                        r = pipe_error(t, p, tar, what, "read the end of the tar", err);
                        goto out;
                }
                if (n == 0)
                        break;
        }
        pipe_join(p, &thread, &running);
        t->stats.stream += p->bytes;
        digest_end(p->md, ret_diff_id);
        r = 0;
out:
        if (p)
                pipe_join(p, &thread, &running);
        cache_drop(t);
        if (tar)
                archive_read_free(tar);
        if (p) {
                if (p->raw)
                        archive_read_free(p->raw);
                if (sync_made) {
                        pthread_cond_destroy(&p->changed);
                        pthread_mutex_destroy(&p->lock);
                }
                EVP_MD_CTX_free(p->md);
                free(p->slots);
                free(p);
        }
        return r;
}
