/* The git index reader of the trust report: gitlinks found in every index version git
 * writes, and a hostile index (truncated anywhere, lying lengths) read without a fault.
 * And the git csandbox runs: nothing that a repository's config names is executed. */
#include "common/error.h"
#include "policy/plan_report.h"
#include "policy/trust.h"
#include "policy/trust_rules.h"
#include "policy/worktree.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"

struct buf {
        unsigned char b[4096];
        size_t n;
        char prev[256];
};

static void put32(struct buf *b, uint32_t v)
{
        b->b[b->n++] = (unsigned char)(v >> 24);
        b->b[b->n++] = (unsigned char)(v >> 16);
        b->b[b->n++] = (unsigned char)(v >> 8);
        b->b[b->n++] = (unsigned char)v;
}

static void header(struct buf *b, uint32_t version, uint32_t count)
{
        memset(b, 0, sizeof(*b));
        memcpy(b->b, "DIRC", 4);
        b->n = 4;
        put32(b, version);
        put32(b, count);
}

/* One entry as git writes it: 40 bytes of stat data with the mode at 24, the hash, the
 * flags with the name length, the name (v4: prefix-compressed against the previous one). */
static void entry(struct buf *b, uint32_t version, size_t hash_len, uint32_t mode, const char *name)
{
        size_t start = b->n, len = strlen(name);

        memset(b->b + b->n, 0, 40 + hash_len);
        b->n += 24;
        put32(b, mode);
        b->n += 12 + hash_len;
        b->b[b->n++] = (unsigned char)(len >> 8);
        b->b[b->n++] = (unsigned char)len;
        if (version == 4) {
                size_t common = 0, strip;

                while (b->prev[common] && b->prev[common] == name[common])
                        common++;
                strip = strlen(b->prev) - common;
                b->b[b->n++] = (unsigned char)strip; /* < 128: one varint byte */
                memcpy(b->b + b->n, name + common, len - common + 1);
                b->n += len - common + 1;
                snprintf(b->prev, sizeof(b->prev), "%s", name);
                return;
        }
        memcpy(b->b + b->n, name, len);
        b->n += len;
        b->n = start + ((b->n - start + 8) & ~(size_t)7);
}

static bool links_are(const char *got, size_t len, const char *const *want, size_t n)
{
        size_t o = 0;

        for (size_t i = 0; i < n; i++) {
                if (o >= len || strcmp(got + o, want[i]) != 0)
                        return fail("link %zu: %s, wanted %s", i, o < len ? got + o : "(end)",
                                    want[i]);
                o += strlen(got + o) + 1;
        }
        return o == len || fail("more links than wanted");
}

static void test_index_gitlinks_in_every_version_and_hash(void)
{
        static const char *const want[] = {"lib/sub", "src"};

        for (uint32_t version = 2; version <= 4; version++)
                for (size_t hash = 20; hash <= 32; hash += 12) {
                        struct buf b;
                        char *links = NULL;
                        size_t len = 0;

                        header(&b, version, 4);
                        entry(&b, version, hash, 0100644, "README");
                        entry(&b, version, hash, 0160000, "lib/sub");
                        entry(&b, version, hash, 0100755, "lib/subdir-tool");
                        entry(&b, version, hash, 0160000, "src");
                        CHECKF(trust_index_gitlinks((char *)b.b, b.n, &links, &len) == 0,
                               "version %u hash %zu", version, hash);
                        CHECKF(links_are(links, len, want, 2), "version %u hash %zu: %s", version,
                               hash, why);
                        free(links);
                }
        PASS();
}

static void test_index_truncated_or_lying_is_refused_without_a_fault(void)
{
        struct buf b;
        char *links = NULL;
        size_t len = 0;

        for (uint32_t version = 2; version <= 4; version++) {
                header(&b, version, 2);
                entry(&b, version, 20, 0160000, "a/b/c");
                entry(&b, version, 20, 0160000, "a/b/d");
                for (size_t cut = 0; cut < b.n; cut++) {
                        char *copy = malloc(cut ? cut : 1);

                        memcpy(copy, b.b, cut);
                        CHECKF(trust_index_gitlinks(copy, cut, &links, &len) == -EINVAL,
                               "version %u cut at %zu", version, cut);
                        free(copy);
                }
        }
        /* A name length that is not the name's. */
        header(&b, 2, 1);
        entry(&b, 2, 20, 0160000, "src");
        b.b[12 + 61] = 7;
        CHECK(trust_index_gitlinks((char *)b.b, b.n, &links, &len) == -EINVAL);
        /* A v4 prefix strip longer than the previous name. */
        header(&b, 4, 1);
        entry(&b, 4, 20, 0160000, "src");
        b.b[12 + 62] = 9;
        CHECK(trust_index_gitlinks((char *)b.b, b.n, &links, &len) == -EINVAL);
        /* Bytes flipped anywhere (a fixed seed): an answer or -EINVAL, never a fault. */
        srand(7);
        for (uint32_t version = 2; version <= 4; version++) {
                header(&b, version, 3);
                entry(&b, version, 20, 0160000, "lib/a");
                entry(&b, version, 20, 0100644, "lib/ab");
                entry(&b, version, 20, 0160000, "x");
                for (int k = 0; k < 3000; k++) {
                        unsigned char *copy = malloc(b.n);
                        int r;

                        memcpy(copy, b.b, b.n);
                        for (int f = 0; f < 1 + k % 3; f++)
                                copy[(size_t)rand() % b.n] = (unsigned char)rand();
                        links = NULL;
                        r = trust_index_gitlinks((char *)copy, b.n, &links, &len);
                        CHECKF(r == 0 || r == -EINVAL, "version %u try %d: %d", version, k, r);
                        free(links);
                        free(copy);
                }
        }
        /* An entry count the file cannot hold. */
        header(&b, 2, 0xffffffffu);
        CHECK(trust_index_gitlinks((char *)b.b, b.n, &links, &len) == -EINVAL);
        PASS();
}

