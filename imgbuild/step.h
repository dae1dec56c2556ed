/* One step of `image build` that writes a layer (step.c). */
#pragma once
#include "layers.h"

/* Run one step over the layers l: *ret_diff_id the new layer ("" when the step changed
 * nothing), stored and held (*ret_held, or -1). A RUN that exits non-zero: -1 with
 * err->status 1 and the message naming the line and the status. */
int build_step_layer(struct build_ctx *b, const struct build_layers *l, const struct build_step *st,
                     char ret_diff_id[OCI_DIGEST_LEN + 1], int *ret_held, struct cs_error *err);

/* Remove the tmp/layer-* of builds that were killed while a step ran (whose files may
 * belong to subordinate ids, which the caller cannot remove itself). */
int build_sweep(struct build_ctx *b, struct cs_error *err);
