/* Layer extraction: one layer's tar stream (plain, gzip or zstd) unpacked into that
 * layer's own directory, in the form overlayfs reads as a lower layer, never writing
 * outside that directory.
 *
 * - A whiteout `.wh.NAME` becomes a 0/0 character device NAME (Linux 5.8 lets an
 *   unprivileged user make one); `.wh..wh..opq` becomes the xattr user.overlay.opaque="y"
 *   on its directory (the overlay is mounted with userxattr, as a user namespace needs). A
 *   directory entry that replaces its own layer's whiteout is made opaque too. xattrs of
 *   the overlay's namespaces in the tar itself are dropped (counted as skipped).
 * - A directory the tar omits but has entries under is created with the attributes of the
 *   same directory in the topmost lower layer that holds one (overlayfs shows the topmost
 *   layer's), else root 0755.
 * - Every entry's parent is resolved component by component from the layer's directory fd
 *   with O_NOFOLLOW: a symlink this layer planted in a parent path fails the import. A
 *   lower layer's symlink is not in this layer's directory at all: the entry's parent is
 *   created here as a real directory, which hides the lower symlink in the merged view
 *   (what containers/storage's overlay driver does); nothing is ever written through it.
 * - A hard link names a file of its own layer (an overlay layer cannot link into another).
 * - `..` and absolute names are refused before anything is resolved; files are created
 *   with O_EXCL|O_NOFOLLOW. libarchive's archive_write_disk is not used because it
 *   resolves by path string. */
#pragma once
#include "../oci/oci.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

struct cs_error;

/* Of max_size: uncompressed stream bytes (and copies); of max_entries: tar entries. */
struct layer_budget {
        _Atomic uint64_t stream, entries;
};

struct layer_limits {
        uint64_t max_size;    /* total uncompressed bytes over all layers */
        uint64_t max_entries; /* total tar entries over all layers */
        size_t max_path;      /* bytes in one entry name or link target */
        size_t max_layers;
        /* What all the layers of the image spend, shared by the trees unpacking them (one
         * after another or at once): the limits bound the whole image. NULL: the tree's. */
        struct layer_budget *shared;
};

#define LAYER_DEFAULT_MAX_SIZE    (64ull << 30)
#define LAYER_DEFAULT_MAX_ENTRIES 4000000ull
#define LAYER_DEFAULT_MAX_PATH    4096u
#define LAYER_DEFAULT_MAX_LAYERS  256u
/* The defaults, as one initializer. */
#define LAYER_LIMITS_DEFAULT                                                                       \
        ((struct layer_limits){.max_size = LAYER_DEFAULT_MAX_SIZE,                                 \
                               .max_entries = LAYER_DEFAULT_MAX_ENTRIES,                           \
                               .max_path = LAYER_DEFAULT_MAX_PATH,                                 \
                               .max_layers = LAYER_DEFAULT_MAX_LAYERS})
/* Deeper names are refused: the final walk holds one fd per level. */
#define LAYER_MAX_DEPTH 256

struct layer_stats {
        uint64_t size;            /* bytes of regular file content */
        uint64_t files;           /* entries present in the final tree */
        uint64_t entries;         /* tar entries read */
        uint64_t skipped_devices; /* character/block devices, fifos, sockets */
        uint64_t skipped_xattrs;  /* xattrs the filesystem or our privileges refused */
        uint64_t stream;          /* uncompressed bytes of the layer's tar stream */
};

/* Reads the next bytes of the (possibly compressed) layer blob: > 0 bytes, 0 at the end,
 * < 0 with err filled. */
typedef ssize_t (*layer_read_fn)(void *opaque, void *buf, size_t len, struct cs_error *err);

struct layer_tree;

/* A layer's directory in the store: the tree overlayfs mounts, and its ownership record. */
#define LAYER_DIFF "diff"
#define LAYER_META "metadata"

/* root_fd (the layer's tree) is borrowed and must stay open until layer_tree_free. */
int layer_tree_new(int root_fd, const struct layer_limits *lim, struct layer_tree **ret,
                   struct cs_error *err);
void layer_tree_free(struct layer_tree *t);
/* After layer_apply, before layer_tree_finish: the directories (holding LAYER_DIFF and
 * LAYER_META) of the layers beneath this one, top first (borrowed, open until
 * layer_tree_free). Directories the tar omitted take their attributes from them, and hard
 * links to their files become copies. A layer thus unpacks without its lower layers (in
 * parallel with them) and is completed once they are stored. */
