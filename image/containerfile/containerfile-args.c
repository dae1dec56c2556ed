/* Containerfile instructions: the keyword, the leading --flags, and each instruction's
 * arguments, read the way docker's parser reads them (containerfile.h says what goes where).
 * Every word of an instruction that expands variables is expanded once with none set, so a
 * quote or ${ left open is reported with its line here rather than at build time. */
#include "containerfile.h"
#include "containerfile-private.h"

#include "../../common/error.h"
#include "../../common/strv.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const kind_names[] = {
    [CF_FROM] = "FROM",
    [CF_RUN] = "RUN",
    [CF_CMD] = "CMD",
    [CF_ENTRYPOINT] = "ENTRYPOINT",
    [CF_SHELL] = "SHELL",
    [CF_COPY] = "COPY",
    [CF_ADD] = "ADD",
    [CF_ENV] = "ENV",
    [CF_ARG] = "ARG",
    [CF_LABEL] = "LABEL",
    [CF_WORKDIR] = "WORKDIR",
    [CF_USER] = "USER",
    [CF_EXPOSE] = "EXPOSE",
    [CF_VOLUME] = "VOLUME",
    [CF_STOPSIGNAL] = "STOPSIGNAL",
    [CF_MAINTAINER] = "MAINTAINER",
};
#define N_KINDS (sizeof(kind_names) / sizeof(kind_names[0]))

/* The flags each instruction takes (docker's v1 frontend, plus --chmod and --link, which
 * podman also accepts); NULL-terminated. */
static const char *const from_flags[] = {"platform", NULL};
static const char *const copy_flags[] = {"from", "chown", "chmod", "link", NULL};
static const char *const add_flags[] = {"chown", "chmod", "link", NULL};
static const char *const no_flags[] = {NULL};
/* Flags that only BuildKit knows, named as such in the refusal. */
static const char *const buildkit_flags[] = {"mount",   "network",  "security",     "parents",
                                             "exclude", "checksum", "keep-git-dir", NULL};

const char *cf_kind_name(enum cf_kind kind)
{
        return (size_t)kind < N_KINDS ? kind_names[kind] : "?";
}

bool cf_kind_expands(enum cf_kind kind)
{
        switch (kind) {
        case CF_FROM:
        case CF_COPY:
        case CF_ADD:
        case CF_ENV:
        case CF_ARG:
        case CF_LABEL:
        case CF_WORKDIR:
        case CF_USER:
        case CF_EXPOSE:
        case CF_VOLUME:
        case CF_STOPSIGNAL:
                return true;
        default:
                return false;
        }
}

const char *cf_instr_flag(const struct cf_instr *in, const char *name)
{
        for (size_t i = 0; i < in->n_flags; i++)
                if (strcmp(in->flags[i].key, name) == 0)
                        return in->flags[i].value ? in->flags[i].value : "";
        return NULL;
}

static void pairs_free(struct cf_pair **v, size_t *n)
{
        for (size_t i = 0; i < *n; i++) {
                free((*v)[i].key);
                free((*v)[i].value);
        }
        free(*v);
        *v = NULL;
        *n = 0;
}

void cf_instr_free(struct cf_instr *in)
{
        free(in->original);
        strv_free(&in->argv, &in->argc);
        free(in->stage);
        pairs_free(&in->flags, &in->n_flags);
        pairs_free(&in->pairs, &in->n_pairs);
}

/* Append a pair, which the list takes (both freed when it cannot be added); -ENOMEM. A NULL
 * value is kept as NULL. */
static int pair_push(struct cf_pair **v, size_t *n, char *key, char *value, bool has_value)
{
        struct cf_pair *nv;

        if (!key || (has_value && !value))
                goto oom;
        nv = realloc(*v, (*n + 1) * sizeof(*nv));
        if (!nv)
                goto oom;
        nv[(*n)++] = (struct cf_pair){key, value};
        *v = nv;
        return 0;
oom:
        free(key);
        free(value);
        return -ENOMEM;
}

struct ctx {
        struct cf_instr *in;
        const struct containerfile *cf;
        const char *file;
        struct cs_error *err;
};

