/* What claude starts with inside (reference §2.8, §2.11, §3.2): its argv with the session
 * flags and the briefing, the shared settings, and the environment built from the .env, the
 * bridges' secrets and the forwarded names. */
#include "plan.h"
#include "bridges.h"
#include "plan_report.h"
#include "bind.h"

#include "briefing.h"
#include "identity.h"
#include "logins.h"
#include "vault.h"

#include "settings.h"
#include "trust.h"
#include "worktree.h"

#include "../common/cleanup.h"
#include "../common/strv.h"
#include "../common/error.h"
#include "../common/fileio.h"
#include "../common/path.h"
#include "../common/resolve.h"
#include "../common/strbuf.h"
#include "../image/store/store.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdarg.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SHARED_SETTINGS_MAX (4u << 20)

bool plan_info_only(const struct plan_request *req)
{
        return req->n_args == 1 &&
               (strcmp(req->args[0], "--version") == 0 || strcmp(req->args[0], "-v") == 0 ||
                strcmp(req->args[0], "--help") == 0 || strcmp(req->args[0], "-h") == 0);
}

/* Whether the session starts in bypass-permissions mode: csandbox adds the flag (§2.11) or
 * the user gave it. claude then asks, on every launch, whether the user accepts that mode,
 * and records the answer in settings.json, which inside is the copy made anew each launch:
 * the question would come back every time, with "No, exit" as its default. The sandbox is
 * what makes the mode safe, so the copy records the acceptance up front. */
bool plan_bypass(const struct plan_request *req)
{
        bool given = settings_args_have(req->args, req->n_args, "--dangerously-skip-permissions");

        return given || (req->config->skip_permissions &&
                         !settings_args_have(req->args, req->n_args, "--permission-mode"));
}

/* The briefing, and what the host forwards into this session (§5), so that claude uses
 * it rather than looking for keys or tokens that are not there. */
static char *briefing_with_bridges(const struct sandbox_spec *s, const struct profile_config *c)
{
        struct strbuf b = {0};

        sb_puts(&b, plan_briefing);
        if (spec_env_get(s, "SSH_AUTH_SOCK"))
                sb_puts(&b, " An SSH agent of the host's is forwarded (SSH_AUTH_SOCK): ssh and "
                            "git over ssh can use its keys, which are not readable here.");
        if (spec_env_get(s, "GNUPGHOME"))
                sb_puts(&b, " The host's gpg-agent is forwarded: gpg and git commit -S can sign "
                            "with its keys, whose secret parts stay on the host.");
        if (c->clipboard)
                sb_puts(&b, " The host's clipboard can be read (wl-paste), not written.");
        if (s->package_broker && !s->n_layer_dirs)
                sb_puts(&b, " This session runs an image, and in it sudo runs the image's "
                            "package manager as the sandbox's root: sudo apt-get install -y "
                            "NAME (or dnf, yum, microdnf or apk) installs into the session's "
                            "own filesystem, which vanishes when the session ends; sudo runs "
                            "nothing else, and says why when csandbox could not start it.");
        else if (s->package_broker)
                sb_puts(&b, " sudo runs the host's package manager as the sandbox's root: "
                            "sudo apt-get install -y NAME (or dnf, yum, microdnf or apk) "
                            "installs into a writable layer of this session over the host's "
                            "system, which vanishes when the session ends (the first sudo "
                            "takes a moment to make it; the host's files never change); sudo "
                            "runs nothing else, and says why when it cannot.");
        else
                sb_puts(&b, " There is no sudo and no root inside, so install tools into your "
                            "home (for example with pip install --user, npm install --prefix "
                            "~/.local, or uv tool install) rather than with a package manager; "
                            "if you need a system package, the user can give this profile sudo "
                            "(CLAUDE_PROFILE_SANDBOX_PACKAGES=1).");
        if (spec_env_get(s, "GH_TOKEN"))
                sb_puts(&b, " GH_TOKEN is set, so gh can use GitHub.");
        if (spec_env_get(s, "PULUMI_ACCESS_TOKEN"))
                sb_puts(&b, " PULUMI_ACCESS_TOKEN is set, so pulumi is logged in to Pulumi "
                            "Cloud.");
        /* The reference's two notes, in its order: Infisical's, then Agent Vault's. */
        if (spec_env_get(s, "CLAUDE_SANDBOX_INFISICAL")) {
                char *note = logins_briefing(s);

                if (!note)
                        b.oom = true;
                else
                        sb_puts(&b, note);
                free(note);
        }
        sb_puts(&b, vault_briefing(s));
        egress_briefing(s, &b);
        if (b.oom) {
                free(b.s);
                return NULL;
        }
        return b.s;
}

