/* The ownership table (path -> what the layer's tar recorded) and what the layers beneath
 * the one being unpacked say about a directory its tar omits. */
#include "layer-private.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/resolve.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the ownership table: path -> what the image recorded ---- */

static uint64_t path_hash(const char *s)
{
        uint64_t h = 1469598103934665603ull;

        for (; *s; s++)
                h = (h ^ (unsigned char)*s) * 1099511628211ull;
        return h;
}

struct meta_rec *meta_find(struct layer_tree *t, const char *path)
{
        size_t i;

        if (!t->cap)
                return NULL;
        for (i = path_hash(path) & (t->cap - 1); t->slots[i].path; i = (i + 1) & (t->cap - 1))
                if (strcmp(t->slots[i].path, path) == 0)
                        return &t->slots[i];
        return NULL;
}

static int meta_grow(struct layer_tree *t, struct cs_error *err)
{
        size_t ncap = t->cap ? t->cap * 2 : 4096;
        struct meta_rec *ns = calloc(ncap, sizeof(*ns));

        if (!ns)
                return cs_error_set(err, ENOMEM, "ownership table");
        for (size_t j = 0; j < t->cap; j++) {
                size_t i;

                if (!t->slots[j].path)
                        continue;
                for (i = path_hash(t->slots[j].path) & (ncap - 1); ns[i].path;
                     i = (i + 1) & (ncap - 1))
                        ;
                ns[i] = t->slots[j];
        }
        free(t->slots);
        t->slots = ns;
        t->cap = ncap;
        return 0;
}

int meta_set(struct layer_tree *t, const char *path, const struct meta_rec *v, struct cs_error *err)
{
        struct meta_rec *r = meta_find(t, path);
        size_t i;
        int ret;

        if (r) {
                char *keep = r->path;
                *r = *v;
                r->path = keep;
                r->layer = t->layer;
                return 0;
        }
        if ((t->n + 1) * 10 >= t->cap * 7 && (ret = meta_grow(t, err)) < 0)
                return ret;
        for (i = path_hash(path) & (t->cap - 1); t->slots[i].path; i = (i + 1) & (t->cap - 1))
                ;
        t->slots[i] = *v;
        t->slots[i].layer = t->layer;
        if (!(t->slots[i].path = strdup(path)))
                return cs_error_set(err, ENOMEM, "ownership table");
        t->n++;
        return 0;
}

bool created_in_this_layer(struct layer_tree *t, const char *path)
{
        struct meta_rec *r = meta_find(t, path);

        return r && r->layer == t->layer;
}

/* "\ooo" escapes of the metadata file undone in place; false for a malformed one. */
static bool path_unescape(char *s)
{
        char *o = s;

        for (char *p = s; *p; p++) {
                if (*p != '\\') {
                        *o++ = *p;
                        continue;
                }
                if (p[1] < '0' || p[1] > '3' || p[2] < '0' || p[2] > '7' || p[3] < '0' ||
                    p[3] > '7')
                        return false;
                *o++ = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
                p += 3;
        }
        *o = '\0';
        return true;
}

/* Lower layer k's ownership table from its metadata file, read the first time it is asked
 * for; NULL when it cannot be read (the directory then keeps the default owner). */
static struct layer_tree *lower_meta(struct layer_tree *t, size_t k)
{
        _cleanup_free_ char *line = NULL;
        struct layer_tree *m;
        size_t cap = 0;
        FILE *f;
        int fd;

        if (t->lower_meta[k])
                return t->lower_meta[k];
        m = calloc(1, sizeof(*m));
        if (!m)
                return NULL;
        m->cache_fd = -1;
        t->lower_meta[k] = m;
        fd = openat(t->lowers[k], LAYER_META, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 || !(f = fdopen(fd, "r"))) {
                if (fd >= 0)
                        close(fd);
                return m;
        }
        while (getline(&line, &cap, f) > 0) {
                /* Dropped: a table that cannot grow leaves the owner at its default. */
                struct cs_error ignored;
                struct meta_rec rec = {0};
                char *path = NULL, *nl = strchr(line, '\n');
                int n = 0;

                if (nl)
                        *nl = '\0';
                if (sscanf(line, "%o %u %u %n", &rec.mode, &rec.uid, &rec.gid, &n) != 3 || !n)
                        continue;
                path = line + n;
                if (path_unescape(path) && meta_set(m, path, &rec, &ignored) < 0)
                        break;
        }
        fclose(f);
        return m;
}

