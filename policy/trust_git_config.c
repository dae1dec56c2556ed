/* Which git configs run nothing (trust_git_config_inert): the keys a repository's own config
 * may hold without making the git dir one whose use runs commands. */
#include "trust_rules.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The keys a repository's own config may hold that make git run nothing: what `git init`,
 * `git clone`, `git submodule add` and `git worktree add` write, and settings that only
 * tune. Anything else (a command, a helper, an include, a hooks path, a pager, a driver)
 * makes the git dir one that runs commands. sub: the key is allowed in a subsection too. */
static const struct {
        const char *section, *key;
        bool sub;
} inert_keys[] = {
    {"core", "repositoryformatversion", false},
    {"core", "filemode", false},
    {"core", "bare", false},
    {"core", "logallrefupdates", false},
    {"core", "ignorecase", false},
    {"core", "precomposeunicode", false},
    {"core", "symlinks", false},
    {"core", "autocrlf", false},
    {"core", "eol", false},
    {"core", "safecrlf", false},
    {"core", "quotepath", false},
    {"core", "worktree", false},
    {"core", "sharedrepository", false},
    {"core", "checkstat", false},
    {"core", "trustctime", false},
    {"core", "untrackedcache", false},
    {"core", "splitindex", false},
    {"core", "preloadindex", false},
    {"core", "abbrev", false},
    {"core", "compression", false},
    {"core", "loosecompression", false},
    {"core", "bigfilethreshold", false},
    {"core", "warnambiguousrefs", false},
    {"core", "commentchar", false},
    {"core", "whitespace", false},
    {"remote", "url", true},
    {"remote", "pushurl", true},
    {"remote", "fetch", true},
    {"remote", "push", true},
    {"remote", "tagopt", true},
    {"remote", "prune", true},
    {"remote", "prunetags", true},
    {"remote", "mirror", true},
    {"remote", "promisor", true},
    {"remote", "partialclonefilter", true},
    {"branch", "remote", true},
    {"branch", "merge", true},
    {"branch", "rebase", true},
    {"branch", "pushremote", true},
    {"branch", "description", true},
    {"submodule", "url", true},
    {"submodule", "active", true},
    {"submodule", "branch", true},
    {"submodule", "fetchrecursesubmodules", true},
    {"submodule", "ignore", true},
    {"submodule", "shallow", true},
    {"extensions", NULL, false},
    {"user", "name", false},
    {"user", "email", false},
    {"init", "defaultbranch", false},
    {"pull", "rebase", false},
    {"pull", "ff", false},
    {"push", "default", false},
    {"push", "autosetupremote", false},
    {"fetch", "prune", false},
    {"fetch", "prunetags", false},
    {"fetch", "writecommitgraph", false},
    {"gc", "auto", false},
    {"gc", "autodetach", false},
    {"gc", "autopacklimit", false},
    {"merge", "ff", false},
    {"merge", "conflictstyle", false},
    {"index", "version", false},
    {"index", "skiphash", false},
    {"color", NULL, true},
    {"advice", NULL, false},
    {"status", "showuntrackedfiles", false},
    {"worktree", "guessremote", false},
    {"maintenance", "auto", false},
    {"rerere", "enabled", false},
    {"rerere", "autoupdate", false},
};

static bool key_inert(const char *section, bool sub, const char *key)
{
        for (size_t i = 0; i < sizeof(inert_keys) / sizeof(inert_keys[0]); i++)
                if (strcmp(inert_keys[i].section, section) == 0 &&
                    (!inert_keys[i].key || strcmp(inert_keys[i].key, key) == 0) &&
                    (!sub || inert_keys[i].sub))
                        return true;
        return false;
}

bool trust_git_config_inert(const char *text, size_t len, char **ret_why)
{
        char section[64] = "", key[64];
        bool sub = false, header_ok = true;
        size_t i = 0;

        *ret_why = NULL;
        while (i < len) {
                size_t n;

                while (i < len &&
                       (text[i] == ' ' || text[i] == '\t' || text[i] == '\r' || text[i] == '\n'))
                        i++;
                if (i >= len)
                        break;
                if (text[i] == '#' || text[i] == ';') {
                        while (i < len && text[i] != '\n')
                                i++;
                        continue;
                }
                if (text[i] == '[') {
                        /* [section], [section "sub"], [section.sub] */
                        n = 0;
                        sub = false;
                        header_ok = true;
                        for (i++; i < len && text[i] != ']' && text[i] != '\n'; i++) {
                                unsigned char ch = (unsigned char)text[i];

                                if (ch == '"' || ch == ' ' || ch == '\t' || ch == '.') {
                                        sub = true;
                                        /* the rest is the subsection's name, up to ] */
                                        while (i < len && text[i] != ']' && text[i] != '\n') {
                                                if (text[i] == '\\' && i + 1 < len)
                                                        i++;
                                                i++;
                                                if (i < len && text[i - 1] == '"' && text[i] == ']')
                                                        break;
                                        }
                                        break;
                                }
                                if (!isalnum(ch) && ch != '-')
                                        header_ok = false;
                                if (n + 1 < sizeof(section))
                                        section[n++] = (char)tolower(ch);
                                else
                                        header_ok = false;
                        }
                        section[n] = '\0';
                        if (i >= len || text[i] != ']' || !header_ok || n == 0) {
                                *ret_why = strdup("a section header git may read otherwise");
                                return false;
                        }
                        i++;
                        continue; /* a key may follow on the same line */
                }
                /* key [= value] */
                n = 0;
                while (i < len && (isalnum((unsigned char)text[i]) || text[i] == '-')) {
                        if (n + 1 >= sizeof(key)) {
                                *ret_why = strdup("a key too long to judge");
                                return false;
                        }
                        key[n++] = (char)tolower((unsigned char)text[i++]);
                }
                key[n] = '\0';
                if (n == 0 || !section[0]) {
                        *ret_why = strdup("a line git may read otherwise");
                        return false;
                }
                if (!key_inert(section, sub, key)) {
                        if (asprintf(ret_why, "%s%s.%s", section, sub ? ".<name>" : "", key) < 0)
                                *ret_why = NULL;
                        return false;
                }
                /* The value: to the end of the line, a backslash before the newline (outside
                 * quotes) continuing it. */
                {
                        bool quoted = false;

                        for (; i < len && (text[i] != '\n' || quoted); i++) {
                                if (text[i] == '\\' && i + 1 < len) {
                                        i++;
                                        continue;
                                }
                                if (text[i] == '"')
                                        quoted = !quoted;
                                if (text[i] == '\n')
                                        break;
                        }
                }
        }
        return true;
}
