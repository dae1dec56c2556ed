/* SHA-256, the one way image/ and imgbuild/ compute it (libcrypto): a whole buffer at once,
 * or a stream through a context that digest_new starts. */
#pragma once
#include "oci.h"

#include <openssl/evp.h>
#include <stdbool.h>
#include <stddef.h>

/* ret: "sha256:HEX" of buf. */
void sha256_hex(const void *buf, size_t len, char ret[OCI_DIGEST_LEN + 1]);

/* A SHA-256 context, started: NULL when out of memory (or libcrypto has no SHA-256). */
EVP_MD_CTX *digest_new(void);
/* md started again, what went in forgotten (a download retried). */
bool digest_restart(EVP_MD_CTX *md);
/* The 32 bytes of what went into md. */
void digest_end(EVP_MD_CTX *md, unsigned char sum[32]);

static inline void md_freep(EVP_MD_CTX **m)
{
        EVP_MD_CTX_free(*m);
}
#define _cleanup_md_ __attribute__((cleanup(md_freep)))
