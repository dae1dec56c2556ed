/* The .containerignore / .dockerignore matcher of `csandbox image build`: the file comes from
 * a build context, so it is hostile text. Invariants: the text parses into at most the
 * bounded number of patterns or is refused with a message; the patterns compile or are
 * refused with a message; matching any path (the input's own lines included) ends, and a
 * path matched by `**` alone is excluded whatever else the file says before it. */
#include "fuzz.h"

#include "common/error.h"
#include "common/strv.h"
#include "image/containerfile/build-private.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static const char *const paths[] = {"a",      "a/b",      "a/b/c.md", ".git/config",
                                            "README", "x/y/z/..", "é/[a]",    "Containerfile"};
        struct cs_error err = {0};
        struct build_ignore *m = NULL;
        char **pats = NULL;
        size_t n = 0;

        if (size > 1 << 16)
                return 0;
        if (build_ignore_parse((const char *)data, size, &pats, &n, &err) < 0) {
                FUZZ_CHECK(err.msg[0] != '\0');
                return 0;
        }
        FUZZ_CHECK(n <= BUILD_IGNORE_MAX_PATTERNS);
        if (build_ignore_compile(pats, n, &m, &err) < 0) {
                FUZZ_CHECK(err.msg[0] != '\0');
        } else {
                for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
                        (void)build_ignore_excludes(m, paths[i]);
                for (size_t i = 0; i < n; i++)
                        (void)build_ignore_excludes(m, pats[i]);
                build_ignore_free(m);
        }
        /* the same patterns, then `**`: everything is left out */
        if (strv_push_dup(&pats, &n, "**") == 0 && build_ignore_compile(pats, n, &m, &err) == 0) {
                for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
                        FUZZ_CHECK(build_ignore_excludes(m, paths[i]));
                build_ignore_free(m);
        }
        for (size_t i = 0; i < n; i++) {
                char *p = strdup(pats[i]);

                FUZZ_CHECK(p);
                build_path_clean(p);
                FUZZ_CHECK(strlen(p) <= strlen(pats[i]) + 1);
                free(p);
        }
        strv_free(&pats, &n);
        return 0;
}
