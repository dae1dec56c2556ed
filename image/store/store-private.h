/* What image/import.c shares with image/store.c: the store's names, locks and temporary
 * directories. Not for use outside image/. */
#pragma once
#include "store-write.h"

#include <stdbool.h>

#include <cjson/cJSON.h>

/* Bounds shared by the store and the import. */
#define INFO_MAX (1u << 20) /* an image's info.json */

/* The store's exclusive lock (names change, images move); an fd to close, or negative. */
int store_lock(struct image_store *s, struct cs_error *err);
/* name in the store's lock directory (STORE_LOCKS_SUFFIX), flocked exclusively, waiting
 * for it; an fd to close, or negative. */
int store_lock_named(struct image_store *s, const char *name, struct cs_error *err);
int store_names_read(struct image_store *s, cJSON **ret, struct cs_error *err);
int store_names_write(struct image_store *s, cJSON *names, struct cs_error *err);

/* ---- the layer store (store-layers.c) ---- */

/* path (relative to the store) opened O_RDONLY|O_DIRECTORY with a shared flock, proven
 * still in place once locked (rm and sweeps move things away under an exclusive one);
 * -ENOENT without a message when it is not there. csandbox holds these exclusively only
 * for the instant of a rename, so a wait longer than STORE_HOLD_WAIT_S is someone else's
 * (a session sees the store, and can flock what it sees): refused naming the holder. */
#define STORE_HOLD_WAIT_S 10
int store_dir_hold(struct image_store *s, const char *path, struct cs_error *err);
/* "layers/sha256/HEX" of a diff_id. */
void store_layer_path(const char *diff_id, char ret[100]);
/* The diff_id a verified import recorded for a compressed blob. */
bool store_blob_diff_id(struct image_store *s, const char *blob, char ret[OCI_DIGEST_LEN + 1]);
/* Record, after verifying it, that blob unpacks to diff_id. */
int store_blob_record(struct image_store *s, const char *blob, const char *diff_id,
                      struct cs_error *err);
/* The image config of the image directory image_fd (its diff_ids are its layers). */
int store_image_layers(struct image_store *s, int image_fd, const char *what,
                       struct oci_config *ret, struct cs_error *err);
/* Remove sha256/HEX unless a launch holds it (*ret_busy). Store lock held. */
int store_image_delete(struct image_store *s, const char *digest, bool *ret_busy,
                       struct cs_error *err);
/* Remove every layer no image lists and no import holds, and records of removed layers.
 * Store lock held. */
int store_layers_sweep(struct image_store *s, size_t *ret_n, struct cs_error *err);
