/* OCI image metadata: index, manifest and config parsing and validation, media types,
 * platforms and digests. Pure code: every input is untrusted JSON from an image. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cs_error;

/* "sha256:" + 64 lowercase hex digits, NUL-terminated. */
#define OCI_DIGEST_LEN 71
/* An index, manifest or docker manifest.json larger than this is refused. */
#define OCI_MANIFEST_MAX (4u << 20)
#define OCI_CONFIG_MAX   (16u << 20)

enum oci_compression {
        OCI_COMPRESSION_NONE,
        OCI_COMPRESSION_GZIP,
        OCI_COMPRESSION_ZSTD,
};

enum oci_kind {
        OCI_KIND_INDEX,
        OCI_KIND_MANIFEST,
};

struct oci_platform {
        char os[32];
        char arch[32];
        char variant[32]; /* empty when any variant will do */
};

struct oci_layer {
        char digest[OCI_DIGEST_LEN + 1];
        int64_t size;
        enum oci_compression compression;
};

struct oci_manifest {
        char config_digest[OCI_DIGEST_LEN + 1];
        int64_t config_size;
        struct oci_layer *layers;
        size_t n_layers;
};

/* What a launch needs from the image config. Arrays are NULL-terminated; NULL when absent. */
struct oci_config {
        char **env;
        char **entrypoint;
        char **cmd;
        char *working_dir;
        char *user;
        char **diff_ids; /* "sha256:..." per layer, bottom first */
        size_t n_diff_ids;
};

/* A digest we can verify: sha256 only, lowercase hex. ret_hex gets the 64 hex digits. */
int oci_digest_check(const char *digest, const char *what, struct cs_error *err);
/* "sha256:" + hex of a raw 32-byte sha256. */
void oci_digest_format(const unsigned char sum[32], char ret[OCI_DIGEST_LEN + 1]);

/* Layer media type -> compression; a foreign/non-distributable or unknown type is an error. */
int oci_layer_media_type(const char *media_type, enum oci_compression *ret, struct cs_error *err);

/* "os/arch[/variant]" (os may be omitted: "arm64" means linux/arm64). */
int oci_platform_parse(const char *s, struct oci_platform *ret, struct cs_error *err);
/* linux and the architecture this binary was built for, in OCI's GOARCH names. */
void oci_platform_host(struct oci_platform *ret);

/* Which kind of document json is (by mediaType, or by shape when mediaType is absent). */
int oci_document_kind(const char *json, size_t len, const char *what, enum oci_kind *ret,
                      struct cs_error *err);

/* From an index: the descriptor of the manifest (or nested index) matching ref (the
 * org.opencontainers.image.ref.name annotation; NULL = any) and platform. ret_kind says
 * which of the two it points at; ret_ref_name gets the matching ref annotation or NULL. */
int oci_index_select(const char *json, size_t len, const char *ref,
                     const struct oci_platform *platform, char ret_digest[OCI_DIGEST_LEN + 1],
                     int64_t *ret_size, enum oci_kind *ret_kind, char **ret_ref_name,
                     struct cs_error *err);

int oci_manifest_parse(const char *json, size_t len, size_t max_layers, struct oci_manifest *ret,
                       struct cs_error *err);
void oci_manifest_free(struct oci_manifest *m);

/* docker-archive manifest.json: the first image's config file name, layer file names
 * (NULL-terminated) and first RepoTag (or NULL). */
int oci_docker_manifest_parse(const char *json, size_t len, size_t max_layers, char **ret_config,
                              char ***ret_layers, size_t *ret_n_layers, char **ret_tag,
                              struct cs_error *err);

/* The image config; checks os (linux), rootfs.type and the diff_ids' form. */
int oci_config_parse(const char *json, size_t len, struct oci_config *ret, struct cs_error *err);
void oci_config_free(struct oci_config *c);

void oci_strv_free(char **v);
