/* Shared by the trust files (trust.c, trust_protect.c, trust_pending.c). Internal to
 * policy/. */
#pragma once
#include <dirent.h>

/* The part of path below dir, or NULL when it is not below it (or is dir itself). */
const char *trust_path_below(const char *path, const char *dir);
