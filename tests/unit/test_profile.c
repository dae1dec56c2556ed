/* Profiles and work trees: claude-profile's layout, the .env rules, the marker and override,
 * the state dir, the work-root refusals and the git dirs a launch protects. Git repos are
 * real ones, made with git under a temporary HOME. */
#include "common/base64.h"
#include "common/error.h"
#include "policy/profile.h"
#include "policy/worktree.h"
#include "policy/stage.h"
#include "policy/vault.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"

/* tpath() returns one of 32 rotating buffers: build the paths a check compares just before
 * it. Every test gets a fresh directory T with T/home as HOME, T/home/.claude-profiles as the
 * profiles base, T/data as XDG_DATA_HOME and no CLAUDE_PROFILE_* settings. */
static char T[PATH_MAX];

static const char *const settings[] = {
    "CLAUDE_PROFILE_PROFILES_BASE",
    "CLAUDE_PROFILE_CLAUDE_BIN",
    "CLAUDE_PROFILE_SANDBOX_IMAGE",
    "CLAUDE_PROFILE_SANDBOX",
    "CLAUDE_PROFILE_SANDBOX_SKIP_PERMISSIONS",
    "CLAUDE_PROFILE_SANDBOX_FORWARD_ENV",
};

static char *tpath(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *tpath(const char *fmt, ...)
{
        static char bufs[32][PATH_MAX + 1024];
        static int next;
        char rel[1000];
        char *b = bufs[next++ % 32];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(rel, sizeof(rel), fmt, ap);
        va_end(ap);
        snprintf(b, sizeof(bufs[0]), "%s/%s", T, rel);
        return b;
}

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
        char cmd[8192];
        va_list ap;
        int st;

        va_start(ap, fmt);
        vsnprintf(cmd, sizeof(cmd), fmt, ap);
        va_end(ap);
        st = system(cmd);
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#define GIT                                                                                        \
        "git -c user.name=csandbox-test -c user.email=test@example.invalid "                       \
        "-c init.defaultBranch=main -c protocol.file.allow=always"

static void scenario_setup(void)
{
        char tmpl[] = "/tmp/test_profile.XXXXXX";

        if (!mkdtemp(tmpl) || !realpath(tmpl, T)) {
                perror("mkdtemp");
                exit(2);
        }
        mkdir(tpath("home"), 0755);
        mkdir(tpath("home/.claude-profiles"), 0755);
        setenv("HOME", tpath("home"), 1);
        setenv("XDG_DATA_HOME", tpath("data"), 1);
        setenv("GIT_CONFIG_NOSYSTEM", "1", 1);
        for (size_t i = 0; i < sizeof(settings) / sizeof(settings[0]); i++)
                unsetenv(settings[i]);
}

static void scenario_teardown(void)
{
        sh("rm -rf '%s'", T);
}

static bool write_file(const char *path, const char *content)
{
        FILE *f = fopen(path, "w");

        if (!f)
                return false;
        fputs(content, f);
        return fclose(f) == 0;
}

/* Load the config and open profile `name` (created when make is true). */
static bool open_profile(const char *name, bool make, struct profile_config *c, struct profile *p)
{
        struct cs_error err = {0};

        if (make)
                mkdir(tpath("home/.claude-profiles/%s", name), 0700);
        if (profile_config_load(c, &err) < 0)
                return fail("config: %s", err.msg);
        if (profile_open(c, name, p, &err) < 0) {
                profile_config_free(c);
                return fail("open: %s", err.msg);
        }
        return true;
}

static bool test_empty_env_value_is_unset(void)
{
        struct profile_config c = {0};
        struct cs_error err = {0};
        bool ok;

        for (size_t i = 0; i < sizeof(settings) / sizeof(settings[0]); i++)
                setenv(settings[i], "", 1);
        setenv("XDG_DATA_HOME", "", 1);
        if (profile_config_load(&c, &err) < 0)
                return fail("%s", err.msg);
        ok = c.sandbox_override == PROFILE_UNSET && c.skip_permissions &&
             strcmp(c.profiles_base, tpath("home/.claude-profiles")) == 0 &&
             strcmp(c.data_home, tpath("home/.local/share")) == 0 &&
             strcmp(c.claude_bin, "claude") == 0 && !c.sandbox_image && c.n_forward_env == 0;
        if (!ok)
                fail("override %d skip %d base %s data %s bin %s image %s fwd %zu",
                     c.sandbox_override, c.skip_permissions, c.profiles_base, c.data_home,
                     c.claude_bin, c.sandbox_image ? c.sandbox_image : "(null)", c.n_forward_env);
        profile_config_free(&c);
        return ok;
}

static bool test_sandbox_override_parses_bool_strings(void)
{
        static const struct {
                const char *v;
                enum profile_tristate want;
        } cases[] = {
            {"1", PROFILE_ON},      {"true", PROFILE_ON}, {"TRUE", PROFILE_ON},
            {"Yes", PROFILE_ON},    {"on", PROFILE_ON},   {"0", PROFILE_OFF},
            {"false", PROFILE_OFF}, {"No", PROFILE_OFF},  {"OFF", PROFILE_OFF},
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct profile_config c = {0};
                struct cs_error err = {0};
                enum profile_tristate got;

                setenv("CLAUDE_PROFILE_SANDBOX", cases[i].v, 1);
                if (profile_config_load(&c, &err) < 0)
                        return fail("%s: %s", cases[i].v, err.msg);
                got = c.sandbox_override;
                profile_config_free(&c);
                if (got != cases[i].want)
                        return fail("CLAUDE_PROFILE_SANDBOX=%s gave %d, want %d", cases[i].v, got,
                                    cases[i].want);
        }
        return true;
}

static bool test_bad_override_names_variable(void)
{
        static const char *const vars[] = {"CLAUDE_PROFILE_SANDBOX",
                                           "CLAUDE_PROFILE_SANDBOX_SKIP_PERMISSIONS"};

        for (size_t i = 0; i < 2; i++) {
                struct profile_config c = {0};
                struct cs_error err = {0};

                for (size_t j = 0; j < 2; j++)
                        unsetenv(vars[j]);
                setenv(vars[i], "maybe", 1);
                if (profile_config_load(&c, &err) >= 0) {
                        profile_config_free(&c);
                        return fail("%s=maybe was accepted", vars[i]);
                }
                if (strncmp(err.msg, vars[i], strlen(vars[i])) != 0 ||
                    err.msg[strlen(vars[i])] != '=' || !strstr(err.msg, "maybe") ||
                    !strstr(err.msg, "true") || !strstr(err.msg, "off"))
                        return fail("message does not name %s and the accepted values: %s", vars[i],
                                    err.msg);
        }
        return true;
}

static bool test_forward_env_split_trims_and_drops_empty(void)
{
        struct profile_config c = {0};
        struct cs_error err = {0};
        bool ok;

        setenv("CLAUDE_PROFILE_SANDBOX_FORWARD_ENV", " A, ,B ,,\tC_D ", 1);
        if (profile_config_load(&c, &err) < 0)
                return fail("%s", err.msg);
        ok = c.n_forward_env == 3 && strcmp(c.forward_env[0], "A") == 0 &&
             strcmp(c.forward_env[1], "B") == 0 && strcmp(c.forward_env[2], "C_D") == 0;
        if (!ok)
                fail("got %zu names", c.n_forward_env);
        profile_config_free(&c);
        return ok;
}

static bool test_home_must_be_absolute(void)
{
        struct profile_config c = {0};
        struct cs_error err = {0};

        setenv("HOME", "relative/home", 1);
        if (profile_config_load(&c, &err) >= 0) {
                profile_config_free(&c);
                return fail("a relative HOME was accepted");
        }
        unsetenv("HOME");
        if (profile_config_load(&c, &err) >= 0) {
                profile_config_free(&c);
                return fail("a missing HOME was accepted");
        }
        return strstr(err.msg, "HOME") ? true : fail("%s", err.msg);
}

static bool test_profile_open_refuses_bad_and_missing_names(void)
{
        static const char *const bad[] = {"", ".", "..", "../x", "a/b"};
        struct profile_config c = {0};
        struct profile p;
        struct cs_error err = {0};
        char long_name[300];

        if (profile_config_load(&c, &err) < 0)
                return fail("%s", err.msg);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                if (profile_open(&c, bad[i], &p, &err) >= 0) {
                        profile_close(&p);
                        profile_config_free(&c);
                        return fail("name '%s' was accepted", bad[i]);
                }
        }
        memset(long_name, 'a', sizeof(long_name) - 1);
        long_name[sizeof(long_name) - 1] = '\0';
        if (profile_open(&c, long_name, &p, &err) >= 0) {
                profile_close(&p);
                profile_config_free(&c);
                return fail("a 299-byte name was accepted");
        }
        if (profile_open(&c, "nope", &p, &err) >= 0) {
                profile_close(&p);
                profile_config_free(&c);
                return fail("a missing profile was opened");
        }
        profile_config_free(&c);
        if (!strstr(err.msg, "Profile 'nope' does not exist. Create it with: csandbox "
                             "add nope"))
                return fail("%s", err.msg);
        return true;
}

