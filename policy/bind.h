/* How policy hands the runner a host object: opened once, by fd, below a verified anchor,
 * its type and owner checked on the fd, which the spec then owns. */
#pragma once
#include "../spec/spec.h"

#include <stdbool.h>
#include <sys/types.h>

struct cs_error;

/* path's part below anchor ("" for anchor itself), or NULL when it is not below it. */
const char *plan_path_below(const char *anchor, const char *path);
/* *fd (taken: closed on every path) checked (a directory or a regular file, the caller's or
 * root's) and added to the spec as a bind of src at dst. */
int plan_bind_fd(struct sandbox_spec *s, int *fd, const char *src, const char *dst, unsigned flags,
                 struct cs_error *err);
/* The one way policy binds a host object: src, below anchor (verified fd anchor_fd), opened
 * once with no symlink, magic link or ".." on the way, its type and owner checked on the fd,
 * which the spec then owns. A missing SPEC_MOUNT_OPTIONAL source is skipped. */
int plan_bind_at(struct sandbox_spec *s, int anchor_fd, const char *anchor, const char *src,
                 const char *dst, unsigned flags, struct cs_error *err);
/* A host path no session can write: its links resolved once, the result opened from /. */
int plan_bind_host(struct sandbox_spec *s, const char *src, const char *dst, unsigned flags,
                   struct cs_error *err);
/* mkdirat name below dirfd when missing, then checked on what is there: 1 when it is a real
 * directory of the caller's now, 0 otherwise. */
int plan_ensure_host_dir(int dirfd, const char *name);

/* An owner every bind accepts: the caller, root, or the overflow uid (an owner this user
 * namespace does not map: the system's files inside a container). */
bool plan_owner_is_trusted(uid_t uid);
/* Accept uid as the owner of what is bound from below dir (a work tree git's safe.directory
 * lists) and below git_dir (NULL, or its git dir outside it: a linked worktree's common dir,
 * a submodule's git dir); replaces an earlier one. */
void plan_bind_accept_owner(const char *dir, const char *git_dir, uid_t uid);

struct plan_tree_owner {
        uid_t uid;   /* the work tree's owner */
        bool listed; /* another uid's, accepted because git's safe.directory lists the tree */
};
/* The work tree root (verified fd root_fd) judged as git judges a repository another user
 * owns: the caller's, root's or an unmapped owner's passes; another uid's passes when git's
 * safe.directory, read from the protected config only (system, global, command line; never
 * the repository's), lists root, and that owner is then accepted for the binds below root
 * (plan_bind_accept_owner); otherwise an EPERM error naming the owner, safe.directory and
 * the `git config --global --add safe.directory` that fixes it. git_answered: git found a
 * repository for it; a root with a .git that git gave no answer for is one git refused (a
 * safe.directory form this git does not take), and is refused too. outside_git_dir: the
 * tree's git dir when git found it outside root (a linked worktree's common dir, a submodule's
 * git dir, each verified to point back), whose owner git judges with the tree's: accepted
 * with it. */
int plan_tree_owner_check(int root_fd, const char *root, bool git_answered,
                          const char *outside_git_dir, struct plan_tree_owner *ret,
                          struct cs_error *err);
