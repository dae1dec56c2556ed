/* The pull: the manifest for the platform resolved through indexes, the config first,
 * then the blobs the store lacks, into an OCI layout the import verifies and unpacks. */
#include "registry.h"
#include "../oci/digest.h"
#include "registry-private.h"

#include "../store/store-write.h"

#include "../../common/cleanup.h"
#include "../../common/error.h"
#include "../../common/fileio.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the pull ---- */

static void reg_free(struct reg *g)
{
        free(g->ca);
        registry_creds_free(&g->creds);
        if (g->token)
                explicit_bzero(g->token, strlen(g->token));
        free(g->token);
}

static int manifest_verified(struct reg *g, const char *reference, const char *digest, int64_t size,
                             char **ret, size_t *ret_len, char ret_digest[], struct cs_error *err)
{
        _cleanup_free_ char *body = NULL;
        size_t len;
        int r = reg_get_manifest(g, reference, &body, &len, err);

        if (r < 0)
                return r;
        sha256_hex(body, len, ret_digest);
        if (digest && digest[0] && strcmp(ret_digest, digest) != 0)
                return cs_error_setx(err, EINVAL,
                                     "the manifest %s of %s from %s has digest %s (corrupt or "
                                     "tampered image)",
                                     digest, g->ref->name, g->base, ret_digest);
        if (size >= 0 && (int64_t)len != size)
                return cs_error_setx(err, EINVAL,
                                     "the manifest %s of %s has %zu bytes, not the %lld its "
                                     "index declares (corrupt or tampered image)",
                                     digest, g->ref->name, len, (long long)size);
        *ret = cs_take_ptr(&body);
        *ret_len = len;
        return 0;
}

static int layout_write(int dirfd, const char *manifest, size_t len, const char *digest,
                        struct cs_error *err)
{
        _cleanup_json_ cJSON *m = cJSON_ParseWithLength(manifest, len);
        _cleanup_json_ cJSON *index = cJSON_CreateObject();
        _cleanup_free_ char *text = NULL;
        const char *mt = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "mediaType"));
        cJSON *list, *d;
        char path[100];
        int r;

        _cleanup_close_ int bfd = openat(dirfd, "blobs/sha256", O_PATH | O_DIRECTORY | O_CLOEXEC);

        if (bfd < 0)
                return cs_error_set(err, errno, "open the download directory");
        snprintf(path, sizeof(path), "%.64s", store_digest_hex(digest));
        r = cs_write_file_once(bfd, path, manifest, len, 0600, err);
        if (r < 0)
                return r;
        if (!index || !cJSON_AddNumberToObject(index, "schemaVersion", 2) ||
            !(list = cJSON_AddArrayToObject(index, "manifests")) || !(d = cJSON_CreateObject()) ||
            !cJSON_AddItemToArray(list, d) ||
            !cJSON_AddStringToObject(d, "mediaType",
                                     mt ? mt : "application/vnd.oci.image.manifest.v1+json") ||
            !cJSON_AddStringToObject(d, "digest", digest) ||
            !cJSON_AddNumberToObject(d, "size", (double)len) || !(text = cJSON_Print(index)))
                return cs_error_set(err, ENOMEM, "index.json");
        r = cs_write_file_once(dirfd, "index.json", text, strlen(text), 0600, err);
        if (r == 0)
                r = cs_write_file_once(dirfd, "oci-layout", "{\"imageLayoutVersion\":\"1.0.0\"}",
                                       30, 0600, err);
        return r;
}

/* The config (blobs[0]) fetched and verified before any layer: its diff_ids, paired with
 * the manifest's layers, say which layers the store holds already. *ret stays empty when
 * they do not pair up (the import then refuses the image). */