static bool test_env_file_parsing_strips_quotes_and_comments(void)
{
        static const char *const want[][2] = {
            {"KEY1", "override"},
            {"KEY2", "quoted"},
            {"KEY3", "single"},
            {"KEY4", "\"mismatch'"},
            {"KEY5", "a=b # not a comment"},
            {"KEY6", ""},
            {"EMPTY", ""},
            {"KEY7", "\"x"},
            {"Q", "\""},
            {"", "no name"},
            {"CRLF", "dos"},
            {"INNER", "say \"hi\""},
            {"U1", "a"},
            {"U2", "b"},
            {"U3", "c"},
            {"U4", "\xe2\x80\xa7 kept"},
            {"BIN", "\xff\xfe"},
        };
        struct profile_config c = {0};
        struct profile p;
        struct profile_env e = {0};
        struct cs_error err = {0};
        bool ok = true;

        if (!open_profile("work", true, &c, &p))
                return false;
        write_file(tpath("home/.claude-profiles/work/.env"), "# comment\n"
                                                             "  KEY1 = value one  \n"
                                                             "KEY2=\"quoted\"\n"
                                                             "\n"
                                                             "KEY3='single'\n"
                                                             "KEY4=\"mismatch'\n"
                                                             "noequals\n"
                                                             "KEY5=a=b # not a comment\n"
                                                             "KEY1=override\n"
                                                             "   #KEYX=indented comment\n"
                                                             "KEY6=\"\"\n"
                                                             "EMPTY=\n"
                                                             "KEY7=\"x\n"
                                                             "Q=\"\n"
                                                             "=no name\n"
                                                             "CRLF=dos\r\n"
                                                             "INNER=\"say \"hi\"\"\n"
                                                             /* U+2028 and U+0085 end lines, as
                                                              * in Python's splitlines(). */
                                                             "U1=a\xe2\x80\xa8U2=b\xc2\x85U3=c\n"
                                                             "U4=\xe2\x80\xa7 kept\n"
                                                             "BIN=\xff\xfe");
        if (profile_env_load(&p, true, &e, &err) < 0) {
                ok = fail("%s", err.msg);
        } else if (e.n != sizeof(want) / sizeof(want[0])) {
                ok = fail("%zu variables, want %zu", e.n, sizeof(want) / sizeof(want[0]));
        } else {
                for (size_t i = 0; i < e.n && ok; i++)
                        if (strcmp(e.names[i], want[i][0]) != 0 ||
                            strcmp(e.values[i], want[i][1]) != 0)
                                ok = fail("#%zu is %s=[%s], want %s=[%s]", i, e.names[i],
                                          e.values[i], want[i][0], want[i][1]);
        }
        profile_env_free(&e);
        profile_close(&p);
        profile_config_free(&c);
        return ok;
}

