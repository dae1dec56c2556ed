/* Reference §5: what csandbox forwards from the host into a `run` session (the SSH agents,
 * as bound sockets), and the warnings for the reference's settings it does not give yet. */
#pragma once
#include "profile.h"
#include "stage.h"

#include "../spec/spec.h"

int plan_add_bridges(struct sandbox_spec *s, const struct profile_config *c,
                     struct stage_warnings *warn, struct cs_error *err);
/* CLAUDE_PROFILE_SANDBOX_GH: GH_TOKEN (secret) from the host's `gh auth token`, 10 s at
 * most; a warning when it gives none. */
int plan_add_gh_token(struct sandbox_spec *s, const struct profile_config *c,
                      struct stage_warnings *warn, struct cs_error *err);
