/* `csandbox doctor`: whether this machine and user can run sandboxes, each check done for
 * real (not guessed from versions), each failure with its fix. */
#include "cmd_doctor.h"
#include "cli.h"

#include "../runner/probe.h"
#include "../runner/runner.h"

#include "cmd_exec.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/path.h"
#include "../image/store/store.h"
#include "../policy/bind.h"
#include "../policy/plan.h"
#include "../policy/profile.h"
#include "../policy/worktree.h"
#include "../policy/seccomp.h"
#include "../policy/stage.h"
#include "../policy/trust.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int problems;
/* What the egress line depends on: whether any sandbox, and `run`'s network, started. */
static bool sandbox_ok, network_ok;

static void report(bool ok, const char *what, const char *detail)
{
        printf("%-5s %-18s %s\n", ok ? "ok" : "FAIL", what, detail);
        if (!ok)
                problems++;
}

/* What a launch does first: a user namespace with a mount namespace. */
static void check_userns(void)
{
        struct cs_error err = {0};

        if (runner_probe_userns(&err) < 0)
                report(false, "user namespaces", err.msg);
        else
                report(true, "user namespaces", "a user and a mount namespace can be created");
}

/* A throwaway sandbox built by the `exec` flag parser and run by the launch code `run` uses:
 * id maps, hostname, loopback, mounts, pivot_root, proc, the filter and the payload. The
 * first failing step comes back in err with the same diagnosis `run` would print. */
static int try_sandbox(const char *const *args, int nargs, struct cs_error *err)
{
        struct sandbox_spec s;
        struct image_ref img = {.lock_fd = -1};
        struct sock_fprog filter = {0};
        bool plan, help;
        int status = 0;
        int r;

        r = parse_exec(nargs, (char **)args, &s, &img, &plan, &help, err);
        if (r >= 0)
                r = seccomp_builtin(SPEC_SECCOMP_DEFAULT, &filter, err);
        if (r >= 0)
                r = launch_run(&s, &filter, &status, err);
        if (r >= 0 && status != 0)
                r = cs_error_setx(err, EPROTO,
                                  "the test command inside exited with status %d (expected 0)",
                                  status);
        spec_free(&s);
        image_ref_free(&img);
        return r;
}

static void check_sandbox(void)
{
        static const char *const args[] = {"--net", "none", "--", "/bin/sh", "-c", "exit 0"};
        struct cs_error err = {0};

        sandbox_ok = try_sandbox(args, sizeof(args) / sizeof(*args), &err) >= 0;
        if (!sandbox_ok)
                report(false, "sandbox", err.msg);
        else if (runner_notes_seen() & RUNNER_NOTE_HOSTNAME)
                report(true, "sandbox",
                       "a throwaway sandbox started: id maps, loopback, mounts, pivot_root, "
                       "proc, capabilities, seccomp (not the hostname: see its note)");
        else
                report(true, "sandbox",
                       "a throwaway sandbox started: id maps, hostname, loopback, mounts, "
                       "pivot_root, proc, capabilities, seccomp");
}

/* What the throwaway sandboxes adapted to, once each, where a launch says nothing of it (the
 * hostname) or says it once on this machine (the /proc). */
static void print_notes(void)
{
        unsigned seen = runner_notes_seen();
        const char *cause, *fix;
        char line[2048];

        if (seen & RUNNER_NOTE_HOSTNAME)
                printf("%-5s %-18s %s%s\n", "note", "hostname",
                       "setting the sandbox's hostname was refused (a container engine's "
                       "seccomp profile, as podman's default, allows sethostname only with "
                       "CAP_SYS_ADMIN), so sessions keep the container's hostname; nothing "
                       "else depends on it ",
                       runner_in_pod() ? "(in a pod: SYS_ADMIN in the container's "
                                         "securityContext.capabilities.add, or its "
                                         "seccompProfile.type Unconfined, lets it be set)"
                                       : "(podman: --cap-add SYS_ADMIN, or --security-opt "
                                         "seccomp=unconfined, lets it be set)");
        if (seen & RUNNER_NOTE_PROC_BIND) {
                runner_proc_words(&cause, &fix);
                snprintf(line, sizeof(line),
                         "the kernel refused the sandbox a fresh /proc (%s), so csandbox binds "
                         "the outer /proc read-only and sessions see its processes, and a "
                         "csandbox nested in a session cannot start; %s for a /proc of the "
                         "sandbox's own",
                         cause, fix);
                printf("%-5s %-18s %s\n", "note", "proc", line);
        }
}

