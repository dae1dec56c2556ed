/* Unit tests for image/: digests, media types, platforms, index selection, manifest and
 * config parsing, entry-name safety, metadata escaping, User resolution. */
#include "common/error.h"
#include "image/layer/layer.h"
#include "image/oci/oci.h"
#include "image/store/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

#define D1 "sha256:1111111111111111111111111111111111111111111111111111111111111111"
#define D2 "sha256:2222222222222222222222222222222222222222222222222222222222222222"
#define D3 "sha256:3333333333333333333333333333333333333333333333333333333333333333"

static void test_digest_accepts_only_lowercase_sha256(void)
{
        struct cs_error err;

        CHECK(oci_digest_check(D1, "x", &err) == 0);
        CHECK(oci_digest_check("sha512:abcd", "x", &err) < 0 && strstr(err.msg, "unsupported"));
        CHECK(oci_digest_check("sha256:ABCD", "x", &err) < 0);
        CHECK(oci_digest_check(D1 "0", "x", &err) < 0);
        CHECK(oci_digest_check("sha256:", "x", &err) < 0);
        CHECK(oci_digest_check(NULL, "x", &err) < 0);
        PASS();
}

static void test_layer_media_types_map_to_compression(void)
{
        struct cs_error err;
        enum oci_compression c;

        CHECK(oci_layer_media_type("application/vnd.oci.image.layer.v1.tar+gzip", &c, &err) == 0 &&
              c == OCI_COMPRESSION_GZIP);
        CHECK(oci_layer_media_type("application/vnd.oci.image.layer.v1.tar+zstd", &c, &err) == 0 &&
              c == OCI_COMPRESSION_ZSTD);
        CHECK(oci_layer_media_type("application/vnd.oci.image.layer.v1.tar", &c, &err) == 0 &&
              c == OCI_COMPRESSION_NONE);
        CHECK(oci_layer_media_type("application/vnd.docker.image.rootfs.diff.tar.gzip", &c, &err) ==
                  0 &&
              c == OCI_COMPRESSION_GZIP);
        CHECK(oci_layer_media_type("application/vnd.docker.image.rootfs.foreign.diff.tar.gzip", &c,
                                   &err) < 0 &&
              strstr(err.msg, "foreign"));
        CHECK(oci_layer_media_type("application/x-tar+bzip2", &c, &err) < 0 &&
              strstr(err.msg, "not supported"));
        PASS();
}

static void test_platform_parse_forms(void)
{
        struct cs_error err;
        struct oci_platform p;

        CHECK(oci_platform_parse("linux/arm64/v8", &p, &err) == 0);
        CHECK(strcmp(p.os, "linux") == 0 && strcmp(p.arch, "arm64") == 0 &&
              strcmp(p.variant, "v8") == 0);
        CHECK(oci_platform_parse("amd64", &p, &err) == 0 && strcmp(p.os, "linux") == 0);
        CHECK(oci_platform_parse("linux//x", &p, &err) < 0);
        CHECK(oci_platform_parse("a/b/c/d", &p, &err) < 0);
        PASS();
}

static const char index_multi[] =
    "{\"schemaVersion\":2,\"manifests\":["
    "{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"" D1 "\","
    "\"size\":10,\"platform\":{\"os\":\"linux\",\"architecture\":\"arm64\"}},"
    "{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"" D2 "\","
    "\"size\":20,\"platform\":{\"os\":\"linux\",\"architecture\":\"amd64\"},"
    "\"annotations\":{\"org.opencontainers.image.ref.name\":\"v2\"}}]}";

static void test_index_selects_platform_and_ref(void)
{
        struct cs_error err;
        struct oci_platform p;
        char d[OCI_DIGEST_LEN + 1];
        char *ref = NULL;
        int64_t size;
        enum oci_kind kind;

        oci_platform_parse("linux/amd64", &p, &err);
        CHECK(oci_index_select(index_multi, strlen(index_multi), NULL, &p, d, &size, &kind, &ref,
                               &err) == 0);
        CHECK(strcmp(d, D2) == 0 && size == 20 && kind == OCI_KIND_MANIFEST);
        CHECK(ref && strcmp(ref, "v2") == 0);
        free(ref);
        oci_platform_parse("linux/arm64", &p, &err);
        CHECK(oci_index_select(index_multi, strlen(index_multi), NULL, &p, d, &size, &kind, NULL,
                               &err) == 0 &&
              strcmp(d, D1) == 0);
        CHECK(oci_index_select(index_multi, strlen(index_multi), "v2", &p, d, &size, &kind, NULL,
                               &err) < 0);
        oci_platform_parse("linux/s390x", &p, &err);
        CHECK(oci_index_select(index_multi, strlen(index_multi), NULL, &p, d, &size, &kind, NULL,
                               &err) < 0);
        CHECK(strstr(err.msg, "linux/arm64") && strstr(err.msg, "--platform"));
        PASS();
}

