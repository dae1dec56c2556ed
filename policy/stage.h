/* Staged copies in the per-profile state dir (reference §1.4, §2.4–§2.10): what the sandbox
 * may write but never replace. Every read of a host file that the sandbox could have
 * planted is O_NOFOLLOW through dir fds; every write goes through cs_write_file_atomic. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

struct cs_error;
struct cs_spawned;
struct profile;
struct profile_config;

/* A warning for the user (the caller prints them; library code never does). */
struct stage_warnings {
        char **msgs;
        size_t n;
};
/* Record a warning for the user; -ENOMEM (err set) when it cannot be. */
int stage_warn(struct stage_warnings *w, struct cs_error *err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void stage_warnings_free(struct stage_warnings *w);

/* §3.1: <state>/settings.json from <profile>/settings.json (created {}\n on the host when
 * missing; a symlinked source gives {}\n and a warning). ret_path: the copy's path. */
int stage_settings(const struct profile *p, bool accept_bypass, char **ret_path,
                   struct stage_warnings *warn, struct cs_error *err);
/* §2.5: <state>/chrome (mkdir, kept across launches). */
int stage_chrome(const struct profile *p, char **ret_path, struct cs_error *err);
/* §2.4 #8–#10: <state>/gitconfig from <home>/.gitconfig (NULL when there is none),
 * <state>/host_known_hosts from <home>/.ssh/known_hosts (NULL when none), and
 * <state>/known_hosts (created empty, never overwritten). */
int stage_gitconfig(const struct profile *p, const char *home, char **ret_path,
                    struct cs_error *err);
int stage_host_known_hosts(const struct profile *p, const char *home, char **ret_path,
                           struct cs_error *err);
int stage_user_known_hosts(const struct profile *p, char **ret_path, struct cs_error *err);
/* §2.6: for one git dir (git_fd: the dir, already opened and checked; git_dir: its path, for
 * messages): *ret_config = <gitdir>/config when it is a regular file (not a link), else NULL
 * (a link gives a warning); *ret_hooks_fd = <gitdir>/hooks opened O_RDONLY|O_DIRECTORY
 * without following a link, for the copy the runner makes in a tmpfs of the sandbox
 * (SPEC_MOUNT_COPY); -1 with *ret_hooks_missing when there is none, -1 with a warning when
 * it is a link or not a directory. */
/* The per-launch hooks copies earlier versions kept in <state>/git-hooks: those of launches
 * that are gone removed, and the dir with them once it is empty. */
void stage_hooks_cleanup(int state_fd);
int stage_git_dir(int git_fd, const char *git_dir, char **ret_config, int *ret_hooks_fd,
                  bool *ret_hooks_missing, struct stage_warnings *warn, struct cs_error *err);
/* §2.7: the copy for one .claude/settings.local.json that lexists and is not a dir (a link
 * gives {}\n and a warning); NULL when it does not exist. dir_fd: the .claude dir, already
 * opened and checked (-1: there is none); local_path names the file in messages and keys. */
int stage_local_settings(const struct profile *p, int dir_fd, const char *local_path,
                         char **ret_copy, struct stage_warnings *warn, struct cs_error *err);
/* When the claude `bin` names (a path, or a name looked up on PATH) is there but cannot run
 * (a noexec mount, no execute permission): an error saying which and how to fix it; else 0. */
int claude_blocked(const char *bin, struct cs_error *err);
/* The host claude binary: c->claude_bin found on PATH as shutil.which does, resolved and
 * opened once (O_PATH) into *ret_fd, its path in *ret_path; refused when it is not a regular
 * file or every user can write it. *ret_missing (and *ret_fd -1) when no claude is
 * installed. Removes the copies earlier csandbox versions staged under <data>/csandbox/claude. */
int stage_claude(const struct profile_config *c, int *ret_fd, char **ret_path, bool *ret_missing,
                 struct cs_error *err);
/* §2.10: `git config` for the identity keys, started in cwd while the plan goes on; end it
 * with stage_git_identity, or cs_spawn_abort on a path that does not get there. */
int stage_git_identity_start(const char *cwd, struct cs_spawned *ret, struct cs_error *err);
/* What git said, as the identity file under <data_home>/claude-profile/git/; NULL when git
 * knows no user.name/user.email. The signing keys only with signing. */
int stage_git_identity(const struct profile_config *c, struct cs_spawned *git, bool signing,
                       char **ret_path, struct cs_error *err);