static void check_openat2(void)
{
        long r = syscall(SYS_openat2, AT_FDCWD, "/", NULL, 0);

        if (r < 0 && (errno == ENOSYS || errno == EPERM))
                report(true, "openat2",
                       "refused here (old kernel or a container's seccomp profile); csandbox "
                       "walks paths itself instead");
        else
                report(true, "openat2", "available (destinations resolved with RESOLVE_IN_ROOT)");
}

/* `run`'s network as `run` decides it (runner_spec_complete): pasta, or csandbox's relay
 * where /dev/net/tun cannot be used, or none where the machine has no network; each tried
 * in a throwaway sandbox. */
static void check_network(void)
{
        struct sandbox_spec s;
        struct net_helper h = {.pid = -1, .ready_fd = -1, .err_fd = -1, .exit_fd = -1};
        struct cs_error err = {0};
        char line[5000];

        spec_init(&s);
        s.net = SPEC_NET_PASTA;
        /* A default route inside (IPv4 or IPv6) proves pasta configured the namespace. */
        static const char *const args[] = {
            "--net",
            "pasta",
            "--",
            "/bin/sh",
            "-c",
            ("grep -qE '^[^[:space:]]+[[:space:]]+00000000[[:space:]]' /proc/net/route || "
             "grep -E '^0{32} 00 ' /proc/net/ipv6_route | grep -qvE ' lo$'")};
        static const char *const relay_args[] = {"--net", "relay", "--", "/bin/sh", "-c", "exit 0"};

        if (runner_spec_complete(&s, &err) < 0) {
                report(false, "network", err.msg);
        } else if (s.net == SPEC_NET_NONE) {
                static const char *const none_args[] = {"--net",   "none", "--",
                                                        "/bin/sh", "-c",   "exit 0"};
                /* the launch's own note: "csandbox: the session has no network: ..." */
                static const char lead[] = "the session has no network: ";
                const char *why = s.n_warnings ? s.warnings[s.n_warnings - 1] : "";
                const char *none = strstr(why, lead);

                none = none ? none + sizeof(lead) - 1 : runner_no_network_words();

                network_ok =
                    try_sandbox(none_args, sizeof(none_args) / sizeof(*none_args), &err) >= 0;
                if (network_ok)
                        snprintf(line, sizeof(line),
                                 "`run` sessions start without a network, and say so: %s", none);
                else
                        snprintf(line, sizeof(line),
                                 "no sandbox starts here (%s), nor would it have a network: %s",
                                 err.msg, none);
                report(network_ok, "network", line);
        } else if (s.net == SPEC_NET_RELAY) {
                /* the launch's own note: the cause, then the fix */
                const char *why = s.n_warnings ? s.warnings[0] : "";
                const char *fix = s.n_warnings > 1 ? s.warnings[1] : "";
                const char *cause = strstr(why, "): ");

                if (try_sandbox(relay_args, sizeof(relay_args) / sizeof(*relay_args), &err) < 0) {
                        snprintf(line, sizeof(line),
                                 "pasta cannot run (%s), and csandbox's relay, the network "
                                 "`run` uses then, cannot start either: %s",
                                 cause ? cause + 3 : why, err.msg);
                        report(false, "network", line);
                } else {
                        network_ok = true;
                        snprintf(line, sizeof(line),
                                 "csandbox's relay (TCP to any host and DNS only; no UDP, ICMP "
                                 "or connections into the session) is `run`'s and `--net "
                                 "pasta`'s network here, started for a throwaway sandbox: %s%s%s",
                                 cause ? cause + 3 : why, fix[0] ? ". " : "",
                                 fix[0] ? fix + strlen("csandbox: ") : "");
                        report(true, "network", line);
                }
        } else if (netns_helper_find(&s, &h, &err) < 0) {
                report(false, "network (pasta)", err.msg);
        } else if (try_sandbox(args, sizeof(args) / sizeof(*args), &err) < 0) {
                if (err.err == EPROTO)
                        cs_error_wrap(&err, "%s started, but the sandbox has no default route",
                                      h.path);
                report(false, "network (pasta)", err.msg);
        } else {
                network_ok = true;
                snprintf(line, sizeof(line),
                         "%s started for a throwaway sandbox and gave it a route: `--net pasta` "
                         "and `run` have a network",
                         h.path);
                report(true, "network (pasta)", line);
        }
        netns_helper_stop(&h);
        spec_free(&s);
}

