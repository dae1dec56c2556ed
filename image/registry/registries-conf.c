/* registries.conf (see registries-conf.h): the files, their merge, short names and where a
 * reference is fetched from. */
#include "registries-conf.h"
#include "toml.h"

#include "../../common/cleanup.h"
#include "../../common/error.h"
#include "../../common/fileio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FILES_MAX      128u
#define REGISTRIES_MAX 256u
#define ALIASES_MAX    4096u
#define SEARCH_MAX     16u
#define MIRRORS_MAX    (REGISTRY_ENDPOINTS_MAX - 1)
#define SYSTEM_CONF    "/etc/containers/registries.conf"

enum mode { MODE_ENFORCING, MODE_PERMISSIVE, MODE_DISABLED };
enum pull_from { FROM_ALL, FROM_DIGEST, FROM_TAG };

struct mirror {
        char location[256];
        bool insecure;
        enum pull_from from;
};

struct reg_entry {
        char prefix[256], location[256];
        bool insecure, blocked, digest_only;
        struct mirror mirrors[MIRRORS_MAX];
        size_t n_mirrors;
        size_t file;
        unsigned line;
};

struct alias {
        char name[256], value[256];
        size_t file;
};

struct regconf {
        char *files[FILES_MAX];
        size_t n_files;
        char search[SEARCH_MAX][256];
        size_t n_search, search_file;
        bool search_set, mode_set;
        struct alias *aliases, *cached; /* configured ones first, then podman's cache */
        size_t n_aliases, n_cached;
        struct reg_entry *regs;
        size_t n_regs;
        enum mode mode;
};

struct regconf *regconf_new(void)
{
        return calloc(1, sizeof(struct regconf));
}

void regconf_free(struct regconf *c)
{
        if (!c)
                return;
        for (size_t i = 0; i < c->n_files; i++)
                free(c->files[i]);
        free(c->aliases);
        free(c->cached);
        free(c->regs);
        free(c);
}

/* ---- one file ---- */

enum section {
        SEC_TOP,
        SEC_ALIASES,
        SEC_REGISTRY,
        SEC_MIRROR,
        SEC_V1_SEARCH,
        SEC_V1_INSECURE,
        SEC_V1_BLOCK,
        SEC_OTHER
};

struct parse {
        struct regconf *part; /* this file's values, merged when it parsed whole */
        const char *file;
        size_t file_index;
        enum section sec;
        bool aliases_only;
};

static int conf_fail(const struct parse *p, unsigned line, struct cs_error *err, const char *fmt,
                     ...) __attribute__((format(printf, 4, 5)));
static int conf_fail(const struct parse *p, unsigned line, struct cs_error *err, const char *fmt,
                     ...)
{
        char why[700];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(why, sizeof(why), fmt, ap);
        va_end(ap);
        return cs_error_setx(err, EINVAL, "`%s` line %u: %s", p->file, line, why);
}

/* host[:port][/path], as containers/image takes a location: no scheme, no trailing '/'. */
static int location_check(const struct parse *p, unsigned line, const char *key, char *loc,
                          struct cs_error *err)
{
        size_t n = strlen(loc);

        while (n && loc[n - 1] == '/')
                loc[--n] = '\0';
        if (loc[0] == '/')
                return conf_fail(p, line, err, "%s `%s` starts with no registry HOST[:PORT]", key,
                                 loc);
        if (strstr(loc, "://"))
                return conf_fail(p, line, err, "%s `%s` has a scheme: write HOST[:PORT][/PATH]",
                                 key, loc);
        for (const char *q = loc; *q; q++)
                if (!((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') ||
                      (*q >= '0' && *q <= '9') || strchr(".-_:/[]*", *q)))
                        return conf_fail(p, line, err,
                                         "%s `%s` has a character no registry name has", key, loc);
        return 0;
}

static bool qualified(const char *s)
{
        const char *slash = strchr(s, '/');
        size_t n = slash ? (size_t)(slash - s) : 0;

        return slash && (memchr(s, '.', n) || memchr(s, ':', n) ||
                         (n == 9 && strncmp(s, "localhost", 9) == 0));
}

/* The repository part of a name: without @digest and without the :tag after the last '/'. */
static size_t name_len(const char *s)
{
        size_t n = strcspn(s, "@");
        const char *slash = memrchr(s, '/', n), *colon = memrchr(s, ':', n);

        if (colon && (!slash || colon > slash))
                n = (size_t)(colon - s);
        return n;
}

static int want(const struct parse *p, const char *key, const struct toml_value *v,
                enum toml_type t, unsigned line, struct cs_error *err)
{
        static const char *const names[] = {"a string", "a boolean", "an integer",
                                            "an array of strings"};

