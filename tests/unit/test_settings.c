/* Settings filtering (reference §3). Expected strings were produced with /usr/bin/python3's
 * json.dumps (3.11) and urllib.parse on the same input. */
#include "common/error.h"
#include "policy/settings.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

static void profile_copy(const char *raw, size_t len, char **out, size_t *out_len, bool *stripped,
                         int *r)
{
        struct cs_error err = {0};

        *out = NULL;
        *r = settings_profile_copy(raw, len, false, out, out_len, stripped, &err);
}

static char *shared(const char *raw, const char *name, bool sandbox, bool *loopback, int *r,
                    struct cs_error *err)
{
        char *out = NULL;

        *r = settings_shared(raw, strlen(raw), "/p/shared-settings.json", name, sandbox, &out,
                             loopback, err);
        return out;
}

static void test_deny_strip_drops_sudo_and_ssh_prefixes(void)
{
        const char *in = "{\"permissions\": {\"deny\": [\"Bash(sudo *)\", \"Bash(sudo:*)\", "
                         "\"Bash(sudoedit /etc/x)\", \"Read(~/.ssh/**)\", \"Edit(~/.ssh/**)\", "
                         "\"Read(~/.aws/**)\", \"Bash(rm -rf *)\", \"Read(~/.gnupg/**)\", "
                         "\"Write(~/.ssh/**)\", \"Read(//home/u/.ssh/**)\", \"bash(sudo x)\", "
                         "\" Bash(sudo x)\", 7]}}";
        const char *want = "{\n  \"permissions\": {\n    \"deny\": [\n      \"Bash(rm -rf *)\",\n"
                           "      \"Read(~/.gnupg/**)\",\n      \"Write(~/.ssh/**)\",\n"
                           "      \"Read(//home/u/.ssh/**)\",\n      \"bash(sudo x)\",\n"
                           "      \" Bash(sudo x)\",\n      7\n    ]\n  }\n}";
        char *out;
        size_t len;
        bool stripped;
        int r;

        profile_copy(in, strlen(in), &out, &len, &stripped, &r);
        CHECKF(r == 0 && stripped, "r=%d stripped=%d", r, stripped);
        CHECKF(len == strlen(want) && strcmp(out, want) == 0, "got <%s>", out);
        free(out);
        PASS();
}

static void test_deny_prefixes_are_the_four_of_the_reference(void)
{
        CHECKF(strcmp(settings_sandbox_deny_prefixes[0], "Bash(sudo") == 0 &&
                   strcmp(settings_sandbox_deny_prefixes[1], "Read(~/.ssh") == 0 &&
                   strcmp(settings_sandbox_deny_prefixes[2], "Edit(~/.ssh") == 0 &&
                   strcmp(settings_sandbox_deny_prefixes[3], "Read(~/.aws") == 0,
               "prefixes differ");
        PASS();
}

static void test_profile_copy_byte_identical_when_nothing_stripped(void)
{
        const char *ins[] = {
            "{\"permissions\":{\"deny\":[\"Bash(rm -rf *)\"]},\"n\":1.50}\n",
            "{ \"permissions\" : { \"allow\": [\"Bash(sudo *)\"] } }",
            "{\"permissions\": {\"deny\": \"Bash(sudo *)\"}}",
            "{\"permissions\": [\"Bash(sudo *)\"]}",
            "[\"Bash(sudo *)\"]",
            "{}\n",
        };

        for (size_t i = 0; i < sizeof(ins) / sizeof(ins[0]); i++) {
                char *out;
                size_t len;
                bool stripped;
                int r;

                profile_copy(ins[i], strlen(ins[i]), &out, &len, &stripped, &r);
                CHECKF(r == 0 && !stripped, "case %zu: r=%d stripped=%d", i, r, stripped);
                CHECKF(len == strlen(ins[i]) && memcmp(out, ins[i], len) == 0, "case %zu: %s", i,
                       out);
                free(out);
        }
        PASS();
}

static void test_profile_copy_invalid_json_verbatim(void)
{
        const char *ins[] = {
            "{not json",
            "{\"permissions\": {\"deny\": [\"Bash(sudo *)\"]},}",
            "{\"permissions\": {\"deny\": [\"Bash(sudo *)\"]}} trailing",
            "{\"a\": 01, \"permissions\": {\"deny\": [\"Bash(sudo *)\"]}}",
            "{\"a\": \"\xff\", \"permissions\": {\"deny\": [\"Bash(sudo *)\"]}}",
            "{\"a\": \"tab\there\", \"permissions\": {\"deny\": [\"Bash(sudo *)\"]}}",
            "",
        };

        for (size_t i = 0; i < sizeof(ins) / sizeof(ins[0]); i++) {
                char *out;
                size_t len;
                bool stripped;
                int r;

                profile_copy(ins[i], strlen(ins[i]), &out, &len, &stripped, &r);
                CHECKF(r == 0 && !stripped, "case %zu: r=%d", i, r);
                CHECKF(len == strlen(ins[i]) && memcmp(out, ins[i], len) == 0, "case %zu", i);
                free(out);
        }
        PASS();
}

