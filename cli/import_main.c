/* csandbox-import: `csandbox image import`, in a binary of its own so that libarchive and
 * libcrypto are loaded only to unpack an image (csandbox execs this helper). */
#include "cmd_image.h"
#include "cli.h"
#include "../runner/runner.h"

#include "../common/error.h"
#include "../common/fileio.h"
#include "../image/store/store.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

static int parse_count(const char *flag, const char *v, bool suffixes, uint64_t *ret,
                       struct cs_error *err)
{
        char *end;
        unsigned long long n;
        uint64_t mult = 1;

        errno = 0;
        n = strtoull(v, &end, 10);
        if (suffixes && *end && !end[1]) {
                const char *units = "KMGT";
                const char *u = strchr(units, *end);
                if (u) {
                        mult = 1ull << (10 * (1 + (u - units)));
                        end++;
                }
        }
        if (errno || end == v || *end || v[0] == '-' || n == 0 || n > UINT64_MAX / mult)
                return cs_error_setx(err, EINVAL, "%s `%s`: expected a positive number%s", flag, v,
                                     suffixes ? " (K/M/G/T suffixes allowed)" : "");
        *ret = n * mult;
        return 0;
}

void progress_term_size(int *cols, int *rows)
{
        struct winsize ws = {0};

        if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) < 0) /* not a terminal after all: defaults */
                ws = (struct winsize){0};
        *cols = ws.ws_col ? ws.ws_col : 80;
        *rows = ws.ws_row ? ws.ws_row : 24;
}

void progress_put(const char *text, int cols)
{
        size_t len = strlen(text);

        /* one column short of the width: a line that fills the last column makes some
         * terminals wrap, and the next redraw would move up one line too few */
        if (cols > 1 && len > (size_t)cols - 1)
                len = (size_t)cols - 1;
        fputs("\r\033[K", stderr);
        fwrite(text, 1, len, stderr);
}

