/* The writable store and the read-only ones beside it (CSANDBOX_READONLY_STORE, see
 * store.h): opening them, lookups that try each in turn, the list of all, and what only
 * the writable store may do (rm, tag). Nothing here writes, creates or write-locks a
 * read-only store: they are opened as they are, and store_lock refuses them. */
#include "store.h"
#include "store-private.h"

#include "../../common/cleanup.h"
#include "../../common/error.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The list is read once a process; its skipped entries are reported that once. */
static bool warned;

static void ro_warn(const char *path, const char *why)
{
        if (!warned)
                fprintf(stderr, "csandbox: warning: %s: `%s` ignored: %s\n", STORE_READONLY_ENV,
                        path, why);
}

static bool is_dir_at(int fd, const char *rel)
{
        struct stat st;

        return fstatat(fd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

/* One entry checked and opened; false (warned) when it is not a usable store. */
static bool ro_open_one(const char *path, const struct stat *wst, struct image_store *ret)
{
        struct stat st;
        int fd;

        if (path[0] != '/') {
                ro_warn(path, "not an absolute path");
                return false;
        }
        fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
                ro_warn(path, errno == ELOOP || errno == ENOTDIR ? "a symlink or no directory"
                                                                 : strerror(errno));
                return false;
        }
        if (fstat(fd, &st) < 0 || st.st_uid != getuid()) {
                ro_warn(path, "not owned by you");
                close(fd);
                return false;
        }
        if (wst && st.st_dev == wst->st_dev && st.st_ino == wst->st_ino) {
                close(fd); /* the writable store itself: looked in first anyway */
                return false;
        }
        if (!is_dir_at(fd, "sha256") || !is_dir_at(fd, "layers")) {
                ro_warn(path, "not a csandbox image store (no sha256/ and layers/ in it; name "
                              "the images directory, ${XDG_DATA_HOME}/csandbox/images)");
                close(fd);
                return false;
        }
        ret->fd = fd;
        ret->read_only = true;
        ret->root = strdup(path);
        if (!ret->root) {
                close(fd);
                return false;
        }
        return true;
}

int store_open_readonly(const struct image_store *w, struct image_store **ret, size_t *ret_n,
                        struct cs_error *err)
{
        const char *env = getenv(STORE_READONLY_ENV);
        struct image_store *v;
        struct stat wst;
        bool have_w = w && w->fd >= 0 && fstat(w->fd, &wst) == 0;
        size_t n = 0;
        char *list, *save = NULL;

        *ret = NULL;
        *ret_n = 0;
        if (!env || !*env)
                return 0;
        if (strlen(env) > 16 * PATH_MAX) {
                ro_warn("(the whole list)", "longer than 64 KiB");
                warned = true;
                return 0;
        }
        list = strdup(env);
        v = calloc(STORE_READONLY_MAX, sizeof(*v));
        if (!list || !v) {
                free(list);
                free(v);
                return cs_error_set(err, ENOMEM, "%s", STORE_READONLY_ENV);
        }
        for (char *p = strtok_r(list, ":", &save); p; p = strtok_r(NULL, ":", &save)) {
                if (n == STORE_READONLY_MAX) {
                        ro_warn(p, "more than 16 stores are listed");
                        continue;
                }
                v[n].fd = -1;
                if (ro_open_one(p, have_w ? &wst : NULL, &v[n]))
                        n++;
        }
        warned = true;
        free(list);
        if (n == 0) {
                free(v);
                return 0;
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

void store_close_all(struct image_store *v, size_t n)
{
        for (size_t i = 0; v && i < n; i++)
                store_close(&v[i]);
        free(v);
}

/* A short name as podman and docker read it, which is how `pull` stores it: no registry
 * host in the first component means docker.io, and a single component library/. false when
 * name has a host already or is a digest. */
static bool docker_hub_name(const char *name, char ret[256])
{
        const char *slash = strchr(name, '/');
        size_t first = slash ? (size_t)(slash - name) : strlen(name);

        if (strncmp(name, "sha256:", 7) == 0)
                return false;
        if (slash && (memchr(name, '.', first) || memchr(name, ':', first) ||
                      (first == 9 && strncmp(name, "localhost", 9) == 0)))
                return false;
        return snprintf(ret, 256, "docker.io/%s%s", slash ? "" : "library/", name) < 256;
}

/* Whether full (a stored name) is some registry's HOST/SHORT or HOST/library/SHORT. */
static bool pulled_as(const char *full, const char *canon_short)
{
        const char *slash = strchr(full, '/'), *rest = slash ? slash + 1 : NULL;
        size_t first = slash ? (size_t)(slash - full) : 0;

        if (!slash || !(memchr(full, '.', first) || memchr(full, ':', first) ||
                        (first == 9 && strncmp(full, "localhost", 9) == 0)))
                return false;
        if (strncmp(rest, "library/", 8) == 0 && strcmp(rest + 8, canon_short) == 0)
                return true;
        return strcmp(rest, canon_short) == 0;
}

/* A short name pulled through a search registry or an alias of podman's registries.conf is
 * stored under that registry's full name (quay.io/NAME:TAG), as podman's own lookup finds
 * it: the one stored name, in any store, that is some registry's NAME:TAG. Several: none
 * (the caller's message names the short name; `image ls` shows the full ones). */
static int find_pulled(struct image_store **stores, size_t n, const char *name,
                       char ret[OCI_DIGEST_LEN + 1], struct image_store **ret_store)
{
        /* Dropped: a store whose names cannot be read offers no candidate. */
        struct cs_error ignored = {0};
        char canon[256], found[256] = "";
        struct image_store *where = NULL;

        if (store_name_canonical(name, canon, &ignored) < 0)
                return -ENOENT;
        for (size_t i = 0; i < n; i++) {
                _cleanup_json_ cJSON *names = NULL;
                const cJSON *v;

                if (store_names_read(stores[i], &names, &ignored) < 0)
                        continue;
                cJSON_ArrayForEach(v, names)
                {
                        if (!v->string || !pulled_as(v->string, canon) ||
                            strcmp(found, v->string) == 0)
                                continue;
                        if (found[0])
                                return -ENOENT; /* several: ambiguous */
                        snprintf(found, sizeof(found), "%s", v->string);
                        where = stores[i];
                }
        }
        if (!where || store_resolve(where, found, ret, &ignored) < 0)
                return -ENOENT;
        if (ret_store)
                *ret_store = where;
        return 0;
}

int store_find(struct image_store *w, struct image_store *ro, size_t n_ro, const char *name,
               char ret[OCI_DIGEST_LEN + 1], struct image_store **ret_store, struct cs_error *err)
{
        char hub[256];
        const char *cand[2] = {name, docker_hub_name(name, hub) ? hub : NULL};
        int first = 0;

        for (size_t c = 0; c < 2 && cand[c]; c++) {
                /* Dropped after the first: the message names what the caller asked for. */
                struct cs_error ignored = {0};
                int r = store_resolve(w, cand[c], ret, c == 0 ? err : &ignored);

                if (r == 0 && ret_store)
                        *ret_store = w;
                if (r == 0)
                        return 0;
                if (r != -ENOENT)
                        return c == 0 ? r : first;
                if (c == 0)
                        first = r;
                for (size_t i = 0; i < n_ro; i++) {
                        if (store_resolve(&ro[i], cand[c], ret, &ignored) == 0) {
                                if (ret_store)
                                        *ret_store = &ro[i];
                                return 0;
                        }
                }
        }
        if (cand[1] && n_ro < 16) {
                struct image_store *all[17] = {w};

                for (size_t i = 0; i < n_ro; i++)
                        all[i + 1] = &ro[i];
                if (find_pulled(all, n_ro + 1, name, ret, ret_store) == 0)
                        return 0;
        }
        return first;
}

static bool listed(const struct image_info *v, size_t n, const char *name)
{
        for (size_t i = 0; i < n; i++)
                if (v[i].name && strcmp(v[i].name, name) == 0)
                        return true;
        return false;
}

int store_list_all(struct image_store *w, struct image_store *ro, size_t n_ro,
                   struct image_info **ret, size_t *ret_n, struct cs_error *err)
{
        struct image_info *all = NULL;
        size_t n = 0;
        int r = store_list(w, &all, &n, err);

        if (r < 0)
                return r;
        for (size_t i = 0; i < n_ro; i++) {
                struct image_info *v = NULL, *grown;
                size_t m = 0;
                /* Dropped: an unreadable read-only store lists nothing; the writable one's
                 * images still list. */
                struct cs_error ignored = {0};

                if (store_list(&ro[i], &v, &m, &ignored) < 0)
                        continue;
                grown = realloc(all, (n + m + 1) * sizeof(*all));
                if (!grown) {
                        image_info_free(v, m);
                        image_info_free(all, n);
                        return cs_error_set(err, ENOMEM, "image list");
                }
                all = grown;
                for (size_t j = 0; j < m; j++) {
                        if (listed(all, n, v[j].name)) {
                                free(v[j].name); /* shadowed: a lookup finds the other */
                                continue;
                        }
                        all[n] = v[j];
                        all[n++].store = ro[i].root;
                }
                free(v);
        }
        *ret = all;
        *ret_n = n;
        return 0;
}

/* The read-only store that has name (none in w), or NULL. */
static struct image_store *only_read_only(struct image_store *w, struct image_store *ro,
                                          size_t n_ro, const char *name)
{
        char digest[OCI_DIGEST_LEN + 1];
        struct image_store *at = NULL;
        /* Dropped: only whether some store has it matters here. */
        struct cs_error ignored = {0};

        if (store_find(w, ro, n_ro, name, digest, &at, &ignored) < 0 || at == w)
                return NULL;
        return at;
}

int store_remove_any(struct image_store *w, struct image_store *ro, size_t n_ro, const char *name,
                     struct cs_error *err)
{
        struct image_store *at = only_read_only(w, ro, n_ro, name);

        if (at)
                return cs_error_setx(err, EROFS,
                                     "image `%s` is in the read-only store `%s` (%s): it cannot "
                                     "be removed from here; remove it where that store is "
                                     "writable, with `csandbox image rm`",
                                     name, at->root, STORE_READONLY_ENV);
        return store_remove(w, name, err);
}

int store_tag(struct image_store *w, struct image_store *ro, size_t n_ro, const char *src,
              const char *new_name, struct cs_error *err)
{
        _cleanup_close_ int lock = -1;
        _cleanup_json_ cJSON *names = NULL;
        char digest[OCI_DIGEST_LEN + 1], canon[256];
        struct image_store *at;
        int r;

        r = store_name_canonical(new_name, canon, err);
        if (r < 0)
                return r;
        if (strncmp(canon, "sha256:", 7) == 0)
                return cs_error_setx(err, EINVAL, "`%s` is a digest, not a name", new_name);
        at = only_read_only(w, ro, n_ro, src);
        if (at)
                return cs_error_setx(err, EROFS,
                                     "image `%s` is in the read-only store `%s` (%s): names are "
                                     "given in the writable store only; pull or build it there "
                                     "first",
                                     src, at->root, STORE_READONLY_ENV);
        lock = store_lock(w, err);
        if (lock < 0)
                return lock;
        r = store_resolve(w, src, digest, err);
        if (r == 0)
                r = store_names_read(w, &names, err);
        if (r < 0)
                return r;
        cJSON_DeleteItemFromObjectCaseSensitive(names, canon);
        if (!cJSON_AddStringToObject(names, canon, digest))
                return cs_error_set(err, ENOMEM, "names.json");
        return store_names_write(w, names, err);
}

int store_layer_hold_any(struct image_store *w, struct image_store *ro, size_t n_ro,
                         const char *diff_id, struct cs_error *err)
{
        int fd = store_layer_hold(w, diff_id, err);

        for (size_t i = 0; fd == -ENOENT && i < n_ro; i++)
                fd = store_layer_hold(&ro[i], diff_id, err);
        return fd;
}
