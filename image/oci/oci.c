#include "oci.h"

#include "../../common/cleanup.h"
#include "../../common/error.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MT_OCI_INDEX       "application/vnd.oci.image.index.v1+json"
#define MT_OCI_MANIFEST    "application/vnd.oci.image.manifest.v1+json"
#define MT_OCI_CONFIG      "application/vnd.oci.image.config.v1+json"
#define MT_DOCKER_LIST     "application/vnd.docker.distribution.manifest.list.v2+json"
#define MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define MT_DOCKER_CONFIG   "application/vnd.docker.container.image.v1+json"

static void json_deletep(cJSON **j)
{
        cJSON_Delete(*j);
}
#define _cleanup_json_ __attribute__((cleanup(json_deletep)))

void oci_strv_free(char **v)
{
        if (!v)
                return;
        for (char **p = v; *p; p++)
                free(*p);
        free(v);
}

int oci_digest_check(const char *digest, const char *what, struct cs_error *err)
{
        const char *hex;

        if (!digest)
                return cs_error_setx(err, EINVAL, "%s: the digest is missing", what);
        if (strncmp(digest, "sha256:", 7) != 0) {
                if (strchr(digest, ':'))
                        return cs_error_setx(err, ENOTSUP,
                                             "%s: digest `%.80s` uses an unsupported algorithm "
                                             "(only sha256 is verified)",
                                             what, digest);
                return cs_error_setx(err, EINVAL, "%s: `%.80s` is not a digest", what, digest);
        }
        hex = digest + 7;
        for (size_t i = 0; i < 64; i++)
                if (!((hex[i] >= '0' && hex[i] <= '9') || (hex[i] >= 'a' && hex[i] <= 'f')))
                        return cs_error_setx(err, EINVAL,
                                             "%s: digest `%.80s` is not 64 lowercase hex digits",
                                             what, digest);
        if (hex[64] != '\0')
                return cs_error_setx(err, EINVAL, "%s: digest `%.80s` is too long", what, digest);
        return 0;
}

void oci_digest_format(const unsigned char sum[32], char ret[OCI_DIGEST_LEN + 1])
{
        static const char hexdig[] = "0123456789abcdef";

        memcpy(ret, "sha256:", 7);
        for (size_t i = 0; i < 32; i++) {
                ret[7 + 2 * i] = hexdig[sum[i] >> 4];
                ret[8 + 2 * i] = hexdig[sum[i] & 15];
        }
        ret[OCI_DIGEST_LEN] = '\0';
}

int oci_layer_media_type(const char *mt, enum oci_compression *ret, struct cs_error *err)
{
        static const struct {
                const char *name;
                enum oci_compression c;
        } known[] = {
            {"application/vnd.oci.image.layer.v1.tar", OCI_COMPRESSION_NONE},
            {"application/vnd.oci.image.layer.v1.tar+gzip", OCI_COMPRESSION_GZIP},
            {"application/vnd.oci.image.layer.v1.tar+zstd", OCI_COMPRESSION_ZSTD},
            {"application/vnd.docker.image.rootfs.diff.tar", OCI_COMPRESSION_NONE},
            {"application/vnd.docker.image.rootfs.diff.tar.gzip", OCI_COMPRESSION_GZIP},
            {"application/vnd.docker.image.rootfs.diff.tar.zstd", OCI_COMPRESSION_ZSTD},
        };

        if (!mt)
                return cs_error_setx(err, EINVAL, "the layer has no mediaType");
        for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
                if (strcmp(mt, known[i].name) == 0) {
                        *ret = known[i].c;
                        return 0;
                }
        if (strstr(mt, "nondistributable") || strstr(mt, "foreign"))
                return cs_error_setx(err, ENOTSUP,
                                     "layer media type `%.120s` is a foreign (non-distributable) "
                                     "layer whose content is not in the image; pull it with a "
                                     "tool that fetches foreign layers and re-export",
                                     mt);
        return cs_error_setx(err, ENOTSUP,
                             "layer media type `%.120s` is not supported (tar, tar+gzip or "
                             "tar+zstd layers only)",
                             mt);
}

