/* Pulling from a registry: the OCI distribution API (v2) through libcurl, into an OCI image
 * layout directory that the import then verifies and unpacks. Every byte a registry sends
 * is untrusted: documents are bounded, blobs are checked by size and sha256 as they stream
 * into temporary files, and only a verified blob gets its final name. */
#pragma once
#include "../oci/oci.h"
#include "../store/store.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cs_error;

/* The registry a reference without one names, as podman and docker read it. */
#define REGISTRY_DEFAULT "docker.io"
/* Docker Hub's names: its registry API answers on another host than the name images carry,
 * and docker login stores its credentials under the v1 index URL. `index.docker.io/…` is
 * docker.io's legacy spelling. */
#define REGISTRY_DOCKER_HUB_API   "registry-1.docker.io"
#define REGISTRY_DOCKER_HUB_INDEX "index.docker.io"

/* The host to connect to for a registry name: Docker Hub's API host for docker.io. */
const char *registry_api_host(const char *host);

/* [HOST[:PORT]/]PATH[:TAG][@sha256:HEX], parsed as podman and docker do: a first component
 * with a dot or a colon, or `localhost`, is the registry; otherwise REGISTRY_DEFAULT, where a
 * one-component path means library/PATH. No tag and no digest means :latest. */
struct registry_ref {
        char host[256];
        char repo[256];
        char tag[129];                   /* "" when pinned by digest only */
        char digest[OCI_DIGEST_LEN + 1]; /* "" when not pinned */
        char name[650];                  /* the store name: HOST/REPO:TAG or HOST/REPO@DIGEST */
};
int registry_ref_parse(const char *s, struct registry_ref *ret, struct cs_error *err);

/* The value of key in a WWW-Authenticate challenge (`Bearer realm="…",service=…`): quoted
 * (backslash escapes) or bare; "" when absent. Bounded by max, NUL-terminated. */
void registry_challenge_param(const char *header, const char *key, char *out, size_t max);

/* One blob of the pull, as the progress display sees it. */
struct pull_blob {
        char digest[OCI_DIGEST_LEN + 1];
        uint64_t done, total;
        double seconds; /* since its transfer started */
        bool started, finished, is_config;
};

/* Where a pull asks: a mirror or the registry's location, with the repository path that
 * place knows the image by (registries.conf rewrites both). */
struct registry_endpoint {
        char host[256];
        char repo[256];
        bool insecure; /* plain http and unverified certificates are accepted */
        bool mirror;
};
#define REGISTRY_ENDPOINTS_MAX 17

struct pull_options {
        bool tls_verify; /* false: plain http and unverified certificates are accepted */
        /* Tried in order until one serves the manifest; none: the reference's own host. */
        const struct registry_endpoint *endpoints;
        size_t n_endpoints;
        struct oci_platform platform;
        size_t max_layers; /* the import's limit, checked before any layer is fetched */
        /* Called as transfers advance (at most every 100 ms, and when a blob finishes). */
        void (*progress)(void *opaque, const struct pull_blob *blobs, size_t n);
        void *progress_opaque;
        /* When it says the resolved manifest is stored already, only the manifest and the
         * config are fetched (what the import needs to name it). */
        bool (*present)(void *opaque, const char *manifest_digest);
        /* When it says a layer (its blob digest and the diff_id the verified config pairs
         * with it) is stored and known to come from that blob, the blob is not fetched. */
        bool (*layer_present)(void *opaque, const char *blob, const char *diff_id);
        void *present_opaque;
};

/* Fetch ref's manifest for o->platform, its config and layers into the empty directory
 * dirfd as an OCI image layout holding that one manifest. */
int registry_pull(const struct registry_ref *ref, const struct pull_options *o, int dirfd,
                  struct cs_error *err);

/* registry_pull into a flocked temporary layout in the store's tmp/, then store_import of it
 * (io's limits, also the pull's layer count bound, and progress; its source, format, name
 * and platform are the pull's), named ref->name. A stored image costs its manifest and config;
 * a stored layer whose blob an earlier import verified is neither fetched nor unpacked. */
int store_pull(struct image_store *s, const struct registry_ref *ref, const struct pull_options *po,
               const struct import_options *io, struct import_result *ret, struct cs_error *err);
