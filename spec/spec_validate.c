/* spec_validate: whether a spec holds together before any namespace exists (spec.h). */
#include "spec.h"

#include "../common/error.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

static bool dest_normal(const char *d)
{
        size_t n = d ? strlen(d) : 0;

        if (n == 0 || d[0] != '/')
                return false;
        if (n == 1)
                return true;
        return !strstr(d, "//") && !strstr(d, "/./") && !strstr(d, "/../") && d[n - 1] != '/' &&
               strcmp(d + n - 2, "/.") != 0 && (n < 3 || strcmp(d + n - 3, "/..") != 0);
}

int spec_validate(const struct sandbox_spec *s, struct cs_error *err)
{
        if (s->root == SPEC_ROOT_DIR ? s->root_fd < 0 : s->root_fd >= 0)
                return cs_error_setx(err, EINVAL, "spec: root %s %s a directory fd",
                                     s->root == SPEC_ROOT_DIR ? "dir" : "host",
                                     s->root == SPEC_ROOT_DIR ? "lacks" : "must not have");
        if ((s->n_lowers && s->root != SPEC_ROOT_DIR) || s->n_lowers + 1 > SPEC_MAX_LOWERS)
                return cs_error_setx(err, EINVAL, "spec: %zu lower layers under a %s root",
                                     s->n_lowers, s->root == SPEC_ROOT_DIR ? "dir" : "host");
        for (size_t i = 0; i < s->n_lowers; i++)
                if (s->lowers[i].fd < 0 || !s->lowers[i].real)
                        return cs_error_setx(err, EINVAL, "spec: lower layer %zu is not open", i);
        for (size_t i = 0; i < s->n_mounts; i++) {
                const struct spec_mount *m = &s->mounts[i];
                bool fd_kind = m->kind == SPEC_MOUNT_BIND || m->kind == SPEC_MOUNT_COPY;

                if ((unsigned)m->kind > SPEC_MOUNT_COPY || !dest_normal(m->dest))
                        return cs_error_setx(err, EINVAL,
                                             "spec: mount %zu has no known kind or no absolute "
                                             "normalised destination (%s)",
                                             i, m->dest ? m->dest : "none");
                if (fd_kind != (m->source_fd >= 0))
                        return cs_error_setx(err, EINVAL, "spec: %s at %s %s an open source",
                                             spec_mount_kind_name(m->kind), m->dest,
                                             fd_kind ? "lacks" : "must not have");
                if ((m->kind == SPEC_MOUNT_SYMLINK && !m->source) ||
                    (m->kind == SPEC_MOUNT_FILE && !m->data && m->data_len))
                        return cs_error_setx(err, EINVAL, "spec: %s at %s lacks its %s",
                                             spec_mount_kind_name(m->kind), m->dest,
                                             m->kind == SPEC_MOUNT_SYMLINK ? "target" : "data");
        }
        if (s->argc == 0 || !s->argv || !s->argv[0] || s->argv[s->argc])
                return cs_error_setx(err, EINVAL, "spec: no command");
        if (s->cwd && s->cwd[0] != '/')
                return cs_error_setx(err, EINVAL, "spec: the working directory %s is not absolute",
                                     s->cwd);
        if (s->hostname && (!s->hostname[0] || strlen(s->hostname) > 64))
                return cs_error_setx(err, EINVAL, "--hostname: `%s` must have 1 to 64 characters",
                                     s->hostname);
        for (size_t i = 0; i < s->n_env; i++)
                if (!spec_env_name_valid(s->env[i].name) || !s->env[i].value)
                        return cs_error_setx(err, EINVAL, "spec: `%s` is not a valid variable",
                                             s->env[i].name);
        if ((s->seccomp == SPEC_SECCOMP_FILE) != (s->seccomp_path != NULL))
                return cs_error_setx(err, EINVAL,
                                     "spec: a seccomp file needs its path, and only it");
        if (s->package_broker && s->root != SPEC_ROOT_DIR && !s->n_layer_dirs)
                return cs_error_setx(err, EINVAL,
                                     "--package-broker needs --rootfs, --image or the embedded "
                                     "default's view of the host: packages are installed into "
                                     "the session's own writable layer");
        if (s->n_layer_dirs && (!s->package_broker || s->root != SPEC_ROOT_HOST))
                return cs_error_setx(err, EINVAL,
                                     "spec: a host layer goes with the broker on the embedded "
                                     "default");
        if (s->package_broker && (!s->map_range || !s->n_broker_managers))
                return cs_error_setx(err, EINVAL,
                                     "spec: the package broker needs the subordinate range and "
                                     "the package managers it runs (runner_spec_complete and "
                                     "plan_broker decide them)");
        if (s->package_broker && (s->broker_caps & (1ull << 21)))
                return cs_error_setx(err, EINVAL,
                                     "spec: the package broker never holds CAP_SYS_ADMIN");
        if ((s->upper_fd >= 0) != (s->work_fd >= 0) ||
            (s->upper_fd >= 0 && s->root != SPEC_ROOT_DIR))
                return cs_error_setx(err, EINVAL,
                                     "spec: an upper dir on disk needs its work dir and a "
                                     "layered root");
        if (s->payload_ids && !s->map_range)
                return cs_error_setx(err, EINVAL,
                                     "spec: the payload's own ids need the subordinate range");
        if (s->payload_caps && (s->payload_ids ? s->payload_uid : s->uid) != 0)
                return cs_error_setx(err, EINVAL,
                                     "spec: only a payload of uid 0 keeps capabilities");
        if (s->map_host_loopback && s->net != SPEC_NET_PASTA && s->net != SPEC_NET_RELAY)
                return cs_error_setx(err, EINVAL,
                                     "--map-host-loopback needs --net pasta (with --net host the "
                                     "host's loopback is reachable anyway; with --net none "
                                     "nothing is)");
        if (s->egress == SPEC_EGRESS_ALLOWLIST && s->net != SPEC_NET_PASTA)
                return cs_error_setx(err, EINVAL,
                                     "spec: an egress allowlist needs the session's own network");
        if ((unsigned)s->egress > SPEC_EGRESS_NONE)
                return cs_error_setx(err, EINVAL, "spec: an unknown egress mode");
        if ((unsigned)s->net > SPEC_NET_RELAY || (unsigned)s->seccomp > SPEC_SECCOMP_FILE ||
            (unsigned)s->tty > SPEC_TTY_INHERIT || (unsigned)s->proc > SPEC_PROC_NONE)
                return cs_error_setx(err, EINVAL,
                                     "spec: an unknown network, seccomp, tty or proc "
                                     "mode");
        for (size_t i = 0; i < SPEC_USERNS_LIMIT_N; i++)
                if (s->userns_limits[i] < -1 || s->userns_limits[i] > INT_MAX)
                        return cs_error_setx(err, EINVAL, "spec: userns limit %s out of range",
                                             spec_userns_limit_name((enum spec_userns_limit)i));
        return 0;
}
