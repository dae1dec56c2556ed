/* The Containerfile executor of `image build`: stages, build variables, the image config
 * each instruction changes, the build cache, and the image committed to the store.
 *
 * The cache: every instruction extends a stage's chain key (the SHA-256 of the previous
 * key and the instruction as it will run: expanded words, the build variables a RUN sees,
 * the digest of what a COPY copies). A step that writes a layer records under
 * build-cache/KEY in the store the layer it made ("empty" when it changed nothing); a
 * later build with the same key takes that layer when it is still stored. */
#include "imgbuild.h"
#include "step.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"
#include "../common/strv.h"
#include "../image/containerfile.h"
#include "../image/digest.h"
#include "../image/registry.h"
#include "../image/store-write.h"
#include "../spec/spec.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void json_deletep(cJSON **j)
{
        cJSON_Delete(*j);
}
#define _cleanup_json_ __attribute__((cleanup(json_deletep)))

struct stage {
        char *name; /* AS name, lowercased; NULL */
        struct build_layers layers;
        cJSON *doc; /* the image config document */
        char key[OCI_DIGEST_LEN + 1];
        char **args; /* NAME=VALUE of the ARGs in scope (NAME alone: declared, no value) */
        size_t n_args;
        bool built;
};

struct build {
        const struct build_options *o;
        struct build_ctx ctx;
        struct image_store store;
        struct containerfile cf;
        const char *file_name; /* base name, for messages */
        int context_fd;
        char **ignore;
        size_t n_ignore;
        char **global_args; /* before the first FROM */
        size_t n_global_args;
        struct stage *stages;
        size_t n_stages;
        struct image_ref *bases; /* images built on or copied from: held until the end */
        size_t n_bases;
        unsigned step, n_steps;
};

static const char *pairs_get(char *const *v, size_t n, const char *name)
{
        size_t len = strlen(name);

        for (size_t i = n; i-- > 0;)
                if (strncmp(v[i], name, len) == 0 && (v[i][len] == '=' || !v[i][len]))
                        return v[i][len] == '=' ? v[i] + len + 1 : NULL;
        return NULL;
}

/* NAME=VALUE into v, replacing NAME's earlier entry. value NULL: NAME alone. */
static int pairs_set(char ***v, size_t *n, const char *name, const char *value,
                     struct cs_error *err)
{
        size_t len = strlen(name);
        char *e;

        if ((value ? asprintf(&e, "%s=%s", name, value) : asprintf(&e, "%s", name)) < 0)
                return cs_error_set(err, ENOMEM, "build");
        for (size_t i = 0; i < *n; i++)
                if (strncmp((*v)[i], name, len) == 0 && ((*v)[i][len] == '=' || !(*v)[i][len])) {
                        free((*v)[i]);
                        (*v)[i] = e;
                        return 0;
                }
        if (strv_push(v, n, e) < 0) {
                free(e);
                return cs_error_set(err, ENOMEM, "build");
        }
        return 0;
}

static cJSON *doc_config(cJSON *doc)
{
        cJSON *c = cJSON_GetObjectItemCaseSensitive(doc, "config");

        if (!cJSON_IsObject(c)) {
                cJSON_DeleteItemFromObjectCaseSensitive(doc, "config");
                c = cJSON_AddObjectToObject(doc, "config");
        }
        return c;
}

static const char *config_string(cJSON *doc, const char *key)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(doc_config(doc), key);

        return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void config_set(cJSON *doc, const char *key, cJSON *value)
{
        cJSON *c = doc_config(doc);

        cJSON_DeleteItemFromObjectCaseSensitive(c, key);
        if (value)
                cJSON_AddItemToObject(c, key, value);
}

/* The value of NAME in the config's Env, or NULL. */
static const char *env_get(cJSON *doc, const char *name)
{
        const cJSON *env = cJSON_GetObjectItemCaseSensitive(doc_config(doc), "Env"), *e;
        size_t len = strlen(name);

        cJSON_ArrayForEach(e, env) if (cJSON_IsString(e) &&
                                       strncmp(e->valuestring, name, len) == 0 &&
                                       e->valuestring[len] == '=') return e->valuestring +
            len + 1;
        return NULL;
}

static int env_set(cJSON *doc, const char *name, const char *value, struct cs_error *err)
{
        cJSON *c = doc_config(doc), *env = cJSON_GetObjectItemCaseSensitive(c, "Env"), *e;
        size_t len = strlen(name);
        _cleanup_free_ char *text = NULL;
        cJSON *item;

        if (!cJSON_IsArray(env)) {
                cJSON_DeleteItemFromObjectCaseSensitive(c, "Env");
                env = cJSON_AddArrayToObject(c, "Env");
        }
        if (asprintf(&text, "%s=%s", name, value) < 0 || !(item = cJSON_CreateString(text)))
                return cs_error_set(err, ENOMEM, "build");
        int i = 0;
        cJSON_ArrayForEach(e, env)
        {
                if (cJSON_IsString(e) && strncmp(e->valuestring, name, len) == 0 &&
                    e->valuestring[len] == '=') {
                        cJSON_ReplaceItemInArray(env, i, item);
                        return 0;
                }
                i++;
        }
        cJSON_AddItemToArray(env, item);
        return 0;
}

struct lookup {
        struct stage *st; /* NULL: global args only (FROM) */
        struct build *b;
};

static const char *lookup_var(void *opaque, const char *name)
{
        struct lookup *l = opaque;
        const char *v;

        if (!l->st)
                return pairs_get(l->b->global_args, l->b->n_global_args, name);
        v = env_get(l->st->doc, name);
        return v ? v : pairs_get(l->st->args, l->st->n_args, name);
}

