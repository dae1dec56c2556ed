/* Unit tests for `podman run`'s option parser: podman's syntax, and the `csandbox exec`
 * flags each option becomes; and for the other subcommands' one option parser
 * (cli/podman_opts.c). */
#include "cli/podman.h"
#include "cli/podman_opts.h"
#include "common/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

static int parse(struct podman_run *r, struct cs_error *err, char **argv)
{
        int argc = 0;

        while (argv[argc])
                argc++;
        memset(err, 0, sizeof(*err));
        return podman_run_parse(argc, argv, r, err);
}

/* The exec flags as one space-joined string. */
static const char *flags(const struct podman_run *r)
{
        static char buf[4096];

        buf[0] = '\0';
        for (size_t i = 0; i < r->n_exec_args; i++) {
                if (i)
                        strcat(buf, " ");
                strcat(buf, r->exec_args[i]);
        }
        return buf;
}

static void test_syntax_forms_and_the_image_ends_the_options(void)
{
        struct podman_run r;
        struct cs_error err;
        char *argv[] = {"-it", "--rm", "-eA=1", "-e", "B=2", "--env=C=3", "--name=x",
                        "-w",  "/w",   "img",   "-v", "cmd", NULL};

        CHECK(parse(&r, &err, argv) == 0);
        CHECK(r.interactive && r.tty && r.rm && !r.detach);
        CHECK(strcmp(r.image, "img") == 0);
        /* after the image, everything is the command, options included */
        CHECK(r.n_cmd == 2 && strcmp(r.cmd[0], "-v") == 0 && strcmp(r.cmd[1], "cmd") == 0);
        CHECKF(strcmp(flags(&r), "--setenv A 1 --setenv B 2 --setenv C 3") == 0, "%s", flags(&r));
        CHECK(strcmp(r.name, "x") == 0 && strcmp(r.workdir, "/w") == 0);
        podman_run_free(&r);
        PASS();
}

static void test_double_dash_and_bool_values(void)
{
        struct podman_run r;
        struct cs_error err;
        char *argv[] = {"--detach=true", "--rm=false", "--", "-weird-image", NULL};

        CHECK(parse(&r, &err, argv) == 0);
        CHECK(r.detach && !r.rm && strcmp(r.image, "-weird-image") == 0 && r.n_cmd == 0);
        podman_run_free(&r);
        char *bad[] = {"--rm=maybe", "img", NULL};
        CHECK(parse(&r, &err, bad) < 0 && strstr(err.msg, "--rm=maybe"));
        podman_run_free(&r);
        PASS();
}

static void test_env_name_alone_takes_the_callers_value_or_nothing(void)
{
        struct podman_run r;
        struct cs_error err;
        char *argv[] = {"-e", "PODMAN_UNIT_SET", "-e", "PODMAN_UNIT_UNSET", "img", NULL};

        setenv("PODMAN_UNIT_SET", "v", 1);
        unsetenv("PODMAN_UNIT_UNSET");
        CHECK(parse(&r, &err, argv) == 0);
        CHECKF(strcmp(flags(&r), "--setenv PODMAN_UNIT_SET v") == 0, "%s", flags(&r));
        podman_run_free(&r);
        PASS();
}

static void test_volumes_and_mounts_become_binds(void)
{
        struct podman_run r;
        struct cs_error err;
        char *argv[] = {"-v",
                        "/a:/b",
                        "--volume=/c:/d:ro,Z",
                        "--mount",
                        "type=bind,source=/e,target=/f,readonly",
                        "--mount=type=bind,src=/g,dst=/h",
                        "--mount",
                        "type=tmpfs,target=/t",
                        "--tmpfs",
                        "/u",
                        "img",
                        NULL};

        CHECK(parse(&r, &err, argv) == 0);
        CHECKF(strcmp(flags(&r), "--bind /a /b --ro-bind /c /d --ro-bind /e /f --bind /g /h "
                                 "--tmpfs /t --tmpfs /u") == 0,
               "%s", flags(&r));
        podman_run_free(&r);
        PASS();
}

static void test_refusals_name_what_they_refuse(void)
{
        static const char *const cases[][3] = {
            {"--publish", "80:80/udp", "tcp"},
            {"-p", "8000-8010:80", "ranges"},
            {"-p", "nohost:8080:80", "not an IP address"},
            {"-v", "no/such:/x", "not a volume name"},
            {"--memory", "lots", "--memory"},
            {"--platform", "linux/no-such-arch", "platform"},
            {"-v", "./rel:/x", "relative"},
            {"-v", "/x", "anonymous"},
            {"-v", "/a:rel", "not absolute"},
            {"-v", "/a:/b:U", "`U`"},
            {"--mount", "type=volume,target=/x", "type=volume"},
            {"--mount", "type=bind,source=/a,target=/b,bind-propagation=shared",
             "bind-propagation"},
            {"--network", "container:x", "container:x"},
            {"--pull", "newer", "newer"},
            {"--name", "-bad", "--name"},
            {"--entrypoint", "[1]", "--entrypoint"},
            {"-w", "rel", "not an absolute path"},
            {"--tmpfs", "/t:size=1m", "--tmpfs"},
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct podman_run r;
                struct cs_error err;
                char *argv[] = {(char *)cases[i][0], (char *)cases[i][1], "img", NULL};

                CHECKF(parse(&r, &err, argv) < 0, "%s %s was accepted", cases[i][0], cases[i][1]);
                CHECKF(strstr(err.msg, cases[i][2]), "%s %s: %s", cases[i][0], cases[i][1],
                       err.msg);
                podman_run_free(&r);
        }
        PASS();
}

