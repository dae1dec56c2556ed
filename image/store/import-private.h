/* What image/import.c shares with image/import-plan.c: an import's plan (which blobs, in
 * which order, checked against what). Not for use outside image/. */
#pragma once
#include "../oci/digest.h"
#include "store-write.h"

#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>

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

void import_plan_free(struct import_plan *p);
/* A small blob (index, manifest, config), checked against its descriptor. */
int read_verified(struct image_source *src, const char *digest, int64_t size, size_t max,
                  const char *what, char **ret, size_t *ret_len, struct cs_error *err);
/* The source's file name without directories and extensions, as a name. */
char *source_basename(const char *source);
/* The plan of each source form: an OCI layout (or its archive), a docker archive, a rootfs
 * tar (whose key is the digest of the whole tar). */
int plan_oci(struct image_source *src, const char *path, const char *ref,
             const struct import_options *o, struct import_plan *p, struct cs_error *err);
int plan_docker(struct image_source *src, const struct import_options *o, struct import_plan *p,
                struct cs_error *err);
int plan_rootfs(const struct import_options *o, struct import_plan *p, struct cs_error *err);
const char *import_format_name(enum image_format f);

/* One import in progress. */
struct import_job {
        struct image_source *src;
        const char *source_path; /* for the workers' own sources */
        bool source_is_tar;
        const struct import_options *o;
        struct import_plan *p;
        int *held; /* per layer: its directory in the store, flocked shared (so no sweep
                    * removes it) until the image that lists it is committed; -1 before */
        struct layer_budget budget; /* of the limits, spent by the layers unpacked */
        struct layer_stats sum;     /* the image's numbers over its layers */
        size_t reused;              /* layers found stored */
        size_t stored;              /* layers this import moved into the store */
        atomic_bool cancel;         /* a layer failed: the others stop */
        pthread_mutex_t report_lock;
        _Atomic uint64_t all_done; /* blob bytes read (or found stored) over all layers */
        uint64_t all_total;        /* the blobs' declared sizes summed; 0: one is unknown */
};

/* o->progress, one call at a time, with the bytes of all layers filled in. */
void import_report(struct import_job *job, const struct import_progress *prog);

/* Stream layer i's blob from src into tree, verifying its size, digest and diff_id (a
 * rootfs tar's config is made here, from the diff_id found); progress reported as it
 * goes, the final report left in *ret_done (import.c). Stops with ECANCELED once
 * job->cancel is set. */
int layer_stream(struct import_job *job, struct image_source *src, size_t i,
                 struct layer_tree *tree, char ret_diff_id[OCI_DIGEST_LEN + 1],
                 struct import_progress *ret_done, struct cs_error *err);
/* Every layer into job->held: reused when stored and its blob known (no read at all);
 * otherwise unpacked (as many at once as there are cores: each layer is a directory of
 * its own), then, bottom first, completed against the layers below it, verified and moved
 * into the layer store (import-layer.c). */
int layers_import(struct image_store *s, struct import_job *job, struct cs_error *err);