/* §2.11: the session flags first, then --settings, then the user's args. */
int plan_build_argv(struct plan *p, const struct plan_request *req, const char *shared,
                    struct cs_error *err)
{
        _cleanup_free_ char **v = calloc(req->n_args + 8, sizeof(*v));
        _cleanup_free_ char *briefing = NULL;
        size_t n = 0;

        if (!v)
                return cs_error_set(err, ENOMEM, "claude's argv");
        /* The staged copy by its absolute path, never whatever PATH finds: a copy that
         * cannot execute fails the launch instead of starting another claude. */
        v[n++] = PLAN_CLAUDE;
        /* `claude --version` / `--help` alone start no session and use no network, and any
         * flag before them sends claude down its full start-up path (about 150 ms more):
         * pass them as they are, and give them no network (pasta's start is most of a
         * launch's cost). */
        if (plan_info_only(req)) {
                v[n++] = req->args[0];
                p->spec.net = SPEC_NET_NONE;
                p->spec.egress = SPEC_EGRESS_OPEN;
                return spec_set_argv(&p->spec, (int)n, v, err);
        }
        if (req->config->skip_permissions &&
            !settings_args_have(req->args, req->n_args, "--dangerously-skip-permissions") &&
            !settings_args_have(req->args, req->n_args, "--permission-mode"))
                v[n++] = "--dangerously-skip-permissions";
        if (req->config->chrome && !settings_args_have(req->args, req->n_args, "--chrome") &&
            !settings_args_have(req->args, req->n_args, "--no-chrome"))
                v[n++] = "--chrome";
        if (!settings_args_have(req->args, req->n_args, "--append-system-prompt")) {
                briefing = briefing_with_bridges(&p->spec, req->config);
                if (!briefing)
                        return cs_error_set(err, ENOMEM, "the briefing");
                v[n++] = "--append-system-prompt";
                v[n++] = briefing;
        }
        if (shared) {
                v[n++] = "--settings";
                v[n++] = (char *)shared;
        }
        for (size_t i = 0; i < req->n_args; i++)
                v[n++] = req->args[i];
        return spec_set_argv(&p->spec, (int)n, v, err);
}

/* §3.2: shared-settings.json, unless the user gave --settings. */
int plan_shared_settings(struct plan *p, const struct plan_request *req, bool sandbox, char **ret,
                         bool *ret_loopback, struct cs_error *err)
{
        _cleanup_free_ char *path = NULL, *raw = NULL;
        size_t len;
        int r;

        *ret = NULL;
        *ret_loopback = false;
        if (!(path = cs_path_join(req->config->profiles_base, "shared-settings.json")))
                return cs_error_set(err, ENOMEM, "shared settings");
        if (access(path, F_OK) < 0)
                return 0;
        if (settings_args_have(req->args, req->n_args, "--settings")) {
                stage_warn(&p->warnings, err, "--settings was given, so %s is not applied.", path);
                return 0;
        }
        r = cs_read_file_at(AT_FDCWD, path, SHARED_SETTINGS_MAX, false, &raw, &len, err);
        if (r < 0)
                return cs_error_wrap(err, "Can't read %s", path);
        return settings_shared(raw, len, path, req->name, sandbox, ret, ret_loopback, err);
}

