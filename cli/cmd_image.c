/* The image commands: parse flags, call image/store, print. */
#include "cmd_image.h"
#include "cli.h"

#include "../runner/runner.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"
#include "../common/path.h"
#include "../common/engine.h"
#include "../image/store/store.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
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
    "      --max-layers N        layer count limit (default 256, at most 500)\n"
    "      --quiet               no progress output\n"
    "  pull REF [OPTIONS]    download REF from its registry and store it under its full name\n"
    "                        HOST/NAME:TAG (or HOST/NAME@DIGEST). REF is\n"
    "                        [HOST[:PORT]/]NAME[:TAG][@sha256:DIGEST]; no TAG means :latest.\n"
    "                        A NAME without a HOST is resolved by podman's registries.conf\n"
    "                        ($CONTAINERS_REGISTRIES_CONF, else ~/.config/containers/ or\n"
    "                        /etc/containers/registries.conf, and their registries.conf.d/):\n"
    "                        an [aliases] entry, else the one unqualified-search registry\n"
    "                        (several are refused with the choices); without either it means\n"
    "                        docker.io, as docker reads it (`debian:12` is\n"
    "                        docker.io/library/debian:12). Its [[registry]] tables are applied:\n"
    "                        mirrors first, location rewrites, insecure, blocked. Credentials\n"
    "                        come from the files podman and docker login write\n"
    "                        ($REGISTRY_AUTH_FILE, $XDG_RUNTIME_DIR/containers/auth.json,\n"
    "                        ~/.config/containers/auth.json, ~/.docker/config.json)\n"
    "      --tls-verify=false    unverified certificates, and plain http when the registry\n"
    "                            has no TLS (default: https verified against the system's CA\n"
    "                            store and containers/certs.d/HOST/*.crt)\n"
    "      --platform OS/ARCH[/VARIANT]  from a multi-platform image (default: this machine)\n"
    "      --missing             an image already stored under REF's name is not asked for\n"
    "                            again (no network)\n"
    "      --quiet               no progress output\n"
    "  build [OPTIONS] CONTEXT  build an image from CONTEXT/Containerfile (else Dockerfile):\n"
    "                        FROM (a stored image, else pulled as `pull` does), RUN (in\n"
    "                        csandbox's sandbox as root of a user namespace that maps your\n"
    "                        subordinate ids from /etc/subuid, network through pasta), COPY,\n"
    "                        ADD, ENV, ARG, WORKDIR, USER, ENTRYPOINT, CMD, LABEL, SHELL,\n"
    "                        EXPOSE, VOLUME, multi-stage builds; each step's changes are a layer,\n"
    "                        cached; prints the image's digest\n"
    "      -f, --file FILE       the Containerfile (default: CONTEXT/Containerfile)\n"
    "      -t, --tag NAME[:TAG]  name the image (repeatable)\n"
    "      --build-arg NAME=VALUE  a value for an ARG (repeatable)\n"
    "      --target STAGE        build up to that stage\n"
    "      --pull                pull FROM images even when stored\n"
    "      --no-cache            run every step again\n"
    "      --network pasta|none|host  RUN steps' network (default pasta; host: the\n"
    "                            caller's own, e.g. a session's)\n"
    "      --tls-verify=false    as for pull\n"
    "      --quiet               no progress output\n"
    "  ls [--json]           list the stored images\n"
    "  inspect NAME          print the image config as JSON\n"
    "  rm NAME...            remove names; an image goes with its last name, and with it\n"
    "                        the layers no other image lists\n"
    "  prune                 remove unnamed images, unused layers and leftovers of killed\n"
    "                        imports\n"
    "\n"
    "The store is ${XDG_DATA_HOME:-~/.local/share}/csandbox/images; each layer is stored\n"
    "once and shared by every image that has it.\n"
    "\n"
    "CSANDBOX_READONLY_STORE: a colon-separated list of more stores (each a directory like\n"
    "the one above, e.g. the host user's store bound read-only into a session). Names and\n"
    "digests are looked for in the writable store first, then in these in order; ls lists\n"
    "their images marked R/O; nothing writes, removes or prunes there.\n";

/* The writable store and the read-only ones (CSANDBOX_READONLY_STORE); 0 or an exit status
 * (printed). */
static int stores_open(struct image_store *w, struct image_store **ro, size_t *n_ro)
{
        struct cs_error err = {0};

        *ro = NULL;
        *n_ro = 0;
        if (store_open(NULL, w, &err) < 0)
                return cli_fail(&err);
        if (store_open_readonly(w, ro, n_ro, &err) < 0) {
                store_close(w);
                return cli_fail(&err);
        }
        return 0;
}