/* Agent Vault's keys: out of the list whatever else is wrong, an unknown key named with the
 * file, BUNDLE needing PROXY and CA_FINGERPRINT, the fingerprint's form. */
static bool vault_case(const char *dotenv, const char *want_err, const char *want_left)
{
        struct profile_config c = {0};
        struct profile p;
        struct profile_env e = {0};
        struct plan_vault v;
        struct cs_error err = {0};
        char left[256] = "";
        bool ok = true;
        int r;

        if (!open_profile("work", true, &c, &p))
                return false;
        write_file(tpath("home/.claude-profiles/work/.env"), dotenv);
        if (profile_env_read(&p, &e, &err) < 0) {
                ok = fail("%s", err.msg);
                goto out;
        }
        r = vault_split(&p, &e, &v, &err);
        for (size_t i = 0; i < e.n; i++) {
                strncat(left, e.names[i], sizeof(left) - strlen(left) - 2);
                strcat(left, " ");
        }
        if (strcmp(left, want_left) != 0)
                ok = fail("left [%s], want [%s]", left, want_left);
        else if (want_err && (r >= 0 || !strstr(err.msg, want_err) ||
                              !strstr(err.msg, tpath("home/.claude-profiles/work/.env"))))
                ok = fail("want an error with [%s] naming the file, got %d [%s]", want_err, r,
                          r < 0 ? err.msg : "");
        else if (!want_err && r < 0)
                ok = fail("%s", err.msg);
        if (r >= 0)
                vault_free(&v);
out:
        profile_env_free(&e);
        profile_close(&p);
        profile_config_free(&c);
        return ok;
}

