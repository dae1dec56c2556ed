/* Shared by containerfile.c (lines and instructions) and containerfile-words.c (words). */
#pragma once
#include <stdbool.h>
#include <stddef.h>

/* Docker's blanks between words: space, tab, and the other ASCII whitespace but newline. */
static inline bool cf_blank(char c)
{
        return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* The next word of s from *pos, quote-aware as docker splits ENV, ARG, LABEL and flags:
 * blanks inside '...' or "..." and an escaped blank do not end it; quotes stay in the word.
 * 1 with [*ret_start, *ret_end) and *pos after it, 0 at the end, -EINVAL for an
 * unterminated quote. */
int cf_word_next(const char *s, size_t *pos, char escape, size_t *ret_start, size_t *ret_end);

struct containerfile;
struct cf_instr;
struct cs_error;

/* Parse one joined instruction line (keyword and arguments) and append it to cf. */
int cf_instr_add(struct containerfile *cf, const char *text, unsigned line, const char *file,
                 struct cs_error *err);
void cf_instr_free(struct cf_instr *in);