/* What csandbox sets itself wins over .env and forwarding, as podman's -e wins over its
 * --env-file in the reference: claude must find its config, home and binary where the
 * mounts put them. */
static bool env_launcher_owned(const char *name)
{
        static const char *const owned[] = {"HOME", "USER", "CLAUDE_CONFIG_DIR", "TERM", "PATH"};

        for (size_t i = 0; i < sizeof(owned) / sizeof(owned[0]); i++)
                if (strcmp(name, owned[i]) == 0)
                        return true;
        return false;
}

bool plan_env_forwarded(const struct profile_config *c, const char *name)
{
        for (size_t i = 0; i < c->n_forward_env; i++)
                if (strcmp(c->forward_env[i], name) == 0)
                        return true;
        return false;
}

int plan_add_env(struct plan *p, const struct plan_request *req, struct cs_error *err)
{
        const struct profile_env *dotenv = &p->dotenv; /* its Agent Vault keys taken out */
        const char *colorterm = getenv("COLORTERM");
        /* §2.4 #17: created empty when missing, so that the read-only pin has a file. */
        int r = profile_env_create(&p->profile, err);

        for (size_t i = 0; i < dotenv->n && r >= 0; i++)
                if (strcmp(dotenv->names[i], "COLORTERM") == 0 && colorterm && *colorterm)
                        continue; /* the host's, as the reference's `-e COLORTERM` wins */
                else if (env_launcher_owned(dotenv->names[i]))
                        stage_warn(&p->warnings, err,
                                   "Warning: %s/.env sets %s, which csandbox sets itself in the "
                                   "sandbox; the .env value is not used.",
                                   p->profile.dir, dotenv->names[i]);
                else if (plan_dotenv_name_ok(p, dotenv->names[i], err))
                        r = spec_env_set(&p->spec, dotenv->names[i], dotenv->values[i], true, err);
        /* Then GH_TOKEN, the Infisical logins and PULUMI_ACCESS_TOKEN, as the reference
         * orders them (a forwarded name wins over them all). */
        if (r >= 0)
                r = plan_add_gh_token(&p->spec, req->config, &p->warnings, err);
        if (r >= 0)
                r = plan_add_infisical(&p->spec, req->config, &p->warnings, err);
        if (r >= 0)
                r = plan_add_pulumi(&p->spec, req->config, &p->warnings, err);
        if (r < 0)
                return r;
        /* The host's value of a forwarded name wins over the .env's. */
        for (size_t i = 0; i < req->config->n_forward_env; i++) {
                const char *name = req->config->forward_env[i];
                const char *v = getenv(name);

                if (env_launcher_owned(name))
                        stage_warn(&p->warnings, err,
                                   "Warning: CLAUDE_PROFILE_SANDBOX_FORWARD_ENV names %s, which "
                                   "csandbox sets itself in the sandbox; it is not forwarded.",
                                   name);
                else if (strncmp(name, VAULT_PREFIX, strlen(VAULT_PREFIX)) == 0)
                        stage_warn(&p->warnings, err,
                                   "Warning: CLAUDE_PROFILE_SANDBOX_FORWARD_ENV names %s, an "
                                   "Agent Vault setting, which is for csandbox and never reaches "
                                   "the session; it is not forwarded.",
                                   name);
                else if (!spec_env_name_valid(name))
                        stage_warn(&p->warnings, err,
                                   "Warning: CLAUDE_PROFILE_SANDBOX_FORWARD_ENV names `%s`, which "
                                   "is not a valid variable name; it is skipped.",
                                   name);
                else if (v) {
                        r = spec_env_set(&p->spec, name, v, true, err);
                        if (r < 0)
                                return r;
                } else if (!spec_env_get(&p->spec, name)) {
                        stage_warn(&p->warnings, err,
                                   "Warning: CLAUDE_PROFILE_SANDBOX_FORWARD_ENV names %s, which is "
                                   "set neither on the host nor in the profile's .env; it is "
                                   "skipped.",
                                   name);
                }
        }
        return 0;
}
