#include "store.h"
#include "store-private.h"

#include "../../common/cleanup.h"
#include "../../common/error.h"
#include "../../common/fileio.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NAMES_MAX (16u << 20)

/* ---- the store's directories and locks ---- */

int store_default_root(char **ret, struct cs_error *err)
{
        const char *xdg = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
        char *p = NULL;

        if (xdg && xdg[0] == '/')
                p = (asprintf(&p, "%s/csandbox/images", xdg) < 0) ? NULL : p;
        else if (home && home[0] == '/')
                p = (asprintf(&p, "%s/.local/share/csandbox/images", home) < 0) ? NULL : p;
        else
                return cs_error_setx(err, ENOENT,
                                     "cannot place the image store: neither XDG_DATA_HOME nor HOME "
                                     "is an absolute path");
        if (!p)
                return cs_error_set(err, ENOMEM, "image store");
        *ret = p;
        return 0;
}

int store_open(const char *root, struct image_store *ret, struct cs_error *err)
{
        _cleanup_free_ char *dflt = NULL;
        struct image_store s = {.fd = -1};
        int r;

        if (!root) {
                r = store_default_root(&dflt, err);
                if (r < 0)
                        return r;
                root = dflt;
        }
        r = cs_mkdir_parents(root, 0700, err);
        if (r < 0)
                return cs_error_wrap(err, "the image store");
        s.fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (s.fd < 0)
                return cs_error_set(err, errno, "open the image store `%s`", root);
        for (const char *const *d = (const char *const[]){"sha256", "tmp", "layers",
                                                          "layers/sha256", "layers/blobs", NULL};
             *d; d++)
                if (mkdirat(s.fd, *d, 0700) < 0 && errno != EEXIST) {
                        r = cs_error_set(err, errno, "create `%s/%s`", root, *d);
                        close(s.fd);
                        return r;
                }
        s.root = strdup(root);
        if (!s.root) {
                close(s.fd);
                return cs_error_set(err, ENOMEM, "image store");
        }
        *ret = s;
        return 0;
}

void store_close(struct image_store *s)
{
        if (s->fd >= 0)
                close(s->fd);
        s->fd = -1;
        free(s->root);
        s->root = NULL;
}

/* The store's lock directory: ROOT.locks, beside the store and never inside it (see
 * store.h: a session sees the store and could hold any lock file in it forever). */
static int locks_dir(struct image_store *s, struct cs_error *err)
{
        char dir[PATH_MAX];
        size_t len = strlen(s->root);
        int fd;

        while (len > 1 && s->root[len - 1] == '/')
                len--;
        if (len + sizeof(STORE_LOCKS_SUFFIX) > sizeof(dir))
                return cs_error_setx(err, ENAMETOOLONG, "the image store's path is too long");
        memcpy(dir, s->root, len);
        memcpy(dir + len, STORE_LOCKS_SUFFIX, sizeof(STORE_LOCKS_SUFFIX));
        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                return cs_error_set(err, errno, "create the store's lock directory `%s`", dir);
        fd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return cs_error_set(err, errno, "open the store's lock directory `%s`", dir);
        return fd;
}

