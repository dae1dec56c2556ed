/* srt settings files as egress entries (egress_file.h). */
#include "egress_file.h"

#include "../common/error.h"
#include "../common/fileio.h"
#include "../spec/spec.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EGRESS_FILE_MAX ((size_t)1 << 20)

static int srt_list(struct sandbox_spec *s, cJSON *net, const char *key, bool deny,
                    const char *what, struct cs_error *err)
{
        cJSON *list = cJSON_GetObjectItemCaseSensitive(net, key), *e;

        if (!list)
                return 0;
        if (!cJSON_IsArray(list))
                return cs_error_setx(err, EINVAL, "%s: network.%s is not a list of strings", what,
                                     key);
        cJSON_ArrayForEach(e, list)
        {
                if (!cJSON_IsString(e))
                        return cs_error_setx(err, EINVAL,
                                             "%s: network.%s holds something other than a "
                                             "string",
                                             what, key);
                if ((deny ? spec_egress_deny(s, e->valuestring, what, err)
                          : spec_egress_add(s, e->valuestring, false, what, err)) < 0)
                        return -err->err;
        }
        return 0;
}

int egress_file_load(struct sandbox_spec *s, const char *path, const char *what,
                     struct cs_error *err)
{
        char *buf = NULL;
        size_t len = 0;
        cJSON *root, *net;
        int r = cs_read_file_at(AT_FDCWD, path, EGRESS_FILE_MAX, false, &buf, &len, err);

        if (r < 0)
                return cs_error_wrap(err, "%s", what);
        root = cJSON_ParseWithLength(buf, len);
        free(buf);
        net = root ? cJSON_GetObjectItemCaseSensitive(root, "network") : NULL;
        if (!cJSON_IsObject(net)) {
                cJSON_Delete(root);
                return cs_error_setx(err, EINVAL,
                                     "%s %s: not a settings file with a \"network\" object "
                                     "(network.allowedDomains, network.deniedDomains)",
                                     what, path);
        }
        r = srt_list(s, net, "allowedDomains", false, what, err);
        if (r >= 0)
                r = srt_list(s, net, "deniedDomains", true, what, err);
        cJSON_Delete(root);
        return r;
}

int egress_file_check(const struct sandbox_spec *s, const char *path, const char *what,
                      struct cs_error *err)
{
        char *real = realpath(path, NULL);

        if (!real)
                return cs_error_set(err, errno, "%s %s", what, path);
        for (size_t i = 0; i < s->n_mounts; i++) {
                const struct spec_mount *m = &s->mounts[i];
                size_t l;

                if (m->kind != SPEC_MOUNT_BIND || (m->flags & SPEC_MOUNT_RO) || !m->source_real)
                        continue;
                l = strlen(m->source_real);
                if (strncmp(real, m->source_real, l) == 0 &&
                    (real[l] == '/' || real[l] == '\0' || strcmp(m->source_real, "/") == 0)) {
                        cs_error_setx(err, EPERM,
                                      "%s %s: the session can write it (it lies in %s, which "
                                      "the session has read-write), so it could widen its own "
                                      "allowlist: keep it elsewhere",
                                      what, path, m->source_real);
                        free(real);
                        return -EPERM;
                }
        }
        free(real);
        return 0;
}
