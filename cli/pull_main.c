/* `csandbox image pull`: run inside the csandbox-import helper (libcurl, libarchive and
 * libcrypto load only there). Downloads into a flocked temporary OCI layout inside the
 * store's tmp/, then imports that layout with the import's own verification. */
#include "cmd_image.h"
#include "progress.h"
#include "cli.h"
#include "../runner/runner.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"
#include "../image/registry/registries-conf.h"
#include "../image/registry/registry.h"
#include "../image/store/store.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* On a terminal: a line of its own for each layer as it finishes, and below them a live
 * area redrawn in place: the layers in transfer and a total. Otherwise (a log) only the
 * lines of the finished layers. No line is wider than the terminal, and the live area is
 * shorter than it. */
struct pull_display {
        bool tty;
        int lines;     /* of the live area drawn last time, to move back over */
        bool *printed; /* the layers whose finished line is out */
        double t0;     /* the first report, when the transfers start */
};

static void blob_line(const struct pull_blob *b, char *buf, size_t len)
{
        char done[32], total[32], rate[32];

        cs_human_size(b->done, done, sizeof(done));
        cs_human_size(b->total, total, sizeof(total));
        progress_rate(b->done, b->seconds, rate, sizeof(rate));
        if (b->finished && b->seconds < 0.05)
                snprintf(buf, len, "layer %.19s  %s done", b->digest, total);
        else if (b->finished)
                snprintf(buf, len, "layer %.19s  %s in %.1f s (%s/s)", b->digest, total, b->seconds,
                         rate);
        else
                snprintf(buf, len, "layer %.19s  %s / %s  %s/s", b->digest, done, total, rate);
}

static void total_line(const struct pull_blob *blobs, size_t n, double seconds, char *buf,
                       size_t len)
{
        char done[32], total[32], rate[32];
        uint64_t d = 0, t = 0;
        size_t layers = 0, finished = 0;

        for (size_t i = 0; i < n; i++) {
                if (blobs[i].is_config)
                        continue;
                layers++;
                finished += blobs[i].finished;
                d += blobs[i].finished ? blobs[i].total : blobs[i].done;
                t += blobs[i].total;
        }
        cs_human_size(d, done, sizeof(done));
        cs_human_size(t, total, sizeof(total));
        progress_rate(d, seconds, rate, sizeof(rate));
        if (finished == layers)
                snprintf(buf, len, "total %s in %.1f s (%s/s), %zu layer%s", total, seconds, rate,
                         layers, layers == 1 ? "" : "s");
        else
                snprintf(buf, len, "total %s / %s  %s/s  %zu of %zu layers done", done, total, rate,
                         finished, layers);
}

static void show_pull(void *opaque, const struct pull_blob *blobs, size_t n)
{
        struct pull_display *d = opaque;
        char line[256];
        size_t layers = 0;
        int cols = 80, rows = 24, room;

        if (!d->printed && !(d->printed = calloc(n + 1, sizeof(bool))))
                return;
        for (size_t i = 0; i < n; i++)
                layers += !blobs[i].is_config;
        if (layers == 0) /* the image is stored already: only its config is fetched */
                return;
        if (d->tty) {
                if (d->t0 == 0)
                        d->t0 = progress_now();
                progress_term_size(&cols, &rows);
                if (d->lines > 0)
                        fprintf(stderr, "\033[%dA", d->lines);
                fputs("\r\033[J", stderr); /* the old live area goes */
                d->lines = 0;
        }
        /* each finished layer once: on a terminal above the live area, otherwise as a log */
        for (size_t i = 0; i < n; i++) {
                if (blobs[i].is_config || !blobs[i].finished || d->printed[i])
                        continue;
                d->printed[i] = true;
                blob_line(&blobs[i], line, sizeof(line));
                if (d->tty)
                        progress_put(line, cols);
                else
                        fputs(line, stderr);
                fputc('\n', stderr);
        }
        if (!d->tty)
                return;
        room = rows - 2; /* the live area's layer lines: the total and the cursor below */
        for (size_t i = 0; i < n && d->lines < room; i++) {
                if (blobs[i].is_config || !blobs[i].started || blobs[i].finished)
                        continue;
                blob_line(&blobs[i], line, sizeof(line));
                progress_put(line, cols);
                fputc('\n', stderr);
                d->lines++;
        }
        total_line(blobs, n, progress_now() - d->t0, line, sizeof(line));
        progress_put(line, cols);
        fputc('\n', stderr);
        d->lines++;
        fflush(stderr);
}

/* --tls-verify, --tls-verify=BOOL or --tls-verify BOOL (podman's spellings). */
struct pull_display *pull_display_attach(struct pull_options *po, struct import_options *io)
{
        struct pull_display *d = calloc(1, sizeof(*d));

        if (!d)
                return NULL;
        d->tty = isatty(STDERR_FILENO);
        po->progress = show_pull;
        po->progress_opaque = d;
        if (d->tty)
                io->progress = image_import_progress;
        return d;
}

