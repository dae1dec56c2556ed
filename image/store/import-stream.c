/* One layer of an import: its blob streamed from the source into the tree being unpacked,
 * its size, digest and diff_id verified as it goes, the progress reported. */
#include "import-private.h"

#include "../../common/cleanup.h"
#include "../../common/error.h"
#include "../../common/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct blob_reader {
        struct import_job *job;
        struct image_source *src;
        int fd; /* a rootfs tar is read directly */
        EVP_MD_CTX *md;
        uint64_t n;
        int64_t expect;
        const char *member;
        bool eof;
        const struct import_options *o;
        struct import_progress prog;
        uint64_t next_report;
        struct timespec start;
};

static double seconds_since(const struct timespec *t0)
{
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

static ssize_t blob_read(void *opaque, void *buf, size_t len, struct cs_error *err)
{
        struct blob_reader *b = opaque;
        ssize_t n;

        if (atomic_load(&b->job->cancel))
                return cs_error_setx(err, ECANCELED, "stopped: another layer failed");
        if (b->fd >= 0) {
                do
                        n = read(b->fd, buf, len);
                while (n < 0 && errno == EINTR);
                if (n < 0)
                        return cs_error_set(err, errno, "read `%s`", b->member);
        } else {
                n = source_read(b->src, buf, len, err);
                if (n < 0)
                        return n;
        }
        if (n == 0) {
                b->eof = true;
                return 0;
        }
        b->n += (uint64_t)n;
        if (b->expect >= 0 && b->n > (uint64_t)b->expect)
                return cs_error_setx(err, EINVAL,
                                     "blob `%s` is larger than the %lld bytes its descriptor "
                                     "declares (corrupt or tampered image)",
                                     b->member, (long long)b->expect);
        if (b->md)
                EVP_DigestUpdate(b->md, buf, (size_t)n);
        atomic_fetch_add(&b->job->all_done, (uint64_t)n);
        if (b->o->progress && b->n >= b->next_report) {
                b->prog.done = b->n;
                b->prog.seconds = seconds_since(&b->start);
                import_report(b->job, &b->prog);
                b->next_report = b->n + (4u << 20);
        }
        return n;
}

void import_report(struct import_job *job, const struct import_progress *prog)
{
        struct import_progress all;

        if (!job->o->progress)
                return;
        all = *prog;
        all.all_done = atomic_load(&job->all_done);
        all.all_total = job->all_total;
        pthread_mutex_lock(&job->report_lock);
        job->o->progress(job->o->progress_opaque, &all);
        pthread_mutex_unlock(&job->report_lock);
}

int layer_stream(struct import_job *job, struct image_source *src, size_t i,
                 struct layer_tree *tree, char ret_diff_id[OCI_DIGEST_LEN + 1],
                 struct import_progress *ret_done, struct cs_error *err)
{
        const struct import_options *o = job->o;
        struct import_plan *p = job->p;
        struct import_layer *l = &p->layers[i];
        _cleanup_md_ EVP_MD_CTX *md = NULL;
        _cleanup_close_ int fd = -1;
        struct blob_reader b = {
            .job = job, .src = src, .fd = -1, .expect = l->size, .member = l->member, .o = o};
        unsigned char diff[32], sum[32];
        char what[160], got[OCI_DIGEST_LEN + 1];
        int r;

        snprintf(what, sizeof(what), "layer %zu/%zu (%s)", i + 1, p->n_layers,
                 l->digest[0] ? l->digest : l->member);
        b.prog = (struct import_progress){.layer = i + 1,
                                          .n_layers = p->n_layers,
                                          .total = l->size > 0 ? (uint64_t)l->size : 0,
                                          .what = l->digest[0] ? l->digest : l->member};
        clock_gettime(CLOCK_MONOTONIC, &b.start);
        if (p->format == IMAGE_FORMAT_ROOTFS_TAR) {
                fd = open(l->member, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        return cs_error_set(err, errno, "open `%s`", l->member);
                b.fd = fd;
        } else {
                r = source_open_member(src, l->member, err);
                if (r < 0)
                        return cs_error_wrap(err, "%s", what);
        }
        /* a plain layer's blob digest is its diff_id: hash it once */
        if (l->digest[0] &&
            !(l->compression == OCI_COMPRESSION_NONE && strcmp(l->digest, l->diff_id) == 0)) {
                md = digest_new();
                if (!md)
                        return cs_error_set(err, ENOMEM, "%s", what);
                b.md = md;
        }
        r = layer_apply(tree, what, l->compression, blob_read, &b, diff, err);
        if (r < 0) {
                if (b.eof && l->size >= 0 && b.n < (uint64_t)l->size)
                        return cs_error_setx(err, EINVAL,
                                             "%s: the blob `%s` is truncated: %llu of the "
                                             "%lld bytes its descriptor declares",
                                             what, l->member, (unsigned long long)b.n,
                                             (long long)l->size);
                return r;
        }
        /* the compressed digest covers everything, even bytes after the stream */
        while (!b.eof) {
                char tail[4096];
                ssize_t n = blob_read(&b, tail, sizeof(tail), err);
                if (n < 0)
                        return cs_error_wrap(err, "%s", what);
        }
        if (l->size >= 0 && b.n != (uint64_t)l->size)
                return cs_error_setx(err, EINVAL,
                                     "%s: the blob `%s` is truncated: %llu of the %lld "
                                     "bytes its descriptor declares",
                                     what, l->member, (unsigned long long)b.n, (long long)l->size);
        oci_digest_format(diff, got);
        if (md) {
                char blob[OCI_DIGEST_LEN + 1];

                digest_end(md, sum);
                oci_digest_format(sum, blob);
                if (strcmp(blob, l->digest) != 0)
                        return cs_error_setx(err, EINVAL,
                                             "%s: the blob `%s` has digest %s, not the one "
                                             "its descriptor declares (corrupt or "
                                             "tampered image)",
                                             what, l->member, blob);
        } else if (l->digest[0] && strcmp(got, l->digest) != 0) {
                return cs_error_setx(err, EINVAL,
                                     "%s: the blob `%s` has digest %s, not the one its "
                                     "descriptor declares (corrupt or tampered image)",
                                     what, l->member, got);
        }
        if (p->format == IMAGE_FORMAT_ROOTFS_TAR) {
                _cleanup_free_ char *cfg = NULL;
                struct oci_platform host;

                oci_platform_host(&host);
                if (asprintf(&cfg,
                             "{\"architecture\":\"%s\",\"os\":\"linux\",\"config\":{\"Env\":"
                             "[\"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/"
                             "sbin:/bin\"]},\"rootfs\":{\"type\":\"layers\",\"diff_ids\":["
                             "\"%s\"]}}",
                             host.arch, got) < 0)
                        return cs_error_set(err, ENOMEM, "import");
                p->config_len = strlen(cfg);
                p->config = cs_take_ptr(&cfg);
                r = oci_config_parse(p->config, p->config_len, &p->cfg, err);
                if (r < 0)
                        return r;
        } else if (strcmp(got, l->diff_id) != 0) {
                return cs_error_setx(err, EINVAL,
                                     "%s: the uncompressed layer has digest %s, but the "
                                     "image config's diff_id is %s (corrupt or tampered "
                                     "image)",
                                     what, got, l->diff_id);
        }
        b.prog.done = b.n;
        b.prog.total = b.n;
        b.prog.seconds = seconds_since(&b.start);
        b.prog.finished = true;
        *ret_done = b.prog; /* reported once the layer is stored, in the image's order */
        snprintf(ret_diff_id, OCI_DIGEST_LEN + 1, "%s", got);
        return 0;
}
