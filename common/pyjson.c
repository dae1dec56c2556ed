/* JSON as Python reads it (reference §3: the reference parses with Python's json
 * module and prints with json.dumps). Parses with Python's rules (strict strings, NaN/Infinity
 * accepted, duplicate keys: first position, last value) into cJSON nodes and prints them as
 * json.dumps would. Numbers keep their source text (in valuestring) so an integer of any size
 * prints as written and a float prints as Python's repr. */
#include "pyjson.h"

#include "common/cleanup.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PYJSON_MAX_DEPTH 64
/* Python 3.11 refuses to convert longer integer literals (sys.get_int_max_str_digits). */
#define PY_INT_MAX_DIGITS 4300

/* Code points go into node strings as UTF-8, with two exceptions so that every Python str
 * survives a C string: U+0000 is stored as C0 80 and lone surrogates as their 3-byte form. */
static void sb_codepoint(struct strbuf *b, uint32_t c)
{
        char u[4];

        if (c == 0) {
                sb_add(b, "\xc0\x80", 2);
        } else if (c < 0x80) {
                sb_putc(b, (char)c);
        } else if (c < 0x800) {
                u[0] = (char)(0xc0 | (c >> 6));
                u[1] = (char)(0x80 | (c & 0x3f));
                sb_add(b, u, 2);
        } else if (c < 0x10000) {
                u[0] = (char)(0xe0 | (c >> 12));
                u[1] = (char)(0x80 | ((c >> 6) & 0x3f));
                u[2] = (char)(0x80 | (c & 0x3f));
                sb_add(b, u, 3);
        } else {
                u[0] = (char)(0xf0 | (c >> 18));
                u[1] = (char)(0x80 | ((c >> 12) & 0x3f));
                u[2] = (char)(0x80 | ((c >> 6) & 0x3f));
                u[3] = (char)(0x80 | (c & 0x3f));
                sb_add(b, u, 4);
        }
}

/* Decode one UTF-8 sequence at s (len bytes left). Returns its length, 0 when invalid.
 * surrogates: accept encoded surrogates (Python's 'surrogatepass'); C0 80 is accepted
 * only when internal is set (our own encoding of U+0000). */
size_t pyjson_utf8_decode(const unsigned char *s, size_t len, bool surrogates, bool internal,
                          uint32_t *ret)
{
        uint32_t c;
        size_t n, i;

        if (s[0] < 0x80) {
                *ret = s[0];
                return 1;
        }
        if (internal && len >= 2 && s[0] == 0xc0 && s[1] == 0x80) {
                *ret = 0;
                return 2;
        }
        if (s[0] >= 0xc2 && s[0] <= 0xdf) {
                n = 2;
                c = s[0] & 0x1f;
        } else if (s[0] >= 0xe0 && s[0] <= 0xef) {
                n = 3;
                c = s[0] & 0x0f;
        } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
                n = 4;
                c = s[0] & 0x07;
        } else {
                return 0;
        }
        if (len < n)
                return 0;
        for (i = 1; i < n; i++) {
                if ((s[i] & 0xc0) != 0x80)
                        return 0;
                c = (c << 6) | (s[i] & 0x3f);
        }
        if ((n == 3 && c < 0x800) || (n == 4 && (c < 0x10000 || c > 0x10ffff)))
                return 0;
        if (c >= 0xd800 && c <= 0xdfff && !surrogates)
                return 0;
        *ret = c;
        return n;
}

/* ---- parser: Python's json.loads grammar ---- */

static cJSON *parse_value(struct pyjson_parser *ps, int depth);

