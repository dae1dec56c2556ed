/* The spec's environment: built from scratch, in order, bounded; secrets marked. */
#include "spec.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/path.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SPEC_MAX_ENV 4096

bool spec_env_name_valid(const char *name)
{
        if (!name[0] || (name[0] >= '0' && name[0] <= '9'))
                return false;
        for (const char *p = name; *p; p++)
                if (!(*p == '_' || (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
                      (*p >= '0' && *p <= '9')))
                        return false;
        return true;
}

static ssize_t spec_env_find(const struct sandbox_spec *s, const char *name)
{
        for (size_t i = 0; i < s->n_env; i++)
                if (strcmp(s->env[i].name, name) == 0)
                        return (ssize_t)i;
        return -1;
}

const char *spec_env_get(const struct sandbox_spec *s, const char *name)
{
        ssize_t i = spec_env_find(s, name);

        return i < 0 ? NULL : s->env[i].value;
}

int spec_env_set(struct sandbox_spec *s, const char *name, const char *value, bool secret,
                 struct cs_error *err)
{
        ssize_t i = spec_env_find(s, name);
        char *v;

        if (!spec_env_name_valid(name))
                return cs_error_setx(err, EINVAL,
                                     "`%s` is not a valid environment variable name (letters, "
                                     "digits and _, not starting with a digit)",
                                     name);
        v = strdup(value);
        if (!v)
                return cs_error_set(err, ENOMEM, "set %s", name);
        if (i >= 0) {
                explicit_bzero(s->env[i].value, strlen(s->env[i].value));
                free(s->env[i].value);
                s->env[i].value = v;
                s->env[i].secret = secret;
                return 0;
        }
        if (s->n_env >= SPEC_MAX_ENV) {
                free(v);
                return cs_error_setx(err, E2BIG, "more than %d environment variables",
                                     SPEC_MAX_ENV);
        }
        struct spec_env_var *n = realloc(s->env, (s->n_env + 1) * sizeof(*n));
        if (!n) {
                free(v);
                return cs_error_set(err, ENOMEM, "set %s", name);
        }
        s->env = n;
        s->env[s->n_env].name = strdup(name);
        if (!s->env[s->n_env].name) {
                free(v);
                return cs_error_set(err, ENOMEM, "set %s", name);
        }
        s->env[s->n_env].value = v;
        s->env[s->n_env].secret = secret;
        s->n_env++;
        return 0;
}

void spec_env_unset(struct sandbox_spec *s, const char *name)
{
        ssize_t i = spec_env_find(s, name);

        if (i < 0)
                return;
        free(s->env[i].name);
        explicit_bzero(s->env[i].value, strlen(s->env[i].value));
        free(s->env[i].value);
        memmove(&s->env[i], &s->env[i + 1], (s->n_env - (size_t)i - 1) * sizeof(s->env[0]));
        s->n_env--;
}

int spec_env_parse(struct sandbox_spec *s, const char *buf, size_t len, const char *origin,
                   bool secret, struct cs_error *err)
{
        size_t line = 0;
        const char *p = buf, *end = buf + len;

        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                const char *eol = nl ? nl : end;
                const char *eq;
                _cleanup_free_ char *name = NULL;
                _cleanup_free_ char *value = NULL;
                size_t n;
                int r;

                const char *text = p;

                line++;
                if (eol > p && eol[-1] == '\r')
                        eol--;
                /* Bounded by the line: buf need not be NUL-terminated. */
                while (text < eol && (*text == ' ' || *text == '\t'))
                        text++;
                if (text == eol || p[0] == '#') {
                        p = nl ? nl + 1 : end;
                        continue;
                }
                n = eol > p ? (size_t)(eol - p) : 0;
                if (memchr(p, '\0', n))
                        return cs_error_setx(err, EINVAL, "%s, line %zu: contains a NUL byte",
                                             origin, line);
                eq = memchr(p, '=', n);
                if (!eq)
                        return cs_error_setx(err, EINVAL,
                                             "%s, line %zu: expected KEY=VALUE, found no `=`",
                                             origin, line);
                name = strndup(p, (size_t)(eq - p));
                value = strndup(eq + 1, (size_t)(eol - eq - 1));
                if (!name || !value)
                        return cs_error_set(err, ENOMEM, "%s", origin);
                if (!spec_env_name_valid(name))
                        return cs_error_setx(err, EINVAL,
                                             "%s, line %zu: `%s` is not a valid variable name",
                                             origin, line, name);
                r = spec_env_set(s, name, value, secret, err);
                explicit_bzero(value, strlen(value));
                if (r < 0)
                        return r;
                p = nl ? nl + 1 : end;
        }
        return 0;
}
