/* Settings filtering (reference §3). The reference parses with Python's json module and
 * prints with json.dumps, so this file parses JSON with Python's rules (strict strings,
 * NaN/Infinity accepted, duplicate keys: first position, last value) into cJSON nodes and
 * prints them as json.dumps would. Numbers keep their source text (in valuestring) so an
 * integer of any size prints as written and a float prints as Python's repr. */
#include "settings.h"

#include "common/cleanup.h"
#include "common/error.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SETTINGS_MAX_BYTES ((size_t)4 << 20)
#define SETTINGS_MAX_DEPTH 64
/* Python 3.11 refuses to convert longer integer literals (sys.get_int_max_str_digits). */
#define PY_INT_MAX_DIGITS 4300

const char *const settings_sandbox_deny_prefixes[4] = {
    "Bash(sudo",
    "Read(~/.ssh",
    "Edit(~/.ssh",
    "Read(~/.aws",
};

/* ---- growable output buffer ---- */

struct strbuf {
        char *s;
        size_t len, cap;
        bool oom;
};

static void sb_add(struct strbuf *b, const char *s, size_t n)
{
        if (b->oom)
                return;
        if (b->len + n + 1 > b->cap) {
                size_t cap = b->cap ? b->cap : 256;
                char *ns;

                while (cap < b->len + n + 1)
                        cap *= 2;
                ns = realloc(b->s, cap);
                if (!ns) {
                        b->oom = true;
                        return;
                }
                b->s = ns;
                b->cap = cap;
        }
        memcpy(b->s + b->len, s, n);
        b->len += n;
        b->s[b->len] = '\0';
}

static void sb_puts(struct strbuf *b, const char *s)
{
        sb_add(b, s, strlen(s));
}

