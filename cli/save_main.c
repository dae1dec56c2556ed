/* `csandbox-import --save [--format docker-archive|oci-archive] [-o FILE] IMAGE`: a stored
 * image as the archive podman save writes, for podman load, docker load and csandbox image
 * import. The store keeps layers unpacked, so each is written again as a tar
 * (build_layer_export): a layer a build committed keeps its diff_id, so a built image keeps
 * its ID; an imported layer gets the diff_id of its new tar, written into the config (a new
 * image ID, the same files). */
#include "cli.h"
#include "cmd_image.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"
#include "../image/containerfile/build-private.h"
#include "../image/oci/digest.h"
#include "../image/store/store.h"

#include <archive.h>
#include <archive_entry.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CONFIG_MAX (8u << 20)

struct tap_file {
        int fd;
        int err;
        uint64_t size;
};

static void tap_write(void *opaque, const void *buf, size_t len)
{
        struct tap_file *t = opaque;

        if (t->err)
                return;
        if (cs_write_all(t->fd, buf, len) < 0)
                t->err = errno ? errno : EIO;
        t->size += len;
}

struct saved_layer {
        char digest[OCI_DIGEST_LEN + 1]; /* of the tar written */
        char path[PATH_MAX];             /* the tar, in the temporary directory */
        uint64_t size;
};

/* The layer directory (holding diff/ and metadata) of diff_id among the image's trees. */
static int layer_dir_of(const struct image_ref *img, const char *diff_id, struct cs_error *err)
{
        char tail[100];

        snprintf(tail, sizeof(tail), "/layers/sha256/%.64s/" LAYER_DIFF, diff_id + 7);
        for (size_t i = 0; i < img->n_layers; i++) {
                const char *p = img->layer_paths[i];
                size_t lp = strlen(p), lt = strlen(tail);

                if (lp > lt && strcmp(p + lp - lt, tail) == 0) {
                        char dir[PATH_MAX];
                        int fd;

                        snprintf(dir, sizeof(dir), "%.*s", (int)(lp - strlen("/" LAYER_DIFF)), p);
                        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                        if (fd < 0)
                                return cs_error_set(err, errno, "open the layer %s", dir);
                        return fd;
                }
        }
        return cs_error_setx(err, ENOENT,
                             "the image's layer %s is not stored as a layer of its own (an image "
                             "of csandbox's earlier store layout); import it again to save it",
                             diff_id);
}

static int add_bytes(struct archive *a, const char *name, const void *data, size_t len,
                     struct cs_error *err)
{
        struct archive_entry *e = archive_entry_new();
        int r = 0;

        if (!e)
                return cs_error_set(err, ENOMEM, "save");
        archive_entry_set_pathname(e, name);
        archive_entry_set_mode(e, S_IFREG | 0644);
        archive_entry_set_size(e, (la_int64_t)len);
        if (archive_write_header(a, e) != ARCHIVE_OK ||
            (len && archive_write_data(a, data, len) != (la_ssize_t)len))
                r = cs_error_setx(err, EIO, "write %s: %s", name, archive_error_string(a));
        archive_entry_free(e);
        return r;
}

static int add_file(struct archive *a, const char *name, const char *path, struct cs_error *err)
{
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        struct archive_entry *e;
        struct stat st;
        char buf[1 << 16];
        int r = 0;

        if (fd < 0 || fstat(fd, &st) < 0)
                return cs_error_set(err, errno, "read %s", path);
        e = archive_entry_new();
        if (!e)
                return cs_error_set(err, ENOMEM, "save");
        archive_entry_set_pathname(e, name);
        archive_entry_set_mode(e, S_IFREG | 0644);
        archive_entry_set_size(e, st.st_size);
        if (archive_write_header(a, e) != ARCHIVE_OK)
                r = cs_error_setx(err, EIO, "write %s: %s", name, archive_error_string(a));
        for (ssize_t n; r == 0 && (n = read(fd, buf, sizeof(buf))) != 0;) {
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        r = cs_error_set(err, errno, "read %s", path);
                else if (archive_write_data(a, buf, (size_t)n) != n)
                        r = cs_error_setx(err, EIO, "write %s: %s", name, archive_error_string(a));
        }
        archive_entry_free(e);
        return r;
}

