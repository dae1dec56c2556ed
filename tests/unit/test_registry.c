/* Unit tests for image/registry.c's parsers of untrusted or user input: image references
 * and WWW-Authenticate challenges. */
#include "common/error.h"
#include "image/registry/registries-conf.h"
#include "image/registry/registry-private.h"
#include "image/registry/toml.h"
#include "image/registry/registry.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "check.h"

#define D1 "sha256:1111111111111111111111111111111111111111111111111111111111111111"

/* No host: the default registry (library/ for one component); a first component with a dot,
 * a colon or `localhost` is the host; a digest pins, and a tag beside it names the image. */
static void test_ref_forms_as_podman_reads_them(void)
{
        static const struct {
                const char *in, *host, *repo, *tag, *digest, *name;
        } cases[] = {
            {"debian:12", "docker.io", "library/debian", "12", "", "docker.io/library/debian:12"},
            {"debian", "docker.io", "library/debian", "latest", "",
             "docker.io/library/debian:latest"},
            {"someone/tool:v1", "docker.io", "someone/tool", "v1", "", "docker.io/someone/tool:v1"},
            {"index.docker.io/library/debian", "docker.io", "library/debian", "latest", "",
             "docker.io/library/debian:latest"},
            {"ghcr.io/org/img:1.0", "ghcr.io", "org/img", "1.0", "", "ghcr.io/org/img:1.0"},
            {"localhost/img", "localhost", "img", "latest", "", "localhost/img:latest"},
            {"127.0.0.1:5000/a/b/c:t_1", "127.0.0.1:5000", "a/b/c", "t_1", "",
             "127.0.0.1:5000/a/b/c:t_1"},
            {"reg.example:443/x", "reg.example:443", "x", "latest", "", "reg.example:443/x:latest"},
            {"r.example/x@" D1, "r.example", "x", "", D1, "r.example/x@" D1},
            {"r.example/x:v2@" D1, "r.example", "x", "v2", D1, "r.example/x:v2"},
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct registry_ref r;
                struct cs_error err;

                CHECKF(registry_ref_parse(cases[i].in, &r, &err) == 0, "%s: %s", cases[i].in,
                       err.msg);
                CHECKF(strcmp(r.host, cases[i].host) == 0 && strcmp(r.repo, cases[i].repo) == 0 &&
                           strcmp(r.tag, cases[i].tag) == 0 &&
                           strcmp(r.digest, cases[i].digest) == 0 &&
                           strcmp(r.name, cases[i].name) == 0,
                       "%s -> %s %s %s %s %s", cases[i].in, r.host, r.repo, r.tag, r.digest,
                       r.name);
        }
        PASS();
}

static void test_ref_refusals_name_the_reference(void)
{
        const char *bad[] = {"",       "Upper/x",    "x@sha256:abc", "x@md5:00",
                             "a//b",   "host:5000/", "x:",           "x:bad!tag",
                             "-x",     "x/",         "/x",           "x/.y",
                             "x:-tag", "h o/x",      "x@",           "x:" D1 "@" D1};
        struct registry_ref r;
        struct cs_error err;

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char want[200];

                snprintf(want, sizeof(want), "`%s` is not an image reference", bad[i]);
                CHECKF(registry_ref_parse(bad[i], &r, &err) == -EINVAL && strstr(err.msg, want),
                       "`%s` accepted or wrong message: %s", bad[i], err.msg);
        }
        PASS();
}

static void test_challenge_params_quoted_bare_and_escaped(void)
{
        char v[64];
        const char *h = "Bearer realm=\"https://auth.example/token\",service=reg,"
                        "scope=\"repository:a/b:pull,push\",odd=\"q\\\"x\"";

        registry_challenge_param(h, "realm", v, sizeof(v));
        CHECKF(strcmp(v, "https://auth.example/token") == 0, "realm %s", v);
        registry_challenge_param(h, "service", v, sizeof(v));
        CHECKF(strcmp(v, "reg") == 0, "service %s", v);
        registry_challenge_param(h, "scope", v, sizeof(v));
        CHECKF(strcmp(v, "repository:a/b:pull,push") == 0, "scope %s", v);
        registry_challenge_param(h, "odd", v, sizeof(v));
        CHECKF(strcmp(v, "q\"x") == 0, "odd %s", v);
        registry_challenge_param(h, "missing", v, sizeof(v));
        CHECK(v[0] == '\0');
        registry_challenge_param("Basic realm=\"0123456789012345678901234567890\"", "realm", v, 8);
        CHECKF(strcmp(v, "0123456") == 0, "bounded %s", v);
        registry_challenge_param("Bearer realm=\"unterminated", "realm", v, sizeof(v));
        CHECKF(strcmp(v, "unterminated") == 0, "unterminated %s", v);
        registry_challenge_param("Bearer", "realm", v, sizeof(v));
        CHECK(v[0] == '\0');
        PASS();
}

