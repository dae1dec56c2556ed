/* Path strings. */
#include "path.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int cs_path_join(char **ret, const char *a, const char *b)
{
        if (asprintf(ret, "%s/%s", strcmp(a, "/") == 0 ? "" : a, b) < 0) {
                *ret = NULL;
                return -ENOMEM;
        }
        return 0;
}
