/* The work tree a launch mounts (reference §2.3, §2.1, §2.6): git's work root and common
 * dir for the cwd, the refusals, and every git dir whose config and hooks are protected. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "../common/spawn.h"

struct cs_error;

struct worktree {
        char *cwd;           /* physical getcwd() */
        char *root;          /* git rev-parse --show-toplevel, resolved; else cwd */
        char *common_dir;    /* git rev-parse --git-common-dir, resolved; NULL outside a repo */
        bool common_outside; /* common_dir is neither root nor under it (linked worktree) */
        char **git_dirs;     /* common_dir first, then submodule git dirs under modules/ */
        int *git_dir_fds;    /* each git dir as the walk opened it (never reopened by path) */
        size_t n_git_dirs;
};

/* `git -C cwd ARGS...` (git found on PATH) with only PATH and HOME of our environment, so no
 * GIT_DIR or GIT_WORK_TREE can point it at another repository, and with what a config would
 * make git execute switched off (fsmonitor, hooks, ssh, credential helpers); stdin
 * /dev/null; output bounded. *ret is its stdout without the final newline (raw: all of it, NULs
 * included, *ret_len bytes), or NULL when git is missing, fails or prints nothing. Negative only
 * when git could not be run or waited for. */
int worktree_git(const char *cwd, char *const *args, bool raw, char **ret, size_t *ret_len,
                 struct cs_error *err);
/* The same in two halves: git runs while the caller does other work. A start that finds
 * no git leaves ret->pid -1, which finish takes as "no output". On every other path the
 * caller ends a started git with worktree_git_finish or cs_spawn_abort. */
int worktree_git_start(const char *cwd, char *const *args, struct cs_spawned *ret,
                       struct cs_error *err);
int worktree_git_finish(struct cs_spawned *h, bool raw, char **ret, size_t *ret_len,
                        struct cs_error *err);

/* Run git (found on PATH; its absence means "not a repo") for cwd. */
int worktree_detect(const char *cwd, struct worktree *ret, struct cs_error *err);
void worktree_free(struct worktree *w);

/* §2.1: refuse a work root that is home or above it, or that overlaps the profiles dir; the
 * messages as the reference words them (with csandbox's own advice). Also refuse git
 * answers the work tree itself could have forged: a root that does not contain the cwd, or
 * a git dir outside the root that is not a linked worktree's common dir pointing back. */
int worktree_refuse(const struct worktree *w, const char *home, const char *profiles_base,
                    struct cs_error *err);

/* Each <ancestor>/.mcp.json of root that is a regular file (nearest first, up to /); a
 * linked one is left out with a warning. */
struct stage_warnings;
int worktree_ancestor_mcp(const struct worktree *w, char ***ret, size_t *ret_n,
                          struct stage_warnings *warn, struct cs_error *err);