static int instr_error(struct ctx *c, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int instr_error(struct ctx *c, int errnum, const char *fmt, ...)
{
        char msg[CS_ERROR_MAX];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        return cs_error_setx(c->err, errnum, "%s:%u: %s %s", c->file, c->in->line,
                             kind_names[c->in->kind], msg);
}

static int oom(struct ctx *c)
{
        return cs_error_set(c->err, ENOMEM, "%s:%u", c->file, c->in->line);
}

static int quote_error(struct ctx *c)
{
        return instr_error(c, EINVAL, "has an unterminated quote; close it");
}

/* The next blank-separated word, quotes not special (docker's split for FROM, COPY, ADD,
 * EXPOSE, VOLUME and the heredoc check). */
static bool plain_word(const char *s, size_t *pos, size_t *ret_start, size_t *ret_end)
{
        size_t i = *pos;

        while (cf_blank(s[i]))
                i++;
        *ret_start = i;
        while (s[i] && !cf_blank(s[i]))
                i++;
        *ret_end = *pos = i;
        return *ret_end > *ret_start;
}

/* A heredoc opener as BuildKit sees one: a word [digits]<<[-]NAME. */
static int refuse_heredoc(struct ctx *c, const char *s)
{
        size_t pos = 0, a, b;

        while (plain_word(s, &pos, &a, &b)) {
                size_t i = a;

                while (i < b && s[i] >= '0' && s[i] <= '9')
                        i++;
                if (b - i < 3 || s[i] != '<' || s[i + 1] != '<')
                        continue;
                i += s[i + 2] == '-' ? 3 : 2;
                if (i < b && s[i] != '<')
                        return instr_error(c, ENOTSUP,
                                           "uses a heredoc (`%.*s`), a BuildKit extension that "
                                           "is not supported; put the text in a file in the "
                                           "build context and COPY it",
                                           (int)(b - a > 40 ? 40 : b - a), s + a);
        }
        return 0;
}

static int push_plain_words(struct ctx *c, const char *s)
{
        size_t pos = 0, a, b;

        while (plain_word(s, &pos, &a, &b))
                if (strv_push(&c->in->argv, &c->in->argc, strndup(s + a, b - a)) < 0)
                        return oom(c);
        return 0;
}

/* The exec form: 1 when s is a JSON array of strings (into argv), 0 when it is not JSON (the
 * shell form, as docker falls back), an error for an array with anything but strings. */
static int json_array(struct ctx *c, const char *s)
{
        const cJSON *item;
        cJSON *j;

        if (*s != '[')
                return 0;
        j = cJSON_ParseWithOpts(s, NULL, true);
        if (!cJSON_IsArray(j)) {
                cJSON_Delete(j);
                return 0;
        }
        cJSON_ArrayForEach(item, j)
        {
                if (!cJSON_IsString(item)) {
                        cJSON_Delete(j);
                        return instr_error(c, EINVAL,
                                           "has a JSON array with an item that is not a "
                                           "string; quote every item");
                }
                if (strv_push_dup(&c->in->argv, &c->in->argc, item->valuestring) < 0) {
                        cJSON_Delete(j);
                        return oom(c);
                }
        }
        cJSON_Delete(j);
        c->in->json = true;
        return 1;
}

static bool stage_name_valid(const char *s)
{
        if (!(*s >= 'a' && *s <= 'z'))
                return false;
        for (; *s; s++)
                if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '-' ||
                      *s == '_' || *s == '.'))
                        return false;
        return true;
}

static int args_from(struct ctx *c, const char *s)
{
        struct cf_instr *in = c->in;
        int r = push_plain_words(c, s);

        if (r < 0)
                return r;
        if (in->argc == 0)
                return instr_error(c, EINVAL,
                                   "needs an image: FROM [--platform=P] IMAGE [AS NAME]");
        if (in->argc == 2 || in->argc > 3 || (in->argc == 3 && strcasecmp(in->argv[1], "as") != 0))
                return instr_error(c, EINVAL,
                                   "takes an image and an optional `AS NAME`, not %zu words: "
                                   "FROM [--platform=P] IMAGE [AS NAME]",
                                   in->argc);
        if (in->argc == 1)
                return 0;
        for (char *p = in->argv[2]; *p; p++)
                if (*p >= 'A' && *p <= 'Z')
                        *p = (char)(*p - 'A' + 'a');
        if (!stage_name_valid(in->argv[2]))
                return instr_error(c, EINVAL,
                                   "stage name `%.80s` is not valid: a letter, then letters, "
                                   "digits, -, _ or .",
                                   in->argv[2]);
        for (size_t i = 0; i < c->cf->n; i++)
                if (c->cf->instrs[i].stage && strcmp(c->cf->instrs[i].stage, in->argv[2]) == 0)
                        return instr_error(c, EINVAL,
                                           "names a second stage `%s` (the first is at line %u)",
                                           in->argv[2], c->cf->instrs[i].line);
        in->stage = in->argv[2];
        free(in->argv[1]);
        in->argv[1] = NULL;
        in->argc = 1;
        return 0;
}

