/* Containerfile parsing and build-variable expansion (image/containerfile.h): the reference
 * image's file, the syntax podman build and docker build accept, and every refusal naming
 * its line. */
#include "common/error.h"
#include "image/containerfile/containerfile.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

#define DIGEST "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static int parse(const char *text, struct containerfile *cf, struct cs_error *err)
{
        *err = (struct cs_error){0};
        return containerfile_parse(text, strlen(text), "Containerfile", cf, err);
}

/* Parsing text fails with a message holding each of the NULL-terminated wants. */
static bool refused(const char *text, const char *const *wants)
{
        struct containerfile cf = {0};
        struct cs_error err;

        if (parse(text, &cf, &err) == 0) {
                containerfile_free(&cf);
                return fail("parsed <%s>", text);
        }
        for (; *wants; wants++)
                if (!strstr(err.msg, *wants))
                        return fail("<%s>: `%s` not in `%s`", text, *wants, err.msg);
        return true;
}
/* text parses (into *cf), or the test fails with the message. */
static bool parsed(const char *text, struct containerfile *cf)
{
        struct cs_error err;

        return parse(text, cf, &err) == 0 || fail("%s", err.msg);
}

#define REFUSED(text, ...) refused(text, (const char *const[]){__VA_ARGS__, NULL})

static bool argv_is(const struct cf_instr *in, const char *const *want)
{
        size_t n = 0;

        for (; want[n]; n++)
                if (n >= in->argc || strcmp(in->argv[n], want[n]) != 0)
                        return fail("line %u: argv[%zu] is `%s`, not `%s`", in->line, n,
                                    n < in->argc ? in->argv[n] : "(none)", want[n]);
        if (n != in->argc || in->argv[n])
                return fail("line %u: %zu items, not %zu", in->line, in->argc, n);
        return true;
}
#define ARGV_IS(in, ...) argv_is(in, (const char *const[]){__VA_ARGS__, NULL})

static bool pair_is(const struct cf_pair *p, const char *key, const char *value)
{
        if (strcmp(p->key, key) != 0 ||
            (value ? !p->value || strcmp(p->value, value) != 0 : p->value != NULL))
                return fail("pair `%s`=`%s`, not `%s`=`%s`", p->key, p->value ? p->value : "NULL",
                            key, value ? value : "NULL");
        return true;
}

struct vars {
        const char *const *kv; /* name, value, ..., NULL */
};

static const char *lookup(void *opaque, const char *name)
{
        const struct vars *v = opaque;

        for (const char *const *p = v->kv; *p; p += 2)
                if (strcmp(*p, name) == 0)
                        return p[1];
        return NULL;
}

/* word expands to want with the variables kv, or (want NULL) fails with reason in it. */
static bool expands(const char *word, char escape, const char *want, const char *reason,
                    const char *const *kv)
{
        struct vars v = {kv};
        struct cs_error err = {0};
        char *out = NULL;
        int r = containerfile_expand(word, escape, lookup, &v, &out, &err);
        bool ok = want ? r == 0 && strcmp(out, want) == 0 : r < 0 && strstr(err.msg, reason);

        if (!ok)
                fail("`%s`: got r=%d `%s` (%s)", word, r, out ? out : "", err.msg);
        free(out);
        return ok;
}
#define VARS(...) ((const char *const[]){__VA_ARGS__, NULL})

static const char reference[] = "# syntax=docker/dockerfile:1\n"
                                "# The reference image.\n"
                                "ARG FEDORA_DIGEST=" DIGEST "\n"
                                "FROM registry.example/fedora:44@${FEDORA_DIGEST}\n"
                                "\n"
                                "RUN dnf install -y \\\n"
                                "        git \\\n"
                                "    # the agent's tools\n"
                                "        ripgrep \\\n"
                                "\n"
                                "        nodejs \\\n"
                                "    && dnf clean all\n"
                                "RUN useradd -m -u 1000 -U appuser\n"
                                "USER appuser\n"
                                "ENV PATH=\"/home/appuser/.local/bin:$PATH\"\n"
                                "COPY --chmod=0755 entrypoint.sh /entrypoint.sh\n"
                                "ENTRYPOINT [\"/entrypoint.sh\"]\n"
                                "CMD [\"claude\"]\n"
                                "USER root\n";

