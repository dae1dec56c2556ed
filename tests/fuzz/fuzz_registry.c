/* What a registry pull reads besides image metadata: the image reference on the command
 * line, the WWW-Authenticate challenge a registry answers with, and the auth files podman
 * and docker write. Invariants: an accepted reference has a host, a repository and a tag or
 * a checked digest, and a store name that says which; a challenge value is bounded and
 * NUL-terminated; credentials found are a user without ':' and a password. */
#include "fuzz.h"

#include "common/error.h"
#include "image/registry/registry-private.h"
#include "image/registry/registry.h"

static void check_ref(const char *s)
{
        struct registry_ref ref;
        struct cs_error err = {0};

        if (registry_ref_parse(s, &ref, &err) < 0) {
                FUZZ_CHECK(err.msg[0] != '\0');
                return;
        }
        FUZZ_CHECK(ref.host[0] && ref.repo[0] && ref.name[0]);
        FUZZ_CHECK(ref.tag[0] || ref.digest[0]);
        if (ref.digest[0])
                FUZZ_CHECK(oci_digest_check(ref.digest, "fuzz", &err) == 0);
        FUZZ_CHECK(strncmp(ref.name, ref.host, strlen(ref.host)) == 0);
}

static void check_challenge(const char *s)
{
        static const char *const keys[] = {"realm", "service", "scope", "error"};
        char out[64];

        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
                memset(out, 'x', sizeof(out));
                registry_challenge_param(s, keys[i], out, 32);
                FUZZ_CHECK(memchr(out, '\0', 32));
                FUZZ_CHECK(out[32] == 'x');
        }
}

static void check_creds(const uint8_t *data, size_t size)
{
        struct registry_creds c = {0};
        struct cs_error err = {0};
        int r = registry_creds_parse((const char *)data, size, "auth.json", "registry.test",
                                     "library/debian", &c, &err);

        if (r < 0) {
                FUZZ_CHECK(err.msg[0] != '\0');
        } else if (r == 1) {
                FUZZ_CHECK(c.user && c.pass && c.file && !strchr(c.user, ':'));
                registry_creds_free(&c);
        } else {
                FUZZ_CHECK(r == 0 && !c.user && !c.pass);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char *s = fuzz_cstr(data, size);

        check_ref(s);
        check_challenge(s);
        free(s);
        check_creds(data, size);
        return 0;
}