void oci_platform_host(struct oci_platform *ret)
{
        const char *arch =
#if defined(__x86_64__)
            "amd64";
#elif defined(__aarch64__)
            "arm64";
#elif defined(__i386__)
            "386";
#elif defined(__arm__)
            "arm";
#elif defined(__powerpc64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            "ppc64le";
#elif defined(__s390x__)
            "s390x";
#elif defined(__riscv) && __riscv_xlen == 64
            "riscv64";
#else
            "unknown";
#endif
        memset(ret, 0, sizeof(*ret));
        snprintf(ret->os, sizeof(ret->os), "linux");
        snprintf(ret->arch, sizeof(ret->arch), "%s", arch);
}

int oci_platform_parse(const char *s, struct oci_platform *ret, struct cs_error *err)
{
        struct oci_platform p = {{0}};
        const char *parts[3] = {0};
        size_t lens[3] = {0}, n = 0;
        const char *start = s;

        for (const char *c = s;; c++) {
                if (*c == '/' || *c == '\0') {
                        if (n == 3)
                                return cs_error_setx(
                                    err, EINVAL, "--platform `%s`: expected OS/ARCH[/VARIANT]", s);
                        parts[n] = start;
                        lens[n++] = (size_t)(c - start);
                        start = c + 1;
                }
                if (*c == '\0')
                        break;
        }
        for (size_t i = 0; i < n; i++)
                if (lens[i] == 0 || lens[i] >= sizeof(p.os))
                        return cs_error_setx(err, EINVAL,
                                             "--platform `%s`: expected OS/ARCH[/VARIANT]", s);
        if (n == 1) {
                snprintf(p.os, sizeof(p.os), "linux");
                snprintf(p.arch, sizeof(p.arch), "%.*s", (int)lens[0], parts[0]);
        } else {
                snprintf(p.os, sizeof(p.os), "%.*s", (int)lens[0], parts[0]);
                snprintf(p.arch, sizeof(p.arch), "%.*s", (int)lens[1], parts[1]);
                if (n == 3)
                        snprintf(p.variant, sizeof(p.variant), "%.*s", (int)lens[2], parts[2]);
        }
        *ret = p;
        return 0;
}

static const char *json_string(const cJSON *obj, const char *key)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

        return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int json_parse(const char *json, size_t len, const char *what, cJSON **ret,
                      struct cs_error *err)
{
        cJSON *j = cJSON_ParseWithLength(json, len);

        if (!j)
                return cs_error_setx(err, EINVAL, "%s is not valid JSON", what);
        if (!cJSON_IsObject(j) && !cJSON_IsArray(j)) {
                cJSON_Delete(j);
                return cs_error_setx(err, EINVAL, "%s is not a JSON object", what);
        }
        *ret = j;
        return 0;
}

/* size must be a non-negative integer that a double represents exactly. */
static int json_size(const cJSON *desc, const char *what, int64_t *ret, struct cs_error *err)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(desc, "size");

        if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 9007199254740992.0 ||
            v->valuedouble != (double)(int64_t)v->valuedouble)
                return cs_error_setx(err, EINVAL, "%s: the descriptor's size is missing or invalid",
                                     what);
        *ret = (int64_t)v->valuedouble;
        return 0;
}

int oci_document_kind(const char *json, size_t len, const char *what, enum oci_kind *ret,
                      struct cs_error *err)
{
        _cleanup_json_ cJSON *j = NULL;
        const char *mt;
        int r;

