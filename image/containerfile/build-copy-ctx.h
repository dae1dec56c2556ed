/* Internal to image/containerfile/build-copy*.c: the state of one COPY or ADD, shared by its
 * small helpers (build-copy-ctx.c), its sources (build-copy-sources.c), its destination
 * (build-copy-dest.c), the archive ADD unpacks (build-copy-tar.c) and the copy itself
 * (build-copy.c). */
#pragma once
#include "build-private.h"
#include "../oci/digest.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

struct cs_error;

struct copy_ctx {
        const struct build_copy *c;
        int root_fd;    /* the step's root; -1 for a digest only */
        EVP_MD_CTX *md; /* what is copied (or, with no root, would be) is hashed */
        struct build_ignore *ign;
        bool chown_set, chmod_set;
        uid_t uid;
        gid_t gid;
        mode_t chmod;
        uint64_t bytes, entries;
        struct cs_error *err;
};

/* len bytes into the copy's digest. */
void copy_md_add(struct copy_ctx *x, const void *p, size_t len);
/* "a/b" + "/" + "c", or "c" when a is empty; NULL past the path limit or on ENOMEM. */
char *copy_path_join(const char *a, const char *b);

/* ---- sources (build-copy-sources.c) ---- */
/* rel (relative to the source root) opened: beneath the context, or inside another stage's
 * root. */
int copy_src_open(struct copy_ctx *x, const char *rel, int flags);
/* Whether the ignore file leaves rel (a context path) out. */
bool copy_ignored(struct copy_ctx *x, const char *rel);
/* Every source word expanded: its paths relative to the source root, in order. */
int copy_sources_expand(struct copy_ctx *x, char ***ret, size_t *ret_n);
/* The source at rel opened (O_RDONLY, links taken while they stay inside) and stat'ed; shown
 * gets its printable name. */
int copy_src_open_checked(struct copy_ctx *x, const char *rel, struct stat *st, char shown[256]);

/* ---- the destination (build-copy-dest.c) ---- */
mode_t copy_perm_of(struct copy_ctx *x, const struct stat *st);
/* Owner, then mode (chown clears setuid/setgid), then mtime (when not NULL). */
int copy_set_attrs(struct copy_ctx *x, int fd, mode_t mode, const struct timespec *mtime, uid_t uid,
                   gid_t gid, const char *shown);
/* Whatever is at dfd/name removed, unless it is a directory and keep_dir: 1 then. */
int copy_clear_at(struct copy_ctx *x, int dfd, const char *name, bool keep_dir, const char *shown);
/* The directory name in dfd (whose path in the root is full), opened O_RDONLY and made when
 * missing (*ret_made). */
int copy_dest_dir(struct copy_ctx *x, int dfd, const char *name, const char *full, mode_t mode,
                  uid_t uid, gid_t gid, bool *ret_made);
/* The absolute destination path opened, missing directories made. */
int copy_dest_open_dirs(struct copy_ctx *x, const char *path, bool last_owned);
/* Whether a destination word names a directory: a trailing '/' or a last `.`/`..`. */
bool copy_dest_is_dir(const char *d);

/* ---- ADD of a local tar (build-copy-tar.c) ---- */
/* in (of size st->st_size) unpacked into dest_fd when it is a tar: 0; 1 when it is none. */
int copy_unpack_tar(struct copy_ctx *x, int in, const struct stat *st, int dest_fd, bool probe,
                    const char *shown);
