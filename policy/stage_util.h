/* Helpers shared by the stage files (stage.c, stage_hooks.c, stage_claude.c,
 * stage_identity.c). Internal to policy/. */
#pragma once
#include "common/path.h"
#include <stddef.h>
#include <sys/types.h>

struct cs_error;
struct stage_warnings;

/* The first 16 hex digits of sha256(data): the reference's key for per-path copies. */
int stage_sha256_hex16(const void *data, size_t len, char out[17]);
/* mkdir name (mode, existing is fine) under dirfd and open it; a symlink there is refused.
 * shown names it in messages. */
int stage_open_subdir(int dirfd, const char *name, const char *shown, mode_t mode, int *ret_fd,
                      struct cs_error *err);
/* mkdir -p path (0700) for the host user's own data dirs and open it. */
int stage_open_dir_parents(const char *path, int *ret_fd, struct cs_error *err);
