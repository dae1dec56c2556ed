/* What producers decide beside the mounts: the payload's limits, the network helper, the
 * warnings a launch is to print, and the package managers the broker runs. */
#include "spec.h"

#include "../common/error.h"
#include "../common/path.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int spec_warn(struct sandbox_spec *s, struct cs_error *err, const char *fmt, ...)
{
        char **n = realloc(s->warnings, (s->n_warnings + 1) * sizeof(*n));
        va_list ap;
        int r;

        if (!n)
                return cs_error_set(err, ENOMEM, "keep a warning");
        s->warnings = n;
        va_start(ap, fmt);
        r = vasprintf(&s->warnings[s->n_warnings], fmt, ap);
        va_end(ap);
        if (r < 0)
                return cs_error_set(err, ENOMEM, "keep a warning");
        s->n_warnings++;
        return 0;
}

int spec_broker_allow(struct sandbox_spec *s, const char *name, const char *path,
                      struct cs_error *err)
{
        struct spec_broker_manager *n;

        if (!name[0] || strchr(name, '/') || path[0] != '/')
                return cs_error_setx(err, EINVAL,
                                     "spec: the broker's manager %s must be a base name run as "
                                     "an absolute path (%s)",
                                     name, path);
        if (spec_broker_manager(s, name))
                return 0;
        n = realloc(s->broker_managers, (s->n_broker_managers + 1) * sizeof(*n));
        if (!n)
                return cs_error_set(err, ENOMEM, "add a package manager");
        s->broker_managers = n;
        n = &s->broker_managers[s->n_broker_managers];
        n->name = strdup(name);
        n->path = strdup(path);
        if (!n->name || !n->path) {
                free(n->name);
                free(n->path);
                return cs_error_set(err, ENOMEM, "add a package manager");
        }
        s->n_broker_managers++;
        return 0;
}

const char *spec_broker_manager(const struct sandbox_spec *s, const char *name)
{
        for (size_t i = 0; i < s->n_broker_managers; i++)
                if (strcmp(s->broker_managers[i].name, name) == 0)
                        return s->broker_managers[i].path;
        return NULL;
}

int spec_layer_dir_add(struct sandbox_spec *s, const char *dir, struct cs_error *err)
{
        char *norm = NULL, **n;
        int r = spec_normalize_dest(dir, "the host layer", &norm, err);

        if (r < 0)
                return r;
        if (strcmp(norm, "/") == 0) {
                free(norm);
                return cs_error_setx(err, EINVAL, "spec: the host layer never covers /");
        }
        n = realloc(s->layer_dirs, (s->n_layer_dirs + 1) * sizeof(*n));
        if (!n) {
                free(norm);
                return cs_error_set(err, ENOMEM, "add a host layer directory");
        }
        s->layer_dirs = n;
        s->layer_dirs[s->n_layer_dirs++] = norm;
        return 0;
}

void spec_decided_free(struct sandbox_spec *s)
{
        for (size_t i = 0; i < s->n_layer_dirs; i++)
                free(s->layer_dirs[i]);
        free(s->layer_dirs);
        for (size_t i = 0; i < s->n_warnings; i++)
                free(s->warnings[i]);
        free(s->warnings);
        for (size_t i = 0; i < s->n_broker_managers; i++) {
                free(s->broker_managers[i].name);
                free(s->broker_managers[i].path);
        }
        free(s->broker_managers);
}

int spec_add_rlimit(struct sandbox_spec *s, int resource, const struct rlimit *limit,
                    struct cs_error *err)
{
        struct spec_rlimit *n = realloc(s->rlimits, (s->n_rlimits + 1) * sizeof(*n));

        if (!n)
                return cs_error_set(err, ENOMEM, "add a limit");
        s->rlimits = n;
        s->rlimits[s->n_rlimits++] = (struct spec_rlimit){.resource = resource, .limit = *limit};
        return 0;
}

char *spec_net_helper(const struct sandbox_spec *s)
{
        char *h;

        if (s->net != SPEC_NET_PASTA || s->egress == SPEC_EGRESS_ALLOWLIST)
                return NULL;
        h = cs_find_program("pasta");
        return h ? h : cs_find_program("slirp4netns");
}
