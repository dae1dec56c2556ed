/* The after-session trust report (reference §6.4): what in the profile and the work tree
 * makes the host run something, recorded before the launch and compared after it. Internal
 * to the plan (plan_trust_report in plan.h is the public end). */
#pragma once
#include "plan.h"

/* Add what a .claude.json's len bytes make the host run (MCP servers, approvals) to *t. */
void plan_trust_claude_json(struct plan_trust *t, const char *raw, size_t len);
/* Record what the trust report watches now into *t (zeroed first). */
void plan_trust_snapshot(struct plan *p, struct plan_trust *t);
/* Watch git_dir's commondir in the report. */
int plan_track_git_dir(struct plan *p, const char *git_dir);
