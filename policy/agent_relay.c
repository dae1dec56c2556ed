/* The SSH agents (reference §5) through a filtering relay (relay/agent.c): a bound agent
 * socket would let a session delete the host's keys (`ssh-add -D`), lock the agent with a
 * passphrase the user does not know (`ssh-add -x`) or add keys of its own. The sandbox gets
 * the relay's sockets instead, and the relay forwards only what listing and signing need,
 * decided here: REQUEST_IDENTITIES, SIGN_REQUEST and the session-bind@openssh.com extension
 * that OpenSSH's client sends before it signs. */
#include "agent_relay.h"
#include "bridge_paths.h"

#include "common/cleanup.h"
#include "common/error.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define SSH_AGENTC_REQUEST_IDENTITIES 11
#define SSH_AGENTC_SIGN_REQUEST       13
#define SSH_AGENTC_EXTENSION          27
#define SSH_AGENT_SESSION_BIND        "session-bind@openssh.com"

static uint32_t be32(const unsigned char *p)
{
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

bool agent_request_allowed(const unsigned char *msg, size_t len)
{
        static const char name[] = SSH_AGENT_SESSION_BIND;
        uint32_t n;

        if (len < 1)
                return false;
        switch (msg[0]) {
        case SSH_AGENTC_REQUEST_IDENTITIES:
        case SSH_AGENTC_SIGN_REQUEST:
                return true;
        case SSH_AGENTC_EXTENSION:
                if (len < 5)
                        return false;
                n = be32(msg + 1);
                return n == sizeof(name) - 1 && len - 5 >= n && memcmp(msg + 5, name, n) == 0;
        default:
                return false;
        }
}

int agent_relay_plan(struct sandbox_spec *s, const struct profile *p, int *agent_fds,
                     char *const *paths, size_t n, struct relay_agents *a, struct cs_error *err)
{
        int path_fds[RELAY_AGENT_MAX];
        int res;

        for (size_t i = 0; i < n; i++) {
                if (i < RELAY_AGENT_MAX)
                        a->agent[i] = agent_fds[i];
                else
                        close(agent_fds[i]);
                agent_fds[i] = -1;
        }
        a->n = n < RELAY_AGENT_MAX ? n : RELAY_AGENT_MAX;
        a->allowed = agent_request_allowed;
        res = relay_agents_listen(a, p->state_fd, p->state_dir, path_fds, err);
        for (size_t i = 0; res >= 0 && i < a->n; i++) {
                char dest[64], what[PATH_MAX + 64];

                snprintf(dest, sizeof(dest), BRIDGE_DIR "/ssh-agent-%zu.sock", i);
                snprintf(what, sizeof(what), "ssh-agent relay to %s", paths[i]);
                res = spec_add_bind(s, 0, &path_fds[i], what, dest, err);
        }
        for (size_t i = 0; i < a->n; i++)
                if (path_fds[i] >= 0)
                        close(path_fds[i]);
        if (res < 0)
                return cs_error_hint(err, "unset CLAUDE_PROFILE_SANDBOX_SSH_AGENT to launch "
                                          "without it");
        return 0;
}
