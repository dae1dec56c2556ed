/* Internal to image/containerfile/build-commit*.c: the state of one layer commit and the
 * tests on the tree every part makes (build-commit-ctx.c), shared by the walk
 * (build-commit.c), the pruning of what the step did not change
 * (build-commit-prune.c) and the layer's tar form (build-commit-tar.c). */
#pragma once
#include "build-private.h"
#include "../oci/digest.h"
#include "../layer/layer.h"

#include <archive.h>
#include <archive_entry.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>

#define COMMIT_BUF (256u << 10) /* file data read at a time */

#define XATTR_LIST_MAX_LEN  65536
#define XATTR_VALUE_MAX_LEN 65536

struct link_rec {
        dev_t dev;
        ino_t ino;
        char *path;
};

struct commit_ctx {
        const int *lowers;
        size_t n_lowers;
        FILE *meta;
        EVP_MD_CTX *md;
        struct archive *a;
        struct archive_entry *e;
        struct layer_stats stats;
        struct link_rec *links; /* files with more than one name, by inode (open addressing) */
        size_t links_cap, n_links;
        char *buf;
        build_tar_tap tap;
        void *tap_opaque;
        struct cs_error *err;
        uid_t uid; /* the ids the caller has in this namespace: the tree goes back to them */
        gid_t gid;
        /* The lower layers' ownership records (each lower's layer dir is the parent of its
         * tree), for the directories a step only copied up; NULL without them. */
        struct layer_tree *lt;
        int *lt_dirs;
        size_t n_lt_dirs;
        uint32_t given_max; /* build_layer_commit's */
};

/* Whether an xattr belongs in a layer: not the overlay's bookkeeping, nor the host's
 * SELinux label (set on whatever the step created or copied up, and not the image's). */
bool commit_layer_xattr(const char *name);
/* Whether the directory fd carries user.overlay.opaque="y". */
bool commit_is_opaque(int fd);
/* Whether the directory fd holds nothing. */
bool commit_dir_is_empty(int fd);
/* A RUN's mountpoint (path, normalized) dropped when the sandbox made it: an empty file or
 * directory no lower dir has; then its parents that hold nothing of the step's own. */
int commit_drop_mountpoint(struct commit_ctx *x, int upper_fd, char *path);
/* The first name of the file st (more than one name), or NULL after recording path as it. */
const char *commit_link_first(struct commit_ctx *x, const struct stat *st, const char *path);
/* One tar header into the layer's tar form (xattr_fd: whose xattrs it carries, or -1). */
int commit_tar_header(struct commit_ctx *x, const char *path, mode_t mode, uid_t uid, gid_t gid,
                      time_t mtime, int64_t size, const char *symlink, const char *hardlink,
                      int xattr_fd);
/* size bytes of fd as the current entry's data. */
int commit_tar_data(struct commit_ctx *x, int fd, int64_t size, const char *shown);
/* The record of path in the topmost lower layer, when it is a directory there. */
bool commit_lower_dir_record(struct commit_ctx *x, const char *path, uint32_t *mode, uint32_t *uid,
                             uint32_t *gid);
/* The owner path has in the layer. A directory the step only passed through was copied up
 * with the owner it has on disk (the caller's): it keeps the owner its layer recorded,
 * unless the step was given that owner before it ran (then the disk says what it left). */
void commit_entry_owner(struct commit_ctx *x, const char *path, const struct stat *st,
                        uid_t *ret_uid, gid_t *ret_gid);
/* The directories under dfd (path rel) that the step only copied up, removed, deepest
 * first: what remains is what the step changed. dfd keeps its mtime. merged: dfd is merged
 * with the lower dirs (no opaque directory at or above it in the upper dir); below an
 * opaque one nothing is a copy-up. */
int commit_prune_copied_up(struct commit_ctx *x, int dfd, const char *rel, int depth, bool merged);
/* libarchive's writer callback: the tar bytes into the digest (and the tap). */
la_ssize_t commit_tar_sink(struct archive *a, void *opaque, const void *buf, size_t len);
