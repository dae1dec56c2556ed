/* Path strings. */
#include "path.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *cs_path_join(const char *a, const char *b)
{
        char *ret;

        return asprintf(&ret, "%s/%s", strcmp(a, "/") == 0 ? "" : a, b) < 0 ? NULL : ret;
}

static bool executable_file(const char *path)
{
        struct stat st;

        return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

char *cs_find_program(const char *name)
{
        const char *path = getenv("PATH");
        char *copy, *save = NULL, *found = NULL;

        if (strchr(name, '/'))
                return executable_file(name) ? strdup(name) : NULL;
        copy = strdup(path && *path ? path : CS_DEFAULT_PATH);
        if (!copy)
                return NULL;
        for (char *d = strtok_r(copy, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
                if (d[0] != '/' || !(found = cs_path_join(d, name)))
                        continue;
                if (!executable_file(found)) {
                        free(found);
                        found = NULL;
                }
        }
        free(copy);
        return found;
}

char *cs_self_sibling(const char *name)
{
        char self[4096];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        char *slash;

        if (n <= 0)
                return NULL;
        self[n] = '\0';
        slash = strrchr(self, '/');
        if (!slash)
                return NULL;
        *slash = '\0';
        return cs_path_join(self, name);
}
