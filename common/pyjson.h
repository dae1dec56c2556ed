/* JSON as Python's json module reads and writes it, over cJSON nodes. Pure functions. */
#pragma once
#include "common/strbuf.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Set start = p and end over the bytes; surrogatepass for bytes input (json.loads(bytes)). */
struct pyjson_parser {
        const unsigned char *start, *p, *end;
        bool surrogatepass; /* bytes input, decoded as json.loads(bytes) does */
        const char *why;    /* syntax error; NULL while none */
        bool too_deep, oom;
};

/* Parse a whole document. On a syntax error *ret is NULL and ps->why says why; -ENOMEM on
 * allocation failure. */
int pyjson_parse(struct pyjson_parser *ps, cJSON **ret);

/* The 1-based line and column where parsing stopped. */
void pyjson_error_position(const struct pyjson_parser *ps, int *ret_line, int *ret_col);

/* The value Python's dict holds for key: the last duplicate. NULL when obj is no object. */
cJSON *pyjson_member_get(const cJSON *obj, const char *key);

/* The members as a Python dict holds them: for each distinct key, in order of its first
 * occurrence, *ret_keys[i] (the first node, for its key) and *ret_vals[i] (the last). */
int pyjson_object_members(const cJSON *obj, cJSON ***ret_keys, cJSON ***ret_vals, size_t *ret_n);

/* indent 0: json.dumps(data); indent > 0: json.dumps(data, indent=indent). -ENOMEM on
 * allocation failure. */
int pyjson_print(struct strbuf *b, const cJSON *node, int indent, int level);

bool pyjson_is_digit(unsigned char c);

/* Decode one UTF-8 sequence at s (len bytes left). Returns its length, 0 when invalid.
 * surrogates: accept encoded surrogates; internal: the node encoding (see pyjson.c). */
size_t pyjson_utf8_decode(const unsigned char *s, size_t len, bool surrogates, bool internal,
                          uint32_t *ret);
