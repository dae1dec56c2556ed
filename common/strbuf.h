/* A growable NUL-terminated byte buffer. Appends never fail: on allocation failure the buffer
 * stops growing and oom is set, checked once by the caller at the end. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

struct strbuf {
        char *s;
        size_t len, cap;
        bool oom;
};

void sb_add(struct strbuf *b, const char *s, size_t n);
void sb_puts(struct strbuf *b, const char *s);
void sb_putc(struct strbuf *b, char c);
