/* Inside `image build`'s interpreter: a build and its stages (the types engine.c,
 * instructions.c and stage.c share), and what the instructions use of them (stage.c): build
 * variables, the image config document, the chain key and the cache, base images. */
#pragma once
#include "imgbuild.h"
#include "layers.h"

#include "../image/containerfile/containerfile.h"
#include "../image/store/store-write.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

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
        struct image_store *ro; /* CSANDBOX_READONLY_STORE's: FROM and COPY --from find bases */
        size_t n_ro;
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

/* The value of NAME in a NAME=VALUE list, or NULL. */
const char *build_pairs_get(char *const *v, size_t n, const char *name);
/* NAME=VALUE into v, replacing NAME's earlier entry. value NULL: NAME alone. */
int build_pairs_set(char ***v, size_t *n, const char *name, const char *value,
                    struct cs_error *err);
/* The image config document's "config" object (made when absent). */
cJSON *doc_config(cJSON *doc);
/* A string of the config object, or NULL. */
const char *doc_string(cJSON *doc, const char *key);
/* key of the config object set to value (taken), or removed (NULL). */
void doc_set(cJSON *doc, const char *key, cJSON *value);
/* The value of NAME in the config's Env, or NULL. */
const char *doc_env_get(cJSON *doc, const char *name);
/* NAME=VALUE into the config's Env, replacing NAME's entry. */
int doc_env_set(cJSON *doc, const char *name, const char *value, struct cs_error *err);
/* word with the stage's variables expanded (st NULL: the global ARGs only). */
int stage_expand(struct build *b, struct stage *st, const char *word, char **ret,
                 struct cs_error *err);
/* "Containerfile:12" of in, for messages. */
void build_what(const struct build *b, const struct cf_instr *in, char *buf, size_t len);
/* The chain key extended by text. */
void stage_key_extend(char key[OCI_DIGEST_LEN + 1], const char *text);
/* An entry of the image's history. */
int doc_history_add(cJSON *doc, const char *created_by, bool empty);
/* A stored image by name or registry reference (pulled when absent, or always with
 * --pull): held in b->bases, its layers into *layers, its config document into *doc. */
int build_open_base(struct build *b, const char *what, const char *kw, const char *ref_text,
                    struct build_layers *layers, cJSON **doc, char ret_digest[OCI_DIGEST_LEN + 1],
                    struct cs_error *err);
/* The stage of that name or index among the first `before`, or NULL. */
struct stage *stage_named(struct build *b, const char *name, size_t before);
/* argv of a shell form: the config's Shell (else /bin/sh -c) and the command line. */
cJSON *doc_shell_form(cJSON *doc, const char *line);
/* The instruction's words as a JSON array (the exec form). */
cJSON *instr_words_json(const struct cf_instr *in);
/* A JSON array of strings as a NULL-ended list (NULL: out of memory). */
char **build_json_strv(const cJSON *a);
/* WORKDIR joined and made canonical: absolute, no `.`, `..` resolved lexically. */
char *build_workdir_join(const char *cur, const char *path);
/* A cached layer for key: 1 with *ret_held and ret_diff_id ("" for an empty step), 0 when
 * there is none (or its layer is gone). */
int build_cache_get(struct build *b, const char *key, char ret_diff_id[OCI_DIGEST_LEN + 1],
                    int *ret_held);
/* Record key's layer in the cache (best effort). */
void build_cache_put(struct build *b, const char *key, const char *diff_id);
/* A step that writes a layer: from the cache, or run; the layer appended to the stage.
 * key_text: the step as it runs (extends the chain key); history: the instruction as
 * written (the image's history). */
int stage_layer_step(struct build *b, struct stage *st, const struct build_step *step,
                     const char *key_text, const char *history, struct cs_error *err);
/* The stage's layers as an image_ref, for reading its /etc/passwd (nothing owned). */
void stage_view(const struct stage *st, struct image_ref *view, int *fds);
/* The ARGs of in: declared in the stage (or globally before the first FROM) with the
 * --build-arg value, else the default, else (in a stage) the global one's. */
int build_instr_arg(struct build *b, struct stage *st, const struct cf_instr *in,
                    struct cs_error *err);
/* One instruction of stage si. */
int build_instr_apply(struct build *b, size_t si, const struct cf_instr *in, struct cs_error *err);
