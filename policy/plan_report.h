/* The trust report's inputs and output (reference §6.4, and more): the judge's rules made
 * from the plan, what claude's .claude.json makes the host run, and the report's text. */
#pragma once
#include "plan.h"
#include "trust_rules.h"

/* Add what a .claude.json's len bytes make the host run (MCP servers, approvals, allowed
 * tools) to *t. -EINVAL, with *ret_why, when the text is not one that every JSON parser reads
 * the same way (duplicate keys, a NUL escape, trailing bytes, nesting deeper than csandbox's
 * parser takes, not an object): claude could then see what csandbox does not. */
int plan_trust_claude_json(struct plan_trust *t, const char *raw, size_t len, char **ret_why);
