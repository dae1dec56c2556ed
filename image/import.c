/* Import: an image source verified and unpacked into the store (libarchive, libcrypto).
 * Kept apart from store.c so that a launch, which only opens the store, never loads
 * libarchive: `csandbox image import` runs the csandbox-import helper. */
#include "store.h"
#include "store-private.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define IMPORT_BUF  (256u << 10)
#define INDEX_DEPTH 4

static void md_freep(EVP_MD_CTX **m)
{
        EVP_MD_CTX_free(*m);
}
#define _cleanup_md_ __attribute__((cleanup(md_freep)))

static void source_closep(struct image_source *s)
{
        source_close(s);
}

/* ---- import ---- */

void import_options_init(struct import_options *o)
{
        memset(o, 0, sizeof(*o));
        oci_platform_host(&o->platform);
        o->limits = (struct layer_limits){
            .max_size = LAYER_DEFAULT_MAX_SIZE,
            .max_entries = LAYER_DEFAULT_MAX_ENTRIES,
            .max_path = LAYER_DEFAULT_MAX_PATH,
            .max_layers = LAYER_DEFAULT_MAX_LAYERS,
        };
}

struct import_layer {
        char *member;                    /* where the blob is in the source */
        char digest[OCI_DIGEST_LEN + 1]; /* blob digest, "" when unknown (docker-archive) */
        int64_t size;                    /* -1 when unknown */
        int compression;                 /* -1: detect */
        const char *diff_id;             /* "" for a rootfs tar */
};

struct import_plan {
        enum image_format format;
        char key[OCI_DIGEST_LEN + 1];
        char *config; /* the config JSON as stored in the image; synthesized for a rootfs tar */
        size_t config_len;
        struct oci_config cfg;
        struct import_layer *layers;
        size_t n_layers;
        char *default_name;
};

static void import_plan_free(struct import_plan *p)
{
        for (size_t i = 0; i < p->n_layers; i++)
                free(p->layers[i].member);
        free(p->layers);
        free(p->config);
        free(p->default_name);
        oci_config_free(&p->cfg);
}

static void sha256_hex(const void *buf, size_t len, char ret[OCI_DIGEST_LEN + 1])
{
        unsigned char sum[32];
        unsigned int n = 32;

        EVP_Digest(buf, len, sum, &n, EVP_sha256(), NULL);
        oci_digest_format(sum, ret);
}

static char *blob_member(const char *digest)
{
        char *m = NULL;

        return asprintf(&m, "blobs/sha256/%s", store_digest_hex(digest)) < 0 ? NULL : m;
}

/* A small blob (index, manifest, config), checked against its descriptor. */
static int read_verified(struct image_source *src, const char *digest, int64_t size, size_t max,
                         const char *what, char **ret, size_t *ret_len, struct cs_error *err)
{
        _cleanup_free_ char *member = blob_member(digest), *buf = NULL;
        char got[OCI_DIGEST_LEN + 1];
        size_t len;
        int r;

        if (!member)
                return cs_error_set(err, ENOMEM, "%s", what);
        if (size > (int64_t)max)
                return cs_error_setx(err, EFBIG, "%s (%s) is %lld bytes, over the limit of %zu",
                                     what, digest, (long long)size, max);
        r = source_read_member(src, member, (size_t)size, &buf, &len, err);
        if (r == -EFBIG)
                return cs_error_setx(err, EFBIG,
                                     "%s blob `%s` is larger than the %lld bytes its descriptor "
                                     "declares",
                                     what, member, (long long)size);
        if (r < 0)
                return cs_error_wrap(err, "%s", what);
        if ((int64_t)len != size)
                return cs_error_setx(err, EINVAL,
                                     "%s blob `%s` has %zu bytes, but its descriptor declares %lld "
                                     "(truncated or altered image)",
                                     what, member, len, (long long)size);
        sha256_hex(buf, len, got);
        if (strcmp(got, digest) != 0)
                return cs_error_setx(err, EINVAL,
                                     "%s blob `%s` has digest %s, not the %s its descriptor "
                                     "declares (corrupt or tampered image)",
                                     what, member, got, digest);
        *ret = cs_take_ptr(&buf);
        *ret_len = len;
        return 0;
}