/* RUN, CMD, ENTRYPOINT (exec or shell form) and SHELL (exec form only). */
static int args_command(struct ctx *c, const char *s)
{
        enum cf_kind kind = c->in->kind;
        int r = json_array(c, s);

        if (r < 0)
                return r;
        if (r > 0 && kind == CF_SHELL && c->in->argc == 0)
                return instr_error(c, EINVAL, "needs a shell: SHELL [\"/bin/sh\", \"-c\"]");
        if (r > 0)
                return 0;
        if (kind == CF_SHELL)
                return instr_error(c, EINVAL,
                                   "takes only a JSON array of strings, like "
                                   "SHELL [\"/bin/sh\", \"-c\"]");
        if (!*s)
                return instr_error(c, EINVAL, "needs a command");
        if (kind == CF_RUN && (r = refuse_heredoc(c, s)) < 0)
                return r;
        return strv_push_dup(&c->in->argv, &c->in->argc, s) < 0 ? oom(c) : 0;
}

/* COPY, ADD and VOLUME (exec or word form), EXPOSE (words). */
static int args_list(struct ctx *c, const char *s)
{
        enum cf_kind kind = c->in->kind;
        int r = kind == CF_EXPOSE ? 0 : json_array(c, s);

        if (r == 0 && (kind == CF_COPY || kind == CF_ADD))
                r = refuse_heredoc(c, s);
        if (r == 0)
                r = push_plain_words(c, s);
        if (r < 0)
                return r;
        if ((kind == CF_COPY || kind == CF_ADD) && c->in->argc < 2)
                return instr_error(c, EINVAL,
                                   "needs a source and a destination: %s SRC... DEST (or the "
                                   "JSON form for paths with blanks)",
                                   kind_names[kind]);
        if (c->in->argc == 0)
                return instr_error(c, EINVAL, "needs at least one argument");
        return 0;
}

/* WORKDIR, USER, STOPSIGNAL, MAINTAINER: the whole rest of the line is the one argument. */
static int args_string(struct ctx *c, const char *s)
{
        if (!*s)
                return instr_error(c, EINVAL, "needs an argument");
        return strv_push_dup(&c->in->argv, &c->in->argc, s) < 0 ? oom(c) : 0;
}

/* ENV and LABEL: NAME=VALUE pairs, or the legacy `NAME VALUE...`; ARG: NAME or NAME=VALUE. */
static int args_pairs(struct ctx *c, const char *s)
{
        struct cf_instr *in = c->in;
        size_t pos = 0, a, b;
        int r;

        while ((r = cf_word_next(s, &pos, c->cf->escape, &a, &b)) > 0) {
                const char *eq = memchr(s + a, '=', b - a);

                if (!eq && in->n_pairs == 0 && in->kind != CF_ARG) {
                        /* Legacy: split at the first blank, quotes not special. */
                        plain_word(s, &(size_t){0}, &a, &b);
                        pos = b;
                        while (cf_blank(s[pos]))
                                pos++;
                        if (!s[pos])
                                return instr_error(c, EINVAL, "%.*s needs a value: %s NAME=VALUE",
                                                   (int)(b - a > 80 ? 80 : b - a), s + a,
                                                   kind_names[in->kind]);
                        return pair_push(&in->pairs, &in->n_pairs, strndup(s + a, b - a),
                                         strdup(s + pos), true) < 0
                                   ? oom(c)
                                   : 0;
                }
                if (!eq && in->kind != CF_ARG)
                        return instr_error(c, EINVAL,
                                           "`%.*s` is not NAME=VALUE (in this form every word "
                                           "is a pair; quote a value with blanks)",
                                           (int)(b - a > 80 ? 80 : b - a), s + a);
                if (eq == s + a || a == b)
                        return instr_error(c, EINVAL, "has a pair with no name");
                if (pair_push(&in->pairs, &in->n_pairs, strndup(s + a, (eq ? eq : s + b) - (s + a)),
                              eq ? strndup(eq + 1, (size_t)(s + b - eq - 1)) : NULL, eq) < 0)
                        return oom(c);
        }
        if (r < 0)
                return quote_error(c);
        if (in->n_pairs == 0)
                return instr_error(c, EINVAL, "needs %s",
                                   in->kind == CF_ARG ? "a NAME" : "NAME=VALUE");
        return 0;
}

