/* Path strings. */
#pragma once
#include <stdbool.h>

/* Searched when PATH is unset or empty. */
#define CS_DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"

/* a "/" b (a "/" is not doubled), to free(); NULL on allocation failure. */
char *cs_path_join(const char *a, const char *b);

/* Where `name` runs from, as the shell finds it: name itself when it has a '/', else the
 * first absolute PATH directory holding an executable regular file of that name (a relative
 * entry such as "." is skipped: the current directory may be a session's work tree). NULL
 * when there is none (or on ENOMEM); free() the result. */
char *cs_find_program(const char *name);

/* name in the directory csandbox's own binary is in (where its helpers are built and
 * installed), as /proc/self/exe names it; NULL when that cannot be read. free() it. */
char *cs_self_sibling(const char *name);
