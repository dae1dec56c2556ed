/* Internal to image/layer*.c: the tree being built, the image's ownership table, and the
 * decompression pipeline. */
#pragma once
#include "layer.h"

#include "../../common/error.h"

#include <archive.h>
#include <archive_entry.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

#define IO_BUF (256u << 10)

/* What the image says about one path; the tree on disk is owned by the caller. */
struct meta_rec {
        char *path;
        uint32_t uid, gid, mode;
        uint32_t layer; /* the layer that last created it: whiteouts only hide lower layers */
        int64_t mtime_sec;
        int32_t mtime_nsec;
        bool mtime_set;
        bool implicit; /* a directory the tar omits: its attributes come from lower layers */
};

/* A hard link to a file only a lower layer holds, made a copy of it once those are known. */
struct pending_link {
        char *path, *target;
};

struct layer_tree {
        int root_fd;
        struct layer_limits lim;
        struct layer_stats stats;
        struct layer_budget own, *budget; /* lim.shared, or own */
        uint32_t layer;
        struct meta_rec *slots;
        size_t cap, n;
        /* The parent directory of the previous entry: tars list siblings together. */
        char *cache_path;
        int cache_fd;
        /* The layers beneath, top first (borrowed), and their ownership tables, each read
         * when first needed. */
        const int *lowers;
        size_t n_lowers;
        struct layer_tree **lower_meta;
        struct pending_link *pending;
        size_t n_pending, cap_pending;
        /* ADD of a local tar (layer_tree_new_add): the destination's rules, not a layer's */
        bool add;
        struct layer_add_opts add_opts;
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
        uint64_t bytes, max;
        struct layer_budget *budget; /* shared by the image's layers (atomic) */
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
int meta_set(struct layer_tree *t, const char *path, const struct meta_rec *v,
             struct cs_error *err);
bool created_in_this_layer(struct layer_tree *t, const char *path);
/* The attributes of the directory at path in the topmost lower layer holding one; false
 * (and root's 0755) when none does (layer-meta.c). */
bool inherit_dir(struct layer_tree *t, const char *path, struct meta_rec *rec);
void lower_meta_free(struct layer_tree *t);
/* The regular file at path of the topmost lower layer holding it, opened O_RDONLY, with what
 * that layer recorded of it; -ENOENT when no layer shows one there. */
int lower_open_file(struct layer_tree *t, const char *path, struct meta_rec *ret_rec);
/* The directory rel of the tree (O_PATH), created with its parents when create is set;
 * -ENOENT without a message when missing (layer-extract.c). */
int tree_open_dir(struct layer_tree *t, const char *rel, bool create, const char *entry,
                  struct cs_error *err);
/* rel split in place at its last '/' ("" for the parent of a top-level name). */
void split_path(char *rel, const char **ret_parent, const char **ret_base);
int pending_link_add(struct layer_tree *t, const char *path, const char *target,
                     struct cs_error *err);
/* fchmod and fchmodat, but where a session's seccomp filter refuses a setuid or setgid
 * mode (EPERM) the file gets the mode without those bits: the record keeps the whole mode,
 * and under no_new_privs the bits did nothing. -1 with errno set on failure. */
int layer_fchmod(int fd, mode_t mode);
int layer_fchmodat(int dirfd, const char *name, mode_t mode);
/* A hard link from tbase in tfd to base in pfd, or where a session's filter refuses links
 * (EXDEV) a copy, counted against the size limit. -1 with errno set on failure. */
int layer_link_or_copy(struct layer_tree *t, int tfd, const char *tbase, int pfd, const char *base);
/* Bytes of max_size the image has left. */
static inline uint64_t layer_budget_left(struct layer_tree *t)
{
        uint64_t spent = atomic_load(&t->budget->stream);

        return spent < t->lim.max_size ? t->lim.max_size - spent : 0;
}
/* Close the cached parent directory of the previous entry. */
void cache_drop(struct layer_tree *t);
/* One tar entry onto the tree (layer-extract.c). */
int apply_entry(struct layer_tree *t, struct archive *a, struct archive_entry *e,
                struct cs_error *err);