static void test_reserialise_matches_python_indent2(void)
{
        static const char *const cases[][2] = {
            {"{\"permissions\": {\"allow\": [\"Bash(ls)\"], \"deny\": [\"Bash(sudo *)\", \"Bash(rm "
             "-rf *)\", 3, null, \"Read(~/.ssh/**)\"]}, \"env\": {\"A\": \"b\"}}",
             "{\n  \"permissions\": {\n    \"allow\": [\n      \"Bash(ls)\"\n    ],\n    "
             "\"deny\": [\n      \"Bash(rm -rf *)\",\n      3,\n      null\n    ]\n  },\n  "
             "\"env\": {\n    \"A\": \"b\"\n  }\n}"},
            {"{\"x\": 1, \"f\": [1.0, 2.5, 1e16, 1e-5, 0.0001, -0.0, 1E5, "
             "123456789012345678901234567890, -0, 0.1, 1.7976931348623157e308, 5e-324, 1e400, "
             "100.0, 1234567890123456.7, 12345678901234567.0], \"permissions\": {\"deny\": "
             "[\"Bash(sudo:*)\"]}}",
             "{\n  \"x\": 1,\n  \"f\": [\n    1.0,\n    2.5,\n    1e+16,\n    1e-05,\n    "
             "0.0001,\n    -0.0,\n    100000.0,\n    123456789012345678901234567890,\n    0,\n  "
             "  0.1,\n    1.7976931348623157e+308,\n    5e-324,\n    Infinity,\n    100.0,\n    "
             "1234567890123456.8,\n    1.2345678901234568e+16\n  ],\n  \"permissions\": {\n    "
             "\"deny\": []\n  }\n}"},
            {"{\"s\": \"caf\xc3\xa9 \xf0\x9f\x98\x80 \x7f \\u0000 \\ud800 \\/ \\\" \\\\ "
             "\\b\\f\\n\\r\\t \\u001f\", \"permissions\": {\"deny\": [\"Edit(~/.ssh/x)\", "
             "\"Read(~/.aws/**)\"], \"ask\": []}, \"e\": {}, \"n\": [true, false, null, NaN, "
             "Infinity, -Infinity]}",
             "{\n  \"s\": \"caf\\u00e9 \\ud83d\\ude00 \\u007f \\u0000 \\ud800 / \\\" \\\\ "
             "\\b\\f\\n\\r\\t \\u001f\",\n  \"permissions\": {\n    \"deny\": [],\n    \"ask\": "
             "[]\n  },\n  \"e\": {},\n  \"n\": [\n    true,\n    false,\n    null,\n    NaN,\n  "
             "  Infinity,\n    -Infinity\n  ]\n}"},
            {"{\"a\": 1, \"b\": 2, \"a\": 3, \"permissions\": {\"deny\": [\"Bash(sudo)\"]}}",
             "{\n  \"a\": 3,\n  \"b\": 2,\n  \"permissions\": {\n    \"deny\": []\n  }\n}"},
            {"\xef\xbb\xbf{\"permissions\": {\"deny\": [\"Bash(sudo x)\", [1, {\"k\": []}]]}}",
             "{\n  \"permissions\": {\n    \"deny\": [\n      [\n        1,\n        {\n        "
             "  \"k\": []\n        }\n      ]\n    ]\n  }\n}"},
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                char *out;
                size_t len;
                bool stripped;
                int r;

                profile_copy(cases[i][0], strlen(cases[i][0]), &out, &len, &stripped, &r);
                CHECKF(r == 0 && stripped, "case %zu: r=%d stripped=%d", i, r, stripped);
                CHECKF(len == strlen(cases[i][1]) && strcmp(out, cases[i][1]) == 0,
                       "case %zu: got <%s>", i, out);
                free(out);
        }
        PASS();
}

static void test_profile_copy_refuses_oversized_input(void)
{
        size_t n = ((size_t)4 << 20) + 1;
        char *big = malloc(n), *out = NULL;
        size_t len;
        bool stripped;
        int r;

        CHECKF(big, "malloc");
        memset(big, ' ', n);
        profile_copy(big, n, &out, &len, &stripped, &r);
        free(big);
        CHECKF(r < 0 && !out, "r=%d", r);
        PASS();
}

