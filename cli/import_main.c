/* csandbox-import: `csandbox image import`, in a binary of its own so that libarchive and
 * libcrypto are loaded only to unpack an image (csandbox execs this helper). */
#include "cmd_image.h"
#include "progress.h"
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
        if (argc > 1 && strcmp(argv[1], "--save") == 0)
                return cmd_image_save(argc - 2, argv + 2);
        return cmd_image_import(argc - 1, argv + 1);
}
