/* The parts of image/ a launch needs without libarchive: entry names checked and made
 * safe to show, paths opened inside a rootfs. */
#include "layer.h"

#include "../../common/cleanup.h"
#include "../../common/error.h"
#include "../../common/resolve.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void layer_sanitize(const char *in, char *out, size_t out_len)
{
        size_t i = 0;

        for (; in && *in && i + 1 < out_len; in++)
                out[i++] = ((unsigned char)*in < 0x20 || *in == 0x7f) ? '?' : *in;
        out[i] = '\0';
        if (in && *in && out_len > 4)
                memcpy(out + out_len - 4, "...", 4);
}

ssize_t layer_path_escape(const char *path, char *out, size_t out_len)
{
        size_t o = 0;

        for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
                if (*p <= ' ' || *p == '\\' || *p >= 0x7f) {
                        if (o + 4 >= out_len)
                                return -1;
                        snprintf(out + o, 5, "\\%03o", *p);
                        o += 4;
                } else {
                        if (o + 1 >= out_len)
                                return -1;
                        out[o++] = (char)*p;
                }
        }
        if (o >= out_len)
                return -1;
        out[o] = '\0';
        return (ssize_t)o;
}

int layer_path_normalize(const char *name, size_t max_path, char **ret, struct cs_error *err)
{
        char shown[256];
        _cleanup_free_ char *out = NULL;
        size_t len, o = 0, depth = 0;
        const char *p;

        layer_sanitize(name, shown, sizeof(shown));
        if (!name || !*name)
                return cs_error_setx(err, EINVAL, "an entry has an empty name");
        len = strlen(name);
        if (len > max_path)
                return cs_error_setx(err, ENAMETOOLONG,
                                     "entry `%s` has a name of %zu bytes, longer than the limit "
                                     "of %zu (--max-path)",
                                     shown, len, max_path);
        if (name[0] == '/')
                return cs_error_setx(err, EPERM,
                                     "entry `%s` has an absolute name; a layer may only name paths "
                                     "relative to the rootfs",
                                     shown);
        out = malloc(len + 1);
        if (!out)
                return cs_error_set(err, ENOMEM, "entry `%s`", shown);
        for (p = name; *p;) {
                const char *end = strchrnul(p, '/');
                size_t clen = (size_t)(end - p);

                if (clen == 2 && p[0] == '.' && p[1] == '.')
                        return cs_error_setx(err, EPERM,
                                             "entry `%s` contains a `..` component, which could "
                                             "reach outside the rootfs",
                                             shown);
                if (clen > 255)
                        return cs_error_setx(err, ENAMETOOLONG,
                                             "entry `%s` has a component longer than 255 bytes",
                                             shown);
                if (clen > 0 && !(clen == 1 && p[0] == '.')) {
                        if (++depth > LAYER_MAX_DEPTH)
                                return cs_error_setx(err, ENAMETOOLONG,
                                                     "entry `%s` is more than %d directories deep",
                                                     shown, LAYER_MAX_DEPTH);
                        if (o)
                                out[o++] = '/';
                        memcpy(out + o, p, clen);
                        o += clen;
                }
                p = *end ? end + 1 : end;
        }
        out[o] = '\0';
        *ret = cs_take_ptr(&out);
        return 0;
}

int source_open_in_root(int dirfd, const char *path, int flags, struct cs_error *err)
{
        int fd = cs_open_in_root(dirfd, path, flags);

        if (fd < 0)
                return cs_error_set(err, errno, "open `%s`", path);
        return fd;
}
