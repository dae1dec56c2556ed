/* `csandbox run <profile>` and `csandbox plan <profile>`: the main job. policy/plan.c
 * decides; this file prints, launches and reports. */
#include "cmd_run.h"
#include "cli.h"

#include "../runner/runner.h"

#include "../common/error.h"
#include "../common/path.h"
#include "../policy/plan.h"
#include "../policy/profile.h"
#include "../policy/seccomp.h"
#include "../policy/stage.h"
#include "../policy/trust.h"
#include "run_trust.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

static const char usage_run[] =
    "Usage: csandbox run [--sandbox|--host] [--image NAME] [--accept-changes]\n"
    "                    [--tty=auto|pty|inherit] [--proc=auto|fresh|bind|none]\n"
    "                    PROFILE [--] [CLAUDE_ARGS...]\n"
    "       csandbox plan [--sandbox|--host] [--image NAME] [--tty=...] [--proc=...] PROFILE\n"
    "                     [--] [CLAUDE_ARGS...]\n"
    "\n"
    "Where a profile launches is claude-profile's decision: CLAUDE_PROFILE_SANDBOX when it\n"
    "is set, else the profile's .sandbox marker (csandbox sandbox NAME --on|--off);\n"
    "--sandbox or --host decides for one launch. A host launch runs the host's claude\n"
    "with your environment, CLAUDE_CONFIG_DIR=<profile> and the profile's .env, after a\n"
    "line on stderr saying it is not sandboxed; plan then prints it as JSON.\n"
    "\n"
    "run launches Claude Code for the claude-profile profile PROFILE in a sandbox: the\n"
    "host's system read-only, its homes and data hidden (or an imported image under an\n"
    "ephemeral overlay), the profile at /home/appuser/.claude, the current git work\n"
    "tree read-write at its real path, .git/config read-only, throwaway copies of\n"
    ".git/hooks (in memory) and the settings files, its own network through pasta, no\n"
    "capabilities and a seccomp filter. The exit status is claude's.\n"
    "\n"
    "plan prints that sandbox as JSON (mounts in order, environment names with secret\n"
    "values redacted, argv, ids, namespaces, network, seccomp) without starting\n"
    "anything. It writes what a launch writes before it starts: the per-profile copies\n"
    "in ${XDG_DATA_HOME:-~/.local/share}/claude-profile/profiles/PROFILE/ (settings,\n"
    "known_hosts, gitconfig), the git identity file,\n"
    "and in the profile an empty .env, a {} settings.json and a chrome/ directory when\n"
    "they are missing, as claude-profile does.\n"
    "\n"
    "Settings come from CLAUDE_PROFILE_* variables as claude-profile reads them:\n"
    "  CLAUDE_PROFILE_PROFILES_BASE       where the profiles are (~/.claude-profiles)\n"
    "  CLAUDE_PROFILE_CLAUDE_BIN          the host's claude (claude on PATH)\n"
    "  CLAUDE_PROFILE_SANDBOX_IMAGE       an imported image to run on\n"
    "  CLAUDE_PROFILE_SANDBOX_FORWARD_ENV host variables passed in, a comma list\n"
    "  CLAUDE_PROFILE_SANDBOX_HOST_PATHS  host paths shown read-only, a comma list\n"
    "  CLAUDE_PROFILE_SANDBOX_SKIP_PERMISSIONS  add --dangerously-skip-permissions (1)\n"
    "  CLAUDE_PROFILE_SANDBOX_SSH_AGENT   bind the host's SSH agents (0)\n"
    "  CLAUDE_PROFILE_SANDBOX_GPG         bind the gpg-agent's extra socket (0)\n"
    "  CLAUDE_PROFILE_SANDBOX_CLIPBOARD   wl-paste reads of the host's clipboard (0)\n"
    "  CLAUDE_PROFILE_SANDBOX_GH          GH_TOKEN from `gh auth token` (0)\n"
    "  CLAUDE_PROFILE_SANDBOX_CHROME      add --chrome (0)\n"
    "  CLAUDE_PROFILE_SANDBOX_PACKAGES    sudo for packages on the embedded default, into\n"
    "                                     a layer gone with the session (0)\n"
    "  CLAUDE_PROFILE_SANDBOX_INFISICAL   Infisical logins passed in, a comma list of\n"
    "                                     emails or domains (none)\n"
    "  CLAUDE_PROFILE_SANDBOX_PULUMI      PULUMI_ACCESS_TOKEN from ~/.pulumi (0)\n"
    "  CLAUDE_PROFILE_INFISICAL_BIN       the infisical CLI, for Agent Vault (infisical)\n"
    "  CLAUDE_PROFILE_SANDBOX_RAM_MIB     a memory limit in MiB (none)\n"
    "  CLAUDE_PROFILE_SANDBOX_CPUS        a CPU limit (none)\n"
    "\n"
    "Agent Vault: the profile's .env keys CLAUDE_PROFILE_AGENT_VAULT_BUNDLE, _PROXY and\n"
    "_CA_FINGERPRINT (and optional _INFISICAL_PROFILE, _NO_PROXY) are csandbox's, never the\n"
    "session's; an unknown one refuses the launch. With BUNDLE set, csandbox asks the proxy\n"
    "for its CA (directly, 5 s) and, when it matches the pin, runs again under `infisical\n"
    "agent-vault run`; the session then gets the proxy and CA variables and a CA bundle\n"
    "that trusts the proxy. Otherwise it launches without the vault after a red note, with\n"
    "CLAUDE_SANDBOX_AGENT_VAULT=unavailable. plan prints the infisical command.\n"
    "\n"
    "While the session runs, every change it makes to the profile and the work tree\n"
    "is judged by the rules the host's git and claude use to find what they run (a\n"
    "repository whose config or hooks run commands, at any depth and by git's own\n"
    "discovery rules; project settings, .mcp.json and the scripts settings name; new\n"
    "MCP servers in .claude.json; the launch's own .sandbox, .env and settings.json;\n"
    "setuid files). Each finding shows on your terminal as it happens; after the\n"
    "session the report is kept, and the next run of any profile in that tree (or of\n"
    "this profile) refuses (exit 125) until you accept it: with one key at a terminal,\n"
    "or with --accept-changes. plan shows a report that is waiting, and accepts\n"
    "nothing.\n"
    "\n"
    "--tty: auto (the default) gives claude a pty of the sandbox's own, relayed to your\n"
    "terminal, when stdin, stdout or stderr is a terminal; pty always does; inherit\n"
    "passes your terminal itself (claude can then change its modes; see doc/run.md).\n"
    "\n"
    "--proc: auto (the default) mounts a fresh /proc of the sandbox's pid namespace, and\n"
    "where the kernel refuses one (inside most containers) binds the outer /proc\n"
    "read-only, saying so; fresh refuses to launch instead; bind always binds the\n"
    "outer one (its processes and their command lines show); none gives an empty /proc.\n";