#define FP                                                                                         \
        "sha256:9f:2c:00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:ee:ff:00:11:22:33:44:55:66:77:88:" \
        "99:aa:bb:cc:dd"

static bool test_vault_keys_split_and_checked(void)
{
        return vault_case("A=1\nCLAUDE_PROFILE_AGENT_VAULT_PROXY=p:1\nB=2\n", NULL, "A B ") &&
               vault_case("CLAUDE_PROFILE_AGENT_VAULT_BUNDEL=x\nA=1\n",
                          "CLAUDE_PROFILE_AGENT_VAULT_BUNDEL is not one of its settings", "A ") &&
               vault_case("CLAUDE_PROFILE_AGENT_VAULT_BUNDLE=b\nCLAUDE_PROFILE_AGENT_VAULT_CA_"
                          "FINGERPRINT=" FP "\n",
                          "CLAUDE_PROFILE_AGENT_VAULT_PROXY is not set", "") &&
               vault_case("CLAUDE_PROFILE_AGENT_VAULT_BUNDLE=b\nCLAUDE_PROFILE_AGENT_VAULT_PROXY="
                          "p:1\nCLAUDE_PROFILE_AGENT_VAULT_CA_FINGERPRINT=sha256:9f\n",
                          "SHA256:9F:2C", "") &&
               vault_case("CLAUDE_PROFILE_AGENT_VAULT_BUNDLE=b\nCLAUDE_PROFILE_AGENT_VAULT_PROXY="
                          "p:1\nX=y\nCLAUDE_PROFILE_AGENT_VAULT_CA_FINGERPRINT=" FP "\n",
                          NULL, "X ");
}

static bool test_base64_decode_both_alphabets(void)
{
        unsigned char *out = NULL;
        size_t n;
        bool ok = true;

        if (cs_base64_decode("aGk/Pz4+\n", 9, false, &out, &n) < 0 || n != 6 ||
            memcmp(out,
                   "hi?"
                   "?>>",
                   6) != 0)
                ok = fail("standard alphabet");
        free(out);
        out = NULL;
        if (ok && (cs_base64_decode("aGk_Pz4-", 8, true, &out, &n) < 0 || n != 6 ||
                   memcmp(out,
                          "hi?"
                          "?>>",
                          6) != 0))
                ok = fail("url alphabet");
        free(out);
        out = NULL;
        if (ok && (cs_base64_decode("aGk", 3, true, &out, &n) < 0 || n != 2))
                ok = fail("unpadded");
        free(out);
        if (ok && (cs_base64_decode("a", 1, false, &out, &n) != -EINVAL ||
                   cs_base64_decode("a*bc", 4, false, &out, &n) != -EINVAL ||
                   cs_base64_decode("aG==k", 5, false, &out, &n) != -EINVAL))
                ok = fail("invalid input accepted");
        return ok;
}

static bool test_env_created_empty_0600_when_missing(void)
{
        struct profile_config c = {0};
        struct profile p;
        struct profile_env e = {0};
        struct cs_error err = {0};
        struct stat st;
        bool ok = true;

        if (!open_profile("work", true, &c, &p))
                return false;
        umask(022);
        if (profile_env_load(&p, true, &e, &err) < 0)
                ok = fail("%s", err.msg);
        else if (lstat(tpath("home/.claude-profiles/work/.env"), &st) < 0)
                ok = fail(".env was not created");
        else if (!S_ISREG(st.st_mode) || (st.st_mode & 07777) != 0600 || st.st_size != 0)
                ok = fail(".env mode %o size %lld", st.st_mode, (long long)st.st_size);
        else if (e.n != 0)
                ok = fail("%zu variables from an empty file", e.n);
        profile_env_free(&e);
        profile_close(&p);
        profile_config_free(&c);
        return ok;
}