double progress_now(void)
{
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

void progress_rate(uint64_t bytes, double seconds, char *buf, size_t len)
{
        cs_human_size(seconds > 0.05 ? (uint64_t)((double)bytes / seconds) : 0, buf, len);
}

/* On a terminal (opaque NULL) one line redrawn in place: the layer, its bytes and rate, and
 * the bytes of all layers; otherwise (opaque non-NULL) a log: one line per finished layer,
 * nothing in between. */
void image_import_progress(void *opaque, const struct import_progress *p)
{
        char done[32], total[32], rate[32], all_done[32], all_total[32], line[256];
        int cols, rows;

        cs_human_size(p->done, done, sizeof(done));
        cs_human_size(p->total, total, sizeof(total));
        progress_rate(p->done, p->seconds, rate, sizeof(rate));
        if (p->reused) {
                if (opaque)
                        fprintf(stderr, "layer %zu/%zu %.19s  already stored\n", p->layer,
                                p->n_layers, p->what);
                return;
        }
        if (opaque) {
                if (!p->finished)
                        return;
                if (p->seconds < 0.05)
                        fprintf(stderr, "layer %zu/%zu %.19s  %s done\n", p->layer, p->n_layers,
                                p->what, total);
                else
                        fprintf(stderr, "layer %zu/%zu %.19s  %s in %.1f s (%s/s)\n", p->layer,
                                p->n_layers, p->what, total, p->seconds, rate);
                return;
        }
        cs_human_size(p->all_done, all_done, sizeof(all_done));
        cs_human_size(p->all_total, all_total, sizeof(all_total));
        snprintf(line, sizeof(line), "importing layer %zu/%zu  %s%s%s  %s/s  total %s%s%s",
                 p->layer, p->n_layers, done, p->total ? " / " : "", p->total ? total : "", rate,
                 all_done, p->all_total ? " / " : "", p->all_total ? all_total : "");
        progress_term_size(&cols, &rows);
        progress_put(line, cols);
        fflush(stderr);
}

int cmd_image_import(int argc, char **argv)
{
        struct import_options o;
        struct import_result res;
        struct image_store s;
        struct cs_error err = {0};
        bool quiet = false;
        int r;

        import_options_init(&o);
        for (int i = 0; i < argc; i++) {
                const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
                uint64_t n;

                if (strcmp(a, "--quiet") == 0 || strcmp(a, "-q") == 0) {
                        quiet = true;
                        continue;
                }
                if (a[0] != '-') {
                        if (o.source)
                                return cli_usage_error("image",
                                                       "import takes one SRC (`%s` is extra)", a);
                        o.source = a;
                        continue;
                }
                if (!v)
                        return cli_usage_error("image", "%s needs a value", a);
                i++;
                if (strcmp(a, "--name") == 0) {
                        o.name = v;
                } else if (strcmp(a, "--format") == 0) {
                        if (strcmp(v, "oci") == 0)
                                o.format = IMAGE_FORMAT_OCI;
                        else if (strcmp(v, "oci-archive") == 0)
                                o.format = IMAGE_FORMAT_OCI_ARCHIVE;
                        else if (strcmp(v, "docker-archive") == 0)
                                o.format = IMAGE_FORMAT_DOCKER_ARCHIVE;
                        else if (strcmp(v, "rootfs-tar") == 0)
                                o.format = IMAGE_FORMAT_ROOTFS_TAR;
                        else
                                return cli_usage_error("image",
                                                       "--format `%s`: expected oci, oci-archive, "
                                                       "docker-archive or rootfs-tar",
                                                       v);
                } else if (strcmp(a, "--platform") == 0) {
                        if (oci_platform_parse(v, &o.platform, &err) < 0)
                                return cli_fail(&err);
                } else if (strcmp(a, "--max-size") == 0) {
                        if (parse_count(a, v, true, &o.limits.max_size, &err) < 0)
                                return cli_fail(&err);
                } else if (strcmp(a, "--max-entries") == 0) {
                        if (parse_count(a, v, false, &o.limits.max_entries, &err) < 0)
                                return cli_fail(&err);
                } else if (strcmp(a, "--max-path") == 0) {
                        if (parse_count(a, v, false, &n, &err) < 0)
                                return cli_fail(&err);
                        o.limits.max_path = (size_t)(n > 65536 ? 65536 : n);
                } else if (strcmp(a, "--max-layers") == 0) {
                        if (parse_count(a, v, false, &n, &err) < 0)
                                return cli_fail(&err);
                        if (n > STORE_MAX_LAYERS) {
                                cs_error_setx(&err, EINVAL,
                                              "--max-layers %s: at most %u (an overlay mounts no "
                                              "more lower layers)",
                                              v, STORE_MAX_LAYERS);
                                return cli_fail(&err);
                        }
                        o.limits.max_layers = (size_t)n;
                } else {
                        return cli_usage_error("image", "import: unknown option `%s`", a);
                }
        }
        if (!o.source)
                return cli_usage_error("image", "import needs a SRC");
        static bool log_form = true;
        if (!quiet) {
                o.progress = image_import_progress;
                o.progress_opaque = isatty(STDERR_FILENO) ? NULL : &log_form;
        }
        r = store_open(NULL, &s, &err);
        if (r < 0)
                return cli_fail(&err);
        r = store_import(&s, &o, &res, &err);
        if (o.progress && !o.progress_opaque)
                fprintf(stderr, "\r\033[K");
        store_close(&s);
        if (r < 0)
                return cli_fail(&err);
        {
                char size[32];

                cs_human_size(res.size, size, sizeof(size));
                printf("%s %s %s: %s, %" PRIu64 " files, %zu layers (%zu already stored), %" PRIu64
                       " skipped entries (devices, fifos, sockets)%s\n",
                       res.existed ? "already stored" : "imported", res.name, res.digest, size,
                       res.files, res.layers, res.existed ? res.layers : res.layers_reused,
                       res.skipped_devices, res.skipped_xattrs ? ", some xattrs not applied" : "");
        }
        return 0;
}

int main(int argc, char **argv)
{
        if (argc > 1 && strcmp(argv[1], "--pull") == 0)
                return cmd_image_pull(argc - 2, argv + 2);
        if (argc > 1 && strcmp(argv[1], "--vault-ca") == 0)
                return cmd_vault_ca(argc - 2, argv + 2);
        if (argc > 1 && strcmp(argv[1], "--build") == 0)
                return cmd_image_build(argc - 2, argv + 2);
        return cmd_image_import(argc - 1, argv + 1);
}
