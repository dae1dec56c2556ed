/* The .containerignore / .dockerignore matcher and the globs of COPY sources, as docker
 * (moby/patternmatcher) and Go's filepath.Match define them. Patterns come from the build
 * context: hostile text. They are compiled to a small NFA run over the name's code points,
 * so no pattern makes a match take more than (pattern length x name length) steps. */
#include "build-private.h"

#include "../../common/cleanup.h"
#include "../../common/error.h"
#include "../../common/strv.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum glob_kind {
        G_LIT,   /* one code point */
        G_ONE,   /* `?`: any but '/' */
        G_CLASS, /* `[...]`: ranges[cls .. cls + n) */
        G_STAR,  /* `*`: any run without '/' */
        G_ALL,   /* `**` at the end: anything */
        G_SKIP,  /* `**` elsewhere, part 1: go on at +1 (the loop) or at +2 (nothing) */
        G_DLOOP, /* part 2: any run, then a '/' */
};

struct glob_tok {
        uint8_t kind;
        bool negated;
        uint32_t c; /* G_LIT's code point; G_CLASS's first range */
        uint32_t n; /* G_CLASS's number of ranges */
};

struct build_glob {
        struct glob_tok *tok;
        size_t n;
        uint32_t (*ranges)[2];
        size_t n_ranges;
};

/* One UTF-8 sequence decoded; an invalid byte is itself (as Go's RuneError of width 1,
 * but kept distinct so that two different bytes never compare equal). */
static uint32_t utf8_next(const unsigned char **p)
{
        const unsigned char *s = *p;
        uint32_t c = s[0];
        int len = c < 0x80             ? 1
                  : (c & 0xe0) == 0xc0 ? 2
                  : (c & 0xf0) == 0xe0 ? 3
                  : (c & 0xf8) == 0xf0 ? 4
                                       : 0;

        if (len <= 1) {
                *p = s + 1;
                return len == 1 ? c : 0x80000000u | c;
        }
        c &= 0x7fu >> len;
        for (int i = 1; i < len; i++) {
                if ((s[i] & 0xc0) != 0x80) {
                        *p = s + 1;
                        return 0x80000000u | s[0];
                }
                c = c << 6 | (s[i] & 0x3f);
        }
        *p = s + len;
        return c;
}

static int glob_push(struct build_glob *g, size_t *cap, struct glob_tok t)
{
        if (g->n == *cap) {
                size_t ncap = *cap ? *cap * 2 : 16;
                struct glob_tok *nt = realloc(g->tok, ncap * sizeof(*nt));

                if (!nt)
                        return -ENOMEM;
                g->tok = nt;
                *cap = ncap;
        }
        g->tok[g->n++] = t;
        return 0;
}

static int range_push(struct build_glob *g, size_t *cap, uint32_t lo, uint32_t hi)
{
        if (g->n_ranges == *cap) {
                size_t ncap = *cap ? *cap * 2 : 8;
                uint32_t(*nr)[2] = realloc(g->ranges, ncap * sizeof(*nr));

                if (!nr)
                        return -ENOMEM;
                g->ranges = nr;
                *cap = ncap;
        }
        g->ranges[g->n_ranges][0] = lo;
        g->ranges[g->n_ranges][1] = hi;
        g->n_ranges++;
        return 0;
}

/* A class member (Go's getEsc): not '-' or ']' unescaped, not the end, and something must
 * follow it. */
static bool class_char(const unsigned char **p, uint32_t *ret)
{
        const unsigned char *s = *p;

        if (!*s || *s == '-' || *s == ']')
                return false;
        if (*s == '\\' && !*++s)
                return false;
        *ret = utf8_next(&s);
        if (!*s)
                return false;
        *p = s;
        return true;
}

void build_glob_free(struct build_glob *g)
{
        if (!g)
                return;
        free(g->tok);
        free(g->ranges);
        free(g);
}