/* Each plant writes its own marker; git run the way csandbox runs it must start none of
 * them, even for commands that would (status reads the index, commit runs hooks, fetch
 * starts a transport). Filters, textconv and external diffs are not switched off by name:
 * csandbox runs no command that reads file content (see worktree_git). */
static void test_worktree_git_runs_nothing_the_repository_config_names(void)
{
        char dir[] = "/tmp/test-trust-XXXXXX", cmd[4 * PATH_MAX], path[PATH_MAX + 16];
        char *status[] = {"status", NULL};
        char *commit[] = {
            "-c", "user.name=a", "-c", "user.email=b", "commit", "-q", "--allow-empty",
            "-m", "x",           NULL};
        char *fetch_ssh[] = {"fetch", "ssh://example.invalid/x", NULL};
        char ext[PATH_MAX + 32];
        char *fetch_ext[] = {"fetch", ext, NULL};
        char **const runs[] = {status, commit, fetch_ssh, fetch_ext, NULL};
        struct cs_error err = {0};

        CHECK(mkdtemp(dir));
        snprintf(cmd, sizeof(cmd),
                 "set -e; cd %s; export GIT_CONFIG_NOSYSTEM=1 HOME=%s; git init -q r; cd r; "
                 "git config core.fsmonitor 'touch %s/fsmonitor'; "
                 "git config core.sshCommand 'touch %s/ssh'; "
                 "git config protocol.ext.allow always; "
                 "git config core.hooksPath %s/hooks; mkdir %s/hooks; "
                 "printf '#!/bin/sh\ntouch %s/hook\n' > %s/hooks/pre-commit; "
                 "chmod +x %s/hooks/pre-commit; echo x > f",
                 dir, dir, dir, dir, dir, dir, dir, dir, dir);
        CHECK(system(cmd) == 0);
        snprintf(path, sizeof(path), "%s/r", dir);
        snprintf(ext, sizeof(ext), "ext::touch %s/ext", dir);
        setenv("HOME", dir, 1);
        setenv("GIT_CONFIG_NOSYSTEM", "1", 1);
        for (size_t i = 0; runs[i]; i++) {
                char *out = NULL;

                CHECK(worktree_git(path, runs[i], false, &out, NULL, &err) == 0);
                free(out);
        }
        snprintf(cmd, sizeof(cmd), "ls %s | grep -qvx -e r -e hooks", dir);
        CHECKF(system(cmd) != 0, "a marker appeared in %s", dir);
        /* The plants are live: plain git runs them. */
        snprintf(cmd, sizeof(cmd),
                 "cd %s/r && git status >/dev/null 2>&1; "
                 "git -c user.name=a -c user.email=b commit -q --allow-empty -m x >/dev/null 2>&1; "
                 "git fetch '%s' >/dev/null 2>&1; "
                 "git fetch ssh://example.invalid/x >/dev/null 2>&1; "
                 "test -e %s/fsmonitor -a -e %s/hook -a -e %s/ssh -a -e %s/ext",
                 dir, ext, dir, dir, dir, dir);
        CHECKF(system(cmd) == 0, "the plants did not run in %s", dir);
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        CHECK(system(cmd) == 0);
        PASS();
}

/* Found by tests/fuzz/fuzz_claude_json: a tab in a server or project name (from the
 * session-writable .claude.json) shifted the "kind\tname\tvalue" fields the report shows. */
