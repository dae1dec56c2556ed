/* Installing packages in a session: the broker's directory, csandbox's sudo bound where the
 * session finds it, and the spec's word to the runner (runner/broker.c); on the embedded
 * default, the host directories its writable layer covers (runner/host_layer.c). */
#include "packages.h"
#include "plan.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/path.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define SUDO_SHIM "csandbox-sudo"

int plan_shim_open(const char *name, const char *purpose, int *ret_fd, char **ret_path,
                   struct cs_error *err)
{
        _cleanup_free_ char *path = cs_self_sibling(name);
        _cleanup_close_ int fd = path ? open(path, O_PATH | O_CLOEXEC) : -1;
        struct stat st;

        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (st.st_mode & 022) ||
            !(st.st_mode & 0111))
                return cs_error_setx(err, ENOENT,
                                     "%s needs %s beside csandbox, as an executable only its "
                                     "owner can change; it is built and installed with csandbox "
                                     "(ninja -C build)",
                                     purpose, path ? path : name);
        *ret_fd = cs_take_fd(&fd);
        *ret_path = cs_take_ptr(&path);
        return 0;
}

int packages_plan(struct sandbox_spec *s, const char *also_at, struct cs_error *err)
{
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int fd = -1, again = -1;
        int r;

        r = plan_shim_open(SUDO_SHIM, "installing packages in the session (sudo)", &fd, &path, err);
        if (r >= 0 && also_at) {
                again = fcntl(fd, F_DUPFD_CLOEXEC, 3);
                if (again < 0)
                        r = cs_error_set(err, errno, "dup");
        }
        if (r >= 0)
                r = spec_add_mount(s, SPEC_MOUNT_TMPFS, 0, NULL, SPEC_BROKER_DIR, err);
        if (r >= 0) {
                s->mounts[s->n_mounts - 1].mode = 0755;
                r = spec_add_bind(s, SPEC_MOUNT_RO, &fd, path, SPEC_BROKER_DIR "/sudo", err);
        }
        if (r >= 0 && also_at)
                r = spec_add_bind(s, SPEC_MOUNT_RO, &again, path, also_at, err);
        if (r >= 0)
                r = plan_broker(s, err);
        if (r >= 0)
                s->package_broker = true;
        return r;
}

/* What a package manager writes on the embedded default: the host's system (/bin, /lib and
 * the like where they are directories, not merged-/usr links) and the package databases
 * spec_add_host_view shows read-only. The rest of /var is the session's own tmpfs already.
 * /opt and /srv are left as they are: packages of the host's manager do not install there,
 * and they may be large or the host's own data. */
static const char *const host_layer_dirs[] = {
    "/usr",
    "/etc",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/var/lib/dpkg",
    "/var/lib/apt",
    "/var/lib/ucf",
    "/var/lib/rpm",
    "/var/lib/alternatives",
};

int packages_host_layer(struct sandbox_spec *s, struct cs_error *err)
{
        for (size_t i = 0; i < sizeof(host_layer_dirs) / sizeof(host_layer_dirs[0]); i++) {
                struct stat st;
                int r;

                if (lstat(host_layer_dirs[i], &st) < 0 || !S_ISDIR(st.st_mode))
                        continue;
                r = spec_layer_dir_add(s, host_layer_dirs[i], err);
                if (r < 0)
                        return r;
        }
        return 0;
}