static bool test_reference_image_file(void)
{
        struct containerfile cf = {0};
        struct cs_error err;
        const struct cf_instr *in;
        enum cf_kind kinds[] = {CF_ARG, CF_FROM, CF_RUN,        CF_RUN, CF_USER,
                                CF_ENV, CF_COPY, CF_ENTRYPOINT, CF_CMD, CF_USER};
        unsigned lines[] = {3, 4, 6, 13, 14, 15, 16, 17, 18, 19};
        bool ok = true;
        char *from = NULL;

        if (!parsed(reference, &cf))
                return false;
        if (cf.n != 10 || cf.escape != '\\')
                ok = fail("%zu instructions", cf.n);
        for (size_t i = 0; ok && i < cf.n; i++)
                if (cf.instrs[i].kind != kinds[i] || cf.instrs[i].line != lines[i])
                        ok = fail("instruction %zu: %s at line %u", i,
                                  cf_kind_name(cf.instrs[i].kind), cf.instrs[i].line);
        in = cf.instrs;
        ok = ok && in[0].n_pairs == 1 && pair_is(&in[0].pairs[0], "FEDORA_DIGEST", DIGEST);
        ok = ok && ARGV_IS(&in[1], "registry.example/fedora:44@${FEDORA_DIGEST}") && !in[1].stage;
        ok = ok && !in[2].json &&
             ARGV_IS(&in[2], "dnf install -y         git         ripgrep         nodejs     && "
                             "dnf clean all");
        ok = ok && ARGV_IS(&in[3], "useradd -m -u 1000 -U appuser") && ARGV_IS(&in[4], "appuser");
        ok = ok && in[5].n_pairs == 1 &&
             pair_is(&in[5].pairs[0], "PATH", "\"/home/appuser/.local/bin:$PATH\"");
        ok = ok && ARGV_IS(&in[6], "entrypoint.sh", "/entrypoint.sh") && in[6].n_flags == 1 &&
             strcmp(cf_instr_flag(&in[6], "chmod"), "0755") == 0 && !cf_instr_flag(&in[6], "from");
        ok = ok && in[7].json && ARGV_IS(&in[7], "/entrypoint.sh");
        ok = ok && in[8].json && ARGV_IS(&in[8], "claude") && ARGV_IS(&in[9], "root");
        ok = ok && strcmp(in[6].original, "--chmod=0755 entrypoint.sh /entrypoint.sh") == 0;
        /* FROM expands with the ARG declared before it. */
        if (ok) {
                struct vars v = {VARS("FEDORA_DIGEST", in[0].pairs[0].value)};

                ok = containerfile_expand(in[1].argv[0], cf.escape, lookup, &v, &from, &err) == 0 &&
                     strcmp(from, "registry.example/fedora:44@" DIGEST) == 0;
                if (!ok)
                        fail("FROM expands to `%s` (%s)", from ? from : "", err.msg);
                free(from);
        }
        ok = ok && expands(in[5].pairs[0].value, '\\', "/home/appuser/.local/bin:/usr/bin", NULL,
                           VARS("PATH", "/usr/bin"));
        containerfile_free(&cf);
        return ok;
}

static bool test_multi_stage_copy_from(void)
{
        struct containerfile cf = {0};
        bool ok;

        if (!parsed("FROM --platform=linux/arm64 registry.example/gcc AS Build\n"
                    "RUN make\n"
                    "from scratch\n"
                    "copy --from=build --link /a /b\n",
                    &cf))
                return false;
        ok = cf.n == 4 && cf.instrs[0].stage && strcmp(cf.instrs[0].stage, "build") == 0 &&
             strcmp(cf_instr_flag(&cf.instrs[0], "platform"), "linux/arm64") == 0 &&
             ARGV_IS(&cf.instrs[0], "registry.example/gcc") && !cf.instrs[2].stage &&
             cf.instrs[3].kind == CF_COPY && ARGV_IS(&cf.instrs[3], "/a", "/b") &&
             strcmp(cf_instr_flag(&cf.instrs[3], "from"), "build") == 0 &&
             strcmp(cf_instr_flag(&cf.instrs[3], "link"), "") == 0;
        containerfile_free(&cf);
        return ok || fail("%s", why[0] ? why : "stages parsed wrong");
}

