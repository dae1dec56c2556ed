/* Internal to image/layer*.c: the tree being built, the image's ownership table, and the
 * decompression pipeline. */
#pragma once
#include "layer.h"

#include "../common/error.h"

#include <archive.h>
#include <archive_entry.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define IO_BUF (256u << 10)

/* What the image says about one path; the tree on disk is owned by the caller. */
struct meta_rec {
        char *path;
        uint32_t uid, gid, mode;
        uint32_t layer; /* the layer that last created it: whiteouts only hide lower layers */
        int64_t mtime_sec;
        int32_t mtime_nsec;
        bool mtime_set;
};

struct layer_tree {
        int root_fd;
        struct layer_limits lim;
        struct layer_stats stats;
        uint64_t stream_total; /* uncompressed bytes over all layers, against lim.max_size */
        uint32_t layer;
        struct meta_rec *slots;
        size_t cap, n;
        /* The parent directory of the previous entry: tars list siblings together. */
        char *cache_path;
        int cache_fd;
        char *buf;
};

/* The decompression pipeline: blob bytes -> libarchive raw format (gunzip/unzstd) ->
 * hashed and counted -> libarchive tar reader. The first three run on a thread of their
 * own (the producer), a few slots ahead of the tar reader, which creates the files: the
 * digests and the decompression overlap the file system's work. */
#define PIPE_SLOTS     4
#define PIPE_SLOT_SIZE (512u << 10)

struct pipe_slot {
        size_t len;
        unsigned char data[PIPE_SLOT_SIZE];
};

struct layer_pipe {
        layer_read_fn read;
        void *opaque;
        struct cs_error *err; /* &read_err: the producer's own, copied out on failure */
        struct cs_error read_err;
        bool input_failed, limit_hit, raw_eof, decompress_failed;
        struct archive *raw;
        EVP_MD_CTX *md;
        uint64_t bytes, budget;
        unsigned char inbuf[IO_BUF];
        /* The slots, filled in order by the producer, taken in order by the reader. The
         * mutex guards the counters and flags below it. */
        struct pipe_slot *slots;
        pthread_mutex_t lock;
        pthread_cond_t changed;
        size_t filled, taken; /* slots ever filled / released */
        bool holding;         /* the reader holds slot taken % PIPE_SLOTS */
        bool done;            /* the producer has ended (raw_eof, or a failure flag) */
        bool stop;            /* the reader gives up: the producer ends at its next step */
};

/* The table's record of path, or NULL. */
struct meta_rec *meta_find(struct layer_tree *t, const char *path);
/* Close the cached parent directory of the previous entry. */
void cache_drop(struct layer_tree *t);
/* One tar entry onto the tree (layer.c). */
int apply_entry(struct layer_tree *t, struct archive *a, struct archive_entry *e,
                struct cs_error *err);
