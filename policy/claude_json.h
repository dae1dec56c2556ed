/* The one reading of a .claude.json's text (claude_json.c). */
#pragma once
#include "trust.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

/* strcmp over two char * (qsort). */
int claude_json_name_cmp(const void *a, const void *b);
/* len bytes parsed by csandbox's one parser; NULL with *ret_why (to free) when the text is
 * not one every JSON parser reads the same way. */
cJSON *claude_json_parse(const char *raw, size_t len, char **ret_why);
/* What j makes the host's claude run (MCP servers, approvals, allowed tools), added to *t. */
void claude_json_items(struct plan_trust *t, const cJSON *j);
/* Add what a .claude.json's len bytes make the host run (MCP servers, approvals, allowed
 * tools) and each other key that is not claude's own state ("claude setting (scope)") to *t.
 * -EINVAL, with *ret_why, when the text is not one that every JSON parser reads the same way
 * (duplicate keys, a NUL escape, trailing bytes, nesting deeper than csandbox's parser takes, not
 * an object): claude could then see what csandbox does not. */
int plan_trust_claude_json(struct plan_trust *t, const char *raw, size_t len, char **ret_why);

/* Whether name, at the top level or (project) in a project's entry, is claude's own state:
 * what a session writes there goes back to the host's file (claude_json_merge.c). */
bool claude_json_state_key(bool project, const char *name);
/* The host's file after a session: host (NULL: none) with session's value for every state
 * key, the host's for every other. Each other key where the session's differs (a missing key
 * read as claude's default) is added to *changes, "claude setting (scope) in path\tkey\t
 * value" (path NULL: without " in path"), except the MCP servers, approvals and allowed tools
 * that claude_json_items lists one by one. NULL on ENOMEM. */
cJSON *claude_json_writeback(const cJSON *host, const cJSON *session, struct plan_trust *changes,
                             const char *path);
/* The user accepted: each key other than state where session differs from base (the host's
 * file when the session ended) takes session's value in host. -1 on ENOMEM. */
int claude_json_accept(cJSON *host, const cJSON *base, const cJSON *session);
