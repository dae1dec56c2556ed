/* A git index (.git/index, written by the session) read for its gitlinks, which the trust
 * report compares before and after a session. Invariant: the result is NUL-separated,
 * non-empty names. */
#include "fuzz.h"

#include "policy/trust.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char *out = NULL;
        size_t len = 0;

        if (trust_index_gitlinks((const char *)data, size, &out, &len) < 0)
                return 0;
        FUZZ_CHECK(len == 0 || out[len - 1] == '\0');
        for (size_t i = 0; i < len; i += strlen(out + i) + 1)
                FUZZ_CHECK(out[i] != '\0');
        free(out);
        return 0;
}
