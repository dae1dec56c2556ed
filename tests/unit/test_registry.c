/* Unit tests for image/registry.c's parsers of untrusted or user input: image references
 * and WWW-Authenticate challenges. */
#include "common/error.h"
#include "image/registry/registry.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "check.h"

#define D1 "sha256:1111111111111111111111111111111111111111111111111111111111111111"

/* No host: the default registry (library/ for one component); a first component with a dot,
 * a colon or `localhost` is the host; a digest pins, and a tag beside it names the image. */
static void test_ref_forms_as_podman_reads_them(void)
{
        static const struct {
                const char *in, *host, *repo, *tag, *digest, *name;
        } cases[] = {
            {"debian:12", "docker.io", "library/debian", "12", "", "docker.io/library/debian:12"},
            {"debian", "docker.io", "library/debian", "latest", "",
             "docker.io/library/debian:latest"},
            {"someone/tool:v1", "docker.io", "someone/tool", "v1", "", "docker.io/someone/tool:v1"},
            {"ghcr.io/org/img:1.0", "ghcr.io", "org/img", "1.0", "", "ghcr.io/org/img:1.0"},
            {"localhost/img", "localhost", "img", "latest", "", "localhost/img:latest"},
            {"127.0.0.1:5000/a/b/c:t_1", "127.0.0.1:5000", "a/b/c", "t_1", "",
             "127.0.0.1:5000/a/b/c:t_1"},
            {"reg.example:443/x", "reg.example:443", "x", "latest", "", "reg.example:443/x:latest"},
            {"r.example/x@" D1, "r.example", "x", "", D1, "r.example/x@" D1},
            {"r.example/x:v2@" D1, "r.example", "x", "v2", D1, "r.example/x:v2"},
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct registry_ref r;
                struct cs_error err;

                CHECKF(registry_ref_parse(cases[i].in, &r, &err) == 0, "%s: %s", cases[i].in,
                       err.msg);
                CHECKF(strcmp(r.host, cases[i].host) == 0 && strcmp(r.repo, cases[i].repo) == 0 &&
                           strcmp(r.tag, cases[i].tag) == 0 &&
                           strcmp(r.digest, cases[i].digest) == 0 &&
                           strcmp(r.name, cases[i].name) == 0,
                       "%s -> %s %s %s %s %s", cases[i].in, r.host, r.repo, r.tag, r.digest,
                       r.name);
        }
        PASS();
}

static void test_ref_refusals_name_the_reference(void)
{
        const char *bad[] = {"",       "Upper/x",    "x@sha256:abc", "x@md5:00",
                             "a//b",   "host:5000/", "x:",           "x:bad!tag",
                             "-x",     "x/",         "/x",           "x/.y",
                             "x:-tag", "h o/x",      "x@",           "x:" D1 "@" D1};
        struct registry_ref r;
        struct cs_error err;

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char want[200];

                snprintf(want, sizeof(want), "`%s` is not an image reference", bad[i]);
                CHECKF(registry_ref_parse(bad[i], &r, &err) == -EINVAL && strstr(err.msg, want),
                       "`%s` accepted or wrong message: %s", bad[i], err.msg);
        }
        PASS();
}

static void test_challenge_params_quoted_bare_and_escaped(void)
{
        char v[64];
        const char *h = "Bearer realm=\"https://auth.example/token\",service=reg,"
                        "scope=\"repository:a/b:pull,push\",odd=\"q\\\"x\"";

        registry_challenge_param(h, "realm", v, sizeof(v));
        CHECKF(strcmp(v, "https://auth.example/token") == 0, "realm %s", v);
        registry_challenge_param(h, "service", v, sizeof(v));
        CHECKF(strcmp(v, "reg") == 0, "service %s", v);
        registry_challenge_param(h, "scope", v, sizeof(v));
        CHECKF(strcmp(v, "repository:a/b:pull,push") == 0, "scope %s", v);
        registry_challenge_param(h, "odd", v, sizeof(v));
        CHECKF(strcmp(v, "q\"x") == 0, "odd %s", v);
        registry_challenge_param(h, "missing", v, sizeof(v));
        CHECK(v[0] == '\0');
        registry_challenge_param("Basic realm=\"0123456789012345678901234567890\"", "realm", v, 8);
        CHECKF(strcmp(v, "0123456") == 0, "bounded %s", v);
        registry_challenge_param("Bearer realm=\"unterminated", "realm", v, sizeof(v));
        CHECKF(strcmp(v, "unterminated") == 0, "unterminated %s", v);
        registry_challenge_param("Bearer", "realm", v, sizeof(v));
        CHECK(v[0] == '\0');
        PASS();
}

int main(void)
{
        test_ref_forms_as_podman_reads_them();
        test_ref_refusals_name_the_reference();
        test_challenge_params_quoted_bare_and_escaped();
        return failures ? 1 : 0;
}
