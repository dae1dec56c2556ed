/* The SSH agents' part of the bridges (agent_relay.c): what the relay may forward, and its
 * sockets in the plan. */
#pragma once
#include "profile.h"

#include "../relay/relay.h"
#include "../spec/spec.h"

#include <stdbool.h>
#include <stddef.h>

/* The relay's rule: whether an agent request (its message, without the length) may reach
 * the agent. Listing, signing and the session-bind@openssh.com extension; nothing else. */
bool agent_request_allowed(const unsigned char *msg, size_t len);
/* The SSH agents' part (agent_relay.c): the relay's sockets (relay_agents_listen) bound into
 * the sandbox at BRIDGE_DIR/ssh-agent-<i>.sock, relaying to the agent whose checked O_PATH
 * socket is agent_fds[i] (taken, even on failure; paths name them) under
 * agent_request_allowed. Whatever was made is in a, which relay_set_close undoes. */
int agent_relay_plan(struct sandbox_spec *s, const struct profile *p, int *agent_fds,
                     char *const *paths, size_t n, struct relay_agents *a, struct cs_error *err);
