/* Staged copies (reference §2.4–§2.10) in temp dirs, including links planted by an earlier
 * sandboxed session. */
#include "common/cleanup.h"
#include "common/error.h"
#include "common/fileio.h"
#include "common/spawn.h"
#include "common/sha256.h"
#include "policy/profile.h"
#include "policy/stage.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"

static char base[64];

static void put(const char *path, const char *content)
{
        FILE *f = fopen(path, "w");

        if (f) {
                fputs(content, f);
                fclose(f);
        }
}

static char *slurp(const char *path)
{
        static char buf[65536];
        FILE *f = fopen(path, "r");
        size_t n;

        if (!f)
                return NULL;
        n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = '\0';
        return buf;
}

/* base/rel, in one of a few rotating buffers. */
/* A fresh O_PATH fd of a directory in place of fd (the verified dir the callers hand in). */
static int reopen(int fd, const char *dir)
{
        if (fd >= 0)
                close(fd);
        return open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
}

static char *at(const char *rel)
{
        static char bufs[8][512];
        static int i;
        char *b = bufs[i++ % 8];

        snprintf(b, 512, "%s/%s", base, rel);
        return b;
}

/* A fresh profile dir and state dir under base/<name>. */
static void new_profile(const char *name, struct profile *p, char *dir, char *state)
{
        snprintf(dir, PATH_MAX, "%s/%s-profile", base, name);
        snprintf(state, PATH_MAX, "%s/%s-state", base, name);
        mkdir(dir, 0700);
        mkdir(state, 0700);
        p->name = (char *)name;
        p->dir = dir;
        p->state_dir = state;
        p->dir_fd = open(dir, O_PATH | O_DIRECTORY);
        p->state_fd = open(state, O_RDONLY | O_DIRECTORY);
}

static void close_profile(struct profile *p)
{
        close(p->dir_fd);
        close(p->state_fd);
}

static void test_settings_missing_is_created_on_host(void)
{
        char dir[PATH_MAX], state[PATH_MAX], *out = NULL;
        struct stage_warnings w = {0};
        struct cs_error err = {0};
        struct profile p;
        int r;

        new_profile("missing", &p, dir, state);
        r = stage_settings(&p, false, &out, &w, &err);
        CHECKF(r == 0, "%s", err.msg);
        CHECKF(strcmp(slurp(at("missing-profile/settings.json")), "{}\n") == 0, "host file not {}");
        CHECKF(strcmp(slurp(out), "{}\n") == 0, "copy not {}");
        CHECKF(w.n == 0, "warned");
        free(out);
        close_profile(&p);
        PASS();
}

static void test_settings_symlink_gives_empty_and_target_unread(void)
{
        char dir[PATH_MAX], state[PATH_MAX], link[PATH_MAX + 20], *out = NULL;
        struct stage_warnings w = {0};
        struct cs_error err = {0};
        struct profile p;
        int r;

        new_profile("link", &p, dir, state);
        put(at("secret"), "{\"token\": \"s3cret\"}");
        snprintf(link, sizeof(link), "%s/settings.json", dir);
        symlink(at("secret"), link);
        r = stage_settings(&p, false, &out, &w, &err);
        CHECKF(r == 0, "%s", err.msg);
        CHECKF(strcmp(slurp(out), "{}\n") == 0, "copy is %s", slurp(out));
        CHECKF(w.n == 1 && strstr(w.msgs[0], "is a symlink"), "no warning");
        struct stat st;
        CHECKF(lstat(link, &st) == 0 && S_ISLNK(st.st_mode), "host link replaced");
        stage_warnings_free(&w);
        free(out);
        close_profile(&p);
        PASS();
}

/* With the session in bypass mode, the copy records claude's acceptance of it: added at
 * the end, a false one replaced, one already true left byte for byte. */
