/* The trust report's inputs and output (reference §6.4, and more): the judge's rules made
 * from the plan, what claude's .claude.json makes the host run, and the report's text. */
#pragma once
#include "plan.h"
#include "trust_rules.h"
#include "claude_json.h"

/* dirfd/name read as .claude.json is read everywhere: bounded (CLAUDE_JSON_MAX), a symlink
 * refused, then that one parser. NULL with *ret_why (to free) saying why. */
cJSON *plan_claude_json_read(int dirfd, const char *name, char **ret_why);

/* The session's own copy of the profile's .claude.json (state dir, bound over it inside),
 * canonical (csandbox's parser, csandbox's printer). The host's file is created ({}) when
 * missing; when it cannot be read unambiguously it is not copied, and the journal judges it
 * in place. */
int plan_claude_json_stage(struct plan *p, struct cs_error *err);
/* After the session: the copy is read by the one parser, and its values of claude's own
 * state (claude_json_state_key) are written over the host's file; every other key keeps the
 * host's value, and each the session changed is a finding (added to found) whose value
 * waits in the state dir for the user's yes. A copy that cannot be read unambiguously is not
 * written back at all (a finding). */
void plan_claude_json_writeback(struct plan *p, struct plan_trust *found);
/* The user said yes: what the sessions changed in those keys goes into the host's file. */
int plan_claude_json_accept(struct plan *p, struct cs_error *err);
