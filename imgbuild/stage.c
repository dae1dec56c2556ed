/* A build's stages: build variables, the image config document, the chain key and the
 * cache, base images (stage.h). */
#include "stage.h"
#include "step.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"
#include "../common/strv.h"
#include "../image/oci/digest.h"
#include "../image/registry/registries-conf.h"
#include "../image/registry/registry.h"
#include "../image/store/store-write.h"
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

const char *build_pairs_get(char *const *v, size_t n, const char *name)
{
        size_t len = strlen(name);

        for (size_t i = n; i-- > 0;)
                if (strncmp(v[i], name, len) == 0 && (v[i][len] == '=' || !v[i][len]))
                        return v[i][len] == '=' ? v[i] + len + 1 : NULL;
        return NULL;
}

/* NAME=VALUE into v, replacing NAME's earlier entry. value NULL: NAME alone. */
int build_pairs_set(char ***v, size_t *n, const char *name, const char *value, struct cs_error *err)
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

cJSON *doc_config(cJSON *doc)
{
        cJSON *c = cJSON_GetObjectItemCaseSensitive(doc, "config");

        if (!cJSON_IsObject(c)) {
                cJSON_DeleteItemFromObjectCaseSensitive(doc, "config");
                c = cJSON_AddObjectToObject(doc, "config");
        }
        return c;
}

const char *doc_string(cJSON *doc, const char *key)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(doc_config(doc), key);

        return cJSON_IsString(v) ? v->valuestring : NULL;
}

void doc_set(cJSON *doc, const char *key, cJSON *value)
{
        cJSON *c = doc_config(doc);

        cJSON_DeleteItemFromObjectCaseSensitive(c, key);
        if (value)
                cJSON_AddItemToObject(c, key, value);
}

/* The value of NAME in the config's Env, or NULL. */
const char *doc_env_get(cJSON *doc, const char *name)
{
        const cJSON *env = cJSON_GetObjectItemCaseSensitive(doc_config(doc), "Env"), *e;
        size_t len = strlen(name);

        cJSON_ArrayForEach(e, env) if (cJSON_IsString(e) &&
                                       strncmp(e->valuestring, name, len) == 0 &&
                                       e->valuestring[len] == '=') return e->valuestring +
            len + 1;
        return NULL;
}

int doc_env_set(cJSON *doc, const char *name, const char *value, struct cs_error *err)
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
                return build_pairs_get(l->b->global_args, l->b->n_global_args, name);
        v = doc_env_get(l->st->doc, name);
        return v ? v : build_pairs_get(l->st->args, l->st->n_args, name);
}

int stage_expand(struct build *b, struct stage *st, const char *word, char **ret,
                 struct cs_error *err)
{
        struct lookup l = {.st = st, .b = b};

        return containerfile_expand(word, b->cf.escape, lookup_var, &l, ret, err);
}

void build_what(const struct build *b, const struct cf_instr *in, char *buf, size_t len)
{
        snprintf(buf, len, "%s:%u", b->file_name, in->line);
}

/* The chain key extended by text. */
void stage_key_extend(char key[OCI_DIGEST_LEN + 1], const char *text)
{
        _cleanup_free_ char *all = NULL;

        if (asprintf(&all, "%s\n%s", key, text) < 0) {
                key[0] = '\0'; /* no cache for this stage from here on */
                return;
        }
        sha256_hex(all, strlen(all), key);
}

int doc_history_add(cJSON *doc, const char *created_by, bool empty)
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
int build_open_base(struct build *b, const char *what, const char *kw, const char *ref_text,
                    struct build_layers *layers, cJSON **doc, char ret_digest[OCI_DIGEST_LEN + 1],
                    struct cs_error *err)
{
        struct image_ref ref = {.lock_fd = -1};
        struct registry_ref rr;
        _cleanup_free_ char *json = NULL;
        struct image_ref *nb;
        struct image_store *found = &b->store;
        char digest[OCI_DIGEST_LEN + 1];
        struct cs_error probe = {0};
        int r;

