/* Unit tests for the runner's pure parts and the decisions made before a launch: the
 * broker's rules as the planner writes them into the spec and as the broker applies them,
 * the completion of a spec without a subordinate range (the plan then says what runs), the
 * id maps of a range, where a symlink inside the root leads, and the addresses the egress
 * proxy never connects to. */
#include "common/error.h"
#include "policy/plan.h"
#include "runner/internal.h"
#include "runner/mounts_internal.h"
#include "runner/egress_int.h"

#include <arpa/inet.h>
#include "runner/netlink.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <linux/capability.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include "check.h"

/* A spec as `exec --image X --package-broker` leaves it before completion. */
static void broker_spec(struct sandbox_spec *s)
{
        struct cs_error err = {0};
        char *argv[] = {"true", NULL};

        spec_init(s);
        s->root = SPEC_ROOT_DIR;
        s->root_fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        spec_set_argv(s, 1, argv, &err);
        plan_broker(s, &err);
        s->package_broker = true;
}

static void test_the_planner_gives_the_broker_a_package_managers_capabilities(void)
{
        struct sandbox_spec s;
        uint64_t caps;

        broker_spec(&s);
        caps = s.broker_caps;
        /* CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER FSETID KILL SETGID SETUID SETFCAP */
        CHECKF(caps == 0x800000ffull, "caps %016llx", (unsigned long long)caps);
        CHECK(!(caps & (1ull << CAP_SYS_ADMIN)));
        CHECK(strcmp(spec_broker_manager(&s, "apt-get"), "/usr/bin/apt-get") == 0);
        CHECK(strcmp(spec_broker_manager(&s, "apk"), "/sbin/apk") == 0);
        CHECK(spec_broker_manager(&s, "sh") == NULL);
        CHECK(s.n_broker_managers == 6);
        spec_free(&s);
        PASS();
}

static void test_the_spec_refuses_a_broker_without_the_range_or_with_sys_admin(void)
{
        struct sandbox_spec s;
        struct cs_error err = {0};

        broker_spec(&s);
        CHECK(spec_validate(&s, &err) == -EINVAL);
        CHECKF(strstr(err.msg, "subordinate range"), "%s", err.msg);
        s.map_range = true;
        CHECKF(spec_validate(&s, &err) == 0, "%s", err.msg);
        s.broker_caps |= 1ull << CAP_SYS_ADMIN;
        CHECK(spec_validate(&s, &err) == -EINVAL);
        CHECKF(strstr(err.msg, "CAP_SYS_ADMIN"), "%s", err.msg);
        spec_free(&s);
        PASS();
}

static void test_the_spec_refuses_a_manager_by_path_or_run_relative(void)
{
        struct sandbox_spec s;
        struct cs_error err = {0};

        spec_init(&s);
        CHECK(spec_broker_allow(&s, "/usr/bin/apt-get", "/usr/bin/apt-get", &err) == -EINVAL);
        CHECK(spec_broker_allow(&s, "apt-get", "usr/bin/apt-get", &err) == -EINVAL);
        CHECK(spec_broker_allow(&s, "apt-get", "/usr/bin/apt-get", &err) == 0);
        CHECK(spec_broker_allow(&s, "apt-get", "/elsewhere", &err) == 0);
        CHECK(s.n_broker_managers == 1 &&
              strcmp(s.broker_managers[0].path, "/usr/bin/apt-get") == 0);
        spec_free(&s);
        PASS();
}

static bool broker_says(const struct sandbox_spec *s, char *const *argv, int want,
                        const char *want_path, const char *want_why)
{
        const char *path = NULL;
        char text[512] = "";
        int r = broker_check(s, argv, &path, text, sizeof(text));

        if (r != want)
                return fail("%s: %d, not %d (%s)", argv[0] ? argv[0] : "(none)", r, want, text);
        if (want == 0 && (!path || strcmp(path, want_path) != 0))
                return fail("%s runs %s", argv[0], path ? path : "nothing");
        if (want_why && !strstr(text, want_why))
                return fail("%s: `%s` lacks `%s`", argv[0], text, want_why);
        return true;
}

