/* What a producer of layers and images (the import, `image build`) calls to put them into
 * the store (store.h): temporary directories, layer and image commits, names. */
#pragma once
#include "store.h"

#include <cjson/cJSON.h>
#include <stdbool.h>

struct cs_error;

/* A new tmp/PREFIX-XXXXXX directory: its name in ret_name. */
int store_tmp_create(struct image_store *s, const char *prefix, char ret_name[64],
                     struct cs_error *err);
int store_tmp_remove(struct image_store *s, const char *name, struct cs_error *err);
/* Remove leftovers of killed imports and removals. */
int store_tmp_sweep(struct image_store *s, size_t *ret_n, struct cs_error *err);
/* store_dir_hold of the layer. */
int store_layer_hold(struct image_store *s, const char *diff_id, struct cs_error *err);
/* locks/layer-HEX, flocked exclusively (one import or build stores a layer, the others wait
 * and reuse it): the lock's fd. */
int store_layer_lock(struct image_store *s, const char *diff_id, struct cs_error *err);
/* A layer's info.json (size, files, entries, skipped devices) in dirfd. */
int layer_write_info(int dirfd, const struct layer_stats *st, struct cs_error *err);
/* A stored layer's numbers (its info.json) added to sum. */
void layer_add_stored_stats(int layer_fd, struct layer_stats *sum);
/* Move tmp/tname (holding diff/, metadata, info.json; *tfd its flocked fd, closed here)
 * into layers/sha256/HEX, unless stored already, and hold it: *ret_held. */
int store_layer_commit(struct image_store *s, int *tfd, const char *tname, const char *diff_id,
                       int *ret_held, struct cs_error *err);
/* The image config (key: its digest in the store) with its numbers into tmp/import-* and
 * moved to sha256/HEX, its layers held by the caller: the store lock's fd, held for the
 * caller to name the image. */
int store_image_commit(struct image_store *s, const char *key, const char *config,
                       size_t config_len, const char *source, const char *format,
                       const struct layer_stats *sum, size_t n_layers, struct cs_error *err);
/* names.json: name (canonical) points at digest; called with the store lock held. */
int store_name_set(struct image_store *s, const char *name, const char *digest,
                   struct cs_error *err);
/* The hex part of "sha256:HEX". */
const char *store_digest_hex(const char *digest);
/* sha256/HEX exists and is complete. */
bool store_image_present(struct image_store *s, const char *digest);
/* The layer diff_id is stored and the blob (digest blob, "" when the source names none) is
 * known to unpack to it: the blob is the uncompressed layer itself, or a record says so.
 * Then the blob need not be read at all: the image's config, verified through the
 * manifest, names the content. */
bool store_layer_reusable(struct image_store *s, const char *blob, const char *diff_id);

static inline void store_json_deletep(cJSON **j)
{
        cJSON_Delete(*j);
}
#define _cleanup_json_ __attribute__((cleanup(store_json_deletep)))