static void test_settings_copy_records_bypass_acceptance(void)
{
        static const struct {
                const char *in, *want;
        } cases[] = {
            {"{\"a\": 1}", "{\n  \"a\": 1,\n  \"skipDangerousModePermissionPrompt\": true\n}"},
            {"{\"skipDangerousModePermissionPrompt\": false, \"b\": []}",
             "{\n  \"b\": [],\n  \"skipDangerousModePermissionPrompt\": true\n}"},
            {"{ \"skipDangerousModePermissionPrompt\" :true }",
             "{ \"skipDangerousModePermissionPrompt\" :true }"},
            {"[1]", "[1]"},
            {"not json", "not json"},
        };
        char dir[PATH_MAX], state[PATH_MAX], f[PATH_MAX + 20], *out = NULL;
        struct stage_warnings w = {0};
        struct cs_error err = {0};
        struct profile p;

        new_profile("bypass", &p, dir, state);
        snprintf(f, sizeof(f), "%s/settings.json", dir);
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                put(f, cases[i].in);
                CHECKF(stage_settings(&p, true, &out, &w, &err) == 0, "%s", err.msg);
                CHECKF(strcmp(slurp(out), cases[i].want) == 0, "%s gave %s", cases[i].in,
                       slurp(out));
                free(out);
                out = NULL;
        }
        close_profile(&p);
        PASS();
}

static void test_settings_copy_strips_sudo_deny(void)
{
        char dir[PATH_MAX], state[PATH_MAX], f[PATH_MAX + 20], *out = NULL;
        struct stage_warnings w = {0};
        struct cs_error err = {0};
        struct profile p;
        int r;

        new_profile("strip", &p, dir, state);
        snprintf(f, sizeof(f), "%s/settings.json", dir);
        put(f, "{\"permissions\": {\"deny\": [\"Bash(sudo *)\"]}}");
        /* A link planted at the state copy's name is replaced, not written through. */
        symlink(at("victim"), at("strip-state/settings.json"));
        r = stage_settings(&p, false, &out, &w, &err);
        CHECKF(r == 0, "%s", err.msg);
        CHECKF(strcmp(slurp(out), "{\n  \"permissions\": {\n    \"deny\": []\n  }\n}") == 0,
               "copy %s", slurp(out));
        CHECKF(access(at("victim"), F_OK) < 0, "wrote through a link");
        free(out);
        close_profile(&p);
        PASS();
}

static void test_chrome_and_known_hosts(void)
{
        char dir[PATH_MAX], state[PATH_MAX], *out = NULL, *kh = NULL;
        struct cs_error err = {0};
        struct profile p;
        struct stat st;
        int r;

        new_profile("kh", &p, dir, state);
        r = stage_chrome(&p, &out, &err);
        CHECKF(r == 0 && stat(out, &st) == 0 && S_ISDIR(st.st_mode), "%s", err.msg);
        free(out);
        r = stage_user_known_hosts(&p, &kh, &err);
        CHECKF(r == 0 && stat(kh, &st) == 0 && st.st_size == 0 && (st.st_mode & 0777) == 0600, "%s",
               err.msg);
        put(kh, "host key\n");
        free(kh);
        r = stage_user_known_hosts(&p, &kh, &err);
        CHECKF(r == 0 && strcmp(slurp(kh), "host key\n") == 0, "overwritten");
        unlink(kh);
        symlink("/etc/passwd", kh);
        free(kh);
        kh = NULL;
        r = stage_user_known_hosts(&p, &kh, &err);
        CHECKF(r < 0 && !kh, "accepted a linked known_hosts");
        close_profile(&p);
        PASS();
}

static void test_gitconfig_copied_and_missing_is_null(void)
{
        char dir[PATH_MAX], state[PATH_MAX], home[PATH_MAX], *out = NULL;
        struct cs_error err = {0};
        struct profile p;
        int r;

        new_profile("gc", &p, dir, state);
        snprintf(home, sizeof(home), "%s/home", base);
        mkdir(home, 0700);
        r = stage_gitconfig(&p, home, &out, &err);
        CHECKF(r == 0 && !out, "missing gave %s", out);
        r = stage_host_known_hosts(&p, home, &out, &err);
        CHECKF(r == 0 && !out, "missing known_hosts gave %s", out);
        put(at("real-gitconfig"), "[user]\n\tname = x\n");
        symlink(at("real-gitconfig"), at("home/.gitconfig"));
        r = stage_gitconfig(&p, home, &out, &err);
        CHECKF(r == 0 && out && strcmp(slurp(out), "[user]\n\tname = x\n") == 0, "%s", err.msg);
        free(out);
        close_profile(&p);
        PASS();
}

