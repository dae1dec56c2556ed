/* The settings filter: a profile's settings.json copy (§3.1) and shared-settings.json for
 * a launch (§3.2), both from the session-writable profile dir. Invariants: a copy with
 * nothing stripped is the input byte for byte; anything re-serialised reads back with the
 * same Python-compatible reader, and in the sandbox no deny rule with a stripped prefix is
 * left. */
#include "fuzz.h"

#include "common/error.h"
#include "common/pyjson.h"
#include "policy/settings.h"

#include <stdbool.h>

static bool denied_prefix(const char *rule)
{
        for (size_t i = 0; i < sizeof(settings_sandbox_deny_prefixes) / sizeof(char *); i++)
                if (strncmp(rule, settings_sandbox_deny_prefixes[i],
                            strlen(settings_sandbox_deny_prefixes[i])) == 0)
                        return true;
        return false;
}

/* The output reads back, and (sandbox) its deny list holds no stripped rule. */
static void check_output(const char *out, size_t len, bool sandbox)
{
        struct pyjson_parser ps = {.start = (const unsigned char *)out,
                                   .p = (const unsigned char *)out,
                                   .end = (const unsigned char *)out + len};
        cJSON *j = NULL, *deny, *c;

        FUZZ_CHECK(pyjson_parse(&ps, &j) == 0 && j);
        deny = pyjson_member_get(pyjson_member_get(j, "permissions"), "deny");
        if (sandbox && cJSON_IsArray(deny))
                for (c = deny->child; c; c = c->next)
                        FUZZ_CHECK(!cJSON_IsString(c) || !denied_prefix(c->valuestring));
        cJSON_Delete(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        const char *raw = (const char *)data;
        struct cs_error err = {0};
        bool stripped, loopback;
        size_t len;
        char *out;

        if (settings_profile_copy(raw, size, false, &out, &len, &stripped, &err) == 0) {
                FUZZ_CHECK(out[len] == '\0');
                if (stripped)
                        check_output(out, len, true);
                else
                        FUZZ_CHECK(len == size && memcmp(out, data, size) == 0);
                free(out);
        }
        for (int sandbox = 0; sandbox <= 1; sandbox++) {
                err = (struct cs_error){0};
                loopback = false;
                if (settings_shared(raw, size, "shared-settings.json", "work", sandbox, &out,
                                    &loopback, &err) < 0) {
                        FUZZ_CHECK(err.msg[0] != '\0');
                        continue;
                }
                FUZZ_CHECK(sandbox || !loopback);
                check_output(out, strlen(out), sandbox);
                free(out);
        }
        return 0;
}