        if (v->type == t)
                return 0;
        return conf_fail(p, line, err, "`%s` must be %s", key, names[t]);
}

static int copy_string(const struct parse *p, const char *key, const struct toml_value *v,
                       char *out, size_t max, unsigned line, struct cs_error *err)
{
        int r = want(p, key, v, TOML_STRING, line, err);

        if (r < 0)
                return r;
        if (strlen(v->str) >= max)
                return conf_fail(p, line, err, "`%s` is too long (`%.200s`)", key, v->str);
        snprintf(out, max, "%s", v->str);
        return 0;
}

static int on_table(void *opaque, const char *path, bool array, unsigned line, struct cs_error *err)
{
        struct parse *p = opaque;
        struct regconf *c = p->part;

        if (strcmp(path, "aliases") == 0 && !array) {
                p->sec = SEC_ALIASES;
                return 0;
        }
        if (p->aliases_only) {
                p->sec = SEC_OTHER;
                return 0;
        }
        if (strcmp(path, "registry") == 0 && array) {
                struct reg_entry *n;

                if (c->n_regs >= REGISTRIES_MAX)
                        return conf_fail(p, line, err, "more than %u [[registry]] tables",
                                         REGISTRIES_MAX);
                n = realloc(c->regs, (c->n_regs + 1) * sizeof(*n));
                if (!n)
                        return cs_error_set(err, ENOMEM, "%s", p->file);
                c->regs = n;
                memset(&c->regs[c->n_regs], 0, sizeof(*n));
                c->regs[c->n_regs].file = p->file_index;
                c->regs[c->n_regs++].line = line;
                p->sec = SEC_REGISTRY;
                return 0;
        }
        if (strcmp(path, "registry.mirror") == 0 && array) {
                struct reg_entry *r = c->n_regs ? &c->regs[c->n_regs - 1] : NULL;

                if (!r)
                        return conf_fail(p, line, err,
                                         "[[registry.mirror]] belongs under a [[registry]]");
                if (r->n_mirrors >= MIRRORS_MAX)
                        return conf_fail(p, line, err, "a [[registry]] has more than %u mirrors",
                                         (unsigned)MIRRORS_MAX);
                memset(&r->mirrors[r->n_mirrors++], 0, sizeof(r->mirrors[0]));
                p->sec = SEC_MIRROR;
                return 0;
        }
        /* version 1, which podman still reads: [registries.search|insecure|block] */
        if (strcmp(path, "registries.search") == 0 && !array)
                p->sec = SEC_V1_SEARCH;
        else if (strcmp(path, "registries.insecure") == 0 && !array)
                p->sec = SEC_V1_INSECURE;
        else if (strcmp(path, "registries.block") == 0 && !array)
                p->sec = SEC_V1_BLOCK;
        else
                p->sec = SEC_OTHER;
        if (p->sec != SEC_OTHER)
                return 0;
        p->sec = SEC_OTHER; /* tables podman reads and csandbox has no use for */
        return 0;
}

static int on_alias(struct parse *p, const char *key, const struct toml_value *v, unsigned line,
                    struct cs_error *err)
{
        struct regconf *c = p->part;
        struct registry_ref ref;
        struct alias *n;
        int r = want(p, key, v, TOML_STRING, line, err);

