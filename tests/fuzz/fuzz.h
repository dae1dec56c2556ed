/* Shared by the libFuzzer targets: each target's entry point, and the check that turns a
 * broken invariant into a crash libFuzzer records (with the input that caused it). */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond)                                                                           \
        do {                                                                                       \
                if (!(cond)) {                                                                     \
                        fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__,       \
                                #cond);                                                            \
                        abort();                                                                   \
                }                                                                                  \
        } while (0)

/* The input as a NUL-terminated string (cut at its first NUL, as a C caller would see it). */
static inline char *fuzz_cstr(const uint8_t *data, size_t size)
{
        char *s = malloc(size + 1);

        if (!s)
                abort();
        memcpy(s, data, size);
        s[size] = '\0';
        return s;
}