/* An allowlist session, for real: the rules loaded in a fresh user and
 * network namespace, the proxy started. Not a problem for the exit status: `open`, the
 * default, and `none` do not need it. */
static void check_egress(void)
{
        static const char *const args[] = {"--egress", "allowlist", "--",
                                           "/bin/sh",  "-c",        "exit 0"};
        struct cs_error err = {0};
        char line[5000];

        if (try_sandbox(args, sizeof(args) / sizeof(*args), &err) < 0) {
                snprintf(line, sizeof(line), "allowlist sessions cannot start here (%s): %s",
                         !sandbox_ok  ? "no sandbox can: see the sandbox line"
                         : network_ok ? "open and none can"
                                      : "none can",
                         err.msg);
                printf("%-5s %-18s %s\n", "no", "egress (allowlist)", line);
        } else {
                report(true, "egress (allowlist)",
                       "a throwaway allowlist session started: nftables "
                       "rules accepted in its own network namespace, csandbox's proxy and "
                       "resolver started");
        }
}

/* `run`'s egress with the profile's own settings (CLAUDE_PROFILE_SANDBOX_EGRESS, its lists
 * and file), read by the code `run` uses: an allowlist session tried with that list, and
 * counted, since `run` needs it; doctor's throwaway sandbox otherwise as try_sandbox's. */
static int try_profile_egress(const struct profile_config *c, struct cs_error *err)
{
        static const char *const args[] = {"--", "/bin/sh", "-c", "exit 0"};
        struct sandbox_spec s;
        struct image_ref img = {.lock_fd = -1};
        struct sock_fprog filter = {0};
        bool plan, help;
        int status = 0;
        int r;

        r = parse_exec(sizeof(args) / sizeof(*args), (char **)args, &s, &img, &plan, &help, err);
        if (r >= 0)
                r = plan_egress_spec(&s, c, err);
        if (r >= 0)
                r = seccomp_builtin(SPEC_SECCOMP_DEFAULT, &filter, err);
        if (r >= 0)
                r = launch_run(&s, &filter, &status, err);
        if (r >= 0 && status != 0)
                r = cs_error_setx(err, EPROTO,
                                  "the test command inside exited with status %d (expected 0)",
                                  status);
        spec_free(&s);
        image_ref_free(&img);
        return r;
}

static void check_profile_egress(const struct profile_config *c)
{
        struct cs_error err = {0};
        char line[CS_ERROR_MAX + 200];

        if (try_profile_egress(c, &err) < 0) {
                snprintf(line, sizeof(line),
                         "CLAUDE_PROFILE_SANDBOX_EGRESS=allowlist, and an allowlist session "
                         "cannot start here: %s",
                         err.msg);
                report(false, "egress (allowlist)", line);
        } else if (runner_no_network()) {
                snprintf(line, sizeof(line),
                         "CLAUDE_PROFILE_SANDBOX_EGRESS=allowlist: a throwaway session with the "
                         "profile's list started, but %s",
                         runner_no_network_words());
                report(false, "egress (allowlist)", line);
        } else {
                report(true, "egress (allowlist)",
                       "CLAUDE_PROFILE_SANDBOX_EGRESS=allowlist: a throwaway session with the "
                       "profile's list started (nftables rules in its own network "
                       "namespace, csandbox's proxy and resolver): `run` has its network");
        }
}