static bool test_symlinked_env_is_refused_and_target_untouched(void)
{
        struct profile_config c = {0};
        struct profile p;
        struct profile_env e = {0};
        struct cs_error err = {0};
        char *target = tpath("secret");
        struct stat st;
        bool ok = true;

        if (!open_profile("work", true, &c, &p))
                return false;
        /* Dangling: the target must not be created. */
        symlink(target, tpath("home/.claude-profiles/work/.env"));
        if (profile_env_load(&p, true, &e, &err) >= 0)
                ok = fail("a dangling .env link was accepted");
        else if (!strstr(err.msg, "Refusing to use") || !strstr(err.msg, "symlink") ||
                 !strstr(err.msg, target))
                ok = fail("message: %s", err.msg);
        else if (lstat(target, &st) == 0)
                ok = fail("the link's target was created");
        /* Pointing at a real file: refused, and the file is neither read nor changed. */
        if (ok) {
                write_file(target, "TOKEN=host-secret\n");
                chmod(target, 0640);
                if (profile_env_load(&p, true, &e, &err) >= 0)
                        ok = fail("a .env link to a file was accepted");
                else if (stat(target, &st) < 0 || st.st_size != 18 || (st.st_mode & 07777) != 0640)
                        ok = fail("the target changed");
        }
        profile_close(&p);
        profile_config_free(&c);
        return ok;
}

static bool test_env_that_is_not_a_file_is_refused(void)
{
        struct profile_config c = {0};
        struct profile p;
        struct profile_env e = {0};
        struct cs_error err = {0};
        bool ok = true;

        if (!open_profile("work", true, &c, &p))
                return false;
        mkfifo(tpath("home/.claude-profiles/work/.env"), 0600);
        if (profile_env_load(&p, true, &e, &err) >= 0)
                ok = fail("a FIFO .env was accepted");
        else if (!strstr(err.msg, "not a regular file"))
                ok = fail("message: %s", err.msg);
        profile_close(&p);
        profile_config_free(&c);
        return ok;
}

static bool test_marker_dangling_link_counts(void)
{
        struct profile_config c = {0};
        struct profile p;
        bool ok = true;

        if (!open_profile("work", true, &c, &p))
                return false;
        if (profile_marked(&p) || profile_sandboxed(&c, &p))
                ok = fail("marked without a marker");
        symlink(tpath("nowhere"), tpath("home/.claude-profiles/work/.sandbox"));
        if (ok && (!profile_marked(&p) || !profile_sandboxed(&c, &p)))
                ok = fail("a dangling marker link does not count");
        c.sandbox_override = PROFILE_OFF;
        if (ok && profile_sandboxed(&c, &p))
                ok = fail("CLAUDE_PROFILE_SANDBOX=0 did not win over the marker");
        unlink(tpath("home/.claude-profiles/work/.sandbox"));
        c.sandbox_override = PROFILE_ON;
        if (ok && !profile_sandboxed(&c, &p))
                ok = fail("CLAUDE_PROFILE_SANDBOX=1 did not win without a marker");
        profile_close(&p);
        profile_config_free(&c);
        return ok;
}

static bool test_state_dir_created_0700(void)
{
        struct profile_config c = {0};
        struct profile p;
        struct cs_error err = {0};
        struct stat st;
        bool ok = true;

        if (!open_profile("work", true, &c, &p))
                return false;
        umask(022);
        if (profile_state_open(&p, &err) < 0)
                ok = fail("%s", err.msg);
        else if (strcmp(p.state_dir, tpath("data/claude-profile/profiles/work")) != 0)
                ok = fail("state dir %s", p.state_dir);
        else if (stat(p.state_dir, &st) < 0 || (st.st_mode & 07777) != 0700)
                ok = fail("state dir mode %o", st.st_mode & 07777);
        else if (fstat(p.state_fd, &st) < 0 || !S_ISDIR(st.st_mode))
                ok = fail("state_fd is not the dir");
        /* An existing, looser dir is tightened. */
        if (ok) {
                chmod(p.state_dir, 0755);
                if (profile_state_open(&p, &err) < 0)
                        ok = fail("again: %s", err.msg);
                else if (stat(p.state_dir, &st) < 0 || (st.st_mode & 07777) != 0700)
                        ok = fail("not tightened: mode %o", st.st_mode & 07777);
        }
        profile_close(&p);
        profile_config_free(&c);
        return ok;
}

