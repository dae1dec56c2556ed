/* The trust judge's readers: .claude.json read one way or refused, a git config judged inert
 * or not by its keys. And the git csandbox runs: nothing that a repository's config names
 * is executed. */
#include "common/error.h"
#include "policy/claude_json.h"
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

/* The host takes from a session's .claude.json only what claude keeps as its own state; a
 * key that changes what the host runs, where it sends data, or a prompt it shows is not. */
static void test_claude_json_state_keys(void)
{
        static const struct {
                bool project;
                const char *name;
                bool state;
        } keys[] = {
            {false, "numStartups", true},
            {false, "tipsHistory", true},
            {false, "userID", true},
            {false, "firstStartTime", true},
            {false, "migrationVersion", true},
            {false, "cachedStatsigGates", true},
            {false, "cachedGrowthBookFeatures", true},
            {false, "pluginUsage", true},
            {false, "hasCompletedOnboarding", true},
            {false, "theme", true},
            {false, "env", false},
            {false, "apiKeyHelper", false},
            {false, "primaryApiKey", false},
            {false, "customApiKeyResponses", false},
            {false, "oauthAccount", false},
            {false, "mcpServers", false},
            {false, "allowedTools", false},
            {false, "installMethod", false},
            {false, "autoUpdates", false},
            {false, "autoConnectIde", false},
            {false, "autoUploadSessions", false},
            {false, "bypassPermissionsModeAccepted", false},
            {false, "hasAcknowledgedCostThreshold", false},
            {false, "metricsStatusCache", false},
            {false, "groveConfigCache", false},
            {false, "projects", false},
            {false, "lastSessionId", false},
            {false, "hasTrustDialogAccepted", false},
            {false, "someKeyClaudeAddsTomorrow", false},
            {false, "", false},
            {true, "lastSessionId", true},
            {true, "lastCost", true},
            {true, "history", true},
            {true, "exampleFiles", true},
            {true, "hasTrustDialogAccepted", true},
            {true, "hasClaudeMdExternalIncludesWarningShown", true},
            {true, "hasClaudeMdExternalIncludesApproved", false},
            {true, "mcpServers", false},
            {true, "mcpContextUris", false},
            {true, "enabledMcpjsonServers", false},
            {true, "disabledMcpjsonServers", false},
            {true, "allowedTools", false},
            {true, "env", false},
            {true, "numStartups", false},
            {true, "someKeyClaudeAddsTomorrow", false},
        };

        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
                CHECKF(claude_json_state_key(keys[i].project, keys[i].name) == keys[i].state,
                       "%s %s: %d", keys[i].project ? "project" : "user", keys[i].name,
                       keys[i].state);
        PASS();
}

/* The write-back: host, session -> the host's new file and the changes reported; then the
 * accept of them brings the session's values in. */
