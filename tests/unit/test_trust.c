/* The git index reader of the trust report: gitlinks found in every index version git
 * writes, and a hostile index (truncated anywhere, lying lengths) read without a fault. */
#include "policy/trust.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

struct buf {
        unsigned char b[4096];
        size_t n;
        char prev[256];
};

static void put32(struct buf *b, uint32_t v)
{
        b->b[b->n++] = (unsigned char)(v >> 24);
        b->b[b->n++] = (unsigned char)(v >> 16);
        b->b[b->n++] = (unsigned char)(v >> 8);
        b->b[b->n++] = (unsigned char)v;
}

static void header(struct buf *b, uint32_t version, uint32_t count)
{
        memset(b, 0, sizeof(*b));
        memcpy(b->b, "DIRC", 4);
        b->n = 4;
        put32(b, version);
        put32(b, count);
}

/* One entry as git writes it: 40 bytes of stat data with the mode at 24, the hash, the
 * flags with the name length, the name (v4: prefix-compressed against the previous one). */
static void entry(struct buf *b, uint32_t version, size_t hash_len, uint32_t mode, const char *name)
{
        size_t start = b->n, len = strlen(name);

        memset(b->b + b->n, 0, 40 + hash_len);
        b->n += 24;
        put32(b, mode);
        b->n += 12 + hash_len;
        b->b[b->n++] = (unsigned char)(len >> 8);
        b->b[b->n++] = (unsigned char)len;
        if (version == 4) {
                size_t common = 0, strip;

                while (b->prev[common] && b->prev[common] == name[common])
                        common++;
                strip = strlen(b->prev) - common;
                b->b[b->n++] = (unsigned char)strip; /* < 128: one varint byte */
                memcpy(b->b + b->n, name + common, len - common + 1);
                b->n += len - common + 1;
                snprintf(b->prev, sizeof(b->prev), "%s", name);
                return;
        }
        memcpy(b->b + b->n, name, len);
        b->n += len;
        b->n = start + ((b->n - start + 8) & ~(size_t)7);
}

static bool links_are(const char *got, size_t len, const char *const *want, size_t n)
{
        size_t o = 0;

        for (size_t i = 0; i < n; i++) {
                if (o >= len || strcmp(got + o, want[i]) != 0)
                        return fail("link %zu: %s, wanted %s", i, o < len ? got + o : "(end)",
                                    want[i]);
                o += strlen(got + o) + 1;
        }
        return o == len || fail("more links than wanted");
}

static void test_index_gitlinks_in_every_version_and_hash(void)
{
        static const char *const want[] = {"lib/sub", "src"};

        for (uint32_t version = 2; version <= 4; version++)
                for (size_t hash = 20; hash <= 32; hash += 12) {
                        struct buf b;
                        char *links = NULL;
                        size_t len = 0;

                        header(&b, version, 4);
                        entry(&b, version, hash, 0100644, "README");
                        entry(&b, version, hash, 0160000, "lib/sub");
                        entry(&b, version, hash, 0100755, "lib/subdir-tool");
                        entry(&b, version, hash, 0160000, "src");
                        CHECKF(trust_index_gitlinks((char *)b.b, b.n, &links, &len) == 0,
                               "version %u hash %zu", version, hash);
                        CHECKF(links_are(links, len, want, 2), "version %u hash %zu: %s", version,
                               hash, why);
                        free(links);
                }
        PASS();
}

static void test_index_truncated_or_lying_is_refused_without_a_fault(void)
{
        struct buf b;
        char *links = NULL;
        size_t len = 0;

        for (uint32_t version = 2; version <= 4; version++) {
                header(&b, version, 2);
                entry(&b, version, 20, 0160000, "a/b/c");
                entry(&b, version, 20, 0160000, "a/b/d");
                for (size_t cut = 0; cut < b.n; cut++) {
                        char *copy = malloc(cut ? cut : 1);

                        memcpy(copy, b.b, cut);
                        CHECKF(trust_index_gitlinks(copy, cut, &links, &len) == -EINVAL,
                               "version %u cut at %zu", version, cut);
                        free(copy);
                }
        }
        /* A name length that is not the name's. */
        header(&b, 2, 1);
        entry(&b, 2, 20, 0160000, "src");
        b.b[12 + 61] = 7;
        CHECK(trust_index_gitlinks((char *)b.b, b.n, &links, &len) == -EINVAL);
        /* A v4 prefix strip longer than the previous name. */
        header(&b, 4, 1);
        entry(&b, 4, 20, 0160000, "src");
        b.b[12 + 62] = 9;
        CHECK(trust_index_gitlinks((char *)b.b, b.n, &links, &len) == -EINVAL);
        /* An entry count the file cannot hold. */
        header(&b, 2, 0xffffffffu);
        CHECK(trust_index_gitlinks((char *)b.b, b.n, &links, &len) == -EINVAL);
        PASS();
}

int main(void)
{
        test_index_gitlinks_in_every_version_and_hash();
        test_index_truncated_or_lying_is_refused_without_a_fault();
        return failures ? 1 : 0;
}