static void test_profile_copy_too_deep_is_verbatim(void)
{
        char buf[400];
        char *out;
        size_t len, o = 0;
        bool stripped;
        int r;

        o += (size_t)snprintf(buf, sizeof(buf),
                              "{\"permissions\": {\"deny\": [\"Bash(sudo)\"]}, \"x\": ");
        for (int i = 0; i < 70; i++)
                buf[o++] = '[';
        for (int i = 0; i < 70; i++)
                buf[o++] = ']';
        buf[o++] = '}';
        buf[o] = '\0';
        profile_copy(buf, o, &out, &len, &stripped, &r);
        CHECKF(r == 0 && !stripped && len == o && memcmp(out, buf, o) == 0, "r=%d", r);
        free(out);
        PASS();
}

static void test_shared_substitutes_profile_in_values_not_keys(void)
{
        struct cs_error err = {0};
        bool lb = true;
        int r;
        char *out =
            shared("{\"{profile}\": [\"a-{profile}-{profile}\", 1, {\"k\": \"{profile}\"}], "
                   "\"n\": null, \"t\": true, \"f\": 2.50}",
                   "work", false, &lb, &r, &err);

        CHECKF(r == 0, "%s", err.msg);
        CHECKF(strcmp(out, "{\"{profile}\": [\"a-work-work\", 1, {\"k\": \"work\"}], \"n\": null, "
                           "\"t\": true, \"f\": 2.5}") == 0,
               "got %s", out);
        CHECKF(!lb, "host_loopback set");
        free(out);
        PASS();
}

static void test_shared_rewrites_loopback_hook_hosts(void)
{
        static const char *const cases[][3] = {
            {"http://user:pw@127.0.0.1:3000/x", "http://user:pw@169.254.1.2:3000/x", "1"},
            {"http://LOCALHOST/x", "http://169.254.1.2/x", "1"},
            {"http://localhost:abc/x", "http://169.254.1.2:abc/x", "1"},
            {"http://[::1]:8080/x", "http://[::1]:8080/x", "0"},
            {"http://localhost./x", "http://localhost./x", "0"},
            {"http://127.0.0.2/x", "http://127.0.0.2/x", "0"},
            {"HTTP://Localhost:9/p?q=1#f", "http://169.254.1.2:9/p?q=1#f", "1"},
            {"http://localhost/x?", "http://169.254.1.2/x", "1"},
            {"http://a@b@localhost/", "http://a@b@169.254.1.2/", "1"},
            {"https://example.com/localhost", "https://example.com/localhost", "0"},
            {" http://local\\thost/x", "http://169.254.1.2/x", "1"},
            {"//localhost/y", "//169.254.1.2/y", "1"},
            {"localhost:3000/x", "localhost:3000/x", "0"},
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct cs_error err = {0};
                char in[512], want[512];
                bool lb = false;
                int r;
                char *out;

                snprintf(in, sizeof(in),
                         "{\"hooks\": {\"Stop\": [{\"hooks\": [{\"type\": \"http\", \"url\": "
                         "\"%s\"}]}]}}",
                         cases[i][0]);
                snprintf(want, sizeof(want),
                         "{\"hooks\": {\"Stop\": [{\"hooks\": [{\"type\": \"http\", \"url\": "
                         "\"%s\"}]}]}}",
                         cases[i][1]);
                out = shared(in, "p", true, &lb, &r, &err);
                CHECKF(r == 0, "case %zu: %s", i, err.msg);
                CHECKF(strcmp(out, want) == 0, "case %zu: got %s", i, out);
                CHECKF(lb == (cases[i][2][0] == '1'), "case %zu: host_loopback %d", i, lb);
                free(out);
        }
        PASS();
}

static void test_shared_sandbox_full_example(void)
{
        struct cs_error err = {0};
        bool lb = false;
        int r;
        char *out =
            shared("{\"hooks\":{\"Stop\":[{\"hooks\":[{\"type\":\"http\",\"url\":"
                   "\"http://127.0.0.1:8080/{profile}\"},{\"type\":\"command\","
                   "\"command\":\"curl http://localhost/\"}]}]},\"permissions\":{\"deny\":"
                   "[\"Bash(sudo *)\",\"Read(//home/u/.ssh/**)\"]},\"{profile}\":\"\xc3\xa9\"}",
                   "work", true, &lb, &r, &err);

        CHECKF(r == 0, "%s", err.msg);
        CHECKF(strcmp(out,
                      "{\"hooks\": {\"Stop\": [{\"hooks\": [{\"type\": \"http\", \"url\": "
                      "\"http://169.254.1.2:8080/work\"}, {\"type\": \"command\", "
                      "\"command\": \"curl http://localhost/\"}]}]}, \"permissions\": "
                      "{\"deny\": [\"Read(//home/u/.ssh/**)\"]}, \"{profile}\": \"\\u00e9\"}") == 0,
               "got %s", out);
        CHECKF(lb, "host_loopback not set");
        free(out);
        PASS();
}

