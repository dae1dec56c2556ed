/* Containerfile words: splitting as docker's parser does, and expansion of build variables
 * as docker does when it runs an instruction (quotes removed, $VAR and ${VAR...} replaced). */
#include "containerfile.h"
#include "containerfile-private.h"

#include "../../common/error.h"
#include "../../common/strbuf.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int cf_word_next(const char *s, size_t *pos, char escape, size_t *ret_start, size_t *ret_end)
{
        size_t i = *pos, start;

        while (cf_blank(s[i]))
                i++;
        *pos = i;
        if (!s[i])
                return 0;
        start = i;
        while (s[i] && !cf_blank(s[i])) {
                char q = s[i];

                if (q == escape) {
                        i += s[i + 1] ? 2 : 1;
                        continue;
                }
                i++;
                if (q != '\'' && q != '"')
                        continue;
                /* The escape character is special inside "..." only. */
                while (s[i] && s[i] != q)
                        i += q == '"' && s[i] == escape && s[i + 1] ? 2 : 1;
                if (!s[i])
                        return -EINVAL;
                i++;
        }
        *ret_start = start;
        *ret_end = i;
        *pos = i;
        return 1;
}

struct expander {
        const char *s;
        size_t i;
        char escape;
        const char *(*lookup)(void *opaque, const char *name);
        void *opaque;
        unsigned depth;
        struct cs_error *err;
};

static int out_add(struct expander *x, struct strbuf *out, const char *p, size_t n)
{
        if (n > CONTAINERFILE_MAX_EXPANSION - out->len)
                return cs_error_setx(x->err, E2BIG,
                                     "`%.80s` expands to more than %zu bytes; a build variable "
                                     "this large is refused",
                                     x->s, CONTAINERFILE_MAX_EXPANSION);
        sb_add(out, p, n);
        return out->oom ? cs_error_set(x->err, ENOMEM, "expand `%.80s`", x->s) : 0;
}

static int expand_until(struct expander *x, char stop, struct strbuf *out);

/* A name after $: letters, digits and _ not starting with a digit, or only digits. */
static size_t name_len(const char *p)
{
        size_t n = 0;

        if (*p >= '0' && *p <= '9') {
                while (p[n] >= '0' && p[n] <= '9')
                        n++;
                return n;
        }
        while ((p[n] >= 'a' && p[n] <= 'z') || (p[n] >= 'A' && p[n] <= 'Z') || p[n] == '_' ||
               (n > 0 && p[n] >= '0' && p[n] <= '9'))
                n++;
        return n;
}

static const char *lookup_name(struct expander *x, const char *name, size_t n, int *r)
{
        char *z = strndup(name, n);
        const char *v;

        if (!z) {
                *r = cs_error_set(x->err, ENOMEM, "expand `%.80s`", x->s);
                return NULL;
        }
        v = x->lookup ? x->lookup(x->opaque, z) : NULL;
        free(z);
        *r = 0;
        return v;
}

/* ${NAME}, ${NAME:-word} or ${NAME:+word}, from just after the "${". */
static int expand_braced(struct expander *x, struct strbuf *out)
{
        const char *name = x->s + x->i, *v;
        size_t n = name_len(name);
        struct strbuf sub = {0};
        char mod;
        int r;

        x->i += n;
        if (n == 0 || (x->s[x->i] != '}' && x->s[x->i] != ':'))
                return cs_error_setx(x->err, EINVAL,
                                     "`%.80s`: bad substitution: only ${NAME}, ${NAME:-word} "
                                     "and ${NAME:+word} are supported, with a closing }",
                                     x->s);
        v = lookup_name(x, name, n, &r);
        if (r < 0)
                return r;
        if (x->s[x->i] == '}') {
                x->i++;
                return v ? out_add(x, out, v, strlen(v)) : 0;
        }
        mod = x->s[x->i + 1];
        if (mod != '-' && mod != '+')
                return cs_error_setx(x->err, EINVAL,
                                     "`%.80s`: the modifier `:%c` is not supported (only :- "
                                     "and :+)",
                                     x->s, mod ? mod : ' ');
        if (++x->depth > CONTAINERFILE_MAX_NESTING)
                return cs_error_setx(x->err, ELOOP, "`%.80s` nests ${...} deeper than %d levels",
                                     x->s, CONTAINERFILE_MAX_NESTING);
        x->i += 2;
        sb_add(&sub, "", 0);
        r = expand_until(x, '}', &sub);
        x->depth--;
        if (r >= 0 && x->s[x->i] != '}')
                r = cs_error_setx(x->err, EINVAL, "`%.80s`: ${%.*s:%c... has no closing }", x->s,
                                  (int)n, name, mod);
        if (r >= 0) {
                bool set = v && *v;

                x->i++;
                if (mod == '-')
                        r = set ? out_add(x, out, v, strlen(v)) : out_add(x, out, sub.s, sub.len);
                else if (set)
                        r = out_add(x, out, sub.s, sub.len);
        }
        free(sub.s);
        return r;
}

