/* The trust judge's reader of a git config a session wrote (policy/trust_rules.c):
 * invariants: never a fault, and a config judged inert gives no reason while one judged not
 * inert always names one (the report shows it). */
#include "fuzz.h"

#include "policy/trust_rules.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char *why = NULL;
        bool inert = trust_git_config_inert((const char *)data, size, &why);

        FUZZ_CHECK(inert ? why == NULL : why != NULL);
        free(why);
        return 0;
}
