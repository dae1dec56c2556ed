/* What every part of a COPY or ADD uses: its digest, and paths joined under the limit. */
#include "build-copy-ctx.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>

void copy_md_add(struct copy_ctx *x, const void *p, size_t len)
{
        EVP_DigestUpdate(x->md, p, len);
}

char *copy_path_join(const char *a, const char *b)
{
        char *s = NULL;

        if (strlen(a) + strlen(b) + 2 > LAYER_DEFAULT_MAX_PATH)
                return NULL;
        if (asprintf(&s, "%s%s%s", a, *a && *b ? "/" : "", b) < 0)
                return NULL;
        return s;
}