/* From a '$': a variable, or a literal '$' when no name follows. */
static int expand_dollar(struct expander *x, struct strbuf *out)
{
        const char *name;
        const char *v;
        size_t n;
        int r;

        x->i++;
        if (x->s[x->i] == '{') {
                x->i++;
                return expand_braced(x, out);
        }
        name = x->s + x->i;
        n = name_len(name);
        if (n == 0)
                return out_add(x, out, "$", 1);
        x->i += n;
        v = lookup_name(x, name, n, &r);
        if (r < 0 || !v)
                return r;
        return out_add(x, out, v, strlen(v));
}

/* "...": $ expands; the escape character escapes only ", $ and itself. */
static int expand_double_quoted(struct expander *x, struct strbuf *out)
{
        int r = 0;

        x->i++;
        while (r >= 0 && x->s[x->i] != '"') {
                char c = x->s[x->i], next;

                if (!c)
                        return cs_error_setx(x->err, EINVAL, "`%.80s`: unterminated \" quote",
                                             x->s);
                next = x->s[x->i + 1];
                if (c == '$') {
                        r = expand_dollar(x, out);
                        continue;
                }
                if (c == x->escape && (next == '"' || next == '$' || next == x->escape))
                        x->i++;
                r = out_add(x, out, x->s + x->i++, 1);
        }
        x->i++;
        return r;
}

/* The word from x->i to its end, or to an unquoted stop character (left for the caller). */
static int expand_until(struct expander *x, char stop, struct strbuf *out)
{
        int r = 0;

        while (r >= 0 && x->s[x->i] && x->s[x->i] != stop) {
                char c = x->s[x->i];
                const char *close;

                if (c == '\'') {
                        close = strchr(x->s + x->i + 1, '\'');
                        if (!close)
                                return cs_error_setx(x->err, EINVAL,
                                                     "`%.80s`: unterminated ' quote", x->s);
                        r = out_add(x, out, x->s + x->i + 1, (size_t)(close - x->s) - x->i - 1);
                        x->i = (size_t)(close - x->s) + 1;
                } else if (c == '"') {
                        r = expand_double_quoted(x, out);
                } else if (c == '$') {
                        r = expand_dollar(x, out);
                } else if (c == x->escape) {
                        /* An escape at the very end is dropped, as docker does. */
                        if (x->s[++x->i])
                                r = out_add(x, out, x->s + x->i++, 1);
                } else {
                        r = out_add(x, out, x->s + x->i++, 1);
                }
        }
        return r;
}

int containerfile_expand(const char *word, char escape,
                         const char *(*lookup)(void *opaque, const char *name), void *opaque,
                         char **ret, struct cs_error *err)
{
        struct expander x = {
            .s = word, .escape = escape, .lookup = lookup, .opaque = opaque, .err = err};
        struct strbuf out = {0};
        int r;

        sb_add(&out, "", 0);
        r = expand_until(&x, '\0', &out);
        if (r >= 0 && out.oom)
                r = cs_error_set(err, ENOMEM, "expand `%.80s`", word);
        if (r < 0) {
                free(out.s);
                return r;
        }
        *ret = out.s;
        return 0;
}