static int config_first(struct reg *g, int dirfd, struct pull_blob *blobs, const int64_t *sizes,
                        size_t n_layers, struct oci_config *ret, struct cs_error *err)
{
        const struct pull_options *o = g->o;
        struct pull_options quiet = *o;
        _cleanup_free_ char *config = NULL;
        /* Dropped: an unreadable config is the import's to report, with its context. */
        struct cs_error ignored;
        char path[100];
        size_t len;
        int r;

        quiet.progress = NULL; /* the display shows layers */
        g->o = &quiet;
        r = reg_get_blobs(g, dirfd, blobs, sizes, 1, err);
        g->o = o;
        if (r < 0 || !o->layer_present)
                return r;
        snprintf(path, sizeof(path), "blobs/sha256/%.64s", store_digest_hex(blobs[0].digest));
        if (cs_read_file_at(dirfd, path, OCI_CONFIG_MAX, true, &config, &len, &ignored) == 0 &&
            oci_config_parse(config, len, ret, &ignored) == 0 && ret->n_diff_ids != n_layers)
                oci_config_free(ret);
        return 0;
}

static int pull_from(const struct registry_ref *ref, const struct registry_endpoint *ep,
                     const struct pull_options *o, int dirfd, struct cs_error *err)
{
        struct reg g = {.ref = ref, .o = o, .ep = ep, .tls_verify = o->tls_verify && !ep->insecure};
        _cleanup_free_ char *body = NULL;
        _cleanup_free_ struct pull_blob *blobs = NULL;
        _cleanup_free_ int64_t *sizes = NULL;
        struct oci_manifest m = {0};
        struct oci_config cfg = {0};
        char digest[OCI_DIGEST_LEN + 1], want[OCI_DIGEST_LEN + 1];
        int64_t size = -1;
        size_t len, n = 0;
        enum oci_kind kind;
        bool stored;
        int r;

        snprintf(g.base, sizeof(g.base), "https://%s", registry_api_host(ep->host));
        r = registry_creds_find(ep->host, ep->repo, &g.creds, err);
        if (r == 0 && g.tls_verify)
                r = registry_ca_load(ep->host, &g.ca, &g.ca_len, g.ca_dir, sizeof(g.ca_dir), err);
        if (r < 0)
                goto out;
        snprintf(want, sizeof(want), "%s", ref->digest);
        r = manifest_verified(&g, ref->digest[0] ? ref->digest : ref->tag, want, -1, &body, &len,
                              digest, err);
        for (int depth = 0; r == 0; depth++) {
                _cleanup_free_ char *next = NULL;

                r = oci_document_kind(body, len, "the registry's manifest", &kind, err);
                if (r < 0 || kind == OCI_KIND_MANIFEST)
                        break;
                if (depth >= 4) {
                        r = cs_error_setx(err, ELOOP, "image indexes nest too deeply");
                        break;
                }
                r = oci_index_select(body, len, NULL, &o->platform, want, &size, &kind, NULL, err);
                if (r < 0) {
                        r = cs_error_wrap(err, "%s", ref->name);
                        break;
                }
                r = manifest_verified(&g, want, want, size, &next, &len, digest, err);
                if (r == 0) {
                        free(body);
                        body = cs_take_ptr(&next);
                }
        }
        if (r < 0)
                goto out;
        r = oci_manifest_parse(body, len, o->max_layers, &m, err);
        if (r < 0) {
                r = cs_error_wrap(err, "the manifest of %s", ref->name);
                goto out;
        }
        if (m.config_size > (int64_t)OCI_CONFIG_MAX) {
                r = cs_error_setx(err, EFBIG,
                                  "the image config of %s is %lld bytes, over the "
                                  "limit of %u",
                                  ref->name, (long long)m.config_size, OCI_CONFIG_MAX);
                goto out;
        }
        /* an earlier endpoint may have made them (its verified blobs are as good as any) */
        if ((mkdirat(dirfd, "blobs", 0700) < 0 && errno != EEXIST) ||
            (mkdirat(dirfd, "blobs/sha256", 0700) < 0 && errno != EEXIST)) {
                r = cs_error_set(err, errno, "create the download directory");
                goto out;
        }
        blobs = calloc(m.n_layers + 1, sizeof(*blobs));
        sizes = calloc(m.n_layers + 1, sizeof(*sizes));
        if (!blobs || !sizes) {
                r = cs_error_set(err, ENOMEM, "pull");
                goto out;
        }
        snprintf(blobs[0].digest, sizeof(blobs[0].digest), "%s", m.config_digest);
        blobs[0].total = (uint64_t)m.config_size;
        blobs[0].is_config = true;
        sizes[n++] = m.config_size;
        stored = o->present && o->present(o->present_opaque, digest);
        r = config_first(&g, dirfd, blobs, sizes, m.n_layers, &cfg, err);
        if (r < 0)
                goto out;
        for (size_t i = 0; i < m.n_layers && !stored; i++) {
                bool seen = false;

                for (size_t k = 0; k < n && !seen; k++)
                        seen = strcmp(blobs[k].digest, m.layers[i].digest) == 0;
                if (seen) /* the same layer twice, or a layer equal to the config */
                        continue;
                if (cfg.n_diff_ids && o->layer_present &&
                    o->layer_present(o->present_opaque, m.layers[i].digest, cfg.diff_ids[i]))
                        continue; /* the import reuses it without reading the blob */
                snprintf(blobs[n].digest, sizeof(blobs[n].digest), "%s", m.layers[i].digest);
                blobs[n].total = (uint64_t)m.layers[i].size;
                sizes[n++] = m.layers[i].size;
        }
        r = reg_get_blobs(&g, dirfd, blobs + 1, sizes + 1, n - 1, err);
        if (r == 0)
                r = layout_write(dirfd, body, len, digest, err);
out:
        oci_config_free(&cfg);
        oci_manifest_free(&m);
        reg_free(&g);
        return r;
}