        r = json_parse(json, len, what, &j, err);
        if (r < 0)
                return r;
        mt = json_string(j, "mediaType");
        if (mt && (strcmp(mt, MT_OCI_INDEX) == 0 || strcmp(mt, MT_DOCKER_LIST) == 0))
                *ret = OCI_KIND_INDEX;
        else if (mt && (strcmp(mt, MT_OCI_MANIFEST) == 0 || strcmp(mt, MT_DOCKER_MANIFEST) == 0))
                *ret = OCI_KIND_MANIFEST;
        else if (mt)
                return cs_error_setx(err, ENOTSUP,
                                     "%s: media type `%.120s` is not an image index "
                                     "or manifest",
                                     what, mt);
        else if (cJSON_GetObjectItemCaseSensitive(j, "manifests"))
                *ret = OCI_KIND_INDEX;
        else if (cJSON_GetObjectItemCaseSensitive(j, "layers"))
                *ret = OCI_KIND_MANIFEST;
        else
                return cs_error_setx(err, EINVAL, "%s is neither an image index nor a manifest",
                                     what);
        return 0;
}

static bool platform_matches(const cJSON *desc, const struct oci_platform *want)
{
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(desc, "platform");
        const char *os, *arch, *variant;

        if (!p)
                return true; /* a descriptor without a platform is for any */
        os = json_string(p, "os");
        arch = json_string(p, "architecture");
        variant = json_string(p, "variant");
        if (!os || !arch || strcmp(os, want->os) != 0 || strcmp(arch, want->arch) != 0)
                return false;
        return want->variant[0] == '\0' || (variant && strcmp(variant, want->variant) == 0);
}

int oci_index_select(const char *json, size_t len, const char *ref,
                     const struct oci_platform *platform, char ret_digest[OCI_DIGEST_LEN + 1],
                     int64_t *ret_size, enum oci_kind *ret_kind, char **ret_ref_name,
                     struct cs_error *err)
{
        _cleanup_json_ cJSON *j = NULL;
        const cJSON *manifests, *d, *found = NULL;
        char seen[512] = "";
        size_t seen_len = 0;
        int64_t size = 0;
        int r;

        r = json_parse(json, len, "index.json", &j, err);
        if (r < 0)
                return r;
        d = cJSON_GetObjectItemCaseSensitive(j, "schemaVersion");
        if (!cJSON_IsNumber(d) || d->valueint != 2)
                return cs_error_setx(err, ENOTSUP,
                                     "the image index has schemaVersion other than 2; it is not "
                                     "an OCI image index this version understands");
        manifests = cJSON_GetObjectItemCaseSensitive(j, "manifests");
        if (!cJSON_IsArray(manifests) || cJSON_GetArraySize(manifests) == 0)
                return cs_error_setx(err, EINVAL, "the image index lists no manifests");
        cJSON_ArrayForEach(d, manifests)
        {
                const cJSON *ann = cJSON_GetObjectItemCaseSensitive(d, "annotations");
                const char *name = json_string(ann, "org.opencontainers.image.ref.name");
                const cJSON *p = cJSON_GetObjectItemCaseSensitive(d, "platform");

                if (ref && (!name || strcmp(name, ref) != 0))
                        continue;
                if (p && seen_len + 80 < sizeof(seen)) {
                        const char *os = json_string(p, "os"),
                                   *arch = json_string(p, "architecture");
                        seen_len += (size_t)snprintf(seen + seen_len, sizeof(seen) - seen_len,
                                                     "%s%.30s/%.30s", seen_len ? ", " : "",
                                                     os ? os : "?", arch ? arch : "?");
                }
                if (platform_matches(d, platform)) {
                        found = d;
                        break;
                }
        }
        if (!found) {
                if (ref && seen_len == 0)
                        return cs_error_setx(err, ENOENT,
                                             "the image index has no manifest named `%s` "
                                             "(org.opencontainers.image.ref.name)",
                                             ref);
                return cs_error_setx(err, ENOENT,
                                     "the image index has no manifest for %s/%s%s%s (it has: %s); "
                                     "choose one with --platform",
                                     platform->os, platform->arch, platform->variant[0] ? "/" : "",
                                     platform->variant, seen_len ? seen : "none");
        }
        r = oci_digest_check(json_string(found, "digest"), "the image index's manifest", err);
        if (r < 0)
                return r;
        r = json_size(found, "the image index's manifest", &size, err);
        if (r < 0)
                return r;
        {
                const char *mt = json_string(found, "mediaType");

                if (!mt || strcmp(mt, MT_OCI_MANIFEST) == 0 || strcmp(mt, MT_DOCKER_MANIFEST) == 0)
                        *ret_kind = OCI_KIND_MANIFEST;
                else if (strcmp(mt, MT_OCI_INDEX) == 0 || strcmp(mt, MT_DOCKER_LIST) == 0)
                        *ret_kind = OCI_KIND_INDEX;
                else
                        return cs_error_setx(err, ENOTSUP,
                                             "the image index points at `%.120s`, which is not an "
                                             "image manifest",
                                             mt);
        }
        if (ret_ref_name) {
                const char *name =
                    json_string(cJSON_GetObjectItemCaseSensitive(found, "annotations"),
                                "org.opencontainers.image.ref.name");
                *ret_ref_name = NULL;
                if (name && !(*ret_ref_name = strdup(name)))
                        return cs_error_set(err, ENOMEM, "image index");
        }
        snprintf(ret_digest, OCI_DIGEST_LEN + 1, "%s", json_string(found, "digest") ?: "");
        *ret_size = size;
        return 0;
}

