/* podman and docker inside a `run` session, from csandbox's own engine.
 *
 * The session runs csandbox itself: `podman run` there is `csandbox podman run`, which
 * makes the container a sandbox nested in the session's namespaces, as any program of the
 * session could (nested user namespaces and mounts are allowed; no capability, no helper
 * outside, no daemon). So a container can hold nothing the session does not: its binds
 * are the session's paths, its ids map within the session's, its network is the session's
 * or none. What it takes to get csandbox there:
 * - the csandbox and csandbox-import binaries, read-only, at ENGINE_DIR;
 * - the host's dynamic loader and the directories of csandbox's libraries, read-only, so
 *   the engine runs in an image whose C library is another (or none); the shim
 *   (cli/podman_shim.c, static) starts csandbox through that loader;
 * - the host user's image store, read-only (images the host has start with no pull), and
 *   a store of the session's own, kept per profile in its state dir, for what the session
 *   pulls or builds; the host's csandbox never reads that one. */
#include "containers.h"
#include "bind.h"
#include "packages.h"

#include "../common/cleanup.h"
#include "../common/engine.h"
#include "../common/error.h"
#include "../common/path.h"
#include "../image/store/store.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct engine_libs {
        char loader[PATH_MAX];
        char dirs[ENGINE_LIB_MAX][PATH_MAX];
        dev_t dev[ENGINE_LIB_MAX];
        ino_t ino[ENGINE_LIB_MAX];
        size_t n;
        bool full;
};

static void libs_add_dir(struct engine_libs *l, const char *dir)
{
        char real[PATH_MAX];
        struct stat st;

        if (!realpath(dir, real) || stat(real, &st) < 0 || !S_ISDIR(st.st_mode))
                return;
        for (size_t i = 0; i < l->n; i++)
                if (l->dev[i] == st.st_dev && l->ino[i] == st.st_ino)
                        return;
        if (l->n == ENGINE_LIB_MAX) {
                l->full = true;
                return;
        }
        snprintf(l->dirs[l->n], PATH_MAX, "%s", real);
        l->dev[l->n] = st.st_dev;
        l->ino[l->n++] = st.st_ino;
}

/* Each loaded object's directory, and the loader the program names (PT_INTERP). A
 * directory under /lib also brings its /usr/lib twin when that is another directory:
 * csandbox-import's libraries (libarchive, libcurl) may lie in either. */
static int libs_visit(struct dl_phdr_info *info, size_t size, void *data)
{
        struct engine_libs *l = data;
        char dir[PATH_MAX], *slash;

        (void)size;
        if (!info->dlpi_name || info->dlpi_name[0] != '/') {
                for (int i = 0; !l->loader[0] && i < info->dlpi_phnum; i++)
                        if (info->dlpi_phdr[i].p_type == PT_INTERP)
                                snprintf(
                                    l->loader, sizeof(l->loader), "%s",
                                    (const char *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr));
                return 0;
        }
        if (strcmp(info->dlpi_name, l->loader) == 0)
                return 0; /* bound by itself */
        snprintf(dir, sizeof(dir), "%s", info->dlpi_name);
        slash = strrchr(dir, '/');
        if (!slash || slash == dir)
                return 0;
        *slash = '\0';
        libs_add_dir(l, dir);
        if (strncmp(dir, "/lib", 4) == 0) {
                char twin[PATH_MAX];

                if (snprintf(twin, sizeof(twin), "/usr%s", dir) < (int)sizeof(twin))
                        libs_add_dir(l, twin);
        }
        return 0;
}

static int bind_engine_file(struct sandbox_spec *s, const char *name, const char *dst,
                            struct cs_error *err)
{
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int fd = -1;
        int r = plan_shim_open(name, "podman and docker in the session (csandbox's engine)", &fd,
                               &path, err);

        return r < 0 ? r : spec_add_bind(s, SPEC_MOUNT_RO, &fd, path, dst, err);
}

