/* Base64 decoding, for what a launch reads that is encoded (a PEM certificate's body, a JWT's
 * payload): built in, as sha256.c is, so a launch loads no crypto library. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

/* Decode len bytes of s: the standard alphabet, or with url the URL-safe one ('-', '_').
 * Whitespace is skipped, '=' padding is optional. *ret (to free()) holds *ret_len bytes plus
 * a NUL. -EINVAL on any other byte, -ENOMEM. */
int cs_base64_decode(const char *s, size_t len, bool url, unsigned char **ret, size_t *ret_len);