static char *source_basename(const char *source)
{
        const char *b = strrchr(source, '/');
        char *name, *dot;

        b = b && b[1] ? b + 1 : source;
        name = strdup(b);
        if (!name)
                return NULL;
        dot = strchr(name, '.');
        if (dot && dot != name)
                *dot = '\0';
        for (char *p = name; *p; p++)
                if (!isalnum((unsigned char)*p) && !strchr("._-", *p))
                        *p = '-';
        return name;
}

static int plan_oci(struct image_source *src, const char *path, const char *ref,
                    const struct import_options *o, struct import_plan *p, struct cs_error *err)
{
        _cleanup_free_ char *index = NULL, *manifest = NULL, *ref_name = NULL;
        struct oci_manifest m = {0};
        char digest[OCI_DIGEST_LEN + 1];
        size_t len;
        int64_t size;
        enum oci_kind kind;
        int r;

        r = source_read_member(src, "index.json", OCI_MANIFEST_MAX, &index, &len, err);
        if (r < 0)
                return cs_error_wrap(err, "not an OCI image layout");
        for (int depth = 0;; depth++) {
                char *next;

                free(ref_name);
                ref_name = NULL;
                r = oci_index_select(index, len, depth ? NULL : ref, &o->platform, digest, &size,
                                     &kind, depth ? NULL : &ref_name, err);
                if (r < 0)
                        return r;
                r = read_verified(src, digest, size, OCI_MANIFEST_MAX,
                                  kind == OCI_KIND_INDEX ? "the nested index" : "the manifest",
                                  &next, &len, err);
                if (r < 0)
                        return r;
                free(index);
                index = next;
                if (kind == OCI_KIND_MANIFEST)
                        break;
                if (depth + 1 >= INDEX_DEPTH)
                        return cs_error_setx(err, ELOOP, "image indexes nest too deeply");
        }
        manifest = cs_take_ptr(&index);
        r = oci_manifest_parse(manifest, len, o->limits.max_layers, &m, err);
        if (r < 0)
                return cs_error_wrap(err, "manifest %s", digest);
        snprintf(p->key, sizeof(p->key), "%s", digest);
        r = read_verified(src, m.config_digest, m.config_size, OCI_CONFIG_MAX, "the image config",
                          &p->config, &p->config_len, err);
        if (r == 0)
                r = oci_config_parse(p->config, p->config_len, &p->cfg, err);
        if (r == 0 && p->cfg.n_diff_ids != m.n_layers)
                r = cs_error_setx(err, EINVAL,
                                  "the manifest lists %zu layers but the config has %zu diff_ids",
                                  m.n_layers, p->cfg.n_diff_ids);
        if (r == 0 && !(p->layers = calloc(m.n_layers + 1, sizeof(*p->layers))))
                r = cs_error_set(err, ENOMEM, "import");
        for (size_t i = 0; r == 0 && i < m.n_layers; i++) {
                struct import_layer *l = &p->layers[i];

                if (!(l->member = blob_member(m.layers[i].digest))) {
                        r = cs_error_set(err, ENOMEM, "import");
                        break;
                }
                snprintf(l->digest, sizeof(l->digest), "%s", m.layers[i].digest);
                l->size = m.layers[i].size;
                l->compression = (int)m.layers[i].compression;
                l->diff_id = p->cfg.diff_ids[i];
                p->n_layers++;
        }
        oci_manifest_free(&m);
        if (r < 0)
                return r;
        if (ref_name) {
                char canon[256];
                /* Dropped: a ref annotation that is no valid name is not offered as one. */
                struct cs_error ignored;

                /* a bare tag ("latest") names the layout's image; a full name stands alone */
                if (strchr(ref_name, ':') || strchr(ref_name, '/')) {
                        if (store_name_canonical(ref_name, canon, &ignored) == 0)
                                p->default_name = strdup(canon);
                } else {
                        _cleanup_free_ char *base = source_basename(path);
                        if (base && asprintf(&p->default_name, "%s:%s", base, ref_name) < 0)
                                p->default_name = NULL;
                }
        }
        return 0;
}

