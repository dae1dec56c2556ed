/* The Containerfile of `csandbox image build`, from a build context. Invariants: a file that
 * parses has its instructions on increasing lines with NULL-terminated argv in the shape
 * containerfile.h gives each kind; every word of an instruction that expands does expand
 * (it was checked at parse time), at most over the size bound; every refusal names the
 * file; and any input expands as one word or fails with a message. */
#include "fuzz.h"

#include "common/error.h"
#include "image/containerfile/containerfile.h"

static const char *lookup(void *opaque, const char *name)
{
        static const char *const vars[] = {
            "A", "a",    "PATH", "/usr/bin", "EMPTY", "",
            "Q", "'\"$", "1",    "one",      "LONG",  "0123456789abcdef0123456789abcdef"};

        (void)opaque;
        for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i += 2)
                if (strcmp(vars[i], name) == 0)
                        return vars[i + 1];
        return NULL;
}

/* Expanding word: ok, or (only when must_expand is false) a refusal with a message. */
static void check_expand(const char *word, char escape, bool must_expand)
{
        struct cs_error err = {0};
        char *out = NULL;

        if (!word)
                return;
        if (containerfile_expand(word, escape, lookup, NULL, &out, &err) == 0) {
                FUZZ_CHECK(out && strlen(out) <= CONTAINERFILE_MAX_EXPANSION);
                free(out);
                return;
        }
        FUZZ_CHECK(err.msg[0] != '\0');
        FUZZ_CHECK(!must_expand || strstr(err.msg, "more than"));
}

static void check_instr(const struct cf_instr *in, char escape)
{
        bool expands = cf_kind_expands(in->kind);

        FUZZ_CHECK(strcmp(cf_kind_name(in->kind), "?") != 0);
        FUZZ_CHECK(in->original && in->argv && !in->argv[in->argc]);
        for (size_t i = 0; i < in->argc; i++)
                FUZZ_CHECK(in->argv[i]);
        if (in->kind == CF_FROM)
                FUZZ_CHECK(in->argc == 1 && (!in->stage || in->stage[0]));
        if (in->kind == CF_COPY || in->kind == CF_ADD)
                FUZZ_CHECK(in->argc >= 2);
        if (in->kind == CF_SHELL)
                FUZZ_CHECK(in->json && in->argc >= 1);
        if (in->kind == CF_ENV || in->kind == CF_ARG || in->kind == CF_LABEL)
                FUZZ_CHECK(in->n_pairs >= 1 && in->argc == 0);
        for (size_t i = 0; i < in->n_pairs; i++) {
                FUZZ_CHECK(in->pairs[i].key && in->pairs[i].key[0]);
                FUZZ_CHECK(in->kind == CF_ARG || in->pairs[i].value);
                check_expand(in->pairs[i].key, escape, expands);
                check_expand(in->pairs[i].value, escape, expands);
        }
        for (size_t i = 0; i < in->n_flags; i++) {
                FUZZ_CHECK(in->flags[i].key && cf_instr_flag(in, in->flags[i].key));
                check_expand(in->flags[i].value, escape, expands);
        }
        for (size_t i = 0; i < in->argc; i++)
                check_expand(in->argv[i], escape, expands);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct containerfile cf = {0};
        struct cs_error err = {0};
        char *word;

        if (containerfile_parse((const char *)data, size, "Containerfile", &cf, &err) == 0) {
                FUZZ_CHECK(cf.escape == '\\' || cf.escape == '`');
                FUZZ_CHECK(cf.n <= CONTAINERFILE_MAX_INSTRS);
                for (size_t i = 0; i < cf.n; i++) {
                        FUZZ_CHECK(cf.instrs[i].line >= 1);
                        FUZZ_CHECK(i == 0 || cf.instrs[i].line > cf.instrs[i - 1].line);
                        check_instr(&cf.instrs[i], cf.escape);
                }
                containerfile_free(&cf);
        } else {
                FUZZ_CHECK(strncmp(err.msg, "Containerfile", 13) == 0);
        }
        /* The input as one word, cut at its first NUL as a C caller would pass it. */
        word = fuzz_cstr(data, size);
        check_expand(word, '\\', false);
        check_expand(word, '`', false);
        free(word);
        return 0;
}
