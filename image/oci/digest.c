/* SHA-256 through libcrypto (digest.h). */
#include "digest.h"

void sha256_hex(const void *buf, size_t len, char ret[OCI_DIGEST_LEN + 1])
{
        unsigned char sum[32];
        unsigned int n = sizeof(sum);

        EVP_Digest(buf, len, sum, &n, EVP_sha256(), NULL);
        oci_digest_format(sum, ret);
}

EVP_MD_CTX *digest_new(void)
{
        EVP_MD_CTX *md = EVP_MD_CTX_new();

        if (md && !digest_restart(md)) {
                EVP_MD_CTX_free(md);
                return NULL;
        }
        return md;
}

bool digest_restart(EVP_MD_CTX *md)
{
        return EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1;
}

void digest_end(EVP_MD_CTX *md, unsigned char sum[32])
{
        unsigned int n = 32;

        EVP_DigestFinal_ex(md, sum, &n);
}
