/* Which image a docker/podman MCP server's command line runs. */
#include "policy/mcp_images.h"
#include "check.h"

#include <errno.h>

#define N(a) (sizeof(a) / sizeof(*(a)))

static const char *image_of(const char *cmd, const char *const *argv, size_t argc, int *r)
{
        struct cs_error e = {0};
        const char *img = NULL;

        *r = mcp_run_image(cmd, argv, argc, &img, &e);
        if (*r < 0)
                snprintf(why, sizeof(why), "%s", e.msg);
        return img;
}

static void test_options_and_values_are_skipped(void)
{
        const char *a[] = {"run",    "-i",    "--rm",   "-e",  "X=1",   "--env=Y=2",
                           "-v",     "/a:/b", "--name", "srv", "-eZ=3", "ghcr.io/o/mcp:1",
                           "--flag", "x"};
        int r;
        const char *img = image_of("docker", a, N(a), &r);

        CHECKF(r == 1 && img && strcmp(img, "ghcr.io/o/mcp:1") == 0, "got %d %s", r,
               img ? img : "(null)");
        PASS();
}

static void test_clusters_and_double_dash(void)
{
        const char *a[] = {"container", "run", "-it", "-ie", "K", "--", "-odd-image"};
        const char *b[] = {"run", "--rm=true", "--network", "none", "alpine", "sh"};
        int r;
        const char *img = image_of("/usr/bin/podman", a, N(a), &r);

        CHECKF(r == 1 && img && strcmp(img, "-odd-image") == 0, "a: %d", r);
        img = image_of("podman", b, N(b), &r);
        CHECKF(r == 1 && img && strcmp(img, "alpine") == 0, "b: %d", r);
        PASS();
}

static void test_not_a_container_run(void)
{
        const char *a[] = {"run", "img"};
        const char *b[] = {"pull", "img"};
        const char *c[] = {"-y", "server"};
        int r;

        CHECK(image_of("npx", c, N(c), &r) == NULL && r == 0);
        CHECK(image_of("dockerx", a, N(a), &r) == NULL && r == 0);
        CHECK(image_of("docker", b, N(b), &r) == NULL && r == 0);
        CHECK(image_of(NULL, a, N(a), &r) == NULL && r == 0);
        PASS();
}

static void test_bad_lines_are_errors(void)
{
        const char *unknown[] = {"run", "--frobnicate", "img"};
        const char *novalue[] = {"run", "-i", "-e"};
        const char *noimage[] = {"run", "--rm", "-i"};
        const char *shortunk[] = {"run", "-Z", "img"};
        int r;

        CHECK(image_of("docker", unknown, N(unknown), &r) == NULL && r == -EINVAL);
        CHECKF(strstr(why, "--frobnicate"), "%s", why);
        CHECK(image_of("docker", novalue, N(novalue), &r) == NULL && r == -EINVAL);
        CHECKF(strstr(why, "-e"), "%s", why);
        CHECK(image_of("docker", noimage, N(noimage), &r) == NULL && r == -EINVAL);
        CHECK(image_of("docker", shortunk, N(shortunk), &r) == NULL && r == -EINVAL);
        CHECKF(strstr(why, "-Z"), "%s", why);
        PASS();
}

int main(void)
{
        test_options_and_values_are_skipped();
        test_clusters_and_double_dash();
        test_not_a_container_run();
        test_bad_lines_are_errors();
        return failures ? 1 : 0;
}