static bool test_escape_directive_backtick(void)
{
        struct containerfile cf = {0};
        bool ok;

        if (!parsed("# escape=`\n\nFROM registry.example/win\nRUN dir c:\\ `\n  /w\n"
                    "COPY a\\b c:\\dest\\\n",
                    &cf))
                return false;
        ok = cf.escape == '`' && cf.n == 3 && ARGV_IS(&cf.instrs[1], "dir c:\\   /w") &&
             cf.instrs[1].line == 4 && ARGV_IS(&cf.instrs[2], "a\\b", "c:\\dest\\") &&
             expands("c:\\dest\\`$x", '`', "c:\\dest\\$x", NULL, VARS("x", "no"));
        containerfile_free(&cf);
        if (!ok)
                return ok;
        /* Only at the top: later it is a comment, and the escape stays \. */
        if (!parsed("FROM x\n# escape=`\nRUN a \\\n b\n", &cf))
                return false;
        ok = cf.escape == '\\' && cf.n == 2 && ARGV_IS(&cf.instrs[1], "a  b");
        containerfile_free(&cf);
        return ok && REFUSED("# escape=x\nFROM a\n", "Containerfile:1:", "escape") &&
               REFUSED("# escape=`\n# ESCAPE=\\\nFROM a\n", "Containerfile:2:", "second");
}

static bool test_env_forms_and_quotes(void)
{
        struct containerfile cf = {0};
        const struct cf_pair *p;
        bool ok;

        if (!parsed("FROM a\n"
                    "ENV A=1 B=\"two words\" C='$A single' D=x\\ y\n"
                    "env LEGACY value with  spaces \n"
                    "LABEL org.example.title=\"t\" version=2\n"
                    "ARG ONE TWO=2 THREE=\"a b\"\n",
                    &cf))
                return false;
        p = cf.instrs[1].pairs;
        ok = cf.n == 5 && cf.instrs[1].n_pairs == 4 && pair_is(&p[0], "A", "1") &&
             pair_is(&p[1], "B", "\"two words\"") && pair_is(&p[2], "C", "'$A single'") &&
             pair_is(&p[3], "D", "x\\ y");
        ok = ok && expands(p[1].value, '\\', "two words", NULL, VARS("A", "1")) &&
             expands(p[2].value, '\\', "$A single", NULL, VARS("A", "1")) &&
             expands(p[3].value, '\\', "x y", NULL, VARS("A", "1"));
        ok = ok && cf.instrs[2].n_pairs == 1 &&
             pair_is(&cf.instrs[2].pairs[0], "LEGACY", "value with  spaces");
        p = cf.instrs[3].pairs;
        ok = ok && cf.instrs[3].n_pairs == 2 && pair_is(&p[0], "org.example.title", "\"t\"") &&
             pair_is(&p[1], "version", "2");
        p = cf.instrs[4].pairs;
        ok = ok && cf.instrs[4].n_pairs == 3 && pair_is(&p[0], "ONE", NULL) &&
             pair_is(&p[1], "TWO", "2") && pair_is(&p[2], "THREE", "\"a b\"");
        containerfile_free(&cf);
        return ok && REFUSED("FROM a\nENV A=1 B\n", "Containerfile:2:", "`B` is not NAME=VALUE") &&
               REFUSED("FROM a\nENV LONE\n", "Containerfile:2:", "needs a value") &&
               REFUSED("FROM a\nENV =x\n", "Containerfile:2:", "no name");
}

static bool test_json_form_and_fallback(void)
{
        struct containerfile cf = {0};
        bool ok;

        if (!parsed("FROM a\n"
                    "CMD [\"sh\", \"-c\", \"echo $HOME\"]\n"
                    "RUN [\"broken\", \n"
                    "ENTRYPOINT [ not json ]\n"
                    "COPY [\"a b\", \"/c d/\"]\n"
                    "VOLUME [\"/data\"]\n"
                    "VOLUME /x /y\n"
                    "CMD []\n"
                    "SHELL [\"/bin/bash\", \"-eo\", \"pipefail\", \"-c\"]\n",
                    &cf))
                return false;
        ok = cf.n == 9 && cf.instrs[1].json && ARGV_IS(&cf.instrs[1], "sh", "-c", "echo $HOME") &&
             !cf.instrs[2].json && ARGV_IS(&cf.instrs[2], "[\"broken\",") && !cf.instrs[3].json &&
             ARGV_IS(&cf.instrs[3], "[ not json ]") && cf.instrs[4].json &&
             ARGV_IS(&cf.instrs[4], "a b", "/c d/") && ARGV_IS(&cf.instrs[5], "/data") &&
             ARGV_IS(&cf.instrs[6], "/x", "/y") && cf.instrs[7].json && cf.instrs[7].argc == 0 &&
             cf.instrs[7].argv && !cf.instrs[7].argv[0] &&
             ARGV_IS(&cf.instrs[8], "/bin/bash", "-eo", "pipefail", "-c");
        containerfile_free(&cf);
        return ok && REFUSED("FROM a\nCMD [\"a\", 1]\n", "Containerfile:2:", "not a string");
}

