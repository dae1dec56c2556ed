/* A profile's .env (reference §1.3): read bounded through the profile dir fd, never through
 * a link, and parsed as claude-profile parses it. */
#include "profile.h"

#include "../common/cleanup.h"
#include "../common/strv.h"
#include "../common/error.h"
#include "../common/fileio.h"
#include "../spec/spec.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define ENV_FILE_MAX (1u << 20)

/* What is printed comes from the sandbox (a link target): no terminal escapes. */
static void printable_copy(char *dst, size_t size, const char *src)
{
        size_t i = 0;

        for (; *src && i + 1 < size; src++)
                dst[i++] = ((unsigned char)*src < 0x20 || *src == 0x7f) ? '?' : *src;
        dst[i] = '\0';
}

/* Python's str.isspace() over ASCII, and the ASCII line breaks of str.splitlines(). */
static bool env_space(char ch)
{
        return ch == ' ' || (ch >= '\t' && ch <= '\r') || (ch >= 0x1c && ch <= 0x1f);
}
/* How many bytes at p end a line as Python's str.splitlines() ends one (claude-profile
 * reads .env that way): the ASCII breaks, and U+0085, U+2028 and U+2029 in UTF-8. 0: none. */
static size_t env_line_break(const char *p, const char *end)
{
        const unsigned char *u = (const unsigned char *)p;
        char ch = *p;

        if (ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f' || (ch >= 0x1c && ch <= 0x1e))
                return 1;
        if (u[0] == 0xc2 && end - p >= 2 && u[1] == 0x85)
                return 2;
        if (u[0] == 0xe2 && end - p >= 3 && u[1] == 0x80 && (u[2] == 0xa8 || u[2] == 0xa9))
                return 3;
        return 0;
}

struct env_pair {
        char *name;
        char *value;
        size_t pos;  /* line order */
        bool winner; /* the one kept for its name */
};

static int env_pair_by_name(const void *a, const void *b)
{
        const struct env_pair *x = a, *y = b;
        int c = strcmp(x->name, y->name);

        if (c)
                return c;
        return x->pos < y->pos ? -1 : x->pos > y->pos;
}
static int env_pair_by_pos(const void *a, const void *b)
{
        const struct env_pair *x = a, *y = b;

        return x->pos < y->pos ? -1 : x->pos > y->pos;
}

void profile_env_free(struct profile_env *e)
{
        if (!e)
                return;
        for (size_t i = 0; i < e->n; i++) {
                free(e->names[i]);
                free(e->values[i]);
        }
        free(e->names);
        free(e->values);
        memset(e, 0, sizeof(*e));
}

/* The reference builds a dict: a repeated name keeps its first position and takes its
 * last value. Sorting by (name, position) finds each name's group in O(n log n). */
static int env_dedupe(struct env_pair *pairs, size_t n, struct profile_env *ret)
{
        size_t kept = 0;

        if (n > 1)
                qsort(pairs, n, sizeof(*pairs), env_pair_by_name);
        for (size_t i = 0; i < n;) {
                size_t j = i + 1;

                while (j < n && strcmp(pairs[j].name, pairs[i].name) == 0)
                        j++;
                if (j - 1 != i) {
                        char *last = pairs[j - 1].value;

                        pairs[j - 1].value = pairs[i].value;
                        pairs[i].value = last;
                }
                pairs[i].winner = true;
                kept++;
                i = j;
        }
        if (n > 1)
                qsort(pairs, n, sizeof(*pairs), env_pair_by_pos);
        ret->names = calloc(kept ? kept : 1, sizeof(char *));
        ret->values = calloc(kept ? kept : 1, sizeof(char *));
        if (!ret->names || !ret->values)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                if (!pairs[i].winner)
                        continue;
                ret->names[ret->n] = cs_take_ptr(&pairs[i].name);
                ret->values[ret->n] = cs_take_ptr(&pairs[i].value);
                ret->n++;
        }
        return 0;
}

/* §1.3: strip each line; skip blank lines, '#' comments and lines without '='; split at the
 * first '='; strip name and value; drop one pair of matching surrounding quotes. */