/* "alice:pw" and "bob:pw2" */
#define AUTH_ALICE "YWxpY2U6cHc="
#define AUTH_BOB   "Ym9iOnB3Mg=="

static const char *creds_user(const char *json, const char *host, const char *repo)
{
        static char user[CS_ERROR_MAX];
        struct registry_creds c = {0};
        struct cs_error err = {0};
        int r = registry_creds_parse(json, strlen(json), "auth.json", host, repo, &c, &err);

        snprintf(user, sizeof(user), "%s", r == 1 ? c.user : r == 0 ? "(none)" : err.msg);
        registry_creds_free(&c);
        return user;
}

/* Docker Hub's credentials are found under each name docker and podman write them with
 * (docker login: the v1 index URL; podman login: docker.io), for docker.io's images and for
 * its API host; a namespace key still wins over the registry's, and no other host's key
 * matches. */
static void test_docker_hub_credentials_under_each_of_its_keys(void)
{
        static const char *const keys[] = {"https://index.docker.io/v1/", "index.docker.io",
                                           "docker.io", "https://registry-1.docker.io/v2/",
                                           "registry-1.docker.io"};
        char json[512];

        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
                snprintf(json, sizeof(json), "{\"auths\":{\"%s\":{\"auth\":\"" AUTH_ALICE "\"}}}",
                         keys[i]);
                CHECKF(strcmp(creds_user(json, "docker.io", "library/debian"), "alice") == 0,
                       "%s: %s", keys[i], creds_user(json, "docker.io", "library/debian"));
                CHECKF(strcmp(creds_user(json, "registry-1.docker.io", "library/debian"),
                              "alice") == 0,
                       "%s", keys[i]);
                CHECKF(strcmp(creds_user(json, "quay.io", "library/debian"), "(none)") == 0, "%s",
                       keys[i]);
        }
        snprintf(json, sizeof(json),
                 "{\"auths\":{\"https://index.docker.io/v1/\":{\"auth\":\"" AUTH_ALICE
                 "\"},\"docker.io/someone\":{\"auth\":\"" AUTH_BOB "\"}}}");
        CHECK(strcmp(creds_user(json, "docker.io", "someone/tool"), "bob") == 0);
        CHECK(strcmp(creds_user(json, "docker.io", "library/debian"), "alice") == 0);
        /* a URL key names a host: its path is no namespace */
        snprintf(json, sizeof(json),
                 "{\"auths\":{\"https://quay.io/other/\":{\"auth\":\"" AUTH_ALICE "\"}}}");
        CHECK(strcmp(creds_user(json, "quay.io", "mine/x"), "alice") == 0);
        CHECK(strcmp(registry_api_host("docker.io"), "registry-1.docker.io") == 0);
        CHECK(strcmp(registry_api_host("quay.io"), "quay.io") == 0);
        PASS();
}

/* ---- registries.conf ---- */

struct seen {
        char log[2048];
};

static int seen_table(void *o, const char *path, bool array, unsigned line, struct cs_error *err)
{
        struct seen *s = o;
        size_t l = strlen(s->log);

        (void)err;
        snprintf(s->log + l, sizeof(s->log) - l, "%u%s%s%s ", line, array ? "[[" : "[", path,
                 array ? "]]" : "]");
        return 0;
}

static int seen_key(void *o, const char *key, const struct toml_value *v, unsigned line,
                    struct cs_error *err)
{
        struct seen *s = o;
        size_t l = strlen(s->log);