        if (registry_ref_parse(ref_text, &rr, err) < 0)
                return cs_error_wrap(err, "%s: %s%s", what, kw, ref_text);
        /* a name in the store first (what `image import --name` gave), then the registry's;
         * the writable store, then the read-only ones */
        if (b->o->pull ||
            store_find(&b->store, b->ro, b->n_ro, ref_text, digest, &found, &probe) < 0) {
                if (b->o->pull ||
                    store_find(&b->store, b->ro, b->n_ro, rr.name, digest, &found, &probe) < 0) {
                        struct pull_options po = {.tls_verify = b->o->tls_verify,
                                                  .max_layers = LAYER_DEFAULT_MAX_LAYERS};
                        _cleanup_free_ struct registry_source *src =
                            calloc(REGISTRY_SOURCES_MAX, sizeof(*src));
                        struct import_options io;
                        struct import_result res;
                        struct pull_display *disp = NULL;
                        size_t n_src = 0;

                        /* registries.conf as podman reads it, as `image pull` */
                        if (!src)
                                return cs_error_set(err, ENOMEM, "%s", what);
                        if (registry_resolve(ref_text, src, &n_src, err) < 0)
                                return cs_error_wrap(err, "%s: %s%s", what, kw, ref_text);
                        rr = src[0].ref;
                        po.endpoints = src[0].endpoints;
                        po.n_endpoints = src[0].n_endpoints;

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
                        found = &b->store;
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
                int fd =
                    store_layer_hold_any(&b->store, b->ro, b->n_ro, ref.config.diff_ids[i], err);

                if (fd == -ENOENT)
                        return cs_error_setx(err, ENOENT,
                                             "%s: %s%s: the image is stored in csandbox's "
                                             "earlier layout (one unpacked tree), which a build "
                                             "cannot stack layers on: import or pull it again",
                                             what, kw, ref_text);
                if (fd < 0 || build_layers_add(layers, ref.config.diff_ids[i], fd, err) < 0)
                        return -1;
        }
        r = store_inspect(found, digest, &json, err);
        if (r < 0)
                return r;
        *doc = cJSON_Parse(json);
        if (!cJSON_IsObject(*doc))
                return cs_error_setx(err, EINVAL, "%s: %s%s: its config is not JSON", what, kw,
                                     ref_text);
        return 0;
}

struct stage *stage_named(struct build *b, const char *name, size_t before)
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

/* argv of a shell form: the config's Shell (else /bin/sh -c) and the command line. */
cJSON *doc_shell_form(cJSON *doc, const char *line)
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

cJSON *instr_words_json(const struct cf_instr *in)
{
        cJSON *a = cJSON_CreateArray();

        for (size_t i = 0; a && i < in->argc; i++)
                cJSON_AddItemToArray(a, cJSON_CreateString(in->argv[i]));
        return a;
}

char **build_json_strv(const cJSON *a)
{
        size_t n = (size_t)cJSON_GetArraySize(a), i = 0;
        char **v = calloc(n + 1, sizeof(char *));
        const cJSON *e;

        cJSON_ArrayForEach(e, a) if (v && cJSON_IsString(e)) v[i++] = strdup(e->valuestring);
        return v;
}

/* WORKDIR joined and made canonical: absolute, no `.`, `..` resolved lexically. */
char *build_workdir_join(const char *cur, const char *path)
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
int build_cache_get(struct build *b, const char *key, char ret_diff_id[OCI_DIGEST_LEN + 1],
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

void build_cache_put(struct build *b, const char *key, const char *diff_id)
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
int stage_layer_step(struct build *b, struct stage *st, const struct build_step *step,
                     const char *key_text, const char *history, struct cs_error *err)
{
        char diff_id[OCI_DIGEST_LEN + 1];
        int held = -1, r;

        stage_key_extend(st->key, key_text);
        if (build_cache_get(b, st->key, diff_id, &held) == 1) {
                if (!b->o->quiet)
                        fprintf(stderr, "--> Using cache %.19s\n",
                                diff_id[0] ? diff_id : "(no change)");
        } else {
                r = build_step_layer(&b->ctx, &st->layers, step, diff_id, &held, err);
                if (r < 0)
                        return r;
                build_cache_put(b, st->key, diff_id);
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
        return doc_history_add(st->doc, history, !diff_id[0]) < 0
                   ? cs_error_set(err, ENOMEM, "build")
                   : 0;
}

/* The stage's layers as an image_ref, for reading its /etc/passwd (nothing owned). */
void stage_view(const struct stage *st, struct image_ref *view, int *fds)
{
        for (size_t k = 0; k < st->layers.n; k++)
                fds[k] = st->layers.diff_fds[st->layers.n - 1 - k];
        *view = (struct image_ref){.layer_fds = fds, .n_layers = st->layers.n, .lock_fd = -1};
}