static bool is_hex64(const char *s, size_t n)
{
        if (n < 64)
                return false;
        for (size_t i = 0; i < 64; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return true;
}

/* "blobs/sha256/HEX" (docker 25+ saves an OCI layout inside) or "HEX.json": the name
 * itself promises a digest, so hold the content to it. */
static const char *member_promised_hex(const char *member)
{
        const char *b = strrchr(member, '/');

        if (strncmp(member, "blobs/sha256/", 13) == 0 &&
            is_hex64(member + 13, strlen(member + 13)) && strlen(member + 13) == 64)
                return member + 13;
        b = b ? b + 1 : member;
        if (is_hex64(b, strlen(b)) && strcmp(b + 64, ".json") == 0)
                return b;
        return NULL;
}

static int plan_docker(struct image_source *src, const struct import_options *o,
                       struct import_plan *p, struct cs_error *err)
{
        _cleanup_free_ char *manifest = NULL, *config_member = NULL, *tag = NULL;
        char **layers = NULL;
        const char *promised;
        size_t len, n;
        int r;

        r = source_read_member(src, "manifest.json", OCI_MANIFEST_MAX, &manifest, &len, err);
        if (r < 0)
                return cs_error_wrap(err, "not a docker archive");
        r = oci_docker_manifest_parse(manifest, len, o->limits.max_layers, &config_member, &layers,
                                      &n, &tag, err);
        if (r < 0)
                return r;
        r = source_read_member(src, config_member, OCI_CONFIG_MAX, &p->config, &p->config_len, err);
        if (r < 0) {
                oci_strv_free(layers);
                return cs_error_wrap(err, "the image config");
        }
        sha256_hex(p->config, p->config_len, p->key);
        promised = member_promised_hex(config_member);
        if (promised && strncmp(promised, store_digest_hex(p->key), 64) != 0)
                r = cs_error_setx(err, EINVAL,
                                  "the image config `%s` has digest %s, not the one its name "
                                  "promises (corrupt or tampered archive)",
                                  config_member, p->key);
        if (r == 0)
                r = oci_config_parse(p->config, p->config_len, &p->cfg, err);
        if (r == 0 && p->cfg.n_diff_ids != n)
                r = cs_error_setx(err, EINVAL,
                                  "manifest.json lists %zu layers but the config has %zu diff_ids",
                                  n, p->cfg.n_diff_ids);
        if (r == 0 && !(p->layers = calloc(n + 1, sizeof(*p->layers))))
                r = cs_error_set(err, ENOMEM, "import");
        for (size_t i = 0; r == 0 && i < n; i++) {
                struct import_layer *l = &p->layers[i];

                l->member = cs_take_ptr(&layers[i]);
                l->size = -1;
                l->compression = -1;
                l->diff_id = p->cfg.diff_ids[i];
                promised = member_promised_hex(l->member);
                if (promised && !strchr(l->member + (promised - l->member), '.'))
                        snprintf(l->digest, sizeof(l->digest), "sha256:%.64s", promised);
                p->n_layers++;
        }
        oci_strv_free(layers);
        if (r == 0 && tag) {
                char canon[256];
                /* Dropped: a RepoTag that is no valid name is not offered as one. */
                struct cs_error ignored;
                if (store_name_canonical(tag, canon, &ignored) == 0)
                        p->default_name = strdup(canon);
        }
        return r;
}

/* A rootfs tar has no config: its key is the tar's own digest, read once up front. */
static int plan_rootfs(const struct import_options *o, struct import_plan *p, struct cs_error *err)
{
        _cleanup_close_ int fd = open(o->source, O_RDONLY | O_CLOEXEC);
        _cleanup_md_ EVP_MD_CTX *md = EVP_MD_CTX_new();
        _cleanup_free_ char *buf = malloc(IMPORT_BUF);
        unsigned char sum[32];
        unsigned int n = 32;

        if (fd < 0)
                return cs_error_set(err, errno, "open `%s`", o->source);
        if (!md || !buf || !EVP_DigestInit_ex(md, EVP_sha256(), NULL))
                return cs_error_set(err, ENOMEM, "import");
        for (;;) {
                ssize_t r = read(fd, buf, IMPORT_BUF);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0)
                        return cs_error_set(err, errno, "read `%s`", o->source);
                if (r == 0)
                        break;
                EVP_DigestUpdate(md, buf, (size_t)r);
        }
        EVP_DigestFinal_ex(md, sum, &n);
        oci_digest_format(sum, p->key);
        p->layers = calloc(1, sizeof(*p->layers));
        if (!p->layers || !(p->layers[0].member = strdup(o->source)))
                return cs_error_set(err, ENOMEM, "import");
        p->layers[0].size = -1;
        p->layers[0].compression = -1;
        p->layers[0].diff_id = "";
        p->n_layers = 1;
        return 0;
}

