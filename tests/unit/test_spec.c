/* Unit tests for the spec: destination normalisation, mount order, env parsing, plan JSON. */
#include "spec/spec.h"
#include "common/error.h"

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "check.h"

static void test_dest_normalised_without_dots_or_double_slashes(void)
{
        struct cs_error err;
        char *out = NULL;

        CHECK(spec_normalize_dest("//a/./b//c/", "x", &out, &err) == 0);
        CHECK(strcmp(out, "/a/b/c") == 0);
        free(out);
        CHECK(spec_normalize_dest("/", "x", &out, &err) == 0);
        CHECK(strcmp(out, "/") == 0);
        free(out);
        PASS();
}

static void test_dest_with_dotdot_is_refused_and_named(void)
{
        struct cs_error err;
        char *out = NULL;

        CHECK(spec_normalize_dest("/a/../../etc", "--bind destination", &out, &err) < 0);
        CHECK(strstr(err.msg, "--bind destination") && strstr(err.msg, "/a/../../etc"));
        CHECK(strstr(err.msg, ".."));
        PASS();
}

static void test_relative_dest_is_refused(void)
{
        struct cs_error err;
        char *out = NULL;

        CHECK(spec_normalize_dest("etc/x", "--tmpfs destination", &out, &err) < 0);
        CHECK(strstr(err.msg, "not an absolute path"));
        PASS();
}

/* A bind of / shown as `shown`: the spec takes the fd. */
static int add_root_bind(struct sandbox_spec *s, const char *shown, const char *dest,
                         struct cs_error *err)
{
        int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);

        return spec_add_bind(s, 0, &fd, shown, dest, err);
}

static void test_parents_sorted_before_children_keeping_order(void)
{
        struct sandbox_spec s;
        struct cs_error err;

        spec_init(&s);
        CHECK(add_root_bind(&s, "/x", "/a/b", &err) == 0);
        CHECK(spec_add_mount(&s, SPEC_MOUNT_TMPFS, 0, NULL, "/a", &err) == 0);
        CHECK(add_root_bind(&s, "/y", "/c", &err) == 0);
        CHECK(add_root_bind(&s, "/z", "/a/b", &err) == 0);
        spec_sort_mounts(&s);
        CHECK(strcmp(s.mounts[0].dest, "/a") == 0);
        CHECK(strcmp(s.mounts[1].dest, "/c") == 0);
        CHECK(strcmp(s.mounts[2].source, "/x") == 0);
        CHECK(strcmp(s.mounts[3].source, "/z") == 0);
        spec_free(&s);
        PASS();
}

static void test_bind_source_enters_only_as_an_fd_and_is_named_by_the_kernel(void)
{
        struct sandbox_spec s;
        struct cs_error err;
        int fd = open("/usr/bin", O_PATH | O_DIRECTORY | O_CLOEXEC);
        int bad = -1;

        spec_init(&s);
        CHECK(spec_add_mount(&s, SPEC_MOUNT_BIND, 0, "/etc", "/x", &err) < 0);
        CHECK(strstr(err.msg, "fd"));
        CHECK(spec_add_bind(&s, 0, &bad, "/nothing", "/x", &err) < 0);
        CHECK(spec_add_bind(&s, SPEC_MOUNT_RO, &fd, "/shown/path", "/y", &err) == 0);
        CHECK(fd == -1 && s.n_mounts == 1 && s.mounts[0].source_fd >= 0);
        CHECK(strcmp(s.mounts[0].source, "/shown/path") == 0);
        CHECK(s.mounts[0].source_real[0] == '/' && strstr(s.mounts[0].source_real, "bin"));
        spec_free(&s);
        PASS();
}

static void test_root_dir_enters_as_an_fd_and_a_file_is_refused(void)
{
        struct sandbox_spec s;
        struct cs_error err;
        int fd = open("/usr", O_PATH | O_DIRECTORY | O_CLOEXEC);
        int file = open("/etc/hostname", O_PATH | O_CLOEXEC);

        spec_init(&s);
        CHECK(s.root_fd == -1);
        CHECK(spec_set_root_dir(&s, &file, "/etc/hostname", &err) < 0 && file == -1);
        CHECK(strstr(err.msg, "not a directory"));
        CHECK(spec_set_root_dir(&s, &fd, "/shown", &err) == 0 && fd == -1);
        CHECK(s.root == SPEC_ROOT_DIR && s.root_fd >= 0);
        CHECK(strcmp(s.root_path, "/shown") == 0 && strcmp(s.root_real, "/usr") == 0);
        spec_free(&s);
        PASS();
}

