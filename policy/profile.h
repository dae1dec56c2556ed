/* claude-profile's layout (reference §1, §6): settings from CLAUDE_PROFILE_* (an empty value
 * is unset), profiles, the .env file, the sandbox marker, the per-profile state dir. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

struct cs_error;

#define PROFILE_NAME_MAX 255

enum profile_tristate { PROFILE_UNSET = -1, PROFILE_OFF = 0, PROFILE_ON = 1 };

struct profile_config {
        char *home;          /* $HOME (required, absolute) */
        char *profiles_base; /* CLAUDE_PROFILE_PROFILES_BASE or <home>/.claude-profiles */
        char *data_home;     /* ${XDG_DATA_HOME:-<home>/.local/share} */
        char *claude_bin;    /* CLAUDE_PROFILE_CLAUDE_BIN or "claude" */
        char *sandbox_image; /* CLAUDE_PROFILE_SANDBOX_IMAGE or NULL */
        enum profile_tristate sandbox_override; /* CLAUDE_PROFILE_SANDBOX */
        bool skip_permissions; /* CLAUDE_PROFILE_SANDBOX_SKIP_PERMISSIONS, default true */
        bool ssh_agent;        /* CLAUDE_PROFILE_SANDBOX_SSH_AGENT, default false */
        bool gh;               /* CLAUDE_PROFILE_SANDBOX_GH: GH_TOKEN from `gh auth token` */
        bool gpg;              /* CLAUDE_PROFILE_SANDBOX_GPG: the gpg-agent's restricted socket */
        bool clipboard;        /* CLAUDE_PROFILE_SANDBOX_CLIPBOARD: wl-paste through a relay */
        bool chrome;           /* CLAUDE_PROFILE_SANDBOX_CHROME: claude's --chrome */
        bool packages;         /* CLAUDE_PROFILE_SANDBOX_PACKAGES: sudo's broker on the default */
        bool pulumi;           /* CLAUDE_PROFILE_SANDBOX_PULUMI: PULUMI_ACCESS_TOKEN */
        char *infisical;       /* CLAUDE_PROFILE_SANDBOX_INFISICAL: logins (emails, domains) */
        char *infisical_bin;   /* CLAUDE_PROFILE_INFISICAL_BIN or "infisical" (Agent Vault) */
        unsigned long ram_mib; /* CLAUDE_PROFILE_SANDBOX_RAM_MIB; 0: no memory limit */
        unsigned cpus_milli;   /* CLAUDE_PROFILE_SANDBOX_CPUS in thousandths; 0: no CPU limit */
        char **forward_env;    /* CLAUDE_PROFILE_SANDBOX_FORWARD_ENV, split at ',' */
        size_t n_forward_env;
        char **host_paths; /* CLAUDE_PROFILE_SANDBOX_HOST_PATHS: shown read-only, split at ',' */
        size_t n_host_paths;
        char *egress;      /* CLAUDE_PROFILE_SANDBOX_EGRESS: open, allowlist or none */
        char *allow_hosts; /* CLAUDE_PROFILE_SANDBOX_ALLOW_HOSTS: a comma list */
};

/* From the environment. Errors name the variable and say what it accepts. */
int profile_config_load(struct profile_config *ret, struct cs_error *err);
void profile_config_free(struct profile_config *c);
/* policy/plan_egress.c: the egress settings are well-formed (every launch checks them). */
int plan_egress_check(const struct profile_config *c, struct cs_error *err);

struct profile {
        char *name;
        char *dir;       /* <profiles_base>/<name>, as computed (not resolved) */
        int dir_fd;      /* O_PATH|O_DIRECTORY of dir */
        char *state_dir; /* <data_home>/claude-profile/profiles/<name> */
        int state_fd;    /* O_DIRECTORY of state_dir, once profile_state_open() ran */
};

/* The profile must exist: else "Profile '<name>' does not exist. Create it with:
 * claude-profile add <name>" (or csandbox's equivalent advice). A name with '/' or that is
 * "." or ".." is refused. */
int profile_open(const struct profile_config *c, const char *name, struct profile *ret,
                 struct cs_error *err);
void profile_close(struct profile *p);

/* mkdir -p the state dir with mode 0700 (tightening an existing one) and open it. */
int profile_state_open(struct profile *p, struct cs_error *err);

/* A parsed .env: KEY=VALUE pairs in file order (reference §1.3 parsing rules). */
struct profile_env {
        char **names;
        char **values;
        size_t n;
};
/* With create (a sandbox launch, which pins it), make <profile>/.env empty (O_CREAT|O_EXCL,
 * 0600) when it does not lexist; without (a host launch), a missing .env is an empty one.
 * Refuse a symlinked .env ("Refusing to use <path>: it is a symlink (to <target>), ...");
 * read it bounded through the profile dir fd with O_NOFOLLOW; parse. */
int profile_env_load(const struct profile *p, bool create, struct profile_env *ret,
                     struct cs_error *err);
/* profile_env_load without creating it: a missing .env reads as empty. */
int profile_env_read(const struct profile *p, struct profile_env *ret, struct cs_error *err);
/* Create <profile>/.env empty (O_CREAT|O_EXCL, 0600) when nothing is there (a link there is
 * left as it is: the load refused it already). */
int profile_env_create(const struct profile *p, struct cs_error *err);
void profile_env_free(struct profile_env *e);
/* The parser profile_env_load uses, over len bytes of buf, which hold no NUL byte (the
 * loader refuses a .env with one). */
int profile_env_parse(const char *buf, size_t len, struct profile_env *ret);
/* CLAUDE_PROFILE_SANDBOX_FORWARD_ENV's value split at ',', each name trimmed of blanks,
 * empty ones dropped; *ret is NULL when none is left. */
int profile_forward_env_split(const char *list, char ***ret, size_t *ret_n);

/* The marker: lexists(<profile>/.sandbox); a dangling link counts. */
bool profile_marked(const struct profile *p);
/* The effective decision: the override when set, else the marker. */
bool profile_sandboxed(const struct profile_config *c, const struct profile *p);
