/* What image/import.c shares with image/store.c: the store's names, locks and temporary
 * directories. Not for use outside image/. */
#pragma once
#include "store.h"

#include <stdbool.h>

#include <cjson/cJSON.h>

/* Bounds shared by the store and the import. */
#define INFO_MAX (1u << 20) /* an image's info.json */

static inline void store_json_deletep(cJSON **j)
{
        cJSON_Delete(*j);
}
#define _cleanup_json_ __attribute__((cleanup(store_json_deletep)))

/* The store's exclusive lock (names change, images move); an fd to close, or negative. */
int store_lock(struct image_store *s, struct cs_error *err);
/* The hex part of "sha256:HEX". */
const char *store_digest_hex(const char *digest);
int store_names_read(struct image_store *s, cJSON **ret, struct cs_error *err);
int store_names_write(struct image_store *s, cJSON *names, struct cs_error *err);
/* sha256/HEX exists and is complete. */
bool store_image_present(struct image_store *s, const char *digest);
int store_tmp_create(struct image_store *s, const char *prefix, char ret_name[64],
                     struct cs_error *err);
int store_tmp_remove(struct image_store *s, const char *name, struct cs_error *err);
/* Remove leftovers of killed imports and removals. */
int store_tmp_sweep(struct image_store *s, size_t *ret_n, struct cs_error *err);
