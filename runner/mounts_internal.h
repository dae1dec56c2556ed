/* Internal to the mount files (mounts.c, mount_kinds.c, mount_dest.c, mount_cover.c, and
 * their primitives in mount_util.c; host_layer.c, which covers directories of a running
 * session, uses the submount clones and the two primitives below them).
 * One convention for every helper here: a negative errno on failure, with err saying what
 * failed (a caller may say it again in its own words); an fd or 0 on success. */
#pragma once
#include "internal.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct cs_error;

/* Where the root is put together before pivot_root, in our own mount namespace. */
#define STAGE       "/tmp"
#define STAGE_ROOT  STAGE "/root"
#define STAGE_FILES STAGE "/files"

enum want { WANT_DIR, WANT_FILE, WANT_PARENT };

/* How a mount of the spec failed (bubblewrap's bind_mount_result, as csandbox's steps
 * are): the result and the failing path travel together, and mnt_fail turns them into the
 * one text each has. */
enum mnt_result {
        MNT_SOURCE_GONE,          /* the source is not there any more, in our mount namespace */
        MNT_SOURCE_SWAPPED,       /* found, but not the object that was opened and checked */
        MNT_SOURCE_CLONE,         /* the kernel refused to clone the source's mount */
        MNT_SOURCE_REPLACED_GONE, /* a file replaced by rename since, and its successor gone */
        MNT_TARGET_NOT_DIR,       /* the destination is not a directory, the source is */
        MNT_TARGET_IS_DIR,        /* the destination is a directory, the source a file */
        MNT_TARGET_STAT,          /* the destination cannot be examined */
        MNT_ATTACH,               /* the kernel refused to attach the mount at the destination */
};
/* err from result (errnum: the errno, or 0), naming m's destination and source (or what,
 * for a mount without one). Returns -errnum (or the result's own errno). */
int mnt_fail(struct cs_error *err, enum mnt_result result, int errnum, const char *dest,
             const char *source);
enum make { MAKE_DIR, MAKE_FILE, MAKE_SYMLINK };

#define N_DEV_NODES 6
extern const char *const mnt_dev_nodes[N_DEV_NODES];

/* State of the one child that assembles the root; it lives until pivot_root. */
struct mnt_state {
        int *bind_trees; /* per spec mount: a detached clone of the source, or -1 */
        bool *bind_is_dir;
        int *bind_parents; /* a file source's directory, to clone it again if replaced */
        int host_view;     /* "/" of our copy of the caller's mount table, before staging */
        int host_root;     /* SPEC_ROOT_HOST: detached read-only clone of / */
        int root_dir;      /* SPEC_ROOT_DIR: O_PATH fd of the tree */
        int *lower_dirs;   /* SPEC_ROOT_DIR: the spec's further lower dirs, found again */
        int dev_trees[N_DEV_NODES];
        int root;             /* the assembled root, once attached */
        uint64_t scratch[64]; /* mount ids of layers that may hold new entries */
        size_t n_scratch;
        bool cover_ro[32]; /* per cover of one directory (cover_dir): read-only */
        size_t n_covers;
        bool root_ro; /* a rootfs that ends read-only */
        mode_t umask;
};

/* The two resolutions common/resolve.c offers (each with its walking fallback): inside a
 * root (RESOLVE_IN_ROOT, magic links refused), or beneath a dir with no link at all
 * (RESOLVE_BENEATH, which there always means RESOLVE_NO_SYMLINKS too). */
int mnt_openat2(int dirfd, const char *path, uint64_t flags, uint64_t resolve,
                struct cs_error *err);
void mnt_scratch_add(struct mnt_state *st, int fd);
/* The id of the mount fd is on (statx). */
int mnt_mount_id(int fd, uint64_t *ret, struct cs_error *err);
int mnt_set_tree_attrs(int tree, uint64_t attrs, bool recursive, struct cs_error *err);
/* A detached recursive clone of a host path, with binds' attributes applied. */
int mnt_clone_tree(int dirfd, const char *path, unsigned flags, bool recursive, uint64_t attrs,
                   struct cs_error *err);
int mnt_mkdir_stage(const char *path, mode_t mode, struct cs_error *err);
int mnt_make_entry(int parent, const char *name, enum make what, const char *target,
                   struct cs_error *err);
