/* The tests on a step's upper dir that every part of a commit makes: which xattrs a layer
 * keeps, whether a directory is opaque or empty. */
#include "build-commit-ctx.h"

#include "../../common/cleanup.h"

#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

/* Whether an xattr belongs in a layer: not the overlay's bookkeeping, nor the host's
 * SELinux label (set on whatever the step created or copied up, and not the image's). */
bool commit_layer_xattr(const char *name)
{
        return strncmp(name, "user.overlay.", 13) != 0 && strcmp(name, "security.selinux") != 0;
}

bool commit_is_opaque(int fd)
{
        char v[2];

        return fgetxattr(fd, "user.overlay.opaque", v, sizeof(v)) == 1 && v[0] == 'y';
}

bool commit_dir_is_empty(int fd)
{
        int dup_fd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_closedir_ DIR *d = dup_fd < 0 ? NULL : fdopendir(dup_fd);
        struct dirent *de;

        if (!d) {
                if (dup_fd >= 0)
                        close(dup_fd);
                return false;
        }
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
                        return false;
        return true;
}