struct run_opts {
        const char *image;
        enum spec_tty tty;
        enum spec_proc proc;
        bool help, accept, sandbox, host;
};

/* `--NAME VALUE` or `--NAME=VALUE` at argv[*i]: 1 with *ret set (and *i on the value), 0
 * when argv[*i] is another argument, < 0 when the value is missing. */
static int value_flag(int argc, char **argv, int *i, const char *name, const char **ret,
                      struct cs_error *err)
{
        size_t n = strlen(name);

        if (strncmp(argv[*i], name, n) != 0 || (argv[*i][n] != '=' && argv[*i][n]))
                return 0;
        if (argv[*i][n] == '=') {
                *ret = argv[*i] + n + 1;
                return 1;
        }
        if (*i + 1 >= argc)
                return cs_error_setx(err, EINVAL, "%s needs a value", name);
        *ret = argv[++*i];
        return 1;
}

static int parse(int argc, char **argv, struct run_opts *o, const char **ret_name,
                 int *ret_first_arg, struct cs_error *err)
{
        const char *v;
        int i, r;

        *o = (struct run_opts){.tty = SPEC_TTY_AUTO, .proc = SPEC_PROC_AUTO};
        for (i = 0; i < argc; i++) {
                r = value_flag(argc, argv, &i, "--tty", &v, err);
                if (r > 0 && !spec_tty_parse(v, &o->tty))
                        r = cs_error_setx(err, EINVAL, "--tty `%s`: expected auto, pty or inherit",
                                          v);
                if (r != 0) {
                        if (r < 0)
                                return r;
                        continue;
                }
                r = value_flag(argc, argv, &i, "--proc", &v, err);
                if (r > 0 && !spec_proc_parse(v, &o->proc))
                        r = cs_error_setx(err, EINVAL,
                                          "--proc `%s`: expected auto, fresh, bind or none", v);
                if (r != 0) {
                        if (r < 0)
                                return r;
                        continue;
                }
                if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
                        o->help = true;
                        return 0;
                }
                if (strcmp(argv[i], "--image") == 0) {
                        if (i + 1 >= argc)
                                return cs_error_setx(err, EINVAL, "--image needs a NAME");
                        o->image = argv[++i];
                        continue;
                }
                if (strcmp(argv[i], "--accept-changes") == 0) {
                        o->accept = true;
                        continue;
                }
                if (strcmp(argv[i], "--sandbox") == 0 || strcmp(argv[i], "--host") == 0) {
                        bool *which = argv[i][2] == 's' ? &o->sandbox : &o->host;

                        *which = true;
                        if (o->sandbox && o->host)
                                return cs_error_setx(err, EINVAL,
                                                     "--sandbox and --host contradict each "
                                                     "other: give one");
                        continue;
                }
                if (argv[i][0] == '-')
                        return cs_error_setx(err, EINVAL,
                                             "unknown option `%s` before the profile name; "
                                             "claude's own options go after it (csandbox run "
                                             "PROFILE -- %s); see `csandbox run --help`",
                                             argv[i], argv[i]);
                break;
        }
        if (i >= argc)
                return cs_error_setx(
                    err, EINVAL,
                    "no PROFILE given; usage: csandbox run [--image NAME] [--accept-changes] "
                    "PROFILE [--] [CLAUDE_ARGS...]");
        *ret_name = argv[i++];
        if (i < argc && strcmp(argv[i], "--") == 0)
                i++;
        *ret_first_arg = i;
        return 0;
}

