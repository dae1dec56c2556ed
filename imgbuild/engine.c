/* The Containerfile executor of `image build`: stages, build variables, the image config
 * each instruction changes, the build cache, and the image committed to the store.
 *
 * The cache: every instruction extends a stage's chain key (the SHA-256 of the previous
 * key and the instruction as it will run: expanded words, the build variables a RUN sees,
 * the digest of what a COPY copies). A step that writes a layer records under
 * build-cache/KEY in the store the layer it made ("empty" when it changed nothing); a
 * later build with the same key takes that layer when it is still stored. */
#include "imgbuild.h"
#include "stage.h"
#include "step.h"

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
        if (r >= 0)
                r = store_open_readonly(&b.store, &b.ro, &b.n_ro, err);
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
                        r = build_instr_arg(&b, NULL, in, err);
                } else {
                        r = build_instr_apply(&b, si, in, err);
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
        store_close_all(b.ro, b.n_ro);
        if (b.store.fd >= 0)
                store_close(&b.store);
        return r;
}
