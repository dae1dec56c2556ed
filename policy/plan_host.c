/* §1.5 the host launch: a profile whose marker (or CLAUDE_PROFILE_SANDBOX=0, or run --host)
 * says host runs claude directly, as claude-profile does — the caller's whole environment
 * plus CLAUDE_CONFIG_DIR=<profile> and the profile's .env, and the shared settings with only
 * {profile} filled in (their denies and loopback hooks kept, as they are meant for the
 * host). No sandbox: run says so in one line before it execs claude. A report that an
 * earlier sandboxed session left waiting stops a host launch as it stops a sandboxed one:
 * what the report lists is what would run here. */
#include "plan.h"

#include "../common/cleanup.h"
#include "../common/strv.h"
#include "../common/error.h"
#include "../common/path.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

/* §6.4: a profile that has been sandboxed (its marker, or its state dir) launched on the
 * host: statusline.sh, which claude on the host runs, should be the link claude-profile
 * makes; a session could have replaced it. */
static int statusline_check(struct plan *p, const struct profile_config *c, struct cs_error *err)
{
        _cleanup_free_ char *gdir = cs_path_join(c->home, ".claude");
        _cleanup_free_ char *expected = gdir ? cs_path_join(gdir, "statusline.sh") : NULL;
        _cleanup_free_ char *link = cs_path_join(p->profile.dir, "statusline.sh");
        char target[PATH_MAX];
        struct stat st;
        ssize_t n;

        if (!expected || !link)
                return cs_error_set(err, ENOMEM, "statusline.sh");
        if (!profile_marked(&p->profile) && access(p->profile.state_dir, F_OK) < 0)
                return 0;
        if (fstatat(p->profile.dir_fd, "statusline.sh", &st, AT_SYMLINK_NOFOLLOW) < 0)
                return 0;
        n = S_ISLNK(st.st_mode)
                ? readlinkat(p->profile.dir_fd, "statusline.sh", target, sizeof(target) - 1)
                : -1;
        if (n >= 0) {
                target[n] = '\0';
                if (strcmp(target, expected) == 0)
                        return 0;
        }
        return stage_warn(&p->warnings, err,
                          "Warning: %s is not the link to %s that claude-profile creates. A "
                          "sandboxed session can replace it, and claude runs it on the host. "
                          "Check it, then relink it: ln -sfn %s %s",
                          link, expected, expected, link);
}

/* environ without `name`, as a new array's entries. */
static int env_unset(struct plan *p, const char *name)
{
        size_t n = strlen(name), o = 0;

        for (size_t i = 0; i < p->n_host_env; i++) {
                if (strncmp(p->host_env[i], name, n) == 0 && p->host_env[i][n] == '=')
                        free(p->host_env[i]);
                else
                        p->host_env[o++] = p->host_env[i];
        }
        p->n_host_env = o;
        if (p->host_env)
                p->host_env[o] = NULL;
        return 0;
}

static int env_set(struct plan *p, const char *name, const char *value)
{
        char *e;

        env_unset(p, name);
        return asprintf(&e, "%s=%s", name, value) < 0 ? -ENOMEM
                                                      : strv_push(&p->host_env, &p->n_host_env, e);
}