static void test_manifest_parse_checks_layers(void)
{
        struct cs_error err;
        struct oci_manifest m;
        const char *good =
            "{\"schemaVersion\":2,\"config\":{\"mediaType\":"
            "\"application/vnd.oci.image.config.v1+json\",\"digest\":\"" D1
            "\",\"size\":5},\"layers\":[{\"mediaType\":"
            "\"application/vnd.oci.image.layer.v1.tar+zstd\",\"digest\":\"" D2 "\",\"size\":7}]}";
        const char *foreign = "{\"schemaVersion\":2,\"config\":{\"digest\":\"" D1
                              "\",\"size\":5},\"layers\":[{\"mediaType\":"
                              "\"application/vnd.oci.image.layer.v1.tar\",\"digest\":\"" D2
                              "\",\"size\":7,\"urls\":[\"http://x\"]}]}";
        const char *schema1 = "{\"schemaVersion\":1,\"fsLayers\":[]}";
        const char *badsize =
            "{\"schemaVersion\":2,\"config\":{\"digest\":\"" D1 "\",\"size\":-5},\"layers\":[]}";

        CHECK(oci_manifest_parse(good, strlen(good), 10, &m, &err) == 0);
        CHECK(m.n_layers == 1 && m.layers[0].compression == OCI_COMPRESSION_ZSTD &&
              m.layers[0].size == 7 && strcmp(m.config_digest, D1) == 0);
        oci_manifest_free(&m);
        CHECK(oci_manifest_parse(good, strlen(good), 0, &m, &err) < 0 &&
              strstr(err.msg, "--max-layers"));
        CHECK(oci_manifest_parse(foreign, strlen(foreign), 10, &m, &err) < 0 &&
              strstr(err.msg, "foreign"));
        CHECK(oci_manifest_parse(schema1, strlen(schema1), 10, &m, &err) < 0 &&
              strstr(err.msg, "schemaVersion"));
        CHECK(oci_manifest_parse(badsize, strlen(badsize), 10, &m, &err) < 0);
        PASS();
}

static void test_config_parse_reads_launch_fields(void)
{
        struct cs_error err;
        struct oci_config c;
        const char *cfg =
            "{\"os\":\"linux\",\"config\":{\"Env\":[\"A=1\",\"PATH=/bin\"],"
            "\"Entrypoint\":[\"/bin/sh\",\"-c\"],\"Cmd\":null,\"WorkingDir\":\"/w\","
            "\"User\":\"app:staff\"},\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"" D3 "\"]}}";
        const char *windows =
            "{\"os\":\"windows\",\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[]}}";

        CHECK(oci_config_parse(cfg, strlen(cfg), &c, &err) == 0);
        CHECK(c.env && strcmp(c.env[1], "PATH=/bin") == 0 && !c.env[2]);
        CHECK(c.entrypoint && strcmp(c.entrypoint[1], "-c") == 0 && !c.cmd);
        CHECK(strcmp(c.working_dir, "/w") == 0 && strcmp(c.user, "app:staff") == 0);
        CHECK(c.n_diff_ids == 1 && strcmp(c.diff_ids[0], D3) == 0);
        oci_config_free(&c);
        CHECK(oci_config_parse(windows, strlen(windows), &c, &err) < 0 &&
              strstr(err.msg, "windows"));
        PASS();
}

static void test_docker_manifest_parse(void)
{
        struct cs_error err;
        const char *j = "[{\"Config\":\"abc.json\",\"RepoTags\":[\"busybox:1\"],"
                        "\"Layers\":[\"a/layer.tar\",\"b/layer.tar\"]}]";
        char *config, *tag, **layers;
        size_t n;

        CHECK(oci_docker_manifest_parse(j, strlen(j), 10, &config, &layers, &n, &tag, &err) == 0);
        CHECK(strcmp(config, "abc.json") == 0 && n == 2 && strcmp(layers[1], "b/layer.tar") == 0);
        CHECK(tag && strcmp(tag, "busybox:1") == 0);
        free(config);
        free(tag);
        oci_strv_free(layers);
        CHECK(oci_docker_manifest_parse("{}", 2, 10, &config, &layers, &n, &tag, &err) < 0);
        PASS();
}