static int image_ls(int argc, char **argv)
{
        struct image_store s, *ro;
        struct image_info *v = NULL;
        struct cs_error err = {0};
        bool json = argc == 1 && strcmp(argv[0], "--json") == 0, any_ro = false;
        size_t n = 0, n_ro;
        int r;

        if (argc > 0 && !json)
                return cli_usage_error("image", "ls: unexpected `%s`", argv[0]);
        r = stores_open(&s, &ro, &n_ro);
        if (r != 0)
                return r;
        r = store_list_all(&s, ro, n_ro, &v, &n, &err);
        if (r < 0) {
                store_close_all(ro, n_ro);
                store_close(&s);
                return cli_fail(&err);
        }
        for (size_t i = 0; i < n; i++)
                any_ro |= v[i].store != NULL;
        if (json)
                printf("[");
        else
                printf("%-40s %-19s %10s  %-*s%s\n", "NAME", "DIGEST", "SIZE", any_ro ? 16 : 0,
                       "CREATED", any_ro ? "  R/O" : "");
        for (size_t i = 0; i < n; i++) {
                char size[32], created[32];
                time_t t = (time_t)v[i].created;
                struct tm tm;

                if (json) {
                        _cleanup_free_ char *store = NULL;
                        cJSON *str = v[i].store ? cJSON_CreateString(v[i].store) : NULL;

                        store = str ? cJSON_PrintUnformatted(str) : NULL;
                        cJSON_Delete(str);
                        printf("%s{\"name\":\"%s\",\"digest\":\"%s\",\"size\":%" PRIu64
                               ",\"files\":%" PRIu64 ",\"created\":%" PRId64
                               ",\"read_only\":%s%s%s}",
                               i ? "," : "", v[i].name, v[i].digest, v[i].size, v[i].files,
                               v[i].created, v[i].store ? "true" : "false",
                               store ? ",\"store\":" : "", store ? store : "");
                        continue;
                }
                cs_human_size(v[i].size, size, sizeof(size));
                strftime(created, sizeof(created), "%Y-%m-%d %H:%M", localtime_r(&t, &tm));
                printf("%-40s %-19.19s %10s  %-*s%s\n", v[i].name, v[i].digest, size,
                       any_ro ? 16 : 0, created,
                       !any_ro      ? ""
                       : v[i].store ? "  R/O"
                                    : "  -");
        }
        if (json)
                printf("]\n");
        image_info_free(v, n);
        store_close_all(ro, n_ro);
        store_close(&s);
        return 0;
}

static int image_inspect(int argc, char **argv)
{
        struct image_store s, *ro, *at = NULL;
        struct cs_error err = {0};
        char digest[OCI_DIGEST_LEN + 1];
        char *json = NULL;
        size_t n_ro;
        int r;

        if (argc != 1)
                return cli_usage_error("image", "inspect takes one NAME");
        r = stores_open(&s, &ro, &n_ro);
        if (r != 0)
                return r;
        r = store_find(&s, ro, n_ro, argv[0], digest, &at, &err);
        if (r == 0)
                r = store_inspect(at, digest, &json, &err);
        store_close_all(ro, n_ro);
        store_close(&s);
        if (r < 0)
                return cli_fail(&err);
        printf("%s\n", json);
        free(json);
        return 0;
}

static int image_rm(int argc, char **argv)
{
        struct image_store s, *ro;
        struct cs_error err = {0};
        size_t n_ro;
        int status = 0;

        if (argc < 1)
                return cli_usage_error("image", "rm takes one or more NAMEs");
        status = stores_open(&s, &ro, &n_ro);
        if (status != 0)
                return status;
        for (int i = 0; i < argc; i++) {
                if (store_remove_any(&s, ro, n_ro, argv[i], &err) < 0)
                        status = cli_fail(&err);
                else
                        printf("removed %s\n", argv[i]);
        }
        store_close_all(ro, n_ro);
        store_close(&s);
        return status;
}

static int image_prune(int argc, char **argv)
{
        struct image_store s;
        struct cs_error err = {0};
        size_t images = 0, layers = 0, tmp = 0;
        int r;

        (void)argv;
        if (argc > 0)
                return cli_usage_error("image", "prune takes no arguments");
        r = store_open(NULL, &s, &err);
        if (r == 0)
                r = store_prune(&s, &images, &layers, &tmp, &err);
        store_close(&s);
        if (r < 0)
                return cli_fail(&err);
        printf("pruned %zu unnamed images, %zu unused layers and %zu leftover temporary "
               "directories\n",
               images, layers, tmp);
        return 0;
}

/* `image import` and `image pull` run the csandbox-import helper beside this binary:
 * unpacking needs libarchive and libcrypto, pulling libcurl, which the binary every launch
 * starts does not load. pull is passed on as its first argument, `--pull`. */
static int image_import_helper(const char *what, int argc, char **argv)
{
        _cleanup_free_ char *helper = cs_self_sibling("csandbox-import");
        char **v;

        if (!helper)
                return cli_usage_error("image", "cannot find csandbox's own path (/proc/self/exe)");
        v = calloc((size_t)argc + 3, sizeof(*v));
        if (!v)
                return CS_EXIT_SETUP;
        v[0] = "csandbox-import";
        if (what)
                v[1] = (char *)what;
        for (int i = 0; i < argc; i++)
                v[i + 1 + (what != NULL)] = argv[i];
        cs_engine_execv(helper, v);
        fprintf(stderr,
                "csandbox: image import: cannot run %s: %s; it is built and installed beside "
                "csandbox (ninja -C build builds both)\n",
                helper, strerror(errno));
        free(v);
        return CS_EXIT_SETUP;
}

int cmd_image(int argc, char **argv)
{
        if (argc < 1 || strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0 ||
            strcmp(argv[0], "help") == 0) {
                fputs(usage_image, argc < 1 ? stderr : stdout);
                return argc < 1 ? CS_EXIT_SETUP : 0;
        }
        if (strcmp(argv[0], "import") == 0)
                return image_import_helper(NULL, argc - 1, argv + 1);
        if (strcmp(argv[0], "pull") == 0)
                return image_import_helper("--pull", argc - 1, argv + 1);
        if (strcmp(argv[0], "build") == 0)
                return image_import_helper("--build", argc - 1, argv + 1);
        if (strcmp(argv[0], "ls") == 0 || strcmp(argv[0], "list") == 0)
                return image_ls(argc - 1, argv + 1);
        if (strcmp(argv[0], "inspect") == 0)
                return image_inspect(argc - 1, argv + 1);
        if (strcmp(argv[0], "rm") == 0)
                return image_rm(argc - 1, argv + 1);
        if (strcmp(argv[0], "prune") == 0)
                return image_prune(argc - 1, argv + 1);
        return cli_usage_error("image", "unknown command `%s`", argv[0]);
}