int build_glob_compile(const char *pattern, bool doublestar, struct build_glob **ret,
                       struct cs_error *err)
{
        struct build_glob *g = calloc(1, sizeof(*g));
        const unsigned char *p = (const unsigned char *)pattern;
        size_t cap = 0, rcap = 0;
        int r = 0;

        if (!g)
                return cs_error_set(err, ENOMEM, "pattern `%s`", pattern);
        if (strlen(pattern) > BUILD_IGNORE_MAX_LEN) {
                build_glob_free(g);
                return cs_error_setx(err, ENAMETOOLONG,
                                     "a pattern of %zu bytes is longer than the limit of %d",
                                     strlen(pattern), BUILD_IGNORE_MAX_LEN);
        }
        while (*p && r == 0) {
                struct glob_tok t = {.kind = G_LIT};

                if (*p == '*') {
                        p++;
                        t.kind = G_STAR;
                        if (doublestar && *p == '*') {
                                p++;
                                if (*p == '/')
                                        p++; /* a '/' after `**` belongs to it */
                                if (!*p) {
                                        t.kind = G_ALL;
                                } else {
                                        t.kind = G_SKIP;
                                        r = glob_push(g, &cap, t);
                                        t.kind = G_DLOOP;
                                }
                        }
                } else if (*p == '?') {
                        p++;
                        t.kind = G_ONE;
                } else if (*p == '[') {
                        p++;
                        t.kind = G_CLASS;
                        t.c = (uint32_t)g->n_ranges;
                        if (*p == '^') {
                                t.negated = true;
                                p++;
                        }
                        for (;;) {
                                uint32_t lo, hi;

                                if (*p == ']' && t.n > 0) {
                                        p++;
                                        break;
                                }
                                if (!class_char(&p, &lo))
                                        goto bad;
                                hi = lo;
                                if (*p == '-') {
                                        p++;
                                        if (!class_char(&p, &hi))
                                                goto bad;
                                }
                                if ((r = range_push(g, &rcap, lo, hi)) < 0)
                                        break;
                                t.n++;
                        }
                } else {
                        if (*p == '\\' && p[1])
                                p++; /* a trailing `\` stands for itself */
                        t.c = utf8_next(&p);
                }
                if (r == 0)
                        r = glob_push(g, &cap, t);
        }
        if (r < 0) {
                build_glob_free(g);
                return cs_error_set(err, -r, "pattern `%s`", pattern);
        }
        *ret = g;
        return 0;
bad:
        build_glob_free(g);
        return cs_error_setx(err, EINVAL,
                             "pattern `%s` is malformed: a `[` class is not closed or has an "
                             "empty member or range (escape a literal `[` as `\\[`)",
                             pattern);
}

static bool class_has(const struct build_glob *g, const struct glob_tok *t, uint32_t c)
{
        bool in = false;

        for (uint32_t i = 0; i < t->n && !in; i++)
                in = g->ranges[t->c + i][0] <= c && c <= g->ranges[t->c + i][1];
        return in != t->negated;
}

/* The states reachable without consuming: `*`, `**` may match nothing. */
static void glob_closure(const struct build_glob *g, unsigned char *st)
{
        for (size_t i = 0; i < g->n; i++) {
                if (!st[i])
                        continue;
                switch (g->tok[i].kind) {
                case G_STAR:
                case G_ALL:
                        st[i + 1] = 1;
                        break;
                case G_SKIP:
                        st[i + 1] = 1;
                        st[i + 2] = 1;
                        break;
                }
        }
}