static bool flag_in(const char *const *list, const char *name)
{
        for (; *list; list++)
                if (strcmp(*list, name) == 0)
                        return true;
        return false;
}

static int check_flag(struct ctx *c, const char *key, const char *value)
{
        enum cf_kind k = c->in->kind;
        const char *const *allowed = k == CF_FROM   ? from_flags
                                     : k == CF_COPY ? copy_flags
                                     : k == CF_ADD  ? add_flags
                                                    : no_flags;

        if (flag_in(buildkit_flags, key))
                return instr_error(c, ENOTSUP,
                                   "--%s is a BuildKit extension, which csandbox's builder does "
                                   "not support",
                                   key);
        if (!flag_in(allowed, key)) {
                char list[128] = "no flags";
                size_t n = 0;

                for (size_t i = 0; allowed[i]; i++)
                        n += (size_t)snprintf(list + n, sizeof(list) - n, "%s--%s", i ? ", " : "",
                                              allowed[i]);
                return instr_error(c, EINVAL, "has no flag --%.80s (%s takes %s)", key,
                                   kind_names[k], list);
        }
        if (cf_instr_flag(c->in, key))
                return instr_error(c, EINVAL, "has --%s twice", key);
        if (strcmp(key, "link") == 0) {
                if (value && strcmp(value, "true") != 0 && strcmp(value, "false") != 0)
                        return instr_error(c, EINVAL, "--link=%.40s: the value is true or false",
                                           value);
        } else if (!value || !*value) {
                return instr_error(c, EINVAL, "--%s needs a value: --%s=VALUE", key, key);
        }
        return 0;
}

/* The leading --name[=value] words; a lone "--" ends them. *pos ends after them. */
static int parse_flags(struct ctx *c, const char *s, size_t *pos)
{
        for (;;) {
                size_t p = *pos, a, b;
                char *key, *value = NULL, *eq;
                int r;

                while (cf_blank(s[p]))
                        p++;
                if (s[p] != '-' || s[p + 1] != '-')
                        return 0;
                r = cf_word_next(s, &p, c->cf->escape, &a, &b);
                if (r < 0)
                        return quote_error(c);
                *pos = p;
                if (b - a == 2)
                        return 0;
                key = strndup(s + a + 2, b - a - 2);
                if (!key)
                        return oom(c);
                eq = strchr(key, '=');
                if (eq)
                        *eq = '\0';
                r = check_flag(c, key, eq ? eq + 1 : NULL);
                if (r >= 0 && eq && !(value = strdup(eq + 1)))
                        r = oom(c);
                if (r < 0) {
                        free(key);
                        return r;
                }
                if (pair_push(&c->in->flags, &c->in->n_flags, key, value, eq) < 0)
                        return oom(c);
        }
}

static int expand_check(struct ctx *c, const char *word)
{
        char *out;

        if (!word)
                return 0;
        if (containerfile_expand(word, c->cf->escape, NULL, NULL, &out, c->err) < 0)
                return cs_error_wrap(c->err, "%s:%u: %s", c->file, c->in->line,
                                     kind_names[c->in->kind]);
        free(out);
        return 0;
}

/* Expand every word once with no variable set: reports a syntax error with the line. */
static int check_expandable(struct ctx *c)
{
        struct cf_instr *in = c->in;
        int r = 0;

        for (size_t i = 0; r >= 0 && i < in->argc; i++)
                r = expand_check(c, in->argv[i]);
        for (size_t i = 0; r >= 0 && i < in->n_flags; i++)
                r = expand_check(c, in->flags[i].value);
        for (size_t i = 0; r >= 0 && i < in->n_pairs; i++)
                if ((r = expand_check(c, in->pairs[i].key)) >= 0)
                        r = expand_check(c, in->pairs[i].value);
        return r;
}

