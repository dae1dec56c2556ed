/* The worker of `image build`'s steps (worker.c). */
#pragma once
#include "layers.h"

#include "../common/error.h"

#include <stdbool.h>
#include <stdint.h>

/* What the worker sends back. */
struct worker_result {
        int r;
        bool empty;
        unsigned char diff_id[32];
        struct layer_stats stats;
        char msg[CS_ERROR_MAX];
};

struct worker_job {
        const struct build_layers *l;
        const struct build_step *st;
        int tfd;            /* tmp/layer-*: diff/, work/, empty/, metadata */
        bool only_remove;   /* the step failed: give the tree back to the caller for removal */
        bool sweep;         /* tfd is the store's tmp/: remove what killed builds left there */
        bool prepare;       /* before a RUN: give_owned */
        uint32_t given_max; /* build_layer_commit's: BUILD_ID_MAX after a prepare, or 0 */
        const char *const *mountpoints;
        size_t n_mountpoints;
};

/* Run the job in the worker; *res what it sent back. */
int worker_run(struct build_ctx *b, const struct worker_job *j, struct worker_result *res,
               struct cs_error *err);
