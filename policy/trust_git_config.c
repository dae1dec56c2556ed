/* Which git configs run nothing (trust_git_config_inert): the keys a repository's own config
 * may hold without making the git dir one whose use runs commands. */
#include "trust_rules.h"

#include "../common/strbuf.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The keys a repository's own config may hold that make git run nothing: what `git init`,
 * `git clone` and `git worktree add` write, and settings that only tune. Anything else (a
 * command, a helper, an include, a hooks path, a pager, a driver) makes the git dir one that
 * runs commands; so does a key that sends git's reads or writes elsewhere: core.worktree
 * (checkout writes there), core.sharedRepository (files others may write), a promisor
 * remote or extensions.partialClone (git fetches on its own), any extension but these four.
 * sub: the key is allowed in a subsection too. */
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
    {"extensions", "objectformat", false},
    {"extensions", "worktreeconfig", false},
    {"extensions", "preciousobjects", false},
    {"extensions", "noop", false},
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

/* One pass over a config as git's config.c (2.39) reads it: get_next_char, parse_value,
 * get_value, get_base_var, get_extended_base_var and git_parse_source, step for step, so
 * that every key git sees is a key judged, with the value git gives it. */
struct cfg_source {
        const unsigned char *text;
        size_t len, pos, line;
        bool eof;
};