static int expand(struct build *b, struct stage *st, const char *word, char **ret,
                  struct cs_error *err)
{
        struct lookup l = {.st = st, .b = b};

        return containerfile_expand(word, b->cf.escape, lookup_var, &l, ret, err);
}

static void what_of(const struct build *b, const struct cf_instr *in, char *buf, size_t len)
{
        snprintf(buf, len, "%s:%u", b->file_name, in->line);
}

/* The chain key extended by text. */
static void key_extend(char key[OCI_DIGEST_LEN + 1], const char *text)
{
        _cleanup_free_ char *all = NULL;

        if (asprintf(&all, "%s\n%s", key, text) < 0) {
                key[0] = '\0'; /* no cache for this stage from here on */
                return;
        }
        sha256_hex(all, strlen(all), key);
}

static int history_add(cJSON *doc, const char *created_by, bool empty)
{
        cJSON *h = cJSON_GetObjectItemCaseSensitive(doc, "history"), *e;

        if (!cJSON_IsArray(h)) {
                cJSON_DeleteItemFromObjectCaseSensitive(doc, "history");
                h = cJSON_AddArrayToObject(doc, "history");
        }
        e = cJSON_CreateObject();
        if (!e || !cJSON_AddStringToObject(e, "created_by", created_by) ||
            (empty && !cJSON_AddTrueToObject(e, "empty_layer"))) {
                cJSON_Delete(e);
                return -ENOMEM;
        }
        cJSON_AddItemToArray(h, e);
        return 0;
}

/* A stored image by name or registry reference (pulled when absent, or always with
 * --pull): held in b->bases, its layers into *layers, its config document into *doc. */
static int open_base(struct build *b, const char *what, const char *kw, const char *ref_text,
                     struct build_layers *layers, cJSON **doc, char ret_digest[OCI_DIGEST_LEN + 1],
                     struct cs_error *err)
{
        struct image_ref ref = {.lock_fd = -1};
        struct registry_ref rr;
        _cleanup_free_ char *json = NULL;
        struct image_ref *nb;
        char digest[OCI_DIGEST_LEN + 1];
        struct cs_error probe = {0};
        int r;

        if (registry_ref_parse(ref_text, &rr, err) < 0)
                return cs_error_wrap(err, "%s: %s%s", what, kw, ref_text);
        /* a name in the store first (what `image import --name` gave), then the registry's */
        if (b->o->pull || store_resolve(&b->store, ref_text, digest, &probe) < 0) {
                if (b->o->pull || store_resolve(&b->store, rr.name, digest, &probe) < 0) {
                        struct pull_options po = {.tls_verify = b->o->tls_verify,
                                                  .max_layers = LAYER_DEFAULT_MAX_LAYERS};
                        struct import_options io;
                        struct import_result res;
                        struct pull_display *disp = NULL;

                        oci_platform_host(&po.platform);
                        import_options_init(&io);
                        if (!b->o->quiet) {
                                fprintf(stderr, "pulling %s\n", rr.name);
                                if (b->o->pull_display_attach)
                                        disp = b->o->pull_display_attach(&po, &io);
                        }
                        r = store_pull(&b->store, &rr, &po, &io, &res, err);
                        if (b->o->pull_display_end)
                                b->o->pull_display_end(disp, &io);
                        if (r < 0)
                                return cs_error_wrap(err,
                                                     "%s: %s%s: no stage or stored image of that "
                                                     "name, and pulling it failed",
                                                     what, kw, ref_text);
                        snprintf(digest, sizeof(digest), "%s", res.digest);
                }
        }
        /* By its digest from here on: a name retagged meanwhile must not pair one image's
         * layers with another's config. */
        r = store_open_image(digest, &ref, err);
        if (r < 0)
                return cs_error_wrap(err, "%s: %s%s", what, kw, ref_text);
        nb = realloc(b->bases, (b->n_bases + 1) * sizeof(*nb));
        if (!nb) {
                image_ref_free(&ref);
                return cs_error_set(err, ENOMEM, "build");
        }
        b->bases = nb;
        b->bases[b->n_bases++] = ref;
        snprintf(ret_digest, OCI_DIGEST_LEN + 1, "%s", ref.digest);
        for (size_t i = 0; i < ref.config.n_diff_ids; i++) {
                int fd = store_layer_hold(&b->store, ref.config.diff_ids[i], err);

                if (fd == -ENOENT)
                        return cs_error_setx(err, ENOENT,
                                             "%s: %s%s: the image is stored in csandbox's "
                                             "earlier layout (one unpacked tree), which a build "
                                             "cannot stack layers on: import or pull it again",
                                             what, kw, ref_text);
                if (fd < 0 || build_layers_add(layers, ref.config.diff_ids[i], fd, err) < 0)
                        return -1;
        }
        r = store_inspect(&b->store, digest, &json, err);
        if (r < 0)
                return r;
        *doc = cJSON_Parse(json);
        if (!cJSON_IsObject(*doc))
                return cs_error_setx(err, EINVAL, "%s: %s%s: its config is not JSON", what, kw,
                                     ref_text);
        return 0;
}

static struct stage *stage_named(struct build *b, const char *name, size_t before)
{
        char *end;
        unsigned long idx = strtoul(name, &end, 10);

        if (*name && !*end && idx < before)
                return &b->stages[idx];
        for (size_t i = 0; i < before; i++)
                if (b->stages[i].name && strcasecmp(b->stages[i].name, name) == 0)
                        return &b->stages[i];
        return NULL;
}