        (void)err;
        l += (size_t)snprintf(s->log + l, sizeof(s->log) - l, "%u:%s=", line, key);
        if (v->type == TOML_STRING)
                l += (size_t)snprintf(s->log + l, sizeof(s->log) - l, "'%s'", v->str);
        else if (v->type == TOML_BOOL)
                l += (size_t)snprintf(s->log + l, sizeof(s->log) - l, "%s", v->b ? "T" : "F");
        else if (v->type == TOML_INT)
                l += (size_t)snprintf(s->log + l, sizeof(s->log) - l, "%lld", v->i);
        else
                for (size_t i = 0; i < v->n; i++)
                        l += (size_t)snprintf(s->log + l, sizeof(s->log) - l, "%s'%s'",
                                              i ? "," : "", v->items[i]);
        snprintf(s->log + l, sizeof(s->log) - l, " ");
        return 0;
}

static int toml_log(const char *text, struct seen *s, struct cs_error *err)
{
        struct toml_handler h = {.table = seen_table, .key = seen_key, .opaque = s};

        s->log[0] = '\0';
        return toml_parse(text, strlen(text), "t.conf", &h, err);
}

/* What registries.conf files hold: comments, both string forms and their escapes, arrays
 * over several lines with a trailing comma, quoted and dotted keys, [[tables]]; and what the
 * subset refuses, naming the file and line. */
static void test_toml_subset_and_its_refusals(void)
{
        static const struct {
                const char *in, *why;
        } bad[] = {
            {"a = {x = 1}", "line 1: inline tables"},
            {"\n\na = \"\"\"x\"\"\"", "line 3: multi-line strings"},
            {"a = \"open", "line 1: a string is not closed"},
            {"a = [1, 2]", "only arrays of strings"},
            {"a = \"\\q\"", "unknown escape"},
            {"a = \"\\u0000\"", "names no character"},
            {"[t\nx = 1", "line 1: a [table] header is not closed"},
            {"a = 1.5", "not a string, a boolean"},
            {"a b = 1", "not followed by ="},
            {"a = \"x\" y", "unexpected text"},
            {"a =", "has no value"},
            {"= 1", "a key is missing"},
            {"a = [\"x\" \"y\"]", "separated by commas"},
        };
        struct cs_error err = {0};
        struct seen s;

        CHECKF(toml_log("# c\nunqualified-search-registries = [\"a.io\", # one\n  'b.io',\n]\n"
                        "short-name-mode=\"enforcing\" # trailing\n[aliases]\n  \"x/y\" = "
                        "\"q.io/x/y\"\n[[registry]]\nlocation = \"l\\u00e9\\t\"\ninsecure = "
                        "true\n[[registry.mirror]]\nn = -12\na.\"b c\".d = false\r\n",
                        &s, &err) == 0,
               "%s", err.msg);
        CHECKF(strcmp(s.log, "2:unqualified-search-registries='a.io','b.io' "
                             "5:short-name-mode='enforcing' 6[aliases] 7:x/y='q.io/x/y' "
                             "8[[registry]] 9:location='l\xc3\xa9\t' 10:insecure=T "
                             "11[[registry.mirror]] 12:n=-12 13:a.b c.d=F ") == 0,
               "%s", s.log);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                err.msg[0] = '\0';
                CHECKF(toml_log(bad[i].in, &s, &err) < 0 && strstr(err.msg, "`t.conf` line") &&
                           strstr(err.msg, bad[i].why),
                       "%s: %s", bad[i].in, err.msg);
        }
        PASS();
}

static struct regconf *conf_of(const char *const *files, size_t n, struct cs_error *err)
{
        struct regconf *c = regconf_new();
        char name[32];

        for (size_t i = 0; c && i < n; i++) {
                snprintf(name, sizeof(name), "f%zu.conf", i);
                if (regconf_add(c, files[i], strlen(files[i]), name, false, err) < 0) {
                        regconf_free(c);
                        return NULL;
                }
        }
        return c;
}

static const char *resolved(const struct regconf *c, const char *text, struct cs_error *err)
{
        static char out[2048];
        struct registry_ref refs[4];
        size_t n = 0, o = 0;

        if (regconf_resolve(c, text, refs, 4, &n, err) < 0)
                return err->msg;
        out[0] = '\0';
        for (size_t i = 0; i < n; i++)
                o += (size_t)snprintf(out + o, sizeof(out) - o, "%s%s", i ? " " : "", refs[i].name);
        return out;
}

