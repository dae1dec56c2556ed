#include "strv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int strv_push(char ***v, size_t *n, char *s)
{
        char **nv;

        if (!s)
                return -ENOMEM;
        nv = realloc(*v, (*n + 2) * sizeof(*nv));
        if (!nv) {
                free(s);
                return -ENOMEM;
        }
        nv[(*n)++] = s;
        nv[*n] = NULL;
        *v = nv;
        return 0;
}

int strv_push_dup(char ***v, size_t *n, const char *s)
{
        return strv_push(v, n, strdup(s));
}

bool strv_has(char *const *v, size_t n, const char *s)
{
        for (size_t i = 0; i < n; i++)
                if (strcmp(v[i], s) == 0)
                        return true;
        return false;
}

int strv_add_unique(char ***v, size_t *n, const char *s)
{
        if (strv_has(*v, *n, s))
                return 0;
        return strv_push_dup(v, n, s) < 0 ? -ENOMEM : 1;
}

void strv_free(char ***v, size_t *n)
{
        for (size_t i = 0; *v && i < *n; i++)
                free((*v)[i]);
        free(*v);
        *v = NULL;
        *n = 0;
}