static void digest_of(const void *data, size_t len, char ret[OCI_DIGEST_LEN + 1])
{
        unsigned char sum[32];
        EVP_MD_CTX *md = digest_new();

        EVP_DigestUpdate(md, data, len);
        digest_end(md, sum);
        EVP_MD_CTX_free(md);
        oci_digest_format(sum, ret);
}

/* config with rootfs.diff_ids made the layers' new ones (unchanged when they are). */
static char *config_for(const char *raw, const struct image_ref *img,
                        const struct saved_layer *layers, struct cs_error *err)
{
        cJSON *j, *rootfs, *ids;
        char *text;
        bool same = true;

        for (size_t i = 0; i < img->config.n_diff_ids; i++)
                same &= strcmp(img->config.diff_ids[i], layers[i].digest) == 0;
        if (same)
                return strdup(raw);
        j = cJSON_Parse(raw);
        rootfs = cJSON_GetObjectItemCaseSensitive(j, "rootfs");
        ids = cJSON_CreateArray();
        if (!cJSON_IsObject(rootfs) || !ids) {
                cJSON_Delete(j);
                cJSON_Delete(ids);
                cs_error_setx(err, EINVAL, "the image's config has no rootfs");
                return NULL;
        }
        for (size_t i = 0; i < img->config.n_diff_ids; i++)
                cJSON_AddItemToArray(ids, cJSON_CreateString(layers[i].digest));
        cJSON_ReplaceItemInObjectCaseSensitive(rootfs, "diff_ids", ids);
        text = cJSON_PrintUnformatted(j);
        cJSON_Delete(j);
        if (!text)
                cs_error_set(err, ENOMEM, "save");
        return text;
}

static int write_docker(struct archive *a, const char *name, const char *config,
                        const char *config_digest, const struct saved_layer *layers, size_t n,
                        struct cs_error *err)
{
        cJSON *m = cJSON_CreateArray(), *o = cJSON_CreateObject(), *tags, *ls;
        char cname[80], *text = NULL;
        int r;

        snprintf(cname, sizeof(cname), "%.64s.json", config_digest + 7);
        tags = cJSON_AddArrayToObject(o, "RepoTags");
        ls = cJSON_AddArrayToObject(o, "Layers");
        cJSON_AddStringToObject(o, "Config", cname);
        cJSON_AddItemToArray(m, o);
        if (name)
                cJSON_AddItemToArray(tags, cJSON_CreateString(name));
        r = add_bytes(a, cname, config, strlen(config), err);
        for (size_t i = 0; r == 0 && i < n; i++) {
                char lname[80];

                snprintf(lname, sizeof(lname), "%.64s.tar", layers[i].digest + 7);
                cJSON_AddItemToArray(ls, cJSON_CreateString(lname));
                r = add_file(a, lname, layers[i].path, err);
        }
        if (r == 0 && !(text = cJSON_PrintUnformatted(m)))
                r = cs_error_set(err, ENOMEM, "save");
        if (r == 0)
                r = add_bytes(a, "manifest.json", text, strlen(text), err);
        free(text);
        cJSON_Delete(m);
        return r;
}

static int write_oci(struct archive *a, const char *name, const char *config,
                     const char *config_digest, const struct saved_layer *layers, size_t n,
                     struct cs_error *err)
{
        static const char layout[] = "{\"imageLayoutVersion\":\"1.0.0\"}";
        cJSON *man = cJSON_CreateObject(), *idx = cJSON_CreateObject(), *c, *ls, *ms, *d, *an;
        char bname[90], mdigest[OCI_DIGEST_LEN + 1], *mtext = NULL, *itext = NULL;
        int r;