static const char *endpoints(const struct regconf *c, const char *text, struct cs_error *err)
{
        static char out[2048];
        struct registry_endpoint eps[REGISTRY_ENDPOINTS_MAX];
        struct registry_ref ref;
        size_t n = 0, o = 0;

        if (registry_ref_parse(text, &ref, err) < 0 || regconf_endpoints(c, &ref, eps, &n, err) < 0)
                return err->msg;
        out[0] = '\0';
        for (size_t i = 0; i < n; i++)
                o += (size_t)snprintf(out + o, sizeof(out) - o, "%s%s/%s%s%s", i ? " " : "",
                                      eps[i].host, eps[i].repo, eps[i].insecure ? "!" : "",
                                      eps[i].mirror ? "(m)" : "");
        return out;
}

#define EXPECT(got, want) CHECKF(strcmp((got), (want)) == 0, "got `%s`, want `%s`", got, want)

/* Short names as podman resolves them without a terminal: an alias, else the one search
 * registry, else (several, enforcing) refused with the choices; no configuration: docker.io. A
 * later file replaces a search list, an alias and a [[registry]] of the same prefix. */
static void test_short_names_as_podman_resolves_them(void)
{
        static const char *const files[] = {
            "unqualified-search-registries = ['a.example', 'b.example:5000']\n"
            "[aliases]\n'tool' = 'q.example/team/tool'\n'x/y' = 'docker.io/x/y'\n",
            "[aliases]\n'tool' = 'r.example/tool'\n"};
        struct cs_error err = {0};
        struct regconf *c = conf_of(files, 2, &err), *one = NULL, *perm = NULL, *none = NULL;
        static const char *const single[] = {"unqualified-search-registries = [\"solo.example\"]"};
        static const char *const permissive[] = {
            "unqualified-search-registries = ['a.example', 'docker.io']\nshort-name-mode = "
            "'permissive'"};
        static const char *const empty[] = {"unqualified-search-registries = []"};

        CHECKF(c, "%s", err.msg);
        EXPECT(resolved(c, "tool:1", &err), "r.example/tool:1");
        EXPECT(resolved(c, "x/y@" D1, &err), "docker.io/x/y@" D1);
        EXPECT(resolved(c, "q.example/other", &err), "q.example/other:latest");
        resolved(c, "debian:12", &err);
        CHECKF(strstr(err.msg, "a.example/debian:12, b.example:5000/debian:12") &&
                   strstr(err.msg, "`f0.conf`") && strstr(err.msg, "full name"),
               "%s", err.msg);
        EXPECT(resolved(NULL, "debian", &err), "docker.io/library/debian:latest");
        one = conf_of(single, 1, &err);
        CHECK(one);
        EXPECT(resolved(one, "debian", &err), "solo.example/debian:latest");
        perm = conf_of(permissive, 1, &err);
        CHECK(perm);
        EXPECT(resolved(perm, "debian", &err),
               "a.example/debian:latest docker.io/library/debian:latest");
        none = conf_of(empty, 1, &err);
        CHECK(none);
        resolved(none, "debian", &err);
        CHECKF(strstr(err.msg, "is empty") && strstr(err.msg, "f0.conf"), "%s", err.msg);
        regconf_free(c);
        regconf_free(one);
        regconf_free(perm);
        regconf_free(none);
        PASS();
}

/* [[registry]]: the longest prefix wins; mirrors in order then the location, the prefix
 * rewritten; mirror-by-digest-only and pull-from-mirror; insecure; blocked refused naming
 * the file; docker.io's rewritten names normalized. */
