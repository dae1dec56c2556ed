/* The image commands: parse flags, call image/store, print. */
#include "cmd_image.h"

#include "runner.h"

#include "../common/error.h"
#include "../image/store.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char usage_image[] =
    "Usage: csandbox image COMMAND\n"
    "\n"
    "  import SRC [OPTIONS]  store the image at SRC: an OCI layout directory (DIR or\n"
    "                        DIR:REF), an oci-archive or docker-archive tar, or a rootfs tar\n"
    "      --name NAME[:TAG]     name it (default: from the image, else SRC's name)\n"
    "      --format F            oci, oci-archive, docker-archive or rootfs-tar (default:\n"
    "                            detected)\n"
    "      --platform OS/ARCH[/VARIANT]  pick from a multi-platform index (default: linux\n"
    "                            and this machine's architecture)\n"
    "      --max-size BYTES      unpacked size limit (K/M/G/T suffixes; default 64G)\n"
    "      --max-entries N       tar entry limit over all layers (default 4000000)\n"
    "      --max-path BYTES      entry name length limit (default 4096)\n"
    "      --max-layers N        layer count limit (default 256)\n"
    "      --quiet               no progress output\n"
    "  ls [--json]           list the stored images\n"
    "  inspect NAME          print the image config as JSON\n"
    "  rm NAME...            remove names; an image goes with its last name\n"
    "  prune                 remove unnamed images and leftovers of killed imports\n"
    "\n"
    "The store is ${XDG_DATA_HOME:-~/.local/share}/csandbox/images.\n";

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...)
{
        va_list ap;

        fprintf(stderr, "csandbox: image: ");
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fprintf(stderr, "; see `csandbox image --help`\n");
        return CS_EXIT_SETUP;
}

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

static void human(uint64_t n, char *buf, size_t len)
{
        const char *units[] = {"B", "KB", "MB", "GB", "TB"};
        double v = (double)n;
        int u = 0;

        while (v >= 1000 && u < 4) {
                v /= 1000;
                u++;
        }
        snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", v, units[u]);
}

static void show_progress(void *opaque, const struct import_progress *p)
{
        char done[32], total[32];

        (void)opaque;
        human(p->done, done, sizeof(done));
        human(p->total, total, sizeof(total));
        fprintf(stderr, "\r\033[Kimporting layer %zu/%zu: %s%s%s", p->layer, p->n_layers, done,
                p->total ? " of " : "", p->total ? total : "");
}

static int image_import(int argc, char **argv)
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
                                return usage_error("import takes one SRC (`%s` is extra)", a);
                        o.source = a;
                        continue;
                }
                if (!v)
                        return usage_error("%s needs a value", a);
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
                                return usage_error("--format `%s`: expected oci, oci-archive, "
                                                   "docker-archive or rootfs-tar",
                                                   v);
                } else if (strcmp(a, "--platform") == 0) {
                        if (oci_platform_parse(v, &o.platform, &err) < 0)
                                return runner_fail(&err);
                } else if (strcmp(a, "--max-size") == 0) {
                        if (parse_count(a, v, true, &o.limits.max_size, &err) < 0)
                                return runner_fail(&err);
                } else if (strcmp(a, "--max-entries") == 0) {
                        if (parse_count(a, v, false, &o.limits.max_entries, &err) < 0)
                                return runner_fail(&err);
                } else if (strcmp(a, "--max-path") == 0) {
                        if (parse_count(a, v, false, &n, &err) < 0)
                                return runner_fail(&err);
                        o.limits.max_path = (size_t)(n > 65536 ? 65536 : n);
                } else if (strcmp(a, "--max-layers") == 0) {
                        if (parse_count(a, v, false, &n, &err) < 0)
                                return runner_fail(&err);
                        o.limits.max_layers = (size_t)(n > 65536 ? 65536 : n);
                } else {
                        return usage_error("import: unknown option `%s`", a);
                }
        }
        if (!o.source)
                return usage_error("import needs a SRC");
        if (!quiet && isatty(STDERR_FILENO))
                o.progress = show_progress;
        r = store_open(NULL, &s, &err);
        if (r < 0)
                return runner_fail(&err);
        r = store_import(&s, &o, &res, &err);
        if (o.progress)
                fprintf(stderr, "\r\033[K");
        store_close(&s);
        if (r < 0)
                return runner_fail(&err);
        {
                char size[32];

                human(res.size, size, sizeof(size));
                printf("%s %s %s: %s, %" PRIu64 " files, %zu layers, %" PRIu64
                       " skipped entries (devices, fifos, sockets)%s\n",
                       res.existed ? "already stored" : "imported", res.name, res.digest, size,
                       res.files, res.layers, res.skipped_devices,
                       res.skipped_xattrs ? ", some xattrs not applied" : "");
        }
        return 0;
}

