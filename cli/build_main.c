/* `csandbox image build`: its command line, in the csandbox-import helper. */
#include "cli.h"
#include "cmd_image.h"

#include "../image/store/store.h"
#include "../imgbuild/imgbuild.h"

#include "../common/error.h"
#include "../common/strv.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int cmd_image_build(int argc, char **argv)
{
        struct build_options o = {.tls_verify = true,
                                  .net = BUILD_NET_PASTA,
                                  .pull_display_attach = pull_display_attach,
                                  .pull_display_end = pull_display_end};
        char digest[OCI_DIGEST_LEN + 1];
        struct cs_error err = {0};
        size_t n_args = 0;
        int r, out;

        for (int i = 0; i < argc; i++) {
                const char *a = argv[i];
                const char *v = i + 1 < argc ? argv[i + 1] : NULL;
                bool takes = strcmp(a, "-f") == 0 || strcmp(a, "--file") == 0 ||
                             strcmp(a, "-t") == 0 || strcmp(a, "--tag") == 0 ||
                             strcmp(a, "--build-arg") == 0 || strcmp(a, "--target") == 0 ||
                             strcmp(a, "--network") == 0;

                if (takes && !v)
                        return cli_usage_error("image", "build: %s needs a value", a);
                if (strcmp(a, "-f") == 0 || strcmp(a, "--file") == 0) {
                        o.file = v;
                } else if (strcmp(a, "-t") == 0 || strcmp(a, "--tag") == 0) {
                        char name[256];

                        if (store_name_canonical(v, name, &err) < 0)
                                return cli_fail(&err);
                        if (strv_push_dup(&o.tags, &o.n_tags, name) < 0)
                                return CS_EXIT_SETUP;
                } else if (strcmp(a, "--build-arg") == 0) {
                        if (!strchr(v, '=') || v[0] == '=')
                                return cli_usage_error(
                                    "image", "build: --build-arg `%s`: expected NAME=VALUE", v);
                        if (strv_push_dup(&o.build_args, &n_args, v) < 0)
                                return CS_EXIT_SETUP;
                        o.n_build_args = n_args;
                } else if (strcmp(a, "--target") == 0) {
                        o.target = v;
                } else if (strcmp(a, "--network") == 0) {
                        if (strcmp(v, "pasta") != 0 && strcmp(v, "none") != 0 &&
                            strcmp(v, "host") != 0)
                                return cli_usage_error(
                                    "image", "build: --network `%s`: expected pasta, none or host",
                                    v);
                        o.net = strcmp(v, "pasta") == 0  ? BUILD_NET_PASTA
                                : strcmp(v, "host") == 0 ? BUILD_NET_HOST
                                                         : BUILD_NET_NONE;
                } else if (strcmp(a, "--tls-verify=false") == 0) {
                        o.tls_verify = false;
                } else if (strcmp(a, "--tls-verify=true") == 0 || strcmp(a, "--tls-verify") == 0) {
                        o.tls_verify = true;
                } else if (strcmp(a, "--pull") == 0) {
                        o.pull = true;
                } else if (strcmp(a, "--no-cache") == 0) {
                        o.no_cache = true;
                } else if (strcmp(a, "--quiet") == 0 || strcmp(a, "-q") == 0) {
                        o.quiet = true;
                } else if (a[0] == '-' && a[1]) {
                        return cli_usage_error("image", "build: unknown option `%s`", a);
                } else if (o.context) {
                        return cli_usage_error("image", "build takes one CONTEXT (`%s` is extra)",
                                               a);
                } else {
                        i += takes;
                        o.context = a;
                        continue;
                }
                i += takes;
        }
        if (!o.context)
                return cli_usage_error("image", "build needs a CONTEXT directory (often `.`)");
        /* a peer that resets a TLS connection must fail a pull, not kill us */
        signal(SIGPIPE, SIG_IGN);
        /* RUN steps get no stdin, and write to our stderr: stdout is the digest's */
        out = dup(STDOUT_FILENO);
        if (out < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
                fprintf(stderr, "csandbox: image build: %s\n", strerror(errno));
                return CS_EXIT_SETUP;
        }
        {
                int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

                if (null >= 0 && null != STDIN_FILENO) {
                        dup2(null, STDIN_FILENO);
                        close(null);
                }
        }
        r = build_image(&o, digest, &err);
        fflush(stdout);
        dup2(out, STDOUT_FILENO);
        close(out);
        strv_free(&o.tags, &o.n_tags);
        strv_free(&o.build_args, &n_args);
        if (r < 0)
                return cli_fail(&err);
        if (!o.quiet)
                for (size_t i = 0; i < o.n_tags; i++)
                        fprintf(stderr, "COMMIT %s\n", o.tags[i]);
        printf("%s\n", digest);
        return 0;
}
