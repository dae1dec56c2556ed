/* The one path resolver: every open of a path that something else may be changing at the
 * same time goes through here. openat2 where the kernel (and the seccomp profile csandbox
 * may itself run under) allows it; the first refusal is remembered and a walk with the same
 * rules, one component at a time with O_NOFOLLOW, is used from then on. */
#pragma once
#include <stdbool.h>

/* path relative to dirfd, with no symlink, no magic link and no ".." anywhere on the way
 * (the last component included), the way RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_MAGICLINKS does. An absolute path or a ".." is EXDEV, a symlink ELOOP. Mount
 * points are crossed. "." or "" opens dirfd itself. Returns an fd (O_CLOEXEC added), or
 * -1 with errno set. */
int cs_open_beneath(int dirfd, const char *path, int flags);
/* The same rules without openat2 (what cs_open_beneath falls back to). */
int cs_open_beneath_walk(int dirfd, const char *path, int flags);

/* path (absolute, or relative to dirfd) with no symlink and no magic link on the way, as
 * RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS does. Without openat2 the walk of
 * cs_open_beneath_walk from / or dirfd is used, which refuses a ".." too (EXDEV). */
int cs_open_no_links(int dirfd, const char *path, int flags);

/* path relative to dirfd, following the symlinks whose targets stay beneath it, as
 * RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS does (a build context: a link to another file of
 * the context is taken, one leading out of it is EXDEV). Without openat2 the walk of
 * cs_open_in_root_walk is used: a link out of dirfd then lands inside it instead. */
int cs_open_beneath_links(int dirfd, const char *path, int flags);

/* path inside the tree at rootfd as if rootfd were /: symlinks are followed but never out
 * of it (absolute targets from rootfd, ".." stopping at it), magic links refused, as
 * RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS does. Returns an fd or -1 with errno set. */
int cs_open_in_root(int rootfd, const char *path, int flags);
int cs_open_in_root_walk(int rootfd, const char *path, int flags);

/* Whether openat2 was refused in this process, so the walks are in use. */
bool cs_resolve_walking(void);