/* git's sane_ctype: isspace is " \t\n\r" only, letters and digits ASCII only. */
static bool git_isspace(int c)
{
        return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static bool git_isalpha(int c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool git_iskeychar(int c)
{
        return git_isalpha(c) || (c >= '0' && c <= '9') || c == '-';
}

static int git_tolower(int c)
{
        return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

/* A CR before a LF is dropped; the end of the text reads as a newline, again and again. */
static int cfg_next(struct cfg_source *s)
{
        int c;

        if (s->pos >= s->len) {
                s->eof = true;
                return '\n';
        }
        c = s->text[s->pos++];
        if (c == '\r' && s->pos < s->len && s->text[s->pos] == '\n')
                c = s->text[s->pos++];
        if (c == '\n')
                s->line++;
        return c;
}

static int cfg_value(struct cfg_source *s, struct strbuf *v)
{
        bool quote = false, comment = false;
        size_t space = 0;

        v->len = 0;
        sb_add(v, "", 0);
        for (;;) {
                int c = cfg_next(s);

                if (c == '\n')
                        return quote ? -1 : 0;
                if (comment)
                        continue;
                if (git_isspace(c) && !quote) {
                        if (v->len)
                                space++;
                        continue;
                }
                if (!quote && (c == ';' || c == '#')) {
                        comment = true;
                        continue;
                }
                for (; space; space--)
                        sb_putc(v, ' ');
                if (c == '\\') {
                        c = cfg_next(s);
                        switch (c) {
                        case '\n':
                                continue;
                        case 't':
                                c = '\t';
                                break;
                        case 'b':
                                c = '\b';
                                break;
                        case 'n':
                                c = '\n';
                                break;
                        case '\\':
                        case '"':
                                break;
                        default:
                                return -1; /* git refuses an unknown escape */
                        }
                        sb_putc(v, (char)c);
                        continue;
                }
                if (c == '"') {
                        quote = !quote;
                        continue;
                }
                sb_putc(v, (char)c);
        }
}

/* The key's name after the section's, then "= value" or nothing. A NUL in the name or the
 * value ends the string git's callbacks see, so it ends the one judged. */
static int cfg_entry(struct cfg_source *s, struct strbuf *var, struct strbuf *v,
                     trust_git_config_fn fn, void *ctx)
{
        int c;

        for (;;) {
                c = cfg_next(s);
                if (s->eof || !git_iskeychar(c))
                        break;
                sb_putc(var, (char)git_tolower(c));
        }
        while (c == ' ' || c == '\t')
                c = cfg_next(s);
        if (c == '\n')
                return fn(var->s, NULL, ctx) < 0 ? -2 : 0;
        if (c != '=' || cfg_value(s, v) < 0)
                return -1;
        return fn(var->s, v->s, ctx) < 0 ? -2 : 0;
}

/* [section "sub"]: blanks, then a quoted name in which a backslash takes the next byte. */
static int cfg_extended_header(struct cfg_source *s, struct strbuf *var, int c)
{
        do {
                if (c == '\n')
                        return -1;
                c = cfg_next(s);
        } while (git_isspace(c));
        if (c != '"')
                return -1;
        sb_putc(var, '.');
        for (;;) {
                c = cfg_next(s);
                if (c == '\n')
                        return -1;
                if (c == '"')
                        break;
                if (c == '\\') {
                        c = cfg_next(s);
                        if (c == '\n')
                                return -1;
                }
                sb_putc(var, (char)c);
        }
        return cfg_next(s) == ']' ? 0 : -1;
}

/* [section], [section.sub] (the old form, lowercased whole) or [section "sub"]. */
static int cfg_header(struct cfg_source *s, struct strbuf *var)
{
        for (;;) {
                int c = cfg_next(s);

                if (s->eof)
                        return -1;
                if (c == ']')
                        return 0;
                if (git_isspace(c))
                        return cfg_extended_header(s, var, c);
                if (!git_iskeychar(c) && c != '.')
                        return -1;
                sb_putc(var, (char)git_tolower(c));
        }
}

int trust_git_config_parse(const char *text, size_t len, trust_git_config_fn fn, void *ctx,
                           size_t *ret_line)
{
        static const unsigned char bom[] = {0xef, 0xbb, 0xbf};
        struct cfg_source s = {.text = (const unsigned char *)text, .len = len, .line = 1};
        struct strbuf var = {0}, v = {0};
        size_t baselen = 0, bom_at = 0;
        bool comment = false, bom_done = false;
        int r = -1;

        sb_add(&var, "", 0);
        for (;;) {
                int c = cfg_next(&s);

                if (var.oom || v.oom)
                        break;
                if (!bom_done) {
                        /* A UTF-8 byte order mark at the very start is skipped; part of one
                         * is an error. */
                        if (bom_at < sizeof(bom) && c == bom[bom_at]) {
                                bom_at++;
                                continue;
                        }
                        if (bom_at > 0 && bom_at < sizeof(bom))
                                break;
                        bom_done = true;
                }
                if (c == '\n') {
                        if (s.eof) {
                                r = 0;
                                break;
                        }
                        comment = false;
                        continue;
                }
                if (comment || git_isspace(c))
                        continue;
                if (c == '#' || c == ';') {
                        comment = true;
                        continue;
                }
                if (c == '[') {
                        var.len = 0;
                        sb_add(&var, "", 0);
                        if (cfg_header(&s, &var) < 0 || var.len < 1)
                                break;
                        sb_putc(&var, '.');
                        baselen = var.len;
                        continue;
                }
                if (!git_isalpha(c))
                        break;
                var.len = baselen;
                var.s[baselen] = '\0';
                sb_putc(&var, (char)git_tolower(c));
                if (cfg_entry(&s, &var, &v, fn, ctx) < 0)
                        break;
        }
        if (var.oom || v.oom)
                r = -1;
        if (ret_line)
                *ret_line = s.line;
        free(var.s);
        free(v.s);
        return r < 0 ? -1 : 0;
}

static bool key_inert(const char *section, bool sub, const char *key)
{
        for (size_t i = 0; i < sizeof(inert_keys) / sizeof(inert_keys[0]); i++)
                if (strcmp(inert_keys[i].section, section) == 0 &&
                    (!inert_keys[i].key || strcmp(inert_keys[i].key, key) == 0) &&
                    (!sub || inert_keys[i].sub))
                        return true;
        return false;
}

bool trust_git_key_inert(const char *name)
{
        const char *first = strchr(name, '.'), *last = strrchr(name, '.');
        char section[64];

        /* A key outside any section, or a section git never looks a key up in. */
        if (!first || first == name || (size_t)(first - name) >= sizeof(section) || !last[1])
                return false;
        memcpy(section, name, (size_t)(first - name));
        section[first - name] = '\0';
        return key_inert(section, first != last, last + 1);
}

struct inert_ctx {
        char *why;
};

static int inert_key(const char *name, const char *value, void *ctx)
{
        struct inert_ctx *c = ctx;
        const char *first = strchr(name, '.'), *last = strrchr(name, '.');

        (void)value;
        if (trust_git_key_inert(name))
                return 0;
        /* The report names the key with its subsection's name left out: a session picks that
         * name, and the allowlist does not depend on it. */
        if (first && first != last) {
                if (asprintf(&c->why, "%.*s.<name>%s", (int)(first - name), name, last) < 0)
                        c->why = NULL;
        } else
                c->why = strdup(*name ? name : "a key without a name");
        if (!c->why)
                c->why = strdup("a key");
        return -1;
}

bool trust_git_config_inert(const char *text, size_t len, char **ret_why)
{
        struct inert_ctx c = {0};
        size_t line = 0;

        *ret_why = NULL;
        if (trust_git_config_parse(text, len, inert_key, &c, &line) == 0)
                return true;
        if (c.why) {
                *ret_why = c.why;
                return false;
        }
        /* git refuses the file ("bad config line"): every command in the repository fails
         * before running anything, but a later git may read it otherwise. */
        if (asprintf(ret_why, "a line git refuses (line %zu)", line) < 0)
                *ret_why = strdup("a line git refuses");
        return false;
}