        if (r < 0)
                return r;
        if (qualified(key) || name_len(key) != strlen(key) || !key[0] || strlen(key) >= 256)
                return conf_fail(p, line, err,
                                 "the alias `%.200s` is not a short name without a tag", key);
        if (!qualified(v->str) || name_len(v->str) != strlen(v->str) ||
            strlen(v->str) >= sizeof(n->value) || registry_ref_parse(v->str, &ref, err) < 0)
                return conf_fail(p, line, err,
                                 "the alias `%.200s` must name a registry and an image without "
                                 "a tag or digest (`%.200s`)",
                                 key, v->str);
        if (c->n_aliases >= ALIASES_MAX)
                return conf_fail(p, line, err, "more than %u aliases", ALIASES_MAX);
        n = realloc(c->aliases, (c->n_aliases + 1) * sizeof(*n));
        if (!n)
                return cs_error_set(err, ENOMEM, "%s", p->file);
        c->aliases = n;
        snprintf(n[c->n_aliases].name, sizeof(n->name), "%s", key);
        snprintf(n[c->n_aliases].value, sizeof(n->value), "%s", v->str);
        n[c->n_aliases++].file = p->file_index;
        return 0;
}

static int on_key(void *opaque, const char *key, const struct toml_value *v, unsigned line,
                  struct cs_error *err)
{
        struct parse *p = opaque;
        struct regconf *c = p->part;
        struct reg_entry *reg = c->n_regs ? &c->regs[c->n_regs - 1] : NULL;
        int r = 0;

