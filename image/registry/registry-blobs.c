/* A pull's blobs: parallel, verified by digest and size while they stream into temporary
 * files, retried on transient errors and resumed where the registry takes ranges. */
#include "registry.h"
#include "../oci/digest.h"
#include "registry-private.h"

#include "../store/store-write.h"

#include "../../common/cleanup.h"
#include "../../common/error.h"
#include "../../common/fileio.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- blobs ---- */

struct xfer {
        struct reg *g;
        struct pull_blob *pb;
        int64_t size;
        int fd;
        EVP_MD_CTX *md;
        uint64_t got; /* bytes in the file, all hashed */
        int attempts;
        bool active, done, writing, restart;
        int fatal; /* a write callback's refusal: not retried */
        char why[300];
        double not_before, t0;
        CURL *c;
        struct resp h;
        char errbuf[CURL_ERROR_SIZE];
};

static double now_s(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int xfer_reset(struct xfer *x)
{
        x->got = 0;
        x->pb->done = 0;
        if (ftruncate(x->fd, 0) < 0 || lseek(x->fd, 0, SEEK_SET) < 0 || !digest_restart(x->md))
                return -EIO;
        return 0;
}

static size_t xfer_write(char *p, size_t size, size_t nitems, void *opaque)
{
        struct xfer *x = opaque;
        size_t n = size * nitems;
        long code = 0;

        curl_easy_getinfo(x->c, CURLINFO_RESPONSE_CODE, &code);
        if (code != 200 && code != 206)
                return n; /* an error answer's body: not blob content */
        if (!x->writing) {
                unsigned long long start = 0;

                x->writing = true;
                if (code == 200 && x->got > 0 && xfer_reset(x) < 0) {
                        x->fatal = EIO;
                        return 0;
                }
                if (code == 206 &&
                    (sscanf(x->h.content_range, "bytes %llu-", &start) != 1 || start != x->got)) {
                        x->restart = true; /* not the range we asked for: start over */
                        return 0;
                }
        }
        if (x->got + n > (uint64_t)x->size) {
                x->fatal = EINVAL;
                snprintf(x->why, sizeof(x->why),
                         "the registry sent more than the %lld bytes the manifest declares "
                         "(corrupt or tampered image)",
                         (long long)x->size);
                return 0;
        }
        if (cs_write_all(x->fd, p, n) < 0) {
                x->fatal = errno ? errno : EIO;
                snprintf(x->why, sizeof(x->why), "write the download: %s", strerror(x->fatal));
                return 0;
        }
        EVP_DigestUpdate(x->md, p, n);
        x->got += n;
        x->pb->done = x->got;
        return n;
}

static int xfer_start(struct xfer *x, CURLM *m, struct cs_error *err)
{
        char url[1200], range[64];

        snprintf(url, sizeof(url), "%s/v2/%s/blobs/%s", x->g->base, x->g->ep->repo, x->pb->digest);
        x->c = reg_easy(x->g, url, &x->h, x->errbuf);
        if (!x->c)
                return cs_error_set(err, ENOMEM, "blob request");
        curl_easy_setopt(x->c, CURLOPT_WRITEFUNCTION, xfer_write);
        curl_easy_setopt(x->c, CURLOPT_WRITEDATA, x);
        if (x->got > 0) {
                snprintf(range, sizeof(range), "%llu-", (unsigned long long)x->got);
                curl_easy_setopt(x->c, CURLOPT_RANGE, range);
        }
        x->writing = x->restart = false;
        if (!x->pb->started) {
                x->pb->started = true;
                x->t0 = now_s();
        }
        if (curl_multi_add_handle(m, x->c) != CURLM_OK) {
                curl_easy_cleanup(x->c);
                x->c = NULL;
                return cs_error_setx(err, EIO, "start the download of %s", x->pb->digest);
        }
        x->active = true;
        return 0;
}

/* code and h: the answer that made the retry, for its Retry-After (0 and NULL: none). */
static int xfer_retry_after(struct xfer *x, const char *why, long code, const struct resp *h,
                            struct cs_error *err)
{
        double wait;

        if (++x->attempts >= ATTEMPTS)
                return cs_error_setx(err, EIO, "download %s from %s: %s (gave up after %d tries)",
                                     x->pb->digest, x->g->base, why, ATTEMPTS);
        wait = reg_retry_delay(x->g, code, h, x->attempts, err);
        if (wait < 0)
                return -EAGAIN;
        x->not_before = now_s() + wait;
        return 0;
}

static int xfer_retry(struct xfer *x, const char *why, struct cs_error *err)
{
        return xfer_retry_after(x, why, 0, NULL, err);
}

/* A transfer ended: verified and renamed into place, retried, or the pull fails. */
static int xfer_finish(struct xfer *x, int dirfd, CURLcode rc, struct cs_error *err)
{
        char partial[100], final[100], got[OCI_DIGEST_LEN + 1], why[400];
        unsigned char sum[32];
        long code = 0;

        curl_easy_getinfo(x->c, CURLINFO_RESPONSE_CODE, &code);
        x->active = false;
        if (x->fatal)
                return cs_error_setx(err, x->fatal, "blob %s from %s: %s", x->pb->digest,
                                     x->g->base, x->why);
        if (x->restart) {
                if (xfer_reset(x) < 0)
                        return cs_error_set(err, EIO, "reset the download of %s", x->pb->digest);
                return xfer_retry(x, "the registry answered another range than asked", err);
        }
        if (rc != CURLE_OK) {
                snprintf(why, sizeof(why), "%s", x->errbuf[0] ? x->errbuf : curl_easy_strerror(rc));
                if (curl_transient(rc))
                        return xfer_retry(x, why, err);
                return cs_error_setx(err, EIO, "download %s from %s: %s", x->pb->digest, x->g->base,
                                     why);
        }
        if (code == 401) {
                int r = reg_authenticate(x->g, x->h.challenge, err);
                if (r < 0)
                        return r;
                return xfer_retry(x, "HTTP 401", err);
        }
        if (code == 416) {
                if (xfer_reset(x) < 0)
                        return cs_error_set(err, EIO, "reset the download of %s", x->pb->digest);
                return xfer_retry(x, "HTTP 416", err);
        }
        if (http_transient(code)) {
                snprintf(why, sizeof(why), "HTTP %ld", code);
                return xfer_retry_after(x, why, code, &x->h, err);
        }
        if (code != 200 && code != 206)
                return cs_error_setx(err, EIO, "download %s from %s: HTTP %ld", x->pb->digest,
                                     x->g->base, code);
        if (x->got < (uint64_t)x->size)
                return xfer_retry(x, "the connection ended early", err);
        digest_end(x->md, sum);
        oci_digest_format(sum, got);
        if (strcmp(got, x->pb->digest) != 0)
                return cs_error_setx(err, EINVAL,
                                     "blob %s from %s has digest %s, not the one the manifest "
                                     "declares (corrupt or tampered image); nothing was stored",
                                     x->pb->digest, x->g->base, got);
        snprintf(partial, sizeof(partial), "blobs/sha256/%.64s.partial",
                 store_digest_hex(x->pb->digest));
        snprintf(final, sizeof(final), "blobs/sha256/%.64s", store_digest_hex(x->pb->digest));
        if (renameat(dirfd, partial, dirfd, final) < 0)
                return cs_error_set(err, errno, "store the download of %s", x->pb->digest);
        x->done = x->pb->finished = true;
        x->pb->seconds = now_s() - x->t0;
        return 0;
}

static void xfers_free(struct xfer *v, size_t n, CURLM *m)
{
        for (size_t i = 0; i < n; i++) {
                if (v[i].c) {
                        curl_multi_remove_handle(m, v[i].c);
                        curl_easy_cleanup(v[i].c);
                }
                if (v[i].fd >= 0)
                        close(v[i].fd);
                EVP_MD_CTX_free(v[i].md);
        }
        free(v);
}

/* Every blob of blobs[] into dirfd's blobs/sha256/, at most PARALLEL at a time. */
int reg_get_blobs(struct reg *g, int dirfd, struct pull_blob *blobs, const int64_t *sizes, size_t n,
                  struct cs_error *err)
{
        struct xfer *x = calloc(n + 1, sizeof(*x));
        CURLM *m = curl_multi_init();
        double last_report = 0;
        size_t left = n;
        int r = 0;

        if (!x || !m) {
                free(x);
                curl_multi_cleanup(m);
                return cs_error_set(err, ENOMEM, "downloads");
        }
        for (size_t i = 0; i < n; i++) {
                char partial[100];

                x[i] = (struct xfer){.g = g, .pb = &blobs[i], .size = sizes[i], .fd = -1};
                snprintf(partial, sizeof(partial), "blobs/sha256/%.64s.partial",
                         store_digest_hex(blobs[i].digest));
                x[i].fd = openat(dirfd, partial, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                                 0600);
                if (x[i].fd < 0) {
                        r = cs_error_set(err, errno, "create the download of %s", blobs[i].digest);
                        goto out;
                }
                x[i].md = digest_new();
                if (!x[i].md) {
                        r = cs_error_set(err, ENOMEM, "downloads");
                        goto out;
                }
        }
        while (left > 0) {
                size_t active = 0;
                int running;
                CURLMsg *msg;
                double t = now_s();

                for (size_t i = 0; i < n; i++)
                        active += x[i].active;
                for (size_t i = 0; i < n && active < PARALLEL; i++) {
                        if (x[i].active || x[i].done || x[i].not_before > t)
                                continue;
                        r = xfer_start(&x[i], m, err);
                        if (r < 0)
                                goto out;
                        active++;
                }
                curl_multi_perform(m, &running);
                while ((msg = curl_multi_info_read(m, &running))) {
                        struct xfer *xi = NULL;

                        if (msg->msg != CURLMSG_DONE)
                                continue;
                        for (size_t i = 0; i < n && !xi; i++)
                                if (x[i].c == msg->easy_handle)
                                        xi = &x[i];
                        if (!xi)
                                continue;
                        r = xfer_finish(xi, dirfd, msg->data.result, err);
                        curl_multi_remove_handle(m, xi->c);
                        curl_easy_cleanup(xi->c);
                        xi->c = NULL;
                        if (r < 0)
                                goto out;
                        if (xi->done) {
                                left--;
                                if (g->o->progress)
                                        g->o->progress(g->o->progress_opaque, blobs, n);
                        }
                }
                t = now_s();
                if (g->o->progress && t - last_report >= 0.1) {
                        for (size_t i = 0; i < n; i++)
                                if (x[i].active)
                                        blobs[i].seconds = t - x[i].t0;
                        g->o->progress(g->o->progress_opaque, blobs, n);
                        last_report = t;
                }
                if (left > 0)
                        curl_multi_poll(m, NULL, 0, 100, NULL);
        }
out:
        xfers_free(x, n, m);
        curl_multi_cleanup(m);
        return r;
}
