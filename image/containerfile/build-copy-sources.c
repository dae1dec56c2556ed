/* COPY and ADD's sources: the words expanded (globs matched entry by entry, the ignore file
 * applied) and each opened beneath the build context or inside another stage's root. */
#include "build-copy-ctx.h"
#include "../layer/layer.h"

#include "../../common/cleanup.h"
#include "../../common/error.h"
#include "../../common/resolve.h"
#include "../../common/strv.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int copy_src_open(struct copy_ctx *x, const char *rel, int flags)
{
        if (x->c->from_context)
                return cs_open_beneath_links(x->c->src_root_fd, rel, flags);
        return cs_open_in_root(x->c->src_root_fd, *rel ? rel : ".", flags);
}

/* ---- shared with build-commit.c ---- */

static int name_cmp(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

void build_names_free(char **v, size_t n)
{
        strv_free(&v, &n);
}

int build_list_dir(int dfd, size_t max, char ***ret, size_t *ret_n, const char *shown,
                   struct cs_error *err)
{
        int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_closedir_ DIR *d = fd < 0 ? NULL : fdopendir(fd);
        struct dirent *de;
        char **v = NULL;
        size_t n = 0;

        if (!d) {
                if (fd >= 0)
                        close(fd);
                return cs_error_set(err, errno, "read the directory `%s`", *shown ? shown : ".");
        }
        while ((errno = 0, de = readdir(d))) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (n >= max) {
                        strv_free(&v, &n);
                        return cs_error_setx(err, E2BIG,
                                             "the directory `%s` has more than %zu entries",
                                             *shown ? shown : ".", max);
                }
                if (strv_push_dup(&v, &n, de->d_name) < 0) {
                        strv_free(&v, &n);
                        return cs_error_set(err, ENOMEM, "read `%s`", shown);
                }
        }
        if (errno) {
                strv_free(&v, &n);
                return cs_error_set(err, errno, "read the directory `%s`", *shown ? shown : ".");
        }
        if (n)
                qsort(v, n, sizeof(*v), name_cmp);
        *ret = v;
        *ret_n = n;
        return 0;
}

/* ---- sources ---- */

/* A source word made a path relative to the source root: leading '/'s and `.` dropped,
 * `..` taken back (out of the context: refused; above another stage's root: its root). */
static int src_normalize(struct copy_ctx *x, const char *word, char **ret)
{
        _cleanup_free_ char *p = strdup(word);
        char *w;

        if (!p)
                return cs_error_set(x->err, ENOMEM, "%s", x->c->what);
        if (strlen(p) > LAYER_DEFAULT_MAX_PATH)
                return cs_error_setx(x->err, ENAMETOOLONG, "%s: source `%.64s...` is too long",
                                     x->c->what, word);
        build_path_clean(p);
        w = p;
        while (*w == '/')
                w++;
        if (strcmp(w, "..") == 0 || strncmp(w, "../", 3) == 0) {
                char shown[256];

                layer_sanitize(word, shown, sizeof(shown));
                return cs_error_setx(x->err, EPERM,
                                     "%s: source `%s` is outside the %s; COPY and ADD can only "
                                     "name files inside it",
                                     x->c->what, shown,
                                     x->c->from_context ? "build context" : "source stage's root");
        }
        if (strcmp(w, ".") == 0)
                w = "";
        *ret = strdup(w);
        return *ret ? 0 : cs_error_set(x->err, ENOMEM, "%s", x->c->what);
}

bool copy_ignored(struct copy_ctx *x, const char *rel)
{
        return x->c->from_context && *rel && build_ignore_excludes(x->ign, rel);
}

/* `\x` of a literal component of a glob is x. */
static void unescape(char *s)
{
        char *o = s;

        for (; *s; s++) {
                if (*s == '\\' && s[1])
                        s++;
                *o++ = *s;
        }
        *o = '\0';
}