struct blob_reader {
        struct image_source *src;
        int fd; /* a rootfs tar is read directly */
        EVP_MD_CTX *md;
        uint64_t n;
        int64_t expect;
        const char *member;
        bool eof;
        const struct import_options *o;
        struct import_progress prog;
        uint64_t before; /* blob bytes of the layers before this one */
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
        if (b->o->progress && b->n >= b->next_report) {
                b->prog.done = b->n;
                b->prog.all_done = b->before + b->n;
                b->prog.seconds = seconds_since(&b->start);
                b->o->progress(b->o->progress_opaque, &b->prog);
                b->next_report = b->n + (4u << 20);
        }
        return n;
}

static int import_layers(struct image_source *src, const struct import_options *o,
                         struct import_plan *p, struct layer_tree *tree, struct cs_error *err)
{
        uint64_t all_total = 0, before = 0; /* all_total 0: some layer's size is unknown */

        for (size_t i = 0; i < p->n_layers; i++) {
                if (p->layers[i].size < 0 || all_total + (uint64_t)p->layers[i].size < all_total) {
                        all_total = 0;
                        break;
                }
                all_total += (uint64_t)p->layers[i].size;
        }
        for (size_t i = 0; i < p->n_layers; i++) {
                struct import_layer *l = &p->layers[i];
                _cleanup_md_ EVP_MD_CTX *md = NULL;
                _cleanup_close_ int fd = -1;
                struct blob_reader b = {
                    .src = src, .fd = -1, .expect = l->size, .member = l->member, .o = o};
                unsigned char diff[32], sum[32];
                char what[160], got[OCI_DIGEST_LEN + 1];
                unsigned int mdlen = 32;
                int r;

                snprintf(what, sizeof(what), "layer %zu/%zu (%s)", i + 1, p->n_layers,
                         l->digest[0] ? l->digest : l->member);
                b.prog = (struct import_progress){.layer = i + 1,
                                                  .n_layers = p->n_layers,
                                                  .total = l->size > 0 ? (uint64_t)l->size : 0,
                                                  .what = l->digest[0] ? l->digest : l->member,
                                                  .all_done = before,
                                                  .all_total = all_total};
                b.before = before;
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
                if (l->digest[0] && !(l->compression == OCI_COMPRESSION_NONE &&
                                      strcmp(l->digest, l->diff_id) == 0)) {
                        md = EVP_MD_CTX_new();
                        if (!md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL))
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
                                             what, l->member, (unsigned long long)b.n,
                                             (long long)l->size);
                oci_digest_format(diff, got);
                if (md) {
                        char blob[OCI_DIGEST_LEN + 1];

                        EVP_DigestFinal_ex(md, sum, &mdlen);
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
                        if (asprintf(
                                &cfg,
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
                if (o->progress) {
                        b.prog.done = b.n;
                        b.prog.total = b.n;
                        b.prog.all_done = before + b.n;
                        b.prog.seconds = seconds_since(&b.start);
                        b.prog.finished = true;
                        o->progress(o->progress_opaque, &b.prog);
                }
                before += b.n;
        }
        return 0;
}

static int write_file_at(int dirfd, const char *name, const char *data, size_t len,
                         struct cs_error *err)
{
        _cleanup_close_ int fd =
            openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);

        if (fd < 0 || cs_write_all(fd, data, len) < 0)
                return cs_error_set(err, errno, "write `%s`", name);
        return 0;
}

static const char *format_name(enum image_format f)
{
        switch (f) {
        case IMAGE_FORMAT_OCI:
                return "oci";
        case IMAGE_FORMAT_OCI_ARCHIVE:
                return "oci-archive";
        case IMAGE_FORMAT_DOCKER_ARCHIVE:
                return "docker-archive";
        case IMAGE_FORMAT_ROOTFS_TAR:
                return "rootfs-tar";
        default:
                return "auto";
        }
}

/* Unpack into tmp/import-*, then move it into place. Called with the image's lock held. */
static int import_unpack(struct image_store *s, struct image_source *src,
                         const struct import_options *o, struct import_plan *p,
                         struct import_result *res, struct cs_error *err)
{
        _cleanup_close_ int tfd = -1, rootfs = -1, meta = -1, lock = -1;
        struct layer_tree *tree = NULL;
        char tname[64], from[100], to[100];
        _cleanup_json_ cJSON *info = NULL;
        _cleanup_free_ char *text = NULL;
        const struct layer_stats *st;
        int r;

