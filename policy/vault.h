/* Infisical Agent Vault (reference §8.9): a profile opts in with CLAUDE_PROFILE_AGENT_VAULT_*
 * keys in its .env. Those keys never reach the session; a launch that opted in checks the
 * proxy's CA, then runs again as the child of `infisical agent-vault run`, which gives it the
 * proxy and CA variables; the session gets its share of them and a CA bundle that trusts
 * both the system's roots and the proxy's. */
#pragma once
#include "profile.h"

#include <stdbool.h>
#include <stddef.h>

struct cs_error;
struct image_ref;
struct sandbox_spec;

#define VAULT_PREFIX    "CLAUDE_PROFILE_AGENT_VAULT_"
#define VAULT_RUN_ENV   VAULT_PREFIX "RUN" /* set for the launch infisical starts: the profile */
#define VAULT_STATE_ENV "CLAUDE_SANDBOX_AGENT_VAULT" /* the session's: active or unavailable */

enum vault_state {
        VAULT_OFF,         /* the profile has no CLAUDE_PROFILE_AGENT_VAULT_BUNDLE */
        VAULT_EXEC,        /* the proxy serves the pinned CA: exec exec_argv */
        VAULT_ACTIVE,      /* this is the launch infisical started: session holds its vars */
        VAULT_UNAVAILABLE, /* the pre-flight failed (why): launch without the vault */
};

struct plan_vault {
        enum vault_state state;
        bool had_keys; /* the .env had CLAUDE_PROFILE_AGENT_VAULT_* lines (taken out) */
        /* The .env keys, without the prefix. */
        char *bundle, *proxy, *fingerprint, *infisical_profile, *no_proxy;
        char *why;       /* VAULT_UNAVAILABLE: the reason, for the note run prints */
        char *exec_path; /* VAULT_EXEC: the infisical CLI found on PATH */
        char **exec_argv;
        size_t n_exec_argv;
        char **session; /* VAULT_ACTIVE: NAME=VALUE, what the CLI set, taken out of environ */
        size_t n_session;
        char *ca_bundle; /* VAULT_ACTIVE: the combined bundle on the host */
};

/* Take every CLAUDE_PROFILE_AGENT_VAULT_* key out of env (the profile's .env, p names it),
 * whatever else happens, and check them: an unknown key, BUNDLE without PROXY or
 * CA_FINGERPRINT, or a fingerprint not written SHA256:XX:... is an error naming the file. */
int vault_split(const struct profile *p, struct profile_env *env, struct plan_vault *v,
                struct cs_error *err);
/* For a profile that opted in: the launch infisical started (VAULT_RUN_ENV is name) takes the
 * CLI's variables out of this process's environment, so that what csandbox runs on the host
 * does not use the proxy, and writes the combined CA bundle; any other launch asks the
 * proxy for its CA (directly, 5 s) and compares it with the pin: VAULT_EXEC with the CLI's
 * argv (self_argv, csandbox's own, after its `--`), or VAULT_UNAVAILABLE and why. */
int vault_route(struct plan_vault *v, const struct profile_config *c, const char *name,
                char *const *self_argv, struct cs_error *err);
/* A host launch's share: all of the CLI's variables, the CA ones naming the combined
 * bundle, set in the NULL-terminated env (entries replaced). */
int vault_host_env(const struct plan_vault *v, char ***env, size_t *n);
/* A sandbox's share (VAULT_STATE_ENV, and when active the proxy URLs as secrets, NO_PROXY
 * with the host's addresses, the CA variables, the bundle read-only over the root's system
 * bundle paths). img: the image, NULL for the embedded default. */
int vault_sandbox(const struct plan_vault *v, struct sandbox_spec *s, const struct image_ref *img,
                  struct cs_error *err);
/* Whether a variable the CLI sets holds the session's token (a proxy URL). */
bool vault_secret_var(const char *name);
/* The briefing's note for VAULT_STATE_ENV's value in s, or "". */
const char *vault_briefing(const struct sandbox_spec *s);
/* VAULT_EXEC for `plan`: the CLI's argv (the bundle redacted) and what it starts. */
char *vault_exec_json(const struct plan_vault *v, const char *name);
void vault_free(struct plan_vault *v);
