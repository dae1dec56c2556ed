/* Containerfile parsing: lines, parser directives, comments and continuations as docker's
 * parser reads them, then each instruction's arguments (containerfile-args.c). */
#include "containerfile.h"
#include "containerfile-private.h"

#include "../../common/error.h"
#include "../../common/strbuf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct reader {
        const char *p, *end;
        unsigned line; /* the number of the line last read */
};

/* The next line without its "\n" or "\r\n"; false at the end of the input. */
static bool next_line(struct reader *r, const char **ret, size_t *ret_len)
{
        const char *nl;
        size_t n;

        if (r->p >= r->end)
                return false;
        nl = memchr(r->p, '\n', (size_t)(r->end - r->p));
        n = nl ? (size_t)(nl - r->p) : (size_t)(r->end - r->p);
        *ret = r->p;
        *ret_len = n > 0 && r->p[n - 1] == '\r' ? n - 1 : n;
        r->p = nl ? nl + 1 : r->end;
        r->line++;
        return true;
}

static size_t skip_blanks(const char *s, size_t n, size_t i)
{
        while (i < n && cf_blank(s[i]))
                i++;
        return i;
}

static bool is_comment(const char *s, size_t n)
{
        size_t i = skip_blanks(s, n, 0);

        return i < n && s[i] == '#';
}

/* Drop a continuation (the escape character, then only blanks, at the end): true when the
 * instruction goes on on the next line. */
static bool strip_continuation(const char *s, size_t *n, char escape)
{
        size_t k = *n;

        while (k > 0 && (s[k - 1] == ' ' || s[k - 1] == '\t'))
                k--;
        if (k == 0 || s[k - 1] != escape)
                return false;
        *n = k - 1;
        return true;
}

struct directives {
        bool done, seen_escape, seen_syntax, seen_check;
        char escape;
};

/* A parser directive `# name=value` at the top: 1 when the line was one, 0 when it ends the
 * directives (any other line, an unknown name included: docker reads those as comments). */
static int directive(struct directives *d, const char *s, size_t n, const char *file, unsigned line,
                     struct cs_error *err)
{
        size_t i = skip_blanks(s, n, 0), name, name_end, val, end = n;
        bool *seen;

        if (i >= n || s[i] != '#')
                return 0;
        name = i = skip_blanks(s, n, i + 1);
        while (i < n && ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
                         (i > name && s[i] >= '0' && s[i] <= '9')))
                i++;
        name_end = i;
        i = skip_blanks(s, n, i);
        if (name_end == name || i >= n || s[i] != '=')
                return 0;
        val = skip_blanks(s, n, i + 1);
        while (end > val && cf_blank(s[end - 1]))
                end--;
        if (end == val)
                return 0;
        if (name_end - name == 6 && strncasecmp(s + name, "escape", 6) == 0)
                seen = &d->seen_escape;
        else if (name_end - name == 6 && strncasecmp(s + name, "syntax", 6) == 0)
                seen = &d->seen_syntax;
        else if (name_end - name == 5 && strncasecmp(s + name, "check", 5) == 0)
                seen = &d->seen_check;
        else
                return 0;
        if (*seen)
                return cs_error_setx(err, EINVAL,
                                     "%s:%u: a second `%.*s` parser directive; "
                                     "each may be given once, at the top of the file",
                                     file, line, (int)(name_end - name), s + name);
        *seen = true;
        if (seen == &d->seen_escape) {
                if (end - val != 1 || (s[val] != '\\' && s[val] != '`'))
                        return cs_error_setx(err, EINVAL,
                                             "%s:%u: invalid escape `%.*s`: the escape "
                                             "character is \\ or `",
                                             file, line, (int)(end - val > 40 ? 40 : end - val),
                                             s + val);
                d->escape = s[val];
        }
        /* syntax= names a BuildKit frontend image and check= its linter: ignored. */
        return 1;
}

void containerfile_free(struct containerfile *cf)
{
        if (!cf)
                return;
        for (size_t i = 0; i < cf->n; i++)
                cf_instr_free(&cf->instrs[i]);
        free(cf->instrs);
        cf->instrs = NULL;
        cf->n = 0;
}

/* Where the first NUL byte is, as a line number (1-based). */
static unsigned nul_line(const char *text, size_t len, const char *nul)
{
        unsigned line = 1;

        for (const char *p = text; p < nul && p < text + len; p++)
                line += *p == '\n';
        return line;
}

/* One instruction's lines, joined (blanks at the start of the first dropped): comment and
 * blank lines inside a continuation are skipped, as docker does. */
static int join_instruction(struct reader *r, const char *s, size_t n, char escape,
                            struct strbuf *out, const char *file, struct cs_error *err)
{
        size_t i = skip_blanks(s, n, 0);
        bool more;

        more = strip_continuation(s, &n, escape);
        sb_add(out, s + i, n - i);
        while (more && next_line(r, &s, &n)) {
                if (is_comment(s, n) || skip_blanks(s, n, 0) == n)
                        continue;
                more = strip_continuation(s, &n, escape);
                if (out->len + n > CONTAINERFILE_MAX_LINE)
                        return cs_error_setx(err, E2BIG,
                                             "%s:%u: an instruction over %zu bytes with its "
                                             "continuation lines; split it",
                                             file, r->line, CONTAINERFILE_MAX_LINE);
                sb_add(out, s, n);
        }
        return out->oom ? cs_error_set(err, ENOMEM, "%s:%u", file, r->line) : 0;
}

int containerfile_parse(const char *text, size_t len, const char *name, struct containerfile *ret,
                        struct cs_error *err)
{
        struct containerfile cf = {.escape = '\\'};
        struct directives d = {.escape = '\\'};
        struct reader rd = {.p = text, .end = text + len};
        const char *nul, *s;
        size_t n;
        int r = 0;

        if (len > CONTAINERFILE_MAX_BYTES)
                return cs_error_setx(err, EFBIG,
                                     "%s is %zu bytes, over the limit of %zu bytes for a "
                                     "Containerfile",
                                     name, len, CONTAINERFILE_MAX_BYTES);
        nul = memchr(text, '\0', len);
        if (nul)
                return cs_error_setx(err, EINVAL,
                                     "%s:%u: a NUL byte; a Containerfile is text (is this the "
                                     "right file?)",
                                     name, nul_line(text, len, nul));
        if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
                rd.p += 3;
        while (r >= 0 && next_line(&rd, &s, &n)) {
                struct strbuf line = {0};
                unsigned first = rd.line;

                if (!d.done) {
                        r = directive(&d, s, n, name, rd.line, err);
                        if (r != 0)
                                continue;
                        d.done = true;
                        cf.escape = d.escape;
                }
                if (is_comment(s, n))
                        continue;
                sb_add(&line, "", 0);
                r = join_instruction(&rd, s, n, cf.escape, &line, name, err);
                if (r >= 0 && skip_blanks(line.s, line.len, 0) < line.len)
                        r = cf_instr_add(&cf, line.s, first, name, err);
                free(line.s);
        }
        if (r < 0) {
                containerfile_free(&cf);
                return r;
        }
        cf.escape = d.escape;
        *ret = cf;
        return 0;
}