void oci_manifest_free(struct oci_manifest *m)
{
        free(m->layers);
        m->layers = NULL;
        m->n_layers = 0;
}

int oci_manifest_parse(const char *json, size_t len, size_t max_layers, struct oci_manifest *ret,
                       struct cs_error *err)
{
        _cleanup_json_ cJSON *j = NULL;
        _cleanup_free_ struct oci_layer *layers = NULL;
        const cJSON *v, *config, *arr, *d;
        const char *mt;
        size_t n = 0, i = 0;
        int r;

        r = json_parse(json, len, "the manifest", &j, err);
        if (r < 0)
                return r;
        v = cJSON_GetObjectItemCaseSensitive(j, "schemaVersion");
        if (!cJSON_IsNumber(v) || v->valueint != 2)
                return cs_error_setx(err, ENOTSUP,
                                     "the manifest's schemaVersion is not 2 (docker schema 1 and "
                                     "unknown schemas are not supported); convert it with "
                                     "`skopeo copy`");
        mt = json_string(j, "mediaType");
        if (mt && strcmp(mt, MT_OCI_MANIFEST) != 0 && strcmp(mt, MT_DOCKER_MANIFEST) != 0)
                return cs_error_setx(err, ENOTSUP,
                                     "the manifest's media type `%.120s` is not supported", mt);
        config = cJSON_GetObjectItemCaseSensitive(j, "config");
        if (!cJSON_IsObject(config))
                return cs_error_setx(err, EINVAL, "the manifest has no config descriptor");
        mt = json_string(config, "mediaType");
        if (mt && strcmp(mt, MT_OCI_CONFIG) != 0 && strcmp(mt, MT_DOCKER_CONFIG) != 0)
                return cs_error_setx(err, ENOTSUP,
                                     "the manifest's config has media type `%.120s`, which is "
                                     "not a container image config (an artifact?)",
                                     mt);
        r = oci_digest_check(json_string(config, "digest"), "the manifest's config", err);
        if (r < 0)
                return r;
        r = json_size(config, "the manifest's config", &ret->config_size, err);
        if (r < 0)
                return r;
        if (ret->config_size > (int64_t)OCI_CONFIG_MAX)
                return cs_error_setx(err, EFBIG, "the image config is larger than %u bytes",
                                     OCI_CONFIG_MAX);
        arr = cJSON_GetObjectItemCaseSensitive(j, "layers");
        if (!cJSON_IsArray(arr))
                return cs_error_setx(err, EINVAL, "the manifest has no layers array");
        n = (size_t)cJSON_GetArraySize(arr);
        if (n > max_layers)
                return cs_error_setx(err, E2BIG,
                                     "the image has %zu layers, more than the limit of %zu "
                                     "(--max-layers)",
                                     n, max_layers);
        layers = calloc(n ? n : 1, sizeof(*layers));
        if (!layers)
                return cs_error_set(err, ENOMEM, "manifest");
        cJSON_ArrayForEach(d, arr)
        {
                char what[64];

                snprintf(what, sizeof(what), "layer %zu", i + 1);
                if (cJSON_GetObjectItemCaseSensitive(d, "urls"))
                        return cs_error_setx(err, ENOTSUP,
                                             "%s is a foreign layer (its descriptor has urls); "
                                             "its content is not in the image",
                                             what);
                r = oci_layer_media_type(json_string(d, "mediaType"), &layers[i].compression, err);
                if (r < 0)
                        return cs_error_wrap(err, "%s", what);
                r = oci_digest_check(json_string(d, "digest"), what, err);
                if (r < 0)
                        return r;
                r = json_size(d, what, &layers[i].size, err);
                if (r < 0)
                        return r;
                snprintf(layers[i].digest, sizeof(layers[i].digest), "%s",
                         json_string(d, "digest") ?: "");
                i++;
        }
        snprintf(ret->config_digest, sizeof(ret->config_digest), "%s",
                 json_string(config, "digest") ?: "");
        ret->layers = cs_take_ptr(&layers);
        ret->n_layers = n;
        return 0;
}