static void test_registry_tables_mirrors_rewrites_blocked(void)
{
        static const char *const files[] = {
            "[[registry]]\nprefix = 'docker.io'\nlocation = 'docker.io'\n"
            "[[registry.mirror]]\nlocation = 'mirror.corp/hub'\n"
            "[[registry.mirror]]\nlocation = 'plain.corp:80/hub'\ninsecure = true\n"
            "[[registry]]\nprefix = 'q.example/team'\nlocation = 'internal.corp/q'\n"
            "mirror-by-digest-only = true\n[[registry.mirror]]\nlocation = 'm.corp'\n"
            "[[registry]]\nlocation = 'bad.example'\nblocked = true\n"
            "[[registry]]\nprefix = '*.dev.example'\ninsecure = true\n",
            "[[registry]]\nprefix = 'q.example/team/special'\nlocation = 'docker.io/special'\n"
            "[[registry.mirror]]\nlocation = 'tags.corp'\npull-from-mirror = 'tag-only'\n"};
        struct cs_error err = {0};
        struct regconf *c = conf_of(files, 2, &err);

        CHECKF(c, "%s", err.msg);
        EXPECT(endpoints(c, "debian", &err),
               "mirror.corp/hub/library/debian(m) plain.corp:80/hub/library/debian!(m) "
               "docker.io/library/debian");
        EXPECT(endpoints(c, "q.example/team/app", &err), "internal.corp/q/app");
        EXPECT(endpoints(c, "q.example/team/app@" D1, &err), "m.corp/app(m) internal.corp/q/app");
        EXPECT(endpoints(c, "q.example/teammate/app", &err), "q.example/teammate/app");
        /* a mirror whose location leaves no repository for the exact prefix */
        CHECK(strstr(endpoints(c, "q.example/team/special", &err), "names no registry"));
        EXPECT(endpoints(c, "q.example/team/special/x", &err),
               "tags.corp/x(m) docker.io/special/x");
        EXPECT(endpoints(c, "q.example/team/special/x@" D1, &err), "docker.io/special/x");
        EXPECT(endpoints(c, "a.dev.example:5000/x", &err), "a.dev.example:5000/x!");
        EXPECT(endpoints(c, "dev.example/x", &err), "dev.example/x");
        endpoints(c, "bad.example/x/y:1", &err);
        CHECKF(strstr(err.msg, "bad.example/x/y:1") && strstr(err.msg, "blocked") &&
                   strstr(err.msg, "`f0.conf`"),
               "%s", err.msg);
        regconf_free(c);
        PASS();
}

/* Version 1, which podman still reads in its main file: search, insecure and block lists. */
static void test_version_1_lists(void)
{
        static const char *const v1[] = {
            "[registries.search]\nregistries = ['one.example']\n[registries.insecure]\n"
            "registries = ['plain.example:5000']\n[registries.block]\nregistries = "
            "['no.example']\n"};
        struct cs_error err = {0};
        struct regconf *c = conf_of(v1, 1, &err);

        CHECKF(c, "%s", err.msg);
        EXPECT(resolved(c, "x", &err), "one.example/x:latest");
        EXPECT(endpoints(c, "plain.example:5000/x", &err), "plain.example:5000/x!");
        CHECK(strstr(endpoints(c, "no.example/x", &err), "blocked"));
        regconf_free(c);
        PASS();
}

/* Bad configuration is refused naming the file and line: a scheme in a location, a
 * [[registry]] with neither location nor prefix, a qualified alias key. */
static void test_bad_registries_conf_names_file_and_line(void)
{
        static const struct {
                const char *in, *why;
        } bad[] = {
            {"[[registry]]\nlocation = 'https://x.io'", "line 2: location `https://x.io` has a "
                                                        "scheme"},
            {"\n[[registry]]\ninsecure = true", "line 2: a [[registry]] needs a location"},
            /* corpus/registries_conf/crash-empty-host: an endpoint without a host */
            {"[[registry]]\nprefix = 'q.example/team'\nlocation = '/nternal.corp/q'",
             "line 3: location `/nternal.corp/q` starts with no registry"},
            {"[aliases]\n'a.io/x' = 'b.io/x'", "not a short name"},
            {"[aliases]\n'x' = 'x'", "must name a registry"},
            {"[aliases]\n'x' = 'b.io/x:1'", "must name a registry"},
            {"unqualified-search-registries = 'x.io'", "must be an array of strings"},
            {"short-name-mode = 'sometimes'", "not enforcing, permissive"},
            {"[[registry.mirror]]\nlocation='m.io'", "belongs under a [[registry]]"},
            {"unqualified-search-registries = ['x.io/ns']", "is not a registry HOST[:PORT]"},
        };

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct cs_error err = {0};
                struct regconf *c = conf_of(&bad[i].in, 1, &err);

                CHECKF(!c && strstr(err.msg, "`f0.conf` line") && strstr(err.msg, bad[i].why),
                       "%s: %s", bad[i].in, err.msg);
        }
        PASS();
}