int registry_pull(const struct registry_ref *ref, const struct pull_options *o, int dirfd,
                  struct cs_error *err)
{
        struct registry_endpoint self = {0};
        const struct registry_endpoint *eps = o->endpoints;
        size_t n = o->n_endpoints;
        char tried[1024] = "";
        size_t tl = 0;
        int r = 0;

        if (n == 0) {
                snprintf(self.host, sizeof(self.host), "%s", ref->host);
                snprintf(self.repo, sizeof(self.repo), "%s", ref->repo);
                eps = &self;
                n = 1;
        }
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
                return cs_error_setx(err, EIO, "initialize libcurl");
        /* mirrors first, in order, then the registry itself, as podman: the first that
         * serves the image serves all of it */
        for (size_t i = 0; i < n; i++) {
                r = pull_from(ref, &eps[i], o, dirfd, err);
                if (r == 0 || i + 1 == n)
                        break;
                tl += (size_t)snprintf(tried + tl, sizeof(tried) - tl, "%s%.200s/%.200s: %.300s",
                                       tl ? "; " : "", eps[i].host, eps[i].repo, err->msg);
                if (tl >= sizeof(tried))
                        tl = sizeof(tried) - 1;
        }
        if (r < 0 && tl)
                r = cs_error_wrap(err, "%s (after the mirrors failed: %s)", ref->name, tried);
        curl_global_cleanup();
        return r;
}

static bool image_stored(void *opaque, const char *digest)
{
        return store_image_present(opaque, digest);
}

static bool layer_stored(void *opaque, const char *blob, const char *diff_id)
{
        return store_layer_reusable(opaque, blob, diff_id);
}

int store_pull(struct image_store *s, const struct registry_ref *ref, const struct pull_options *po,
               const struct import_options *io, struct import_result *ret, struct cs_error *err)
{
        struct pull_options p = *po;
        struct import_options o = *io;
        /* Dropped: best effort: what is left in tmp/ is swept by the next import. */
        struct cs_error ignored;
        char tname[64], path[PATH_MAX];
        /* the download lives in tmp/, flocked: invisible to launches, swept if we die */
        _cleanup_close_ int tfd = store_tmp_create(s, "pull", tname, err);
        int r;

        if (tfd < 0)
                return tfd;
        p.present = image_stored;
        p.layer_present = layer_stored;
        p.present_opaque = s;
        p.max_layers = io->limits.max_layers;
        r = registry_pull(ref, &p, tfd, err);
        if (r == 0) {
                snprintf(path, sizeof(path), "%s/tmp/%s", s->root, tname);
                o.source = path;
                o.format = IMAGE_FORMAT_OCI;
                o.name = ref->name;
                o.platform = po->platform;
                r = store_import(s, &o, ret, err);
        }
        (void)store_tmp_remove(s, tname, &ignored);
        return r;
}