/* §1.5: claude on the host, announced so that nobody takes it for a sandbox; plan prints it
 * as JSON. Returns only when claude could not be started (or for plan). */
static int host_launch(struct plan *p, const char *name, bool plan_only,
                       const struct rlimit *nofile)
{
        struct cs_error err = {0};
        char *found;

        for (size_t i = 0; i < p->warnings.n; i++)
                fprintf(stderr, "%s\n", p->warnings.msgs[i]);
        if (plan_only) {
                char *json = plan_host_json(p);

                if (!json)
                        return CS_EXIT_SETUP;
                printf("%s\n", json);
                free(json);
                return 0;
        }
        /* One line, with the way back that fits what decided it. */
        if (strcmp(p->host_why, "run --host") == 0)
                fprintf(stderr,
                        "csandbox: profile %s launches on the host, not in a sandbox (run "
                        "--host)\n",
                        name);
        else if (strncmp(p->host_why, "CLAUDE_PROFILE_SANDBOX=", 23) == 0)
                fprintf(stderr,
                        "csandbox: profile %s launches on the host, not in a sandbox (%s, which "
                        "overrides every profile's marker); `csandbox run --sandbox %s` "
                        "sandboxes this launch\n",
                        name, p->host_why, name);
        else
                fprintf(stderr,
                        "csandbox: profile %s launches on the host, not in a sandbox (%s); "
                        "`csandbox run --sandbox %s` sandboxes this launch, `csandbox sandbox %s "
                        "--on` every launch\n",
                        name, p->host_why, name, name);
        found = cs_find_program(p->host_argv[0]);
        if (!found && claude_blocked(p->host_argv[0], &err) < 0) {
                fprintf(stderr, "csandbox: run %s: %s\n", name, err.msg);
                return CS_EXIT_SETUP;
        }
        if (!found) {
                fprintf(stderr,
                        "csandbox: run %s: claude is not installed on this machine (no `%s` on "
                        "PATH); install it, or point CLAUDE_PROFILE_CLAUDE_BIN at it\n",
                        name, p->host_argv[0]);
                return 127;
        }
        if (nofile)
                setrlimit(RLIMIT_NOFILE, nofile);
        fflush(NULL);
        execve(found, p->host_argv, p->host_env);
        fprintf(stderr, "csandbox: run %s: cannot execute %s: %s\n", name, found, strerror(errno));
        free(found);
        return errno == ENOENT ? 127 : 126;
}

/* Agent Vault's pre-flight passed (reference §8.9): this launch starts again as the child of
 * `infisical agent-vault run`, which mints the session, keeps it while claude runs and
 * revokes it at the end; plan prints that command instead. */
