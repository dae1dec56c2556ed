/* `csandbox image build`: the steps that touch a build step's tree.
 *
 * A build step (RUN, COPY, ADD) writes into an overlay whose lower dirs are the stage's
 * layers (image/store.h) and whose upper dir is the step's new layer on disk, in the
 * store's tmp/. Those writes run in a user namespace that maps 0 to the caller and the
 * other ids of 0..BUILD_ID_MAX to its subordinate range (when it has one): files keep the
 * owners a package manager gives them while the step runs, and a Containerfile's USER runs
 * on its own id. build_layer_commit then turns the upper dir into a layer of the store's form
 * (layer.h): the owners are recorded in the layer's metadata file and the tree given back
 * to the caller (the ids it has in the namespace), and the diff_id is the SHA-256 of the
 * layer's tar form, as an OCI image would carry it.
 *
 * build_copy_apply and build_layer_commit run in that user namespace (as its creator, with
 * CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_FSETID in it) after the overlay is mounted;
 * build_copy_digest runs anywhere. All three treat the context and the trees as hostile:
 * names are resolved from the given dir fds with openat2(RESOLVE_IN_ROOT or
 * RESOLVE_BENEATH), never by path string from /, and sizes and counts are bounded. */
#pragma once
#include "../layer/layer.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct cs_error;

/* The highest id a step's user namespace maps (with a subordinate range). */
#define BUILD_ID_MAX 65535u

/* What COPY or ADD copies. */
struct build_copy {
        /* Where the sources are: the build context (O_PATH dir), or for COPY --from the
         * merged root of another stage or image. */
        int src_root_fd;
        bool from_context;   /* ignore[] applies; sources may not leave the context */
        char *const *ignore; /* .containerignore / .dockerignore patterns, in order
                              * (Go filepath.Match with `**`, `!` excludes again) */
        size_t n_ignore;
        char *const *srcs; /* expanded words as written: globs (* ? [..]) allowed */
        size_t n_srcs;
        const char *dest;    /* expanded; relative to workdir unless absolute; a
                              * trailing '/' (or several sources) means a directory */
        const char *workdir; /* the stage's WORKDIR, absolute ("/" when unset) */
        bool add;            /* ADD: a local tar (plain, gz, bz2, xz, zst) is unpacked */
        const char *chown;   /* --chown (user[:group], names from the step's own
                              * /etc/passwd and /etc/group) or NULL: 0:0 */
        const char *chmod;   /* --chmod octal, or NULL: modes kept */
        const char *what;    /* "Containerfile:12" for messages */
};

/* The patterns of an ignore file's text (.containerignore, .dockerignore), as docker reads
 * them: a line starting with `#` is a comment, a UTF-8 byte order mark is dropped; the rest
 * are kept as written (trimming, `!` and cleaning happen where they are compiled). At most
 * 10000 patterns; a NUL byte is refused. *ret is a NULL-terminated strv (common/strv.h). */
int build_ignore_parse(const char *text, size_t len, char ***ret, size_t *ret_n,
                       struct cs_error *err);

/* Copy c's sources into the merged root root_fd (the step's overlay, O_PATH dir) as docker
 * does: a directory source's contents (not itself) into dest, dest's missing parents made
 * 0755 0:0, symlinks in the root followed inside the root. Errors name c->what and the
 * source or destination. ret_digest (or NULL): build_copy_digest's digest of what was
 * copied, its file contents read back from the copies (a source that changed while it was
 * read shows, even when it changed back). */
int build_copy_apply(int root_fd, const struct build_copy *c, char ret_digest[65],
                     struct cs_error *err);

/* The cache key's content part: a SHA-256 (hex) over what c would copy (names, modes, link
 * targets and file contents, ignore patterns applied), without copying anything. */
int build_copy_digest(const struct build_copy *c, char ret[65], struct cs_error *err);

/* Make the upper dir upper_fd (O_RDONLY dir of a step's overlay, after the overlay is
 * unmounted) a layer:
 * - each path of mountpoints[] (absolute; what the sandbox of a RUN made to mount on) is
 *   removed from the upper dir when it is an empty file or directory absent from every
 *   lower dir (lower_fds, top first: the overlay's lower dirs, i.e. each layer's LAYER_DIFF
 *   tree, not the layer's directory), and then its parents where they are empty, not
 *   opaque and either in no lower dir or there a directory of the same mode and owner
 *   (copied up for the mountpoint); the parents keep their mtimes;
 * - a directory the step only copied up is removed from the upper dir (it is the lower's
 *   as it was): one that holds nothing in the upper dir, is not opaque, carries no xattr
 *   but the overlay's, and has the mode, owner and mtime of its record in the topmost lower
 *   layer (their ownership records: each lower dir's parent is its layer's directory);
 *   its parent keeps its mtime;
 * - xattrs of user.overlay.* other than user.overlay.opaque are removed;
 * - the owners and modes are written to meta_fd as layer_tree_finish does (a directory the
 *   step copied up shows the caller as its owner on disk: it keeps its record's owner, unless
 *   that record names an owner other than root with ids <= given_max, which the step was
 *   given before it ran, so that what it shows now is what the step left), then every
 *   entry is chowned to the caller's ids in the namespace (geteuid, getegid) with its mode
 *   (setuid/setgid bits included) put back;
 * - ret_diff_id: SHA-256 of the layer as a tar (pax restricted; a directory before its
 *   contents, siblings in byte order; owners and modes from the metadata; mtimes in whole
 *   seconds; the xattrs but user.overlay.* and security.selinux, sorted; 0/0 character
 *   devices as empty `.wh.NAME` files, opaque dirs with a `.wh..wh..opq` entry first; a
 *   file's further hard links as hard-link entries), deterministic for the same tree.
 *   ret_stats: size (file bytes), files (entries). An empty layer (nothing changed) gives
 *   ret_empty true. */
int build_layer_commit(int upper_fd, const int *lower_fds, size_t n_lowers,
                       const char *const *mountpoints, size_t n_mountpoints, uint32_t given_max,
                       int meta_fd, unsigned char ret_diff_id[32], struct layer_stats *ret_stats,
                       bool *ret_empty, struct cs_error *err);
