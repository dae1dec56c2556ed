/* appuser's entries in the sandbox's /etc/passwd and /etc/group (reference §2.12). */
#include "identity.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IDENTITY_FILE_MAX (4u << 20)

/* base without the lines that name appuser or id 1000 (field 3), so appuser owns both. */
static char *without_id_1000(const char *base)
{
        size_t len = strlen(base);
        char *out = malloc(len + 2), *o = out;

        if (!out)
                return NULL;
        for (const char *l = base; *l;) {
                const char *nl = strchr(l, '\n'), *end = nl ? nl : l + strlen(l);
                const char *f = l;
                bool drop = strncmp(l, "appuser:", 8) == 0;

                for (int k = 0; k < 2 && f && f < end; k++)
                        f = memchr(f, ':', (size_t)(end - f)), f = f ? f + 1 : NULL;
                if (f && end - f >= 5 && strncmp(f, "1000:", 5) == 0)
                        drop = true;
                if (f && end - f == 4 && strncmp(f, "1000", 4) == 0)
                        drop = true;
                if (!drop && end > l) {
                        memcpy(o, l, (size_t)(end - l));
                        o += end - l;
                        *o++ = '\n';
                }
                l = nl ? nl + 1 : end;
        }
        *o = '\0';
        return out;
}

/* appuser in /etc/passwd and /etc/group: tools (ssh, git) want a name for their uid. The
 * host's files (embedded default) or an image without appuser get it added. */
int identity_add_files(struct sandbox_spec *s, const char *passwd, const char *group,
                       struct cs_error *err)
{
        static const char user[] = "appuser:x:1000:1000:appuser:/home/appuser:/bin/sh\n";
        static const char grp[] = "appuser:x:1000:\n";
        _cleanup_free_ char *pw = NULL, *gr = NULL, *pbase = without_id_1000(passwd);
        _cleanup_free_ char *gbase = without_id_1000(group);
        int r;

        if (!pbase || !gbase || asprintf(&pw, "%s%s", pbase, user) < 0 ||
            asprintf(&gr, "%s%s", gbase, grp) < 0)
                return cs_error_set(err, ENOMEM, "passwd");
        r = spec_add_file(s, "/etc/passwd", "csandbox: passwd with appuser", pw, strlen(pw),
                          SPEC_MOUNT_OPTIONAL, err);
        if (r >= 0)
                r = spec_add_file(s, "/etc/group", "csandbox: group with appuser", gr, strlen(gr),
                                  SPEC_MOUNT_OPTIONAL, err);
        return r;
}

/* An identity file of the root (dirfd: AT_FDCWD for the host's, or a tree's directory),
 * read bounded and never through a link; "" when it cannot be read. */
char *identity_read_root_file(int dirfd, const char *path)
{
        /* Dropped: a file it cannot read reads as empty. */
        struct cs_error ignored;
        char *buf = NULL;

        if (cs_read_file_at(dirfd, path, IDENTITY_FILE_MAX, true, &buf, NULL, &ignored) < 0)
                return strdup("");
        return buf;
}