static int vault_exec(struct plan *p, const char *name, bool plan_only, const struct rlimit *nofile)
{
        if (plan_only) {
                char *json = vault_exec_json(&p->vault, name);

                if (!json)
                        return CS_EXIT_SETUP;
                printf("%s\n", json);
                free(json);
                return 0;
        }
        if (setenv(VAULT_RUN_ENV, name, 1) < 0) {
                fprintf(stderr, "csandbox: run %s: %s\n", name, strerror(errno));
                return CS_EXIT_SETUP;
        }
        if (nofile)
                setrlimit(RLIMIT_NOFILE, nofile);
        fflush(NULL);
        execv(p->vault.exec_path, p->vault.exec_argv);
        fprintf(stderr, "csandbox: run %s: cannot execute %s for Agent Vault: %s\n", name,
                p->vault.exec_path, strerror(errno));
        return CS_EXIT_SETUP;
}

/* The pre-flight failed: the launch goes on without the vault, and says so where it cannot be
 * missed, before claude's screen takes the terminal. */
static void vault_note(const struct plan *p, const char *name)
{
        bool tty = isatty(STDERR_FILENO);

        if (p->vault.state != VAULT_UNAVAILABLE)
                return;
        fprintf(stderr,
                "%scsandbox: Agent Vault is unavailable: %s. Profile %s launches without it, so "
                "the services it brokers will not authenticate in this session.%s\n",
                tty ? "\033[1;31m" : "", p->vault.why, name, tty ? "\033[0m" : "");
}

/* csandbox's own argv for `run`: what infisical starts again. */
static char **self_argv(int argc, char **argv)
{
        char **v = calloc((size_t)argc + 3, sizeof(*v));
        ssize_t n;

        if (!v || !(v[0] = calloc(1, PATH_MAX)))
                goto fail;
        n = readlink("/proc/self/exe", v[0], PATH_MAX - 1);
        if (n <= 0)
                goto fail;
        v[1] = "run";
        for (int i = 0; i < argc; i++)
                v[i + 2] = argv[i];
        return v;
fail:
        if (v)
                free(v[0]);
        free(v);
        return NULL;
}

/* The report, then one key: y accepts what was shown and launches, anything else refuses. */
static bool confirm_report(const char *text, void *ctx)
{
        struct termios saved, raw;
        char key = 0;
        bool ok;

        (void)ctx;
        fprintf(stderr,
                "%s\n\nThese were changed by an earlier sandboxed session. Accept them and "
                "launch? [y/N] ",
                text);
        fflush(stderr);
        if (tcgetattr(STDIN_FILENO, &saved) < 0)
                return false;
        raw = saved;
        raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
        raw.c_cc[VMIN] = 1;
        raw.c_cc[VTIME] = 0;
        if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) < 0)
                return false;
        ok = read(STDIN_FILENO, &key, 1) == 1 && (key == 'y' || key == 'Y');
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved);
        fprintf(stderr, "%s\n", ok ? "yes" : "no");
        return ok;
}

/* A profile that has never logged in (a new one, made with mkdir as the README's first
 * command does): one line at a terminal says how, as `add` does. claude keeps an OAuth login
 * in the profile's .credentials.json; a key in the environment needs none. */
static void login_note(const struct plan *p, const char *name)
{
        struct stat st;

        if (!isatty(STDIN_FILENO) || !isatty(STDERR_FILENO) || p->profile.dir_fd < 0 ||
            spec_env_get(&p->spec, "ANTHROPIC_API_KEY") ||
            spec_env_get(&p->spec, "CLAUDE_CODE_OAUTH_TOKEN") ||
            fstatat(p->profile.dir_fd, ".credentials.json", &st, AT_SYMLINK_NOFOLLOW) == 0)
                return;
        fprintf(stderr,
                "csandbox: profile %s is not logged in yet: type /login at claude's prompt; the "
                "login is kept in the profile for its next launches\n",
                name);
}

