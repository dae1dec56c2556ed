/* Both relays of a session, started and stopped together. */
#include "relay-private.h"

void relay_set_init(struct relay_set *r)
{
        *r = (struct relay_set){.clipboard = {.listen_fd = -1, .dir_fd = -1},
                                .agents = {.dir_fd = -1}};
        for (size_t i = 0; i < RELAY_AGENT_MAX; i++)
                r->agents.listen[i] = r->agents.agent[i] = -1;
}

int relay_set_start(struct relay_set *r, struct cs_error *err)
{
        int res = relay_agents_start(&r->agents, err);

        return res < 0 ? res : relay_clipboard_start(&r->clipboard, err);
}

void relay_set_close(struct relay_set *r)
{
        relay_agents_close(&r->agents);
        relay_clipboard_close(&r->clipboard);
}
