/* The TOML subset of toml.h: a cursor over the buffer, one header or key at a time. */
#include "toml.h"

#include "../../common/error.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_MAX 512u

struct cur {
        const char *p, *end;
        const char *file;
        unsigned line;
};

static int bad(struct cur *c, struct cs_error *err, const char *why)
{
        return cs_error_setx(err, EINVAL,
                             "`%s` line %u: %s (registries.conf is TOML: see "
                             "containers-registries.conf(5))",
                             c->file, c->line, why);
}

static void skip_ws(struct cur *c)
{
        while (c->p < c->end && (*c->p == ' ' || *c->p == '\t'))
                c->p++;
}

/* Spaces, comments and newlines (inside an array, or between statements). */
static void skip_blank(struct cur *c)
{
        for (;;) {
                skip_ws(c);
                if (c->p < c->end && *c->p == '#')
                        while (c->p < c->end && *c->p != '\n')
                                c->p++;
                if (c->p < c->end && *c->p == '\r' && c->p + 1 < c->end && c->p[1] == '\n')
                        c->p++;
                if (c->p < c->end && *c->p == '\n') {
                        c->p++;
                        c->line++;
                        continue;
                }
                return;
        }
}

/* What may follow a statement: spaces, a comment, the end of the line. */
static int end_of_line(struct cur *c, struct cs_error *err)
{
        skip_ws(c);
        if (c->p < c->end && *c->p == '#')
                while (c->p < c->end && *c->p != '\n')
                        c->p++;
        if (c->p < c->end && *c->p == '\r')
                c->p++;
        if (c->p < c->end && *c->p != '\n')
                return bad(c, err, "unexpected text after the value");
        return 0;
}

