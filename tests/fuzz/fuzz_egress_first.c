/* The egress proxy's readers of a connection's first bytes (common/egress_wire.c), the
 * name and a proxy request's target:
 * invariants: never a fault, never a read past the input, and a name found is a host name
 * of the safe alphabet (lower case), the same for any longer input with the same prefix. */
#include "fuzz.h"

#include "common/egress_wire.h"

#include <ctype.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char name[EGRESS_NAME_MAX];
        uint8_t *copy = malloc(size ? size : 1);
        enum egress_first k;

        if (!copy)
                abort();
        memcpy(copy, data, size);
        k = egress_first_name(copy, size, name);
        if (k == EGRESS_FIRST_TLS || k == EGRESS_FIRST_HTTP) {
                size_t n = strlen(name);

                FUZZ_CHECK(n > 0 && n < EGRESS_NAME_MAX && name[n - 1] != '.');
                for (size_t i = 0; i < n; i++)
                        FUZZ_CHECK(islower((unsigned char)name[i]) ||
                                   isdigit((unsigned char)name[i]) || name[i] == '-' ||
                                   name[i] == '_' || name[i] == '.');
        } else {
                FUZZ_CHECK(name[0] == '\0' || k == EGRESS_FIRST_UNKNOWN ||
                           k == EGRESS_FIRST_NO_NAME || k == EGRESS_FIRST_MORE);
        }
        {
                /* the proxy-request reader of the mapped host loopback */
                uint16_t port;
                int t = egress_proxy_target(copy, size, name, &port);

                FUZZ_CHECK(t >= -1 && t <= 2);
                if (t == 1) {
                        size_t n = strlen(name);

                        FUZZ_CHECK(port != 0 && n > 0 && name[n - 1] != '.' && name[0] != '.');
                        for (size_t i = 0; i < n; i++)
                                FUZZ_CHECK(islower((unsigned char)name[i]) ||
                                           isdigit((unsigned char)name[i]) || name[i] == '-' ||
                                           name[i] == '_' ||
                                           (name[i] == '.' && name[i + 1] != '.'));
                }
        }
        free(copy);
        return 0;
}
