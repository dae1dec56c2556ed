/* An image's metadata, from an archive, a layout or a registry: the index (and manifest
 * list), the manifest, docker's manifest.json, the config, and the small strings in them.
 * Invariants: whatever is accepted is what the import relies on — digests in their checked
 * form, layer counts within the limit, a platform's fields NUL-terminated. */
#include "fuzz.h"

#include "common/error.h"
#include "image/oci/oci.h"

#define MAX_LAYERS 16

static void check_digest(const char *d)
{
        struct cs_error err = {0};

        FUZZ_CHECK(strlen(d) == OCI_DIGEST_LEN && oci_digest_check(d, "fuzz", &err) == 0);
}

static void check_index(const char *json, size_t len, const char *ref)
{
        struct oci_platform host;
        struct cs_error err = {0};
        char digest[OCI_DIGEST_LEN + 1];
        enum oci_kind kind;
        char *ref_name = NULL;
        int64_t size;

        oci_platform_host(&host);
        if (oci_index_select(json, len, ref, &host, digest, &size, &kind, &ref_name, &err) < 0) {
                FUZZ_CHECK(err.msg[0] != '\0');
                return;
        }
        check_digest(digest);
        FUZZ_CHECK(size >= 0);
        FUZZ_CHECK(kind == OCI_KIND_INDEX || kind == OCI_KIND_MANIFEST);
        if (ref)
                FUZZ_CHECK(ref_name && strcmp(ref_name, ref) == 0);
        free(ref_name);
}

static void check_manifest(const char *json, size_t len)
{
        struct oci_manifest m = {0};
        struct cs_error err = {0};

        if (oci_manifest_parse(json, len, MAX_LAYERS, &m, &err) < 0) {
                FUZZ_CHECK(err.msg[0] != '\0');
                return;
        }
        check_digest(m.config_digest);
        FUZZ_CHECK(m.config_size >= 0 && m.n_layers <= MAX_LAYERS);
        for (size_t i = 0; i < m.n_layers; i++) {
                check_digest(m.layers[i].digest);
                FUZZ_CHECK(m.layers[i].size >= 0);
        }
        oci_manifest_free(&m);
}

static void check_docker_manifest(const char *json, size_t len)
{
        struct cs_error err = {0};
        char *config = NULL, **layers = NULL, *tag = NULL;
        size_t n = 0, i = 0;

        if (oci_docker_manifest_parse(json, len, MAX_LAYERS, &config, &layers, &n, &tag, &err) <
            0) {
                FUZZ_CHECK(err.msg[0] != '\0');
                return;
        }
        FUZZ_CHECK(config && n <= MAX_LAYERS);
        for (; layers && layers[i]; i++)
                ;
        FUZZ_CHECK(i == n);
        free(config);
        free(tag);
        oci_strv_free(layers);
}

static void check_config(const char *json, size_t len)
{
        struct oci_config c = {0};
        struct cs_error err = {0};

        if (oci_config_parse(json, len, &c, &err) < 0) {
                FUZZ_CHECK(err.msg[0] != '\0');
                return;
        }
        for (size_t i = 0; i < c.n_diff_ids; i++)
                check_digest(c.diff_ids[i]);
        oci_config_free(&c);
}

static void check_strings(const uint8_t *data, size_t size)
{
        char *s = fuzz_cstr(data, size);
        struct oci_platform p;
        struct cs_error err = {0};
        enum oci_compression comp;

        if (oci_platform_parse(s, &p, &err) == 0) {
                FUZZ_CHECK(memchr(p.os, '\0', sizeof(p.os)) &&
                           memchr(p.arch, '\0', sizeof(p.arch)));
                FUZZ_CHECK(memchr(p.variant, '\0', sizeof(p.variant)));
                FUZZ_CHECK(p.os[0] && p.arch[0]);
        }
        if (oci_digest_check(s, "fuzz", &err) == 0)
                FUZZ_CHECK(strlen(s) == OCI_DIGEST_LEN);
        if (oci_layer_media_type(s, &comp, &err) == 0)
                FUZZ_CHECK(comp == OCI_COMPRESSION_NONE || comp == OCI_COMPRESSION_GZIP ||
                           comp == OCI_COMPRESSION_ZSTD);
        free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        const char *json = (const char *)data;
        struct cs_error err = {0};
        enum oci_kind kind;

        if (oci_document_kind(json, size, "fuzz", &kind, &err) == 0)
                FUZZ_CHECK(kind == OCI_KIND_INDEX || kind == OCI_KIND_MANIFEST);
        check_index(json, size, NULL);
        check_index(json, size, "latest");
        check_manifest(json, size);
        check_docker_manifest(json, size);
        check_config(json, size);
        check_strings(data, size);
        return 0;
}