int profile_env_parse(const char *buf, size_t len, struct profile_env *ret)
{
        struct env_pair *pairs = NULL;
        size_t n = 0, cap = 0;
        struct profile_env e = {0};
        const char *p = buf, *end = buf + len;
        int r = 0;

        while (p < end) {
                const char *ls = p, *le = p, *eq;

                size_t brk = 0;

                while (le < end && !(brk = env_line_break(le, end)))
                        le++;
                p = le;
                if (p < end && *p == '\r' && p + 1 < end && p[1] == '\n')
                        p++;
                if (p < end)
                        p += brk;
                while (ls < le && env_space(*ls))
                        ls++;
                while (le > ls && env_space(le[-1]))
                        le--;
                if (ls == le || *ls == '#')
                        continue;
                eq = memchr(ls, '=', (size_t)(le - ls));
                if (!eq)
                        continue;

                const char *ns = ls, *ne = eq, *vs = eq + 1, *ve = le;

                while (ne > ns && env_space(ne[-1]))
                        ne--;
                while (vs < ve && env_space(*vs))
                        vs++;
                if (ve - vs >= 2 && (*vs == '"' || *vs == '\'') && ve[-1] == *vs) {
                        vs++;
                        ve--;
                }
                /* "=value" is kept with its empty name: the launch says it skips it. */
                if (n == cap) {
                        size_t ncap = cap ? cap * 2 : 16;
                        struct env_pair *np = realloc(pairs, ncap * sizeof(*pairs));

                        if (!np) {
                                r = -ENOMEM;
                                goto out;
                        }
                        pairs = np;
                        cap = ncap;
                }
                pairs[n] = (struct env_pair){.pos = n};
                pairs[n].name = strndup(ns, (size_t)(ne - ns));
                pairs[n].value = strndup(vs, (size_t)(ve - vs));
                n++;
                if (!pairs[n - 1].name || !pairs[n - 1].value) {
                        r = -ENOMEM;
                        goto out;
                }
        }
        r = env_dedupe(pairs, n, &e);
        if (r == 0) {
                *ret = e;
                e = (struct profile_env){0};
        }
out:
        for (size_t i = 0; i < n; i++) {
                free(pairs[i].name);
                free(pairs[i].value);
        }
        free(pairs);
        profile_env_free(&e);
        return r;
}

int profile_env_load(const struct profile *p, bool create, struct profile_env *ret,
                     struct cs_error *err)
{
        _cleanup_free_ char *path = NULL, *buf = NULL;
        _cleanup_close_ int fd = -1;
        struct stat st;
        size_t len;
        int r;

        if (asprintf(&path, "%s/.env", p->dir) < 0) {
                path = NULL;
                return cs_error_set(err, ENOMEM, "load %s/.env", p->dir);
        }
        /* One open decides: ELOOP is a link (O_NOFOLLOW, dangling or not), ENOENT is
         * nothing at all, and there is no lstat-then-open window. */
        for (int attempt = 0; attempt < 2 && fd < 0; attempt++) {
                fd = openat(p->dir_fd, ".env",
                            O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
                if (fd >= 0 || errno != ENOENT)
                        break;
                if (!create) {
                        /* §1.5: a host launch reads .env when there is one, creates none. */
                        *ret = (struct profile_env){0};
                        return 0;
                }
                /* §2.4 #17: created empty so the read-only pin has a file to mount. */
                fd = openat(p->dir_fd, ".env",
                            O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0600);
                if (fd < 0 && errno != EEXIST)
                        return cs_error_set(err, errno, "create %s", path);
        }
        if (fd < 0 && errno == ELOOP) {
                char target[PATH_MAX], shown[256];
                ssize_t n = readlinkat(p->dir_fd, ".env", target, sizeof(target) - 1);

                target[n > 0 ? n : 0] = '\0';
                printable_copy(shown, sizeof(shown), n > 0 ? target : "?");
                return cs_error_setx(err, ELOOP,
                                     "Refusing to use %s: it is a symlink (to %s), not a file "
                                     "claude-profile or csandbox wrote. Check it and remove it "
                                     "before launching this profile.",
                                     path, shown);
        }
        if (fd < 0)
                return cs_error_set(err, errno, "open %s", path);
        if (fstat(fd, &st) < 0)
                return cs_error_set(err, errno, "stat %s", path);
        if (!S_ISREG(st.st_mode))
                return cs_error_setx(err, EINVAL,
                                     "%s is not a regular file. Check it and remove it before "
                                     "launching this profile",
                                     path);
        r = cs_read_fd(fd, path, ENV_FILE_MAX, &buf, &len, err);
        if (r < 0)
                return r;
        if (memchr(buf, '\0', len))
                return cs_error_setx(err, EINVAL,
                                     "%s contains a NUL byte, which no environment variable "
                                     "can carry",
                                     path);
        r = profile_env_parse(buf, len, ret);
        if (r < 0)
                return cs_error_set(err, -r, "parse %s", path);
        return 0;
}

int profile_env_read(const struct profile *p, struct profile_env *ret, struct cs_error *err)
{
        return profile_env_load(p, false, ret, err);
}

int profile_env_create(const struct profile *p, struct cs_error *err)
{
        int fd = openat(p->dir_fd, ".env",
                        O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0600);

        if (fd >= 0) {
                close(fd);
                return 0;
        }
        if (errno == EEXIST)
                return 0;
        return cs_error_set(err, errno, "create %s/.env", p->dir);
}