static void test_host_launch_keeps_shared_denies_and_loopback_hooks(void)
{
        struct cs_error err = {0};
        const char *in = "{\"hooks\": {\"Stop\": [{\"hooks\": [{\"type\": \"http\", \"url\": "
                         "\"http://localhost:1/\"}]}]}, \"permissions\": {\"deny\": [\"Bash(sudo "
                         "*)\"]}}";
        bool lb = true;
        int r;
        char *out = shared(in, "p", false, &lb, &r, &err);

        CHECKF(r == 0 && strcmp(out, in) == 0 && !lb, "got %s", out);
        free(out);
        PASS();
}

static void test_shared_ignores_non_http_and_malformed_hooks(void)
{
        struct cs_error err = {0};
        const char *in = "{\"hooks\": {\"A\": {\"hooks\": []}, \"B\": [1, {\"hooks\": \"x\"}, "
                         "{\"hooks\": [{\"type\": \"HTTP\", \"url\": \"http://localhost/\"}, "
                         "{\"type\": \"http\", \"url\": 5}, 3]}]}}";
        bool lb = true;
        int r;
        char *out = shared(in, "p", true, &lb, &r, &err);

        CHECKF(r == 0 && strcmp(out, in) == 0 && !lb, "got %s (%s)", out, err.msg);
        free(out);
        PASS();
}

static void test_shared_not_object_is_an_error(void)
{
        struct cs_error err = {0};
        bool lb = false;
        int r;
        char *out = shared("[1, 2]", "p", true, &lb, &r, &err);

        CHECKF(r < 0 && !out, "accepted a list");
        CHECKF(strcmp(err.msg, "/p/shared-settings.json must hold a JSON object.") == 0, "msg %s",
               err.msg);
        PASS();
}

static void test_shared_invalid_json_cannot_be_read(void)
{
        static const char *const ins[] = {"{not json", "", "\xef\xbb\xbf{}", "{\"a\": \"\xff\"}"};

        for (size_t i = 0; i < sizeof(ins) / sizeof(ins[0]); i++) {
                struct cs_error err = {0};
                bool lb = false;
                int r;
                char *out = shared(ins[i], "p", true, &lb, &r, &err);

                CHECKF(r < 0 && !out, "case %zu accepted", i);
                CHECKF(strncmp(err.msg, "Can't read /p/shared-settings.json: ", 36) == 0,
                       "case %zu: msg %s", i, err.msg);
        }
        PASS();
}

static void test_args_have_exact_or_equals(void)
{
        char *args[] = {"-p", "--settings=x.json", "--permission-modes", "--append-system-prompt"};

        CHECKF(settings_args_have(args, 4, "--settings"), "--settings=");
        CHECKF(!settings_args_have(args, 4, "--permission-mode"), "--permission-modes matched");
        CHECKF(settings_args_have(args, 4, "--append-system-prompt"), "exact");
        CHECKF(!settings_args_have(args, 4, "--dangerously-skip-permissions"), "absent");
        CHECKF(!settings_args_have(args, 0, "-p"), "n=0");
        PASS();
}

int main(void)
{
        test_deny_strip_drops_sudo_and_ssh_prefixes();
        test_deny_prefixes_are_the_four_of_the_reference();
        test_profile_copy_byte_identical_when_nothing_stripped();
        test_profile_copy_invalid_json_verbatim();
        test_reserialise_matches_python_indent2();
        test_profile_copy_refuses_oversized_input();
        test_profile_copy_too_deep_is_verbatim();
        test_shared_substitutes_profile_in_values_not_keys();
        test_shared_rewrites_loopback_hook_hosts();
        test_shared_sandbox_full_example();
        test_host_launch_keeps_shared_denies_and_loopback_hooks();
        test_shared_ignores_non_http_and_malformed_hooks();
        test_shared_not_object_is_an_error();
        test_shared_invalid_json_cannot_be_read();
        test_args_have_exact_or_equals();
        return failures ? 1 : 0;
}
