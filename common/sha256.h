/* SHA-256 for the launch path (the reference's per-path keys): the kernel's (AF_ALG), or where
 * that is refused the machine's libcrypto, opened on first use only. */
#pragma once
#include <stddef.h>

/* out: the 32-byte digest. Returns 0, or -ENOSYS when libcrypto cannot be loaded. */
int cs_sha256(const void *data, size_t len, unsigned char out[32]);