/* A JSON array of strings as a NULL-terminated vector; absent/null gives NULL. */
static int json_strv(const cJSON *arr, const char *what, char ***ret, struct cs_error *err)
{
        const cJSON *v;
        char **out;
        size_t n = 0;

        *ret = NULL;
        if (!arr || cJSON_IsNull(arr))
                return 0;
        if (!cJSON_IsArray(arr))
                return cs_error_setx(err, EINVAL, "the image config's %s is not an array", what);
        out = calloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof(char *));
        if (!out)
                return cs_error_set(err, ENOMEM, "image config");
        cJSON_ArrayForEach(v, arr)
        {
                if (!cJSON_IsString(v)) {
                        oci_strv_free(out);
                        return cs_error_setx(
                            err, EINVAL, "the image config's %s has a non-string element", what);
                }
                if (!(out[n++] = strdup(v->valuestring))) {
                        oci_strv_free(out);
                        return cs_error_set(err, ENOMEM, "image config");
                }
        }
        *ret = out;
        return 0;
}

void oci_config_free(struct oci_config *c)
{
        oci_strv_free(c->env);
        oci_strv_free(c->entrypoint);
        oci_strv_free(c->cmd);
        oci_strv_free(c->diff_ids);
        free(c->working_dir);
        free(c->user);
        memset(c, 0, sizeof(*c));
}

static int config_string(const cJSON *obj, const char *key, char **ret, struct cs_error *err)
{
        const char *s = json_string(obj, key);

        *ret = NULL;
        if (s && s[0] && !(*ret = strdup(s)))
                return cs_error_set(err, ENOMEM, "image config");
        return 0;
}

