/* What the host runs later that a sandboxed session could change (reference §6.4, and
 * more): the profile's scripts made read-only inside, the items the trust report compares
 * before and after a session (MCP servers, nested repositories, submodule git dirs,
 * gitlinks, files the settings run), and the review a later launch waits for. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <time.h>
#include <sys/types.h>

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

/* What the trust rules are made of (policy/trust_rules.h): the roots and named files. */
struct trust_watch {
        char *work_root;
        char *git_dir;        /* the common git dir: <work_root>/.git, or a linked worktree's */
        bool git_inside;      /* git_dir is <work_root>/.git (opened through the work root) */
        char **profile_files; /* files the host runs, relative to the profile dir */
        size_t n_profile_files;
        char **tree_files; /* the same, relative to the work root */
        size_t n_tree_files;
        /* Config files the host's git reads for the repository (read, not run: what sits
         * beside them is not code), relative to the profile dir and the work root. */
        char **profile_configs, **tree_configs;
        size_t n_profile_configs, n_tree_configs;
        bool plugins_enabled; /* the settings enable a plugin */
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
void trust_watch_free(struct trust_watch *w);

/* The paths a settings command names (absolute; ~, $HOME, $CLAUDE_CONFIG_DIR and
 * $CLAUDE_PROJECT_DIR expanded, a relative word taken in project_dir), normalised, added to
 * *ret once each. -ENOMEM. */
int trust_command_paths(const char *cmd, const char *home, const char *profile_dir,
                        const char *project_dir, char ***ret, size_t *ret_n);
/* Every path the commands of the settings file dirfd/path name (hooks, statusLine, the
 * helpers), added to *ret; *ret_plugins set when it enables a plugin. An unreadable file
 * names nothing. -ENOMEM. */
int trust_settings_paths(int dirfd, const char *path, const char *home, const char *profile_dir,
                         const char *project_dir, char ***ret, size_t *ret_n, bool *ret_plugins);

#define TRUST_PLACES_MAX 32
/* Where reports wait: a directory only csandbox writes (never mounted in a sandbox). */
struct trust_place {
        int fd;     /* -1: none */
        char *path; /* for messages */
};
void trust_place_close(struct trust_place *pl);
/* The profile's: <state>/trust-pending. The work tree's: <data_home>/csandbox/trust/<hash of
 * its path>. Without create, a missing one is 0 with fd -1; 1 when opened. */
int trust_place_profile(const struct profile *p, bool create, struct trust_place *ret,
                        struct cs_error *err);
int trust_place_tree(const char *data_home, const char *tree, bool create, struct trust_place *ret,
                     struct cs_error *err);

/* What waits in one place for the user, read as trust_pending_take and
 * trust_unfinished_list read it: a report not accepted (or an earlier version's record),
 * a session that ended before its check, a session running now. 0: nothing. */
enum {
        TRUST_WAIT_REPORT = 1u << 0,
        TRUST_WAIT_UNCHECKED = 1u << 1,
        TRUST_WAIT_RUNNING = 1u << 2,
};
unsigned trust_place_waiting(const struct trust_place *pl);

/* A report the next launch waits on: <place>/<time>-<pid>. */
int trust_pending_add(const struct trust_place *pl, const char *work_root, const char *report,
                      struct cs_error *err);
/* What a running-session record names this process by, read as trust_session_begin does:
 * its pid as /proc names it, this boot's id and its start time; an error naming what of
 * /proc could not be read. */
int trust_session_identity(pid_t *ret_pid, char boot[40], unsigned long long *ret_start,
                           struct cs_error *err);
/* While a session runs, a record that stands for its report: found by a later launch after
 * this process is gone without trust_session_end (killed, the machine stopped), it refuses
 * like a report. *ret_name is the record's name. trust_session_note appends what the
 * journal found while the session ran, so a killed csandbox leaves that too. */
int trust_session_begin(const struct trust_place *pl, const char *work_root,
                        const struct timespec *since, char **ret_name, struct cs_error *err);
void trust_session_note(const struct trust_place *pl, const char *name, const char *text);
void trust_session_end(const struct trust_place *pl, const char *name);
/* A session's record whose csandbox is gone (killed, or the machine stopped): the launch
 * that finds it finishes the check itself, walking the roots for what changed since the
 * session started (ctime cannot be set back), and refuses only when that finds something. */
struct trust_unfinished {
        int dir_fd;     /* the place holding the record (a dup) */
        char *dir_path; /* for messages */
        char *name;
        bool profile; /* in the profile's place (else a tree's) */
        bool broken;  /* unreadable, or not of this version's form: cannot be finished */
        struct timespec since;
        char *work_root;
        char *seen; /* what the journal noted while it ran ("  kind: path\n" lines) */
};
/* The unfinished records in the places (profile_place: the index of the profile's, or -1). */
int trust_unfinished_list(const struct trust_place *places, size_t n_places, ssize_t profile_place,
                          struct trust_unfinished **ret, size_t *ret_n, struct cs_error *err);
void trust_unfinished_free(struct trust_unfinished *u, size_t n);
/* u[i] said in words to f; nothing when an earlier u[e] is the same session's. */
void trust_unfinished_text(const struct trust_unfinished *u, size_t n, size_t i, FILE *f);
/* Its check is done (or accepted): the record goes. */
void trust_unfinished_drop(const struct trust_unfinished *u);
/* The repository's refs (loose and packed) and HEAD, read without a process; and what the
 * refs the session moved would make the host's checkout write that git takes for a git dir
 * (trust_refs.c). */
struct trust_refs {
        char **items; /* "refname oid" */
        size_t n;
        char *head;
        bool truncated;
};
void trust_refs_read(int git_fd, struct trust_refs *ret);
void trust_refs_judge(const char *work_root, const struct trust_refs *before,
                      const struct trust_refs *after, struct plan_trust *out);
void trust_refs_free(struct trust_refs *t);

/* The reports not accepted yet in the places, shown (NULL when none; bounded in length,
 * never by leaving one out silently). accept, or confirm(text) returning true, removes
 * exactly the reports shown and sets *ret_accepted. */
int trust_pending_take(const struct trust_place *places, size_t n_places, bool accept,
                       bool (*confirm)(const char *text, void *ctx), void *ctx, char **ret,
                       bool *ret_accepted, struct cs_error *err);
