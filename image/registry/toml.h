/* A bounded reader of the TOML that registries.conf and its drop-ins are written in: tables,
 * arrays of tables, bare and quoted keys (dotted ones joined by '.'), basic and literal
 * strings, booleans, integers, arrays of strings, comments. Anything else (multi-line
 * strings, floats, dates, inline tables, nested arrays) is refused with the file and line,
 * so a file the reader does not understand is never half applied. The file is a user's,
 * but it is parsed as untrusted: every string, key and array is bounded. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

struct cs_error;

#define TOML_FILE_MAX   (1u << 20)
#define TOML_STRING_MAX 4096u
#define TOML_ARRAY_MAX  256u

enum toml_type { TOML_STRING, TOML_BOOL, TOML_INT, TOML_ARRAY };

struct toml_value {
        enum toml_type type;
        const char *str; /* TOML_STRING, UTF-8 without NUL */
        bool b;
        long long i;
        char **items; /* TOML_ARRAY: strings only */
        size_t n;
};

struct toml_handler {
        /* [path] (array false) or [[path]] (array true); path's keys joined by '.' */
        int (*table)(void *opaque, const char *path, bool array, unsigned line,
                     struct cs_error *err);
        /* key = value, in the last table opened ("" before any) */
        int (*key)(void *opaque, const char *key, const struct toml_value *v, unsigned line,
                   struct cs_error *err);
        void *opaque;
};

/* Parse len bytes (file names them in messages), calling h for each header and key in
 * order. < 0 with err naming file and line on anything outside the subset, or the first
 * error a callback returns. */
int toml_parse(const char *buf, size_t len, const char *file, const struct toml_handler *h,
               struct cs_error *err);
