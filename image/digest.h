/* The SHA-256 digest of a buffer, as OCI writes it. */
#pragma once
#include "oci.h"

#include <stddef.h>

/* ret: "sha256:HEX" of buf. */
void sha256_hex(const void *buf, size_t len, char ret[OCI_DIGEST_LEN + 1]);
