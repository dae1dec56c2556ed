/* The one reading of a .claude.json's text (claude_json.c). */
#pragma once
#include "trust.h"

#include <cjson/cJSON.h>
#include <stddef.h>

/* strcmp over two char * (qsort). */
int claude_json_name_cmp(const void *a, const void *b);
/* len bytes parsed by csandbox's one parser; NULL with *ret_why (to free) when the text is
 * not one every JSON parser reads the same way. */
cJSON *claude_json_parse(const char *raw, size_t len, char **ret_why);
/* What j makes the host's claude run (MCP servers, approvals, allowed tools), added to *t. */
void claude_json_items(struct plan_trust *t, const cJSON *j);
/* Add what a .claude.json's len bytes make the host run (MCP servers, approvals, allowed
 * tools) to *t. -EINVAL, with *ret_why, when the text is not one that every JSON parser reads
 * the same way (duplicate keys, a NUL escape, trailing bytes, nesting deeper than csandbox's
 * parser takes, not an object): claude could then see what csandbox does not. */
int plan_trust_claude_json(struct plan_trust *t, const char *raw, size_t len, char **ret_why);