/* Where podman reads: $CONTAINERS_REGISTRIES_CONF, the user's drop-ins after it in lexical
 * order (a later file wins), the short-name alias cache after the configured aliases; the
 * named file must exist. */
static void test_registries_conf_files_in_podmans_order(void)
{
        char dir[] = "/tmp/regconf-XXXXXX", path[512];
        const char *old_home = getenv("HOME"), *old_cache = getenv("XDG_CACHE_HOME");
        struct registry_source *src = calloc(REGISTRY_SOURCES_MAX, sizeof(*src));
        struct cs_error err = {0};
        size_t n = 0;
        FILE *f;
        static const struct {
                const char *name, *text;
        } files[] = {
            {"main.conf", "unqualified-search-registries = ['main.example']\n[aliases]\n"
                          "'a' = 'main.example/a'\n'c' = 'main.example/c'\n"},
            {"home/.config/containers/registries.conf.d/20-b.conf", "[aliases]\n'a' = "
                                                                    "'late.example/a'\n"},
            {"home/.config/containers/registries.conf.d/10-a.conf",
             "unqualified-search-registries = ['drop.example']\n[aliases]\n'a' = "
             "'early.example/a'\n"},
            {"home/.config/containers/registries.conf.d/30-not-conf.txt", "garbage = = ="},
            {"home/.cache/containers/short-name-aliases.conf", "[aliases]\n'c' = "
                                                               "'cache.example/c'\n'd' = "
                                                               "'cache.example/d'\n"},
        };

        CHECK(src && mkdtemp(dir));
        for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
                char *slash;

                snprintf(path, sizeof(path), "%s/%s", dir, files[i].name);
                for (slash = strchr(path + strlen(dir) + 1, '/'); slash;
                     slash = strchr(slash + 1, '/')) {
                        *slash = '\0';
                        mkdir(path, 0700);
                        *slash = '/';
                }
                CHECK((f = fopen(path, "w")) && fputs(files[i].text, f) >= 0 && fclose(f) == 0);
        }
        snprintf(path, sizeof(path), "%s/main.conf", dir);
        setenv(REGCONF_ENV, path, 1);
        snprintf(path, sizeof(path), "%s/home", dir);
        setenv("HOME", path, 1);
        unsetenv("XDG_CACHE_HOME");
        CHECKF(registry_resolve("a", src, &n, &err) == 0 && n == 1, "%s", err.msg);
        EXPECT(src[0].ref.name, "late.example/a:latest");
        CHECKF(registry_resolve("b", src, &n, &err) == 0 && n == 1, "%s", err.msg);
        EXPECT(src[0].ref.name, "drop.example/b:latest");
        CHECKF(registry_resolve("c", src, &n, &err) == 0, "%s", err.msg);
        EXPECT(src[0].ref.name, "main.example/c:latest");
        CHECKF(registry_resolve("d", src, &n, &err) == 0, "%s", err.msg);
        EXPECT(src[0].ref.name, "cache.example/d:latest");
        snprintf(path, sizeof(path), "%s/missing.conf", dir);
        setenv(REGCONF_ENV, path, 1);
        CHECKF(registry_resolve("a", src, &n, &err) < 0 && strstr(err.msg, "missing.conf"), "%s",
               err.msg);
        unsetenv(REGCONF_ENV);
        if (old_home)
                setenv("HOME", old_home, 1);
        if (old_cache)
                setenv("XDG_CACHE_HOME", old_cache, 1);
        free(src);
        snprintf(path, sizeof(path), "rm -rf '%s'", dir);
        CHECK(system(path) == 0);
        PASS();
}

int main(void)
{
        test_toml_subset_and_its_refusals();
        test_short_names_as_podman_resolves_them();
        test_registry_tables_mirrors_rewrites_blocked();
        test_bad_registries_conf_names_file_and_line();
        test_version_1_lists();
        test_registries_conf_files_in_podmans_order();
        test_docker_hub_credentials_under_each_of_its_keys();
        test_ref_forms_as_podman_reads_them();
        test_ref_refusals_name_the_reference();
        test_challenge_params_quoted_bare_and_escaped();
        return failures ? 1 : 0;
}