int oci_config_parse(const char *json, size_t len, struct oci_config *ret, struct cs_error *err)
{
        _cleanup_json_ cJSON *j = NULL;
        struct oci_config c = {0};
        const cJSON *cfg, *rootfs;
        const char *os, *type;
        int r;

        r = json_parse(json, len, "the image config", &j, err);
        if (r < 0)
                return r;
        os = json_string(j, "os");
        if (os && strcmp(os, "linux") != 0)
                return cs_error_setx(err, ENOTSUP, "the image is for the `%.40s` OS, not linux",
                                     os);
        rootfs = cJSON_GetObjectItemCaseSensitive(j, "rootfs");
        type = json_string(rootfs, "type");
        if (!type || strcmp(type, "layers") != 0)
                return cs_error_setx(err, ENOTSUP,
                                     "the image config's rootfs.type is not `layers`");
        cfg = cJSON_GetObjectItemCaseSensitive(j, "config");
        if ((r = json_strv(cJSON_GetObjectItemCaseSensitive(rootfs, "diff_ids"), "rootfs.diff_ids",
                           &c.diff_ids, err)) < 0 ||
            (r = json_strv(cJSON_GetObjectItemCaseSensitive(cfg, "Env"), "Env", &c.env, err)) < 0 ||
            (r = json_strv(cJSON_GetObjectItemCaseSensitive(cfg, "Entrypoint"), "Entrypoint",
                           &c.entrypoint, err)) < 0 ||
            (r = json_strv(cJSON_GetObjectItemCaseSensitive(cfg, "Cmd"), "Cmd", &c.cmd, err)) < 0 ||
            (r = config_string(cfg, "WorkingDir", &c.working_dir, err)) < 0 ||
            (r = config_string(cfg, "User", &c.user, err)) < 0) {
                oci_config_free(&c);
                return r;
        }
        if (!c.diff_ids) {
                oci_config_free(&c);
                return cs_error_setx(err, EINVAL, "the image config has no rootfs.diff_ids");
        }
        for (char **d = c.diff_ids; *d; d++) {
                r = oci_digest_check(*d, "the image config's rootfs.diff_ids", err);
                if (r < 0) {
                        oci_config_free(&c);
                        return r;
                }
                c.n_diff_ids++;
        }
        *ret = c;
        return 0;
}

int oci_docker_manifest_parse(const char *json, size_t len, size_t max_layers, char **ret_config,
                              char ***ret_layers, size_t *ret_n_layers, char **ret_tag,
                              struct cs_error *err)
{
        _cleanup_json_ cJSON *j = NULL;
        const cJSON *img, *tags;
        const char *config;
        char **layers = NULL;
        size_t n = 0;
        int r;

        r = json_parse(json, len, "manifest.json", &j, err);
        if (r < 0)
                return r;
        if (!cJSON_IsArray(j) || cJSON_GetArraySize(j) < 1)
                return cs_error_setx(err, EINVAL, "manifest.json is not a list of images");
        if (cJSON_GetArraySize(j) > 1)
                return cs_error_setx(err, ENOTSUP,
                                     "the docker archive holds %d images; save one image per "
                                     "archive",
                                     cJSON_GetArraySize(j));
        img = cJSON_GetArrayItem(j, 0);
        config = json_string(img, "Config");
        if (!config)
                return cs_error_setx(err, EINVAL, "manifest.json names no Config");
        r = json_strv(cJSON_GetObjectItemCaseSensitive(img, "Layers"), "Layers", &layers, err);
        if (r < 0)
                return cs_error_wrap(err, "manifest.json");
        while (layers && layers[n])
                n++;
        if (n > max_layers) {
                oci_strv_free(layers);
                return cs_error_setx(err, E2BIG,
                                     "the image has %zu layers, more than the limit of %zu "
                                     "(--max-layers)",
                                     n, max_layers);
        }
        if (!layers && !(layers = calloc(1, sizeof(char *))))
                return cs_error_set(err, ENOMEM, "manifest.json");
        tags = cJSON_GetObjectItemCaseSensitive(img, "RepoTags");
        *ret_tag = NULL;
        if (cJSON_IsArray(tags) && cJSON_IsString(cJSON_GetArrayItem(tags, 0)))
                *ret_tag = strdup(cJSON_GetArrayItem(tags, 0)->valuestring);
        if (!(*ret_config = strdup(config))) {
                oci_strv_free(layers);
                free(*ret_tag);
                return cs_error_set(err, ENOMEM, "manifest.json");
        }
        *ret_layers = layers;
        *ret_n_layers = n;
        return 0;
}