static bool test_comments_blank_lines_and_case(void)
{
        struct containerfile cf = {0};
        struct cs_error err;
        bool ok;

        if (!parsed("\xef\xbb\xbf  # a comment\r\n\r\n\tfRoM a\r\n   # directive=late\n"
                    "Run echo \\\n# inside\n\n  more\\  \n",
                    &cf))
                return false;
        ok = cf.n == 2 && cf.instrs[0].line == 3 && cf.instrs[1].line == 5 &&
             ARGV_IS(&cf.instrs[1], "echo   more");
        containerfile_free(&cf);
        if (!ok || parse("", &cf, &err) < 0 || cf.n != 0)
                return fail("an empty file: %s", err.msg);
        containerfile_free(&cf);
        return ok;
}

static bool test_refusals_name_the_line(void)
{
        return REFUSED("FROM a\n\nFOO bar\n", "Containerfile:3:", "unknown instruction `FOO`") &&
               REFUSED("FROM a\nRUN cat <<EOF\nx\nEOF\n", "Containerfile:2:", "heredoc") &&
               REFUSED("FROM a\nCOPY <<-\"EOF\" /x\n", "Containerfile:2:", "heredoc") &&
               REFUSED("FROM a\nonbuild RUN x\n", "Containerfile:2:", "ONBUILD", "not supported") &&
               REFUSED("FROM a\nHEALTHCHECK CMD true\n", "Containerfile:2:", "HEALTHCHECK") &&
               REFUSED("FROM a\nCOPY /only\n", "Containerfile:2:", "source and a destination") &&
               REFUSED("FROM a\nSHELL /bin/sh -c\n", "Containerfile:2:", "JSON array") &&
               REFUSED("FROM a\nSHELL []\n", "Containerfile:2:", "needs a shell") &&
               REFUSED("FROM\n", "Containerfile:1:", "needs an image") &&
               REFUSED("FROM --platform=x\n", "Containerfile:1:", "needs an image") &&
               REFUSED("FROM a b\n", "Containerfile:1:", "AS NAME") &&
               REFUSED("FROM a AS 1x\n", "Containerfile:1:", "not valid") &&
               REFUSED("FROM a AS x\nFROM b AS X\n", "Containerfile:2:", "line 1") &&
               REFUSED("FROM a\nENV A=\"open\n", "Containerfile:2:", "unterminated") &&
               REFUSED("FROM a\nWORKDIR '/x\n", "Containerfile:2:", "unterminated") &&
               REFUSED("FROM a\nUSER ${X\n", "Containerfile:2:", "USER") &&
               REFUSED("FROM a\nRUN --mount=type=cache x\n", "Containerfile:2:", "BuildKit") &&
               REFUSED("FROM a\nADD --from=x a b\n", "Containerfile:2:", "no flag --from") &&
               REFUSED("FROM a\nCOPY --chown a b\n", "Containerfile:2:", "needs a value") &&
               REFUSED("FROM a\nCOPY --link=yes a b\n", "Containerfile:2:", "true or false") &&
               REFUSED("FROM a\nCOPY --from=a --from=b a b\n", "Containerfile:2:", "twice") &&
               REFUSED("FROM a\nRUN\n", "Containerfile:2:", "needs a command") &&
               REFUSED("FROM a\nARG\n", "Containerfile:2:", "needs a NAME");
}

static bool test_nul_byte_and_limits(void)
{
        struct containerfile cf = {0};
        struct cs_error err = {0};
        static const char nul[] = "FROM a\nRUN x\nRUN y\0z\n";
        size_t big = CONTAINERFILE_MAX_BYTES + 1;
        char *text;
        int r;

        if (containerfile_parse(nul, sizeof(nul) - 1, "Containerfile", &cf, &err) == 0 ||
            !strstr(err.msg, "Containerfile:3:") || !strstr(err.msg, "NUL"))
                return fail("NUL: %s", err.msg);
        text = malloc(big);
        if (!text)
                return fail("malloc");
        memset(text, '#', big);
        r = containerfile_parse(text, big, "Containerfile", &cf, &err);
        if (r == 0 || !strstr(err.msg, "over the limit")) {
                free(text);
                return fail("over-long: %s", err.msg);
        }
        /* 10001 instructions, within the byte limit. */
        for (size_t i = 0; i <= CONTAINERFILE_MAX_INSTRS; i++)
                memcpy(text + i * 7, "USER a\n", 7);
        r = containerfile_parse(text, (CONTAINERFILE_MAX_INSTRS + 1) * 7, "Containerfile", &cf,
                                &err);
        free(text);
        if (r == 0 || !strstr(err.msg, "Containerfile:10001:") || !strstr(err.msg, "instructions"))
                return fail("too many: %s", err.msg);
        /* Nothing past len is read: a prefix of a longer buffer is a file of its own. */
        if (containerfile_parse("FROM a\nBOGUS", 6, "Containerfile", &cf, &err) < 0 || cf.n != 1)
                return fail("prefix: %s", err.msg);
        containerfile_free(&cf);
        return true;
}

