/* See engine.h. Built into csandbox and into the static podman/docker shim. */
#include "engine.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *cs_engine_library_path(const char *dir)
{
        size_t cap = ENGINE_LIB_MAX * (strlen(dir) + 8) + 1, len = 0;
        char *out = malloc(cap);
        struct stat st;

        if (!out)
                return NULL;
        out[0] = '\0';
        for (int i = 0; i < ENGINE_LIB_MAX; i++) {
                char p[4096];

                snprintf(p, sizeof(p), "%s/lib%d", dir, i);
                if (stat(p, &st) < 0 || !S_ISDIR(st.st_mode))
                        continue;
                len += (size_t)snprintf(out + len, cap - len, "%s%s", len ? ":" : "", p);
        }
        if (len == 0) {
                free(out);
                return NULL;
        }
        return out;
}

static bool self_is_engine_loader(void)
{
        char self[sizeof(ENGINE_LOADER) + 1];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

        if (n <= 0 || (size_t)n >= sizeof(self) - 1)
                return false;
        self[n] = '\0';
        return strcmp(self, ENGINE_LOADER) == 0;
}

int cs_engine_execv(const char *path, char *const argv[])
{
        char *libs, **v;
        size_t n = 0;

        if (!self_is_engine_loader()) {
                execv(path, argv);
                return -1;
        }
        libs = cs_engine_library_path(ENGINE_DIR);
        while (argv[n])
                n++;
        v = calloc(n + 7, sizeof(*v));
        if (!libs || !v) {
                free(libs);
                free(v);
                errno = ENOMEM;
                return -1;
        }
        v[0] = ENGINE_LOADER;
        v[1] = "--library-path";
        v[2] = libs;
        v[3] = "--argv0";
        v[4] = n ? argv[0] : (char *)path;
        v[5] = (char *)path;
        for (size_t i = 1; i < n; i++)
                v[5 + i] = argv[i];
        execv(ENGINE_LOADER, v);
        int e = errno;
        free(libs);
        free(v);
        errno = e;
        return -1;
}
