/* SHA-256 for the launch path (the reference's per-path keys, the identity file's name):
 * built in, so a launch loads no crypto library (see sha256.c). */
#pragma once
#include <stddef.h>

/* out: the 32-byte digest. Returns 0. */
int cs_sha256(const void *data, size_t len, unsigned char out[32]);