static void sb_putc(struct strbuf *b, char c)
{
        sb_add(b, &c, 1);
}

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
static size_t utf8_decode(const unsigned char *s, size_t len, bool surrogates, bool internal,
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

struct parser {
        const unsigned char *start, *p, *end;
        bool surrogatepass; /* bytes input, decoded as json.loads(bytes) does */
        const char *why;    /* syntax error; NULL while none */
        bool too_deep, oom;
};

static cJSON *parse_value(struct parser *ps, int depth);

static void skip_ws(struct parser *ps)
{
        while (ps->p < ps->end &&
               (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
                ps->p++;
}

static cJSON *parse_fail(struct parser *ps, const char *why)
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
static int parse_string(struct parser *ps, char **ret)
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
                        n = utf8_decode(ps->p, (size_t)(ps->end - ps->p), ps->surrogatepass, false,
                                        &c);
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

static cJSON *number_node(struct parser *ps, const unsigned char *lex, size_t n, double v)
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

static bool is_digit(unsigned char c)
{
        return c >= '0' && c <= '9';
}

static cJSON *parse_number(struct parser *ps)
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
        if (q >= ps->end || !is_digit(*q))
                return parse_fail(ps, "expecting a value");
        if (*q == '0') {
                q++;
                int_digits = 1;
        } else {
                while (q < ps->end && is_digit(*q)) {
                        q++;
                        int_digits++;
                }
        }
        if (q + 1 < ps->end && *q == '.' && is_digit(q[1])) {
                is_float = true;
                q++;
                while (q < ps->end && is_digit(*q))
                        q++;
        }
        if (q < ps->end && (*q == 'e' || *q == 'E')) {
                const unsigned char *e = q + 1;

                if (e < ps->end && (*e == '+' || *e == '-'))
                        e++;
                if (e < ps->end && is_digit(*e)) {
                        is_float = true;
                        q = e;
                        while (q < ps->end && is_digit(*q))
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

static bool take_word(struct parser *ps, const char *w)
{
        size_t n = strlen(w);

        if ((size_t)(ps->end - ps->p) >= n && memcmp(ps->p, w, n) == 0) {
                ps->p += n;
                return true;
        }
        return false;
}

static cJSON *parse_container(struct parser *ps, int depth, bool object)
{
        cJSON *node = object ? cJSON_CreateObject() : cJSON_CreateArray();

        if (!node) {
                ps->oom = true;
                return NULL;
        }
        if (depth >= SETTINGS_MAX_DEPTH) {
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

static cJSON *parse_value(struct parser *ps, int depth)
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
static int parse_document(struct parser *ps, cJSON **ret)
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

static void error_position(const struct parser *ps, int *ret_line, int *ret_col)
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

/* ---- Python dict semantics over cJSON objects ---- */

/* The value Python's dict holds for key: the last duplicate. */
static cJSON *member_get(const cJSON *obj, const char *key)
{
        cJSON *found = NULL, *c;

        if (!cJSON_IsObject(obj))
                return NULL;
        for (c = obj->child; c; c = c->next)
                if (c->string && strcmp(c->string, key) == 0)
                        found = c;
        return found;
}

struct member_ref {
        const char *key;
        size_t index;
};

static int member_ref_cmp(const void *a, const void *b)
{
        const struct member_ref *x = a, *y = b;
        int r = strcmp(x->key, y->key);

        if (r != 0)
                return r;
        return x->index < y->index ? -1 : x->index > y->index;
}

/* The members as a Python dict holds them: for each distinct key, in order of its first
 * occurrence, *ret_keys[i] (the first node, for its key) and *ret_vals[i] (the last). */
static int object_members(const cJSON *obj, cJSON ***ret_keys, cJSON ***ret_vals, size_t *ret_n)
{
        _cleanup_free_ struct member_ref *refs = NULL;
        _cleanup_free_ cJSON **nodes = NULL;
        _cleanup_free_ cJSON **vals_at = NULL;
        cJSON **keys, **vals, *c;
        size_t n = 0, i, j, m = 0;

        for (c = obj->child; c; c = c->next)
                n++;
        nodes = calloc(n + 1, sizeof(*nodes));
        refs = calloc(n + 1, sizeof(*refs));
        vals_at = calloc(n + 1, sizeof(*vals_at));
        keys = calloc(n + 1, sizeof(*keys));
        vals = calloc(n + 1, sizeof(*vals));
        if (!nodes || !refs || !vals_at || !keys || !vals) {
                free(keys);
                free(vals);
                return -ENOMEM;
        }
        for (i = 0, c = obj->child; c; c = c->next, i++) {
                nodes[i] = c;
                refs[i].key = c->string ? c->string : "";
                refs[i].index = i;
        }
        if (n > 1)
                qsort(refs, n, sizeof(*refs), member_ref_cmp);
        for (i = 0; i < n; i = j) {
                for (j = i + 1; j < n && strcmp(refs[j].key, refs[i].key) == 0; j++)
                        ;
                vals_at[refs[i].index] = nodes[refs[j - 1].index];
        }
        for (i = 0; i < n; i++) {
                if (!vals_at[i])
                        continue;
                keys[m] = nodes[i];
                vals[m] = vals_at[i];
                m++;
        }
        *ret_keys = keys;
        *ret_vals = vals;
        *ret_n = m;
        return 0;
}

/* ---- printing as json.dumps ---- */

static void print_string(struct strbuf *b, const char *s)
{
        const unsigned char *p = (const unsigned char *)s;
        size_t len = strlen(s);
        char esc[16];

        sb_putc(b, '"');
        while (len > 0) {
                uint32_t c;
                size_t n = utf8_decode(p, len, true, true, &c);

                if (n == 0) { /* cannot happen for parsed input; keep the byte visible */
                        c = 0xfffd;
                        n = 1;
                }
                p += n;
                len -= n;
                switch (c) {
                case '"':
                        sb_puts(b, "\\\"");
                        continue;
                case '\\':
                        sb_puts(b, "\\\\");
                        continue;
                case '\n':
                        sb_puts(b, "\\n");
                        continue;
                case '\r':
                        sb_puts(b, "\\r");
                        continue;
                case '\t':
                        sb_puts(b, "\\t");
                        continue;
                case '\b':
                        sb_puts(b, "\\b");
                        continue;
                case '\f':
                        sb_puts(b, "\\f");
                        continue;
                default:
                        break;
                }
                if (c >= 0x20 && c <= 0x7e) {
                        sb_putc(b, (char)c);
                } else if (c < 0x10000) {
                        snprintf(esc, sizeof(esc), "\\u%04x", c);
                        sb_puts(b, esc);
                } else {
                        c -= 0x10000;
                        snprintf(esc, sizeof(esc), "\\u%04x\\u%04x", 0xd800 + (c >> 10),
                                 0xdc00 + (c & 0x3ff));
                        sb_puts(b, esc);
                }
        }
        sb_putc(b, '"');
}

/* repr(float): the shortest digits that read back to the same double, in fixed notation
 * when the decimal exponent is in [-4, 16), else d.ddde±XX. */
static void print_float(struct strbuf *b, double v)
{
        char tmp[64], digits[32], out[64];
        int prec, exp10, nd = 0, decpt;
        char *e, *q;
        size_t o = 0;

        if (isnan(v)) {
                sb_puts(b, "NaN");
                return;
        }
        if (isinf(v)) {
                sb_puts(b, v < 0 ? "-Infinity" : "Infinity");
                return;
        }
        if (v == 0) {
                sb_puts(b, signbit(v) ? "-0.0" : "0.0");
                return;
        }
        for (prec = 1; prec <= 17; prec++) {
                snprintf(tmp, sizeof(tmp), "%.*e", prec - 1, v);
                if (strtod(tmp, NULL) == v)
                        break;
        }
        e = strchr(tmp, 'e');
        exp10 = atoi(e + 1);
        for (q = tmp; q < e; q++)
                if (is_digit((unsigned char)*q))
                        digits[nd++] = *q;
        while (nd > 1 && digits[nd - 1] == '0')
                nd--;
        digits[nd] = '\0';
        decpt = exp10 + 1;
        if (v < 0)
                out[o++] = '-';
        if (decpt > -4 && decpt <= 16) {
                int k;

                if (decpt <= 0) {
                        out[o++] = '0';
                        out[o++] = '.';
                        for (k = 0; k < -decpt; k++)
                                out[o++] = '0';
                        for (k = 0; k < nd; k++)
                                out[o++] = digits[k];
                } else {
                        for (k = 0; k < decpt; k++)
                                out[o++] = k < nd ? digits[k] : '0';
                        out[o++] = '.';
                        if (decpt >= nd)
                                out[o++] = '0';
                        for (k = decpt; k < nd; k++)
                                out[o++] = digits[k];
                }
        } else {
                o += (size_t)snprintf(out + o, sizeof(out) - o, "%c%s%se%c%02d", digits[0],
                                      nd > 1 ? "." : "", digits + 1, decpt - 1 < 0 ? '-' : '+',
                                      abs(decpt - 1));
        }
        out[o] = '\0';
        sb_puts(b, out);
}

static void print_number(struct strbuf *b, const cJSON *node)
{
        const char *lex = node->valuestring;

        if (!lex) {
                print_float(b, node->valuedouble);
                return;
        }
        if (strpbrk(lex, ".eE") || strcmp(lex, "NaN") == 0 || strstr(lex, "Infinity")) {
                print_float(b, node->valuedouble);
                return;
        }
        /* An integer: Python keeps it exact; int("-0") prints as 0. */
        sb_puts(b, strcmp(lex, "-0") == 0 ? "0" : lex);
}

static void print_newline(struct strbuf *b, int indent, int level)
{
        sb_putc(b, '\n');
        for (int i = 0; i < indent * level; i++)
                sb_putc(b, ' ');
}

/* indent 0: json.dumps(data); indent > 0: json.dumps(data, indent=indent). */
static int print_value(struct strbuf *b, const cJSON *node, int indent, int level)
{
        if (cJSON_IsString(node)) {
                print_string(b, node->valuestring);
        } else if (cJSON_IsNumber(node)) {
                print_number(b, node);
        } else if (cJSON_IsTrue(node)) {
                sb_puts(b, "true");
        } else if (cJSON_IsFalse(node)) {
                sb_puts(b, "false");
        } else if (cJSON_IsNull(node)) {
                sb_puts(b, "null");
        } else if (cJSON_IsArray(node)) {
                const cJSON *c;

                if (!node->child) {
                        sb_puts(b, "[]");
                        return 0;
                }
                sb_putc(b, '[');
                for (c = node->child; c; c = c->next) {
                        if (indent)
                                print_newline(b, indent, level + 1);
                        if (print_value(b, c, indent, level + 1) < 0)
                                return -ENOMEM;
                        if (c->next)
                                sb_puts(b, indent ? "," : ", ");
                }
                if (indent)
                        print_newline(b, indent, level);
                sb_putc(b, ']');
        } else if (cJSON_IsObject(node)) {
                _cleanup_free_ cJSON **keys = NULL;
                _cleanup_free_ cJSON **vals = NULL;
                size_t n, i;

                if (!node->child) {
                        sb_puts(b, "{}");
                        return 0;
                }
                if (object_members(node, &keys, &vals, &n) < 0)
                        return -ENOMEM;
                sb_putc(b, '{');
                for (i = 0; i < n; i++) {
                        if (indent)
                                print_newline(b, indent, level + 1);
                        print_string(b, keys[i]->string);
                        sb_puts(b, ": ");
                        if (print_value(b, vals[i], indent, level + 1) < 0)
                                return -ENOMEM;
                        if (i + 1 < n)
                                sb_puts(b, indent ? "," : ", ");
                }
                if (indent)
                        print_newline(b, indent, level);
                sb_putc(b, '}');
        }
        return b->oom ? -ENOMEM : 0;
}

/* ---- the filters ---- */

static bool deny_rule_stripped(const char *rule)
{
        for (size_t i = 0; i < 4; i++)
                if (strncmp(rule, settings_sandbox_deny_prefixes[i],
                            strlen(settings_sandbox_deny_prefixes[i])) == 0)
                        return true;
        return false;
}

/* §3.1 deny strip: only a top-level object with an object "permissions" holding a list
 * "deny"; string rules with one of the prefixes go, everything else stays in order. */
static bool strip_sandbox_denies(cJSON *root)
{
        cJSON *perms = member_get(root, "permissions");
        cJSON *deny = member_get(perms, "deny");
        cJSON *c, *next;
        bool stripped = false;

        if (!cJSON_IsObject(perms) || !cJSON_IsArray(deny))
                return false;
        for (c = deny->child; c; c = next) {
                next = c->next;
                if (cJSON_IsString(c) && deny_rule_stripped(c->valuestring)) {
                        cJSON_Delete(cJSON_DetachItemViaPointer(deny, c));
                        stripped = true;
                }
        }
        return stripped;
}

static int copy_verbatim(const char *raw, size_t len, char **ret, size_t *ret_len)
{
        char *buf = malloc(len + 1);

        if (!buf)
                return -ENOMEM;
        memcpy(buf, raw, len);
        buf[len] = '\0';
        *ret = buf;
        *ret_len = len;
        return 0;
}

int settings_profile_copy(const char *raw, size_t len, char **ret, size_t *ret_len,
                          bool *ret_stripped, struct cs_error *err)
{
        struct parser ps = {0};
        cJSON *root = NULL;
        struct strbuf out = {0};
        int r;

        if (len > SETTINGS_MAX_BYTES)
                return cs_error_setx(err, EFBIG,
                                     "settings.json is %zu bytes, over the limit of %zu bytes", len,
                                     SETTINGS_MAX_BYTES);
        ps.start = ps.p = (const unsigned char *)raw;
        ps.end = ps.p + len;
        ps.surrogatepass = true;
        /* json.loads(bytes) decodes with utf-8-sig: a leading BOM is dropped. */
        if (len >= 3 && memcmp(raw, "\xef\xbb\xbf", 3) == 0)
                ps.p += 3;
        r = parse_document(&ps, &root);
        if (r < 0)
                return cs_error_set(err, -r, "parse settings.json");
        /* Unparseable (or deeper than we parse): the copy is the file as it is. */
        if (!root || !strip_sandbox_denies(root)) {
                cJSON_Delete(root);
                r = copy_verbatim(raw, len, ret, ret_len);
                if (r < 0)
                        return cs_error_set(err, -r, "copy settings.json");
                *ret_stripped = false;
                return 0;
        }
        r = print_value(&out, root, 2, 0);
        cJSON_Delete(root);
        if (r < 0) {
                free(out.s);
                return cs_error_set(err, ENOMEM, "print settings.json");
        }
        *ret = out.s;
        *ret_len = out.len;
        *ret_stripped = true;
        return 0;
}

/* {profile} in every string value, recursively; keys untouched. */
static int fill_profile(cJSON *node, const char *name)
{
        static const char placeholder[] = "{profile}";
        const size_t plen = sizeof(placeholder) - 1;

        if (cJSON_IsString(node) && strstr(node->valuestring, placeholder)) {
                struct strbuf b = {0};
                const char *s = node->valuestring, *hit;

                sb_add(&b, "", 0);
                while ((hit = strstr(s, placeholder))) {
                        sb_add(&b, s, (size_t)(hit - s));
                        sb_puts(&b, name);
                        s = hit + plen;
                }
                sb_puts(&b, s);
                if (b.oom || !cJSON_SetValuestring(node, b.s)) {
                        free(b.s);
                        return -ENOMEM;
                }
                free(b.s);
                return 0;
        }
        if (cJSON_IsArray(node) || cJSON_IsObject(node))
                for (cJSON *c = node->child; c; c = c->next)
                        if (fill_profile(c, name) < 0)
                                return -ENOMEM;
        return 0;
}

static bool url_unsafe(unsigned char c)
{
        return c == '\t' || c == '\r' || c == '\n';
}

static bool scheme_char(unsigned char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '+' ||
               c == '-' || c == '.';
}

/* §3.2: urllib.parse.urlsplit + urlunsplit with only the host swapped when it is a
 * loopback name. *ret_new is NULL when the URL is left alone. */
static int rewrite_loopback_url(const char *url, char **ret_new, struct cs_error *err)
{
        _cleanup_free_ char *u = NULL;
        const char *scheme = NULL, *rest, *netloc_end, *at, *hostport, *colon, *host_end;
        size_t scheme_len = 0, i, o = 0, n = strlen(url);
        struct strbuf b = {0};
        const char *path, *hash, *qmark, *query = NULL, *frag = NULL;
        size_t path_len, query_len = 0, frag_len = 0;
        char host[16];

        *ret_new = NULL;
        /* urlsplit strips leading C0 controls and spaces and drops tab, CR and LF. */
        i = 0;
        for (;;) {
                if (i < n && (unsigned char)url[i] <= 0x20)
                        i++;
                else if (i + 1 < n && (unsigned char)url[i] == 0xc0 &&
                         (unsigned char)url[i + 1] == 0x80)
                        i += 2;
                else
                        break;
        }
        u = malloc(n - i + 1);
        if (!u)
                return cs_error_set(err, ENOMEM, "rewrite a hook URL");
        for (; i < n; i++)
                if (!url_unsafe((unsigned char)url[i]))
                        u[o++] = url[i];
        u[o] = '\0';

        rest = u;
        colon = strchr(u, ':');
        if (colon && colon > u && ((u[0] >= 'a' && u[0] <= 'z') || (u[0] >= 'A' && u[0] <= 'Z'))) {
                const char *q;

                for (q = u; q < colon && scheme_char((unsigned char)*q); q++)
                        ;
                if (q == colon) {
                        scheme = u;
                        scheme_len = (size_t)(colon - u);
                        rest = colon + 1;
                }
        }
        if (strncmp(rest, "//", 2) != 0)
                return 0;
        rest += 2;
        netloc_end = rest + strcspn(rest, "/?#");
        {
                const char *lb = memchr(rest, '[', (size_t)(netloc_end - rest));
                const char *rb = memchr(rest, ']', (size_t)(netloc_end - rest));

                if (!lb != !rb)
                        return cs_error_setx(err, EINVAL,
                                             "hook URL %s has an unbalanced '[' or ']' in its host",
                                             url);
        }
        at = NULL;
        for (const char *q = rest; q < netloc_end; q++)
                if (*q == '@')
                        at = q;
        hostport = at ? at + 1 : rest;
        colon = memchr(hostport, ':', (size_t)(netloc_end - hostport));
        host_end = colon ? colon : netloc_end;
        if ((size_t)(host_end - hostport) >= sizeof(host))
                return 0;
        for (i = 0; hostport + i < host_end; i++) {
                char c = hostport[i];

                host[i] = (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
        }
        host[i] = '\0';
        if (strcmp(host, "127.0.0.1") != 0 && strcmp(host, "localhost") != 0)
                return 0;

        path = netloc_end;
        hash = strchr(path, '#');
        if (hash) {
                frag = hash + 1;
                frag_len = strlen(frag);
        }
        path_len = hash ? (size_t)(hash - path) : strlen(path);
        qmark = memchr(path, '?', path_len);
        if (qmark) {
                query = qmark + 1;
                query_len = path_len - (size_t)(query - path);
                path_len = (size_t)(qmark - path);
        }
        sb_add(&b, "", 0);
        for (i = 0; i < scheme_len; i++) {
                char c = scheme[i];

                sb_putc(&b, (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c);
        }
        if (scheme)
                sb_putc(&b, ':');
        sb_puts(&b, "//");
        sb_add(&b, rest, (size_t)(hostport - rest));
        sb_puts(&b, "169.254.1.2");
        sb_add(&b, host_end, (size_t)(netloc_end - host_end));
        sb_add(&b, path, path_len);
        /* urlunsplit drops an empty query or fragment with its delimiter. */
        if (query_len) {
                sb_putc(&b, '?');
                sb_add(&b, query, query_len);
        }
        if (frag_len) {
                sb_putc(&b, '#');
                sb_add(&b, frag, frag_len);
        }
        if (b.oom) {
                free(b.s);
                return cs_error_set(err, ENOMEM, "rewrite a hook URL");
        }
        *ret_new = b.s;
        return 0;
}

static int rewrite_loopback_hooks(cJSON *root, bool *ret_rewrote, struct cs_error *err)
{
        cJSON *hooks = member_get(root, "hooks");
        _cleanup_free_ cJSON **keys = NULL;
        _cleanup_free_ cJSON **events = NULL;
        size_t n, i;
        bool rewrote = false;

        *ret_rewrote = false;
        if (!cJSON_IsObject(hooks))
                return 0;
        if (object_members(hooks, &keys, &events, &n) < 0)
                return cs_error_set(err, ENOMEM, "rewrite hooks");
        for (i = 0; i < n; i++) {
                cJSON *group;

                if (!cJSON_IsArray(events[i]))
                        continue;
                cJSON_ArrayForEach(group, events[i])
                {
                        cJSON *handlers = member_get(group, "hooks"), *h;

                        if (!cJSON_IsObject(group) || !cJSON_IsArray(handlers))
                                continue;
                        cJSON_ArrayForEach(h, handlers)
                        {
                                cJSON *type = member_get(h, "type"), *url = member_get(h, "url");
                                char *new_url = NULL;
                                int r;

                                if (!cJSON_IsObject(h) || !cJSON_IsString(type) ||
                                    strcmp(type->valuestring, "http") != 0 || !cJSON_IsString(url))
                                        continue;
                                r = rewrite_loopback_url(url->valuestring, &new_url, err);
                                if (r < 0)
                                        return r;
                                if (!new_url)
                                        continue;
                                if (!cJSON_SetValuestring(url, new_url)) {
                                        free(new_url);
                                        return cs_error_set(err, ENOMEM, "rewrite hooks");
                                }
                                free(new_url);
                                rewrote = true;
                        }
                }
        }
        *ret_rewrote = rewrote;
        return 0;
}

int settings_shared(const char *raw, size_t len, const char *origin, const char *name, bool sandbox,
                    char **ret, bool *ret_host_loopback, struct cs_error *err)
{
        struct parser ps = {0};
        cJSON *root = NULL;
        struct strbuf out = {0};
        bool host_loopback = false;
        int r, line, col;

        if (len > SETTINGS_MAX_BYTES)
                return cs_error_setx(err, EFBIG,
                                     "Can't read %s: it is %zu bytes, over the limit of %zu",
                                     origin, len, SETTINGS_MAX_BYTES);
        ps.start = ps.p = (const unsigned char *)raw;
        ps.end = ps.p + len;
        /* read_text() then json.loads(str): strict UTF-8, and a BOM is an error. */
        if (len >= 3 && memcmp(raw, "\xef\xbb\xbf", 3) == 0)
                return cs_error_setx(err, EINVAL,
                                     "Can't read %s: it starts with a UTF-8 byte order mark, "
                                     "which JSON does not allow",
                                     origin);
        r = parse_document(&ps, &root);
        if (r < 0)
                return cs_error_set(err, -r, "Can't read %s", origin);
        if (!root) {
                error_position(&ps, &line, &col);
                return cs_error_setx(err, EINVAL,
                                     "Can't read %s: invalid JSON (%s) at line %d column %d",
                                     origin, ps.why ? ps.why : "syntax error", line, col);
        }
        if (!cJSON_IsObject(root)) {
                cJSON_Delete(root);
                return cs_error_setx(err, EINVAL, "%s must hold a JSON object.", origin);
        }
        r = fill_profile(root, name);
        if (r == 0 && sandbox) {
                r = rewrite_loopback_hooks(root, &host_loopback, err);
                if (r < 0) {
                        cJSON_Delete(root);
                        return cs_error_wrap(err, "%s", origin);
                }
                strip_sandbox_denies(root);
        }
        if (r == 0)
                r = print_value(&out, root, 0, 0);
        cJSON_Delete(root);
        if (r < 0) {
                free(out.s);
                return cs_error_set(err, ENOMEM, "Can't read %s", origin);
        }
        *ret = out.s;
        *ret_host_loopback = host_loopback;
        return 0;
}

bool settings_args_have(char *const *args, size_t n, const char *flag)
{
        size_t flen = strlen(flag);

        for (size_t i = 0; i < n; i++)
                if (args[i] && strncmp(args[i], flag, flen) == 0 &&
                    (args[i][flen] == '\0' || args[i][flen] == '='))
                        return true;
        return false;
}
