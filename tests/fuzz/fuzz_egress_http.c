/* The egress proxy's HTTP/1 request framer (common/egress_wire.c, egress_http_step), which
 * says where each request of a plain HTTP connection begins so that every one is judged:
 * invariants: never a fault or a read past the input, every step takes at most what it was
 * given, a head ends with its empty line, and the requests found do not depend on how the
 * bytes were split as they arrived (whole, or in pieces of the first byte's size). */
#include "fuzz.h"

#include "common/egress_wire.h"

#include <stdbool.h>

struct seen {
        unsigned long heads, body, hash;
        bool bad;
};

static void run(const uint8_t *in, size_t len, size_t step, struct seen *s)
{
        static uint8_t buf[EGRESS_FIRST_MAX];
        struct egress_http h;
        size_t have = 0, fed = 0;

        egress_http_init(&h);
        memset(s, 0, sizeof(*s));
        while (fed < len) {
                size_t n = len - fed < step ? len - fed : step;

                if (n > sizeof(buf) - have)
                        n = sizeof(buf) - have;
                memcpy(buf + have, in + fed, n);
                have += n;
                fed += n;
                while (have) {
                        enum egress_http_what w;
                        size_t k = egress_http_step(&h, buf, have, &w);

                        FUZZ_CHECK(k <= have);
                        if (w == EGRESS_HTTP_MORE) {
                                FUZZ_CHECK(k == 0 && have < sizeof(buf));
                                break;
                        }
                        if (w == EGRESS_HTTP_BAD) {
                                FUZZ_CHECK(h.why != NULL);
                                s->bad = true;
                                return;
                        }
                        FUZZ_CHECK(k > 0);
                        if (w == EGRESS_HTTP_HEAD) {
                                FUZZ_CHECK(k >= 4 && memcmp(buf + k - 4, "\r\n\r\n", 4) == 0);
                                s->heads++;
                                for (size_t i = 0; i < k; i++)
                                        s->hash = s->hash * 31 + buf[i];
                        } else if (w == EGRESS_HTTP_BODY) {
                                s->body += k;
                        }
                        memmove(buf, buf + k, have - k);
                        have -= k;
                }
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct seen whole, pieces;
        size_t step;

        if (size < 1)
                return 0;
        step = data[0] ? data[0] : 1;
        run(data + 1, size - 1, size, &whole);
        run(data + 1, size - 1, step, &pieces);
        if (!whole.bad && !pieces.bad)
                FUZZ_CHECK(whole.heads == pieces.heads && whole.hash == pieces.hash);
        FUZZ_CHECK(whole.bad == pieces.bad || size - 1 >= EGRESS_FIRST_MAX);
        return 0;
}