        tfd = store_tmp_create(s, "import", tname, err);
        if (tfd < 0)
                return tfd;
        if (mkdirat(tfd, "rootfs", 0755) < 0 ||
            (rootfs = openat(tfd, "rootfs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
                r = cs_error_set(err, errno, "create `%s/tmp/%s/rootfs`", s->root, tname);
                goto fail;
        }
        r = layer_tree_new(rootfs, &o->limits, &tree, err);
        if (r < 0)
                goto fail;
        r = import_layers(src, o, p, tree, err);
        if (r < 0)
                goto fail;
        meta = openat(tfd, "metadata", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (meta < 0) {
                r = cs_error_set(err, errno, "create the image metadata");
                goto fail;
        }
        r = layer_tree_finish(tree, meta, err);
        if (r < 0)
                goto fail;
        r = write_file_at(tfd, "config.json", p->config, p->config_len, err);
        if (r < 0)
                goto fail;
        st = layer_tree_stats(tree);
        info = cJSON_CreateObject();
        if (!info || !cJSON_AddStringToObject(info, "digest", p->key) ||
            !cJSON_AddStringToObject(info, "source", o->source) ||
            !cJSON_AddStringToObject(info, "format", format_name(p->format)) ||
            !cJSON_AddNumberToObject(info, "created", (double)time(NULL)) ||
            !cJSON_AddNumberToObject(info, "size", (double)st->size) ||
            !cJSON_AddNumberToObject(info, "files", (double)st->files) ||
            !cJSON_AddNumberToObject(info, "layers", (double)p->n_layers) ||
            !cJSON_AddNumberToObject(info, "skipped_devices", (double)st->skipped_devices) ||
            !(text = cJSON_Print(info))) {
                r = cs_error_set(err, ENOMEM, "info.json");
                goto fail;
        }
        r = write_file_at(tfd, "info.json", text, strlen(text), err);
        if (r < 0)
                goto fail;
        res->size = st->size;
        res->files = st->files;
        res->skipped_devices = st->skipped_devices;
        res->skipped_xattrs = st->skipped_xattrs;
        layer_tree_free(tree);
        tree = NULL;

        lock = store_lock(s, err);
        if (lock < 0) {
                r = lock;
                goto fail;
        }
        snprintf(from, sizeof(from), "tmp/%s", tname);
        snprintf(to, sizeof(to), "sha256/%.64s", store_digest_hex(p->key));
        if (renameat(s->fd, from, s->fd, to) < 0) {
                r = cs_error_set(err, errno, "move the unpacked image into `%s/%s`", s->root, to);
                goto fail;
        }
        return cs_take_fd(&lock); /* the caller names it, then unlocks */
fail:
        layer_tree_free(tree);
        {
                /* Dropped: best effort: what is left in tmp/ is swept by the next import. */
                struct cs_error ignored;
                (void)store_tmp_remove(s, tname, &ignored);
        }
        return r;
}

int store_import(struct image_store *s, const struct import_options *o, struct import_result *ret,
                 struct cs_error *err)
{
        __attribute__((cleanup(source_closep))) struct image_source src = {.dir_fd = -1,
                                                                           .member_fd = -1};
        struct import_plan p = {0};
        struct import_result res = {0};
        _cleanup_free_ char *path = NULL, *ref = NULL;
        _cleanup_close_ int ilock = -1, slock = -1;
        _cleanup_json_ cJSON *names = NULL;
        char lockname[80];
        struct stat st;
        int r;

        path = strdup(o->source);
        if (!path)
                return cs_error_set(err, ENOMEM, "import");
        /* DIR:REF picks a ref from a layout directory's index */
        if (stat(path, &st) < 0) {
                char *colon = strrchr(path, ':');
                if (colon && colon != path) {
                        *colon = '\0';
                        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode) && colon[1]) {
                                ref = strdup(colon + 1);
                                if (!ref)
                                        return cs_error_set(err, ENOMEM, "import");
                        } else {
                                *colon = ':';
                        }
                }
                if (!ref)
                        return cs_error_set(err, errno ? errno : ENOENT, "image source `%s`",
                                            o->source);
        }
        p.format = o->format;
        if (p.format == IMAGE_FORMAT_AUTO) {
                if (S_ISDIR(st.st_mode))
                        p.format = IMAGE_FORMAT_OCI;
                else if ((r = source_detect_tar(path, &p.format, err)) < 0)
                        return r;
        }
        if ((p.format == IMAGE_FORMAT_OCI) != S_ISDIR(st.st_mode))
                return cs_error_setx(err, EINVAL, "image source `%s`: --format %s needs a %s",
                                     o->source, format_name(p.format),
                                     p.format == IMAGE_FORMAT_OCI ? "directory" : "file");
        if (p.format == IMAGE_FORMAT_OCI || p.format == IMAGE_FORMAT_OCI_ARCHIVE) {
                r = source_open(path, p.format == IMAGE_FORMAT_OCI_ARCHIVE, &src, err);
                if (r == 0)
                        r = plan_oci(&src, path, ref, o, &p, err);
        } else if (p.format == IMAGE_FORMAT_DOCKER_ARCHIVE) {
                r = source_open(path, true, &src, err);
                if (r == 0)
                        r = plan_docker(&src, o, &p, err);
        } else {
                r = plan_rootfs(o, &p, err);
        }
        if (r < 0)
                goto out;
        if (o->name)
                r = store_name_canonical(o->name, res.name, err);
        else if (p.default_name)
                r = store_name_canonical(p.default_name, res.name, err);
        else {
                _cleanup_free_ char *base = source_basename(path);
                r = base ? store_name_canonical(base, res.name, err)
                         : cs_error_set(err, ENOMEM, "import");
        }
        if (r < 0)
                goto out;
        snprintf(res.digest, sizeof(res.digest), "%s", p.key);
        res.layers = p.n_layers;

        /* one import per image does the work; the others wait and find it done */
        snprintf(lockname, sizeof(lockname), "locks/%.64s", store_digest_hex(p.key));
        ilock = openat(s->fd, lockname, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (ilock < 0) {
                r = cs_error_set(err, errno, "open `%s/%s`", s->root, lockname);
                goto out;
        }
        while ((r = flock(ilock, LOCK_EX)) < 0 && errno == EINTR)
                ;
        if (r < 0) {
                r = cs_error_set(err, errno, "lock `%s/%s`", s->root, lockname);
                goto out;
        }
        {
                /* Dropped: best effort: what is left in tmp/ is swept by the next import. */
                struct cs_error ignored;
                (void)store_tmp_sweep(s, NULL, &ignored);
        }
        if (store_image_present(s, p.key)) {
                res.existed = true;
                slock = store_lock(s, err);
                if (slock < 0) {
                        r = slock;
                        goto out;
                }
                {
                        _cleanup_free_ char *info = NULL;
                        char ipath[100];
                        size_t len;
                        cJSON *j;

                        snprintf(ipath, sizeof(ipath), "sha256/%.64s/info.json",
                                 store_digest_hex(p.key));
                        if (cs_read_file_at(s->fd, ipath, INFO_MAX, true, &info, &len, err) == 0 &&
                            (j = cJSON_ParseWithLength(info, len))) {
                                const cJSON *v;
                                if ((v = cJSON_GetObjectItem(j, "size")) && cJSON_IsNumber(v))
                                        res.size = (uint64_t)v->valuedouble;
                                if ((v = cJSON_GetObjectItem(j, "files")) && cJSON_IsNumber(v))
                                        res.files = (uint64_t)v->valuedouble;
                                if ((v = cJSON_GetObjectItem(j, "skipped_devices")) &&
                                    cJSON_IsNumber(v))
                                        res.skipped_devices = (uint64_t)v->valuedouble;
                                cJSON_Delete(j);
                        }
                }
        } else {
                slock = import_unpack(s, &src, o, &p, &res, err);
                if (slock < 0) {
                        r = slock;
                        goto out;
                }
        }
        r = store_names_read(s, &names, err);
        if (r == 0) {
                cJSON_DeleteItemFromObjectCaseSensitive(names, res.name);
                if (!cJSON_AddStringToObject(names, res.name, res.digest))
                        r = cs_error_set(err, ENOMEM, "names.json");
        }
        if (r == 0)
                r = store_names_write(s, names, err);
        if (r < 0)
                r = cs_error_wrap(err, "the image is stored as %s but naming it `%s` failed",
                                  res.digest, res.name);
out:
        import_plan_free(&p);
        if (r == 0)
                *ret = res;
        return r < 0 ? r : 0;
}