/* Cover the directory dir so that a mountpoint can be created in it without writing the
 * host: an overlay whose lower layer is dir itself and whose upper layer lives on the
 * staging tmpfs (every entry of dir stays visible and live; mounts beneath are attached
 * again), or where the kernel refuses that, a tmpfs mirroring dir (mirror_dir). The cover's
 * root takes its owner from us and its mode from dir, so entries can be created even where
 * dir belongs to an id the sandbox does not map. It is as read-only as the mount of dir
 * (and as the root of a rootfs), except for a moment while create_entry adds to it.
 * *ret_fd: the cover's root, a scratch layer. */
int mnt_cover_dir(struct mnt_state *st, int dir, const char *dest, int *ret_fd,
                  struct cs_error *err);
/* Create name (a missing part of dest) in the directory *parent, never on a host
 * filesystem: directly in a scratch layer (a tmpfs, a rootfs's overlay, a cover); in a
 * read-only host directory, or a rootfs directory the sandbox's ids cannot write, inside a
 * cover of that one directory (cover_dir), which *parent names afterwards. A writable host
 * directory (a read-write bind) is an error: there the reference creates nothing either; so
 * is any directory that would need a cover when !may_cover (EROFS). */
int mnt_create_entry(struct mnt_state *st, int *parent, const char *name, enum make what,
                     const char *target, bool may_cover, const char *dest, struct cs_error *err);
/* dest_parent_once, following symlinks to missing paths (at most 8) inside the root. path
 * (SPEC_PATH_MAX bytes) holds the path that was finally resolved; *ret_name points into it. */
int mnt_dest_parent(struct mnt_state *st, const char *dest, bool may_cover, char *path, int *ret_fd,
                    const char **ret_name, struct cs_error *err);
/* Where a symlink at dest points, as a path inside the root (out, size bytes): relative
 * targets against dest's directory, ".." stopping at /. 0 or -ENAMETOOLONG. */
int mnt_symlink_dest(const char *dest, const char *target, char *out, size_t size);
int mnt_dest_open(struct mnt_state *st, const char *dest, enum want want, bool optional,
                  int *ret_fd, struct cs_error *err);
int mnt_attach(int tree, int dst, const char *what, const char *dest, struct cs_error *err);
/* A mount beneath a directory that an overlay is about to cover: a recursive clone of it,
 * and its path relative to that directory. */
struct submount {
        int tree;
        char *rel;
};
/* Clone the outermost mounts beneath dir (an overlay over dir hides them; they are attached
 * again on the overlay, each at its rel opened beneath the overlay's mount). Found in
 * /proc/self/mountinfo, resolved beneath dir without following a symlink; dest names dir
 * in errors. */
int submounts_clone(int dir, struct submount **ret, size_t *ret_n, const char *dest,
                    struct cs_error *err);
void submounts_free(struct submount *subs, size_t n);
/* A new filesystem instance as a detached mount. */
int mnt_new_fs(const char *type, const char *const *opts, uint64_t attrs, int *ret_fd,
               struct cs_error *err);
int mnt_tmpfs_at(struct mnt_state *st, int dst, mode_t mode, const char *dest,
                 struct cs_error *err);
/* SPEC_MOUNT_COPY: a tmpfs with the copy of m->source_fd, attached at dst. */
int mnt_copy_at(struct mnt_state *st, int dst, const struct spec_mount *m, struct cs_error *err);
int mnt_proc_at(int dst, enum spec_proc mode, const char *dest, struct cs_error *err);
/* The host's /sys lists its interfaces and their MAC addresses (from which its IPv6
 * link-local addresses follow): a sysfs of the sandbox's own network namespace instead. The
 * kernel allows that only when the netns belongs to our user namespace and no outer mount
 * hides part of /sys (container engines mask some); where it is refused, for whatever
 * reason, the network directories are covered. */
int mnt_sysfs(struct mnt_state *st, struct cs_error *err);
int mnt_dev_at(struct mnt_state *st, int dst, const char *dest, struct cs_error *err);
/* A file with content from memory: written to the staging tmpfs, bound read-only. */
int mnt_file_at(const struct spec_mount *m, int dst, struct cs_error *err);
int mnt_make_symlink(struct mnt_state *st, const struct spec_mount *m, struct cs_error *err);