static bool broker_check_follows_the_specs_rules(void)
{
        struct sandbox_spec s;
        char *install[] = {"apt-get", "install", "-y", "hello", "libfoo1:amd64", NULL};
        char *dnf[] = {"dnf", "--setopt=install_weak_deps=False", "install", "x", NULL};
        char *shell[] = {"sh", "-c", "id", NULL};
        char *path[] = {"apt-get", "install", "./evil.deb", NULL};
        char *option[] = {"apt-get", "-o", "x=y", "update", NULL};
        char *download[] = {"apt-get", "download", "x", NULL};
        char *nothing[] = {"apk", NULL};
        char *none[] = {NULL};
        bool ok;

        broker_spec(&s);
        ok = broker_says(&s, install, 0, "/usr/bin/apt-get", NULL) &&
             broker_says(&s, dnf, 0, "/usr/bin/dnf", NULL) &&
             broker_says(
                 &s, shell, -EPERM, NULL,
                 "only a package manager (apt-get, apt, dnf, yum, microdnf or apk), not sh") &&
             broker_says(&s, path, -EPERM, NULL, "is not a package name") &&
             broker_says(&s, option, -EPERM, NULL, "the option -o") &&
             broker_says(&s, download, -EPERM, NULL, "installs, removes and updates") &&
             broker_says(&s, nothing, -EINVAL, NULL, "say what to do") &&
             broker_says(&s, none, -EINVAL, NULL, "no command");
        /* A manager the spec leaves out is refused, though the broker knows its family. */
        s.n_broker_managers = 1; /* apt-get only; the rest are freed below all the same */
        ok = ok && broker_says(&s, dnf, -EPERM, NULL, "(apt-get), not dnf");
        s.n_broker_managers = 6;
        spec_free(&s);
        return ok;
}

/* Run in a child: no_new_privs makes newuidmap useless, so there is no usable range. */
static void test_without_a_range_completion_drops_the_broker_and_says_why(void)
{
        pid_t pid = fork();
        int status = -1;

        CHECK(pid >= 0);
        if (pid == 0) {
                struct sandbox_spec s;
                struct cs_error err = {0};
                cJSON *j, *w;
                int bad = 0;

                prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
                broker_spec(&s);
                bad |= runner_spec_complete(&s, &err) != 0;
                bad |= s.package_broker || s.map_range;
                bad |= s.n_warnings != 1 ||
                       !strstr(s.warnings[0], "sudo cannot install packages in this session");
                bad |= spec_validate(&s, &err) != 0;
                /* --plan shows the decision and the warning */
                j = spec_to_json(&s);
                w = cJSON_GetObjectItem(j, "warnings");
                bad |= !cJSON_IsFalse(cJSON_GetObjectItem(j, "package_broker"));
                bad |= cJSON_GetObjectItem(j, "broker") != NULL;
                bad |= cJSON_GetArraySize(w) != 1 ||
                       strcmp(cJSON_GetArrayItem(w, 0)->valuestring, s.warnings[0]) != 0;
                /* completing again decides nothing new */
                bad |= runner_spec_complete(&s, &err) != 0 || s.n_warnings != 1;
                cJSON_Delete(j);
                spec_free(&s);
                _exit(bad);
        }
        CHECK(waitpid(pid, &status, 0) == pid);
        CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d", status);
        PASS();
}

/* The embedded default's layer: only with the broker, on the host's view, never over /
 * or a relative path; completion without a range drops it with the broker; the plan names
 * its directories. */
static void test_the_host_layer_goes_with_the_broker_on_the_default(void)
{
        struct sandbox_spec s;
        struct cs_error err = {0};
        char *argv[] = {"true", NULL};
        cJSON *j, *l;

        spec_init(&s);
        spec_set_argv(&s, 1, argv, &err);
        CHECK(spec_layer_dir_add(&s, "/", &err) == -EINVAL);
        CHECK(spec_layer_dir_add(&s, "usr", &err) < 0);
        CHECK(spec_layer_dir_add(&s, "/usr/../etc", &err) < 0);
        CHECKF(spec_layer_dir_add(&s, "/usr", &err) == 0, "%s", err.msg);
        CHECKF(spec_layer_dir_add(&s, "/var/lib/dpkg/", &err) == 0, "%s", err.msg);
        CHECK(s.n_layer_dirs == 2 && strcmp(s.layer_dirs[1], "/var/lib/dpkg") == 0);
        /* a layer without the broker */
        CHECK(spec_validate(&s, &err) == -EINVAL);
        CHECKF(strstr(err.msg, "host layer"), "%s", err.msg);
        plan_broker(&s, &err);
        s.package_broker = true;
        s.map_range = true;
        CHECKF(spec_validate(&s, &err) == 0, "%s", err.msg);
        j = spec_to_json(&s);
        l = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "broker"), "host_layer");
        CHECK(cJSON_GetArraySize(l) == 2 &&
              strcmp(cJSON_GetArrayItem(l, 0)->valuestring, "/usr") == 0);
        cJSON_Delete(j);
        /* a layer on an image's root */
        s.root = SPEC_ROOT_DIR;
        s.root_fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        CHECK(spec_validate(&s, &err) == -EINVAL);
        spec_free(&s);
        /* the broker on the default without a layer */
        spec_init(&s);
        spec_set_argv(&s, 1, argv, &err);
        plan_broker(&s, &err);
        s.package_broker = true;
        s.map_range = true;
        CHECK(spec_validate(&s, &err) == -EINVAL);
        CHECKF(strstr(err.msg, "--package-broker needs"), "%s", err.msg);
        spec_free(&s);
        PASS();
}