static void skip_ws(struct pyjson_parser *ps)
{
        while (ps->p < ps->end &&
               (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
                ps->p++;
}

static cJSON *parse_fail(struct pyjson_parser *ps, const char *why)
{
        if (!ps->why)
                ps->why = why;
        return NULL;
}

static int hex4(const unsigned char *p, const unsigned char *end, uint32_t *ret)
{
        uint32_t v = 0;

        if (end - p < 4)
                return -1;
        for (int i = 0; i < 4; i++) {
                int d;

                if (p[i] >= '0' && p[i] <= '9')
                        d = p[i] - '0';
                else if (p[i] >= 'a' && p[i] <= 'f')
                        d = p[i] - 'a' + 10;
                else if (p[i] >= 'A' && p[i] <= 'F')
                        d = p[i] - 'A' + 10;
                else
                        return -1;
                v = v * 16 + (uint32_t)d;
        }
        *ret = v;
        return 0;
}

/* After the opening quote; on success *ret is a heap string (internal encoding). */
static int parse_string(struct pyjson_parser *ps, char **ret)
{
        struct strbuf b = {0};

        sb_add(&b, "", 0);
        for (;;) {
                uint32_t c;
                size_t n;

                if (ps->p >= ps->end) {
                        parse_fail(ps, "unterminated string");
                        goto fail;
                }
                if (*ps->p == '"') {
                        ps->p++;
                        break;
                }
                if (*ps->p < 0x20) {
                        parse_fail(ps, "invalid control character in a string");
                        goto fail;
                }
                if (*ps->p != '\\') {
                        n = pyjson_utf8_decode(ps->p, (size_t)(ps->end - ps->p), ps->surrogatepass,
                                               false, &c);
                        if (n == 0) {
                                parse_fail(ps, "invalid UTF-8");
                                goto fail;
                        }
                        sb_add(&b, (const char *)ps->p, n);
                        ps->p += n;
                        continue;
                }
                ps->p++;
                if (ps->p >= ps->end) {
                        parse_fail(ps, "unterminated string");
                        goto fail;
                }
                switch (*ps->p++) {
                case '"':
                        sb_putc(&b, '"');
                        break;
                case '\\':
                        sb_putc(&b, '\\');
                        break;
                case '/':
                        sb_putc(&b, '/');
                        break;
                case 'b':
                        sb_putc(&b, '\b');
                        break;
                case 'f':
                        sb_putc(&b, '\f');
                        break;
                case 'n':
                        sb_putc(&b, '\n');
                        break;
                case 'r':
                        sb_putc(&b, '\r');
                        break;
                case 't':
                        sb_putc(&b, '\t');
                        break;
                case 'u':
                        if (hex4(ps->p, ps->end, &c) < 0) {
                                parse_fail(ps, "invalid \\u escape");
                                goto fail;
                        }
                        ps->p += 4;
                        /* A high surrogate followed by an escaped low one is one code
                         * point; any other surrogate stays alone, as in Python. */
                        if (c >= 0xd800 && c <= 0xdbff && ps->end - ps->p >= 6 &&
                            ps->p[0] == '\\' && ps->p[1] == 'u') {
                                uint32_t lo;

                                if (hex4(ps->p + 2, ps->end, &lo) == 0 && lo >= 0xdc00 &&
                                    lo <= 0xdfff) {
                                        c = 0x10000 + ((c - 0xd800) << 10) + (lo - 0xdc00);
                                        ps->p += 6;
                                }
                        }
                        sb_codepoint(&b, c);
                        break;
                default:
                        parse_fail(ps, "invalid escape");
                        goto fail;
                }
        }
        if (b.oom) {
                ps->oom = true;
                goto fail;
        }
        *ret = b.s;
        return 0;
fail:
        free(b.s);
        return -1;
}

static cJSON *number_node(struct pyjson_parser *ps, const unsigned char *lex, size_t n, double v)
{
        cJSON *node = cJSON_CreateNumber(v);
        char *text = cJSON_malloc(n + 1);

        if (!node || !text) {
                cJSON_Delete(node);
                cJSON_free(text);
                ps->oom = true;
                return NULL;
        }
        memcpy(text, lex, n);
        text[n] = '\0';
        node->valuestring = text; /* freed by cJSON_Delete */
        return node;
}

bool pyjson_is_digit(unsigned char c)
{
        return c >= '0' && c <= '9';
}

static cJSON *parse_number(struct pyjson_parser *ps)
{
        const unsigned char *s = ps->p, *q = ps->p;
        size_t int_digits = 0;
        bool is_float = false;
        char buf[512];
        char *heap = NULL;
        cJSON *node;
        double v;

        if (q < ps->end && *q == '-')
                q++;
        if (q >= ps->end || !pyjson_is_digit(*q))
                return parse_fail(ps, "expecting a value");
        if (*q == '0') {
                q++;
                int_digits = 1;
        } else {
                while (q < ps->end && pyjson_is_digit(*q)) {
                        q++;
                        int_digits++;
                }
        }
        if (q + 1 < ps->end && *q == '.' && pyjson_is_digit(q[1])) {
                is_float = true;
                q++;
                while (q < ps->end && pyjson_is_digit(*q))
                        q++;
        }
        if (q < ps->end && (*q == 'e' || *q == 'E')) {
                const unsigned char *e = q + 1;

                if (e < ps->end && (*e == '+' || *e == '-'))
                        e++;
                if (e < ps->end && pyjson_is_digit(*e)) {
                        is_float = true;
                        q = e;
                        while (q < ps->end && pyjson_is_digit(*q))
                                q++;
                }
        }
        if (!is_float && int_digits > PY_INT_MAX_DIGITS)
                return parse_fail(ps, "integer longer than 4300 digits");
        ps->p = q;
        if ((size_t)(q - s) < sizeof(buf)) {
                memcpy(buf, s, (size_t)(q - s));
                buf[q - s] = '\0';
                v = strtod(buf, NULL);
        } else {
                heap = strndup((const char *)s, (size_t)(q - s));
                if (!heap) {
                        ps->oom = true;
                        return NULL;
                }
                v = strtod(heap, NULL);
                free(heap);
        }
        node = number_node(ps, s, (size_t)(q - s), v);
        return node;
}

static bool take_word(struct pyjson_parser *ps, const char *w)
{
        size_t n = strlen(w);

        if ((size_t)(ps->end - ps->p) >= n && memcmp(ps->p, w, n) == 0) {
                ps->p += n;
                return true;
        }
        return false;
}

static cJSON *parse_container(struct pyjson_parser *ps, int depth, bool object)
{
        cJSON *node = object ? cJSON_CreateObject() : cJSON_CreateArray();

        if (!node) {
                ps->oom = true;
                return NULL;
        }
        if (depth >= PYJSON_MAX_DEPTH) {
                ps->too_deep = true;
                parse_fail(ps, "nested deeper than 64 levels");
                goto fail;
        }
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == (object ? '}' : ']')) {
                ps->p++;
                return node;
        }
        for (;;) {
                char *key = NULL;
                cJSON *item;

                if (object) {
                        skip_ws(ps);
                        if (ps->p >= ps->end || *ps->p != '"') {
                                parse_fail(ps, "expecting a property name in double quotes");
                                goto fail;
                        }
                        ps->p++;
                        if (parse_string(ps, &key) < 0)
                                goto fail;
                        skip_ws(ps);
                        if (ps->p >= ps->end || *ps->p != ':') {
                                free(key);
                                parse_fail(ps, "expecting ':' delimiter");
                                goto fail;
                        }
                        ps->p++;
                }
                item = parse_value(ps, depth + 1);
                if (!item) {
                        free(key);
                        goto fail;
                }
                /* Duplicate keys are all kept here; printing and lookups apply Python's
                 * dict rule (first position, last value). */
                if (object ? !cJSON_AddItemToObject(node, key, item)
                           : !cJSON_AddItemToArray(node, item)) {
                        free(key);
                        cJSON_Delete(item);
                        ps->oom = true;
                        goto fail;
                }
                free(key);
                skip_ws(ps);
                if (ps->p < ps->end && *ps->p == ',') {
                        ps->p++;
                        continue;
                }
                if (ps->p < ps->end && *ps->p == (object ? '}' : ']')) {
                        ps->p++;
                        return node;
                }
                parse_fail(ps, object ? "expecting ',' delimiter or '}'"
                                      : "expecting ',' delimiter or ']'");
                goto fail;
        }
fail:
        cJSON_Delete(node);
        return NULL;
}

static cJSON *parse_value(struct pyjson_parser *ps, int depth)
{
        cJSON *node;

        skip_ws(ps);
        if (ps->p >= ps->end)
                return parse_fail(ps, "expecting a value");
        switch (*ps->p) {
        case '{':
                ps->p++;
                return parse_container(ps, depth, true);
        case '[':
                ps->p++;
                return parse_container(ps, depth, false);
        case '"': {
                char *s = NULL;

                ps->p++;
                if (parse_string(ps, &s) < 0)
                        return NULL;
                node = cJSON_CreateString(s);
                free(s);
                if (!node)
                        ps->oom = true;
                return node;
        }
        default:
                break;
        }
        if (take_word(ps, "true"))
                node = cJSON_CreateTrue();
        else if (take_word(ps, "false"))
                node = cJSON_CreateFalse();
        else if (take_word(ps, "null"))
                node = cJSON_CreateNull();
        else if (take_word(ps, "NaN"))
                return number_node(ps, (const unsigned char *)"NaN", 3, NAN);
        else if (take_word(ps, "Infinity"))
                return number_node(ps, (const unsigned char *)"Infinity", 8, INFINITY);
        else if (take_word(ps, "-Infinity"))
                return number_node(ps, (const unsigned char *)"-Infinity", 9, -INFINITY);
        else
                return parse_number(ps);
        if (!node)
                ps->oom = true;
        return node;
}

/* Parse a whole document. On a syntax error *ret is NULL and ps->why says why. */
int pyjson_parse(struct pyjson_parser *ps, cJSON **ret)
{
        cJSON *root;

        root = parse_value(ps, 0);
        if (root) {
                skip_ws(ps);
                if (ps->p != ps->end) {
                        cJSON_Delete(root);
                        root = NULL;
                        parse_fail(ps, "extra data");
                }
        }
        if (ps->oom) {
                cJSON_Delete(root);
                return -ENOMEM;
        }
        *ret = root;
        return 0;
}

void pyjson_error_position(const struct pyjson_parser *ps, int *ret_line, int *ret_col)
{
        const unsigned char *q;
        int line = 1, col = 1;

        for (q = ps->start; q < ps->p && q < ps->end; q++) {
                if (*q == '\n') {
                        line++;
                        col = 1;
                } else {
                        col++;
                }
        }
        *ret_line = line;
        *ret_col = col;
}
