/* Path strings. */
#include "path.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
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

/* The mount a path lies on: the nearest directory, from path up, that is a mount's root. */
static char *mount_of(const char *path)
{
        char *dir = strdup(path);

        while (dir) {
                struct statx sx;
                char *slash = strrchr(dir, '/');

                if (slash == dir) {
                        dir[1] = '\0';
                        return dir;
                }
                if (!slash) {
                        free(dir);
                        return NULL;
                }
                *slash = '\0';
                if (statx(AT_FDCWD, dir, AT_SYMLINK_NOFOLLOW, 0, &sx) == 0 &&
                    sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT &&
                    sx.stx_attributes & STATX_ATTR_MOUNT_ROOT)
                        return dir;
        }
        return NULL;
}

bool cs_program_blocked(const char *name, char **ret_path, char **ret_mount)
{
        const char *path = getenv("PATH");
        char *copy, *save = NULL, *found = NULL;

        *ret_path = *ret_mount = NULL;
        if (strchr(name, '/')) {
                found = strdup(name);
        } else {
                copy = strdup(path && *path ? path : CS_DEFAULT_PATH);
                for (char *d = copy ? strtok_r(copy, ":", &save) : NULL; d && !found;
                     d = strtok_r(NULL, ":", &save)) {
                        struct stat st;

                        if (d[0] != '/' || !(found = cs_path_join(d, name)))
                                continue;
                        if (stat(found, &st) != 0 || !S_ISREG(st.st_mode)) {
                                free(found);
                                found = NULL;
                        }
                }
                free(copy);
        }
        if (found) {
                char *real = realpath(found, NULL);
                struct statvfs vfs;
                struct stat st;

                if (real && stat(real, &st) == 0 && S_ISREG(st.st_mode)) {
                        *ret_path = real;
                        if (statvfs(real, &vfs) == 0 && vfs.f_flag & ST_NOEXEC)
                                *ret_mount = mount_of(real);
                        if (*ret_mount || access(real, X_OK) != 0) {
                                free(found);
                                return true;
                        }
                }
                free(real);
                *ret_path = NULL;
        }
        free(found);
        return false;
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