static const struct {
        const char *word;
        int (*args)(struct ctx *c, const char *s);
} instructions[] = {
    [CF_FROM] = {"from", args_from},
    [CF_RUN] = {"run", args_command},
    [CF_CMD] = {"cmd", args_command},
    [CF_ENTRYPOINT] = {"entrypoint", args_command},
    [CF_SHELL] = {"shell", args_command},
    [CF_COPY] = {"copy", args_list},
    [CF_ADD] = {"add", args_list},
    [CF_ENV] = {"env", args_pairs},
    [CF_ARG] = {"arg", args_pairs},
    [CF_LABEL] = {"label", args_pairs},
    [CF_WORKDIR] = {"workdir", args_string},
    [CF_USER] = {"user", args_string},
    [CF_EXPOSE] = {"expose", args_list},
    [CF_VOLUME] = {"volume", args_list},
    [CF_STOPSIGNAL] = {"stopsignal", args_string},
    [CF_MAINTAINER] = {"maintainer", args_string},
};

/* The kind of keyword kw (n bytes, any case), or an error naming the line. */
static int keyword_kind(const char *kw, size_t n, const char *file, unsigned line,
                        enum cf_kind *ret, struct cs_error *err)
{
        for (size_t k = 0; k < N_KINDS; k++)
                if (strlen(instructions[k].word) == n &&
                    strncasecmp(kw, instructions[k].word, n) == 0) {
                        *ret = (enum cf_kind)k;
                        return 0;
                }
        if ((n == 7 && strncasecmp(kw, "onbuild", n) == 0) ||
            (n == 11 && strncasecmp(kw, "healthcheck", n) == 0))
                return cs_error_setx(err, ENOTSUP,
                                     "%s:%u: %s is not supported by csandbox's builder; remove "
                                     "it (a sandbox has no use for it)",
                                     file, line, n == 7 ? "ONBUILD" : "HEALTHCHECK");
        return cs_error_setx(err, EINVAL,
                             "%s:%u: unknown instruction `%.*s`; the instructions are FROM, RUN, "
                             "CMD, ENTRYPOINT, SHELL, COPY, ADD, ENV, ARG, LABEL, WORKDIR, USER, "
                             "EXPOSE, VOLUME, STOPSIGNAL and MAINTAINER",
                             file, line, (int)(n > 40 ? 40 : n), kw);
}

int cf_instr_add(struct containerfile *cf, const char *text, unsigned line, const char *file,
                 struct cs_error *err)
{
        struct cf_instr in = {.line = line};
        struct ctx c = {.in = &in, .cf = cf, .file = file, .err = err};
        size_t kw, kw_end, rest, end, pos = 0;
        struct cf_instr *grown;
        int r;

        if (cf->n >= CONTAINERFILE_MAX_INSTRS)
                return cs_error_setx(err, E2BIG, "%s:%u: more than %d instructions; refused", file,
                                     line, CONTAINERFILE_MAX_INSTRS);
        for (kw = 0; cf_blank(text[kw]); kw++)
                ;
        for (kw_end = kw; text[kw_end] && !cf_blank(text[kw_end]); kw_end++)
                ;
        for (rest = kw_end; cf_blank(text[rest]); rest++)
                ;
        for (end = rest + strlen(text + rest); end > rest && cf_blank(text[end - 1]); end--)
                ;
        r = keyword_kind(text + kw, kw_end - kw, file, line, &in.kind, err);
        if (r < 0)
                return r;
        in.original = strndup(text + rest, end - rest);
        if (!in.original)
                return oom(&c);
        r = parse_flags(&c, in.original, &pos);
        while (r >= 0 && cf_blank(in.original[pos]))
                pos++;
        if (r >= 0)
                r = instructions[in.kind].args(&c, in.original + pos);
        if (r >= 0 && !in.argv && !(in.argv = calloc(1, sizeof(char *))))
                r = oom(&c);
        if (r >= 0 && cf_kind_expands(in.kind))
                r = check_expandable(&c);
        if (r >= 0 && !(grown = realloc(cf->instrs, (cf->n + 1) * sizeof(*grown))))
                r = oom(&c);
        if (r < 0) {
                cf_instr_free(&in);
                return r;
        }
        cf->instrs = grown;
        cf->instrs[cf->n++] = in;
        return 0;
}
