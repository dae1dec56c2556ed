/* plan_build without namespaces: a profile, a git work tree and claude's args turned into a
 * spec, asserted on its JSON (what `csandbox plan` prints) and on what it wrote on the host. */
#include "common/cleanup.h"
#include "common/error.h"
#include "policy/plan.h"

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "check.h"

static char base[] = "/tmp/test-plan-XXXXXX";

static const char *at(const char *rel)
{
        static char buf[4][PATH_MAX];
        static int i;

        i = (i + 1) % 4;
        snprintf(buf[i], sizeof(buf[i]), "%s/%s", base, rel);
        return buf[i];
}

static void put(const char *path, const char *text)
{
        FILE *f = fopen(path, "w");

        if (f) {
                fputs(text, f);
                fclose(f);
        }
}

static const cJSON *mount_at(const cJSON *plan, const char *dest)
{
        const cJSON *m, *found = NULL;

        cJSON_ArrayForEach(m, cJSON_GetObjectItem(plan, "mounts"))
        {
                if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(m, "dest")), dest) == 0)
                        found = m;
        }
        return found;
}

static const char *env_of(const cJSON *plan, const char *name)
{
        const cJSON *e;

        cJSON_ArrayForEach(e, cJSON_GetObjectItem(plan, "env"))
        {
                if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(e, "name")), name) == 0)
                        return cJSON_GetStringValue(cJSON_GetObjectItem(e, "value"));
        }
        return NULL;
}

static const char *kind_of(const cJSON *m)
{
        return m ? cJSON_GetStringValue(cJSON_GetObjectItem(m, "kind")) : "none";
}