static void test_trust_items_keep_their_fields_whatever_the_names(void)
{
        const char json[] = "{\"mcpServers\": {\"a\\tb\": {\"command\": \"x\"}}, "
                            "\"projects\": {\"/p\\t/q\": {\"mcpServers\": {\"s\": {}}}}}";
        struct plan_trust t = {0};
        char *reason = NULL;

        CHECK(plan_trust_claude_json(&t, json, sizeof(json) - 1, &reason) == 0);
        CHECK(t.n == 2);
        CHECKF(strcmp(t.items[0], "MCP server (user)\ta?b\t{\"command\":\"x\"}") == 0, "%s",
               t.items[0]);
        CHECKF(strcmp(t.items[1], "MCP server (/p?/q)\ts\t{}") == 0, "%s", t.items[1]);
        trust_free(&t);
        PASS();
}

/* What cJSON and JSON.parse would read differently is refused whole, never half-read. */
static void test_claude_json_read_one_way_or_refused(void)
{
        static const char *const refused[] = {
            "{\"mcpServers\": {}, \"mcpServers\": {\"evil\": {\"command\": \"x\"}}}",
            "{\"projects\": {\"/p\": {\"a\": 1, \"a\": 2}}}",
            "{\"mcpServers\\u0000x\": {}}",
            "{\"a\": 1} {\"mcpServers\": {}}",
            "[1]",
            "{\"a\": 1",
        };
        struct plan_trust t = {0};
        char *reason = NULL, *deep;
        size_t n = 1100, len;

        for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
                CHECKF(plan_trust_claude_json(&t, refused[i], strlen(refused[i]), &reason) ==
                           -EINVAL,
                       "accepted: %s", refused[i]);
                CHECK(reason != NULL);
                free(reason);
                trust_free(&t);
        }
        /* Nesting deeper than cJSON's limit, anywhere in the file. */
        deep = malloc(2 * n + 64);
        CHECK(deep != NULL);
        len = (size_t)sprintf(deep, "{\"x\": ");
        for (size_t i = 0; i < n; i++)
                deep[len++] = '[';
        for (size_t i = 0; i < n; i++)
                deep[len++] = ']';
        len += (size_t)sprintf(deep + len, ", \"mcpServers\": {\"s\": {}}}");
        CHECK(plan_trust_claude_json(&t, deep, len, &reason) == -EINVAL);
        free(reason);
        trust_free(&t);
        free(deep);
        PASS();
}

static void test_git_config_inert_or_not(void)
{
        static const char *const inert[] = {
            "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n"
            "\tlogallrefupdates = true\n[remote \"origin\"]\n\turl = https://x/y\n"
            "\tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"main\"]\n"
            "\tremote = origin\n\tmerge = refs/heads/main\n",
            "# comment\n; other\n[core]\nworktree = ../../lib\n[submodule \"a\"]\n"
            "\turl = ./a\n\tactive = true\n",
            "",
        };
        static const char *const armed[][2] = {
            {"[core]\n\tfsmonitor = touch /tmp/x\n", "core.fsmonitor"},
            {"[CORE]\n\tFsMonitor = x\n", "core.fsmonitor"},
            {"[core] pager = evil\n", "core.pager"},
            {"[include]\n\tpath = /tmp/x\n", "include.path"},
            {"[includeIf \"gitdir:/\"]\n\tpath = x\n", "includeif.<name>.path"},
            {"[diff \"x\"]\n\ttextconv = evil\n", "diff.<name>.textconv"},
            {"[submodule \"a\"]\n\tupdate = !evil\n", "submodule.<name>.update"},
            {"[core.hooksPath]\n", NULL},
            {"[remote \"o\"]\n\turl = x\n\tuploadpack = evil\n", "remote.<name>.uploadpack"},
            {"key = x\n", NULL},
            {"[core\n", NULL},
        };
        char *reason = NULL;

        for (size_t i = 0; i < sizeof(inert) / sizeof(inert[0]); i++) {
                CHECKF(trust_git_config_inert(inert[i], strlen(inert[i]), &reason),
                       "armed: %s (%s)", inert[i], reason ? reason : "");
                free(reason);
        }
        for (size_t i = 0; i < sizeof(armed) / sizeof(armed[0]); i++) {
                bool ok = trust_git_config_inert(armed[i][0], strlen(armed[i][0]), &reason);

                CHECKF(!ok || !armed[i][1], "inert: %s", armed[i][0]);
                if (armed[i][1])
                        CHECKF(reason && strcmp(reason, armed[i][1]) == 0, "%s: %s", armed[i][0],
                               reason ? reason : "(null)");
                free(reason);
        }
        PASS();
}

int main(void)
{
        test_claude_json_read_one_way_or_refused();
        test_git_config_inert_or_not();
        test_index_gitlinks_in_every_version_and_hash();
        test_index_truncated_or_lying_is_refused_without_a_fault();
        test_worktree_git_runs_nothing_the_repository_config_names();
        test_trust_items_keep_their_fields_whatever_the_names();
        return failures ? 1 : 0;
}
