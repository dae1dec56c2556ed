/* Path strings. */
#pragma once

/* *ret = a "/" b (a "/" is not doubled); -ENOMEM (and *ret NULL) on allocation failure. */
int cs_path_join(char **ret, const char *a, const char *b);