static void test_plan_of_a_profile_in_a_git_work_tree(void)
{
        struct profile_config c = {0};
        struct plan_request req = {0};
        struct plan p;
        struct cs_error err = {0};
        char *args[] = {"-p", "hi"};
        char cmd[PATH_MAX * 2], hooks[PATH_MAX], cfg[PATH_MAX];
        cJSON *j, *argv;
        const cJSON *m;
        struct stat st;

        mkdir(at("home"), 0700);
        mkdir(at("home/.claude-profiles"), 0700);
        mkdir(at("home/.claude-profiles/work"), 0700);
        close(
            open(at("home/.claude-profiles/work/.sandbox"), O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
        put(at("home/.claude-profiles/work/settings.json"),
            "{\"permissions\": {\"deny\": [\"Bash(sudo x)\", \"WebFetch\"]}}");
        mkdir(at("data"), 0700);
        mkdir(at("bin"), 0700);
        put(at("bin/claude"), "#!/bin/sh\n");
        chmod(at("bin/claude"), 0755);
        mkdir(at("src"), 0700);
        snprintf(cmd, sizeof(cmd), "git init -q %s", at("src"));
        CHECK(system(cmd) == 0);
        setenv("HOME", at("home"), 1);
        setenv("XDG_DATA_HOME", at("data"), 1);
        setenv("CLAUDE_PROFILE_CLAUDE_BIN", at("bin/claude"), 1);
        unsetenv("CLAUDE_PROFILE_PROFILES_BASE");
        unsetenv("CLAUDE_PROFILE_SANDBOX_IMAGE");
        unsetenv("CLAUDE_PROFILE_SANDBOX_FORWARD_ENV");
        CHECKF(profile_config_load(&c, &err) == 0, "%s", err.msg);
        req.config = &c;
        req.name = "work";
        req.cwd = at("src");
        req.args = args;
        req.n_args = 2;
        req.pending = PLAN_PENDING_SHOW;
        CHECKF(plan_build(&req, &p, &err) == 0, "%s", err.msg);
        CHECKF(spec_validate(&p.spec, &err) == 0, "%s", err.msg);
        j = spec_to_json(&p.spec);
        CHECK(j);

        /* claude: the host's file, read-only, by its absolute path; the session flags first. */
        m = mount_at(j, PLAN_CLAUDE);
        CHECK(m && strcmp(kind_of(m), "bind") == 0 &&
              cJSON_IsTrue(cJSON_GetObjectItem(m, "readonly")));
        CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(m, "source")), at("bin/claude")) ==
              0);
        argv = cJSON_GetObjectItem(j, "argv");
        CHECK(strcmp(cJSON_GetArrayItem(argv, 0)->valuestring, PLAN_CLAUDE) == 0);
        CHECK(strcmp(cJSON_GetArrayItem(argv, cJSON_GetArraySize(argv) - 1)->valuestring, "hi") ==
              0);
        /* The profile read-write at ~/.claude, the environment claude-profile gives. */
        m = mount_at(j, PLAN_CONFIG);
        CHECK(m && !cJSON_IsTrue(cJSON_GetObjectItem(m, "readonly")));
        CHECK(env_of(j, "HOME") && strcmp(env_of(j, "HOME"), PLAN_HOME) == 0);
        CHECK(env_of(j, "CLAUDE_CONFIG_DIR") &&
              strcmp(env_of(j, "CLAUDE_CONFIG_DIR"), PLAN_CONFIG) == 0);
        CHECK(env_of(j, "DISABLE_AUTOUPDATER") &&
              strcmp(env_of(j, "DISABLE_AUTOUPDATER"), "1") == 0);
        /* The work tree read-write at its path; .git/config read-only; the hooks a copy. */
        m = mount_at(j, at("src"));
        CHECK(m && strcmp(kind_of(m), "bind") == 0 &&
              !cJSON_IsTrue(cJSON_GetObjectItem(m, "readonly")));
        snprintf(cfg, sizeof(cfg), "%s/.git/config", at("src"));
        m = mount_at(j, cfg);
        CHECK(m && cJSON_IsTrue(cJSON_GetObjectItem(m, "readonly")));
        snprintf(hooks, sizeof(hooks), "%s/.git/hooks", at("src"));
        CHECKF(strcmp(kind_of(mount_at(j, hooks)), "copy") == 0, "hooks: %s",
               kind_of(mount_at(j, hooks)));
        /* The settings copy from the state dir (claude may write it; the profile's own stays
         * as it is); nothing written there for hooks. */
        m = mount_at(j, PLAN_CONFIG "/settings.json");
        CHECK(m && strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(m, "source")),
                          at("data/claude-profile/profiles/work/settings.json")) == 0);
        {
                char text[512] = {0};
                FILE *f = fopen(at("data/claude-profile/profiles/work/settings.json"), "r");

                CHECK(f && fread(text, 1, sizeof(text) - 1, f) > 0);
                fclose(f);
                CHECKF(!strstr(text, "sudo") && strstr(text, "WebFetch"), "%s", text);
        }
        CHECK(stat(at("data/claude-profile/profiles/work/git-hooks"), &st) < 0);
        CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(j, "net")), "pasta") == 0);
        /* On the host's root the planner decides no package broker: no range is mapped for
         * one, no rules are written, and the plan has nothing to warn of. */
        CHECK(cJSON_IsFalse(cJSON_GetObjectItem(j, "package_broker")));
        CHECK(!cJSON_GetObjectItem(j, "broker"));
        CHECK(cJSON_IsFalse(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "ids"), "map_range")));
        CHECK(p.spec.broker_caps == 0 && p.spec.n_broker_managers == 0);
        CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(j, "warnings")) == 0);
        cJSON_Delete(j);
        plan_free(&p);
        profile_config_free(&c);
        PASS();
}

/* A run plans csandbox's engine from the binaries beside csandbox (policy/containers.c):
 * this test stands where csandbox would, so they are linked beside it for its run. */
static const char *const engine[] = {"csandbox", "csandbox-import", "csandbox-podman"};
static char linked[3][8192];

static void engine_beside(bool make)
{
        char self[4096];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        char *slash;

        if (n <= 0)
                return;
        self[n] = '\0';
        slash = strrchr(self, '/');
        if (!slash)
                return;
        *slash = '\0';
        for (size_t i = 0; i < 3; i++) {
                char target[8192];

                if (!make) {
                        if (linked[i][0])
                                unlink(linked[i]);
                        continue;
                }
                snprintf(linked[i], sizeof(linked[i]), "%s/%s", self, engine[i]);
                snprintf(target, sizeof(target), "%s/../%s", self, engine[i]);
                if (symlink(target, linked[i]) < 0)
                        linked[i][0] = '\0'; /* already there: not ours to remove */
        }
}

int main(void)
{
        char cmd[64];

        if (!mkdtemp(base))
                return 1;
        engine_beside(true);
        test_plan_of_a_profile_in_a_git_work_tree();
        engine_beside(false);
        snprintf(cmd, sizeof(cmd), "rm -rf %s", base);
        if (system(cmd) != 0)
                return 1;
        return failures ? 1 : 0;
}