bool build_glob_match(const struct build_glob *g, const char *name)
{
        unsigned char small[2][128], *cur, *nxt, *heap = NULL;
        const unsigned char *p = (const unsigned char *)name;
        bool any = true, ok;

        if (g->n + 1 <= sizeof(small[0])) {
                cur = small[0];
                nxt = small[1];
        } else {
                heap = calloc(2, g->n + 1);
                if (!heap)
                        return false;
                cur = heap;
                nxt = heap + g->n + 1;
        }
        memset(cur, 0, g->n + 1);
        cur[0] = 1;
        glob_closure(g, cur);
        while (*p && any) {
                uint32_t c = utf8_next(&p);

                memset(nxt, 0, g->n + 1);
                any = false;
                for (size_t i = 0; i < g->n; i++) {
                        const struct glob_tok *t = &g->tok[i];
                        bool adv = false, stay = false;

                        if (!cur[i])
                                continue;
                        switch (t->kind) {
                        case G_LIT:
                                adv = c == t->c;
                                break;
                        case G_ONE:
                                adv = c != '/';
                                break;
                        case G_CLASS:
                                adv = class_has(g, t, c);
                                break;
                        case G_STAR:
                                stay = c != '/';
                                break;
                        case G_ALL:
                                stay = true;
                                break;
                        case G_DLOOP:
                                stay = true;
                                adv = c == '/';
                                break;
                        }
                        nxt[i] |= stay;
                        nxt[i + 1] |= adv;
                        any |= stay || adv;
                }
                glob_closure(g, nxt);
                unsigned char *tmp = cur;
                cur = nxt;
                nxt = tmp;
        }
        ok = any && cur[g->n];
        free(heap);
        return ok;
}

bool build_glob_has_wildcard(const char *s, size_t len)
{
        for (size_t i = 0; i < len; i++) {
                if (s[i] == '\\')
                        i++;
                else if (s[i] == '*' || s[i] == '?' || s[i] == '[')
                        return true;
        }
        return false;
}

void build_path_clean(char *path)
{
        /* Go's filepath.Clean, in place: the output never runs ahead of the input */
        size_t n = strlen(path), r = 0, w = 0, dotdot = 0;
        bool rooted = path[0] == '/';

        if (rooted) {
                w = r = dotdot = 1;
        }
        while (r < n) {
                if (path[r] == '/') {
                        r++;
                } else if (path[r] == '.' && (r + 1 == n || path[r + 1] == '/')) {
                        r++;
                } else if (path[r] == '.' && path[r + 1] == '.' &&
                           (r + 2 == n || path[r + 2] == '/')) {
                        r += 2;
                        if (w > dotdot) {
                                w--;
                                while (w > dotdot && path[w] != '/')
                                        w--;
                        } else if (!rooted) {
                                if (w > 0)
                                        path[w++] = '/';
                                path[w++] = '.';
                                path[w++] = '.';
                                dotdot = w;
                        }
                } else {
                        if ((rooted && w != 1) || (!rooted && w != 0))
                                path[w++] = '/';
                        for (; r < n && path[r] != '/'; r++)
                                path[w++] = path[r];
                }
        }
        if (w == 0)
                path[w++] = '.';
        path[w] = '\0';
}

/* ---- the ignore file ---- */

struct ignore_pat {
        struct build_glob *g;
        bool exception;
};

struct build_ignore {
        struct ignore_pat *v;
        size_t n;
        bool exceptions;
};

void build_ignore_free(struct build_ignore *m)
{
        if (!m)
                return;
        for (size_t i = 0; i < m->n; i++)
                build_glob_free(m->v[i].g);
        free(m->v);
        free(m);
}

int build_ignore_compile(char *const *patterns, size_t n, struct build_ignore **ret,
                         struct cs_error *err)
{
        struct build_ignore *m = calloc(1, sizeof(*m));
        int r = 0;

