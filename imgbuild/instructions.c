/* The instructions of a Containerfile, one stage's at a time: FROM, ARG, RUN, COPY, ADD,
 * WORKDIR and those that only change the image config. */
#include "stage.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"
#include "../common/strv.h"
#include "../image/oci/digest.h"
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

static int instr_from(struct build *b, size_t si, const struct cf_instr *in, struct cs_error *err)
{
        struct stage *st = &b->stages[si], *prev;
        _cleanup_free_ char *ref = NULL;
        char what[300], digest[OCI_DIGEST_LEN + 1];
        int r;

        build_what(b, in, what, sizeof(what));
        r = stage_expand(b, NULL, in->argv[0], &ref, err);
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
                stage_key_extend(st->key, "FROM scratch");
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
        r = build_open_base(b, what, "FROM ", ref, &st->layers, &st->doc, digest, err);
        if (r < 0)
                return r;
        {
                char k[OCI_DIGEST_LEN + 8];

                snprintf(k, sizeof(k), "FROM %s", digest);
                stage_key_extend(st->key, k);
        }
        return 0;
}

/* The ARGs of in: declared in the stage (or globally before the first FROM) with the
 * --build-arg value, else the default, else (in a stage) the global one's. */
int build_instr_arg(struct build *b, struct stage *st, const struct cf_instr *in,
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
                        r = stage_expand(b, st, in->pairs[i].value, &def, err);
                        if (r < 0)
                                return r;
                }
                value = given ? given
                        : def ? def
                        : st  ? build_pairs_get(b->global_args, b->n_global_args, name)
                              : NULL;
                r = st ? build_pairs_set(&st->args, &st->n_args, name, value, err)
                       : build_pairs_set(&b->global_args, &b->n_global_args, name, value, err);
                if (r < 0)
                        return r;
                if (st) {
                        _cleanup_free_ char *k = NULL;
                        if (asprintf(&k, "ARG %s=%s", name, value ? value : "") < 0)
                                return cs_error_set(err, ENOMEM, "build");
                        stage_key_extend(st->key, k);
                }
        }
        return 0;
}

static int instr_run(struct build *b, struct stage *st, const struct cf_instr *in, const char *what,
                     struct cs_error *err)
{
        _cleanup_json_ cJSON *argv =
            in->json ? instr_words_json(in) : doc_shell_form(st->doc, in->argv[0]);
        _cleanup_free_ int *fds = calloc(st->layers.n + 1, sizeof(int));
        char **env = NULL, **av = NULL;
        size_t n_env = 0;
        struct build_run run = {.what = what};
        struct image_ref view;
        _cleanup_free_ char *key = NULL, *argv_text = NULL;
        const cJSON *e, *envj = cJSON_GetObjectItemCaseSensitive(doc_config(st->doc), "Env");
        int r;

