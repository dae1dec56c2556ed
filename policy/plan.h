/* `csandbox run` / `csandbox plan`: a profile, the cwd and claude's args turned into a
 * struct sandbox_spec (reference §2), plus what the launch reports afterwards (§6.4). */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "../image/store/store.h"
#include "../spec/spec.h"
#include "bind.h"
#include "bridges.h"
#include "profile.h"
#include "stage.h"
#include "trust.h"
#include "trust_rules.h"
#include "vault.h"

struct cs_error;

/* Inside the sandbox (reference §2.12): claude runs as appuser. */
#define PLAN_USER   "appuser"
#define PLAN_HOME   "/home/appuser"
#define PLAN_CONFIG PLAN_HOME "/.claude"
#define PLAN_CLAUDE PLAN_HOME "/.local/bin/claude"
#define PLAN_UID    1000u

struct plan_request {
        const struct profile_config *config;
        const char *name;  /* the profile */
        const char *cwd;   /* physical cwd */
        char *const *args; /* claude's args, as given */
        size_t n_args;
        const char *image; /* --image; NULL: CLAUDE_PROFILE_SANDBOX_IMAGE or the default */
        /* csandbox's own argv for `run` (NULL-terminated), which an Agent Vault launch has
         * `infisical agent-vault run` start again. */
        char *const *self_argv;
        /* An earlier session's unaccepted trust report: refuse (run), accept it
         * (run --accept-changes), or only show it (plan). */
        enum { PLAN_PENDING_REFUSE, PLAN_PENDING_ACCEPT, PLAN_PENDING_SHOW } pending;
        /* §1.5's decision (CLAUDE_PROFILE_SANDBOX, else the marker), or run's --sandbox and
         * --host for this launch. */
        enum { PLAN_WHERE_DECIDE, PLAN_WHERE_SANDBOX, PLAN_WHERE_HOST } where;
        /* With PLAN_PENDING_REFUSE: shown a waiting report, true accepts it (a person at a
         * terminal said yes); NULL refuses. */
        bool (*confirm)(const char *text, void *ctx);
        void *confirm_ctx;
};

struct plan {
        struct sandbox_spec spec;
        struct profile profile;
        struct stage_warnings warnings; /* to print before the launch */
        char **local_settings;          /* candidate settings.local.json paths (§2.7) */
        size_t n_local_settings;
        char *work_root;
        char *claude_copy;        /* the session's .claude.json, in the state dir (plan_report.c) */
        struct trust_watch watch; /* what the trust rules are made of (policy/trust.c) */
        /* Earlier sessions whose check the launch finishes before it starts (plan_pending) */
        struct trust_unfinished *unfinished;
        size_t n_unfinished;
        struct image_ref image;      /* the image's lock is held until plan_free */
        struct plan_bridges bridges; /* the relays, started by relay_set_start */
        struct profile_env dotenv;   /* the profile's .env, the Agent Vault keys taken out */
        struct plan_vault vault;     /* VAULT_EXEC: no spec, run execs vault.exec_argv */

        /* A host launch (§1.5): no spec; claude is exec'd with these (plan_host.c). */
        bool host;
        const char *host_why; /* what decided it, for the one line run prints */
        char **host_argv;     /* [claude_bin, shared --settings, the user's args] */
        char **host_env;      /* the caller's environment, CLAUDE_CONFIG_DIR, the .env */
        size_t n_host_env;
};

/* Build the spec. This stages the per-profile copies exactly as a launch does (the state
 * dir; <profile>/.env, settings.json and chrome/ and a missing <gitdir>/hooks created as
 * the reference creates them) and nothing else. */
int plan_build(const struct plan_request *req, struct plan *ret, struct cs_error *err);
/* The package broker's rules (plan_broker.c): the package managers it runs and its
 * capabilities, into the spec of a session that has a broker. */
int plan_broker(struct sandbox_spec *s, struct cs_error *err);
uint64_t plan_broker_caps(void);
void plan_free(struct plan *p);

/* Internal to policy/: the host launch's plan, the pending-report check and §3.2's shared
 * settings (sandbox: re-point loopback hooks and strip the denies; else only {profile}). */
int plan_host(struct plan *p, const struct plan_request *req, struct cs_error *err);
void plan_host_free(struct plan *p);
int plan_pending(struct plan *p, const struct plan_request *req, struct cs_error *err);
int plan_shared_settings(struct plan *p, const struct plan_request *req, bool sandbox, char **ret,
                         bool *ret_loopback, struct cs_error *err);
/* plan_session.c: claude's argv (§2.11), whether the session is in bypass-permissions
 * mode, its environment (.env, GH_TOKEN, the forwarded names), and whether a name was
 * forwarded from the host. */
bool plan_info_only(const struct plan_request *req);
bool plan_bypass(const struct plan_request *req);
/* policy/plan_egress.c: the egress mode and allowed hosts from the profile's settings. */
int plan_egress(struct plan *p, const struct profile_config *c, struct cs_error *err);
/* The same settings on a spec of its own, as a launch finishes them (the mode sets the
 * network): doctor's throwaway session with the profile's egress. */
int plan_egress_spec(struct sandbox_spec *s, const struct profile_config *c, struct cs_error *err);
struct strbuf;
/* What the briefing says of the session's network (nothing when it is open). */
void egress_briefing(const struct sandbox_spec *s, struct strbuf *b);
int plan_build_argv(struct plan *p, const struct plan_request *req, const char *shared,
                    struct cs_error *err);
int plan_add_env(struct plan *p, const struct plan_request *req, struct cs_error *err);
bool plan_env_forwarded(const struct profile_config *c, const char *name);
/* A .env name a launch can set; else a warning naming it (or the line with none). */
bool plan_dotenv_name_ok(struct plan *p, const char *name, struct cs_error *err);
/* The host launch as JSON for `plan` (values of .env redacted). */
char *plan_host_json(const struct plan *p);

/* The judge's rules for this session (policy/trust_rules.h): the roots, the files the
 * settings name, what the profile's .claude.json makes the host run now. */
int plan_trust_rules(const struct plan *p, const struct profile_config *c, struct trust_rules *ret,
                     struct cs_error *err);
