/* Unit tests for the one resolver (common/resolve.c): every case runs through openat2 and
 * through the walking fallback, which must agree. */
#include "common/cleanup.h"
#include "common/resolve.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"

typedef int (*opener)(int, const char *, int);
static const struct {
        const char *name;
        opener beneath, in_root;
} resolvers[] = {
    {"openat2", cs_open_beneath, cs_open_in_root},
    {"walk", cs_open_beneath_walk, cs_open_in_root_walk},
};

static char base[256];
static int tree = -1;

/* base/rel, in one of two buffers (a call may need two paths). */
static const char *at(const char *rel)
{
        static char buf[2][512];
        static int k;

        k ^= 1;
        snprintf(buf[k], sizeof(buf[k]), "%s/%.200s", base, rel);
        return buf[k];
}

static void put(const char *rel, const char *content)
{
        int fd = open(at(rel), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

        if (fd >= 0) {
                (void)!write(fd, content, strlen(content));
                close(fd);
        }
}

/* fd is the object at rel (same inode), and the open succeeded. */
static bool is_object(int fd, const char *rel)
{
        struct stat a, b;

        if (fd < 0)
                return fail("open failed: %s", strerror(errno));
        if (fstat(fd, &a) < 0 || lstat(at(rel), &b) < 0)
                return fail("stat: %s", strerror(errno));
        close(fd);
        if (a.st_dev != b.st_dev || a.st_ino != b.st_ino)
                return fail("a different object than %s", rel);
        return true;
}

/* The open failed with errno e. */
static bool refused(int fd, int e)
{
        if (fd >= 0) {
                close(fd);
                return fail("opened, but should fail with %s", strerror(e));
        }
        if (errno != e)
                return fail("failed with %s, expected %s", strerror(errno), strerror(e));
        return true;
}

static void setup(void)
{
        snprintf(base, sizeof(base), "/tmp/csandbox-test-resolve.XXXXXX");
        if (!mkdtemp(base))
                exit(2);
        mkdir(at("a"), 0755);
        mkdir(at("a/b"), 0755);
        put("a/b/f", "f");
        mkdir(at("outside"), 0755);
        put("outside/secret", "s");
        symlink("b", at("a/inside-link"));
        symlink("../outside", at("a/out-link"));
        symlink(at("outside"), at("a/abs-link"));
        symlink("f", at("a/b/file-link"));
        mkdir(at("root"), 0755);
        mkdir(at("root/etc"), 0755);
        put("root/etc/marker", "m");
        symlink("/etc", at("root/l"));
        symlink("../../../../etc", at("root/up"));
        tree = open(base, O_PATH | O_DIRECTORY | O_CLOEXEC);
}

static void test_plain_paths_open_the_object(void)
{
        for (size_t i = 0; i < 2; i++) {
                CHECKF(is_object(resolvers[i].beneath(tree, "a/b/f", O_RDONLY), "a/b/f"), "%s: %s",
                       resolvers[i].name, why);
                CHECKF(is_object(resolvers[i].beneath(tree, "a//b/./f", O_PATH), "a/b/f"), "%s: %s",
                       resolvers[i].name, why);
                CHECKF(is_object(resolvers[i].beneath(tree, "a/b", O_PATH | O_DIRECTORY), "a/b"),
                       "%s: %s", resolvers[i].name, why);
                CHECKF(is_object(resolvers[i].beneath(tree, "", O_PATH), "."), "%s: %s",
                       resolvers[i].name, why);
                CHECKF(is_object(resolvers[i].beneath(tree, ".", O_PATH), "."), "%s: %s",
                       resolvers[i].name, why);
                CHECKF(refused(resolvers[i].beneath(tree, "a/nope", O_PATH), ENOENT), "%s: %s",
                       resolvers[i].name, why);
                CHECKF(refused(resolvers[i].beneath(tree, "a/b/f/x", O_PATH), ENOTDIR), "%s: %s",
                       resolvers[i].name, why);
        }
        PASS();
}

static void test_a_symlink_anywhere_is_refused_even_one_that_stays_inside(void)
{
        static const char *const paths[] = {"a/inside-link",     "a/inside-link/f",
                                            "a/out-link",        "a/out-link/secret",
                                            "a/abs-link/secret", "a/b/file-link"};

        for (size_t i = 0; i < 2; i++)
                for (size_t k = 0; k < sizeof(paths) / sizeof(paths[0]); k++) {
                        CHECKF(refused(resolvers[i].beneath(tree, paths[k], O_PATH), ELOOP),
                               "%s %s: %s", resolvers[i].name, paths[k], why);
                        CHECKF(refused(resolvers[i].beneath(tree, paths[k], O_RDONLY), ELOOP),
                               "%s %s (O_RDONLY): %s", resolvers[i].name, paths[k], why);
                }
        PASS();
}

static void test_dotdot_and_absolute_paths_are_refused(void)
{
        static const char *const paths[] = {"..",     "../outside",  "a/../outside/secret",
                                            "a/b/..", "/etc/passwd", "a/../a/b/f"};

        for (size_t i = 0; i < 2; i++)
                for (size_t k = 0; k < sizeof(paths) / sizeof(paths[0]); k++)
                        CHECKF(refused(resolvers[i].beneath(tree, paths[k], O_PATH), EXDEV),
                               "%s %s: %s", resolvers[i].name, paths[k], why);
        PASS();
}

static void test_magic_links_are_refused(void)
{
        _cleanup_close_ int self = open("/proc/self", O_PATH | O_DIRECTORY | O_CLOEXEC);
        char fdname[32];

        CHECK(self >= 0);
        snprintf(fdname, sizeof(fdname), "fd/%d", tree);
        for (size_t i = 0; i < 2; i++) {
                CHECKF(refused(resolvers[i].beneath(self, "cwd", O_PATH), ELOOP), "%s cwd: %s",
                       resolvers[i].name, why);
                CHECKF(refused(resolvers[i].beneath(self, "root/etc", O_PATH), ELOOP),
                       "%s root/etc: %s", resolvers[i].name, why);
                CHECKF(refused(resolvers[i].beneath(self, fdname, O_PATH), ELOOP), "%s %s: %s",
                       resolvers[i].name, fdname, why);
                CHECKF(refused(resolvers[i].in_root(self, "cwd/x", O_PATH), ELOOP) ||
                           refused(resolvers[i].in_root(self, "cwd/x", O_PATH), ENOENT),
                       "%s in root cwd: %s", resolvers[i].name, why);
        }
        PASS();
}

/* In a user and mount namespace of its own: a tmpfs on a/b/mnt is crossed (the result is on
 * the tmpfs), and a link inside the mount is refused as anywhere else. */
static void test_mount_points_are_crossed_links_beyond_them_refused(void)
{
        pid_t pid = fork();
        int status = 0;

        if (pid == 0) {
                struct stat inner, outer;
                int fd, r;

                r = check_unshare_user();
                if (r < 0)
                        _exit(r == -1 ? 10 : 9);
                mkdir(at("a/b/mnt"), 0755);
                if (mount("tmpfs", at("a/b/mnt"), "tmpfs", 0, "mode=0777") < 0)
                        _exit(11);
                put("a/b/mnt/g", "g");
                symlink("/etc", at("a/b/mnt/l"));
                stat(base, &outer);
                /* The tree as this namespace sees it (the old fd is in the old one). */
                tree = open(base, O_PATH | O_DIRECTORY | O_CLOEXEC);
                for (size_t i = 0; i < 2; i++) {
                        fd = resolvers[i].beneath(tree, "a/b/mnt/g", O_RDONLY);
                        if (fd < 0 || fstat(fd, &inner) < 0 || inner.st_dev == outer.st_dev)
                                _exit(12 + (int)i);
                        close(fd);
                        fd = resolvers[i].beneath(tree, "a/b/mnt/l/passwd", O_PATH);
                        if (fd >= 0 || errno != ELOOP)
                                _exit(14 + (int)i);
                }
                _exit(0);
        }
        CHECK(pid > 0);
        waitpid(pid, &status, 0);
        CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d",
               WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        rmdir(at("a/b/mnt"));
        PASS();
}

static void test_in_root_links_stay_inside_the_root(void)
{
        _cleanup_close_ int root = open(at("root"), O_PATH | O_DIRECTORY | O_CLOEXEC);

        for (size_t i = 0; i < 2; i++) {
                CHECKF(
                    is_object(resolvers[i].in_root(root, "l/marker", O_RDONLY), "root/etc/marker"),
                    "%s l/marker: %s", resolvers[i].name, why);
                CHECKF(
                    is_object(resolvers[i].in_root(root, "up/marker", O_RDONLY), "root/etc/marker"),
                    "%s up/marker: %s", resolvers[i].name, why);
                CHECKF(is_object(resolvers[i].in_root(root, "/../../etc/marker", O_RDONLY),
                                 "root/etc/marker"),
                       "%s /../../etc/marker: %s", resolvers[i].name, why);
                CHECKF(refused(resolvers[i].in_root(root, "l/passwd", O_RDONLY), ENOENT),
                       "%s l/passwd escaped: %s", resolvers[i].name, why);
        }
        PASS();
}

static void test_openat2_is_in_use_on_this_kernel(void)
{
        _cleanup_close_ int fd = cs_open_beneath(tree, "a", O_PATH);

        CHECK(fd >= 0);
        CHECK(!cs_resolve_walking());
        PASS();
}

int main(void)
{
        setup();
        test_plain_paths_open_the_object();
        test_a_symlink_anywhere_is_refused_even_one_that_stays_inside();
        test_dotdot_and_absolute_paths_are_refused();
        test_magic_links_are_refused();
        test_mount_points_are_crossed_links_beyond_them_refused();
        test_in_root_links_stay_inside_the_root();
        test_openat2_is_in_use_on_this_kernel();
        {
                char cmd[sizeof(base) + 16];

                snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
                (void)!system(cmd);
        }
        close(tree);
        return failures ? 1 : 0;
}
