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

/* Why cs_find_program finds no `name` although a regular file of that name stands where it
 * looks (name itself, or the first such file on PATH): *ret_path is that file (links
 * resolved) and *ret_mount the mount it lies on when that mount is noexec, else NULL (the
 * file has no execute permission for us). false, and both NULL, when there is no such file
 * or it runs. free() both. */
bool cs_program_blocked(const char *name, char **ret_path, char **ret_mount);

/* name in the directory csandbox's own binary is in (where its helpers are built and
 * installed), as /proc/self/exe names it; NULL when that cannot be read. free() it. */
char *cs_self_sibling(const char *name);
