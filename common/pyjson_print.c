/* JSON as Python prints it: json.dumps over the nodes common/pyjson.c parsed, with Python's
 * dict semantics for duplicate keys. */
#include "pyjson.h"

#include "common/cleanup.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Python dict semantics over cJSON objects ---- */

/* The value Python's dict holds for key: the last duplicate. */
cJSON *pyjson_member_get(const cJSON *obj, const char *key)
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
int pyjson_object_members(const cJSON *obj, cJSON ***ret_keys, cJSON ***ret_vals, size_t *ret_n)
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
                size_t n = pyjson_utf8_decode(p, len, true, true, &c);

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
                if (pyjson_is_digit((unsigned char)*q))
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
int pyjson_print(struct strbuf *b, const cJSON *node, int indent, int level)
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
                        if (pyjson_print(b, c, indent, level + 1) < 0)
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
                if (pyjson_object_members(node, &keys, &vals, &n) < 0)
                        return -ENOMEM;
                sb_putc(b, '{');
                for (i = 0; i < n; i++) {
                        if (indent)
                                print_newline(b, indent, level + 1);
                        print_string(b, keys[i]->string);
                        sb_puts(b, ": ");
                        if (pyjson_print(b, vals[i], indent, level + 1) < 0)
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
