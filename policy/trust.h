/* What the host runs later that a sandboxed session could change (reference §6.4, and
 * more): the profile's scripts made read-only inside, the items the trust report compares
 * before and after a session (MCP servers, nested repositories, submodule git dirs,
 * gitlinks, files the settings run), and the review a later launch waits for. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

struct cs_error;
struct profile;
struct profile_config;
struct sandbox_spec;
struct worktree;
typedef struct cJSON cJSON;

/* Items "kind\tname\tvalue": the report lists the ones that are new after the session. */
struct plan_trust {
        char **items;
        size_t n;
};

void trust_add(struct plan_trust *t, const char *kind, const char *name, const cJSON *value);
void trust_free(struct plan_trust *t);

/* What the snapshot watches besides the profile's .claude.json. */
struct trust_watch {
        char *work_root;
        char *git_dir;        /* the common git dir: <work_root>/.git, or a linked worktree's */
        bool git_inside;      /* git_dir is <work_root>/.git (opened through the work root) */
        char *index_dir;      /* where the index is, relative to git_dir ("" or worktrees/NAME) */
        char **profile_files; /* files the host runs, relative to the profile dir */
        size_t n_profile_files;
        char **tree_files; /* the same, relative to the work root */
        size_t n_tree_files;
};

/* Read-only inside: the profile's hooks/, statusline.sh and plugins/ when they are real
 * (a link is reported when retargeted instead), and each regular file in the profile or
 * the work tree that the profile's settings.json or shared-settings.json names in a
 * command (hooks, statusLine, apiKeyHelper, ...). Every such file, existing or not, is
 * watched, and so is the work tree's .claude/settings.json. config_dest: the profile dir's
 * path inside; wt: the work tree mounted read-write at its own path. */
int trust_protect(struct sandbox_spec *s, const struct profile_config *c, const struct profile *p,
                  const char *config_dest, const struct worktree *wt, struct trust_watch *w,
                  struct cs_error *err);
/* Add the watch's items: every .git entry under the work root but the top one (with its
 * config), every git dir under .git/modules (with its config), the index's gitlinks,
 * .gitmodules, and the watched files. Bounded; never follows a link. */
void trust_snapshot_watch(struct plan_trust *t, const struct profile *p,
                          const struct trust_watch *w);
void trust_watch_free(struct trust_watch *w);

/* The gitlink (mode 160000) paths of a git index (versions 2 to 4, SHA-1 or SHA-256), as
 * NUL-separated names in *ret (*ret_len bytes). -EINVAL for anything that is not a
 * well-formed index. */
int trust_index_gitlinks(const char *buf, size_t len, char **ret, size_t *ret_len);

/* A report the next launch waits on: <state>/trust-pending/<time>-<pid>. */
int trust_pending_add(const struct profile *p, const char *work_root, const char *report,
                      struct cs_error *err);
/* While a session runs, a record that stands for its report: found by a later launch after
 * this process is gone without trust_session_end (killed, the machine stopped), it refuses
 * like a report. *ret_name is the record's name for trust_session_end. */
int trust_session_begin(const struct profile *p, const char *work_root, char **ret_name,
                        struct cs_error *err);
void trust_session_end(const struct profile *p, const char *name);
/* The reports not accepted yet, joined (NULL when none); accept removes them. */
int trust_pending_take(const struct profile *p, bool accept, char **ret, struct cs_error *err);