int layer_tree_set_lowers(struct layer_tree *t, const int *layer_dirs, size_t n,
                          struct cs_error *err);

/* Unpack one layer into the tree (call once per tree; then layer_tree_set_lowers). what names the
 * layer in messages ("layer 2/3 (sha256:...)"). expect: the compression the media type declares, or
 * -1 to accept any of none/gzip/zstd. ret_diff_id: sha256 of the uncompressed stream. */
int layer_apply(struct layer_tree *t, const char *what, int expect, layer_read_fn read,
                void *opaque, unsigned char ret_diff_id[32], struct cs_error *err);

/* After layer_tree_set_lowers: the record of path in the topmost lower layer that lists it
 * (its metadata); false when none does. */
bool layer_lowers_record(struct layer_tree *t, const char *path, uint32_t *ret_mode,
                         uint32_t *ret_uid, uint32_t *ret_gid);
/* After layer_tree_set_lowers: each path with its record in the topmost lower layer that
 * lists it, except records of uid 0 and gid 0 (what a build step must be given before it
 * runs: the tree on disk is the caller's, which the step sees as root's). Stops at the first
 * negative return of each. */
int layer_lowers_not_roots(struct layer_tree *t,
                           int (*each)(void *opaque, const char *path, uint32_t mode, uint32_t uid,
                                       uint32_t gid),
                           void *opaque);

/* After the last layer: give directories their recorded modes and mtimes (they stay
 * u+rwx while layers are applied), count the tree, and write the ownership metadata to
 * meta_fd, one line per path: "MODE UID GID PATH\n" (MODE in octal with the type bits,
 * PATH relative to the rootfs, "." for the root, bytes <= ' ', '\\' and >= 0x7f as \ooo). */
int layer_tree_finish(struct layer_tree *t, int meta_fd, struct cs_error *err);
const struct layer_stats *layer_tree_stats(const struct layer_tree *t);

/* An entry name as a relative path without `.`/empty components ("" for the root).
 * Refuses absolute names, `..`, names longer than max_path or deeper than LAYER_MAX_DEPTH. */
int layer_path_normalize(const char *name, size_t max_path, char **ret, struct cs_error *err);

/* Escape a path for the metadata file (see layer_tree_finish); returns bytes written
 * excluding the NUL, or -1 when out is too small. */
ssize_t layer_path_escape(const char *path, char *out, size_t out_len);
/* A name made safe to show in a message: control characters become ?, long ones end in ... */
void layer_sanitize(const char *in, char *out, size_t out_len);

/* For writers of a layer of this form (a build's commit): a whiteout (a 0:0 character
 * device), and one line of the metadata file. */
bool is_whiteout(const struct stat *st);
/* One line of a layer's metadata file (layer_tree_finish's format) to meta. */
int layer_meta_line(FILE *meta, const char *path, uint32_t mode, uint32_t uid, uint32_t gid,
                    struct cs_error *err);

/* ADD of a local tar in a build step: the same extractor and rules unpack the archive into a
 * directory of the step's root (dest_fd), with these differences: an absolute entry name is
 * taken under the destination (as docker does), `.wh.` names are plain files (no whiteouts),
 * a hard link must name a file already in the destination, and owners are set on the files
 * themselves (the step's user namespace maps them) instead of a metadata file. */
struct layer_add_opts {
        bool chown_set, chmod_set; /* ADD --chown / --chmod: every entry's owner / mode */
        uid_t uid;
        gid_t gid;
        mode_t chmod;
};
struct archive;
struct archive_entry;

/* dest_fd is borrowed (open until layer_tree_free); lim bounds this archive alone. */
int layer_tree_new_add(int dest_fd, const struct layer_limits *lim,
                       const struct layer_add_opts *opts, struct layer_tree **ret,
                       struct cs_error *err);
/* One entry of the archive a reads. */
int layer_tree_add_entry(struct layer_tree *t, struct archive *a, struct archive_entry *e,
                         struct cs_error *err);
/* After the last entry: directories get their modes and mtimes (kept u+rwx until then). */
int layer_tree_add_finish(struct layer_tree *t, struct cs_error *err);

/* Open path under dirfd without leaving it: openat2(RESOLVE_IN_ROOT|RESOLVE_NO_MAGICLINKS),
 * symlinks resolved as if dirfd were /. */
int source_open_in_root(int dirfd, const char *path, int flags, struct cs_error *err);