/* The profile's egress mode, as `run` reads it; open where the settings cannot be read (the
 * claude-profile line says why). */
static enum spec_egress profile_egress(const struct profile_config *c, bool loaded)
{
        enum spec_egress e = SPEC_EGRESS_OPEN;

        if (loaded && c->egress && !spec_egress_parse(c->egress, &e))
                e = SPEC_EGRESS_OPEN;
        return e;
}

/* The profile named on the command line is one `run` would take. */
static int check_profile(const struct profile_config *c, bool loaded, const char *name)
{
        struct profile p = {.dir_fd = -1, .state_fd = -1};
        struct cs_error err = {0};
        char line[CS_ERROR_MAX + 64];

        if (!loaded)
                return 0;
        if (profile_open(c, name, &p, &err) < 0) {
                report(false, "profile", err.msg);
                return -1;
        }
        snprintf(line, sizeof(line), "%s, judged with the CLAUDE_PROFILE_* settings `run` reads",
                 p.dir);
        report(true, "profile", line);
        profile_close(&p);
        return 0;
}

static void check_map_range(void)
{
        struct cs_error err = {0};
        static const char *const args[] = {"--map-range", "--net", "none",  "--",
                                           "/bin/sh",     "-c",    "exit 0"};

        /* Only --map-range needs it: a note, not a failure. */
        if (runner_probe_map_range(&err) < 0 ||
            try_sandbox(args, sizeof(args) / sizeof(*args), &err) < 0)
                printf("%-5s %-18s %s\n", "note", "--map-range", err.msg);
        else
                report(true, "--map-range",
                       "a throwaway sandbox with 65536 ids through the subordinate range "
                       "started");
}

/* `run`'s verdict on the current directory's owner: its git work tree (else itself) is the
 * caller's or root's, or git's safe.directory lists it (plan_tree_owner_check). */
static void check_work_tree(void)
{
        _cleanup_(worktree_free) struct worktree w = {0};
        _cleanup_free_ char *cwd = getcwd(NULL, 0);
        _cleanup_close_ int fd = -1;
        struct plan_tree_owner owner;
        struct cs_error err = {0};
        char line[CS_ERROR_MAX + 64];

        if (!cwd || worktree_detect(cwd, &w, &err) < 0) {
                report(false, "work tree", cwd ? err.msg : "cannot read the current directory");
                return;
        }
        fd = open(w.root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
                cs_error_set(&err, errno, "open the work tree %s", w.root);
                report(false, "work tree", err.msg);
        } else if (plan_tree_owner_check(fd, w.root, w.common_dir != NULL,
                                         w.common_outside ? w.common_dir : NULL, &owner,
                                         &err) < 0) {
                report(false, "work tree", err.msg);
        } else {
                snprintf(line, sizeof(line), "%s: %s", w.root,
                         owner.listed ? "another uid's, listed in git's safe.directory, as `run` "
                                        "takes it"
                         : owner.uid == getuid() ? "yours"
                         : owner.uid == 0        ? "root's, as `run` takes it"
                                                 : "an owner this user namespace does not map "
                                                   "(the system's), as `run` takes it");
                report(true, "work tree", line);
        }
}

/* The record `run` keeps while a session runs, so that a killed csandbox leaves a report the
 * next launch waits on: it names csandbox's process by what /proc says of it. */
static void check_session_record(void)
{
        struct cs_error err = {0};
        char boot[40], line[CS_ERROR_MAX + 300];
        unsigned long long start;
        pid_t pid;

        if (trust_session_identity(&pid, boot, &start, &err) == 0) {
                report(true, "session record",
                       "/proc names this process (pid, start time, boot id): a csandbox killed "
                       "during a session leaves a record the next launch waits on");
                return;
        }
        snprintf(line, sizeof(line),
                 "no running-session record can be kept: %s. A csandbox killed during a "
                 "session then leaves nothing that makes the next launch wait until its "
                 "changes are checked. Run csandbox where /proc is this container's own, with "
                 "/proc/sys/kernel/random/boot_id readable",
                 err.msg);
        printf("%-5s %-18s %s\n", "note", "session record", line);
}

