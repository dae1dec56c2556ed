/* registries.conf and its drop-ins: the TOML subset reader and what is made of a file.
 * Invariants: a refused file says why, naming it; an accepted one resolves every name to at
 * most REGISTRY_SOURCES_MAX references, each with 1..REGISTRY_ENDPOINTS_MAX endpoints that
 * have a host and a repository, or refuses it with a message. */
#include "fuzz.h"

#include "common/error.h"
#include "image/registry/registries-conf.h"
#include "image/registry/toml.h"

static void check_names(const struct regconf *c)
{
        static const char *const names[] = {
            "debian",
            "debian:12",
            "x/y@sha256:0000000000000000000000000000000000000000000000000000000000000000",
            "docker.io/library/debian",
            "q.example/team/app",
            "a.dev.example:5000/x/y",
            "localhost/z"};

        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
                struct registry_ref refs[REGISTRY_SOURCES_MAX];
                struct registry_endpoint eps[REGISTRY_ENDPOINTS_MAX];
                struct cs_error err = {0};
                size_t n = 0, ne = 0;

                if (regconf_resolve(c, names[i], refs, REGISTRY_SOURCES_MAX, &n, &err) < 0) {
                        FUZZ_CHECK(err.msg[0] != '\0');
                        continue;
                }
                FUZZ_CHECK(n >= 1 && n <= REGISTRY_SOURCES_MAX);
                for (size_t k = 0; k < n; k++) {
                        err.msg[0] = '\0';
                        if (regconf_endpoints(c, &refs[k], eps, &ne, &err) < 0) {
                                FUZZ_CHECK(err.msg[0] != '\0');
                                continue;
                        }
                        FUZZ_CHECK(ne >= 1 && ne <= REGISTRY_ENDPOINTS_MAX);
                        for (size_t e = 0; e < ne; e++)
                                FUZZ_CHECK(eps[e].host[0] && eps[e].repo[0] &&
                                           !strchr(eps[e].host, '/'));
                }
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct regconf *c = regconf_new();
        struct cs_error err = {0};

        if (!c)
                return 0;
        if (regconf_add(c, (const char *)data, size, "fuzz.conf", false, &err) < 0)
                FUZZ_CHECK(strstr(err.msg, "fuzz.conf") || strstr(err.msg, "registries"));
        else
                check_names(c);
        /* the same bytes as the alias cache, over what the first made */
        err.msg[0] = '\0';
        if (regconf_add(c, (const char *)data, size, "cache.conf", true, &err) == 0)
                check_names(c);
        regconf_free(c);
        return 0;
}