static bool test_state_dir_refuses_a_link_below_data_home(void)
{
        struct profile_config c = {0};
        struct profile p;
        struct cs_error err = {0};
        struct stat st;
        bool ok = true;

        if (!open_profile("work", true, &c, &p))
                return false;
        mkdir(tpath("data"), 0700);
        mkdir(tpath("data/claude-profile"), 0700);
        mkdir(tpath("elsewhere"), 0700);
        symlink(tpath("elsewhere"), tpath("data/claude-profile/profiles"));
        if (profile_state_open(&p, &err) >= 0)
                ok = fail("opened a state dir through a link");
        else if (!strstr(err.msg, "symlink"))
                ok = fail("message: %s", err.msg);
        else if (lstat(tpath("elsewhere/work"), &st) == 0)
                ok = fail("created the state dir through the link");
        profile_close(&p);
        profile_config_free(&c);
        return ok;
}

static struct worktree fake_tree(const char *root)
{
        return (struct worktree){.cwd = (char *)root, .root = (char *)root};
}

static bool test_refuse_root_at_home_or_above(void)
{
        const char *home = tpath("home"), *base = tpath("home/.claude-profiles");
        const char *refused[] = {tpath("home"), T, "/"};
        struct cs_error err = {0};
        struct worktree w;

        for (size_t i = 0; i < 3; i++) {
                w = fake_tree(refused[i]);
                if (worktree_refuse(&w, home, base, &err) >= 0)
                        return fail("root %s was allowed", refused[i]);
                if (!strstr(err.msg, "whole home directory") || !strstr(err.msg, refused[i]))
                        return fail("message: %s", err.msg);
        }
        mkdir(tpath("home/project"), 0755);
        w = fake_tree(tpath("home/project"));
        if (worktree_refuse(&w, home, base, &err) < 0)
                return fail("a project under home was refused: %s", err.msg);
        /* Compared resolved: home given through a link is still home. */
        symlink(tpath("home"), tpath("home-link"));
        w = fake_tree(tpath("home"));
        if (worktree_refuse(&w, tpath("home-link"), base, &err) >= 0)
                return fail("home given through a link was not recognised");
        return true;
}

static bool test_refuse_root_overlapping_profiles(void)
{
        const char *home = tpath("home");
        struct cs_error err = {0};
        struct worktree w;
        const char *base = tpath("home/.claude-profiles");
        const char *refused[] = {base, tpath("home/.claude-profiles/work")};

        mkdir(tpath("home/.claude-profiles/work"), 0700);
        for (size_t i = 0; i < 2; i++) {
                w = fake_tree(refused[i]);
                if (worktree_refuse(&w, home, base, &err) >= 0)
                        return fail("root %s was allowed", refused[i]);
                if (!strstr(err.msg, "profiles dir") || !strstr(err.msg, base))
                        return fail("message: %s", err.msg);
        }
        /* A root above a profiles base that is not under home, and a base that does not
         * exist yet (compared as Path.resolve() would). */
        mkdir(tpath("projects"), 0755);
        w = fake_tree(tpath("projects"));
        if (worktree_refuse(&w, home, tpath("projects/p/profiles"), &err) >= 0)
                return fail("an ancestor of a missing profiles base was allowed");
        if (!strstr(err.msg, "profiles dir"))
                return fail("message: %s", err.msg);
        if (worktree_refuse(&w, home, base, &err) < 0)
                return fail("an unrelated project was refused: %s", err.msg);
        return true;
}

static bool git_repo(const char *dir)
{
        return sh("mkdir -p '%s' && cd '%s' && " GIT " init -q && echo x > f && " GIT
                  " add f && " GIT " commit -qm init",
                  dir, dir) == 0;
}

