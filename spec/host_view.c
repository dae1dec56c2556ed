/* The embedded default's view of the host (spec_add_host_view): its system shown, the rest of
 * its top level, most of /var and the homes hidden. */
#include "spec.h"

#include "../common/cleanup.h"
#include "../common/error.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What of the host's / the embedded default shows: its system, what programs need to run.
 * Everything else at the top level (/srv, /mnt, /media, /boot, a data disk's mountpoint) is
 * hidden, and so is /var but for the read-only parts programs read. /proc, /dev and /tmp
 * are the base mounts; /sys stays the host's, read-only. */
static const char *const host_system_dirs[] = {
    "bin",  "sbin", "lib", "lib32", "lib64", "libx32", "usr",  "etc",
    "opt",  "nix",  "gnu", "snap", /* other distributions' program stores */
    "proc", "dev",  "tmp", "sys",   "var",   "home",   "root", "run", /* handled on their own */
};

/* /var entries programs read (package databases, alternatives, CA stores, font and
 * dictionary caches, catalogs), shown read-only; the rest of /var (services' data, logs,
 * mail, spools, caches, backups) is hidden. */
static const char *const host_var_shown[] = {
    "lib/dpkg",
    "lib/apt",
    "lib/rpm",
    "lib/alternatives",
    "lib/pacman",
    "lib/ucf",
    "lib/ca-certificates",
    "lib/dbus",
    "lib/nix",
    "lib/flatpak",
    "lib/sgml-base",
    "lib/xml-core",
    "lib/dictionaries-common",
    "lib/aspell",
    "lib/ispell",
    "cache/fontconfig",
    "cache/dictionaries-common",
};

#define HOST_TOP_MAX 512

static int host_hide_top(struct sandbox_spec *s, const char *root, struct cs_error *err)
{
        _cleanup_closedir_ DIR *d = opendir(root);
        const unsigned flags = SPEC_MOUNT_OPTIONAL | SPEC_MOUNT_DEFAULT;
        struct dirent *de;
        size_t seen = 0;
        int r;

        if (!d)
                return cs_error_set(err, errno, "list the host's %s", root);
        while ((de = readdir(d))) {
                char dest[NAME_MAX + 2];
                struct stat st;
                bool system = false;

                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (++seen > HOST_TOP_MAX)
                        return cs_error_setx(err, E2BIG,
                                             "the host's / has more than %d entries; csandbox "
                                             "cannot hide each of them",
                                             HOST_TOP_MAX);
                for (size_t i = 0; i < sizeof(host_system_dirs) / sizeof(host_system_dirs[0]); i++)
                        if (strcmp(de->d_name, host_system_dirs[i]) == 0)
                                system = true;
                if (system || fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                snprintf(dest, sizeof(dest), "/%s", de->d_name);
                /* A link stays: it leads into the view, where its target is shown or not. */
                if (S_ISDIR(st.st_mode))
                        r = spec_add_mount(s, SPEC_MOUNT_TMPFS, flags, NULL, dest, err);
                else if (S_ISREG(st.st_mode))
                        r = spec_add_file(s, dest, "csandbox: hidden host file", "", 0, flags, err);
                else
                        continue;
                if (r < 0)
                        return r;
        }
        return 0;
}

static int host_show_var(struct sandbox_spec *s, struct cs_error *err)
{
        const unsigned flags = SPEC_MOUNT_OPTIONAL | SPEC_MOUNT_DEFAULT;
        _cleanup_closedir_ DIR *d = NULL;
        _cleanup_close_ int var = -1;
        struct dirent *de;
        size_t seen = 0;
        int r;

        var = open("/var", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (var < 0)
                return 0; /* no /var, or a link: it leads where the view says */
        r = spec_add_mount(s, SPEC_MOUNT_TMPFS, flags, NULL, "/var", err);
        if (r < 0)
                return r;
        for (size_t i = 0; i < sizeof(host_var_shown) / sizeof(host_var_shown[0]); i++) {
                char dest[64];
                int fd =
                    openat(var, host_var_shown[i], O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

                if (fd < 0)
                        continue;
                snprintf(dest, sizeof(dest), "/var/%s", host_var_shown[i]);
                r = spec_add_bind(s, SPEC_MOUNT_RO | flags, &fd, dest, dest, err);
                if (r < 0)
                        return r;
        }
        /* /var/run, /var/lock and the like: the host's links, as they are. */
        d = fdopendir(var);
        if (!d)
                return cs_error_set(err, errno, "list the host's /var");
        var = -1;
        while ((de = readdir(d)) && seen++ < HOST_TOP_MAX) {
                char target[256], dest[NAME_MAX + 8];
                ssize_t n;

                if (de->d_type != DT_LNK && de->d_type != DT_UNKNOWN)
                        continue;
                n = readlinkat(dirfd(d), de->d_name, target, sizeof(target) - 1);
                if (n <= 0 || n >= (ssize_t)sizeof(target) - 1)
                        continue;
                target[n] = '\0';
                snprintf(dest, sizeof(dest), "/var/%s", de->d_name);
                r = spec_add_mount(s, SPEC_MOUNT_SYMLINK, flags, target, dest, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

int spec_add_host_view(struct sandbox_spec *s, const char *home, struct cs_error *err)
{
        static const char *const hidden[] = {"/home", "/root", "/var/tmp", "/run"};
        int r;

        r = host_hide_top(s, "/", err);
        if (r >= 0)
                r = host_show_var(s, err);
        if (r < 0)
                return r;
        for (size_t i = 0; i < sizeof(hidden) / sizeof(hidden[0]); i++) {
                r = spec_add_mount(s, SPEC_MOUNT_TMPFS, SPEC_MOUNT_OPTIONAL, NULL, hidden[i], err);
                if (r < 0)
                        return r;
                if (strcmp(hidden[i], "/var/tmp") == 0)
                        s->mounts[s->n_mounts - 1].mode = 01777;
        }
        if (home && home[0] == '/' && strcmp(home, "/") != 0) {
                _cleanup_free_ char *h = NULL;
                /* Dropped: a $HOME that cannot be normalised is not hidden by name; /home is hidden
                 * anyway. */
                struct cs_error ignored;

                /* A $HOME that cannot be a destination (relative, with ..) is not hidden
                 * by a tmpfs of its own; it is still under /home or /root in practice. */
                if (spec_normalize_dest(home, "$HOME", &h, &ignored) == 0)
                        return spec_add_mount(s, SPEC_MOUNT_TMPFS,
                                              SPEC_MOUNT_OPTIONAL | SPEC_MOUNT_DEFAULT, NULL, h,
                                              err);
        }
        return 0;
}