static void test_git_dir_hooks_opened_by_fd_for_the_copy(void)
{
        _cleanup_close_ int gfd = -1, hfd = -1;
        char git[PATH_MAX], *config = NULL;
        struct stage_warnings w = {0};
        struct cs_error err = {0};
        struct stat a, b;
        bool missing = true;
        int r;

        snprintf(git, sizeof(git), "%s/repo.git", base);
        mkdir(git, 0700);
        put(at("repo.git/config"), "[core]\n");
        mkdir(at("repo.git/hooks"), 0755);
        r = stage_git_dir(gfd = reopen(gfd, git), git, &config, &hfd, &missing, &w, &err);
        CHECKF(r == 0 && config && hfd >= 0 && !missing, "%s", err.msg);
        CHECK(strcmp(config, at("repo.git/config")) == 0);
        CHECK(fstat(hfd, &a) == 0 && stat(at("repo.git/hooks"), &b) == 0);
        CHECK(a.st_ino == b.st_ino && a.st_dev == b.st_dev);
        CHECK((fcntl(hfd, F_GETFL) & O_PATH) == 0);
        free(config);
        PASS();
}

/* The copy the runner makes of a hooks dir: links as links, modes, subdirectories; a fifo
 * left out and said; a tree past the entry limit refused. */
static void test_copy_tree_keeps_links_modes_and_limits(void)
{
        _cleanup_close_ int src = -1, dst = -1, dst2 = -1;
        struct cs_copy_budget b = {.max_bytes = 1 << 20, .max_entries = 100, .max_depth = 8};
        char target[PATH_MAX];
        struct stat st;
        ssize_t n;

        mkdir(at("ct-src"), 0755);
        put(at("ct-src/pre-commit"), "#!/bin/sh\n");
        chmod(at("ct-src/pre-commit"), 0751);
        symlink("/etc/shadow", at("ct-src/evil"));
        mkdir(at("ct-src/sub"), 0750);
        put(at("ct-src/sub/x"), "x");
        mkfifo(at("ct-src/fifo"), 0600);
        mkdir(at("ct-dst"), 0755);
        src = open(at("ct-src"), O_RDONLY | O_DIRECTORY);
        dst = open(at("ct-dst"), O_RDONLY | O_DIRECTORY);
        CHECK(src >= 0 && dst >= 0);
        CHECK(cs_copy_tree(src, dst, &b) == 0);
        CHECK(stat(at("ct-dst/pre-commit"), &st) == 0 && (st.st_mode & 0777) == 0751);
        n = readlink(at("ct-dst/evil"), target, sizeof(target) - 1);
        CHECKF(n > 0 && (target[n] = '\0', strcmp(target, "/etc/shadow") == 0), "link not kept");
        CHECK(strcmp(slurp(at("ct-dst/sub/x")), "x") == 0);
        CHECK(stat(at("ct-dst/sub"), &st) == 0 && (st.st_mode & 0777) == 0750);
        CHECK(lstat(at("ct-dst/fifo"), &st) < 0 && b.skipped);
        b = (struct cs_copy_budget){.max_bytes = 1 << 20, .max_entries = 2, .max_depth = 8};
        mkdir(at("ct-dst2"), 0755);
        dst2 = open(at("ct-dst2"), O_RDONLY | O_DIRECTORY);
        CHECK(cs_copy_tree(src, dst2, &b) == -EFBIG);
        PASS();
}

static void test_linked_hooks_and_config_give_no_copy(void)
{
        _cleanup_close_ int gfd = -1, hfd = -1;
        char git[PATH_MAX], *config = NULL;
        struct stage_warnings w = {0};
        struct cs_error err = {0};
        bool missing = true;
        int r;

        snprintf(git, sizeof(git), "%s/linked.git", base);
        mkdir(git, 0700);
        mkdir(at("elsewhere"), 0700);
        symlink(at("elsewhere"), at("linked.git/hooks"));
        symlink(at("repo.git/config"), at("linked.git/config"));
        r = stage_git_dir(gfd = reopen(gfd, git), git, &config, &hfd, &missing, &w, &err);
        CHECKF(r == 0 && !config && hfd < 0 && !missing, "config %s fd %d", config, hfd);
        CHECKF(w.n == 2 && strstr(w.msgs[1], "hooks is a symlink"), "warnings %zu: %s", w.n,
               w.n > 1 ? w.msgs[1] : "");
        stage_warnings_free(&w);
        PASS();
}