static bool strv_eq(char **got, size_t n, const char *const *want, size_t n_want)
{
        if (n != n_want)
                return fail("%zu entries, want %zu (first: %s)", n, n_want, n ? got[0] : "(none)");
        for (size_t i = 0; i < n; i++)
                if (strcmp(got[i], want[i]) != 0)
                        return fail("#%zu is %s, want %s", i, got[i], want[i]);
        return true;
}

static bool test_outside_a_repo_root_is_cwd(void)
{
        struct worktree w = {0};
        struct cs_error err = {0};
        bool ok = true;

        mkdir(tpath("plain"), 0755);
        if (worktree_detect(tpath("plain"), &w, &err) < 0)
                return fail("%s", err.msg);
        if (strcmp(w.root, tpath("plain")) != 0 || w.common_dir || w.n_git_dirs)
                ok = fail("root %s common %s", w.root, w.common_dir ? w.common_dir : "-");
        worktree_free(&w);
        /* No git at all: the same. */
        char *path = getenv("PATH") ? strdup(getenv("PATH")) : NULL;

        setenv("PATH", tpath("empty-path"), 1);
        if (ok && worktree_detect(tpath("plain"), &w, &err) < 0)
                ok = fail("without git: %s", err.msg);
        else if (ok && (strcmp(w.root, tpath("plain")) != 0 || w.common_dir))
                ok = fail("without git: root %s", w.root);
        if (path)
                setenv("PATH", path, 1);
        free(path);
        worktree_free(&w);
        return ok;
}

static bool test_subdirectory_mounts_the_whole_work_tree(void)
{
        struct worktree w = {0};
        struct cs_error err = {0};
        bool ok = true;

        if (!git_repo(tpath("repo")))
                return fail("git init failed");
        mkdir(tpath("repo/sub"), 0755);
        /* The caller's GIT_DIR must not redirect detection. */
        setenv("GIT_DIR", tpath("nowhere"), 1);
        if (worktree_detect(tpath("repo/sub"), &w, &err) < 0)
                ok = fail("%s", err.msg);
        else if (strcmp(w.cwd, tpath("repo/sub")) != 0 || strcmp(w.root, tpath("repo")) != 0 ||
                 !w.common_dir || strcmp(w.common_dir, tpath("repo/.git")) != 0 || w.common_outside)
                ok = fail("cwd %s root %s common %s outside %d", w.cwd, w.root,
                          w.common_dir ? w.common_dir : "-", w.common_outside);
        unsetenv("GIT_DIR");
        worktree_free(&w);
        return ok;
}

static bool test_linked_worktree_common_dir_outside(void)
{
        struct worktree w = {0};
        struct cs_error err = {0};
        bool ok = true;

        if (!git_repo(tpath("repo")) ||
            sh("cd '%s' && " GIT " worktree add -q -b wt '%s' 2>/dev/null", tpath("repo"),
               tpath("wt")) != 0)
                return fail("git worktree add failed");
        if (worktree_detect(tpath("wt"), &w, &err) < 0)
                return fail("%s", err.msg);
        if (strcmp(w.root, tpath("wt")) != 0 || !w.common_dir ||
            strcmp(w.common_dir, tpath("repo/.git")) != 0 || !w.common_outside)
                ok = fail("root %s common %s outside %d", w.root, w.common_dir ? w.common_dir : "-",
                          w.common_outside);
        else
                ok =
                    strv_eq(w.git_dirs, w.n_git_dirs, (const char *const[]){tpath("repo/.git")}, 1);
        worktree_free(&w);
        return ok;
}