int store_lock_named(struct image_store *s, const char *name, struct cs_error *err)
{
        _cleanup_close_ int dfd = -1;
        int fd, r;

        if (s->read_only)
                return cs_error_setx(err, EROFS, "the image store `%s` is read-only (%s)", s->root,
                                     STORE_READONLY_ENV);
        dfd = locks_dir(s, err);
        if (dfd < 0)
                return dfd;
        fd = openat(dfd, name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return cs_error_set(err, errno, "open `%s%s/%s`", s->root, STORE_LOCKS_SUFFIX,
                                    name);
        while ((r = flock(fd, LOCK_EX)) < 0 && errno == EINTR)
                ;
        if (r < 0) {
                r = cs_error_set(err, errno, "lock `%s%s/%s`", s->root, STORE_LOCKS_SUFFIX, name);
                close(fd);
                return r;
        }
        return fd;
}

/* The store-wide lock, held while names change and images appear or go. */
int store_lock(struct image_store *s, struct cs_error *err)
{
        return store_lock_named(s, "store", err);
}

const char *store_digest_hex(const char *digest)
{
        return digest + 7;
}

/* ---- names ---- */

int store_name_canonical(const char *name, char ret[256], struct cs_error *err)
{
        const char *slash, *colon;
        size_t len = strlen(name);

        if (len == 0 || len > 200)
                return cs_error_setx(err, EINVAL, "image name `%.200s` is empty or too long", name);
        if (!isalnum((unsigned char)name[0]))
                return cs_error_setx(err, EINVAL,
                                     "image name `%s` must start with a letter or digit", name);
        for (const char *p = name; *p; p++)
                if (!isalnum((unsigned char)*p) && !strchr("._-/:@", *p))
                        return cs_error_setx(err, EINVAL,
                                             "image name `%s` has a character outside "
                                             "[A-Za-z0-9._-/:@]",
                                             name);
        slash = strrchr(name, '/');
        colon = strrchr(name, ':');
        if (colon && (!slash || colon > slash)) {
                if (colon[1] == '\0')
                        return cs_error_setx(err, EINVAL, "image name `%s` has an empty tag", name);
                snprintf(ret, 256, "%s", name);
        } else {
                snprintf(ret, 256, "%s:latest", name);
        }
        return 0;
}

int store_names_read(struct image_store *s, cJSON **ret, struct cs_error *err)
{
        _cleanup_free_ char *buf = NULL;
        size_t len;
        cJSON *j;
        int r = cs_read_file_at(s->fd, "names.json", NAMES_MAX, true, &buf, &len, err);

        if (r == -ENOENT) {
                *ret = cJSON_CreateObject();
                return *ret ? 0 : cs_error_set(err, ENOMEM, "names.json");
        }
        if (r < 0)
                return cs_error_wrap(err, "the image store's names");
        j = cJSON_ParseWithLength(buf, len);
        if (!cJSON_IsObject(j)) {
                cJSON_Delete(j);
                return cs_error_setx(err, EINVAL,
                                     "`%s/names.json` is corrupt; remove it and re-import the "
                                     "images",
                                     s->root);
        }
        *ret = j;
        return 0;
}

int store_names_write(struct image_store *s, cJSON *names, struct cs_error *err)
{
        _cleanup_free_ char *text = NULL;

        if (s->read_only)
                return cs_error_setx(err, EROFS, "the image store `%s` is read-only (%s)", s->root,
                                     STORE_READONLY_ENV);
        text = cJSON_Print(names);
        if (!text)
                return cs_error_set(err, ENOMEM, "names.json");
        if (cs_write_file_durable(s->fd, "names.json", text, strlen(text), 0600, err) < 0)
                return cs_error_wrap(err, "the image store `%s`", s->root);
        return 0;
}

bool store_image_present(struct image_store *s, const char *digest)
{
        char path[100];
        struct stat st;

        snprintf(path, sizeof(path), "sha256/%.64s", store_digest_hex(digest));
        return fstatat(s->fd, path, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

int store_resolve(struct image_store *s, const char *name, char ret[OCI_DIGEST_LEN + 1],
                  struct cs_error *err)
{
        _cleanup_json_ cJSON *names = NULL;
        char canon[256];
        const cJSON *v;
        int r;

        if (strncmp(name, "sha256:", 7) == 0) {
                /* Dropped: not a digest: reported as "no image" below. */
                struct cs_error ignored;
                if (oci_digest_check(name, "image", &ignored) == 0 &&
                    store_image_present(s, name)) {
                        snprintf(ret, OCI_DIGEST_LEN + 1, "%s", name);
                        return 0;
                }
                return cs_error_setx(err, ENOENT, "no image `%s` in the store", name);
        }
        r = store_name_canonical(name, canon, err);
        if (r < 0)
                return r;
        r = store_names_read(s, &names, err);
        if (r < 0)
                return r;
        v = cJSON_GetObjectItemCaseSensitive(names, canon);
        if (!cJSON_IsString(v) || oci_digest_check(v->valuestring, canon, err) < 0 ||
            !store_image_present(s, v->valuestring))
                return cs_error_setx(err, ENOENT,
                                     "no image named `%s` in the store; see `csandbox image ls`, "
                                     "or import it with `csandbox image import SRC --name %s`",
                                     canon, canon);
        snprintf(ret, OCI_DIGEST_LEN + 1, "%s", v->valuestring);
        return 0;
}

/* ---- temporary directories ---- */

/* A fresh tmp/PREFIX-XXXXXX, flocked by us for as long as the returned fd is open. Between
 * mkdtemp and our flock, another process's sweep (store_tmp_sweep) may take the new,
 * unlocked directory for a stale one and remove it: then we never hold it (it is gone
 * before we open it, its lock is the sweep's, or we lock it only once it is unlinked), and
 * we make another. */
int store_tmp_create(struct image_store *s, const char *prefix, char ret_name[64],
                     struct cs_error *err)
{
        char path[PATH_MAX];

        if (s->read_only)
                return cs_error_setx(err, EROFS, "the image store `%s` is read-only (%s)", s->root,
                                     STORE_READONLY_ENV);
        for (int attempt = 0; attempt < 16; attempt++) {
                struct stat st;
                int fd, e;

                snprintf(path, sizeof(path), "%s/tmp/%s-XXXXXX", s->root, prefix);
                if (!mkdtemp(path))
                        return cs_error_set(err, errno, "create a temporary directory in `%s/tmp`",
                                            s->root);
                snprintf(ret_name, 64, "%s", strrchr(path, '/') + 1);
                fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
                if (fd < 0 && errno == ENOENT)
                        continue;
                if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0) {
                        if (fstat(fd, &st) == 0 && st.st_nlink > 0)
                                return fd;
                        close(fd);
                        continue;
                }
                e = errno;
                if (fd >= 0)
                        close(fd);
                if (e == EWOULDBLOCK)
                        continue;
                return cs_error_set(err, e, "lock `%s`", path);
        }
        return cs_error_setx(err, EAGAIN,
                             "create a temporary directory in `%s/tmp`: another process kept "
                             "removing it; is something else emptying that directory?",
                             s->root);
}

int store_tmp_remove(struct image_store *s, const char *name, struct cs_error *err)
{
        _cleanup_close_ int tfd = openat(s->fd, "tmp", O_PATH | O_DIRECTORY | O_CLOEXEC);

        if (tfd < 0)
                return cs_error_set(err, errno, "open `%s/tmp`", s->root);
        return cs_remove_at(tfd, name, err);
}

/* Remove what no live process holds in tmp/: killed imports and interrupted removals. */
int store_tmp_sweep(struct image_store *s, size_t *ret_n, struct cs_error *err)
{
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        int fd = openat(s->fd, "tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        size_t n = 0;

        if (fd < 0 || !(d = fdopendir(fd))) {
                if (fd >= 0)
                        close(fd);
                return cs_error_set(err, errno, "open `%s/tmp`", s->root);
        }
        while ((de = readdir(d))) {
                _cleanup_close_ int e = -1;
                int r;

                if (de->d_name[0] == '.')
                        continue;
                e = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (e >= 0 && flock(e, LOCK_EX | LOCK_NB) < 0)
                        continue; /* an import or removal in progress */
                r = cs_remove_at(dirfd(d), de->d_name, err);
                if (r == -EPERM || r == -EACCES)
                        /* a build step's tree, owned by the caller's subordinate ids */
                        return cs_error_setx(err, -r,
                                             "remove the stale `%s/tmp/%s`: it holds files of "
                                             "your subordinate ids (a build killed while a step "
                                             "ran), which the next `csandbox image build` removes",
                                             s->root, de->d_name);
                if (r < 0)
                        return cs_error_wrap(err, "remove the stale `%s/tmp/%s`", s->root,
                                             de->d_name);
                n++;
        }
        if (ret_n)
                *ret_n = n;
        return 0;
}

void image_info_free(struct image_info *v, size_t n)
{
        for (size_t i = 0; v && i < n; i++)
                free(v[i].name);
        free(v);
}

static int info_cmp(const void *a, const void *b)
{
        const struct image_info *x = a, *y = b;

        return strcmp(x->name ? x->name : "", y->name ? y->name : "");
}

int store_list(struct image_store *s, struct image_info **ret, size_t *ret_n, struct cs_error *err)
{
        _cleanup_json_ cJSON *names = NULL;
        struct image_info *v = NULL;
        const cJSON *e;
        size_t n = 0;
        int r = store_names_read(s, &names, err);

        if (r < 0)
                return r;
        v = calloc((size_t)cJSON_GetArraySize(names) + 1, sizeof(*v));
        if (!v)
                return cs_error_set(err, ENOMEM, "image list");
        cJSON_ArrayForEach(e, names)
        {
                _cleanup_free_ char *info = NULL;
                /* Dropped: an entry that is no digest is skipped, as an unreadable one. */
                struct cs_error ignored;
                char ipath[100];
                size_t len;
                cJSON *j;

                if (!cJSON_IsString(e) || oci_digest_check(e->valuestring, "name", &ignored) < 0 ||
                    !store_image_present(s, e->valuestring))
                        continue; /* a name whose import never completed */
                snprintf(ipath, sizeof(ipath), "sha256/%.64s/info.json",
                         store_digest_hex(e->valuestring));
                if (cs_read_file_at(s->fd, ipath, INFO_MAX, true, &info, &len, &ignored) < 0 ||
                    !(j = cJSON_ParseWithLength(info, len)))
                        continue;
                v[n].name = strdup(e->string);
                snprintf(v[n].digest, sizeof(v[n].digest), "%s", e->valuestring);
                if (cJSON_IsNumber(cJSON_GetObjectItem(j, "size")))
                        v[n].size = (uint64_t)cJSON_GetObjectItem(j, "size")->valuedouble;
                if (cJSON_IsNumber(cJSON_GetObjectItem(j, "files")))
                        v[n].files = (uint64_t)cJSON_GetObjectItem(j, "files")->valuedouble;
                if (cJSON_IsNumber(cJSON_GetObjectItem(j, "created")))
                        v[n].created = (int64_t)cJSON_GetObjectItem(j, "created")->valuedouble;
                cJSON_Delete(j);
                if (v[n].name)
                        n++;
        }
        if (n > 1)
                qsort(v, n, sizeof(*v), info_cmp);
        *ret = v;
        *ret_n = n;
        return 0;
}

int store_inspect(struct image_store *s, const char *name, char **ret_json, struct cs_error *err)
{
        char digest[OCI_DIGEST_LEN + 1], path[100];
        size_t len;
        int r = store_resolve(s, name, digest, err);

        if (r < 0)
                return r;
        snprintf(path, sizeof(path), "sha256/%.64s/config.json", store_digest_hex(digest));
        r = cs_read_file_at(s->fd, path, OCI_CONFIG_MAX, true, ret_json, &len, err);
        return r < 0 ? cs_error_wrap(err, "image `%s`", name) : 0;
}
