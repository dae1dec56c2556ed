/* The decisions that depend on this machine, made into the spec before --plan prints it and
 * before the launch: the launch then runs the spec as it is, and --plan shows what runs. */
#include "internal.h"

#include "../common/error.h"

#include <stdlib.h>
#include <string.h>

int runner_spec_complete(struct sandbox_spec *s, struct cs_error *err)
{
        int r = runner_check_network(s, err);

        if (r >= 0 && s->package_broker && !s->map_range) {
                /* The broker needs uid 0 mapped, which only the subordinate range gives. */
                struct cs_error why = {0};

                s->map_range = true;
                if (idmap_check_range(s, NULL, &why) < 0) {
                        s->map_range = false;
                        s->package_broker = false;
                        /* nor a layer for it */
                        for (size_t i = 0; i < s->n_layer_dirs; i++)
                                free(s->layer_dirs[i]);
                        s->n_layer_dirs = 0;
                        r = spec_warn(s, err,
                                      "csandbox: sudo cannot install packages in this session: "
                                      "it needs a subordinate id range, and %s",
                                      why.msg);
                }
        }
        if (r >= 0 && s->net == SPEC_NET_PASTA) {
                char *helper = spec_net_helper(s);
                const char *base = helper ? strrchr(helper, '/') : NULL;

                if (base && strcmp(base + 1, "slirp4netns") == 0)
                        r = spec_warn(s, err,
                                      "csandbox: pasta is not installed; using %s for the "
                                      "sandbox's network",
                                      helper);
                free(helper);
        }
        return r;
}