static int instr_from(struct build *b, size_t si, const struct cf_instr *in, struct cs_error *err)
{
        struct stage *st = &b->stages[si], *prev;
        _cleanup_free_ char *ref = NULL;
        char what[300], digest[OCI_DIGEST_LEN + 1];
        int r;

        what_of(b, in, what, sizeof(what));
        r = expand(b, NULL, in->argv[0], &ref, err);
        if (r < 0)
                return cs_error_wrap(err, "%s", what);
        if (in->stage && !(st->name = strdup(in->stage)))
                return cs_error_set(err, ENOMEM, "build");
        if (strcmp(ref, "scratch") == 0) {
                char arch[64];
                struct oci_platform p;

                oci_platform_host(&p);
                snprintf(arch, sizeof(arch), "%s", p.arch);
                st->doc = cJSON_CreateObject();
                if (!st->doc || !cJSON_AddStringToObject(st->doc, "architecture", arch) ||
                    !cJSON_AddStringToObject(st->doc, "os", "linux"))
                        return cs_error_set(err, ENOMEM, "build");
                key_extend(st->key, "FROM scratch");
                return 0;
        }
        prev = stage_named(b, ref, si);
        if (prev && !isdigit((unsigned char)ref[0])) {
                st->doc = cJSON_Duplicate(prev->doc, true);
                if (!st->doc)
                        return cs_error_set(err, ENOMEM, "build");
                snprintf(st->key, sizeof(st->key), "%s", prev->key);
                return build_layers_copy(&st->layers, &prev->layers, err);
        }
        r = open_base(b, what, "FROM ", ref, &st->layers, &st->doc, digest, err);
        if (r < 0)
                return r;
        {
                char k[OCI_DIGEST_LEN + 8];

                snprintf(k, sizeof(k), "FROM %s", digest);
                key_extend(st->key, k);
        }
        return 0;
}

/* The ARGs of in: declared in the stage (or globally before the first FROM) with the
 * --build-arg value, else the default, else (in a stage) the global one's. */
static int instr_arg(struct build *b, struct stage *st, const struct cf_instr *in,
                     struct cs_error *err)
{
        for (size_t i = 0; i < in->n_pairs; i++) {
                const char *name = in->pairs[i].key, *given = NULL;
                _cleanup_free_ char *def = NULL;
                const char *value;
                int r;

                for (size_t k = 0; k < b->o->n_build_args; k++) {
                        size_t len = strlen(name);
                        if (strncmp(b->o->build_args[k], name, len) == 0 &&
                            b->o->build_args[k][len] == '=')
                                given = b->o->build_args[k] + len + 1;
                }
                if (in->pairs[i].value) {
                        r = expand(b, st, in->pairs[i].value, &def, err);
                        if (r < 0)
                                return r;
                }
                value = given ? given
                        : def ? def
                        : st  ? pairs_get(b->global_args, b->n_global_args, name)
                              : NULL;
                r = st ? pairs_set(&st->args, &st->n_args, name, value, err)
                       : pairs_set(&b->global_args, &b->n_global_args, name, value, err);
                if (r < 0)
                        return r;
                if (st) {
                        _cleanup_free_ char *k = NULL;
                        if (asprintf(&k, "ARG %s=%s", name, value ? value : "") < 0)
                                return cs_error_set(err, ENOMEM, "build");
                        key_extend(st->key, k);
                }
        }
        return 0;
}

/* argv of a shell form: the config's Shell (else /bin/sh -c) and the command line. */
static cJSON *shell_form(cJSON *doc, const char *line)
{
        const cJSON *shell = cJSON_GetObjectItemCaseSensitive(doc_config(doc), "Shell");
        cJSON *a = cJSON_IsArray(shell) && cJSON_GetArraySize(shell) > 0
                       ? cJSON_Duplicate(shell, true)
                       : NULL;

        if (!a) {
                a = cJSON_CreateArray();
                cJSON_AddItemToArray(a, cJSON_CreateString("/bin/sh"));
                cJSON_AddItemToArray(a, cJSON_CreateString("-c"));
        }
        cJSON_AddItemToArray(a, cJSON_CreateString(line));
        return a;
}

static cJSON *words_array(const struct cf_instr *in)
{
        cJSON *a = cJSON_CreateArray();

        for (size_t i = 0; a && i < in->argc; i++)
                cJSON_AddItemToArray(a, cJSON_CreateString(in->argv[i]));
        return a;
}

static char **json_strv(const cJSON *a)
{
        size_t n = (size_t)cJSON_GetArraySize(a), i = 0;
        char **v = calloc(n + 1, sizeof(char *));
        const cJSON *e;

        cJSON_ArrayForEach(e, a) if (v && cJSON_IsString(e)) v[i++] = strdup(e->valuestring);
        return v;
}