        if (p->sec == SEC_ALIASES)
                return on_alias(p, key, v, line, err);
        if (p->aliases_only || p->sec == SEC_OTHER)
                return 0;
        if (p->sec == SEC_V1_INSECURE || p->sec == SEC_V1_BLOCK) {
                if (strcmp(key, "registries") != 0)
                        return 0;
                r = want(p, key, v, TOML_ARRAY, line, err);
                for (size_t i = 0; r == 0 && i < v->n; i++) {
                        struct reg_entry *n;

                        if (c->n_regs >= REGISTRIES_MAX)
                                return conf_fail(p, line, err, "more than %u registries",
                                                 REGISTRIES_MAX);
                        n = realloc(c->regs, (c->n_regs + 1) * sizeof(*n));
                        if (!n)
                                return cs_error_set(err, ENOMEM, "%s", p->file);
                        c->regs = n;
                        n = &c->regs[c->n_regs++];
                        memset(n, 0, sizeof(*n));
                        n->file = p->file_index;
                        n->line = line;
                        n->insecure = p->sec == SEC_V1_INSECURE;
                        n->blocked = p->sec == SEC_V1_BLOCK;
                        if (strlen(v->items[i]) >= sizeof(n->location))
                                return conf_fail(p, line, err, "`%.200s` is too long", v->items[i]);
                        snprintf(n->location, sizeof(n->location), "%s", v->items[i]);
                        r = location_check(p, line, key, n->location, err);
                }
                return r;
        }
        if ((p->sec == SEC_TOP && strcmp(key, "unqualified-search-registries") == 0) ||
            (p->sec == SEC_V1_SEARCH && strcmp(key, "registries") == 0)) {
                r = want(p, key, v, TOML_ARRAY, line, err);
                if (r == 0 && v->n > SEARCH_MAX)
                        r = conf_fail(p, line, err, "`%s` lists more than %u registries", key,
                                      SEARCH_MAX);
                for (size_t i = 0; r == 0 && i < v->n; i++) {
                        if (strlen(v->items[i]) >= sizeof(c->search[0]))
                                return conf_fail(p, line, err, "`%s`: `%.200s` is too long", key,
                                                 v->items[i]);
                        snprintf(c->search[i], sizeof(c->search[0]), "%s", v->items[i]);
                        r = location_check(p, line, key, c->search[i], err);
                        if (r == 0 && (strchr(c->search[i], '/') || !c->search[i][0]))
                                r = conf_fail(p, line, err,
                                              "`%s`: `%.200s` is not a registry HOST[:PORT]", key,
                                              c->search[i]);
                }
                c->n_search = v->n;
                c->search_set = true;
                c->search_file = p->file_index;
                return r;
        }
        if (p->sec == SEC_TOP && strcmp(key, "short-name-mode") == 0) {
                r = want(p, key, v, TOML_STRING, line, err);
                if (r < 0)
                        return r;
                c->mode_set = true;
                if (strcmp(v->str, "enforcing") == 0)
                        c->mode = MODE_ENFORCING;
                else if (strcmp(v->str, "permissive") == 0)
                        c->mode = MODE_PERMISSIVE;
                else if (strcmp(v->str, "disabled") == 0)
                        c->mode = MODE_DISABLED;
                else
                        return conf_fail(p, line, err,
                                         "short-name-mode `%.100s` is not enforcing, permissive "
                                         "or disabled",
                                         v->str);
                return 0;
        }
        if (p->sec == SEC_REGISTRY) {
                if (strcmp(key, "prefix") == 0)
                        r = copy_string(p, key, v, reg->prefix, sizeof(reg->prefix), line, err);
                else if (strcmp(key, "location") == 0)
                        r = copy_string(p, key, v, reg->location, sizeof(reg->location), line, err);
                else if (strcmp(key, "insecure") == 0 &&
                         (r = want(p, key, v, TOML_BOOL, line, err)) == 0)
                        reg->insecure = v->b;
                else if (strcmp(key, "blocked") == 0 &&
                         (r = want(p, key, v, TOML_BOOL, line, err)) == 0)
                        reg->blocked = v->b;
                else if (strcmp(key, "mirror-by-digest-only") == 0 &&
                         (r = want(p, key, v, TOML_BOOL, line, err)) == 0)
                        reg->digest_only = v->b;
                if (r == 0 && (strcmp(key, "prefix") == 0 || strcmp(key, "location") == 0))
                        r = location_check(p, line, key,
                                           key[0] == 'p' ? reg->prefix : reg->location, err);
                return r;
        }
        if (p->sec == SEC_MIRROR) {
                struct mirror *m = &reg->mirrors[reg->n_mirrors - 1];

                if (strcmp(key, "location") == 0) {
                        r = copy_string(p, key, v, m->location, sizeof(m->location), line, err);
                        if (r == 0)
                                r = location_check(p, line, key, m->location, err);
                } else if (strcmp(key, "insecure") == 0 &&
                           (r = want(p, key, v, TOML_BOOL, line, err)) == 0) {
                        m->insecure = v->b;
                } else if (strcmp(key, "pull-from-mirror") == 0 &&
                           (r = want(p, key, v, TOML_STRING, line, err)) == 0) {
                        if (strcmp(v->str, "all") == 0)
                                m->from = FROM_ALL;
                        else if (strcmp(v->str, "digest-only") == 0)
                                m->from = FROM_DIGEST;
                        else if (strcmp(v->str, "tag-only") == 0)
                                m->from = FROM_TAG;
                        else
                                r = conf_fail(p, line, err,
                                              "pull-from-mirror `%.100s` is not all, digest-only "
                                              "or tag-only",
                                              v->str);
                }
                return r;
        }
        return 0; /* keys podman reads and csandbox has no use for */
}

/* The checks containers/image makes once a file is read, and its rule that the first of
 * two [[registry]] tables with one prefix wins. */
static int part_finish(struct parse *p, struct cs_error *err)
{
        struct regconf *c = p->part;
        size_t kept = 0;

        for (size_t i = 0; i < c->n_regs; i++) {
                struct reg_entry *r = &c->regs[i];
                bool dup = false;

                if (!r->prefix[0] && !r->location[0])
                        return conf_fail(p, r->line, err,
                                         "a [[registry]] needs a location or a prefix");
                if (!r->prefix[0])
                        snprintf(r->prefix, sizeof(r->prefix), "%s", r->location);
                else if (strncmp(r->prefix, "*.", 2) != 0 && !r->location[0])
                        return conf_fail(p, r->line, err,
                                         "the [[registry]] of prefix `%s` needs a location (only "
                                         "a *.DOMAIN prefix stands alone)",
                                         r->prefix);
                if (strchr(r->prefix + (strncmp(r->prefix, "*.", 2) == 0 ? 2 : 0), '*'))
                        return conf_fail(p, r->line, err,
                                         "the prefix `%s`: a wildcard is only *.DOMAIN", r->prefix);
                for (size_t k = 0; k < r->n_mirrors; k++)
                        if (!r->mirrors[k].location[0])
                                return conf_fail(p, r->line, err,
                                                 "a mirror of `%s` has no location", r->prefix);
                for (size_t k = 0; k < kept && !dup; k++)
                        dup = strcmp(c->regs[k].prefix, r->prefix) == 0;
                if (!dup)
                        c->regs[kept++] = *r;
        }
        c->n_regs = kept;
        return 0;
}

static int merge(struct regconf *c, struct regconf *part, bool cache, struct cs_error *err)
{
        for (size_t i = 0; i < part->n_regs; i++) {
                size_t k = 0;

                while (k < c->n_regs && strcmp(c->regs[k].prefix, part->regs[i].prefix) != 0)
                        k++;
                if (k == c->n_regs) {
                        struct reg_entry *n;

                        if (c->n_regs >= REGISTRIES_MAX)
                                return cs_error_setx(err, E2BIG,
                                                     "registries.conf: more than %u [[registry]] "
                                                     "prefixes in all",
                                                     REGISTRIES_MAX);
                        n = realloc(c->regs, (c->n_regs + 1) * sizeof(*n));
                        if (!n)
                                return cs_error_set(err, ENOMEM, "registries.conf");
                        c->regs = n;
                        c->n_regs++;
                }
                c->regs[k] = part->regs[i];
        }
        for (size_t i = 0; i < part->n_aliases; i++) {
                struct alias **list = cache ? &c->cached : &c->aliases;
                size_t *n = cache ? &c->n_cached : &c->n_aliases, k = 0;

                while (k < *n && strcmp((*list)[k].name, part->aliases[i].name) != 0)
                        k++;
                if (k == *n) {
                        struct alias *nl;

                        if (*n >= ALIASES_MAX)
                                return cs_error_setx(err, E2BIG,
                                                     "registries.conf: more than %u aliases in "
                                                     "all",
                                                     ALIASES_MAX);
                        nl = realloc(*list, (*n + 1) * sizeof(*nl));
                        if (!nl)
                                return cs_error_set(err, ENOMEM, "registries.conf");
                        *list = nl;
                        (*n)++;
                }
                (*list)[k] = part->aliases[i];
        }
        if (part->search_set) {
                memcpy(c->search, part->search, sizeof(c->search));
                c->n_search = part->n_search;
                c->search_set = true;
                c->search_file = part->search_file;
        }
        if (part->mode_set) {
                c->mode = part->mode;
                c->mode_set = true;
        }
        return 0;
}

int regconf_add(struct regconf *c, const char *buf, size_t len, const char *file, bool aliases_only,
                struct cs_error *err)
{
        struct regconf part = {0};
        struct parse p = {.part = &part, .file = file, .aliases_only = aliases_only};
        struct toml_handler h = {.table = on_table, .key = on_key, .opaque = &p};
        int r;

