/* Containerfile (Dockerfile) parsing for `csandbox image build`: the syntax podman build and
 * docker build accept with the Dockerfile frontend v1, without BuildKit-only extras. Pure code:
 * the file comes from a build context, so it is hostile input.
 *
 * Words are kept as written: quotes, escapes and `$VAR`s are left in them, because a quote
 * decides whether a `$` expands (`'$HOME'` is literal). containerfile_expand removes the
 * quotes and expands the variables in one pass, as docker does when it runs an instruction;
 * cf_kind_expands says which instructions that is (the others go to a shell verbatim). */
#pragma once
#include <stdbool.h>
#include <stddef.h>

struct cs_error;

/* Limits on hostile input: the file, the number of instructions, one instruction with its
 * continuation lines joined, and the output of one expansion. */
#define CONTAINERFILE_MAX_BYTES     ((size_t)1 << 20)
#define CONTAINERFILE_MAX_INSTRS    10000
#define CONTAINERFILE_MAX_LINE      ((size_t)1 << 20)
#define CONTAINERFILE_MAX_EXPANSION ((size_t)1 << 20)
/* How deep ${A:-${B:-...}} may nest. */
#define CONTAINERFILE_MAX_NESTING 32

enum cf_kind {
        CF_FROM,
        CF_RUN,
        CF_CMD,
        CF_ENTRYPOINT,
        CF_SHELL,
        CF_COPY,
        CF_ADD,
        CF_ENV,
        CF_ARG,
        CF_LABEL,
        CF_WORKDIR,
        CF_USER,
        CF_EXPOSE,
        CF_VOLUME,
        CF_STOPSIGNAL,
        CF_MAINTAINER,
};

/* A flag (`--from=build`: key "from", value "build"; a bare `--link`: value NULL), or an
 * ENV/ARG/LABEL pair (an ARG without a default: value NULL). As written: expand both. */
struct cf_pair {
        char *key;
        char *value;
};

/* One instruction. What argv holds depends on kind:
 *   FROM                       argv[0] the image; stage the `AS` name (lowercased) or NULL
 *   RUN CMD ENTRYPOINT SHELL   json: the array's items; else argv[0] the shell command line
 *   COPY ADD                   the sources, then the destination (argc >= 2); json as above
 *   EXPOSE VOLUME              the words (VOLUME may be json)
 *   WORKDIR USER STOPSIGNAL MAINTAINER   argv[0] the whole argument
 *   ENV ARG LABEL              argv empty; pairs hold the names and values */
struct cf_instr {
        enum cf_kind kind;
        unsigned line;  /* the first line, 1-based */
        char *original; /* the text after the keyword, continuations joined, trimmed: flags
                         * included; for a build cache key and messages */
        bool json;      /* the exec form `["a", "b"]` */
        char **argv;    /* NULL-terminated */
        size_t argc;
        char *stage;
        struct cf_pair *flags; /* the leading --name[=value] words, in order */
        size_t n_flags;
        struct cf_pair *pairs;
        size_t n_pairs;
};

struct containerfile {
        struct cf_instr *instrs;
        size_t n;
        char escape; /* '\\' or '`' (the `# escape=` directive): containerfile_expand takes it */
};

/* Parse len bytes of text (NUL bytes refused; nothing past len is read). name is the file
 * name messages start with: "Containerfile:12: ...". On success *ret owns the instructions
 * (release with containerfile_free); on failure *ret is untouched. Refused with the line:
 * ONBUILD, HEALTHCHECK, heredocs (`<<EOF`), BuildKit-only flags, an unknown instruction. */
int containerfile_parse(const char *text, size_t len, const char *name, struct containerfile *ret,
                        struct cs_error *err);
void containerfile_free(struct containerfile *cf);

/* "FROM", "RUN", ...: the keyword as messages print it. */
const char *cf_kind_name(enum cf_kind kind);
/* Docker's rule for which instructions expand build variables in their words and pairs:
 * ADD COPY ENV EXPOSE FROM LABEL STOPSIGNAL USER VOLUME WORKDIR (and ONBUILD, refused here),
 * ARG defaults, and the flags of those. Not RUN, CMD, ENTRYPOINT, SHELL, MAINTAINER: the
 * shell in the image expands a shell form there, an exec form is taken literally. FROM
 * expands with the ARGs declared before the first FROM only. */
bool cf_kind_expands(enum cf_kind kind);
/* The value of flag `--name` (key without dashes): NULL when absent; "" for a bare flag. */
const char *cf_instr_flag(const struct cf_instr *in, const char *name);

/* Expand one word as docker does: quotes removed ('...' literal, "..." expands), escape
 * (the file's escape character) takes the next character literally ("\$" is a dollar),
 * $VAR, ${VAR}, ${VAR:-word} (word when VAR is unset or empty) and ${VAR:+word} (word when
 * it is set and non-empty), word itself expanded. lookup returns NULL for an unset
 * variable, which expands to nothing. The result is bounded (CONTAINERFILE_MAX_EXPANSION)
 * and so is the nesting. *ret is a heap string on success. */
int containerfile_expand(const char *word, char escape,
                         const char *(*lookup)(void *opaque, const char *name), void *opaque,
                         char **ret, struct cs_error *err);