int containers_plan(struct sandbox_spec *s, const char *bin_dir, const char *home, int state_fd,
                    const char *state_dir, struct cs_error *err)
{
        _cleanup_free_ char *shim = NULL, *store = NULL, *own = NULL, *at = NULL;
        _cleanup_free_ char *own_store = NULL;
        _cleanup_close_ int fd = -1, again = -1;
        struct engine_libs *l = calloc(1, sizeof(*l));
        struct stat st;
        int r;

        if (!l)
                return cs_error_set(err, ENOMEM, "containers");
        /* a csandbox without its helpers beside it (copied alone): no podman, as before */
        for (size_t i = 0; i < 2; i++) {
                _cleanup_free_ char *p = cs_self_sibling(i ? "csandbox-podman" : "csandbox-import");

                if (!p || access(p, X_OK) < 0) {
                        free(l);
                        return 0;
                }
        }
        dl_iterate_phdr(libs_visit, l);
        r = spec_add_mount(s, SPEC_MOUNT_TMPFS, 0, NULL, ENGINE_DIR, err);
        if (r >= 0) {
                s->mounts[s->n_mounts - 1].mode = 0755;
                r = bind_engine_file(s, "csandbox", ENGINE_BINARY, err);
        }
        if (r >= 0)
                r = bind_engine_file(s, "csandbox-import", ENGINE_DIR "/csandbox-import", err);
        if (r >= 0 && !l->loader[0])
                r = cs_error_setx(err, ENOEXEC,
                                  "podman and docker in the session: csandbox names no dynamic "
                                  "loader (PT_INTERP); a static csandbox needs no loader bound, "
                                  "which this build does not handle");
        if (r >= 0)
                r = plan_bind_host(s, l->loader, ENGINE_LOADER, SPEC_MOUNT_RO, err);
        for (size_t i = 0; r >= 0 && i < l->n; i++) {
                char dst[sizeof(ENGINE_DIR) + 32];

                snprintf(dst, sizeof(dst), "%s/lib%zu", ENGINE_DIR, i);
                r = plan_bind_host(s, l->dirs[i], dst, SPEC_MOUNT_RO, err);
        }
        free(l);
        /* the shim, first on the session's PATH under both names */
        if (r >= 0)
                r = plan_shim_open("csandbox-podman", "podman and docker in the session", &fd,
                                   &shim, err);
        if (r >= 0 && (again = fcntl(fd, F_DUPFD_CLOEXEC, 3)) < 0)
                r = cs_error_set(err, errno, "dup");
        if (r >= 0 && !(at = cs_path_join(bin_dir, "podman")))
                r = cs_error_set(err, ENOMEM, "containers");
        if (r >= 0)
                r = spec_add_bind(s, SPEC_MOUNT_RO, &fd, shim, at, err);
        free(at);
        at = NULL;
        if (r >= 0 && !(at = cs_path_join(bin_dir, "docker")))
                r = cs_error_set(err, ENOMEM, "containers");
        if (r >= 0)
                r = spec_add_bind(s, SPEC_MOUNT_RO, &again, shim, at, err);
        /* the host user's store, read-only, when there is one */
        if (r >= 0)
                r = store_default_root(&store, err);
        if (r >= 0 && stat(store, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == getuid()) {
                r = plan_bind_host(s, store, ENGINE_HOST_STORE, SPEC_MOUNT_RO, err);
                if (r >= 0)
                        r = spec_env_set(s, "CSANDBOX_READONLY_STORE", ENGINE_HOST_STORE, false,
                                         err);
        }
        /* the session's own, kept with the profile's state */
        if (r >= 0 && !plan_ensure_host_dir(state_fd, "containers"))
                r = cs_error_setx(err, EPERM,
                                  "%s/containers: not a directory of yours; it holds the images "
                                  "the profile's sessions pull and build. Remove it",
                                  state_dir);
        if (r >= 0 && (!(own = cs_path_join(state_dir, "containers")) ||
                       !(own_store = cs_path_join(home, ".local/share/csandbox"))))
                r = cs_error_set(err, ENOMEM, "containers");
        if (r >= 0)
                r = plan_bind_at(s, state_fd, state_dir, own, own_store, 0, err);
        return r;
}
