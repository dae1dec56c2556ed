/* Inside `image build` (imgbuild/): a stage's layers (layers.c) and what a step is, shared
 * by the Containerfile interpreter (engine.c), the steps (step.c) and their worker
 * (worker.c). */
#pragma once
#include "privileges.h"

#include "../image/containerfile/build.h"
#include "../image/oci/oci.h"
#include "../image/store/store.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct cs_error;

/* A stage's layers, bottom first: each held (a shared flock on its store dir, so no sweep
 * takes it) with its diff/ open. */
struct build_layers {
        char **diff_ids; /* "sha256:HEX" */
        int *held;
        int *diff_fds; /* O_PATH|O_DIRECTORY */
        size_t n;
};
void build_layers_free(struct build_layers *l);
/* Append diff_id (held_fd taken). */
int build_layers_add(struct build_layers *l, const char *diff_id, int held_fd,
                     struct cs_error *err);
int build_layers_copy(struct build_layers *dst, const struct build_layers *src,
                      struct cs_error *err);

struct build_ctx {
        struct image_store *store;
        const struct build_privileges *priv; /* the ids and capabilities of every step */
        int net;                             /* enum build_net (imgbuild.h) */
        bool quiet;
};

/* What a RUN step runs. */
struct build_run {
        char **argv; /* the shell and the command line, or the exec form */
        char **env;  /* NAME=VALUE */
        const char *cwd;
        uid_t uid; /* the Containerfile's USER, resolved */
        gid_t gid;
        const char *what; /* "Containerfile:12" */
};

enum build_step_kind { BUILD_STEP_RUN, BUILD_STEP_COPY, BUILD_STEP_MKDIR };

struct build_step {
        enum build_step_kind kind;
        const struct build_run *run;     /* RUN */
        const struct build_copy *copy;   /* COPY, ADD */
        const struct build_layers *from; /* COPY --from a stage or image: its layers */
        const char *mkdir;               /* MKDIR: WORKDIR's absolute path */
        /* COPY, ADD from the context: build_copy_digest's digest, which the step's cache
         * key holds. The copy is digested as it is made and must be of the same. */
        const char *content;
        const char *what;
};