static bool test_expand_variables(void)
{
        const char *const *kv = VARS("A", "a", "B", "b", "EMPTY", "", "N1", "x");

        return expands("$A-${B}_$EMPTY.$UNSET/$N1", '\\', "a-b_./x", NULL, kv) &&
               expands("${UNSET:-def} ${A:-def} ${EMPTY:-d2} ${A:+alt} ${UNSET:+alt}|", '\\',
                       "def a d2 alt |", NULL, kv) &&
               expands("${UNSET:-${B}} ${UNSET:-${NOPE:-$A-x}}", '\\', "b a-x", NULL, kv) &&
               expands("${A:+\"}\"}", '\\', "}", NULL, kv) &&
               expands("\\$A '$A' \"$A\\$A\\x\" $ $1 ${A}1", '\\', "$A $A a$A\\x $  a1", NULL,
                       kv) &&
               expands("end\\", '\\', "end", NULL, kv) &&
               expands("${A", '\\', NULL, "bad substitution", kv) &&
               expands("${}", '\\', NULL, "bad substitution", kv) &&
               expands("${A:?x}", '\\', NULL, "not supported", kv) &&
               expands("${UNSET:-x", '\\', NULL, "no closing", kv) &&
               expands("'open", '\\', NULL, "unterminated", kv) &&
               expands("\"open", '\\', NULL, "unterminated", kv);
}

/* levels of ${U:-...} around an x. */
static char *nested(int levels)
{
        char *s = calloc((size_t)levels * 6 + 2, 1);

        for (int i = 0; s && i < levels; i++)
                strcat(s, "${U:-");
        for (int i = 0; s && i <= levels; i++)
                strcat(s, i == 0 ? "x" : "}");
        return s;
}

static bool test_expand_bounds(void)
{
        size_t half = CONTAINERFILE_MAX_EXPANSION / 2 + 1;
        char *big = malloc(half + 1), *deep = nested(CONTAINERFILE_MAX_NESTING),
             *deeper = nested(CONTAINERFILE_MAX_NESTING + 1);
        bool ok = big && deep && deeper;

        if (ok) {
                memset(big, 'x', half);
                big[half] = '\0';
        }
        ok = ok && expands("$BIG", '\\', big, NULL, VARS("BIG", big)) &&
             expands("$BIG$BIG", '\\', NULL, "more than", VARS("BIG", big)) &&
             expands("${U:-$BIG}${U:-$BIG}", '\\', NULL, "more than", VARS("BIG", big)) &&
             expands(deep, '\\', "x", NULL, VARS("A", "a")) &&
             expands(deeper, '\\', NULL, "deeper than", VARS("A", "a"));
        free(big);
        free(deep);
        free(deeper);
        return ok;
}

static bool test_expanding_instructions_are_dockers(void)
{
        enum cf_kind yes[] = {CF_ADD,  CF_COPY,   CF_ENV,     CF_EXPOSE,     CF_FROM, CF_LABEL,
                              CF_USER, CF_VOLUME, CF_WORKDIR, CF_STOPSIGNAL, CF_ARG};
        enum cf_kind no[] = {CF_RUN, CF_CMD, CF_ENTRYPOINT, CF_SHELL, CF_MAINTAINER};

        for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
                if (!cf_kind_expands(yes[i]))
                        return fail("%s does not expand", cf_kind_name(yes[i]));
        for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
                if (cf_kind_expands(no[i]))
                        return fail("%s expands", cf_kind_name(no[i]));
        return true;
}

int main(void)
{
        RUN(test_reference_image_file);
        RUN(test_multi_stage_copy_from);
        RUN(test_escape_directive_backtick);
        RUN(test_env_forms_and_quotes);
        RUN(test_json_form_and_fallback);
        RUN(test_comments_blank_lines_and_case);
        RUN(test_refusals_name_the_line);
        RUN(test_nul_byte_and_limits);
        RUN(test_expand_variables);
        RUN(test_expand_bounds);
        RUN(test_expanding_instructions_are_dockers);
        return failures ? 1 : 0;
}