        if (!argv || !fds || !(av = build_json_strv(argv)) ||
            !(argv_text = cJSON_PrintUnformatted(argv)))
                return cs_error_set(err, ENOMEM, "build");
        /* the config's Env, then the build variables in scope that it does not set */
        cJSON_ArrayForEach(e, envj) if (cJSON_IsString(e))
            strv_push_dup(&env, &n_env, e->valuestring);
        for (size_t i = 0; i < st->n_args; i++) {
                char *eq = strchr(st->args[i], '=');
                _cleanup_free_ char *name =
                    eq ? strndup(st->args[i], (size_t)(eq - st->args[i])) : NULL;
                if (name && !doc_env_get(st->doc, name))
                        strv_push_dup(&env, &n_env, st->args[i]);
        }
        if (!doc_env_get(st->doc, "PATH"))
                strv_push_dup(&env, &n_env, "PATH=" SPEC_DEFAULT_PATH);
        run.argv = av;
        run.cwd = doc_string(st->doc, "WorkingDir");
        if (!run.cwd || !*run.cwd)
                run.cwd = "/";
        stage_view(st, &view, fds);
        r = image_resolve_user(&view, doc_string(st->doc, "User"), &run.uid, &run.gid, err);
        if (r < 0) {
                r = cs_error_wrap(err, "%s: USER", what);
                goto out;
        }
        if (run.uid == 0 && !doc_env_get(st->doc, "HOME"))
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
                r = stage_layer_step(b, st, &step, key, hist ? hist : "RUN", err);
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
                r = stage_expand(b, st, f, &chown, err);
        if (r >= 0 && (f = cf_instr_flag(in, "chmod")) && *f)
                r = stage_expand(b, st, f, &chmod, err);
        if (r >= 0 && (f = cf_instr_flag(in, "from")) && *f)
                r = stage_expand(b, st, f, &from, err);
        for (size_t i = 0; r >= 0 && i < in->argc; i++) {
                char *w = NULL;

                r = stage_expand(b, st, in->argv[i], &w, err);
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
        c.workdir = doc_string(st->doc, "WorkingDir");
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
                        r = build_open_base(b, what, "COPY --from=", from, &from_layers, &doc, d,
                                            err);
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
                r = stage_layer_step(b, st, &step, key, hist ? hist : "COPY", err);
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
                        r = stage_expand(b, st, in->pairs[i].value ? in->pairs[i].value : "", &val,
                                         err);
                        if (r >= 0)
                                r = doc_env_set(st->doc, in->pairs[i].key, val, err);
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
                        r = stage_expand(b, st, in->pairs[i].key, &k, err);
                        if (r >= 0)
                                r = stage_expand(
                                    b, st, in->pairs[i].value ? in->pairs[i].value : "", &val, err);
                        if (r >= 0) {
                                cJSON_DeleteItemFromObjectCaseSensitive(l, k);
                                cJSON_AddStringToObject(l, k, val);
                        }
                }
                break;
        }
        case CF_USER:
                r = stage_expand(b, st, in->argv[0], &v, err);
                if (r >= 0)
                        doc_set(st->doc, "User", cJSON_CreateString(v));
                break;
        case CF_STOPSIGNAL:
                r = stage_expand(b, st, in->argv[0], &v, err);
                if (r >= 0)
                        doc_set(st->doc, "StopSignal", cJSON_CreateString(v));
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
                        r = stage_expand(b, st, in->argv[i], &w, err);
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
                doc_set(st->doc, "Shell", instr_words_json(in));
                break;
        case CF_CMD:
        case CF_ENTRYPOINT:
                doc_set(st->doc, in->kind == CF_CMD ? "Cmd" : "Entrypoint",
                        in->json ? instr_words_json(in) : doc_shell_form(st->doc, in->argv[0]));
                /* an ENTRYPOINT clears the Cmd the base image had (as docker does) */
                if (in->kind == CF_ENTRYPOINT)
                        doc_set(st->doc, "Cmd", NULL);
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
                stage_key_extend(st->key, k);
        }
        {
                _cleanup_free_ char *hist = NULL;
                if (asprintf(&hist, "%s %s", cf_kind_name(in->kind), in->original) < 0 ||
                    doc_history_add(st->doc, hist, true) < 0)
                        return cs_error_set(err, ENOMEM, "build");
        }
        return 0;
}

static int instr_workdir(struct build *b, struct stage *st, const struct cf_instr *in,
                         const char *what, struct cs_error *err)
{
        _cleanup_free_ char *v = NULL, *dir = NULL, *key = NULL;
        struct build_step step = {.kind = BUILD_STEP_MKDIR, .what = what};
        int r = stage_expand(b, st, in->argv[0], &v, err);

        if (r < 0)
                return cs_error_wrap(err, "%s", what);
        dir = build_workdir_join(doc_string(st->doc, "WorkingDir"), v);
        if (!dir)
                return cs_error_set(err, ENOMEM, "build");
        doc_set(st->doc, "WorkingDir", cJSON_CreateString(dir));
        step.mkdir = dir;
        if (asprintf(&key, "WORKDIR %s", dir) < 0)
                return cs_error_set(err, ENOMEM, "build");
        return stage_layer_step(b, st, &step, key, key, err);
}

int build_instr_apply(struct build *b, size_t si, const struct cf_instr *in, struct cs_error *err)
{
        struct stage *st = &b->stages[si];
        char what[300];

        build_what(b, in, what, sizeof(what));
        b->step++;
        if (!b->o->quiet)
                fprintf(stderr, "STEP %u/%u: %s %s\n", b->step, b->n_steps, cf_kind_name(in->kind),
                        in->original);
        switch (in->kind) {
        case CF_FROM:
                return instr_from(b, si, in, err);
        case CF_ARG:
                return build_instr_arg(b, st, in, err);
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
