/* Base64 decoding (RFC 4648, both alphabets), for the launch path. */
#include "base64.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

static int sextet(char c, bool url)
{
        if (c >= 'A' && c <= 'Z')
                return c - 'A';
        if (c >= 'a' && c <= 'z')
                return c - 'a' + 26;
        if (c >= '0' && c <= '9')
                return c - '0' + 52;
        if (c == (url ? '-' : '+'))
                return 62;
        if (c == (url ? '_' : '/'))
                return 63;
        return -1;
}

int cs_base64_decode(const char *s, size_t len, bool url, unsigned char **ret, size_t *ret_len)
{
        unsigned char *out = malloc(len / 4 * 3 + 4);
        uint32_t acc = 0;
        size_t n = 0, bits = 0;
        bool padded = false;

        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < len; i++) {
                char c = s[i];
                int v;

                if (c == ' ' || c == '\t' || c == '\r' || c == '\n')
                        continue;
                if (c == '=') {
                        padded = true;
                        continue;
                }
                v = sextet(c, url);
                if (v < 0 || padded) {
                        free(out);
                        return -EINVAL;
                }
                acc = (acc << 6) | (uint32_t)v;
                bits += 6;
                if (bits >= 8) {
                        bits -= 8;
                        out[n++] = (unsigned char)(acc >> bits);
                        acc &= (1u << bits) - 1;
                }
        }
        /* A lone sextet left over cannot come from any byte. */
        if (bits >= 6) {
                free(out);
                return -EINVAL;
        }
        out[n] = '\0';
        *ret = out;
        *ret_len = n;
        return 0;
}
