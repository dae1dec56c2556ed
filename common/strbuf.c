/* A growable NUL-terminated byte buffer. */
#include "strbuf.h"

#include <stdlib.h>
#include <string.h>

void sb_add(struct strbuf *b, const char *s, size_t n)
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

void sb_puts(struct strbuf *b, const char *s)
{
        sb_add(b, s, strlen(s));
}

void sb_putc(struct strbuf *b, char c)
{
        sb_add(b, &c, 1);
}