static void test_claude_json_writeback_and_accept(void)
{
        static const struct {
                const char *host, *session, *out, *changes, *accepted;
        } cases[] = {
            /* State goes back, silently; a state key the session dropped is dropped. */
            {"{\"numStartups\":1,\"tipsHistory\":{\"a\":1}}",
             "{\"numStartups\":2,\"userID\":\"u\",\"projects\":{\"/p\":{\"lastSessionId\":\"s\","
             "\"hasTrustDialogAccepted\":true}}}",
             "{\"numStartups\":2,\"projects\":{\"/p\":{\"lastSessionId\":\"s\","
             "\"hasTrustDialogAccepted\":true}},\"userID\":\"u\"}",
             "", NULL},
            /* Every other key keeps the host's value; each change is one item. */
            {"{\"env\":{\"A\":\"1\"},\"numStartups\":1,\"theme\":\"dark\",\"diffTool\":\"x\"}",
             "{\"env\":{\"PATH\":\"/evil\"},\"apiKeyHelper\":\"/evil\",\"numStartups\":2,"
             "\"zz\":1,\"projects\":{\"/p\":{\"lastCost\":1,\"yy\":true}}}",
             "{\"env\":{\"A\":\"1\"},\"numStartups\":2,\"diffTool\":\"x\",\"projects\":{\"/"
             "p\":{\"lastCost\":1}}}",
             "claude setting (user) in F\tenv\t{\"PATH\":\"/evil\"}|"
             "claude setting (user) in F\tapiKeyHelper\t\"/evil\"|"
             "claude setting (user) in F\tzz\t1|"
             "claude setting (/p) in F\tyy\ttrue|",
             "{\"env\":{\"PATH\":\"/evil\"},\"numStartups\":2,\"diffTool\":\"x\","
             "\"projects\":{\"/p\":{\"lastCost\":1,\"yy\":true}},\"apiKeyHelper\":\"/evil\","
             "\"zz\":1}"},
            /* claude's defaults written out are no change; MCP servers are listed elsewhere
             * but still held back. */
            {"{}",
             "{\"env\":{},\"projects\":{\"/p\":{\"allowedTools\":[],\"mcpServers\":{\"x\":{}},"
             "\"hasClaudeMdExternalIncludesApproved\":false}}}",
             "{\"projects\":{}}", "", NULL},
            /* A prompt the session answered for the host is a change. */
            {"{\"projects\":{\"/p\":{\"history\":[]}}}",
             "{\"projects\":{\"/p\":{\"history\":[1],\"hasClaudeMdExternalIncludesApproved\":"
             "true}}}",
             "{\"projects\":{\"/p\":{\"history\":[1]}}}",
             "claude setting (/p) in F\thasClaudeMdExternalIncludesApproved\ttrue|", NULL},
            /* projects that is not a map of projects is one value. */
            {"{\"projects\":{\"/p\":{\"lastCost\":1}}}", "{\"projects\":[1]}",
             "{\"projects\":{\"/p\":{\"lastCost\":1}}}",
             "claude setting (user) in F\tprojects\t[1]|", NULL},
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                cJSON *host = cJSON_Parse(cases[i].host), *session = cJSON_Parse(cases[i].session);
                cJSON *want = cJSON_Parse(cases[i].out), *out;
                struct plan_trust t = {0};
                char got[4096] = "", *text;

                CHECK(host && session && want);
                out = claude_json_writeback(host, session, &t, "F");
                CHECK(out != NULL);
                text = cJSON_PrintUnformatted(out);
                CHECKF(cJSON_Compare(out, want, true), "case %zu: %s", i, text);
                free(text);
                for (size_t k = 0; k < t.n; k++)
                        snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s|", t.items[k]);
                CHECKF(strcmp(got, cases[i].changes) == 0, "case %zu: %s", i, got);
                if (cases[i].accepted) {
                        cJSON *acc = cJSON_Parse(cases[i].accepted);

                        CHECK(acc && claude_json_accept(out, host, session) == 0);
                        text = cJSON_PrintUnformatted(out);
                        CHECKF(cJSON_Compare(out, acc, true), "case %zu accepted: %s", i, text);
                        free(text);
                        cJSON_Delete(acc);
                }
                trust_free(&t);
                cJSON_Delete(host);
                cJSON_Delete(session);
                cJSON_Delete(want);
                cJSON_Delete(out);
        }
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
            ("[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n"
             "\tlogallrefupdates = true\n[remote \"origin\"]\n\turl = https://x/y\n"
             "\tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"main\"]\n"
             "\tremote = origin\n\tmerge = refs/heads/main\n"),
            ("# comment\n; other\n[core]\nbare = false\n[submodule \"a\"]\n"
             "\turl = ./a\n\tactive = true\n"),
            "[core.hooksPath]\n", /* a section with no key in it */
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
            {"[core.hooksPath]\nx\n", "core.<name>.x"},
            {"[core]\n\tworktree = ../../lib\n", "core.worktree"},
            {"[core]\nbare = false \\\nfsmonitor = x\n", NULL}, /* one value */
            {"[core]\nbare = \"x\n", NULL},                     /* git refuses it */
            {"\xef\xbb\xbf[core]\nfsmonitor = x\n", "core.fsmonitor"},
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

/* Every key that runs a program or sends git's reads or writes elsewhere is off the inert
 * list, however it is spelled; what git init, clone and worktree add write is on it. */
static void test_git_keys_that_run_or_redirect_are_not_inert(void)
{
        static const char *const armed[] = {
            "core.worktree",
            "core.hookspath",
            "core.gitproxy",
            "core.sshcommand",
            "core.fsmonitor",
            "core.editor",
            "core.pager",
            "core.askpass",
            "core.attributesfile",
            "core.excludesfile",
            "core.alternaterefscommand",
            "core.sharedrepository",
            "core.notesref",
            "include.path",
            "includeif.gitdir:/.path",
            "includeif.hasconfig:remote.*.url:x.path",
            "extensions.partialclone",
            "extensions.refstorage",
            "extensions.unknown",
            "gc.reflogexpire",
            "gc.x.reflogexpire",
            "credential.helper",
            "credential.https://x.helper",
            "diff.external",
            "diff.x.textconv",
            "diff.x.command",
            "merge.x.driver",
            "filter.x.clean",
            "filter.x.smudge",
            "filter.x.process",
            "remote.o.uploadpack",
            "remote.o.receivepack",
            "remote.o.proxy",
            "remote.o.vcs",
            "remote.o.promisor",
            "remote.o.partialclonefilter",
            "protocol.allow",
            "protocol.ext.allow",
            "url.ext::sh.insteadof",
            "url.x.pushinsteadof",
            "submodule.a.update",
            "uploadpack.packobjectshook",
            "sequence.editor",
            "alias.st",
            "pager.log",
            "http.proxy",
            "http.sslcainfo",
            "ssh.variant",
            "gpg.program",
            "gpg.ssh.program",
            "commit.gpgsign",
            "tag.gpgsign",
            "receive.procreceiverefs",
            "difftool.x.cmd",
            "mergetool.x.cmd",
            "web.browser",
            "browser.x.cmd",
            "sendemail.smtpserver",
            "instaweb.httpd",
            "interactive.difffilter",
            "status.x",
            "core",
            "key-without-section",
            "remote.o.url.x",

            "advice.x.y",
            "extensions.worktreeconfig.x",
            ".core.fsmonitor",
            "core.",
            "user.x.name",
            "init.templatedir",
            "fetch.fsck.x",
            "transfer.fsckobjects",
            "fsmonitor.x",
            "feature.manyfiles",
            "index.threads",
            "pack.threads",
            "safe.directory",
            "safe.barerepository",
            "worktree.x",
            "maintenance.strategy",
            "rerere.x",
            "branch.autosetuprebase",
            "blame.ignorerevsfile",
            "log.x",
            "notes.displayref",
        };
        static const char *const inert[] = {
            "core.repositoryformatversion",
            "core.filemode",
            "core.bare",
            "core.logallrefupdates",
            "core.ignorecase",
            "core.precomposeunicode",
            "core.symlinks",
            "remote.origin.url",
            "remote.origin.fetch",
            "remote.my.odd.name.url",
            "branch.main.remote",
            "branch.main.merge",
            "submodule.lib.url",
            "submodule.lib.active",
            "extensions.objectformat",
            "extensions.worktreeconfig",
            "color.ui",
            "color.diff.meta",
            "advice.detachedhead",
            "user.name",
            "user.email",
            "init.defaultbranch",
            "gc.auto",
        };

        for (size_t i = 0; i < sizeof(armed) / sizeof(armed[0]); i++)
                CHECKF(!trust_git_key_inert(armed[i]), "inert: %s", armed[i]);
        for (size_t i = 0; i < sizeof(inert) / sizeof(inert[0]); i++)
                CHECKF(trust_git_key_inert(inert[i]), "not inert: %s", inert[i]);
        PASS();
}

int main(void)
{
        test_git_keys_that_run_or_redirect_are_not_inert();
        test_claude_json_read_one_way_or_refused();
        test_claude_json_state_keys();
        test_claude_json_writeback_and_accept();
        test_git_config_inert_or_not();
        test_worktree_git_runs_nothing_the_repository_config_names();
        test_trust_items_keep_their_fields_whatever_the_names();
        return failures ? 1 : 0;
}
