/* The judge of the change journal: given one path a session changed below a writable root,
 * whether the host's git or claude would now run something because of it. The rules are the
 * consumers' own discovery rules (git's: a .git entry, a gitfile, a directory git takes for
 * a git dir by its HEAD, objects, refs and commondir; claude's: settings and .mcp.json at any
 * depth, the scripts settings name, the launch's own configuration), applied to every
 * change, not to a list of places. Pure: reads the filesystem below the root's fd, never
 * follows a link out of it except where git itself would (a gitfile, a commondir), and then
 * only reads. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "trust.h"

enum trust_root {
        TRUST_ROOT_PROFILE, /* the profile dir, ~/.claude inside */
        TRUST_ROOT_WORK,    /* the git work tree (or the cwd's tree) */
        TRUST_ROOT_COMMON,  /* a linked worktree's common git dir, outside the work tree */
        TRUST_ROOT_N
};

struct trust_rules {
        char *root_path[TRUST_ROOT_N]; /* host paths, for the report; NULL: no such root */
        char *home;                    /* the user's home, for ~ in commands */
        /* Files that the profile's and the shared settings name in a command, relative to
         * the profile dir or the work root. */
        char **named[TRUST_ROOT_N];
        size_t n_named[TRUST_ROOT_N];
        /* Config files the host's git reads for the repository, the same way. */
        char **configs[TRUST_ROOT_N];
        size_t n_configs[TRUST_ROOT_N];
        /* The repository's own git dir (dev, ino), whose config is read-only inside: a
         * commondir pointing at it adds nothing to judge. */
        unsigned long long main_dev, main_ino;
        bool plugins_enabled; /* the settings enable a plugin: its files are code */
        /* The profile's state dir (dev, ino): the session writes parts of it (chrome/, the
         * engine's containers/, its copies), which no rule judges: a link into it is a
         * finding. 0, 0: none. */
        unsigned long long state_dev, state_ino;
        /* The work tree's root (dev, ino): a core.worktree inside it is inert. */
        unsigned long long work_dev, work_ino;
        /* The session writes its own copy of .claude.json (written back after it): the
         * host's file is not the session's to change, and not judged. */
        bool claude_json_copied;
        /* Else, what the profile's .claude.json made the host run when the session started. */
        struct plan_trust claude_before;
};

void trust_rules_free(struct trust_rules *r);

/* Judge rel (a path below the root, "a/b/c") after a change. root_fd: the root's
 * directory. Findings are added to out as items ("kind\tpath\tdetail"), each once. */
void trust_judge(const struct trust_rules *r, enum trust_root root, int root_fd, const char *rel,
                 struct plan_trust *out);

/* Whether a git config's text names only settings from the inert list (no command, no
 * include, no hooks path...). When not, *ret_why names the first key that is not. */
bool trust_git_config_inert(const char *text, size_t len, char **ret_why);
/* Whether the journal judges rel (below root_fd, a changed path) again every second and at
 * the end: a referrer (a .git entry, a commondir or gitdir file, a link to a directory or to
 * nothing yet), whose target may change where no watch sees it, and a file git or claude
 * reads, whose content a store into a shared mapping can change without an event. */
bool trust_rejudge(int root_fd, const char *rel);
/* What the host reads from a work tree path by its name alone, as the judge would name it
 * (claude's project settings and MCP servers, a hook manager's config, an editor's rc file,
 * a program named git or claude); NULL for other names. For paths known only by name: a
 * commit's, which a checkout writes later. */
const char *trust_host_reads(const char *rel);

/* git's config reader (config.c of git 2.39), for the judge and its tests: fn gets each key
 * git would see, canonical ("section.sub.key", section and key lowercased), and its value
 * (NULL for a key without '='), in order; a negative return stops the reading. Returns -1
 * when git would refuse the text ("bad config line", *ret_line) or fn stopped it, else 0. */
typedef int (*trust_git_config_fn)(const char *key, const char *value, void *ctx);
int trust_git_config_parse(const char *text, size_t len, trust_git_config_fn fn, void *ctx,
                           size_t *ret_line);
/* Whether one canonical key (as trust_git_config_parse gives it) is on the inert list. */
bool trust_git_key_inert(const char *name);