static bool test_submodule_git_dirs_walk_skips_links(void)
{
        struct worktree w = {0};
        struct cs_error err = {0};
        bool ok;

        if (!git_repo(tpath("lib")) || !git_repo(tpath("super")) ||
            sh("cd '%s' && " GIT " submodule add -q '%s' vendor/lib >/dev/null 2>&1",
               tpath("super"), tpath("lib")) != 0)
                return fail("git submodule add failed");
        /* A nested submodule git dir, one sorted before vendor/, a linked git dir and a
         * linked dir that holds one: only the real ones count. */
        if (sh("cd '%s/super/.git/modules' && mkdir -p vendor/lib/modules/inner/objects "
               "a-fake/objects && touch vendor/lib/modules/inner/HEAD a-fake/HEAD && "
               "ln -s '%s/lib/.git' linked-git-dir && mkdir -p '%s/outside/x/objects' && "
               "touch '%s/outside/x/HEAD' && ln -s '%s/outside' linked-parent && "
               "touch plain-file",
               T, T, T, T, T) != 0)
                return fail("set-up failed");
        if (worktree_detect(tpath("super"), &w, &err) < 0)
                return fail("%s", err.msg);
        const char *want[] = {tpath("super/.git"), tpath("super/.git/modules/a-fake"),
                              tpath("super/.git/modules/vendor/lib"),
                              tpath("super/.git/modules/vendor/lib/modules/inner")};

        ok = strv_eq(w.git_dirs, w.n_git_dirs, want, sizeof(want) / sizeof(want[0]));
        if (ok && w.common_outside)
                ok = fail("the repo's own .git counted as outside");
        worktree_free(&w);
        return ok;
}

static bool test_ancestor_mcp_nearest_first_and_no_links(void)
{
        struct worktree w = fake_tree(tpath("a/b/c/d"));
        struct stage_warnings warn = {0};
        struct cs_error err = {0};
        char **got = NULL;
        size_t n = 0, mine = 0;
        bool ok;

        if (sh("mkdir -p '%s/a/b/c/d/.mcp.json.d' && echo '{}' > '%s/a/.mcp.json' && "
               "echo '{}' > '%s/a/b/c/.mcp.json' && ln -s '%s/a/.mcp.json' "
               "'%s/a/b/.mcp.json' && echo '{}' > '%s/a/b/c/d/.mcp.json' && "
               "mkdir '%s/.mcp.json'",
               T, T, T, T, T, T, T) != 0)
                return fail("set-up failed");
        if (worktree_ancestor_mcp(&w, &got, &n, &warn, &err) < 0)
                return fail("%s", err.msg);
        /* The linked one is named, not followed. */
        if (warn.n != 1 || !strstr(warn.msgs[0], "a/b/.mcp.json is a symlink"))
                return fail("no warning for the linked .mcp.json");
        stage_warnings_free(&warn);
        /* Files above T (/tmp/.mcp.json, /.mcp.json) are the host's; only count ours. */
        while (mine < n && strncmp(got[mine], T, strlen(T)) == 0)
                mine++;
        ok = strv_eq(got, mine,
                     (const char *const[]){tpath("a/b/c/.mcp.json"), tpath("a/.mcp.json")}, 2);
        for (size_t i = mine; ok && i < n; i++)
                if (strncmp(got[i], T, strlen(T)) == 0)
                        ok = fail("%s out of order", got[i]);
        for (size_t i = 0; i < n; i++)
                free(got[i]);
        free(got);
        return ok;
}

int main(void)
{
        check_setup = scenario_setup;
        check_teardown = scenario_teardown;
        RUN(test_empty_env_value_is_unset);
        RUN(test_sandbox_override_parses_bool_strings);
        RUN(test_bad_override_names_variable);
        RUN(test_forward_env_split_trims_and_drops_empty);
        RUN(test_home_must_be_absolute);
        RUN(test_profile_open_refuses_bad_and_missing_names);
        RUN(test_env_file_parsing_strips_quotes_and_comments);
        RUN(test_env_created_empty_0600_when_missing);
        RUN(test_vault_keys_split_and_checked);
        RUN(test_base64_decode_both_alphabets);
        RUN(test_symlinked_env_is_refused_and_target_untouched);
        RUN(test_env_that_is_not_a_file_is_refused);
        RUN(test_marker_dangling_link_counts);
        RUN(test_state_dir_created_0700);
        RUN(test_state_dir_refuses_a_link_below_data_home);
        RUN(test_refuse_root_at_home_or_above);
        RUN(test_refuse_root_overlapping_profiles);
        RUN(test_outside_a_repo_root_is_cwd);
        RUN(test_subdirectory_mounts_the_whole_work_tree);
        RUN(test_linked_worktree_common_dir_outside);
        RUN(test_submodule_git_dirs_walk_skips_links);
        RUN(test_ancestor_mcp_nearest_first_and_no_links);
        return failures ? EXIT_FAILURE : EXIT_SUCCESS;
}