static int image_ls(int argc, char **argv)
{
        struct image_store s;
        struct image_info *v = NULL;
        struct cs_error err = {0};
        bool json = argc == 1 && strcmp(argv[0], "--json") == 0;
        size_t n = 0;
        int r;

        if (argc > 0 && !json)
                return usage_error("ls: unexpected `%s`", argv[0]);
        r = store_open(NULL, &s, &err);
        if (r == 0)
                r = store_list(&s, &v, &n, &err);
        store_close(&s);
        if (r < 0)
                return runner_fail(&err);
        if (json)
                printf("[");
        else
                printf("%-40s %-19s %10s  %s\n", "NAME", "DIGEST", "SIZE", "CREATED");
        for (size_t i = 0; i < n; i++) {
                char size[32], created[32];
                time_t t = (time_t)v[i].created;
                struct tm tm;

                if (json) {
                        printf("%s{\"name\":\"%s\",\"digest\":\"%s\",\"size\":%" PRIu64
                               ",\"files\":%" PRIu64 ",\"created\":%" PRId64 "}",
                               i ? "," : "", v[i].name, v[i].digest, v[i].size, v[i].files,
                               v[i].created);
                        continue;
                }
                human(v[i].size, size, sizeof(size));
                strftime(created, sizeof(created), "%Y-%m-%d %H:%M", localtime_r(&t, &tm));
                printf("%-40s %-19.19s %10s  %s\n", v[i].name, v[i].digest, size, created);
        }
        if (json)
                printf("]\n");
        image_info_free(v, n);
        return 0;
}

static int image_inspect(int argc, char **argv)
{
        struct image_store s;
        struct cs_error err = {0};
        char *json = NULL;
        int r;

        if (argc != 1)
                return usage_error("inspect takes one NAME");
        r = store_open(NULL, &s, &err);
        if (r == 0)
                r = store_inspect(&s, argv[0], &json, &err);
        store_close(&s);
        if (r < 0)
                return runner_fail(&err);
        printf("%s\n", json);
        free(json);
        return 0;
}

static int image_rm(int argc, char **argv)
{
        struct image_store s;
        struct cs_error err = {0};
        int status = 0;

        if (argc < 1)
                return usage_error("rm takes one or more NAMEs");
        if (store_open(NULL, &s, &err) < 0)
                return runner_fail(&err);
        for (int i = 0; i < argc; i++) {
                if (store_remove(&s, argv[i], &err) < 0)
                        status = runner_fail(&err);
                else
                        printf("removed %s\n", argv[i]);
        }
        store_close(&s);
        return status;
}

static int image_prune(int argc, char **argv)
{
        struct image_store s;
        struct cs_error err = {0};
        size_t images = 0, tmp = 0;
        int r;

        (void)argv;
        if (argc > 0)
                return usage_error("prune takes no arguments");
        r = store_open(NULL, &s, &err);
        if (r == 0)
                r = store_prune(&s, &images, &tmp, &err);
        store_close(&s);
        if (r < 0)
                return runner_fail(&err);
        printf("pruned %zu unnamed images and %zu leftover temporary directories\n", images, tmp);
        return 0;
}

int cmd_image(int argc, char **argv)
{
        if (argc < 1 || strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0 ||
            strcmp(argv[0], "help") == 0) {
                fputs(usage_image, argc < 1 ? stderr : stdout);
                return argc < 1 ? CS_EXIT_SETUP : 0;
        }
        if (strcmp(argv[0], "import") == 0)
                return image_import(argc - 1, argv + 1);
        if (strcmp(argv[0], "ls") == 0 || strcmp(argv[0], "list") == 0)
                return image_ls(argc - 1, argv + 1);
        if (strcmp(argv[0], "inspect") == 0)
                return image_inspect(argc - 1, argv + 1);
        if (strcmp(argv[0], "rm") == 0)
                return image_rm(argc - 1, argv + 1);
        if (strcmp(argv[0], "prune") == 0)
                return image_prune(argc - 1, argv + 1);
        return usage_error("unknown command `%s`", argv[0]);
}