void pull_display_end(struct pull_display *d, const struct import_options *io)
{
        if (!d)
                return;
        if (io->progress)
                fprintf(stderr, "\r\033[K");
        free(d->printed);
        free(d);
}

static int parse_tls_verify(int argc, char **argv, int *i, bool *ret)
{
        const char *a = argv[*i], *v = NULL;

        if (strncmp(a, "--tls-verify=", 13) == 0)
                v = a + 13;
        else if (*i + 1 < argc &&
                 (strcmp(argv[*i + 1], "true") == 0 || strcmp(argv[*i + 1], "false") == 0))
                v = argv[++*i];
        if (!v || strcmp(v, "true") == 0)
                *ret = true;
        else if (strcmp(v, "false") == 0)
                *ret = false;
        else
                return cli_usage_error("image", "--tls-verify `%s`: expected true or false", v);
        return 0;
}

int cmd_image_pull(int argc, char **argv)
{
        struct pull_options po = {.tls_verify = true};
        struct pull_display *disp = NULL;
        struct import_options o;
        struct import_result res;
        _cleanup_free_ struct registry_source *src = NULL;
        struct registry_ref ref;
        struct image_store s;
        size_t n_src = 0;
        struct cs_error err = {0};
        const char *arg = NULL;
        bool quiet = false, missing = false;
        int r;

        oci_platform_host(&po.platform);
        for (int i = 0; i < argc; i++) {
                const char *a = argv[i];

                if (strcmp(a, "--quiet") == 0 || strcmp(a, "-q") == 0) {
                        quiet = true;
                } else if (strcmp(a, "--missing") == 0) {
                        missing = true;
                } else if (strncmp(a, "--tls-verify", 12) == 0 && (!a[12] || a[12] == '=')) {
                        if (parse_tls_verify(argc, argv, &i, &po.tls_verify) != 0)
                                return CS_EXIT_SETUP;
                } else if (strcmp(a, "--platform") == 0) {
                        if (i + 1 >= argc)
                                return cli_usage_error("image", "--platform needs a value");
                        if (oci_platform_parse(argv[++i], &po.platform, &err) < 0)
                                return cli_fail(&err);
                } else if (a[0] == '-') {
                        return cli_usage_error("image", "pull: unknown option `%s`", a);
                } else if (arg) {
                        return cli_usage_error("image", "pull takes one REF (`%s` is extra)", a);
                } else {
                        arg = a;
                }
        }
        if (!arg)
                return cli_usage_error("image", "pull needs a REF");
        /* registries.conf as podman reads it: the short name's registry, mirrors, rewrites */
        src = calloc(REGISTRY_SOURCES_MAX, sizeof(*src));
        if (!src) {
                cs_error_set(&err, ENOMEM, "image pull");
                return cli_fail(&err);
        }
        if (registry_resolve(arg, src, &n_src, &err) < 0)
                return cli_fail(&err);
        ref = src[0].ref;
        import_options_init(&o);
        if (!quiet)
                disp = pull_display_attach(&po, &o);

        /* a peer that resets a TLS connection must fail the transfer, not kill us */
        signal(SIGPIPE, SIG_IGN);
        r = store_open(NULL, &s, &err);
        if (r < 0)
                return cli_fail(&err);
        if (missing) {
                /* An image already stored under its name is not asked for again: no network. */
                /* in the writable store or a read-only one (CSANDBOX_READONLY_STORE) */
                char digest[OCI_DIGEST_LEN + 1];
                struct cs_error ignored = {0};
                struct image_store *ro = NULL, *at = NULL;
                size_t n_ro = 0;
                bool have;

                (void)store_open_readonly(&s, &ro, &n_ro, &ignored);
                have = store_find(&s, ro, n_ro, ref.name, digest, &at, &ignored) == 0;
                if (have) {
                        pull_display_end(disp, &o);
                        printf("already stored %s %s%s%s: not pulled again\n", ref.name, digest,
                               at != &s ? " in the read-only store " : "",
                               at != &s ? at->root : "");
                        store_close_all(ro, n_ro);
                        store_close(&s);
                        return 0;
                }
                store_close_all(ro, n_ro);
        }
        /* more than one only where short-name-mode lets a short name try each registry */
        for (size_t i = 0; i < n_src; i++) {
                ref = src[i].ref;
                po.endpoints = src[i].endpoints;
                po.n_endpoints = src[i].n_endpoints;
                r = store_pull(&s, &ref, &po, &o, &res, &err);
                if (r == 0)
                        break;
        }
        pull_display_end(disp, &o);
        store_close(&s);
        if (r < 0)
                return cli_fail(&err);
        {
                char size[32];

                cs_human_size(res.size, size, sizeof(size));
                printf("%s %s %s: %s, %" PRIu64 " files, %zu layers (%zu already stored)\n",
                       res.existed ? "already stored" : "pulled", res.name, res.digest, size,
                       res.files, res.layers, res.existed ? res.layers : res.layers_reused);
        }
        return 0;
}