int cmd_run(int argc, char **argv, bool plan_only)
{
        struct profile_config config = {0};
        struct cs_error err = {0};
        struct plan plan;
        struct plan_request req = {0};
        struct sock_fprog filter = {0};
        char cwd[PATH_MAX];
        const char *name = NULL;
        struct run_opts o;
        struct rlimit nofile;
        struct net_early early;
        char **self = NULL;
        bool raised;
        int first = 0, status = CS_EXIT_SETUP, r;

        r = parse(argc, argv, &o, &name, &first, &err);
        if (r >= 0 && o.accept && plan_only)
                r = cs_error_setx(&err, EINVAL,
                                  "--accept-changes belongs to run: plan shows a waiting trust "
                                  "report but accepts nothing");
        if (r < 0)
                return cli_fail(&err);
        if (o.help) {
                fputs(usage_run, stdout);
                return 0;
        }
        if (!getcwd(cwd, sizeof(cwd))) {
                cs_error_set(&err, errno, "run: cannot find the current directory");
                return cli_fail(&err);
        }
        r = profile_config_load(&config, &err);
        if (r < 0)
                return cli_fail(&err);
        req.config = &config;
        req.self_argv = self = self_argv(argc, argv);
        req.name = name;
        req.cwd = cwd;
        req.args = argv + first;
        req.n_args = (size_t)(argc - first);
        req.image = o.image;
        req.where = o.sandbox ? PLAN_WHERE_SANDBOX : o.host ? PLAN_WHERE_HOST : PLAN_WHERE_DECIDE;
        req.pending = plan_only  ? PLAN_PENDING_SHOW
                      : o.accept ? PLAN_PENDING_ACCEPT
                                 : PLAN_PENDING_REFUSE;
        /* At a terminal, a waiting report is shown and accepted with one key. */
        if (!plan_only && !o.accept && isatty(STDIN_FILENO) && isatty(STDERR_FILENO)) {
                req.confirm = confirm_report;
                req.confirm_ctx = NULL;
        }
        net_early_init(&early);
        raised = raise_nofile_limit(&nofile);
        /* A session's network, started now: pasta's start-up runs while the plan is made.
         * The plan may still decide otherwise (the host, no network, the host's loopback
         * mapped); launch_run_early then stops it. An egress policy needs no pasta. */
        if (!plan_only && !o.host && !plan_info_only(&req) && !config.egress)
                net_early_start(false, &early);
        r = plan_build(&req, &plan, &err);
        if (r >= 0 && plan.vault.state == VAULT_EXEC) {
                net_early_stop(&early);
                status = vault_exec(&plan, name, plan_only, raised ? &nofile : NULL);
                goto done;
        }
        if (r >= 0)
                vault_note(&plan, name);
        if (r >= 0 && plan.host && o.image)
                r = cs_error_setx(&err, EINVAL,
                                  "--image is for a sandboxed launch, and profile %s launches on "
                                  "the host (%s); add --sandbox to run it on the image",
                                  name, plan.host_why);
        if (r >= 0 && plan.host) {
                net_early_stop(&early);
                status = host_launch(&plan, name, plan_only, raised ? &nofile : NULL);
                goto done;
        }
        if (r >= 0 && raised)
                r = spec_add_rlimit(&plan.spec, RLIMIT_NOFILE, &nofile, &err);
        plan.spec.tty = o.tty;
        plan.spec.proc = o.proc;
        if (r >= 0)
                r = runner_spec_complete(&plan.spec, &err);
        for (size_t i = 0; i < plan.warnings.n; i++)
                fprintf(stderr, "%s\n", plan.warnings.msgs[i]);
        spec_print_warnings(&plan.spec);
        if (r >= 0)
                r = seccomp_builtin(plan.spec.seccomp, &filter, &err);
        if (r < 0 || plan_only) {
                status = r < 0 ? cli_fail(&err) : cli_print_plan(&plan.spec);
        } else {
                struct run_trust trust;
                sigset_t pipe_set;

                /* A closed pipe at csandbox's own end-of-session lines (`... | head -1`)
                 * must not end csandbox before the session's check: SIGPIPE stays blocked
                 * (writes fail with EPIPE instead) and is never delivered; every process
                 * csandbox starts clears its mask. */
                sigemptyset(&pipe_set);
                sigaddset(&pipe_set, SIGPIPE);
                sigprocmask(SIG_BLOCK, &pipe_set, NULL);
                login_note(&plan, name);
                /* The records stand for the report should this process not live to write
                 * it; the journal judges every change while the session runs. */
                r = run_trust_begin(&trust, &plan, &config, &err);
                if (r >= 0)
                        r = relay_set_start(&plan.bridges.relays, &err);
                if (r >= 0)
                        r = launch_run_early(&plan.spec, &filter, &early, &status, &err);
                if (r < 0)
                        status = cli_fail(&err);
                bridges_close(&plan.bridges);
                run_trust_end(&trust, &plan);
                run_trust_free(&trust);
        }
        net_early_stop(&early);
done:
        plan_free(&plan);
        profile_config_free(&config);
        if (self)
                free(self[0]);
        free(self);
        return status;
}
