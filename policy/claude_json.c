/* The one reading of a .claude.json's text that the trust report and the write-back share:
 * refused when two JSON parsers could read it differently, and what in it makes the host's
 * claude run something (reference §6.4). */
#include "claude_json.h"

#include "../common/cleanup.h"
#include "../common/strv.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int claude_json_name_cmp(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Whether an object anywhere in j has a name twice: cJSON keeps the first, JSON.parse the
 * last, so the two would read different servers. */
static bool has_duplicates(const cJSON *j)
{
        const cJSON *e;
        size_t n = 0, i = 0;
        bool dup = false;

        cJSON_ArrayForEach(e, j)
        {
                n++;
                if (has_duplicates(e))
                        return true;
        }
        if (!cJSON_IsObject(j) || n < 2)
                return false;
        {
                _cleanup_free_ const char **names = calloc(n, sizeof(*names));

                if (!names)
                        return true;
                cJSON_ArrayForEach(e, j) names[i++] = e->string ? e->string : "";
                qsort(names, n, sizeof(*names), claude_json_name_cmp);
                for (i = 1; i < n && !dup; i++)
                        dup = strcmp(names[i - 1], names[i]) == 0;
        }
        return dup;
}

static void trust_servers(struct plan_trust *t, const char *scope, const cJSON *servers)
{
        const cJSON *e;

        if (!cJSON_IsObject(servers))
                return;
        cJSON_ArrayForEach(e, servers)
        {
                char kind[PATH_MAX + 32];

                snprintf(kind, sizeof(kind), "MCP server (%s)", scope);
                trust_add(t, kind, e->string, e);
        }
}

static void trust_strings(struct plan_trust *t, const char *kind, const char *scope,
                          const cJSON *list)
{
        const cJSON *x;

        cJSON_ArrayForEach(x, list)
        {
                if (cJSON_IsString(x)) {
                        char k[PATH_MAX + 64];

                        snprintf(k, sizeof(k), "%s (%s)", kind, scope);
                        trust_add(t, k, x->valuestring, NULL);
                }
        }
}

static void trust_scope(struct plan_trust *t, const char *scope, const cJSON *o)
{
        trust_servers(t, scope, cJSON_GetObjectItemCaseSensitive(o, "mcpServers"));
        trust_strings(t, "approved .mcp.json server", scope,
                      cJSON_GetObjectItemCaseSensitive(o, "enabledMcpjsonServers"));
        trust_strings(t, "tool allowed without asking", scope,
                      cJSON_GetObjectItemCaseSensitive(o, "allowedTools"));
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "enableAllProjectMcpServers")))
                trust_add(t, "all .mcp.json servers approved", scope, NULL);
}

/* The one reading of a .claude.json: cJSON, with what JSON.parse would read otherwise
 * refused. NULL with *ret_why. */
cJSON *claude_json_parse(const char *raw, size_t len, char **ret_why)
{
        const char *end = NULL;
        cJSON *j;

        *ret_why = NULL;
        /* A \u0000 ends a name for cJSON, not for JSON.parse. */
        if (memmem(raw, len, "\\u0000", 6)) {
                *ret_why = strdup("a \\u0000 escape, which two parsers read differently");
                return NULL;
        }
        j = cJSON_ParseWithLengthOpts(raw, len, &end, false);
        while (j && end && end < raw + len && isspace((unsigned char)*end))
                end++;
        if (!cJSON_IsObject(j) || (end && end < raw + len && *end)) {
                cJSON_Delete(j);
                *ret_why = strdup("not one JSON object csandbox's parser reads whole (nesting "
                                  "deeper than 1000, trailing bytes, or invalid JSON)");
                return NULL;
        }
        if (has_duplicates(j)) {
                cJSON_Delete(j);
                *ret_why = strdup("a key given twice in one object, which two parsers read "
                                  "differently");
                return NULL;
        }
        return j;
}

void claude_json_items(struct plan_trust *t, const cJSON *j)
{
        const cJSON *e;

        trust_scope(t, "user", j);
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(j, "projects"))
        {
                if (e->string)
                        trust_scope(t, e->string, e);
        }
}

int plan_trust_claude_json(struct plan_trust *t, const char *raw, size_t len, char **ret_why)
{
        cJSON *j = claude_json_parse(raw, len, ret_why);

        if (!j)
                return -EINVAL;
        claude_json_items(t, j);
        /* And each other setting that is not claude's own state, against claude's defaults. */
        cJSON_Delete(claude_json_writeback(NULL, j, t, NULL));
        cJSON_Delete(j);
        return 0;
}