static void check_claude(void)
{
        struct profile_config c = {0};
        struct cs_error err = {0};
        _cleanup_free_ char *line = NULL;
        bool found;

        if (profile_config_load(&c, &err) < 0) {
                report(false, "claude-profile", err.msg);
                return;
        }
        line = cs_find_program(c.claude_bin);
        found = line != NULL;
        if (found) {
                char detail[5100];

                snprintf(detail, sizeof(detail), "%s; profiles in %s", line, c.profiles_base);
                report(true, "claude", detail);
        } else if (claude_blocked(c.claude_bin, &err) < 0) {
                report(false, "claude", err.msg);
        } else {
                report(false, "claude",
                       "not installed (no `claude` on PATH): install it with `npm install -g "
                       "@anthropic-ai/claude-code`, or point CLAUDE_PROFILE_CLAUDE_BIN at it");
        }
        profile_config_free(&c);
}

/* `run` with egress allowlist or none does not use pasta: its failure (the network line's
 * network_problems) is the `--net pasta` sandboxes' only, said in a note. */
static void network_unused(enum spec_egress egress, int network_problems)
{
        if (egress == SPEC_EGRESS_OPEN || network_problems == 0)
                return;
        problems -= network_problems;
        printf("%-5s %-18s %s\n", "note", "run (network)",
               egress == SPEC_EGRESS_NONE
                   ? "pasta's failure above stops `exec --net pasta` only: "
                     "CLAUDE_PROFILE_SANDBOX_EGRESS=none gives `run`'s sessions no network"
                   : "pasta's failure above stops `exec --net pasta` only: "
                     "CLAUDE_PROFILE_SANDBOX_EGRESS=allowlist gives `run`'s sessions csandbox's "
                     "proxy (the egress line)");
}

int cmd_doctor(int argc, char **argv)
{
        struct profile_config config = {0};
        struct cs_error settings_err = {0};
        enum spec_egress egress;
        int network_from;
        bool loaded;

        if (argc > 0 && (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0)) {
                puts("Usage: csandbox doctor [PROFILE]\n\nChecks, by trying them, what csandbox "
                     "needs on this machine for this user: user namespaces, a throwaway sandbox "
                     "through the launch code `run` uses, openat2, pasta and /dev/net/tun (a "
                     "sandbox with pasta; csandbox's relay where the device cannot be used, no "
                     "network where the machine has none: each as `run` decides), an egress "
                     "allowlist session (nftables in the session's network "
                     "namespace), a subordinate id range (for --map-range only), whether `run` "
                     "takes the current directory's work tree (another uid's only when git's "
                     "safe.directory lists it) and claude. It judges with the CLAUDE_PROFILE_* "
                     "settings `run` reads: with CLAUDE_PROFILE_SANDBOX_EGRESS=allowlist the "
                     "allowlist session (with the profile's list) counts and the network does "
                     "not, with none neither counts, with open (the default) the network "
                     "counts. PROFILE, when given, must be a profile `run` can open. Exit "
                     "status 0 when `csandbox run` can work, 1 otherwise.");
                return 0;
        }
        if (argc > 1)
                return cli_usage_error("doctor", "unexpected argument `%s`", argv[1]);
        if (argc > 0 && argv[0][0] == '-')
                return cli_usage_error("doctor", "unknown option `%s`", argv[0]);
        loaded = profile_config_load(&config, &settings_err) == 0;
        egress = profile_egress(&config, loaded);
        runner_notes_quiet();
        if (argc > 0)
                check_profile(&config, loaded, argv[0]);
        check_userns();
        check_sandbox();
        check_openat2();
        network_from = problems;
        check_network();
        network_from = problems - network_from;
        if (egress == SPEC_EGRESS_ALLOWLIST)
                check_profile_egress(&config);
        else
                check_egress();
        network_unused(egress, network_from);
        print_notes();
        check_map_range();
        check_work_tree();
        check_session_record();
        check_claude();
        profile_config_free(&config);
        fflush(stdout);
        return problems ? 1 : 0;
}