static void test_missing_hooks_gives_an_empty_tmpfs(void)
{
        _cleanup_close_ int gfd = -1, hfd = -1;
        char git[PATH_MAX], *config = NULL;
        struct stage_warnings w = {0};
        struct cs_error err = {0};
        bool missing = false;
        int r;

        snprintf(git, sizeof(git), "%s/bare.git", base);
        mkdir(git, 0700);
        r = stage_git_dir(gfd = reopen(gfd, git), git, &config, &hfd, &missing, &w, &err);
        CHECKF(r == 0 && !config && hfd < 0 && missing && w.n == 0, "%s", err.msg);
        PASS();
}

static void test_local_settings_copy_and_link(void)
{
        _cleanup_close_ int dfd = -1;
        char dir[PATH_MAX], state[PATH_MAX], *out = NULL;
        struct stage_warnings w = {0};
        struct cs_error err = {0};
        struct profile p;
        int r;

        new_profile("local", &p, dir, state);
        mkdir(at("wt"), 0700);
        mkdir(at("wt/.claude"), 0700);
        r = stage_local_settings(&p, dfd = reopen(dfd, at("wt/.claude")),
                                 at("wt/.claude/settings.local.json"), &out, &w, &err);
        CHECKF(r == 0 && !out, "missing gave a copy");
        put(at("wt/.claude/settings.local.json"), "{\"a\": 1}");
        r = stage_local_settings(&p, dfd = reopen(dfd, at("wt/.claude")),
                                 at("wt/.claude/settings.local.json"), &out, &w, &err);
        CHECKF(r == 0 && out && strcmp(slurp(out), "{\"a\": 1}") == 0, "%s", err.msg);
        CHECKF(strstr(out, "/local-settings/") && strstr(out, ".json"), "path %s", out);
        free(out);
        unlink(at("wt/.claude/settings.local.json"));
        put(at("secret2"), "{\"s\": 1}");
        symlink(at("secret2"), at("wt/.claude/settings.local.json"));
        r = stage_local_settings(&p, dfd = reopen(dfd, at("wt/.claude")),
                                 at("wt/.claude/settings.local.json"), &out, &w, &err);
        CHECKF(r == 0 && out && strcmp(slurp(out), "{}\n") == 0 && w.n == 1, "%s", err.msg);
        free(out);
        stage_warnings_free(&w);
        close_profile(&p);
        PASS();
}

/* The file itself, by fd: the path resolved through the link, the inode the same, and the
 * copies an earlier csandbox staged under <data>/csandbox/claude removed. */
static void test_claude_opened_in_place_and_old_copies_removed(void)
{
        struct profile_config c = {0};
        struct cs_error err = {0};
        char data[PATH_MAX], bin[PATH_MAX];
        char *out = NULL;
        bool missing = true;
        struct stat st, fst;
        int fd = -1, r;

        snprintf(data, sizeof(data), "%s/data", base);
        mkdir(data, 0700);
        mkdir(at("inst"), 0700);
        mkdir(at("inst/claude"), 0700);
        mkdir(at("inst/claude/versions"), 0700);
        snprintf(bin, sizeof(bin), "%s/inst/claude/versions/2.1.999", base);
        put(bin, "#!/bin/sh\necho fake\n");
        chmod(bin, 0755);
        symlink(bin, at("inst/claude-link"));
        mkdir(at("data/csandbox"), 0700);
        mkdir(at("data/csandbox/claude"), 0700);
        put(at("data/csandbox/claude/2.1.1"), "old copy");
        put(at("data/csandbox/claude/.2.1.2.1234.partial"), "half");
        chmod(at("data/csandbox/claude"), 0500);
        c.data_home = data;
        c.claude_bin = at("inst/claude-link");
        r = stage_claude(&c, &fd, &out, &missing, &err);
        CHECKF(r == 0 && !missing && out && fd >= 0, "%s", err.msg);
        CHECKF(strcmp(out, bin) == 0, "path %s", out);
        CHECK(stat(bin, &st) == 0 && fstat(fd, &fst) == 0);
        CHECK(st.st_ino == fst.st_ino && st.st_dev == fst.st_dev);
        CHECKF(access(at("data/csandbox/claude"), F_OK) < 0, "old copies kept");
        CHECK(access(at("data/csandbox"), F_OK) == 0);
        close(fd);
        free(out);
        PASS();
}

