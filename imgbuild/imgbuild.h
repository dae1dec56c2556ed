/* `csandbox image build`'s engine: a Containerfile run into an image of the store. The
 * command line (cli/build_main.c) fills struct build_options and prints what comes back;
 * everything between (stages, cache, the steps' sandboxes and their privileges) is here. */
#pragma once
#include "../image/oci/oci.h"

#include <stdbool.h>
#include <stddef.h>

struct cs_error;
struct import_options;
struct pull_display;
struct pull_options;

/* RUN steps' network (the numbers are part of the layer cache's keys). */
enum build_net {
        BUILD_NET_NONE = 0,  /* loopback only */
        BUILD_NET_PASTA = 1, /* a namespace of its own, through pasta */
        BUILD_NET_HOST = 2,  /* the caller's own (in a session: the session's) */
};

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
        int net; /* enum build_net */
        /* The progress display of a base image's pull (not called when quiet): attached
         * before the pull, ended after it; NULL: none. */
        struct pull_display *(*pull_display_attach)(struct pull_options *po,
                                                    struct import_options *io);
        void (*pull_display_end)(struct pull_display *d, const struct import_options *io);
};

/* Build; ret_digest: the image's digest. */
int build_image(const struct build_options *o, char ret_digest[OCI_DIGEST_LEN + 1],
                struct cs_error *err);
