/* Internal to image/containerfile/build*.c (and their unit tests and fuzz target): the glob and
 * ignore matchers, and the sorted directory listing both tree walks use. */
#pragma once
#include "build.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bounds on hostile patterns: their number, and the length of one (bytes). */
#define BUILD_IGNORE_MAX_PATTERNS 10000
#define BUILD_IGNORE_MAX_LEN      4096
/* Entries of one directory listed for a copy, a digest or a commit. */
#define BUILD_MAX_DIR_ENTRIES 1000000

struct build_glob;

/* A glob compiled: Go's filepath.Match (`*` and `?` never match '/', `[...]` with `^` and
 * ranges, `\` escapes); with doublestar, also the `**` of .dockerignore (moby's
 * patternmatcher: `**` at the end matches anything, `**` elsewhere any run of whole
 * directories, none included). A malformed pattern (an unclosed `[`, `[]`, a range
 * without an end) is -EINVAL with err naming it. */
int build_glob_compile(const char *pattern, bool doublestar, struct build_glob **ret,
                       struct cs_error *err);
bool build_glob_match(const struct build_glob *g, const char *name);
void build_glob_free(struct build_glob *g);
/* Whether a path component has a wildcard (`*`, `?`, `[` not escaped by `\`), as buildkit
 * decides whether a COPY source is a glob. */
bool build_glob_has_wildcard(const char *s, size_t len);

/* The patterns of an ignore file compiled (each cleaned as Go's filepath.Clean does, a
 * leading `!` making it an exception). */
struct build_ignore;
int build_ignore_compile(char *const *patterns, size_t n, struct build_ignore **ret,
                         struct cs_error *err);
void build_ignore_free(struct build_ignore *m);
/* Whether path (relative to the context, cleaned, "a/b") is left out: the last pattern
 * matching it or one of its parent directories decides, as moby's MatchesOrParentMatches. */
bool build_ignore_excludes(const struct build_ignore *m, const char *path);
/* Whether a pattern could take back something under an excluded directory (any `!`). */
bool build_ignore_has_exceptions(const struct build_ignore *m);

/* path cleaned in place as Go's filepath.Clean does ("" becomes "."). */
void build_path_clean(char *path);

/* build_layer_commit with the layer's tar bytes also given to tap, as they are hashed (for
 * tests, and whatever one day writes the layer out). */
typedef void (*build_tar_tap)(void *opaque, const void *buf, size_t len);
int build_layer_commit_tap(int upper_fd, const int *lower_fds, size_t n_lowers,
                           const char *const *mountpoints, size_t n_mountpoints, uint32_t given_max,
                           int meta_fd, build_tar_tap tap, void *opaque,
                           unsigned char ret_diff_id[32], struct layer_stats *ret_stats,
                           bool *ret_empty, struct cs_error *err);

/* The stored layer at layer_dir_fd (its diff/ tree and its ownership record) as a tar to
 * tap, in the form of build_layer_commit's (the same bytes for a layer it committed);
 * ret_diff_id: the tar's SHA-256. Reads the tree and changes nothing. */
int build_layer_export(int layer_dir_fd, build_tar_tap tap, void *opaque,
                       unsigned char ret_diff_id[32], struct cs_error *err);

/* The names in the directory dfd (not . and ..), sorted by bytes; at most max of them. */
int build_list_dir(int dfd, size_t max, char ***ret, size_t *ret_n, const char *shown,
                   struct cs_error *err);
void build_names_free(char **v, size_t n);