int plan_host(struct plan *p, const struct plan_request *req, struct cs_error *err)
{
        const struct profile_config *c = req->config;
        struct profile_env *dotenv = &p->dotenv;
        _cleanup_free_ char *shared = NULL;
        bool loopback;
        size_t n = 0;
        int r;

        p->host_why = req->where == PLAN_WHERE_HOST        ? "run --host"
                      : c->sandbox_override == PROFILE_OFF ? "CLAUDE_PROFILE_SANDBOX=0"
                                                           : "the profile has no .sandbox marker";
        /* The report of an earlier sandboxed session waits here too (its state dir). */
        /* The profile's report (when it has a state dir) and the work tree's. */
        r = access(p->profile.state_dir, F_OK) == 0 ? profile_state_open(&p->profile, err) : 0;
        if (r >= 0)
                r = plan_pending(p, req, err);
        if (r < 0)
                return r;
        r = statusline_check(p, c, err);
        /* §1.5: a host launch reads .env when there is one (p->dotenv) and creates none. */
        if (r >= 0)
                r = plan_shared_settings(p, req, false, &shared, &loopback, err);
        if (r < 0)
                goto out;
        /* The caller's environment, without a CLAUDE_PROFILE_AGENT_VAULT_* of its own: those
         * are the launcher's, never claude's. */
        for (char **e = environ; *e; e++)
                if (strncmp(*e, VAULT_PREFIX, strlen(VAULT_PREFIX)) != 0 &&
                    strv_push_dup(&p->host_env, &p->n_host_env, *e) < 0)
                        goto oom;
        if (env_set(p, "CLAUDE_CONFIG_DIR", p->profile.dir) < 0)
                goto oom;
        for (size_t i = 0; i < dotenv->n; i++)
                if (plan_dotenv_name_ok(p, dotenv->names[i], err) &&
                    env_set(p, dotenv->names[i], dotenv->values[i]) < 0)
                        goto oom;
        /* Agent Vault's variables, the CA ones naming the combined bundle. */
        if (vault_host_env(&p->vault, &p->host_env, &p->n_host_env) < 0)
                goto oom;
        p->host_argv = calloc(req->n_args + 4, sizeof(char *));
        if (!p->host_argv || !(p->host_argv[n++] = strdup(c->claude_bin)))
                goto oom;
        if (shared &&
            (!(p->host_argv[n++] = strdup("--settings")) || !(p->host_argv[n++] = strdup(shared))))
                goto oom;
        for (size_t i = 0; i < req->n_args; i++)
                if (!(p->host_argv[n++] = strdup(req->args[i])))
                        goto oom;
        return 0;
oom:
        r = cs_error_set(err, ENOMEM, "the host launch of %s", req->name);
out:
        return r;
}

void plan_host_free(struct plan *p)
{
        for (size_t i = 0; p->host_argv && p->host_argv[i]; i++)
                free(p->host_argv[i]);
        free(p->host_argv);
        for (size_t i = 0; i < p->n_host_env; i++) {
                explicit_bzero(p->host_env[i], strlen(p->host_env[i]));
                free(p->host_env[i]);
        }
        free(p->host_env);
        p->host_argv = p->host_env = NULL;
        p->n_host_env = 0;
}

char *plan_host_json(const struct plan *p)
{
        cJSON *o = cJSON_CreateObject(), *argv, *env;
        char *out;

        cJSON_AddStringToObject(o, "launch", "host");
        cJSON_AddStringToObject(o, "why", p->host_why);
        argv = cJSON_AddArrayToObject(o, "argv");
        for (size_t i = 0; p->host_argv[i]; i++)
                cJSON_AddItemToArray(argv, cJSON_CreateString(p->host_argv[i]));
        /* What the launch adds to the caller's environment; the .env's values are secrets. */
        env = cJSON_AddObjectToObject(o, "env_added");
        cJSON_AddStringToObject(env, "CLAUDE_CONFIG_DIR", p->profile.dir);
        for (size_t i = 0; i < p->dotenv.n; i++)
                cJSON_DeleteItemFromObjectCaseSensitive(env, p->dotenv.names[i]);
        for (size_t i = 0; i < p->dotenv.n; i++)
                if (spec_env_name_valid(p->dotenv.names[i]) &&
                    !cJSON_GetObjectItemCaseSensitive(env, p->dotenv.names[i]))
                        cJSON_AddStringToObject(env, p->dotenv.names[i], "<redacted>");
        /* Agent Vault's, as the launch sets them: the proxy URLs hold the session's token. */
        for (size_t i = 0; p->vault.state == VAULT_ACTIVE && i < p->vault.n_session; i++) {
                size_t len = strcspn(p->vault.session[i], "=");

                for (size_t j = 0; j < p->n_host_env; j++) {
                        char *name;

                        if (strncmp(p->host_env[j], p->vault.session[i], len + 1) != 0 ||
                            !(name = strndup(p->host_env[j], len)))
                                continue;
                        cJSON_DeleteItemFromObjectCaseSensitive(env, name);
                        cJSON_AddStringToObject(env, name,
                                                vault_secret_var(name) ? "<redacted>"
                                                                       : p->host_env[j] + len + 1);
                        free(name);
                }
        }
        out = cJSON_Print(o);
        cJSON_Delete(o);
        return out;
}