static void test_claude_on_path_missing_and_writable_by_all(void)
{
        struct profile_config c = {0};
        struct cs_error err = {0};
        char data[PATH_MAX], other[PATH_MAX];
        char *out = NULL, *oldpath;
        bool missing = true;
        int fd = -1, r;

        snprintf(data, sizeof(data), "%s/data2", base);
        mkdir(data, 0700);
        mkdir(at("npm"), 0700);
        mkdir(at("npm/lib"), 0700);
        mkdir(at("npm/lib/node_modules"), 0700);
        mkdir(at("npm/lib/node_modules/@anthropic-ai"), 0700);
        mkdir(at("npm/lib/node_modules/@anthropic-ai/claude-code"), 0700);
        mkdir(at("npm/lib/node_modules/@anthropic-ai/claude-code/bin"), 0700);
        put(at("npm/lib/node_modules/@anthropic-ai/claude-code/bin/claude.exe"), "ELF");
        chmod(at("npm/lib/node_modules/@anthropic-ai/claude-code/bin/claude.exe"), 0755);
        mkdir(at("npm/bin"), 0700);
        symlink("../lib/node_modules/@anthropic-ai/claude-code/bin/claude.exe",
                at("npm/bin/claude"));
        /* Found on PATH by name, as `claude` is. */
        oldpath = getenv("PATH") ? strdup(getenv("PATH")) : NULL;
        setenv("PATH", at("npm/bin"), 1);
        c.data_home = data;
        c.claude_bin = "claude";
        r = stage_claude(&c, &fd, &out, &missing, &err);
        CHECKF(r == 0 && fd >= 0 && out && strstr(out, "/claude-code/bin/claude.exe"),
               "npm %s (%s)", out, err.msg);
        close(fd);
        free(out);

        c.claude_bin = "no-such-claude";
        r = stage_claude(&c, &fd, &out, &missing, &err);
        CHECKF(r == 0 && missing && !out && fd < 0, "missing not reported");
        if (oldpath)
                setenv("PATH", oldpath, 1);
        free(oldpath);

        snprintf(other, sizeof(other), "%s/plain-claude", base);
        put(other, "bin");
        chmod(other, 0757);
        c.claude_bin = other;
        r = stage_claude(&c, &fd, &out, &missing, &err);
        CHECKF(r < 0 && fd < 0 && strstr(err.msg, "writable by every user") &&
                   strstr(err.msg, "chmod o-w"),
               "world-writable claude: %d %s", r, err.msg);
        PASS();
}

static void test_git_identity_file(void)
{
        struct profile_config c = {0};
        struct cs_error err = {0};
        char data[128], repo[128], cmd[1024], *out = NULL;
        const char *want = "[include]\n\tpath = /home/appuser/.gitconfig\n[user]\n\tname = "
                           "\"A \\\"q\\\" \\\\ b\"\n[user]\n\temail = \"a@b.c\"\n";
        int r;

        snprintf(data, sizeof(data), "%s/data3", base);
        snprintf(repo, sizeof(repo), "%s/idrepo", base);
        mkdir(data, 0700);
        snprintf(cmd, sizeof(cmd),
                 "git init -q %s && git -C %s config user.name 'A \"q\" \\ b' && git -C %s "
                 "config user.email a@b.c",
                 repo, repo, repo);
        if (system(cmd) != 0) {
                printf("ok %s # SKIP no git\n", __func__);
                return;
        }
        setenv("GIT_CONFIG_GLOBAL", "/nonexistent-must-be-ignored", 1);
        c.data_home = data;
        {
                struct cs_spawned git;

                r = stage_git_identity_start(repo, &git, &err);
                if (r == 0)
                        r = stage_git_identity(&c, &git, false, &out, &err);
        }
        unsetenv("GIT_CONFIG_GLOBAL");
        CHECKF(r == 0 && out, "%s", err.msg);
        CHECKF(strcmp(slurp(out), want) == 0, "content <%s>", slurp(out));
        CHECKF(strstr(out, "/claude-profile/git/identity-") && strlen(strrchr(out, '-') + 1) == 16,
               "path %s", out);
        free(out);
        PASS();
}