static void test_network_spellings(void)
{
        static const char *const cases[][2] = {
            {"--network=none", "none"},   {"--net=host", "host"},  {"--network=default", "host"},
            {"--network=bridge", "host"}, {"--net=pasta", "host"}, {"--net=slirp4netns", "host"},
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct podman_run r;
                struct cs_error err;
                char *argv[] = {(char *)cases[i][0], "img", NULL};

                CHECKF(parse(&r, &err, argv) == 0, "%s: %s", cases[i][0], err.msg);
                CHECKF(strcmp(r.net, cases[i][1]) == 0, "%s -> %s", cases[i][0], r.net);
                podman_run_free(&r);
        }
        PASS();
}

static void test_entrypoint_forms(void)
{
        struct podman_run r;
        struct cs_error err;
        char *json[] = {"--entrypoint", "[\"/bin/sh\", \"-c\"]", "img", NULL};
        char *plain[] = {"--entrypoint=/bin/echo hi", "img", NULL};
        char *empty[] = {"--entrypoint", "", "img", NULL};

        CHECK(parse(&r, &err, json) == 0);
        CHECK(r.has_entrypoint && r.n_entrypoint == 2 && strcmp(r.entrypoint[1], "-c") == 0);
        podman_run_free(&r);
        /* a string is one word, as podman takes it */
        CHECK(parse(&r, &err, plain) == 0);
        CHECK(r.n_entrypoint == 1 && strcmp(r.entrypoint[0], "/bin/echo hi") == 0);
        podman_run_free(&r);
        CHECK(parse(&r, &err, empty) == 0);
        CHECK(r.has_entrypoint && r.n_entrypoint == 0);
        podman_run_free(&r);
        PASS();
}

static void test_missing_values_and_image(void)
{
        struct podman_run r;
        struct cs_error err;
        char *novalue[] = {"img", NULL};
        char *noimage[] = {"--rm", NULL};
        char *dangling[] = {"-e", NULL};
        char *dit[] = {"-dit", "img", NULL};

        CHECK(parse(&r, &err, noimage) < 0 && strstr(err.msg, "no image"));
        podman_run_free(&r);
        CHECK(parse(&r, &err, dangling) < 0 && strstr(err.msg, "-e needs a value"));
        podman_run_free(&r);
        CHECK(parse(&r, &err, dit) < 0 && strstr(err.msg, "--detach"));
        podman_run_free(&r);
        CHECK(parse(&r, &err, novalue) == 0 && r.n_cmd == 0 && r.pull == PODMAN_PULL_MISSING);
        podman_run_free(&r);
        PASS();
}

/* ---- the other subcommands' parser ---- */

enum { O_ALL, O_QUIET, O_TIME, O_PULL };
static const struct podman_opt opts[] = {
    {"--all", 'a', false, NULL, O_ALL},
    {"--quiet", 'q', false, NULL, O_QUIET},
    {"--time", 't', true, NULL, O_TIME},
    {"--pull", 0, true, "always", O_PULL},
};

/* What the parser reported, as "id=value " words, then "| " and the positionals. */
static char seen[512];

static int record(void *ctx, int id, const char *v)
{
        (void)ctx;
        if (strcmp(v, "refuse") == 0)
                return podman_opt_error("refused");
        snprintf(seen + strlen(seen), sizeof(seen) - strlen(seen), "%d=%s ", id, v);
        return 0;
}

static int opts_parse(char **argv)
{
        char *pos[16];
        size_t n_pos = 0;
        int argc = 0, r;

        while (argv[argc])
                argc++;
        seen[0] = '\0';
        r = podman_opts_parse("podman", "test", "usage %s\n", opts, sizeof(opts) / sizeof(opts[0]),
                              record, NULL, argc, argv, pos, &n_pos);
        strcat(seen, "|");
        for (size_t i = 0; i < n_pos; i++)
                snprintf(seen + strlen(seen), sizeof(seen) - strlen(seen), " %s", pos[i]);
        return r;
}

static void test_subcommand_options_as_podman_reads_them(void)
{
        char *forms[] = {
            "sub",      "x",   "-aq", "--quiet=false", "-t5",          "y",  "--time", "7",
            "--time=8", "-at", "9",   "--pull",        "--pull=never", "--", "-a",     NULL};
        char *bad_bool[] = {"sub", "--all=maybe", NULL};
        char *unknown_long[] = {"sub", "--frob", NULL};
        char *unknown_short[] = {"sub", "-az", NULL};
        char *no_value[] = {"sub", "x", "-t", NULL};
        char *refused[] = {"sub", "-t", "refuse", "x", NULL};
        char *help[] = {"sub", "x", "--help", "--frob", NULL};

        CHECK(opts_parse(forms) == 0);
        CHECKF(strcmp(seen, "0=true 1=true 1=false 2=5 2=7 2=8 0=true 2=9 3=always 3=never | x y "
                            "-a") == 0,
               "%s", seen);
        CHECK(opts_parse(bad_bool) == -1);
        CHECK(opts_parse(unknown_long) == -1);
        CHECK(opts_parse(unknown_short) == -1 && strcmp(seen, "0=true |") == 0);
        CHECK(opts_parse(no_value) == -1);
        CHECK(opts_parse(refused) == -1 && strcmp(seen, "|") == 0);
        CHECK(opts_parse(help) == 1);
        PASS();
}

int main(void)
{
        test_syntax_forms_and_the_image_ends_the_options();
        test_double_dash_and_bool_values();
        test_env_name_alone_takes_the_callers_value_or_nothing();
        test_volumes_and_mounts_become_binds();
        test_refusals_name_what_they_refuse();
        test_network_spellings();
        test_entrypoint_forms();
        test_missing_values_and_image();
        test_subcommand_options_as_podman_reads_them();
        return failures ? 1 : 0;
}
