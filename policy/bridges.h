/* Reference §5: what csandbox forwards from the host into a `run` session. The gpg-agent's
 * restricted socket is bound into the sandbox as it is (one kernel: a path socket works
 * across network namespaces); the SSH agents go through a relay that forwards only listing
 * and signing, and the clipboard through one that runs only allow-listed `wl-paste` reads. */
#pragma once
#include "profile.h"
#include "stage.h"

#include "bridge_paths.h"

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

/* The clipboard's part of the plan (clipboard.c): the relay's socket, made and bound into
 * the sandbox with the wl-paste shim; an error when the host has no wl-paste. */
int clipboard_plan(struct sandbox_spec *s, const struct profile *p, struct plan_bridges *b,
                   struct cs_error *err);
/* The SSH agents' part (agent_relay.c): the relay's sockets (relay_agents_listen) bound into
 * the sandbox at BRIDGE_DIR/ssh-agent-<i>.sock, relaying to the agent whose checked O_PATH
 * socket is agent_fds[i] (taken, even on failure; paths name them) under
 * agent_request_allowed. Whatever was made is in a, which relay_set_close undoes. */
int agent_relay_plan(struct sandbox_spec *s, const struct profile *p, int *agent_fds,
                     char *const *paths, size_t n, struct relay_agents *a, struct cs_error *err);
/* The relay's rule: whether an agent request (its message, without the length) may reach
 * the agent. Listing, signing and the session-bind@openssh.com extension; nothing else. */
bool agent_request_allowed(const unsigned char *msg, size_t len);
/* Ensure the sandbox's own BRIDGE_DIR (0700). */
int bridge_dir(struct sandbox_spec *s, struct cs_error *err);

/* One of csandbox's static helpers for inside (name, beside csandbox), opened once by fd and
 * checked: a regular executable only its owner can change. purpose starts the error. */
int plan_shim_open(const char *name, const char *purpose, int *ret_fd, char **ret_path,
                   struct cs_error *err);
/* The package broker (runner/broker.c) with csandbox's sudo at SPEC_BROKER_DIR/sudo and,
 * when also_at is set, there too (a run's ~/.local/bin/sudo). */
int packages_plan(struct sandbox_spec *s, const char *also_at, struct cs_error *err);
/* A host socket of this user's, opened once (O_PATH) and checked; -errno. */
int bridge_socket_open(const char *path);

/* The relay's rule (reference §5): the wl-paste arguments a session may ask for. */
bool clipboard_args_allowed(char *const *argv, size_t n, const char **ret_bad);