        if (c->n_files >= FILES_MAX)
                return cs_error_setx(err, E2BIG, "more than %u registries.conf files", FILES_MAX);
        if (!(c->files[c->n_files] = strdup(file)))
                return cs_error_set(err, ENOMEM, "%s", file);
        p.file_index = c->n_files++;
        r = toml_parse(buf, len, file, &h, err);
        if (r == 0)
                r = part_finish(&p, err);
        if (r == 0)
                r = merge(c, &part, aliases_only, err);
        free(part.aliases);
        free(part.regs);
        return r;
}

/* ---- the files ---- */

static int add_file(struct regconf *c, const char *path, bool must_exist, bool aliases_only,
                    struct cs_error *err)
{
        _cleanup_free_ char *buf = NULL;
        size_t len;
        int r = cs_read_file_at(AT_FDCWD, path, TOML_FILE_MAX, false, &buf, &len, err);

        if ((r == -ENOENT || r == -ENOTDIR) && !must_exist)
                return 0;
        if (r < 0)
                return cs_error_wrap(err, "registries configuration");
        return regconf_add(c, buf, len, path, aliases_only, err);
}

static int cmp_names(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* dir/ *.conf in lexical order. */
static int add_dir(struct regconf *c, const char *dir, struct cs_error *err)
{
        _cleanup_closedir_ DIR *d = opendir(dir);
        char *names[FILES_MAX];
        struct dirent *de;
        size_t n = 0;
        int r = 0;

        if (!d)
                return errno == ENOENT || errno == ENOTDIR
                           ? 0
                           : cs_error_set(err, errno, "read the drop-in directory `%s`", dir);
        while ((de = readdir(d))) {
                size_t nl = strlen(de->d_name);

                if (nl < 6 || de->d_name[0] == '.' || strcmp(de->d_name + nl - 5, ".conf") != 0)
                        continue;
                if (de->d_type == DT_DIR)
                        continue;
                if (n >= FILES_MAX) {
                        r = cs_error_setx(err, E2BIG, "`%s` holds more than %u .conf files", dir,
                                          FILES_MAX);
                        break;
                }
                if (!(names[n] = strdup(de->d_name))) {
                        r = cs_error_set(err, ENOMEM, "%s", dir);
                        break;
                }
                n++;
        }
        qsort(names, n, sizeof(names[0]), cmp_names);
        for (size_t i = 0; i < n; i++) {
                char path[PATH_MAX];

                if (r == 0 &&
                    snprintf(path, sizeof(path), "%s/%s", dir, names[i]) < (int)sizeof(path))
                        r = add_file(c, path, false, false, err);
                free(names[i]);
        }
        return r;
}

static const char *home_dir(void)
{
        const char *home = getenv("HOME");
        struct passwd *pw;

        if (home && home[0] == '/')
                return home;
        pw = getpwuid(getuid());
        return pw && pw->pw_dir[0] == '/' ? pw->pw_dir : NULL;
}

int regconf_load(struct regconf **ret, struct cs_error *err)
{
        const char *env = getenv(REGCONF_ENV), *home = home_dir(),
                   *cache = getenv("XDG_CACHE_HOME");
        char user[PATH_MAX] = "", user_dir[PATH_MAX] = "", aliases[PATH_MAX] = "";
        struct regconf *c = regconf_new();
        bool user_main;
        struct stat st;
        int r;

        if (!c)
                return cs_error_set(err, ENOMEM, "registries.conf");
        if (home) {
                snprintf(user, sizeof(user), "%s/.config/containers/registries.conf", home);
                snprintf(user_dir, sizeof(user_dir), "%s/.config/containers/registries.conf.d",
                         home);
        }
        if (cache && cache[0] == '/')
                snprintf(aliases, sizeof(aliases), "%s/containers/short-name-aliases.conf", cache);
        else if (home)
                snprintf(aliases, sizeof(aliases), "%s/.cache/containers/short-name-aliases.conf",
                         home);
        /* podman's order: the variable names the one main file; else the user's file, which
         * then hides the system's drop-ins too; else the system's */
        user_main = !(env && env[0]) && user[0] && stat(user, &st) == 0;
        if (env && env[0])
                r = add_file(c, env, true, false, err);
        else
                r = add_file(c, user_main ? user : SYSTEM_CONF, false, false, err);
        if (r == 0 && !user_main)
                r = add_dir(c, SYSTEM_CONF ".d", err);
        if (r == 0 && user_dir[0])
                r = add_dir(c, user_dir, err);
        if (r == 0 && aliases[0])
                r = add_file(c, aliases, false, true, err);
        if (r < 0) {
                regconf_free(c);
                return r;
        }
        *ret = c;
        return 0;
}

/* ---- short names ---- */

static const struct alias *alias_find(const struct regconf *c, const char *name, size_t n)
{
        for (size_t pass = 0; pass < 2; pass++) {
                const struct alias *list = pass ? c->cached : c->aliases;
                size_t count = pass ? c->n_cached : c->n_aliases;

                for (size_t i = 0; i < count; i++)
                        if (strlen(list[i].name) == n && strncmp(list[i].name, name, n) == 0)
                                return &list[i];
        }
        return NULL;
}

int regconf_resolve(const struct regconf *c, const char *text, struct registry_ref *ret, size_t max,
                    size_t *ret_n, struct cs_error *err)
{
        const struct alias *a;
        size_t nl = name_len(text);
        char full[768];
        int r;

        *ret_n = 0;
        if (max == 0)
                return cs_error_setx(err, EINVAL, "no room for a reference");
        if (qualified(text) || !c) {
                r = registry_ref_parse(text, &ret[0], err);
                *ret_n = r == 0;
                return r;
        }
        a = alias_find(c, text, nl);
        if (a) {
                snprintf(full, sizeof(full), "%s%s", a->value, text + nl);
                r = registry_ref_parse(full, &ret[0], err);
                if (r < 0)
                        return cs_error_wrap(err, "the alias `%s` of `%s`", a->name,
                                             c->files[a->file]);
                *ret_n = 1;
                return 0;
        }
        if (!c->search_set) { /* no configuration says: docker.io, as docker reads it */
                r = registry_ref_parse(text, &ret[0], err);
                *ret_n = r == 0;
                return r;
        }
        if (c->n_search == 0)
                return cs_error_setx(err, EINVAL,
                                     "`%.200s` is a short name, and unqualified-search-registries "
                                     "in `%s` is empty and no alias names it: give the registry "
                                     "(REGISTRY/%.200s)",
                                     text, c->files[c->search_file], text);
        if (c->n_search > 1 && c->mode == MODE_ENFORCING) {
                char choices[1200] = "";
                size_t o = 0;

                for (size_t i = 0; i < c->n_search && o < sizeof(choices); i++) {
                        struct registry_ref ref;
                        struct cs_error ignored;

                        snprintf(full, sizeof(full), "%s/%s", c->search[i], text);
                        if (registry_ref_parse(full, &ref, &ignored) == 0)
                                o += (size_t)snprintf(choices + o, sizeof(choices) - o, "%s%s",
                                                      o ? ", " : "", ref.name);
                }
                return cs_error_setx(err, EINVAL,
                                     "the short name `%.200s` could be any of %s (the "
                                     "unqualified-search-registries of `%s`, short-name-mode "
                                     "enforcing): give the full name, or an [aliases] entry in "
                                     "a registries.conf",
                                     text, choices, c->files[c->search_file]);
        }
        for (size_t i = 0; i < c->n_search && *ret_n < max; i++) {
                snprintf(full, sizeof(full), "%s/%s", c->search[i], text);
                r = registry_ref_parse(full, &ret[*ret_n], err);
                if (r < 0)
                        return r;
                (*ret_n)++;
        }
        return 0;
}

/* ---- where a reference is fetched from ---- */

/* How much of "host/repo" prefix covers: 0 for none. */
static size_t prefix_match(const char *prefix, const struct registry_ref *ref, const char *full)
{
        size_t pl = strlen(prefix), hl;
        const char *host = ref->host;
        const char *colon = strrchr(host, ':');

        if (strncmp(prefix, "*.", 2) == 0) {
                /* a subdomain of the domain, any port: host names ends with .DOMAIN */
                hl = colon && !strchr(host, ']') ? (size_t)(colon - host) : strlen(host);
                if (hl > pl - 1 && strncmp(host + hl - (pl - 1), prefix + 1, pl - 1) == 0)
                        return pl;
                return 0;
        }
        if (strncmp(full, prefix, pl) == 0 && (full[pl] == '\0' || full[pl] == '/'))
                return pl;
        return 0;
}

static int endpoint_from(const char *location, const char *rest, bool insecure, bool mirror,
                         struct registry_endpoint *ep, struct cs_error *err)
{
        char full[768];
        const char *slash;
        size_t hl;

        snprintf(full, sizeof(full), "%s%s", location, rest);
        slash = strchr(full, '/');
        hl = slash ? (size_t)(slash - full) : 0;
        if (!slash || !slash[1] || hl == 0 || hl >= sizeof(ep->host) ||
            strlen(slash + 1) >= sizeof(ep->repo))
                return cs_error_setx(err, EINVAL,
                                     "registries.conf: `%.300s` (a location and the image's "
                                     "path) names no registry and repository",
                                     full);
        memset(ep, 0, sizeof(*ep));
        memcpy(ep->host, full, hl);
        {
                /* a rewritten docker.io name is normalized as any docker.io name is */
                const char *lib = strcmp(ep->host, REGISTRY_DEFAULT) == 0 && !strchr(slash + 1, '/')
                                      ? "library/"
                                      : "";
                size_t ll = strlen(lib), rl = strlen(slash + 1);

                if (ll + rl >= sizeof(ep->repo))
                        return cs_error_setx(err, ENAMETOOLONG,
                                             "registries.conf: `%.300s` is too long", full);
                memcpy(ep->repo, lib, ll);
                memcpy(ep->repo + ll, slash + 1, rl + 1);
        }
        ep->insecure = insecure;
        ep->mirror = mirror;
        return 0;
}

int regconf_endpoints(const struct regconf *c, const struct registry_ref *ref,
                      struct registry_endpoint *ret, size_t *ret_n, struct cs_error *err)
{
        const struct reg_entry *best = NULL;
        size_t best_len = 0, n = 0;
        char full[600], rest[600];
        const char *base;
        int r;

        snprintf(full, sizeof(full), "%s/%s", ref->host, ref->repo);
        for (size_t i = 0; c && i < c->n_regs; i++) {
                size_t l = prefix_match(c->regs[i].prefix, ref, full);

                if (l > best_len) {
                        best = &c->regs[i];
                        best_len = l;
                }
        }
        *ret_n = 0;
        if (!best) {
                r = endpoint_from(ref->host, full + strlen(ref->host), false, false, &ret[0], err);
                *ret_n = r == 0;
                return r;
        }
        if (best->blocked)
                return cs_error_setx(err, EACCES,
                                     "%s: its registry is blocked by the [[registry]] of prefix "
                                     "`%s` in `%s` (blocked = true); pull it from elsewhere, or "
                                     "change that file",
                                     ref->name, best->prefix, c->files[best->file]);
        if (strncmp(best->prefix, "*.", 2) == 0) {
                snprintf(rest, sizeof(rest), "%s", full + strlen(ref->host));
                base = best->location[0] ? best->location : ref->host;
        } else {
                snprintf(rest, sizeof(rest), "%s", full + best_len);
                base = best->location;
        }
        if (!(best->digest_only && !ref->digest[0]))
                for (size_t i = 0; i < best->n_mirrors; i++) {
                        const struct mirror *m = &best->mirrors[i];

                        if ((m->from == FROM_DIGEST && !ref->digest[0]) ||
                            (m->from == FROM_TAG && ref->digest[0]))
                                continue;
                        r = endpoint_from(m->location, rest, m->insecure, true, &ret[n], err);
                        if (r < 0)
                                return cs_error_wrap(err, "a mirror of `%s` in `%s`", best->prefix,
                                                     c->files[best->file]);
                        n++;
                }
        r = endpoint_from(base, rest, best->insecure, false, &ret[n], err);
        if (r < 0)
                return cs_error_wrap(err, "the [[registry]] of prefix `%s` in `%s`", best->prefix,
                                     c->files[best->file]);
        *ret_n = n + 1;
        return 0;
}

int registry_resolve(const char *text, struct registry_source *ret, size_t *ret_n,
                     struct cs_error *err)
{
        struct registry_ref refs[REGISTRY_SOURCES_MAX];
        struct regconf *c = NULL;
        size_t n = 0;
        int r = regconf_load(&c, err);

        *ret_n = 0;
        if (r == 0)
                r = regconf_resolve(c, text, refs, REGISTRY_SOURCES_MAX, &n, err);
        for (size_t i = 0; r == 0 && i < n; i++) {
                ret[i].ref = refs[i];
                r = regconf_endpoints(c, &refs[i], ret[i].endpoints, &ret[i].n_endpoints, err);
        }
        regconf_free(c);
        if (r == 0)
                *ret_n = n;
        return r;
}
