/* An import's plan: the index, manifest and config of the source read and verified, the
 * layers listed with what each must hash to. */
#include "import-private.h"
#include "store-private.h"

#include "../../common/cleanup.h"
#include "../../common/error.h"
#include "../../common/fileio.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define INDEX_DEPTH 4
#define IMPORT_BUF  (256u << 10)

void import_plan_free(struct import_plan *p)
{
        for (size_t i = 0; i < p->n_layers; i++)
                free(p->layers[i].member);
        free(p->layers);
        free(p->config);
        free(p->default_name);
        oci_config_free(&p->cfg);
}

static char *blob_member(const char *digest)
{
        char *m = NULL;

        return asprintf(&m, "blobs/sha256/%s", store_digest_hex(digest)) < 0 ? NULL : m;
}

/* A small blob (index, manifest, config), checked against its descriptor. */
int read_verified(struct image_source *src, const char *digest, int64_t size, size_t max,
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

char *source_basename(const char *source)
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

int plan_oci(struct image_source *src, const char *path, const char *ref,
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

int plan_docker(struct image_source *src, const struct import_options *o, struct import_plan *p,
                struct cs_error *err)
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
int plan_rootfs(const struct import_options *o, struct import_plan *p, struct cs_error *err)
{
        _cleanup_close_ int fd = open(o->source, O_RDONLY | O_CLOEXEC);
        _cleanup_md_ EVP_MD_CTX *md = digest_new();
        _cleanup_free_ char *buf = malloc(IMPORT_BUF);
        unsigned char sum[32];

        if (fd < 0)
                return cs_error_set(err, errno, "open `%s`", o->source);
        if (!md || !buf)
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
        digest_end(md, sum);
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

const char *import_format_name(enum image_format f)
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