        cJSON_AddNumberToObject(man, "schemaVersion", 2);
        cJSON_AddStringToObject(man, "mediaType", "application/vnd.oci.image.manifest.v1+json");
        c = cJSON_AddObjectToObject(man, "config");
        cJSON_AddStringToObject(c, "mediaType", "application/vnd.oci.image.config.v1+json");
        cJSON_AddStringToObject(c, "digest", config_digest);
        cJSON_AddNumberToObject(c, "size", (double)strlen(config));
        ls = cJSON_AddArrayToObject(man, "layers");
        r = add_bytes(a, "oci-layout", layout, strlen(layout), err);
        for (size_t i = 0; r == 0 && i < n; i++) {
                cJSON *l = cJSON_CreateObject();

                cJSON_AddStringToObject(l, "mediaType", "application/vnd.oci.image.layer.v1.tar");
                cJSON_AddStringToObject(l, "digest", layers[i].digest);
                cJSON_AddNumberToObject(l, "size", (double)layers[i].size);
                cJSON_AddItemToArray(ls, l);
                snprintf(bname, sizeof(bname), "blobs/sha256/%.64s", layers[i].digest + 7);
                r = add_file(a, bname, layers[i].path, err);
        }
        snprintf(bname, sizeof(bname), "blobs/sha256/%.64s", config_digest + 7);
        if (r == 0)
                r = add_bytes(a, bname, config, strlen(config), err);
        if (r == 0 && !(mtext = cJSON_PrintUnformatted(man)))
                r = cs_error_set(err, ENOMEM, "save");
        if (r == 0) {
                digest_of(mtext, strlen(mtext), mdigest);
                snprintf(bname, sizeof(bname), "blobs/sha256/%.64s", mdigest + 7);
                r = add_bytes(a, bname, mtext, strlen(mtext), err);
        }
        if (r == 0) {
                cJSON_AddNumberToObject(idx, "schemaVersion", 2);
                ms = cJSON_AddArrayToObject(idx, "manifests");
                d = cJSON_CreateObject();
                cJSON_AddStringToObject(d, "mediaType",
                                        "application/vnd.oci.image.manifest.v1+json");
                cJSON_AddStringToObject(d, "digest", mdigest);
                cJSON_AddNumberToObject(d, "size", (double)strlen(mtext));
                if (name) {
                        an = cJSON_AddObjectToObject(d, "annotations");
                        cJSON_AddStringToObject(an, "org.opencontainers.image.ref.name", name);
                }
                cJSON_AddItemToArray(ms, d);
                itext = cJSON_PrintUnformatted(idx);
                r = itext ? add_bytes(a, "index.json", itext, strlen(itext), err)
                          : cs_error_set(err, ENOMEM, "save");
        }
        free(mtext);
        free(itext);
        cJSON_Delete(man);
        cJSON_Delete(idx);
        return r;
}

static la_ssize_t out_write(struct archive *a, void *opaque, const void *buf, size_t len)
{
        (void)a;
        return cs_write_all(*(int *)opaque, buf, len) < 0 ? -1 : (la_ssize_t)len;
}