/* WORKDIR joined and made canonical: absolute, no `.`, `..` resolved lexically. */
static char *workdir_join(const char *cur, const char *path)
{
        _cleanup_free_ char *all = NULL;
        char *out, *save = NULL;
        size_t len = 0;

        if (asprintf(&all, "%s/%s", path[0] == '/' ? "" : (cur ? cur : ""), path) < 0)
                return NULL;
        out = calloc(strlen(all) + 2, 1);
        if (!out)
                return NULL;
        for (char *c = strtok_r(all, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
                if (strcmp(c, ".") == 0)
                        continue;
                if (strcmp(c, "..") == 0) {
                        while (len > 0 && out[len - 1] != '/')
                                len--;
                        if (len > 0)
                                len--;
                        out[len] = '\0';
                        continue;
                }
                out[len++] = '/';
                strcpy(out + len, c);
                len += strlen(c);
        }
        if (len == 0)
                strcpy(out, "/");
        return out;
}

/* A cached layer for key: 1 with *ret_held and ret_diff_id ("" for an empty step), 0 when
 * there is none (or its layer is gone). */
static int cache_get(struct build *b, const char *key, char ret_diff_id[OCI_DIGEST_LEN + 1],
                     int *ret_held)
{
        _cleanup_free_ char *text = NULL;
        char name[128];
        struct cs_error ignored;
        size_t len;
        int fd;

        if (b->o->no_cache || strncmp(key, "sha256:", 7) != 0)
                return 0;
        snprintf(name, sizeof(name), STORE_BUILD_CACHE "/%s", key + 7);
        if (cs_read_file_at(b->store.fd, name, 256, true, &text, &len, &ignored) < 0)
                return 0;
        text[strcspn(text, "\n")] = '\0';
        if (strcmp(text, "empty") == 0) {
                ret_diff_id[0] = '\0';
                *ret_held = -1;
                return 1;
        }
        if (oci_digest_check(text, "cache", &ignored) < 0)
                return 0;
        fd = store_layer_hold(&b->store, text, &ignored);
        if (fd < 0)
                return 0;
        snprintf(ret_diff_id, OCI_DIGEST_LEN + 1, "%s", text);
        *ret_held = fd;
        return 1;
}

static void cache_put(struct build *b, const char *key, const char *diff_id)
{
        _cleanup_close_ int dir = -1;
        char line[OCI_DIGEST_LEN + 2];
        /* Dropped: a cache entry not written costs the next build a step, nothing else. */
        struct cs_error ignored;

        if (strncmp(key, "sha256:", 7) != 0)
                return;
        mkdirat(b->store.fd, STORE_BUILD_CACHE, 0700);
        dir = openat(b->store.fd, STORE_BUILD_CACHE, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dir < 0)
                return;
        snprintf(line, sizeof(line), "%s\n", diff_id[0] ? diff_id : "empty");
        (void)cs_write_file_atomic(dir, key + 7, line, strlen(line), 0600, &ignored);
}

/* A step that writes a layer: from the cache, or run; the layer appended to the stage. */
/* key_text: the step as it runs (extends the chain key); history: the instruction as
 * written (the image's history). */
static int layer_step(struct build *b, struct stage *st, const struct build_step *step,
                      const char *key_text, const char *history, struct cs_error *err)
{
        char diff_id[OCI_DIGEST_LEN + 1];
        int held = -1, r;

        key_extend(st->key, key_text);
        if (cache_get(b, st->key, diff_id, &held) == 1) {
                if (!b->o->quiet)
                        fprintf(stderr, "--> Using cache %.19s\n",
                                diff_id[0] ? diff_id : "(no change)");
        } else {
                r = build_step_layer(&b->ctx, &st->layers, step, diff_id, &held, err);
                if (r < 0)
                        return r;
                cache_put(b, st->key, diff_id);
        }
        if (diff_id[0]) {
                cJSON *rootfs = cJSON_GetObjectItemCaseSensitive(st->doc, "rootfs");
                cJSON *ids;

                if (st->layers.n >= STORE_MAX_LAYERS) {
                        close(held);
                        return cs_error_setx(err, E2BIG,
                                             "%s: the image would have more than %u layers, the "
                                             "most an overlay stacks: join RUN steps",
                                             step->what, STORE_MAX_LAYERS);
                }
                r = build_layers_add(&st->layers, diff_id, held, err);
                if (r < 0)
                        return r;
                if (!cJSON_IsObject(rootfs)) {
                        cJSON_DeleteItemFromObjectCaseSensitive(st->doc, "rootfs");
                        rootfs = cJSON_AddObjectToObject(st->doc, "rootfs");
                        cJSON_AddStringToObject(rootfs, "type", "layers");
                }
                ids = cJSON_GetObjectItemCaseSensitive(rootfs, "diff_ids");
                if (!cJSON_IsArray(ids)) {
                        cJSON_DeleteItemFromObjectCaseSensitive(rootfs, "diff_ids");
                        ids = cJSON_AddArrayToObject(rootfs, "diff_ids");
                }
                cJSON_AddItemToArray(ids, cJSON_CreateString(diff_id));
        }
        return history_add(st->doc, history, !diff_id[0]) < 0 ? cs_error_set(err, ENOMEM, "build")
                                                              : 0;
}

/* The stage's layers as an image_ref, for reading its /etc/passwd (nothing owned). */
static void stage_view(const struct stage *st, struct image_ref *view, int *fds)
{
        for (size_t k = 0; k < st->layers.n; k++)
                fds[k] = st->layers.diff_fds[st->layers.n - 1 - k];
        *view = (struct image_ref){.layer_fds = fds, .n_layers = st->layers.n, .lock_fd = -1};
}

static int instr_run(struct build *b, struct stage *st, const struct cf_instr *in, const char *what,
                     struct cs_error *err)
{
        _cleanup_json_ cJSON *argv = in->json ? words_array(in) : shell_form(st->doc, in->argv[0]);
        _cleanup_free_ int *fds = calloc(st->layers.n + 1, sizeof(int));
        char **env = NULL, **av = NULL;
        size_t n_env = 0;
        struct build_run run = {.what = what};
        struct image_ref view;
        _cleanup_free_ char *key = NULL, *argv_text = NULL;
        const cJSON *e, *envj = cJSON_GetObjectItemCaseSensitive(doc_config(st->doc), "Env");
        int r;

        if (!argv || !fds || !(av = json_strv(argv)) || !(argv_text = cJSON_PrintUnformatted(argv)))
                return cs_error_set(err, ENOMEM, "build");
        /* the config's Env, then the build variables in scope that it does not set */
        cJSON_ArrayForEach(e, envj) if (cJSON_IsString(e))
            strv_push_dup(&env, &n_env, e->valuestring);
        for (size_t i = 0; i < st->n_args; i++) {
                char *eq = strchr(st->args[i], '=');
                _cleanup_free_ char *name =
                    eq ? strndup(st->args[i], (size_t)(eq - st->args[i])) : NULL;
                if (name && !env_get(st->doc, name))
                        strv_push_dup(&env, &n_env, st->args[i]);
        }
        if (!env_get(st->doc, "PATH"))
                strv_push_dup(&env, &n_env, "PATH=" SPEC_DEFAULT_PATH);
        run.argv = av;
        run.cwd = config_string(st->doc, "WorkingDir");
        if (!run.cwd || !*run.cwd)
                run.cwd = "/";
        stage_view(st, &view, fds);
        r = image_resolve_user(&view, config_string(st->doc, "User"), &run.uid, &run.gid, err);
        if (r < 0) {
                r = cs_error_wrap(err, "%s: USER", what);
                goto out;
        }
        if (run.uid == 0 && !env_get(st->doc, "HOME"))
                strv_push_dup(&env, &n_env, "HOME=/root");
        if (!env) {
                r = cs_error_set(err, ENOMEM, "build");
                goto out;
        }
        run.env = env;
        {
                _cleanup_free_ char *envs = NULL;
                size_t len = 0;
                FILE *f = open_memstream(&envs, &len);

                for (size_t i = 0; f && env[i]; i++)
                        fprintf(f, "%s\n", env[i]);
                if (f)
                        fclose(f);
                if (asprintf(&key, "RUN %s\nuser %u:%u\ncwd %s\nnet %d\nenv %s", argv_text,
                             (unsigned)run.uid, (unsigned)run.gid, run.cwd, b->o->net,
                             envs ? envs : "") < 0)
                        key = NULL;
        }
        if (!key) {
                r = cs_error_set(err, ENOMEM, "build");
                goto out;
        }
        {
                struct build_step step = {.kind = BUILD_STEP_RUN, .run = &run, .what = what};
                _cleanup_free_ char *hist = NULL;

                if (asprintf(&hist, "RUN %s", in->original) < 0)
                        hist = NULL;
                /* the chain key takes everything; history shows the instruction */
                r = layer_step(b, st, &step, key, hist ? hist : "RUN", err);
        }
out:
        strv_free(&env, &n_env);
        for (size_t i = 0; av && av[i]; i++)
                free(av[i]);
        free(av);
        return r;
}

static int instr_copy(struct build *b, size_t si, const struct cf_instr *in, const char *what,
                      struct cs_error *err)
{
        struct stage *st = &b->stages[si];
        struct build_copy c = {.src_root_fd = b->context_fd,
                               .from_context = true,
                               .ignore = b->ignore,
                               .n_ignore = b->n_ignore,
                               .add = in->kind == CF_ADD,
                               .what = what};
        struct build_layers from_layers = {0};
        struct build_step step = {.kind = BUILD_STEP_COPY, .copy = &c, .what = what};
        _cleanup_free_ char *chown = NULL, *chmod = NULL, *from = NULL, *key = NULL;
        char **words = NULL;
        size_t n_words = 0;
        char digest[65] = "";
        const char *f;
        int r = 0;

        for (size_t i = 0; r >= 0 && i < in->n_flags; i++) {
                const char *k = in->flags[i].key;
                if (strcmp(k, "from") && strcmp(k, "chown") && strcmp(k, "chmod") &&
                    strcmp(k, "link"))
                        r = cs_error_setx(err, EINVAL, "%s: %s --%s is not supported", what,
                                          cf_kind_name(in->kind), k);
        }
        if (r >= 0 && (f = cf_instr_flag(in, "chown")) && *f)
                r = expand(b, st, f, &chown, err);
        if (r >= 0 && (f = cf_instr_flag(in, "chmod")) && *f)
                r = expand(b, st, f, &chmod, err);
        if (r >= 0 && (f = cf_instr_flag(in, "from")) && *f)
                r = expand(b, st, f, &from, err);
        for (size_t i = 0; r >= 0 && i < in->argc; i++) {
                char *w = NULL;

                r = expand(b, st, in->argv[i], &w, err);
                if (r >= 0 && strv_push(&words, &n_words, w) < 0) {
                        free(w);
                        r = cs_error_set(err, ENOMEM, "build");
                }
        }
        if (r < 0)
                goto out;
        c.srcs = words;
        c.n_srcs = n_words - 1;
        c.dest = words[n_words - 1];
        c.workdir = config_string(st->doc, "WorkingDir");
        if (!c.workdir || !*c.workdir)
                c.workdir = "/";
        c.chown = chown;
        c.chmod = chmod;
        if (from) {
                struct stage *src = stage_named(b, from, si);
                _cleanup_json_ cJSON *doc = NULL;
                char d[OCI_DIGEST_LEN + 1];

                if (src) {
                        r = build_layers_copy(&from_layers, &src->layers, err);
                } else if (in->kind == CF_ADD) {
                        r = cs_error_setx(err, EINVAL, "%s: ADD --from=%s: no such stage", what,
                                          from);
                } else {
                        r = open_base(b, what, "COPY --from=", from, &from_layers, &doc, d, err);
                }
                if (r < 0)
                        goto out;
                c.from_context = false;
                c.ignore = NULL;
                c.n_ignore = 0;
                c.src_root_fd = -1;
                step.from = &from_layers;
                {
                        /* the source is the layers: their ids are its content */
                        _cleanup_free_ char *ids = NULL;
                        size_t len = 0;
                        FILE *m = open_memstream(&ids, &len);
                        for (size_t k = 0; m && k < from_layers.n; k++)
                                fprintf(m, "%s\n", from_layers.diff_ids[k]);
                        if (m)
                                fclose(m);
                        sha256_hex(ids ? ids : "", ids ? len : 0, d);
                        snprintf(digest, sizeof(digest), "%s", d + 7);
                }
        } else {
                r = build_copy_digest(&c, digest, err);
                if (r < 0)
                        goto out;
        }
        {
                _cleanup_free_ char *srcs = NULL;
                size_t len = 0;
                FILE *m = open_memstream(&srcs, &len);

                for (size_t k = 0; m && k < n_words; k++)
                        fprintf(m, "%s\n", words[k]);
                if (m)
                        fclose(m);
                if (asprintf(&key, "%s %s\nchown %s\nchmod %s\nworkdir %s\ncontent %s",
                             cf_kind_name(in->kind), srcs ? srcs : "", chown ? chown : "",
                             chmod ? chmod : "", c.workdir, digest) < 0)
                        key = NULL;
        }
        if (!key) {
                r = cs_error_set(err, ENOMEM, "build");
                goto out;
        }
        {
                _cleanup_free_ char *hist = NULL;

                if (asprintf(&hist, "%s %s", cf_kind_name(in->kind), in->original) < 0)
                        hist = NULL;
                step.content = from ? NULL : digest;
                r = layer_step(b, st, &step, key, hist ? hist : "COPY", err);
        }
out:
        build_layers_free(&from_layers);
        strv_free(&words, &n_words);
        return r;
}

static int instr_config(struct build *b, struct stage *st, const struct cf_instr *in,
                        const char *what, struct cs_error *err)
{
        _cleanup_free_ char *v = NULL;
        int r = 0;

        switch (in->kind) {
        case CF_ENV:
                for (size_t i = 0; r >= 0 && i < in->n_pairs; i++) {
                        _cleanup_free_ char *val = NULL;
                        r = expand(b, st, in->pairs[i].value ? in->pairs[i].value : "", &val, err);
                        if (r >= 0)
                                r = env_set(st->doc, in->pairs[i].key, val, err);
                }
                break;
        case CF_LABEL: {
                cJSON *c = doc_config(st->doc), *l = cJSON_GetObjectItemCaseSensitive(c, "Labels");

                if (!cJSON_IsObject(l)) {
                        cJSON_DeleteItemFromObjectCaseSensitive(c, "Labels");
                        l = cJSON_AddObjectToObject(c, "Labels");
                }
                for (size_t i = 0; r >= 0 && i < in->n_pairs; i++) {
                        _cleanup_free_ char *k = NULL, *val = NULL;
                        r = expand(b, st, in->pairs[i].key, &k, err);
                        if (r >= 0)
                                r = expand(b, st, in->pairs[i].value ? in->pairs[i].value : "",
                                           &val, err);
                        if (r >= 0) {
                                cJSON_DeleteItemFromObjectCaseSensitive(l, k);
                                cJSON_AddStringToObject(l, k, val);
                        }
                }
                break;
        }
        case CF_USER:
                r = expand(b, st, in->argv[0], &v, err);
                if (r >= 0)
                        config_set(st->doc, "User", cJSON_CreateString(v));
                break;
        case CF_STOPSIGNAL:
                r = expand(b, st, in->argv[0], &v, err);
                if (r >= 0)
                        config_set(st->doc, "StopSignal", cJSON_CreateString(v));
                break;
        case CF_MAINTAINER:
                cJSON_DeleteItemFromObjectCaseSensitive(st->doc, "author");
                cJSON_AddStringToObject(st->doc, "author", in->argv[0]);
                break;
        case CF_EXPOSE:
        case CF_VOLUME: {
                const char *key = in->kind == CF_EXPOSE ? "ExposedPorts" : "Volumes";
                cJSON *c = doc_config(st->doc), *o = cJSON_GetObjectItemCaseSensitive(c, key);

                if (!cJSON_IsObject(o)) {
                        cJSON_DeleteItemFromObjectCaseSensitive(c, key);
                        o = cJSON_AddObjectToObject(c, key);
                }
                for (size_t i = 0; r >= 0 && i < in->argc; i++) {
                        _cleanup_free_ char *w = NULL, *port = NULL;
                        r = expand(b, st, in->argv[i], &w, err);
                        if (r < 0)
                                break;
                        if (in->kind == CF_EXPOSE && !strchr(w, '/') &&
                            asprintf(&port, "%s/tcp", w) < 0)
                                port = NULL;
                        cJSON_DeleteItemFromObjectCaseSensitive(o, port ? port : w);
                        cJSON_AddItemToObject(o, port ? port : w, cJSON_CreateObject());
                }
                break;
        }
        case CF_SHELL:
                if (!in->json)
                        return cs_error_setx(err, EINVAL,
                                             "%s: SHELL takes the JSON form: SHELL [\"/bin/sh\", "
                                             "\"-c\"]",
                                             what);
                config_set(st->doc, "Shell", words_array(in));
                break;
        case CF_CMD:
        case CF_ENTRYPOINT:
                config_set(st->doc, in->kind == CF_CMD ? "Cmd" : "Entrypoint",
                           in->json ? words_array(in) : shell_form(st->doc, in->argv[0]));
                /* an ENTRYPOINT clears the Cmd the base image had (as docker does) */
                if (in->kind == CF_ENTRYPOINT)
                        config_set(st->doc, "Cmd", NULL);
                break;
        default:
                break;
        }
        if (r < 0)
                return cs_error_wrap(err, "%s", what);
        {
                _cleanup_free_ char *k = NULL;
                _cleanup_free_ char *cfg = cJSON_PrintUnformatted(doc_config(st->doc));

                if (asprintf(&k, "%s %s\n%s", cf_kind_name(in->kind), in->original,
                             cfg ? cfg : "") < 0)
                        return cs_error_set(err, ENOMEM, "build");
                key_extend(st->key, k);
        }
        {
                _cleanup_free_ char *hist = NULL;
                if (asprintf(&hist, "%s %s", cf_kind_name(in->kind), in->original) < 0 ||
                    history_add(st->doc, hist, true) < 0)
                        return cs_error_set(err, ENOMEM, "build");
        }
        return 0;
}

static int instr_workdir(struct build *b, struct stage *st, const struct cf_instr *in,
                         const char *what, struct cs_error *err)
{
        _cleanup_free_ char *v = NULL, *dir = NULL, *key = NULL;
        struct build_step step = {.kind = BUILD_STEP_MKDIR, .what = what};
        int r = expand(b, st, in->argv[0], &v, err);

        if (r < 0)
                return cs_error_wrap(err, "%s", what);
        dir = workdir_join(config_string(st->doc, "WorkingDir"), v);
        if (!dir)
                return cs_error_set(err, ENOMEM, "build");
        config_set(st->doc, "WorkingDir", cJSON_CreateString(dir));
        step.mkdir = dir;
        if (asprintf(&key, "WORKDIR %s", dir) < 0)
                return cs_error_set(err, ENOMEM, "build");
        return layer_step(b, st, &step, key, key, err);
}

static int instr_apply(struct build *b, size_t si, const struct cf_instr *in, struct cs_error *err)
{
        struct stage *st = &b->stages[si];
        char what[300];

        what_of(b, in, what, sizeof(what));
        b->step++;
        if (!b->o->quiet)
                fprintf(stderr, "STEP %u/%u: %s %s\n", b->step, b->n_steps, cf_kind_name(in->kind),
                        in->original);
        switch (in->kind) {
        case CF_FROM:
                return instr_from(b, si, in, err);
        case CF_ARG:
                return instr_arg(b, st, in, err);
        case CF_RUN:
                return instr_run(b, st, in, what, err);
        case CF_COPY:
        case CF_ADD:
                return instr_copy(b, si, in, what, err);
        case CF_WORKDIR:
                return instr_workdir(b, st, in, what, err);
        default:
                return instr_config(b, st, in, what, err);
        }
}

/* .containerignore, else .dockerignore, of the context: its patterns. */
static int read_ignore(struct build *b, struct cs_error *err)
{
        static const char *const names[] = {".containerignore", ".dockerignore"};

        for (size_t i = 0; i < 2; i++) {
                _cleanup_free_ char *text = NULL;
                size_t len;
                int r = cs_read_file_at(b->context_fd, names[i], CONTAINERFILE_MAX_BYTES, true,
                                        &text, &len, err);

                if (r == -ENOENT)
                        continue;
                if (r < 0)
                        return cs_error_wrap(err, "the build context's %s", names[i]);
                r = build_ignore_parse(text, len, &b->ignore, &b->n_ignore, err);
                if (r < 0)
                        return cs_error_wrap(err, "the build context's %s", names[i]);
                return 0;
        }
        return 0;
}

static int load(struct build *b, struct cs_error *err)
{
        _cleanup_free_ char *text = NULL;
        _cleanup_close_ int fd = -1;
        const char *path = b->o->file;
        size_t len;
        int r;

        b->context_fd = open(b->o->context, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (b->context_fd < 0)
                return cs_error_set(err, errno, "the build context `%s`", b->o->context);
        if (path) {
                fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        return cs_error_set(err, errno, "-f %s", path);
                b->file_name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
        } else {
                b->file_name = "Containerfile";
                fd = openat(b->context_fd, "Containerfile", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
                if (fd < 0 && errno == ENOENT) {
                        b->file_name = "Dockerfile";
                        fd = openat(b->context_fd, "Dockerfile", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
                }
                if (fd < 0)
                        return cs_error_set(err, errno,
                                            "the build context `%s` has no Containerfile or "
                                            "Dockerfile (give one with -f)",
                                            b->o->context);
        }
        r = cs_read_fd(fd, b->file_name, CONTAINERFILE_MAX_BYTES, &text, &len, err);
        if (r < 0)
                return r;
        r = containerfile_parse(text, len, b->file_name, &b->cf, err);
        if (r < 0)
                return r;
        return read_ignore(b, err);
}

/* Which stage to build up to, and how many instructions that runs. */
static int plan_stages(struct build *b, size_t *ret_last, struct cs_error *err)
{
        size_t n = 0, last = SIZE_MAX;

        for (size_t i = 0; i < b->cf.n; i++)
                if (b->cf.instrs[i].kind == CF_FROM) {
                        if (b->o->target && b->cf.instrs[i].stage &&
                            strcasecmp(b->cf.instrs[i].stage, b->o->target) == 0)
                                last = n;
                        n++;
                }
        if (b->cf.n && b->cf.instrs[0].kind != CF_FROM && b->cf.instrs[0].kind != CF_ARG)
                return cs_error_setx(err, EINVAL,
                                     "%s:%u: %s before the first FROM (only ARG may "
                                     "come before it)",
                                     b->file_name, b->cf.instrs[0].line,
                                     cf_kind_name(b->cf.instrs[0].kind));
        if (n == 0)
                return cs_error_setx(err, EINVAL, "%s: no FROM: a build starts with FROM IMAGE",
                                     b->file_name);
        if (b->o->target && last == SIZE_MAX)
                return cs_error_setx(err, EINVAL, "--target %s: %s has no stage of that name",
                                     b->o->target, b->file_name);
        if (last == SIZE_MAX)
                last = n - 1;
        b->stages = calloc(n, sizeof(*b->stages));
        if (!b->stages)
                return cs_error_set(err, ENOMEM, "build");
        b->n_stages = n;
        for (size_t i = 0, s = SIZE_MAX; i < b->cf.n; i++) {
                if (b->cf.instrs[i].kind == CF_FROM)
                        s = s == SIZE_MAX ? 0 : s + 1;
                if (s != SIZE_MAX && s <= last)
                        b->n_steps++;
        }
        *ret_last = last;
        return 0;
}

/* The final stage as an image in the store, named by every -t. */
static int commit_image(struct build *b, struct stage *st, char ret_digest[OCI_DIGEST_LEN + 1],
                        struct cs_error *err)
{
        _cleanup_free_ char *text = NULL;
        _cleanup_close_ int lock = -1;
        struct layer_stats sum = {0};
        cJSON *rootfs, *ids;
        int r = 0;

        /* rootfs.diff_ids are exactly the stage's layers */
        cJSON_DeleteItemFromObjectCaseSensitive(st->doc, "rootfs");
        rootfs = cJSON_AddObjectToObject(st->doc, "rootfs");
        cJSON_AddStringToObject(rootfs, "type", "layers");
        ids = cJSON_AddArrayToObject(rootfs, "diff_ids");
        for (size_t k = 0; k < st->layers.n; k++) {
                cJSON_AddItemToArray(ids, cJSON_CreateString(st->layers.diff_ids[k]));
                layer_add_stored_stats(st->layers.held[k], &sum);
        }
        text = cJSON_PrintUnformatted(st->doc);
        if (!text)
                return cs_error_set(err, ENOMEM, "build");
        sha256_hex(text, strlen(text), ret_digest);
        lock = store_image_commit(&b->store, ret_digest, text, strlen(text), b->o->context, "build",
                                  &sum, st->layers.n, err);
        if (lock < 0)
                return lock;
        for (size_t i = 0; r >= 0 && i < b->o->n_tags; i++)
                r = store_name_set(&b->store, b->o->tags[i], ret_digest, err);
        if (r < 0)
                return cs_error_wrap(err, "the image is stored as %s but naming it failed",
                                     ret_digest);
        return 0;
}

int build_image(const struct build_options *o, char ret_digest[OCI_DIGEST_LEN + 1],
                struct cs_error *err)
{
        struct build b = {.o = o, .context_fd = -1, .store = {.fd = -1}};
        struct build_privileges priv;
        size_t last = 0, si = SIZE_MAX;
        int r;

        b.ctx.net = o->net;
        b.ctx.quiet = o->quiet;
        r = load(&b, err);
        if (r >= 0)
                r = plan_stages(&b, &last, err);
        if (r >= 0)
                r = store_open(NULL, &b.store, err);
        if (r < 0)
                goto out;
        b.ctx.store = &b.store;
        build_privileges_decide(&priv);
        b.ctx.priv = &priv;
        {
                /* Dropped: best effort; what a killed build left in tmp/ is only space. */
                struct cs_error ignored;
                (void)build_sweep(&b.ctx, &ignored);
                (void)store_tmp_sweep(&b.store, NULL, &ignored);
        }
        if (!priv.range && !o->quiet)
                fprintf(stderr,
                        "csandbox: build steps run as root of a user namespace where no other "
                        "id exists (a package manager that changes owners will fail): %s\n",
                        priv.why_no_range);
        for (size_t i = 0; i < b.cf.n; i++) {
                const struct cf_instr *in = &b.cf.instrs[i];

                if (in->kind == CF_FROM) {
                        si = si == SIZE_MAX ? 0 : si + 1;
                        if (si > last)
                                break;
                }
                if (si == SIZE_MAX) {
                        if (in->kind != CF_ARG) {
                                r = cs_error_setx(err, EINVAL,
                                                  "%s:%u: only ARG may come before "
                                                  "the first FROM",
                                                  b.file_name, in->line);
                                goto out;
                        }
                        r = instr_arg(&b, NULL, in, err);
                } else {
                        r = instr_apply(&b, si, in, err);
                }
                if (r < 0)
                        goto out;
        }
        r = commit_image(&b, &b.stages[last], ret_digest, err);
out:
        for (size_t i = 0; i < b.n_stages; i++) {
                free(b.stages[i].name);
                build_layers_free(&b.stages[i].layers);
                cJSON_Delete(b.stages[i].doc);
                strv_free(&b.stages[i].args, &b.stages[i].n_args);
        }
        free(b.stages);
        for (size_t i = 0; i < b.n_bases; i++)
                image_ref_free(&b.bases[i]);
        free(b.bases);
        strv_free(&b.ignore, &b.n_ignore);
        strv_free(&b.global_args, &b.n_global_args);
        containerfile_free(&b.cf);
        if (b.context_fd >= 0)
                close(b.context_fd);
        if (b.store.fd >= 0)
                store_close(&b.store);
        return r;
}
