/* An image's User resolved through its own /etc/passwd and /etc/group. */
#include "store.h"

#include "../../common/cleanup.h"
#include "../../common/error.h"
#include "../../common/fileio.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PASSWD_MAX (4u << 20)

static bool parse_id(const char *s, size_t len, unsigned long *ret)
{
        char buf[16], *end;
        unsigned long v;

        if (len == 0 || len >= sizeof(buf))
                return false;
        memcpy(buf, s, len);
        buf[len] = '\0';
        for (size_t i = 0; i < len; i++)
                if (!isdigit((unsigned char)buf[i]))
                        return false;
        errno = 0;
        v = strtoul(buf, &end, 10);
        if (errno || *end || v > 0xfffffffeul)
                return false;
        *ret = v;
        return true;
}

/* Field 0 (name) and fields idx_a/idx_b of the line whose name (or, with by_id, field
 * idx_a) equals key. */
static bool db_find(const char *db, const char *key, size_t klen, bool by_id, int idx_a, int idx_b,
                    unsigned long *ret_a, unsigned long *ret_b)
{
        for (const char *line = db; line && *line;) {
                const char *eol = strchrnul(line, '\n');
                const char *f[8] = {0};
                size_t fl[8] = {0};
                int nf = 0;

                for (const char *p = line; nf < 8 && p <= eol;) {
                        const char *c = memchr(p, ':', (size_t)(eol - p));
                        const char *end = c ? c : eol;
                        f[nf] = p;
                        fl[nf++] = (size_t)(end - p);
                        if (!c)
                                break;
                        p = c + 1;
                }
                if (nf > idx_a && nf > idx_b) {
                        bool hit = by_id ? (fl[idx_a] == klen && memcmp(f[idx_a], key, klen) == 0)
                                         : (fl[0] == klen && memcmp(f[0], key, klen) == 0);
                        if (hit && parse_id(f[idx_a], fl[idx_a], ret_a) &&
                            (idx_b < 0 || parse_id(f[idx_b], fl[idx_b], ret_b)))
                                return true;
                }
                line = *eol ? eol + 1 : eol;
        }
        return false;
}

int image_lookup_user(const char *passwd, const char *group, const char *user, uid_t *ret_uid,
                      gid_t *ret_gid, struct cs_error *err)
{
        const char *colon = strchr(user ? user : "", ':');
        size_t ulen = colon ? (size_t)(colon - user) : strlen(user ? user : "");
        unsigned long uid = 0, gid = 0, unused;
        bool have_gid = false;

        if (!user || !*user) {
                *ret_uid = 0;
                *ret_gid = 0;
                return 0;
        }
        if (parse_id(user, ulen, &uid)) {
                have_gid = passwd && db_find(passwd, user, ulen, true, 2, 3, &uid, &gid);
        } else {
                if (!passwd || !db_find(passwd, user, ulen, false, 2, 3, &uid, &gid))
                        return cs_error_setx(err, ENOENT,
                                             "the image's User `%s`: no user `%.*s` in the "
                                             "image's /etc/passwd",
                                             user, (int)ulen, user);
                have_gid = true;
        }
        if (colon) {
                const char *g = colon + 1;
                size_t glen = strlen(g);

                if (!parse_id(g, glen, &gid)) {
                        if (!group || !db_find(group, g, glen, false, 2, -1, &gid, &unused))
                                return cs_error_setx(err, ENOENT,
                                                     "the image's User `%s`: no group `%s` in the "
                                                     "image's /etc/group",
                                                     user, g);
                }
        } else if (!have_gid) {
                gid = 0;
        }
        *ret_uid = (uid_t)uid;
        *ret_gid = (gid_t)gid;
        return 0;
}

int image_read_file(const struct image_ref *img, const char *path, char **ret, struct cs_error *err)
{
        _cleanup_close_ int fd = image_open_file(img, path, err);
        struct stat st;
        size_t len;

        *ret = NULL;
        if (fd == -ENOENT)
                return 0;
        if (fd < 0)
                return fd;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                return cs_error_setx(err, EINVAL, "the image's %s is not a regular file", path);
        return cs_read_fd(fd, path, PASSWD_MAX, ret, &len, err);
}

int image_resolve_user(const struct image_ref *img, const char *user, uid_t *ret_uid,
                       gid_t *ret_gid, struct cs_error *err)
{
        _cleanup_free_ char *passwd = NULL, *group = NULL;
        int r;

        if (!user || !*user)
                return image_lookup_user(NULL, NULL, user, ret_uid, ret_gid, err);
        r = image_read_file(img, "/etc/passwd", &passwd, err);
        if (r == 0)
                r = image_read_file(img, "/etc/group", &group, err);
        if (r < 0)
                return cs_error_wrap(err, "resolve the image's User `%s`", user);
        return image_lookup_user(passwd, group, user, ret_uid, ret_gid, err);
}