int cmd_image_save(int argc, char **argv)
{
        const char *format = "docker-archive", *output = NULL, *image = NULL;
        const char *tmp = getenv("TMPDIR");
        struct image_ref img = {.lock_fd = -1};
        struct cs_error err = {0};
        struct saved_layer *layers = NULL;
        _cleanup_free_ char *raw = NULL, *config = NULL;
        char dir[PATH_MAX], cpath[PATH_MAX + 16], config_digest[OCI_DIGEST_LEN + 1];
        char canon[256], *name = NULL;
        struct archive *a = NULL;
        size_t len, made = 0;
        int out = -1, r;

        for (int i = 0; i < argc; i++) {
                if ((strcmp(argv[i], "--format") == 0 || strcmp(argv[i], "-o") == 0) &&
                    i + 1 < argc) {
                        *(argv[i][1] == 'o' ? &output : &format) = argv[i + 1];
                        i++;
                } else if (!image && argv[i][0] != '-') {
                        image = argv[i];
                } else {
                        return cli_usage_error("image", "save: unexpected `%s`", argv[i]);
                }
        }
        if (!image)
                return cli_usage_error("image", "save needs an IMAGE");
        if (strcmp(format, "docker-archive") != 0 && strcmp(format, "oci-archive") != 0)
                return cli_usage_error("image",
                                       "save: --format %s: docker-archive and oci-archive are "
                                       "supported",
                                       format);
        if (!output && isatty(STDOUT_FILENO))
                return cli_usage_error("image", "save: refusing to write an archive to a "
                                                "terminal; give -o FILE or redirect stdout");
        dir[0] = '\0';
        r = store_open_image(image, &img, &err);
        if (r < 0)
                goto out;
        /* the name as the store spells it; an image given by its ID has none */
        if (store_name_canonical(image, canon, &(struct cs_error){0}) == 0 &&
            strncmp(image, img.digest + 7, strlen(image)) != 0)
                name = canon;
        snprintf(cpath, sizeof(cpath), "%s/config.json", img.dir);
        r = cs_read_file_at(AT_FDCWD, cpath, CONFIG_MAX, true, &raw, &len, &err);
        if (r < 0)
                goto out;
        snprintf(dir, sizeof(dir), "%s/csandbox-save-XXXXXX", tmp && tmp[0] == '/' ? tmp : "/tmp");
        if (!mkdtemp(dir)) {
                r = cs_error_set(&err, errno, "a temporary directory %s", dir);
                dir[0] = '\0';
                goto out;
        }
        layers = calloc(img.config.n_diff_ids + 1, sizeof(*layers));
        if (!layers) {
                r = cs_error_set(&err, ENOMEM, "save");
                goto out;
        }
        for (size_t i = 0; i < img.config.n_diff_ids; i++, made++) {
                _cleanup_close_ int ldir = layer_dir_of(&img, img.config.diff_ids[i], &err);
                struct tap_file t = {.fd = -1};
                unsigned char sum[32];

                if (ldir < 0) {
                        r = ldir;
                        goto out;
                }
                snprintf(layers[i].path, sizeof(layers[i].path), "%s/%zu.tar", dir, i);
                t.fd = open(layers[i].path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
                if (t.fd < 0) {
                        r = cs_error_set(&err, errno, "create %s", layers[i].path);
                        goto out;
                }
                r = build_layer_export(ldir, tap_write, &t, sum, &err);
                if (close(t.fd) < 0 && !t.err)
                        t.err = errno;
                if (r == 0 && t.err)
                        r = cs_error_set(&err, t.err, "write %s", layers[i].path);
                if (r < 0) {
                        cs_error_wrap(&err, "save: layer %zu (%s)", i + 1, img.config.diff_ids[i]);
                        made++;
                        goto out;
                }
                oci_digest_format(sum, layers[i].digest);
                layers[i].size = t.size;
        }
        config = config_for(raw, &img, layers, &err);
        if (!config) {
                r = -1;
                goto out;
        }
        digest_of(config, strlen(config), config_digest);
        out = output ? open(output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)
                     : dup(STDOUT_FILENO);
        if (out < 0) {
                r = cs_error_set(&err, errno, "save: %s", output ? output : "stdout");
                goto out;
        }
        a = archive_write_new();
        if (!a || archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
            archive_write_add_filter_none(a) != ARCHIVE_OK ||
            archive_write_set_bytes_in_last_block(a, 1) != ARCHIVE_OK ||
            archive_write_open(a, &out, NULL, out_write, NULL) != ARCHIVE_OK) {
                r = cs_error_setx(&err, EIO, "save: the tar writer: %s",
                                  a ? archive_error_string(a) : "out of memory");
                goto out;
        }
        r = strcmp(format, "oci-archive") == 0
                ? write_oci(a, name, config, config_digest, layers, img.config.n_diff_ids, &err)
                : write_docker(a, name, config, config_digest, layers, img.config.n_diff_ids, &err);
        if (r == 0 && archive_write_close(a) != ARCHIVE_OK)
                r = cs_error_setx(&err, EIO, "save: %s", archive_error_string(a));
out:
        if (a)
                archive_write_free(a);
        if (out >= 0 && close(out) < 0 && r == 0)
                r = cs_error_set(&err, errno, "save: %s", output ? output : "stdout");
        if (r < 0 && output && out >= 0)
                unlink(output);
        for (size_t i = 0; i < made; i++)
                unlink(layers[i].path);
        if (dir[0])
                rmdir(dir);
        free(layers);
        image_ref_free(&img);
        return r < 0 ? cli_fail(&err) : 0;
}
