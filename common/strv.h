/* The one string list: a heap array of heap strings with its length, kept NULL-terminated
 * (so it also serves as an argv or envp). Structs hold it as a `char **` and a `size_t`. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

/* Append s, which the list takes (freed when it cannot be added); -ENOMEM. */
int strv_push(char ***v, size_t *n, char *s);
/* Append a copy of s; -ENOMEM. */
int strv_push_dup(char ***v, size_t *n, const char *s);
/* Append a copy of s unless the list has it: 1 added, 0 there already, -ENOMEM. */
int strv_add_unique(char ***v, size_t *n, const char *s);
bool strv_has(char *const *v, size_t n, const char *s);
/* Free every string and the array; the list is empty afterwards. */
void strv_free(char ***v, size_t *n);