static void test_entry_names_are_normalized_or_refused(void)
{
        struct cs_error err;
        char *out;

        CHECK(layer_path_normalize("./usr//bin/./sh", 4096, &out, &err) == 0);
        CHECK(strcmp(out, "usr/bin/sh") == 0);
        free(out);
        CHECK(layer_path_normalize("./", 4096, &out, &err) == 0 && strcmp(out, "") == 0);
        free(out);
        CHECK(layer_path_normalize("etc/", 4096, &out, &err) == 0 && strcmp(out, "etc") == 0);
        free(out);
        CHECK(layer_path_normalize("../etc/passwd", 4096, &out, &err) < 0 && strstr(err.msg, ".."));
        CHECK(layer_path_normalize("a/b/../../../x", 4096, &out, &err) < 0);
        CHECK(layer_path_normalize("/etc/passwd", 4096, &out, &err) < 0 &&
              strstr(err.msg, "absolute"));
        CHECK(layer_path_normalize("aaaaaaaaaa", 5, &out, &err) < 0 &&
              strstr(err.msg, "--max-path"));
        CHECK(layer_path_normalize("", 5, &out, &err) < 0);
        CHECK(layer_path_normalize("a..b/..c", 4096, &out, &err) == 0);
        free(out);
        PASS();
}

static void test_metadata_paths_are_escaped(void)
{
        char out[64];

        CHECK(layer_path_escape("a b\\c\n", out, sizeof(out)) > 0);
        CHECK(strcmp(out, "a\\040b\\134c\\012") == 0);
        CHECK(layer_path_escape("abcdef", out, 4) < 0);
        PASS();
}

static void test_image_names_get_a_tag(void)
{
        struct cs_error err;
        char out[256];

        CHECK(store_name_canonical("busybox", out, &err) == 0 &&
              strcmp(out, "busybox:latest") == 0);
        CHECK(store_name_canonical("localhost:5000/x", out, &err) == 0 &&
              strcmp(out, "localhost:5000/x:latest") == 0);
        CHECK(store_name_canonical("a/b:1.2", out, &err) == 0 && strcmp(out, "a/b:1.2") == 0);
        CHECK(store_name_canonical("-x", out, &err) < 0);
        CHECK(store_name_canonical("a b", out, &err) < 0);
        CHECK(store_name_canonical("x:", out, &err) < 0);
        PASS();
}

static void test_user_resolution_through_passwd_and_group(void)
{
        struct cs_error err;
        const char *passwd = "root:x:0:0:root:/root:/bin/sh\napp:x:1000:1001::/home/app:/bin/sh\n"
                             "broken:x:abc:1\n";
        const char *group = "root:x:0:\nstaff:x:50:\napp:x:1001:\n";
        uid_t u;
        gid_t g;

        CHECK(image_lookup_user(passwd, group, "", &u, &g, &err) == 0 && u == 0 && g == 0);
        CHECK(image_lookup_user(passwd, group, "app", &u, &g, &err) == 0 && u == 1000 && g == 1001);
        CHECK(image_lookup_user(passwd, group, "app:staff", &u, &g, &err) == 0 && u == 1000 &&
              g == 50);
        CHECK(image_lookup_user(passwd, group, "1000", &u, &g, &err) == 0 && u == 1000 &&
              g == 1001);
        CHECK(image_lookup_user(passwd, group, "4242", &u, &g, &err) == 0 && u == 4242 && g == 0);
        CHECK(image_lookup_user(passwd, group, "4242:7", &u, &g, &err) == 0 && u == 4242 && g == 7);
        CHECK(image_lookup_user(passwd, group, "nobody", &u, &g, &err) < 0 &&
              strstr(err.msg, "nobody"));
        CHECK(image_lookup_user(passwd, group, "app:wheel", &u, &g, &err) < 0 &&
              strstr(err.msg, "wheel"));
        CHECK(image_lookup_user(passwd, group, "broken", &u, &g, &err) < 0);
        CHECK(image_lookup_user(NULL, NULL, "app", &u, &g, &err) < 0);
        PASS();
}

int main(void)
{
        test_digest_accepts_only_lowercase_sha256();
        test_layer_media_types_map_to_compression();
        test_platform_parse_forms();
        test_index_selects_platform_and_ref();
        test_manifest_parse_checks_layers();
        test_config_parse_reads_launch_fields();
        test_docker_manifest_parse();
        test_entry_names_are_normalized_or_refused();
        test_metadata_paths_are_escaped();
        test_image_names_get_a_tag();
        test_user_resolution_through_passwd_and_group();
        return failures ? 1 : 0;
}
