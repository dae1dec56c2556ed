/* The trust judge's reader of a git config a session wrote (policy/trust_git_config.c):
 * invariants: never a fault; every key it passes on has a canonical section (lowercase
 * letters, digits and dashes; the rest may be cut at a NUL in the subsection, as git cuts
 * it); a config judged inert gives no reason, one
 * judged not inert always names one (the report shows it); a config git would refuse is
 * never inert, and one whose keys are all inert is. Whether git reads it the same is the
 * differential test's (tests/unit/git_config_oracle.py), with git itself as the oracle. */
#include "fuzz.h"

#include "policy/trust_rules.h"

#include <stdbool.h>
#include <stdlib.h>

struct seen {
        size_t keys;
        bool all_inert;
};

static int check_key(const char *key, const char *value, void *ctx)
{
        struct seen *s = ctx;
        const char *end = strchr(key, '.');

        (void)value;
        for (const char *c = key; c < (end ? end : key + strlen(key)); c++)
                FUZZ_CHECK((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-');
        s->keys++;
        if (!trust_git_key_inert(key))
                s->all_inert = false;
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct seen s = {.all_inert = true};
        char *why = NULL;
        size_t line = 0;
        int parsed = trust_git_config_parse((const char *)data, size, check_key, &s, &line);
        bool inert = trust_git_config_inert((const char *)data, size, &why);

        FUZZ_CHECK(inert ? why == NULL : why != NULL);
        FUZZ_CHECK(inert == (parsed == 0 && s.all_inert));
        FUZZ_CHECK(line >= 1);
        free(why);
        return 0;
}