/* The launch path's own SHA-256 against the standard's answers and against libcrypto: every
 * length across the padding's one- and two-block boundaries, and a large input. */
static void test_sha256_known_answers_and_large_input(void)
{
        static const unsigned char abc[32] = {0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea,
                                              0x41, 0x41, 0x40, 0xde, 0x5d, 0xae, 0x22, 0x23,
                                              0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17, 0x7a, 0x9c,
                                              0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00, 0x15, 0xad};
        static const unsigned char empty[32] = {0xe3, 0xb0, 0xc4, 0x42, 0x98, 0xfc, 0x1c, 0x14,
                                                0x9a, 0xfb, 0xf4, 0xc8, 0x99, 0x6f, 0xb9, 0x24,
                                                0x27, 0xae, 0x41, 0xe4, 0x64, 0x9b, 0x93, 0x4c,
                                                0xa4, 0x95, 0x99, 0x1b, 0x78, 0x52, 0xb8, 0x55};
        unsigned char md[32], want[32];
        unsigned int n = 0;
        size_t big = 300000;
        unsigned char *buf = malloc(big);

        CHECK(buf);
        CHECK(cs_sha256("abc", 3, md) == 0 && memcmp(md, abc, 32) == 0);
        CHECK(cs_sha256("", 0, md) == 0 && memcmp(md, empty, 32) == 0);
        for (size_t i = 0; i < big; i++)
                buf[i] = (unsigned char)(i * 7 + (i >> 9));
        CHECK(EVP_Digest(buf, big, want, &n, EVP_sha256(), NULL) == 1 && n == 32);
        CHECK(cs_sha256(buf, big, md) == 0 && memcmp(md, want, 32) == 0);
        for (size_t len = 0; len <= 300; len++) {
                CHECK(EVP_Digest(buf + len, len, want, &n, EVP_sha256(), NULL) == 1);
                CHECKF(cs_sha256(buf + len, len, md) == 0 && memcmp(md, want, 32) == 0,
                       "length %zu", len);
        }
        {
                /* FIPS 180-4's two-block example */
                static const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
                static const unsigned char two[32] = {
                    0x24, 0x8d, 0x6a, 0x61, 0xd2, 0x06, 0x38, 0xb8, 0xe5, 0xc0, 0x26,
                    0x93, 0x0c, 0x3e, 0x60, 0x39, 0xa3, 0x3c, 0xe4, 0x59, 0x64, 0xff,
                    0x21, 0x67, 0xf6, 0xec, 0xed, 0xd4, 0x19, 0xdb, 0x06, 0xc1};

                CHECK(cs_sha256(m, strlen(m), md) == 0 && memcmp(md, two, 32) == 0);
        }
        free(buf);
        PASS();
}

int main(void)
{
        char cmd[PATH_MAX + 16];

        test_sha256_known_answers_and_large_input();

        snprintf(base, sizeof(base), "/tmp/test-stage-XXXXXX");
        if (!mkdtemp(base))
                return 1;
        test_settings_missing_is_created_on_host();
        test_settings_symlink_gives_empty_and_target_unread();
        test_settings_copy_strips_sudo_deny();
        test_settings_copy_records_bypass_acceptance();
        test_chrome_and_known_hosts();
        test_gitconfig_copied_and_missing_is_null();
        test_git_dir_hooks_opened_by_fd_for_the_copy();
        test_copy_tree_keeps_links_modes_and_limits();
        test_linked_hooks_and_config_give_no_copy();
        test_missing_hooks_gives_an_empty_tmpfs();
        test_local_settings_copy_and_link();
        test_claude_opened_in_place_and_old_copies_removed();
        test_claude_on_path_missing_and_writable_by_all();
        test_git_identity_file();
        snprintf(cmd, sizeof(cmd), "chmod -R u+rwx %s; rm -rf %s", base, base);
        if (system(cmd) != 0)
                return 1;
        return failures ? 1 : 0;
}
