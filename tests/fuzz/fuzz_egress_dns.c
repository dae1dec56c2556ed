/* The egress resolver's reader of a DNS query and its answer (common/egress_wire.c):
 * invariants: never a fault; a parsed query's name is of the safe alphabet and its question
 * lies inside the message; an answer fits in 512 bytes and repeats the question. */
#include "fuzz.h"

#include "common/egress_wire.h"

#include <ctype.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct egress_dns_query q;
        uint8_t *copy = malloc(size ? size : 1), out[512];
        static const uint8_t addrs[20][16] = {{192, 0, 2, 1}, {0x20, 0x01, 0x0d, 0xb8}};

        if (!copy)
                abort();
        memcpy(copy, data, size);
        if (egress_dns_parse(copy, size, &q) == 0) {
                size_t n = strlen(q.name), len;

                FUZZ_CHECK(n > 0 && n < EGRESS_NAME_MAX);
                FUZZ_CHECK(q.question_end > 12 && q.question_end <= size);
                for (size_t i = 0; i < n; i++)
                        FUZZ_CHECK(!isupper((unsigned char)q.name[i]) &&
                                   (unsigned char)q.name[i] < 0x80);
                len = egress_dns_answer(copy, &q, EGRESS_DNS_NOERROR, addrs, 20, 60, out,
                                        sizeof(out));
                FUZZ_CHECK(len == 0 || (len <= 512 && len >= q.question_end &&
                                        memcmp(out + 12, copy + 12, q.question_end - 12) == 0));
                len = egress_dns_answer(copy, &q, EGRESS_DNS_REFUSED, NULL, 0, 0, out, sizeof(out));
                FUZZ_CHECK(len == 0 || len == q.question_end);
        }
        free(copy);
        return 0;
}