static void test_root_layers_enter_as_fds_top_first_and_show_in_the_plan(void)
{
        struct sandbox_spec s;
        struct cs_error err;
        int fds[3] = {open("/usr", O_PATH | O_DIRECTORY | O_CLOEXEC),
                      open("/etc", O_PATH | O_DIRECTORY | O_CLOEXEC),
                      open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)};
        char *paths[3] = {"/top", "/middle", "/base"};
        cJSON *j, *layers;

        spec_init(&s);
        CHECK(spec_set_root_layers(&s, fds, paths, 0, &err) < 0);
        CHECK(spec_set_root_layers(&s, fds, paths, 3, &err) == 0);
        CHECK(s.root == SPEC_ROOT_DIR && strcmp(s.root_real, "/usr") == 0 && s.n_lowers == 2);
        CHECK(strcmp(s.lowers[0].real, "/etc") == 0 && strcmp(s.lowers[1].path, "/base") == 0);
        CHECK(s.lowers[0].fd >= 0 && s.lowers[0].fd != fds[1]); /* its own copy */
        CHECK(spec_add_base_mounts(&s, &err) == 0 && spec_set_argv(&s, 1, paths, &err) == 0);
        CHECK(spec_validate(&s, &err) == 0);
        j = spec_to_json(&s);
        layers = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "root"), "layers");
        CHECK(cJSON_GetArraySize(layers) == 3);
        CHECK(strcmp(cJSON_GetArrayItem(layers, 2)->valuestring, "/base") == 0);
        cJSON_Delete(j);
        spec_free(&s);
        for (int i = 0; i < 3; i++)
                CHECK(close(fds[i]) == 0);
        PASS();
}

static void test_env_file_lines_parsed_and_comments_skipped(void)
{
        struct sandbox_spec s;
        struct cs_error err;
        const char text[] = "# comment\n\nA=1\nB=x=y\r\nA=2\n";

        spec_init(&s);
        CHECK(spec_env_parse(&s, text, sizeof(text) - 1, "f", true, &err) == 0);
        CHECK(s.n_env == 2);
        CHECK(strcmp(spec_env_get(&s, "A"), "2") == 0);
        CHECK(strcmp(spec_env_get(&s, "B"), "x=y") == 0);
        spec_env_unset(&s, "A");
        CHECK(spec_env_get(&s, "A") == NULL && s.n_env == 1);
        spec_free(&s);
        PASS();
}

static void test_env_file_bad_line_names_origin_and_line(void)
{
        struct sandbox_spec s;
        struct cs_error err;
        const char text[] = "A=1\nnot a pair\n";

        spec_init(&s);
        CHECK(spec_env_parse(&s, text, sizeof(text) - 1, "--env-file /e", true, &err) < 0);
        CHECK(strstr(err.msg, "--env-file /e, line 2"));
        spec_free(&s);
        spec_init(&s);
        CHECK(spec_env_parse(&s, "1X=2\n", 5, "f", true, &err) < 0);
        CHECK(strstr(err.msg, "not a valid variable name"));
        spec_free(&s);
        PASS();
}

/* Found by tests/fuzz/fuzz_env: a blank last line was scanned past the buffer's end (the
 * buffer need not be NUL-terminated; ASan sees the read past this exact-size copy). */
static void test_env_file_blank_last_line_read_within_bounds(void)
{
        struct sandbox_spec s;
        struct cs_error err;
        const char text[] = "A=1\n \t";
        char *buf = malloc(sizeof(text) - 1);

        CHECK(buf);
        memcpy(buf, text, sizeof(text) - 1);
        spec_init(&s);
        CHECK(spec_env_parse(&s, buf, sizeof(text) - 1, "f", true, &err) == 0);
        CHECK(s.n_env == 1 && strcmp(spec_env_get(&s, "A"), "1") == 0);
        CHECK(spec_env_parse(&s, buf + 4, 1, "f", true, &err) == 0 && s.n_env == 1);
        spec_free(&s);
        free(buf);
        PASS();
}

static void test_plan_json_redacts_secrets(void)
{
        struct sandbox_spec s;
        struct cs_error err;
        char *argv[] = {"sh", "-c", "true"};
        cJSON *j;
        char *text;

        spec_init(&s);
        CHECK(spec_env_set(&s, "PUBLIC", "shown", false, &err) == 0);
        CHECK(spec_env_set(&s, "TOKEN", "hunter2", true, &err) == 0);
        CHECK(spec_set_argv(&s, 3, argv, &err) == 0);
        CHECK(spec_add_base_mounts(&s, &err) == 0);
        j = spec_to_json(&s);
        text = cJSON_PrintUnformatted(j);
        CHECK(strstr(text, "shown") && !strstr(text, "hunter2") && strstr(text, "<redacted>"));
        CHECK(strstr(text, "\"kind\":\"proc\"") && strstr(text, "\"dest\":\"/tmp\""));
        CHECK(strstr(text, "\"argv\":[\"sh\",\"-c\",\"true\"]"));
        free(text);
        cJSON_Delete(j);
        spec_free(&s);
        PASS();
}

static const struct spec_mount *find_dest(const struct sandbox_spec *s, const char *dest)
{
        for (size_t i = 0; i < s->n_mounts; i++)
                if (strcmp(s->mounts[i].dest, dest) == 0)
                        return &s->mounts[i];
        return NULL;
}

/* The host view hides homes, runtime dirs and the host's data (every top-level directory
 * that is not a program dir, /var but for what programs read), and leaves the system. */