static void test_a_spec_without_a_broker_or_pasta_completes_unchanged(void)
{
        struct sandbox_spec s;
        struct cs_error err = {0};
        char *argv[] = {"true", NULL};

        spec_init(&s);
        spec_set_argv(&s, 1, argv, &err);
        s.map_range = false;
        CHECK(runner_spec_complete(&s, &err) == 0);
        CHECK(!s.map_range && !s.package_broker && s.n_warnings == 0);
        spec_free(&s);
        PASS();
}

static void test_the_broker_and_warnings_are_in_the_plan(void)
{
        struct sandbox_spec s;
        struct cs_error err = {0};
        cJSON *j, *b;

        broker_spec(&s);
        s.map_range = true;
        CHECK(spec_warn(&s, &err, "csandbox: %s", "a warning") == 0);
        j = spec_to_json(&s);
        b = cJSON_GetObjectItem(j, "broker");
        CHECK(b && strcmp(cJSON_GetObjectItem(b, "caps")->valuestring, "00000000800000ff") == 0);
        CHECK(strcmp(cJSON_GetObjectItem(cJSON_GetObjectItem(b, "managers"), "yum")->valuestring,
                     "/usr/bin/yum") == 0);
        CHECK(strcmp(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "warnings"), 0)->valuestring,
                     "csandbox: a warning") == 0);
        cJSON_Delete(j);
        spec_free(&s);
        PASS();
}

static void test_range_maps_put_the_caller_on_its_own_id(void)
{
        unsigned long v[9];
        int n;

        /* uid 1000 inside: 0..999 and 1001..65535 from the range, 1000 the caller's */
        n = idmap_range_args(1000, 4242, 100000, v);
        CHECK(n == 9);
        CHECK(v[0] == 0 && v[1] == 100000 && v[2] == 1000);
        CHECK(v[3] == 1000 && v[4] == 4242 && v[5] == 1);
        CHECK(v[6] == 1001 && v[7] == 101000 && v[8] == 64535);
        /* root inside: no entry below it */
        n = idmap_range_args(0, 4242, 100000, v);
        CHECK(n == 6 && v[0] == 0 && v[1] == 4242 && v[2] == 1);
        CHECK(v[3] == 1 && v[4] == 100000 && v[5] == 65535);
        /* the last id of the range, and one beyond it */
        n = idmap_range_args(65535, 4242, 100000, v);
        CHECK(n == 6 && v[2] == 65535 && v[3] == 65535 && v[4] == 4242);
        n = idmap_range_args(70000, 4242, 100000, v);
        CHECK(n == 6 && v[0] == 0 && v[2] == 65536 && v[3] == 70000 && v[5] == 1);
        PASS();
}

static void test_symlinks_inside_the_root_stay_inside(void)
{
        char out[SPEC_PATH_MAX];

        CHECK(mnt_symlink_dest("/etc/resolv.conf", "../run/resolv.conf", out, sizeof(out)) == 0);
        CHECK(strcmp(out, "/run/resolv.conf") == 0);
        CHECK(mnt_symlink_dest("/a/b/c", "../../../../../x", out, sizeof(out)) == 0);
        CHECK(strcmp(out, "/x") == 0);
        CHECK(mnt_symlink_dest("/a/b", "/abs//./y/", out, sizeof(out)) == 0);
        CHECK(strcmp(out, "/abs/y") == 0);
        CHECK(mnt_symlink_dest("/a/b", "..", out, sizeof(out)) == 0);
        CHECK(strcmp(out, "/") == 0);
        CHECK(mnt_symlink_dest("/a/b", "longer-than-the-buffer", out, 8) == -ENAMETOOLONG);
        PASS();
}

