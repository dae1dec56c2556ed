/* The judge's reading of git configs, for the differential test against git itself
 * (tests/unit/git_config_oracle.py): for each FILE, FILE.judge gets the keys as
 * `git config --file FILE --list -z` prints them (key, then a newline and the value when
 * there is one, then a NUL), and FILE.verdict "parsed" or "refused" on the first line and
 * "inert" or the judge's reason on the second. */
#include "common/strbuf.h"
#include "policy/trust_rules.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int add_key(const char *key, const char *value, void *ctx)
{
        struct strbuf *out = ctx;

        sb_puts(out, key);
        if (value) {
                sb_putc(out, '\n');
                sb_puts(out, value);
        }
        sb_putc(out, '\0');
        return 0;
}

static int write_file(const char *base, const char *suffix, const char *data, size_t len)
{
        char path[4096];
        FILE *f;

        snprintf(path, sizeof(path), "%s%s", base, suffix);
        f = fopen(path, "wb");
        if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
                fprintf(stderr, "git_config_dump: cannot write %s\n", path);
                return -1;
        }
        return 0;
}

static int dump(const char *path)
{
        struct strbuf text = {0}, out = {0}, verdict = {0};
        char buf[65536], *why = NULL;
        size_t n, line;
        FILE *f = fopen(path, "rb");
        int parsed, r;

        if (!f) {
                fprintf(stderr, "git_config_dump: cannot read %s\n", path);
                return -1;
        }
        while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
                sb_add(&text, buf, n);
        fclose(f);
        sb_add(&text, "", 0);
        sb_add(&out, "", 0);
        parsed = trust_git_config_parse(text.s, text.len, add_key, &out, &line);
        sb_puts(&verdict, parsed == 0 ? "parsed\n" : "refused\n");
        sb_puts(&verdict, trust_git_config_inert(text.s, text.len, &why) ? "inert" : why);
        sb_putc(&verdict, '\n');
        r = text.oom || out.oom || verdict.oom || write_file(path, ".judge", out.s, out.len) < 0 ||
                    write_file(path, ".verdict", verdict.s, verdict.len) < 0
                ? -1
                : 0;
        free(why);
        free(text.s);
        free(out.s);
        free(verdict.s);
        return r;
}

int main(int argc, char **argv)
{
        for (int i = 1; i < argc; i++)
                if (dump(argv[i]) < 0)
                        return 1;
        return 0;
}