static int put_utf8(char *out, size_t *o, size_t max, uint32_t cp)
{
        char b[4];
        size_t n;

        if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
                return -1;
        if (cp < 0x80) {
                b[0] = (char)cp;
                n = 1;
        } else if (cp < 0x800) {
                b[0] = (char)(0xC0 | (cp >> 6));
                b[1] = (char)(0x80 | (cp & 0x3F));
                n = 2;
        } else if (cp < 0x10000) {
                b[0] = (char)(0xE0 | (cp >> 12));
                b[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
                b[2] = (char)(0x80 | (cp & 0x3F));
                n = 3;
        } else {
                b[0] = (char)(0xF0 | (cp >> 18));
                b[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
                b[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
                b[3] = (char)(0x80 | (cp & 0x3F));
                n = 4;
        }
        if (*o + n >= max)
                return -2;
        memcpy(out + *o, b, n);
        *o += n;
        return 0;
}

/* A "basic" or 'literal' string on one line, into out (max bytes with the NUL). */
static int string(struct cur *c, char *out, size_t max, struct cs_error *err)
{
        char q = *c->p;
        size_t o = 0;

        if (c->end - c->p >= 3 && c->p[1] == q && c->p[2] == q)
                return bad(c, err, "multi-line strings are not supported here");
        for (c->p++;; c->p++) {
                unsigned char ch;

                if (c->p >= c->end || *c->p == '\n')
                        return bad(c, err, "a string is not closed on its line");
                ch = (unsigned char)*c->p;
                if (ch == (unsigned char)q) {
                        c->p++;
                        break;
                }
                if ((ch < 0x20 && ch != '\t') || ch == 0x7F)
                        return bad(c, err, "a control character in a string");
                if (ch == '\\' && q == '"') {
                        uint32_t cp = 0;
                        int digits = 0, r;

                        if (++c->p >= c->end)
                                return bad(c, err, "a string is not closed on its line");
                        switch (*c->p) {
                        case 'b':
                                ch = '\b';
                                break;
                        case 't':
                                ch = '\t';
                                break;
                        case 'n':
                                ch = '\n';
                                break;
                        case 'f':
                                ch = '\f';
                                break;
                        case 'r':
                                ch = '\r';
                                break;
                        case '"':
                                ch = '"';
                                break;
                        case '\\':
                                ch = '\\';
                                break;
                        case 'u':
                                digits = 4;
                                break;
                        case 'U':
                                digits = 8;
                                break;
                        default:
                                return bad(c, err, "an unknown escape in a string");
                        }
                        if (!digits) {
                                if (o + 1 >= max)
                                        return bad(c, err, "a string is too long");
                                out[o++] = (char)ch;
                                continue;
                        }
                        for (int i = 0; i < digits; i++) {
                                if (++c->p >= c->end || !isxdigit((unsigned char)*c->p))
                                        return bad(c, err, "a \\u escape needs hex digits");
                                cp = cp * 16 +
                                     (uint32_t)(isdigit((unsigned char)*c->p)
                                                    ? *c->p - '0'
                                                    : (tolower((unsigned char)*c->p) - 'a' + 10));
                        }
                        r = put_utf8(out, &o, max, cp);
                        if (r == -1)
                                return bad(c, err, "a \\u escape names no character");
                        if (r < 0)
                                return bad(c, err, "a string is too long");
                        continue;
                }
                if (o + 1 >= max)
                        return bad(c, err, "a string is too long");
                out[o++] = (char)ch;
        }
        out[o] = '\0';
        return 0;
}

static bool bare_key_char(char ch)
{
        return isalnum((unsigned char)ch) || ch == '_' || ch == '-';
}

/* key(.key)*, each bare or quoted, joined by '.', up to stop (not consumed). */
static int key_path(struct cur *c, char *out, size_t max, struct cs_error *err)
{
        size_t o = 0;

        for (;;) {
                char part[KEY_MAX];
                size_t n;

                skip_ws(c);
                if (c->p < c->end && (*c->p == '"' || *c->p == '\'')) {
                        int r = string(c, part, sizeof(part), err);
                        if (r < 0)
                                return r;
                } else {
                        const char *s = c->p;

                        while (c->p < c->end && bare_key_char(*c->p))
                                c->p++;
                        if (c->p == s)
                                return bad(c, err,
                                           "a key is missing or has a character outside "
                                           "A-Z a-z 0-9 _ - (quote it)");
                        if ((size_t)(c->p - s) >= sizeof(part))
                                return bad(c, err, "a key is too long");
                        memcpy(part, s, (size_t)(c->p - s));
                        part[c->p - s] = '\0';
                }
                n = strlen(part);
                if (o + n + 2 >= max)
                        return bad(c, err, "a key is too long");
                if (o)
                        out[o++] = '.';
                memcpy(out + o, part, n + 1);
                o += n;
                skip_ws(c);
                if (c->p < c->end && *c->p == '.') {
                        c->p++;
                        continue;
                }
                return 0;
        }
}

static void value_free(struct toml_value *v)
{
        for (size_t i = 0; i < v->n; i++)
                free(v->items[i]);
        free(v->items);
        v->items = NULL;
        v->n = 0;
}

static int value(struct cur *c, struct toml_value *v, char *sbuf, struct cs_error *err)
{
        const char *s = c->p;

        if (c->p >= c->end || *c->p == '\n' || *c->p == '#')
                return bad(c, err, "a key has no value");
        if (*c->p == '"' || *c->p == '\'') {
                v->type = TOML_STRING;
                v->str = sbuf;
                return string(c, sbuf, TOML_STRING_MAX, err);
        }
        if (*c->p == '[') {
                v->type = TOML_ARRAY;
                c->p++;
                for (;;) {
                        char **nv;
                        int r;

                        skip_blank(c);
                        if (c->p < c->end && *c->p == ']') {
                                c->p++;
                                return 0;
                        }
                        if (c->p >= c->end || (*c->p != '"' && *c->p != '\''))
                                return bad(c, err, "only arrays of strings are supported here");
                        if (v->n >= TOML_ARRAY_MAX)
                                return bad(c, err, "an array has too many items");
                        r = string(c, sbuf, TOML_STRING_MAX, err);
                        if (r < 0)
                                return r;
                        nv = realloc(v->items, (v->n + 1) * sizeof(*nv));
                        if (!nv)
                                return cs_error_set(err, ENOMEM, "%s", c->file);
                        v->items = nv;
                        if (!(v->items[v->n] = strdup(sbuf)))
                                return cs_error_set(err, ENOMEM, "%s", c->file);
                        v->n++;
                        skip_blank(c);
                        if (c->p < c->end && *c->p == ',') {
                                c->p++;
                                continue;
                        }
                        skip_blank(c);
                        if (c->p < c->end && *c->p == ']') {
                                c->p++;
                                return 0;
                        }
                        return bad(c, err,
                                   "an array's items are separated by commas and it "
                                   "ends with ]");
                }
        }
        if (*c->p == '{')
                return bad(c, err, "inline tables are not supported here: use a [table]");
        while (c->p < c->end && (isalnum((unsigned char)*c->p) || strchr("+-_.:", *c->p)))
                c->p++;
        if ((size_t)(c->p - s) == 4 && strncmp(s, "true", 4) == 0) {
                v->type = TOML_BOOL;
                v->b = true;
                return 0;
        }
        if ((size_t)(c->p - s) == 5 && strncmp(s, "false", 5) == 0) {
                v->type = TOML_BOOL;
                v->b = false;
                return 0;
        }
        {
                char num[32], *e;
                size_t n = 0;

                for (const char *q = s; q < c->p; q++)
                        if (*q != '_' && n + 1 < sizeof(num))
                                num[n++] = *q;
                num[n] = '\0';
                errno = 0;
                v->i = strtoll(num, &e, 10);
                if (n == 0 || (size_t)(c->p - s) >= sizeof(num) || *e || errno ||
                    !(isdigit((unsigned char)num[0]) || num[0] == '+' || num[0] == '-'))
                        return bad(c, err,
                                   "a value that is not a string, a boolean, an integer "
                                   "or an array of strings");
                v->type = TOML_INT;
        }
        return 0;
}

int toml_parse(const char *buf, size_t len, const char *file, const struct toml_handler *h,
               struct cs_error *err)
{
        struct cur c = {.p = buf, .end = buf + len, .file = file, .line = 1};
        char *sbuf;
        int r = 0;

        if (len > TOML_FILE_MAX)
                return cs_error_setx(err, EFBIG, "`%s` is larger than %u bytes", file,
                                     TOML_FILE_MAX);
        if (memchr(buf, '\0', len))
                return cs_error_setx(err, EINVAL, "`%s` holds a NUL byte: it is not TOML text",
                                     file);
        sbuf = malloc(TOML_STRING_MAX);
        if (!sbuf)
                return cs_error_set(err, ENOMEM, "%s", file);
        for (;;) {
                char key[KEY_MAX];
                unsigned line;

                skip_blank(&c);
                if (c.p >= c.end)
                        break;
                line = c.line;
                if (*c.p == '[') {
                        bool array = c.p + 1 < c.end && c.p[1] == '[';

                        c.p += array ? 2 : 1;
                        r = key_path(&c, key, sizeof(key), err);
                        if (r < 0)
                                break;
                        if (c.p >= c.end || *c.p != ']' ||
                            (array && (c.p + 1 >= c.end || c.p[1] != ']'))) {
                                r = bad(&c, err,
                                        array ? "a [[table]] header is not closed"
                                              : "a [table] header is not closed");
                                break;
                        }
                        c.p += array ? 2 : 1;
                        r = end_of_line(&c, err);
                        if (r == 0 && h->table)
                                r = h->table(h->opaque, key, array, line, err);
                } else {
                        struct toml_value v = {0};

                        r = key_path(&c, key, sizeof(key), err);
                        if (r < 0)
                                break;
                        if (c.p >= c.end || *c.p != '=') {
                                r = bad(&c, err, "a key is not followed by =");
                                break;
                        }
                        c.p++;
                        skip_ws(&c);
                        r = value(&c, &v, sbuf, err);
                        if (r == 0)
                                r = end_of_line(&c, err);
                        if (r == 0 && h->key)
                                r = h->key(h->opaque, key, &v, line, err);
                        value_free(&v);
                }
                if (r < 0)
                        break;
        }
        free(sbuf);
        return r < 0 ? r : 0;
}
