/* Logins of the host's that a sandbox cannot reach, read on the host and passed in as the
 * variables the tools read (reference §2.1 item 5): Infisical's (the OS keyring) and
 * Pulumi Cloud's (~/.pulumi). */
#pragma once
#include "profile.h"
#include "stage.h"

struct sandbox_spec;
struct cs_error;

/* CLAUDE_PROFILE_SANDBOX_INFISICAL: the allowlisted logins of ~/.infisical's config whose
 * keyring token (secret-tool) is still valid; the primary's INFISICAL_TOKEN (secret),
 * INFISICAL_API_URL and INFISICAL_DOMAIN, and all of them as CLAUDE_SANDBOX_INFISICAL JSON
 * (secret). A warning for each entry or login that gives nothing. */
int plan_add_infisical(struct sandbox_spec *s, const struct profile_config *c,
                       struct stage_warnings *warn, struct cs_error *err);
/* CLAUDE_PROFILE_SANDBOX_PULUMI: PULUMI_ACCESS_TOKEN (secret) for the current Pulumi Cloud
 * backend of ~/.pulumi/credentials.json; a warning when there is none. */
int plan_add_pulumi(struct sandbox_spec *s, const struct profile_config *c,
                    struct stage_warnings *warn, struct cs_error *err);
/* The briefing's note on the forwarded Infisical logins, or NULL when there are none;
 * free() it. */
char *logins_briefing(const struct sandbox_spec *s);