/* The paths that the components left in rest match under prefix, appended in order. */
static int glob_expand(struct copy_ctx *x, const char *prefix, const char *rest, char ***out,
                       size_t *n_out)
{
        const char *end = strchrnul(rest, '/');
        _cleanup_free_ char *comp = strndup(rest, (size_t)(end - rest));
        const char *next = *end ? end + 1 : end;
        struct build_glob *g = NULL;
        _cleanup_close_ int dfd = -1;
        char **names = NULL;
        size_t n = 0;
        int r;

        if (!comp)
                return cs_error_set(x->err, ENOMEM, "%s", x->c->what);
        if (!build_glob_has_wildcard(comp, strlen(comp))) {
                _cleanup_free_ char *p = NULL;

                unescape(comp);
                p = copy_path_join(prefix, comp);
                if (!p)
                        return cs_error_setx(x->err, ENAMETOOLONG, "%s: a source path is too long",
                                             x->c->what);
                if (!*next)
                        return strv_push(out, n_out, cs_take_ptr(&p)) < 0
                                   ? cs_error_set(x->err, ENOMEM, "%s", x->c->what)
                                   : 0;
                return glob_expand(x, p, next, out, n_out);
        }
        dfd = copy_src_open(x, prefix, O_RDONLY | O_DIRECTORY);
        if (dfd < 0)
                return 0; /* nothing there matches */
        r = build_glob_compile(comp, false, &g, x->err);
        if (r == 0)
                r = build_list_dir(dfd, BUILD_MAX_DIR_ENTRIES, &names, &n, prefix, x->err);
        for (size_t i = 0; r == 0 && i < n; i++) {
                _cleanup_free_ char *p = NULL;

                if (!build_glob_match(g, names[i]))
                        continue;
                p = copy_path_join(prefix, names[i]);
                if (!p)
                        r = cs_error_setx(x->err, ENAMETOOLONG, "%s: a source path is too long",
                                          x->c->what);
                else if (*n_out >= BUILD_MAX_DIR_ENTRIES)
                        r = cs_error_setx(x->err, E2BIG, "%s: more than %d sources", x->c->what,
                                          BUILD_MAX_DIR_ENTRIES);
                else if (!*next)
                        r = copy_ignored(x, p) ? 0
                            : strv_push(out, n_out, cs_take_ptr(&p)) < 0
                                ? cs_error_set(x->err, ENOMEM, "%s", x->c->what)
                                : 0;
                else
                        r = glob_expand(x, p, next, out, n_out);
        }
        build_names_free(names, n);
        build_glob_free(g);
        return r;
}

/* Every source word expanded: its paths relative to the source root, in order. */
int copy_sources_expand(struct copy_ctx *x, char ***ret, size_t *ret_n)
{
        char **v = NULL;
        size_t n = 0;
        int r = 0;

        for (size_t i = 0; r == 0 && i < x->c->n_srcs; i++) {
                _cleanup_free_ char *norm = NULL;
                size_t before = n;
                char shown[256];

                layer_sanitize(x->c->srcs[i], shown, sizeof(shown));
                r = src_normalize(x, x->c->srcs[i], &norm);
                if (r < 0)
                        break;
                if (!build_glob_has_wildcard(norm, strlen(norm))) {
                        if (copy_ignored(x, norm))
                                r = cs_error_setx(x->err, ENOENT,
                                                  "%s: source `%s` is excluded by the ignore "
                                                  "file (.containerignore or .dockerignore); take "
                                                  "it back with a `!` pattern",
                                                  x->c->what, shown);
                        else if (strv_push(&v, &n, cs_take_ptr(&norm)) < 0)
                                r = cs_error_set(x->err, ENOMEM, "%s", x->c->what);
                        continue;
                }
                r = glob_expand(x, "", norm, &v, &n);
                if (r == 0 && n == before)
                        r = cs_error_setx(
                            x->err, ENOENT, "%s: no file in the %s matches `%s`", x->c->what,
                            x->c->from_context ? "build context" : "source stage", shown);
        }
        if (r < 0) {
                strv_free(&v, &n);
                return r;
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

/* The source at rel opened (O_RDONLY, links taken while they stay inside) and stat'ed. */
int copy_src_open_checked(struct copy_ctx *x, const char *rel, struct stat *st, char shown[256])
{
        int fd = copy_src_open(x, rel, O_RDONLY | O_NONBLOCK);

        layer_sanitize(*rel ? rel : ".", shown, 256);
        if (fd < 0) {
                if (errno == EXDEV || errno == ELOOP)
                        return cs_error_setx(x->err, EPERM,
                                             "%s: source `%s` is a symlink that leads out of the "
                                             "build context; copy what it points to into the "
                                             "context instead",
                                             x->c->what, shown);
                if (errno == ENOENT || errno == ENOTDIR)
                        return cs_error_setx(x->err, ENOENT, "%s: source `%s` is not in the %s",
                                             x->c->what, shown,
                                             x->c->from_context ? "build context" : "source stage");
                return cs_error_set(x->err, errno, "%s: open source `%s`", x->c->what, shown);
        }
        if (fstat(fd, st) < 0 || (!S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode))) {
                close(fd);
                return cs_error_setx(x->err, EINVAL,
                                     "%s: source `%s` is neither a file nor a directory",
                                     x->c->what, shown);
        }
        return fd;
}
