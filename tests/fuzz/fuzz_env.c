/* The env files: a profile's .env (§1.3, session-writable), exec's --env-file, and the
 * CLAUDE_PROFILE_SANDBOX_FORWARD_ENV list. Invariants: every .env name is non-empty, has no
 * '=' and appears once; no name or value spans a line; an --env-file that parses gives
 * only valid names; forwarded names are non-empty, comma-free and trimmed. */
#include "fuzz.h"

#include "common/error.h"
#include "policy/profile.h"
#include "spec/spec.h"

static void check_profile_env(const uint8_t *data, size_t size)
{
        struct profile_env e = {0};

        /* profile_env_load refuses a .env with a NUL byte before parsing it. */
        if (memchr(data, '\0', size))
                return;
        if (profile_env_parse((const char *)data, size, &e) < 0)
                return;
        for (size_t i = 0; i < e.n; i++) {
                FUZZ_CHECK(!strchr(e.names[i], '='));
                FUZZ_CHECK(!strpbrk(e.names[i], "\n\r") && !strpbrk(e.values[i], "\n\r"));
                FUZZ_CHECK(!strstr(e.values[i], "\xe2\x80\xa8") &&
                           !strstr(e.values[i], "\xc2\x85"));
                for (size_t k = 0; k < i; k++)
                        FUZZ_CHECK(strcmp(e.names[i], e.names[k]) != 0);
        }
        profile_env_free(&e);
}

static void check_env_file(const uint8_t *data, size_t size)
{
        struct sandbox_spec s;
        struct cs_error err = {0};

        spec_init(&s);
        if (spec_env_parse(&s, (const char *)data, size, "--env-file fuzz", false, &err) == 0) {
                for (size_t i = 0; i < s.n_env; i++)
                        FUZZ_CHECK(spec_env_name_valid(s.env[i].name) && s.env[i].value);
        } else {
                FUZZ_CHECK(err.msg[0] != '\0');
        }
        spec_free(&s);
}

static void check_forward_env(const uint8_t *data, size_t size)
{
        char *list = fuzz_cstr(data, size), **v = NULL;
        size_t n = 0;

        if (profile_forward_env_split(list, &v, &n) == 0) {
                for (size_t i = 0; i < n; i++) {
                        size_t len = strlen(v[i]);

                        FUZZ_CHECK(len > 0 && !strchr(v[i], ','));
                        FUZZ_CHECK(v[i][0] != ' ' && v[i][0] != '\t');
                        FUZZ_CHECK(v[i][len - 1] != ' ' && v[i][len - 1] != '\t');
                        free(v[i]);
                }
                free(v);
        }
        free(list);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        check_profile_env(data, size);
        check_env_file(data, size);
        check_forward_env(data, size);
        return 0;
}