static void test_host_view_hides_homes_and_data_and_keeps_the_system(void)
{
        struct sandbox_spec s;
        struct cs_error err;
        const char *hidden[] = {"/home", "/root", "/var/tmp", "/run", "/srv/me", "/var"};
        const struct spec_mount *m;
        struct stat st;

        spec_init(&s);
        CHECK(spec_add_host_view(&s, "/srv//me/", &err) == 0);
        for (size_t i = 0; i < sizeof(hidden) / sizeof(hidden[0]); i++) {
                m = find_dest(&s, hidden[i]);
                CHECKF(m && m->kind == SPEC_MOUNT_TMPFS, "%s", hidden[i]);
        }
        /* Debian's own data dirs, present on every Debian machine. */
        for (size_t i = 0; i < 3; i++) {
                const char *d = (const char *[]){"/srv", "/mnt", "/media"}[i];

                if (lstat(d, &st) == 0 && S_ISDIR(st.st_mode)) {
                        m = find_dest(&s, d);
                        CHECKF(m && m->kind == SPEC_MOUNT_TMPFS, "%s", d);
                }
        }
        for (size_t i = 0; i < 4; i++)
                CHECK(!find_dest(&s, (const char *[]){"/usr", "/etc", "/opt", "/var/log"}[i]));
        if (lstat("/var/lib/dpkg", &st) == 0) {
                m = find_dest(&s, "/var/lib/dpkg");
                CHECK(m && m->kind == SPEC_MOUNT_BIND && (m->flags & SPEC_MOUNT_RO));
        }
        if (lstat("/var/run", &st) == 0 && S_ISLNK(st.st_mode)) {
                m = find_dest(&s, "/var/run");
                CHECK(m && m->kind == SPEC_MOUNT_SYMLINK);
        }
        spec_free(&s);
        PASS();
}

/* spec_validate: a spec built through the API passes; each inconsistency is named. */
static void test_validate_accepts_what_the_api_builds_and_names_each_inconsistency(void)
{
        struct sandbox_spec s;
        struct cs_error err;
        char *argv[] = {"/bin/true"};
        int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);

        spec_init(&s);
        CHECK(spec_set_argv(&s, 1, argv, &err) == 0);
        CHECK(spec_add_base_mounts(&s, &err) == 0);
        /* A two-byte destination: its suffix checks stay inside the string (ASan). */
        CHECK(spec_add_mount(&s, SPEC_MOUNT_TMPFS, 0, NULL, "/x", &err) == 0);
        CHECK(spec_add_bind(&s, SPEC_MOUNT_RO, &fd, "/", "/mnt", &err) == 0);
        CHECKF(spec_validate(&s, &err) == 0, "%s", err.msg);
        s.map_host_loopback = true;
        CHECK(spec_validate(&s, &err) < 0 && strstr(err.msg, "--map-host-loopback needs"));
        s.net = SPEC_NET_PASTA;
        CHECK(spec_validate(&s, &err) == 0);
        s.cwd = strdup("relative");
        CHECK(spec_validate(&s, &err) < 0 && strstr(err.msg, "not absolute"));
        free(s.cwd);
        s.cwd = NULL;
        s.seccomp = SPEC_SECCOMP_FILE;
        CHECK(spec_validate(&s, &err) < 0 && strstr(err.msg, "seccomp file"));
        s.seccomp = SPEC_SECCOMP_DEFAULT;
        fd = s.mounts[s.n_mounts - 1].source_fd;
        s.mounts[s.n_mounts - 1].source_fd = -1;
        CHECK(spec_validate(&s, &err) < 0 && strstr(err.msg, "lacks an open source"));
        s.mounts[s.n_mounts - 1].source_fd = fd;
        s.root = SPEC_ROOT_DIR;
        CHECK(spec_validate(&s, &err) < 0 && strstr(err.msg, "root dir lacks"));
        s.root = SPEC_ROOT_HOST;
        s.hostname = strdup("");
        CHECK(spec_validate(&s, &err) < 0 && strstr(err.msg, "--hostname"));
        spec_free(&s);
        PASS();
}

int main(void)
{
        test_dest_normalised_without_dots_or_double_slashes();
        test_validate_accepts_what_the_api_builds_and_names_each_inconsistency();
        test_dest_with_dotdot_is_refused_and_named();
        test_relative_dest_is_refused();
        test_parents_sorted_before_children_keeping_order();
        test_bind_source_enters_only_as_an_fd_and_is_named_by_the_kernel();
        test_root_dir_enters_as_an_fd_and_a_file_is_refused();
        test_root_layers_enter_as_fds_top_first_and_show_in_the_plan();
        test_env_file_lines_parsed_and_comments_skipped();
        test_env_file_bad_line_names_origin_and_line();
        test_env_file_blank_last_line_read_within_bounds();
        test_plan_json_redacts_secrets();
        test_host_view_hides_homes_and_data_and_keeps_the_system();
        return failures ? 1 : 0;
}
