/* Reference §5: what csandbox forwards from the host into a `run` session. The gpg-agent's
 * restricted socket is bound into the sandbox as it is (one kernel: a path socket works
 * across network namespaces); the SSH agents go through a relay that forwards only listing
 * and signing, and the clipboard through one that runs only allow-listed `wl-paste` reads. */
#pragma once
#include "profile.h"
#include "stage.h"

#include "agent_relay.h"
#include "bridge_paths.h"
#include "clipboard.h"
#include "packages.h"

#include "../relay/relay.h"
#include "../spec/spec.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define AGENT_RELAY_MAX RELAY_AGENT_MAX

struct plan_bridges {
        bool gpg; /* the gpg-agent is forwarded: the git identity may sign */
        /* The relays the plan made sockets for (relay_set_init'ed by the plan; started
         * with relay_set_start once the sandbox runs, stopped by bridges_close). */
        struct relay_set relays;
};

/* CLAUDE_PROFILE_SANDBOX_SSH_AGENT, _GPG and _CLIPBOARD into the spec (the clipboard's
 * socket is made, not yet served). */
int plan_add_bridges(struct sandbox_spec *s, const struct profile_config *c,
                     const struct profile *p, struct plan_bridges *b, struct stage_warnings *warn,
                     struct cs_error *err);
/* Stop the relays and close what the plan opened; again, nothing. */
void bridges_close(struct plan_bridges *b);

/* CLAUDE_PROFILE_SANDBOX_CHROME: a warning when the profile's login lacks every OAuth scope
 * Claude in Chrome uses (§2.1). */
int plan_chrome_scopes(const struct profile_config *c, const struct profile *p,
                       struct stage_warnings *warn, struct cs_error *err);
/* CLAUDE_PROFILE_SANDBOX_GH: GH_TOKEN (secret) from the host's `gh auth token`, 10 s at
 * most; a warning when it gives none. */
int plan_add_gh_token(struct sandbox_spec *s, const struct profile_config *c,
                      struct stage_warnings *warn, struct cs_error *err);

/* Ensure the sandbox's own BRIDGE_DIR (0700). */
int bridge_dir(struct sandbox_spec *s, struct cs_error *err);

/* A host socket of this user's, opened once (O_PATH) and checked; -errno. */
int bridge_socket_open(const char *path);
