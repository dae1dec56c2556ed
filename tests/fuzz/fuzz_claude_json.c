/* The trust report's reader of the profile's .claude.json (§6.4), which the session can
 * rewrite: MCP servers and approvals. Invariant: every item is "kind\tname\tvalue" with
 * exactly two tabs (a tab in a server or project name must not shift the fields the
 * report splits to show it). */
#include "fuzz.h"

#include "policy/plan_report.h"
#include "policy/trust.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct plan_trust t = {0};
        char *why = NULL;

        (void)plan_trust_claude_json(&t, (const char *)data, size, &why);
        free(why);
        for (size_t i = 0; i < t.n; i++) {
                size_t tabs = 0;

                for (const char *c = t.items[i]; *c; c++)
                        tabs += *c == '\t';
                FUZZ_CHECK(tabs == 2);
        }
        trust_free(&t);
        return 0;
}