void lower_meta_free(struct layer_tree *t)
{
        for (size_t k = 0; t->lower_meta && k < t->n_lowers; k++)
                if (t->lower_meta[k]) {
                        for (size_t i = 0; i < t->lower_meta[k]->cap; i++)
                                free(t->lower_meta[k]->slots[i].path);
                        free(t->lower_meta[k]->slots);
                        free(t->lower_meta[k]);
                }
        free(t->lower_meta);
        t->lower_meta = NULL;
}

int layer_tree_set_lowers(struct layer_tree *t, const int *layer_dirs, size_t n,
                          struct cs_error *err)
{
        struct meta_rec root;

        lower_meta_free(t);
        t->lowers = layer_dirs;
        t->n_lowers = n;
        t->lower_meta = n ? calloc(n, sizeof(*t->lower_meta)) : NULL;
        if (n && !t->lower_meta)
                return cs_error_set(err, ENOMEM, "layer extraction");
        /* the merged root takes its attributes from the top layer: keep the lower one's */
        if (n && inherit_dir(t, "", &root))
                return meta_set(t, ".", &root, err);
        return 0;
}

/* What the topmost lower layer holding anything at path holds: an O_PATH fd of it (and
 * of that layer's tree, *ret_diff), its stat and that layer's record of it (NULL when it
 * has none). -1 when no layer holds it, or something that is not a directory on the way
 * (a whiteout, a file, a symlink) hides the lower ones. */
static int lower_find(struct layer_tree *t, const char *path, struct stat *st,
                      const struct meta_rec **ret_rec, int *ret_diff)
{
        for (size_t k = 0; k < t->n_lowers; k++) {
                _cleanup_close_ int diff =
                    openat(t->lowers[k], LAYER_DIFF, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                int fd = diff < 0 ? -1 : cs_open_beneath(diff, path, O_PATH);
                struct layer_tree *m;

                if (fd < 0 && errno == ENOENT)
                        continue;
                if (fd < 0 || fstat(fd, st) < 0) {
                        if (fd >= 0)
                                close(fd);
                        return -1;
                }
                m = lower_meta(t, k);
                *ret_rec = m ? meta_find(m, *path ? path : ".") : NULL;
                *ret_diff = cs_take_fd(&diff);
                return fd;
        }
        return -1;
}

/* Overlayfs shows a directory with the attributes of the topmost layer that holds it, so a
 * directory this layer's tar omits (but has entries under) gets what the topmost lower layer
 * holding it as a directory recorded: mode and mtime from its tree, owner from its metadata.
 * A whiteout, a file or a symlink in the way hides the lower ones: false, the default. */
bool inherit_dir(struct layer_tree *t, const char *path, struct meta_rec *rec)
{
        const struct meta_rec *lr = NULL;
        _cleanup_close_ int diff = -1;
        struct stat st;
        _cleanup_close_ int fd = lower_find(t, path, &st, &lr, &diff);

        *rec = (struct meta_rec){.mode = S_IFDIR | 0755};
        if (fd < 0 || !S_ISDIR(st.st_mode))
                return false;
        rec->mode = S_IFDIR | (st.st_mode & 07777);
        rec->mtime_set = true;
        rec->mtime_sec = st.st_mtim.tv_sec;
        rec->mtime_nsec = (int32_t)st.st_mtim.tv_nsec;
        if (lr) {
                rec->uid = lr->uid;
                rec->gid = lr->gid;
        }
        return true;
}

int lower_open_file(struct layer_tree *t, const char *path, struct meta_rec *ret_rec)
{
        const struct meta_rec *lr = NULL;
        _cleanup_close_ int diff = -1;
        struct stat st;
        _cleanup_close_ int fd = lower_find(t, path, &st, &lr, &diff);

        if (fd < 0 || !S_ISREG(st.st_mode))
                return -ENOENT;
        *ret_rec = lr ? *lr : (struct meta_rec){.mode = st.st_mode};
        ret_rec->path = NULL;
        return cs_open_beneath(diff, path, O_RDONLY);
}