static void test_metadata_addresses_are_never_a_destination(void)
{
        static const char *const never[] = {"169.254.169.254",
                                            "fd00:ec2::254",
                                            "fd20:ce::254",
                                            "fd00:c1::a9fe:a9fe",
                                            "100.100.100.200",
                                            "168.63.129.16",
                                            "192.0.0.192",
                                            "::ffff:100.100.100.200",
                                            "::ffff:169.254.169.254",
                                            "64:ff9b::a9fe:a9fe",
                                            "64:ff9b::a83f:8110",
                                            "127.0.0.1",
                                            "::1",
                                            "fe80::1"};
        static const char *const fine[] = {"198.51.100.1", "2001:db8::1", "fd00:ec2::253",
                                           "100.100.100.201", "64:ff9b::c633:6401"};
        unsigned char a[16];

        for (size_t i = 0; i < sizeof(never) / sizeof(*never); i++) {
                int fam = strchr(never[i], ':') ? AF_INET6 : AF_INET;

                CHECK(inet_pton(fam, never[i], a) == 1);
                CHECKF(egress_addr_forbidden(fam, a), "%s", never[i]);
        }
        for (size_t i = 0; i < sizeof(fine) / sizeof(*fine); i++) {
                int fam = strchr(fine[i], ':') ? AF_INET6 : AF_INET;

                CHECK(inet_pton(fam, fine[i], a) == 1);
                CHECKF(!egress_addr_forbidden(fam, a), "%s", fine[i]);
        }
        PASS();
}

static bool dump_has(int family, const char *text)
{
        struct net_host_addr *a = NULL, want = {.family = family};
        size_t n = 0;
        bool found = false;

        inet_pton(family, text, want.bytes);
        if (host_addrs_dump(&a, &n) < 0)
                return false;
        for (size_t i = 0; i < n && !found; i++)
                found = memcmp(&a[i], &want, sizeof(want)) == 0;
        free(a);
        return found;
}

/* In a network namespace of its own: an address added after the subscription is an event,
 * and the next dump has it, in both families. */
static void test_the_host_addresses_are_followed_from_a_subscription(void)
{
        int status = -1;
        pid_t pid = fork();

        if (pid == 0) {
                unsigned char a4[4], a6[16];
                int sub, nl;

                if (check_unshare_user() < 0 || unshare(CLONE_NEWNET) < 0)
                        _exit(2);
                sub = host_addrs_subscribe();
                nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
                if (sub < 0 || nl < 0)
                        _exit(3);
                if (host_addrs_changed(sub) || dump_has(AF_INET, "192.0.2.9"))
                        _exit(4);
                inet_pton(AF_INET, "192.0.2.9", a4);
                inet_pton(AF_INET6, "2001:db8::9", a6);
                if (netlink_addr_add(nl, 1, AF_INET, a4, 32) < 0 ||
                    netlink_addr_add(nl, 1, AF_INET6, a6, 128) < 0)
                        _exit(5);
                if (!host_addrs_changed(sub) || host_addrs_changed(sub))
                        _exit(6);
                if (!dump_has(AF_INET, "192.0.2.9") || !dump_has(AF_INET6, "2001:db8::9"))
                        _exit(7);
                _exit(0);
        }
        CHECK(pid > 0);
        waitpid(pid, &status, 0);
        CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
        PASS();
}

int main(void)
{
        test_the_planner_gives_the_broker_a_package_managers_capabilities();
        test_the_spec_refuses_a_broker_without_the_range_or_with_sys_admin();
        test_the_spec_refuses_a_manager_by_path_or_run_relative();
        RUN(broker_check_follows_the_specs_rules);
        test_without_a_range_completion_drops_the_broker_and_says_why();
        test_a_spec_without_a_broker_or_pasta_completes_unchanged();
        test_the_host_layer_goes_with_the_broker_on_the_default();
        test_the_broker_and_warnings_are_in_the_plan();
        test_range_maps_put_the_caller_on_its_own_id();
        test_symlinks_inside_the_root_stay_inside();
        test_metadata_addresses_are_never_a_destination();
        test_the_host_addresses_are_followed_from_a_subscription();
        return failures ? 1 : 0;
}
