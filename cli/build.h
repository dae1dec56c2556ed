/* `csandbox image build` inside the csandbox-import helper: the Containerfile executor
 * (build_exec.c), its command line (build_main.c) and its steps (build_step.c). */
#pragma once
#include "../image/build.h"
#include "../image/oci.h"
#include "../image/store.h"

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
        bool range;               /* the caller's subordinate range is mapped in every step */
        const char *why_no_range; /* when !range: what idmap_check_range said */
        bool net;                 /* RUN gets pasta; false: --network none */
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

/* Run one step over the layers l: *ret_diff_id the new layer ("" when the step changed
 * nothing), stored and held (*ret_held, or -1). A RUN that exits non-zero: -1 with
 * err->status 1 and the message naming the line and the status. */
int build_step_do(struct build_ctx *b, const struct build_layers *l, const struct build_step *st,
                  char ret_diff_id[OCI_DIGEST_LEN + 1], int *ret_held, struct cs_error *err);

/* Remove the tmp/layer-* of builds that were killed while a step ran (whose files may
 * belong to subordinate ids, which the caller cannot remove itself). */
int build_sweep(struct build_ctx *b, struct cs_error *err);

/* The build's options, from the command line. */
struct build_options {
        const char *file; /* -f, or NULL: CONTEXT/Containerfile, else CONTEXT/Dockerfile */
        const char *context;
        char **tags; /* canonical NAME:TAG */
        size_t n_tags;
        char **build_args; /* K=V */
        size_t n_build_args;
        const char *target;
        bool pull, no_cache, tls_verify, quiet;
        bool net;
};

/* Build; ret_digest: the image's digest. */
int build_image(const struct build_options *o, char ret_digest[OCI_DIGEST_LEN + 1],
                struct cs_error *err);

int cmd_image_build(int argc, char **argv);
