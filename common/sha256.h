/* SHA-256 for the launch path (the reference's per-path keys), from the machine's libcrypto,
 * which is opened on first use only: a launch that computes no key never loads it. */
#pragma once
#include <stddef.h>

/* out: the 32-byte digest. Returns 0, or -ENOSYS when libcrypto cannot be loaded. */
int cs_sha256(const void *data, size_t len, unsigned char out[32]);