        if (!m || (n && !(m->v = calloc(n, sizeof(*m->v))))) {
                free(m);
                return cs_error_set(err, ENOMEM, "the ignore patterns");
        }
        if (n > BUILD_IGNORE_MAX_PATTERNS) {
                build_ignore_free(m);
                return cs_error_setx(err, E2BIG, "more than %d ignore patterns",
                                     BUILD_IGNORE_MAX_PATTERNS);
        }
        for (size_t i = 0; i < n && r == 0; i++) {
                _cleanup_free_ char *p = NULL;
                const char *s = patterns[i];
                size_t len;
                bool exception;

                while (*s == ' ' || (*s >= '\t' && *s <= '\r'))
                        s++;
                len = strlen(s);
                while (len && (s[len - 1] == ' ' || (s[len - 1] >= '\t' && s[len - 1] <= '\r')))
                        len--;
                if (len == 0)
                        continue;
                exception = s[0] == '!';
                if (exception) {
                        s++;
                        len--;
                        while (len && (*s == ' ' || (*s >= '\t' && *s <= '\r'))) {
                                s++;
                                len--;
                        }
                }
                if (exception && len == 0) {
                        r = cs_error_setx(err, EINVAL,
                                          "the ignore pattern `!` names nothing to take back");
                        break;
                }
                if (len > BUILD_IGNORE_MAX_LEN) {
                        r = cs_error_setx(err, ENAMETOOLONG,
                                          "an ignore pattern of %zu bytes is longer than the "
                                          "limit of %d",
                                          len, BUILD_IGNORE_MAX_LEN);
                        break;
                }
                p = strndup(s, len);
                if (!p) {
                        r = cs_error_set(err, ENOMEM, "the ignore patterns");
                        break;
                }
                build_path_clean(p);
                /* moby's ReadAll: a pattern names a path relative to the context */
                r = build_glob_compile(p[0] == '/' && p[1] ? p + 1 : p, true, &m->v[m->n].g, err);
                if (r == 0) {
                        m->v[m->n++].exception = exception;
                        m->exceptions |= exception;
                }
        }
        if (r < 0) {
                build_ignore_free(m);
                return r;
        }
        *ret = m;
        return 0;
}

bool build_ignore_has_exceptions(const struct build_ignore *m)
{
        return m && m->exceptions;
}

/* The pattern matches path or one of its parent directories. */
static bool matches_or_parent(const struct build_glob *g, char *path)
{
        if (build_glob_match(g, path))
                return true;
        for (char *slash = strchr(path, '/'); slash; slash = strchr(slash + 1, '/')) {
                bool hit;

                *slash = '\0';
                hit = build_glob_match(g, path);
                *slash = '/';
                if (hit)
                        return true;
        }
        return false;
}

bool build_ignore_excludes(const struct build_ignore *m, const char *path)
{
        _cleanup_free_ char *buf = NULL;
        bool excluded = false;

        if (!m || m->n == 0)
                return false;
        buf = strdup(path);
        if (!buf)
                return true; /* cannot tell: left out rather than copied */
        for (size_t i = 0; i < m->n; i++) {
                /* an exclusion cannot change an excluded path, an exception an included one */
                if (m->v[i].exception != excluded)
                        continue;
                if (matches_or_parent(m->v[i].g, buf))
                        excluded = !m->v[i].exception;
        }
        return excluded;
}

int build_ignore_parse(const char *text, size_t len, char ***ret, size_t *ret_n,
                       struct cs_error *err)
{
        char **v = NULL;
        size_t n = 0;
        const char *p = text, *end = text + len;

        if (len >= 3 && memcmp(p, "\xef\xbb\xbf", 3) == 0)
                p += 3; /* a UTF-8 byte order mark */
        while (p < end) {
                const char *eol = memchr(p, '\n', (size_t)(end - p));
                size_t l = (size_t)((eol ? eol : end) - p);
                int r = 0;

                if (memchr(p, '\0', l))
                        r = cs_error_setx(err, EINVAL, "the ignore file holds a NUL byte");
                else if (n >= BUILD_IGNORE_MAX_PATTERNS)
                        r = cs_error_setx(err, E2BIG, "the ignore file has more than %d patterns",
                                          BUILD_IGNORE_MAX_PATTERNS);
                /* a comment only where the line starts with `#`, before any trimming */
                else if (l && p[0] != '#' && strv_push(&v, &n, strndup(p, l)) < 0)
                        r = cs_error_set(err, ENOMEM, "the ignore file");
                if (r < 0) {
                        strv_free(&v, &n);
                        return r;
                }
                p = eol ? eol + 1 : end;
        }
        *ret = v;
        *ret_n = n;
        return 0;
}
