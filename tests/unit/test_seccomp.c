/* Seccomp profiles: each filter is loaded in a forked child that makes the call and
 * reports its errno through the exit status, so the tests see what a payload would. */
#include "common/error.h"
#include "policy/seccomp.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/netlink.h>
#include "check.h"

#define PODMAN_PROFILE "/usr/share/containers/seccomp.json"

/* What a child reports when the filter could not be loaded, or it died of a signal. */
#define CHILD_LOAD_FAILED 255
#define CHILD_SIGNALED    1000

struct call {
        long nr;
        unsigned long a[6];
};

static int call_errno(void *arg)
{
        const struct call *c = arg;

        if (syscall(c->nr, c->a[0], c->a[1], c->a[2], c->a[3], c->a[4], c->a[5]) < 0)
                return errno;
        return 0;
}

/* Run fn in a child under prog (NULL: unfiltered); its errno (0: success), or
 * CHILD_SIGNALED + signal. */
static int errno_under(const struct sock_fprog *prog, int (*fn)(void *), void *arg)
{
        int status;
        pid_t pid;

        fflush(stdout);
        pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                if (prog && (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
                             prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, prog) < 0))
                        _exit(CHILD_LOAD_FAILED);
                _exit(fn(arg) & 0xff);
        }
        if (waitpid(pid, &status, 0) < 0)
                return -errno;
        if (WIFSIGNALED(status))
                return CHILD_SIGNALED + WTERMSIG(status);
        return WEXITSTATUS(status);
}

static int syscall_errno(const struct sock_fprog *prog, long nr, unsigned long a0, unsigned long a1,
                         unsigned long a2)
{
        struct call c = {nr, {a0, a1, a2, 0, 0, 0}};

        return errno_under(prog, call_errno, &c);
}

static const char *errno_text(int e)
{
        static char buf[64];

        if (e >= CHILD_SIGNALED)
                snprintf(buf, sizeof(buf), "killed by signal %d", e - CHILD_SIGNALED);
        else if (e == CHILD_LOAD_FAILED)
                snprintf(buf, sizeof(buf), "the filter did not load");
        else if (e == 0)
                snprintf(buf, sizeof(buf), "success");
        else
                snprintf(buf, sizeof(buf), "%s", strerrorname_np(e) ? strerrorname_np(e) : "?");
        return buf;
}

static bool expect_errno(const struct sock_fprog *prog, const char *what, long nr, unsigned long a0,
                         unsigned long a1, unsigned long a2, int want)
{
        int got = syscall_errno(prog, nr, a0, a1, a2);

        if (got != want)
                return fail("%s: expected %s, got %s", what,
                            want ? strerrorname_np(want) : "success", errno_text(got));
        return true;
}

static bool builtin(enum spec_seccomp kind, struct sock_fprog *prog)
{
        struct cs_error err = {0};

        if (seccomp_builtin(kind, prog, &err) < 0)
                return fail("seccomp_builtin: %s", err.msg);
        return true;
}

static bool oci(const char *json, struct sock_fprog *prog)
{
        struct cs_error err = {0};

        if (seccomp_compile_oci(json, strlen(json), "test.json", prog, &err) < 0)
                return fail("seccomp_compile_oci: %s", err.msg);
        return true;
}

/* The error of a profile that must not compile. */
static bool oci_refused(const char *json, struct cs_error *err)
{
        struct sock_fprog prog = {0};

        if (seccomp_compile_oci(json, strlen(json), "test.json", &prog, err) == 0) {
                seccomp_fprog_free(&prog);
                return fail("the profile compiled");
        }
        return true;
}

static bool msg_has(const struct cs_error *err, const char *s)
{
        if (!strstr(err->msg, s))
                return fail("message \"%s\" lacks \"%s\"", err->msg, s);
        return true;
}

/* ---- builtin profiles ---- */

static bool test_builtin_programs_match_a_fresh_compile(void)
{
        static const enum spec_seccomp kinds[] = {SPEC_SECCOMP_DEFAULT, SPEC_SECCOMP_STRICT};

        for (size_t i = 0; i < 2; i++) {
                struct sock_fprog pre, fresh = {0};
                struct cs_error err = {0};
                bool same;

                if (!builtin(kinds[i], &pre))
                        return false;
                if (seccomp_compile_builtin(kinds[i], &fresh, &err) < 0)
                        return fail("compile: %s", err.msg);
                same = pre.len == fresh.len &&
                       memcmp(pre.filter, fresh.filter, pre.len * sizeof(*pre.filter)) == 0;
                seccomp_fprog_free(&fresh);
                if (!same)
                        return fail("profile %d: the generated program is stale", kinds[i]);
        }
        {
                struct sock_fprog pre, fresh = {0};
                struct cs_error err = {0};
                bool same;

                seccomp_builtin_image_build(&pre);
                if (seccomp_compile_image_build(&fresh, &err) < 0)
                        return fail("compile the image build program: %s", err.msg);
                same = pre.len == fresh.len &&
                       memcmp(pre.filter, fresh.filter, pre.len * sizeof(*pre.filter)) == 0;
                seccomp_fprog_free(&fresh);
                if (!same)
                        return fail("the generated image build program is stale");
        }
        return true;
}

static bool test_builtin_none_and_file_have_no_program(void)
{
        struct sock_fprog prog = {0};
        struct cs_error err = {0};

        if (seccomp_builtin(SPEC_SECCOMP_NONE, &prog, &err) == 0 ||
            seccomp_builtin(SPEC_SECCOMP_FILE, &prog, &err) == 0)
                return fail("seccomp_builtin gave a program");
        if (seccomp_compile_builtin(SPEC_SECCOMP_FILE, &prog, &err) == 0) {
                seccomp_fprog_free(&prog);
                return fail("seccomp_compile_builtin compiled FILE");
        }
        return msg_has(&err, "file");
}

/* ---- host trust: no hard links, no setuid or setgid modes ---- */

#define NR_FCHMODAT2 452
#define NOWHERE      ((unsigned long)"/nonexistent-csandbox/x")

static bool expect_denied_calls(const struct sock_fprog *prog);

/* Each call with arguments the kernel refuses (ENOENT, EBADF) should it get through, so the
 * filter's answer differs from the kernel's; want is what the session gets. */
static const struct host_trust_call {
        const char *what;
        long nr;
        unsigned long a[4];
        int want;
} host_trust_calls[] = {
    {"link", SYS_link, {NOWHERE, NOWHERE}, EXDEV},
    {"linkat", SYS_linkat, {~0ul, NOWHERE, ~0ul, NOWHERE}, EXDEV},
    {"linkat AT_EMPTY_PATH", SYS_linkat, {~0ul, (unsigned long)"", ~0ul, NOWHERE}, EXDEV},
    {"chmod 04755", SYS_chmod, {NOWHERE, 04755}, EPERM},
    {"chmod 02755", SYS_chmod, {NOWHERE, 02755}, EPERM},
    {"chmod 0755", SYS_chmod, {NOWHERE, 0755}, ENOENT},
    {"chmod 01777 (sticky)", SYS_chmod, {NOWHERE, 01777}, ENOENT},
    {"chmod 04755 | high bits", SYS_chmod, {NOWHERE, 0xffff0000ul | 04755}, EPERM},
    {"fchmod 04755", SYS_fchmod, {~0ul, 04755}, EPERM},
    {"fchmod 0644", SYS_fchmod, {~0ul, 0644}, EBADF},
    {"fchmodat 02755", SYS_fchmodat, {~0ul, (unsigned long)"x", 02755}, EPERM},
    {"fchmodat 0755", SYS_fchmodat, {~0ul, (unsigned long)"x", 0755}, EBADF},
    {"fchmodat2 04755", NR_FCHMODAT2, {~0ul, (unsigned long)"x", 04755, 0}, EPERM},
    {"fchmodat2 02755", NR_FCHMODAT2, {~0ul, (unsigned long)"x", 02755, 0}, EPERM},
    {"creat 04755", SYS_creat, {NOWHERE, 04755}, EPERM},
    {"creat 0644", SYS_creat, {NOWHERE, 0644}, ENOENT},
    {"open O_CREAT 04755", SYS_open, {NOWHERE, O_CREAT | O_WRONLY, 04755}, EPERM},
    {"open O_CREAT 02755", SYS_open, {NOWHERE, O_CREAT | O_WRONLY, 02755}, EPERM},
    {"open O_CREAT 0644", SYS_open, {NOWHERE, O_CREAT | O_WRONLY, 0644}, ENOENT},
    /* without O_CREAT the kernel ignores the mode: whatever the register holds is fine */
    {"open O_RDONLY with 04755 in the mode", SYS_open, {NOWHERE, O_RDONLY, 04755}, ENOENT},
    {"openat O_CREAT 04755", SYS_openat, {~0ul, (unsigned long)"x", O_CREAT, 04755}, EPERM},
    {"openat O_CREAT 06755", SYS_openat, {~0ul, (unsigned long)"x", O_CREAT, 06755}, EPERM},
    {"openat O_CREAT 0600", SYS_openat, {~0ul, (unsigned long)"x", O_CREAT, 0600}, EBADF},
    {"openat O_RDONLY 04755", SYS_openat, {~0ul, (unsigned long)"x", O_RDONLY, 04755}, EBADF},
    {"openat2", SYS_openat2, {~0ul, (unsigned long)"x", 0, 24}, ENOSYS},
    {"mkdir 02775", SYS_mkdir, {NOWHERE, 02775}, EPERM},
    {"mkdir 0775", SYS_mkdir, {NOWHERE, 0775}, ENOENT},
    {"mkdirat 04755", SYS_mkdirat, {~0ul, (unsigned long)"x", 04755}, EPERM},
    {"mknod S_IFREG|04755", SYS_mknod, {NOWHERE, S_IFREG | 04755, 0}, EPERM},
    {"mknodat S_IFREG|02755", SYS_mknodat, {~0ul, (unsigned long)"x", S_IFREG | 02755, 0}, EPERM},
    {"mknodat S_IFREG|0644", SYS_mknodat, {~0ul, (unsigned long)"x", S_IFREG | 0644, 0}, EBADF},
};

static bool expect_host_trust_calls(const struct sock_fprog *prog, bool applied)
{
        for (size_t i = 0; i < sizeof(host_trust_calls) / sizeof(*host_trust_calls); i++) {
                const struct host_trust_call *h = &host_trust_calls[i];
                struct call c = {h->nr, {h->a[0], h->a[1], h->a[2], h->a[3], 0, 0}};
                int bare = errno_under(NULL, call_errno, &c);
                int got = errno_under(prog, call_errno, &c);
                /* the filter's answers; any other is the kernel's, unfiltered too */
                bool refused = h->want == EXDEV || h->want == EPERM || h->want == ENOSYS;
                int want = applied && refused ? h->want : bare;

                /* the kernel's own answer must differ, or the test proves nothing */
                if (refused ? bare == h->want : bare != h->want)
                        return fail("%s: unfiltered it gives %s", h->what, errno_text(bare));
                if (got != want)
                        return fail("%s: expected %s, got %s", h->what,
                                    want ? strerrorname_np(want) : "success", errno_text(got));
        }
        return true;
}

static bool test_default_and_strict_refuse_links_and_set_id_modes(void)
{
        struct sock_fprog def, strict;

        return builtin(SPEC_SECCOMP_DEFAULT, &def) && expect_host_trust_calls(&def, true) &&
               builtin(SPEC_SECCOMP_STRICT, &strict) && expect_host_trust_calls(&strict, true);
}

static bool test_image_build_program_allows_links_and_set_id_modes(void)
{
        struct sock_fprog prog;

        seccomp_builtin_image_build(&prog);
        /* the rest of default still holds */
        return expect_host_trust_calls(&prog, false) && expect_denied_calls(&prog) &&
               expect_errno(&prog, "clone3", SYS_clone3, 0, 0, 0, ENOSYS);
}

/* Arguments that are harmless should a call get through: bad flags, NULL pointers. */
static const struct denied_call {
        const char *name;
        unsigned long a[3];
} default_denied_calls[] = {
    {"kexec_load", {0, 1000, 0}},
    {"kexec_file_load", {~0ul, ~0ul, 0}},
    {"init_module", {0, 0, 0}},
    {"finit_module", {~0ul, 0, ~0ul}},
    {"delete_module", {0, ~0ul, 0}},
    {"reboot", {0, 0, 0}},
    {"swapon", {0, 0, 0}},
    {"swapoff", {0, 0, 0}},
    {"clock_settime", {0, 0, 0}},
    {"clock_adjtime", {0, 0, 0}},
    {"settimeofday", {0, 0, 0}},
    {"adjtimex", {0, 0, 0}},
    {"acct", {1, 0, 0}},
    {"quotactl", {0, 0, 0}},
    {"quotactl_fd", {~0ul, 0, 0}},
    {"add_key", {0, 0, 0}},
    {"request_key", {0, 0, 0}},
    {"keyctl", {~0ul, 0, 0}},
    {"bpf", {~0ul, 0, 0}},
    {"perf_event_open", {0, 0, 0}},
    {"userfaultfd", {~0ul, 0, 0}},
    {"io_uring_setup", {0, 0, 0}},
    {"io_uring_enter", {~0ul, 0, 0}},
    {"io_uring_register", {~0ul, 0, 0}},
    {"open_by_handle_at", {~0ul, 0, 0}},
    {"lookup_dcookie", {0, 0, 0}},
    {"syslog", {10, 0, 0}},
    {"iopl", {99, 0, 0}},
    {"ioperm", {0, 0, 0}},
    {"uselib", {0, 0, 0}},
    {"sysfs", {99, 0, 0}},
    {"ustat", {0, 0, 0}},
};

static bool expect_denied_calls(const struct sock_fprog *prog)
{
        for (size_t i = 0; i < sizeof(default_denied_calls) / sizeof(*default_denied_calls); i++) {
                const struct denied_call *d = &default_denied_calls[i];
                int nr = seccomp_syscall_resolve_name(d->name);

                if (nr < 0)
                        return fail("%s: unknown here", d->name);
                if (!expect_errno(prog, d->name, nr, d->a[0], d->a[1], d->a[2], EPERM))
                        return false;
        }
        return true;
}

static bool test_default_denies_kernel_global_calls(void)
{
        struct sock_fprog prog;

        return builtin(SPEC_SECCOMP_DEFAULT, &prog) && expect_denied_calls(&prog);
}

static bool test_default_denies_tiocsti_with_high_bits(void)
{
        struct sock_fprog prog;
        char c = 'x';

        if (!builtin(SPEC_SECCOMP_DEFAULT, &prog))
                return false;
        /* Unfiltered, fd -1 gives EBADF: EPERM can only come from the filter. */
        return expect_errno(NULL, "unfiltered TIOCSTI", SYS_ioctl, ~0ul, TIOCSTI, (unsigned long)&c,
                            EBADF) &&
               expect_errno(&prog, "TIOCSTI", SYS_ioctl, ~0ul, TIOCSTI, (unsigned long)&c, EPERM) &&
               expect_errno(&prog, "TIOCSTI | 1 << 32", SYS_ioctl, ~0ul,
                            TIOCSTI | 0xdeadbeef00000000ul, (unsigned long)&c, EPERM) &&
               expect_errno(&prog, "TIOCLINUX | high bits", SYS_ioctl, ~0ul,
                            TIOCLINUX | 0x100000000ul, (unsigned long)&c, EPERM) &&
               expect_errno(&prog, "TIOCSETD | high bits", SYS_ioctl, ~0ul,
                            TIOCSETD | 0x100000000ul, (unsigned long)&c, EPERM) &&
               expect_errno(&prog, "TIOCGWINSZ", SYS_ioctl, ~0ul, TIOCGWINSZ, 0, EBADF);
}

static bool test_default_clone3_returns_enosys(void)
{
        struct sock_fprog prog;

        return builtin(SPEC_SECCOMP_DEFAULT, &prog) &&
               expect_errno(&prog, "clone3", SYS_clone3, 0, 0, 0, ENOSYS);
}

static int fork_and_reap(void *arg)
{
        int status;
        pid_t pid;

        (void)arg;
        pid = fork();
        if (pid < 0)
                return errno;
        if (pid == 0)
                _exit(7);
        if (waitpid(pid, &status, 0) < 0)
                return errno;
        return WIFEXITED(status) && WEXITSTATUS(status) == 7 ? 0 : EPROTO;
}

static int ptrace_traceme(void *arg)
{
        (void)arg;
        return syscall(SYS_ptrace, 0 /* PTRACE_TRACEME */, 0, 0, 0) < 0 ? errno : 0;
}

static bool test_default_and_strict_keep_fork_working(void)
{
        struct sock_fprog def, strict;
        int r;

        if (!builtin(SPEC_SECCOMP_DEFAULT, &def) || !builtin(SPEC_SECCOMP_STRICT, &strict))
                return false;
        r = errno_under(&def, fork_and_reap, NULL);
        if (r != 0)
                return fail("fork under default: %s", errno_text(r));
        r = errno_under(&strict, fork_and_reap, NULL);
        if (r != 0)
                return fail("fork under strict: %s", errno_text(r));
        return true;
}

static bool test_default_allows_ptrace(void)
{
        struct sock_fprog prog;
        int r;

        if (!builtin(SPEC_SECCOMP_DEFAULT, &prog))
                return false;
        r = errno_under(&prog, ptrace_traceme, NULL);
        return r == 0 ? true : fail("PTRACE_TRACEME: %s", errno_text(r));
}

static bool test_default_keeps_namespaces_and_mounts_allowed(void)
{
        struct sock_fprog prog;
        int base;

        if (!builtin(SPEC_SECCOMP_DEFAULT, &prog))
                return false;
        /* fsopen of a missing filesystem type fails after the permission checks. */
        base = syscall_errno(NULL, SYS_fsopen, (unsigned long)"csandbox-nofs", 0, 0);
        if (!expect_errno(&prog, "fsopen", SYS_fsopen, (unsigned long)"csandbox-nofs", 0, 0, base))
                return false;
        base = syscall_errno(NULL, SYS_unshare, CLONE_NEWUSER, 0, 0);
        if (!expect_errno(&prog, "unshare(CLONE_NEWUSER)", SYS_unshare, CLONE_NEWUSER, 0, 0, base))
                return false;
        if (base != 0)
                fail("unshare(CLONE_NEWUSER) fails here unfiltered too (%s)", errno_text(base));
        return expect_errno(&prog, "umount2", SYS_umount2, (unsigned long)"/nonexistent", 0, 0,
                            syscall_errno(NULL, SYS_umount2, (unsigned long)"/nonexistent", 0, 0));
}

#if defined(__x86_64__)
static long int80(long nr, long a, long b, long c)
{
        long ret;

        /* The compat entry clears r8-r11. */
        __asm__ volatile("int $0x80"
                         : "=a"(ret)
                         : "a"(nr), "b"(a), "c"(b), "d"(c)
                         : "memory", "r8", "r9", "r10", "r11");
        return ret;
}

static int i386_call_errno(void *arg)
{
        const struct call *c = arg;
        int r = (int)int80(c->nr, (long)c->a[0], (long)c->a[1], (long)c->a[2]);

        return r < 0 ? -r : 0;
}

static bool i386_available(void)
{
        struct call c = {seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86, "getppid")};

        return errno_under(NULL, i386_call_errno, &c) == 0;
}

static bool expect_i386_errno(const struct sock_fprog *prog, const char *name, unsigned long a0,
                              unsigned long a1, int want)
{
        struct call c = {seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86, name), {a0, a1}};
        int got = errno_under(prog, i386_call_errno, &c);

        if (got != want)
                return fail("i386 %s: expected %s, got %s", name, strerrorname_np(want),
                            errno_text(got));
        return true;
}

/* The builtin filters deny the i386 ABI whole: any call through int 0x80 kills. */
static bool test_default_denies_the_i386_abi_whole(void)
{
        struct sock_fprog prog;

        if (!builtin(SPEC_SECCOMP_DEFAULT, &prog))
                return false;
        if (!i386_available())
                return fail("skipped: this kernel runs no i386 syscalls"), true;
        return expect_i386_errno(&prog, "getppid", 0, 0, CHILD_SIGNALED + SIGSYS) &&
               expect_i386_errno(&prog, "keyctl", ~0u, 0, CHILD_SIGNALED + SIGSYS);
}

/* And the x32 ABI: seccomp sees an x32 call even on kernels built without x32. */
static bool test_default_denies_the_x32_abi_whole(void)
{
        struct sock_fprog prog;
        int kexec = seccomp_syscall_resolve_name_arch(SCMP_ARCH_X32, "kexec_load");
        int getppid_nr = seccomp_syscall_resolve_name_arch(SCMP_ARCH_X32, "getppid");

        if (!builtin(SPEC_SECCOMP_DEFAULT, &prog))
                return false;
        if (!(kexec & 0x40000000))
                return fail("libseccomp's x32 number for kexec_load lacks the x32 bit");
        return expect_errno(&prog, "x32 kexec_load", kexec, 0, 1000, 0, CHILD_SIGNALED + SIGSYS) &&
               expect_errno(&prog, "x32 getppid", getppid_nr, 0, 0, 0, CHILD_SIGNALED + SIGSYS);
}

static bool test_oci_archmap_adds_sub_architectures(void)
{
        static const char with_map[] =
            "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"archMap\":[{\"architecture\":"
            "\"SCMP_ARCH_AARCH64\",\"subArchitectures\":[\"SCMP_ARCH_ARM\"]},"
            "{\"architecture\":\"SCMP_ARCH_X86_64\",\"subArchitectures\":"
            "[\"SCMP_ARCH_X86\",\"SCMP_ARCH_X32\"]}],"
            "\"syscalls\":[{\"names\":[\"keyctl\"],\"action\":\"SCMP_ACT_ERRNO\"}]}";
        static const char without[] =
            "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"keyctl\"],"
            "\"action\":\"SCMP_ACT_ERRNO\"}]}";
        struct sock_fprog prog = {0};
        bool ok;

        if (!i386_available())
                return fail("skipped: this kernel runs no i386 syscalls"), true;
        if (!oci(with_map, &prog))
                return false;
        ok = expect_i386_errno(&prog, "keyctl", ~0u, 0, EPERM);
        seccomp_fprog_free(&prog);
        if (!ok || !oci(without, &prog))
                return false;
        /* Without the i386 arch in the filter, libseccomp's bad-arch action kills. */
        ok = expect_i386_errno(&prog, "keyctl", ~0u, 0, CHILD_SIGNALED + SIGSYS);
        seccomp_fprog_free(&prog);
        return ok;
}
#endif

static bool test_strict_denies_everything_default_denies(void)
{
        struct sock_fprog prog;

        return builtin(SPEC_SECCOMP_STRICT, &prog) && expect_denied_calls(&prog) &&
               expect_errno(&prog, "clone3", SYS_clone3, 0, 0, 0, ENOSYS) &&
               expect_errno(&prog, "TIOCSTI", SYS_ioctl, ~0ul, TIOCSTI | (1ul << 40), 0, EPERM);
}

static int clone_flags_errno(void *arg)
{
        unsigned long flags = *(unsigned long *)arg;
        long r = syscall(SYS_clone, flags | SIGCHLD, 0, 0, 0, 0);

        if (r == 0)
                _exit(0);
        if (r < 0)
                return errno;
        waitpid((pid_t)r, NULL, 0);
        return 0;
}

static bool test_strict_denies_new_namespaces(void)
{
        static const unsigned long flags[] = {
            CLONE_NEWNS,   CLONE_NEWCGROUP,
            CLONE_NEWUTS,  CLONE_NEWIPC,
            CLONE_NEWUSER, CLONE_NEWPID,
            CLONE_NEWNET,  CLONE_NEWUSER | CLONE_NEWNET | 0xff00000000000000ul,
        };
        struct sock_fprog prog;

        if (!builtin(SPEC_SECCOMP_STRICT, &prog))
                return false;
        if (!expect_errno(&prog, "unshare(CLONE_NEWUSER)", SYS_unshare, CLONE_NEWUSER, 0, 0,
                          EPERM) ||
            !expect_errno(&prog, "unshare(0)", SYS_unshare, 0, 0, 0, EPERM) ||
            !expect_errno(&prog, "setns", SYS_setns, ~0ul, 0, 0, EPERM))
                return false;
        for (size_t i = 0; i < sizeof(flags) / sizeof(*flags); i++) {
                unsigned long f = flags[i];
                int got = errno_under(&prog, clone_flags_errno, &f);

                if (got != EPERM)
                        return fail("clone(0x%lx): expected EPERM, got %s", f, errno_text(got));
        }
        return true;
}

static bool test_strict_denies_mount_calls(void)
{
        static const char *const names[] = {
            "mount",   "umount2", "pivot_root", "fsopen",    "fsconfig",
            "fsmount", "fspick",  "move_mount", "open_tree", "mount_setattr",
        };
        struct sock_fprog prog;

        if (!builtin(SPEC_SECCOMP_STRICT, &prog))
                return false;
        for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++)
                if (!expect_errno(&prog, names[i], seccomp_syscall_resolve_name(names[i]), 0, 0, 0,
                                  EPERM))
                        return false;
        return true;
}

/* ---- OCI / Docker JSON profiles ---- */

static bool test_oci_podman_profile_loads(void)
{
        struct sock_fprog prog = {0};
        struct cs_error err = {0};

        if (access(PODMAN_PROFILE, R_OK) < 0)
                return fail("skipped: no %s", PODMAN_PROFILE), true;
        if (seccomp_compile_file(PODMAN_PROFILE, &prog, &err) < 0)
                return fail("%s", err.msg);
        seccomp_fprog_free(&prog);
        return true;
}

static bool test_oci_podman_profile_denies_and_allows(void)
{
        struct sock_fprog prog = {0};
        struct cs_error err = {0};
        bool ok;
        int r;

        if (access(PODMAN_PROFILE, R_OK) < 0)
                return fail("skipped: no %s", PODMAN_PROFILE), true;
        if (seccomp_compile_file(PODMAN_PROFILE, &prog, &err) < 0)
                return fail("%s", err.msg);
        r = errno_under(&prog, fork_and_reap, NULL);
        ok = (r == 0 || fail("fork: %s", errno_text(r))) &&
             expect_errno(&prog, "getppid", SYS_getppid, 0, 0, 0, 0) &&
             /* the explicit EPERM list */
             expect_errno(&prog, "kexec_load", SYS_kexec_load, 0, 1000, 0, EPERM) &&
             /* "excludes": {"caps": ["CAP_SYS_ADMIN"]}: kept, since the payload has none */
             expect_errno(&prog, "bpf", SYS_bpf, ~0ul, 0, 0, EPERM) &&
             expect_errno(&prog, "open_by_handle_at", SYS_open_by_handle_at, ~0ul, 0, 0, EPERM) &&
             /* the audit socket rule: two args, errnoRet 22 */
             expect_errno(&prog, "socket(AF_NETLINK, NETLINK_AUDIT)", SYS_socket, AF_NETLINK,
                          SOCK_RAW, NETLINK_AUDIT, EINVAL) &&
             expect_errno(&prog, "socket(AF_UNIX)", SYS_socket, AF_UNIX, SOCK_STREAM, 0, 0) &&
             /* unlisted: the default action, ERRNO(ENOSYS) */
             expect_errno(&prog, "add_key", SYS_add_key, 0, 0, 0, ENOSYS) &&
             expect_errno(&prog, "io_uring_setup", SYS_io_uring_setup, 0, 0, 0, ENOSYS) &&
             /* personality is allowed only for the listed personas */
             expect_errno(&prog, "personality(0xffffffff)", SYS_personality, 0xffffffff, 0, 0, 0) &&
             expect_errno(&prog, "personality(READ_IMPLIES_EXEC)", SYS_personality, 0x0400000, 0, 0,
                          ENOSYS);
        seccomp_fprog_free(&prog);
        return ok;
}

static bool test_oci_parse_error_has_line_and_column(void)
{
        struct cs_error err = {0};

        return oci_refused("{\n  \"defaultAction\": \"SCMP_ACT_ALLOW\",\n  oops }", &err) &&
               msg_has(&err, "test.json:3:3") && msg_has(&err, "oops");
}

static bool test_oci_trailing_garbage_is_refused(void)
{
        struct cs_error err = {0};

        return oci_refused("{\"defaultAction\": \"SCMP_ACT_ALLOW\"}\n x", &err) &&
               msg_has(&err, "test.json:2:2");
}

static bool test_oci_wrong_field_type_names_the_field(void)
{
        struct cs_error err = {0};

        if (!oci_refused("{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":["
                         "{\"names\":[\"getpid\"],\"action\":\"SCMP_ACT_ERRNO\"},"
                         "{\"names\":[\"getpid\"],\"action\":7}]}",
                         &err) ||
            !msg_has(&err, "syscalls[1].action") || !msg_has(&err, "expected a string"))
                return false;
        if (!oci_refused("{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":["
                         "{\"names\":[\"dup\"],\"action\":\"SCMP_ACT_ERRNO\",\"args\":["
                         "{\"index\":0,\"value\":\"1\",\"op\":\"SCMP_CMP_EQ\"}]}]}",
                         &err))
                return false;
        if (!msg_has(&err, "syscalls[0].args[0].value"))
                return false;
        return oci_refused("{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":"
                           "[\"dup\", 3],\"action\":\"SCMP_ACT_ERRNO\"}]}",
                           &err) &&
               msg_has(&err, "syscalls[0].names[1]");
}

static bool test_oci_notify_and_unknown_actions_are_refused(void)
{
        struct cs_error err = {0};

        return oci_refused("{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":"
                           "[\"dup\"],\"action\":\"SCMP_ACT_NOTIFY\"}]}",
                           &err) &&
               msg_has(&err, "syscalls[0].action") && msg_has(&err, "listener") &&
               oci_refused("{\"defaultAction\":\"SCMP_ACT_BOGUS\"}", &err) &&
               msg_has(&err, "defaultAction") && oci_refused("{\"syscalls\":[]}", &err) &&
               msg_has(&err, "defaultAction: missing");
}

static bool test_oci_unknown_syscall_names_are_skipped(void)
{
        struct sock_fprog prog = {0};
        bool ok;

        if (!oci("{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":"
                 "[\"no_such_syscall\",\"keyctl\"],\"action\":\"SCMP_ACT_ERRNO\","
                 "\"errnoRet\":5}]}",
                 &prog))
                return false;
        ok = expect_errno(&prog, "keyctl", SYS_keyctl, ~0ul, 0, 0, EIO);
        seccomp_fprog_free(&prog);
        return ok;
}

static bool test_oci_legacy_name_and_default_errno(void)
{
        struct sock_fprog prog = {0};
        bool ok;

        if (!oci("{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"name\":\"keyctl\","
                 "\"action\":\"SCMP_ACT_ERRNO\",\"args\":null}]}",
                 &prog))
                return false;
        ok = expect_errno(&prog, "keyctl", SYS_keyctl, ~0ul, 0, 0, EPERM);
        seccomp_fprog_free(&prog);
        return ok;
}

static bool test_oci_args_on_one_index_become_separate_rules(void)
{
        struct sock_fprog prog = {0};
        bool ok;

        /* dup(100) or dup(101) is refused; any other fd reaches the kernel (EBADF). */
        if (!oci("{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"dup\"],"
                 "\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":7,\"args\":["
                 "{\"index\":0,\"value\":100,\"op\":\"SCMP_CMP_EQ\"},"
                 "{\"index\":0,\"value\":101,\"op\":\"SCMP_CMP_EQ\"}]}]}",
                 &prog))
                return false;
        ok = expect_errno(&prog, "dup(100)", SYS_dup, 100, 0, 0, E2BIG) &&
             expect_errno(&prog, "dup(101)", SYS_dup, 101, 0, 0, E2BIG) &&
             expect_errno(&prog, "dup(102)", SYS_dup, 102, 0, 0, EBADF);
        seccomp_fprog_free(&prog);
        return ok;
}

static bool test_oci_args_on_distinct_indexes_must_all_match(void)
{
        struct sock_fprog prog = {0};
        bool ok;

        if (!oci("{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"dup3\"],"
                 "\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":7,\"args\":["
                 "{\"index\":0,\"value\":100,\"op\":\"SCMP_CMP_EQ\"},"
                 "{\"index\":1,\"value\":200,\"op\":\"SCMP_CMP_GE\"}]}]}",
                 &prog))
                return false;
        ok = expect_errno(&prog, "dup3(100, 201)", SYS_dup3, 100, 201, 0, E2BIG) &&
             expect_errno(&prog, "dup3(100, 199)", SYS_dup3, 100, 199, 0, EBADF) &&
             expect_errno(&prog, "dup3(99, 201)", SYS_dup3, 99, 201, 0, EBADF);
        seccomp_fprog_free(&prog);
        return ok;
}

static bool test_oci_masked_eq_uses_value_as_mask(void)
{
        struct sock_fprog prog = {0};
        bool ok;

        if (!oci("{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"dup\"],"
                 "\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":7,\"args\":[{\"index\":0,"
                 "\"value\":255,\"valueTwo\":100,\"op\":\"SCMP_CMP_MASKED_EQ\"}]}]}",
                 &prog))
                return false;
        ok = expect_errno(&prog, "dup(0x164)", SYS_dup, 0x164, 0, 0, E2BIG) &&
             expect_errno(&prog, "dup(0x165)", SYS_dup, 0x165, 0, 0, EBADF);
        seccomp_fprog_free(&prog);
        return ok;
}

static bool test_oci_rule_with_the_default_action_is_skipped(void)
{
        struct sock_fprog prog = {0};
        bool ok;

        /* libseccomp refuses such a rule: it must be skipped, not fail the profile. */
        if (!oci("{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"defaultErrnoRet\":38,\"syscalls\":["
                 "{\"names\":[\"keyctl\"],\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":38},"
                 "{\"names\":[\"getppid\"],\"action\":\"SCMP_ACT_ALLOW\"}]}",
                 &prog))
                return false;
        seccomp_fprog_free(&prog);
        if (!oci("{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":["
                 "{\"names\":[\"keyctl\",\"getppid\"],\"action\":\"SCMP_ACT_ALLOW\"},"
                 "{\"names\":[\"keyctl\"],\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":5}]}",
                 &prog))
                return false;
        ok = expect_errno(&prog, "keyctl", SYS_keyctl, ~0ul, 0, 0, EIO) &&
             expect_errno(&prog, "getppid", SYS_getppid, 0, 0, 0, 0);
        seccomp_fprog_free(&prog);
        return ok;
}

static bool test_oci_includes_and_excludes_as_runc_applies_them(void)
{
        struct sock_fprog prog = {0};
        bool ok;

        /* errnoRet tells the rules apart: which one won shows which was kept. */
        if (!oci("{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":["
                 "{\"names\":[\"dup\"],\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":1,"
                 "\"includes\":{\"caps\":[\"CAP_SYS_ADMIN\"]}},"
                 "{\"names\":[\"dup\"],\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":2,"
                 "\"includes\":{\"minKernel\":\"99.0\"}},"
                 "{\"names\":[\"dup\"],\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":3,"
                 "\"excludes\":{\"minKernel\":\"2.6\"}},"
                 "{\"names\":[\"dup\"],\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":4,"
                 "\"includes\":{\"arches\":[\"no-such-arch\"]}},"
                 "{\"names\":[\"dup\"],\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":5,"
                 "\"excludes\":{\"caps\":[\"CAP_SYS_ADMIN\"],\"minKernel\":\"99.1.2\"}},"
                 "{\"names\":[\"dup2\"],\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":6,"
                 "\"includes\":{\"minKernel\":\"3.10\"}}]}",
                 &prog))
                return false;
        ok = expect_errno(&prog, "dup", SYS_dup, ~0ul, 0, 0, EIO) &&
             expect_errno(&prog, "dup2", SYS_dup2, ~0ul, 0, 0, ENXIO);
        seccomp_fprog_free(&prog);
        return ok;
}

static bool test_oci_native_arch_includes(void)
{
        struct sock_fprog prog = {0};
        const char *native;
        char json[512];
        bool ok;

        switch (seccomp_arch_native()) {
        case SCMP_ARCH_X86_64:
                native = "amd64";
                break;
        case SCMP_ARCH_AARCH64:
                native = "arm64";
                break;
        default:
                return fail("skipped: no Docker arch name known to this test"), true;
        }
        snprintf(json, sizeof(json),
                 "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":["
                 "{\"names\":[\"dup\"],\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":5,"
                 "\"includes\":{\"arches\":[\"ppc64le\",\"%s\"]}},"
                 "{\"names\":[\"dup2\"],\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":5,"
                 "\"excludes\":{\"arches\":[\"%s\"]}}]}",
                 native, native);
        if (!oci(json, &prog))
                return false;
        ok = expect_errno(&prog, "dup", SYS_dup, ~0ul, 0, 0, EIO) &&
             expect_errno(&prog, "dup2", SYS_dup2, ~0ul, 0, 0, EBADF);
        seccomp_fprog_free(&prog);
        return ok;
}

static bool test_oci_limits_are_enforced(void)
{
        struct cs_error err = {0};
        struct sock_fprog prog = {0};
        size_t cap = 4097 * 8 + 128, n = 0;
        char *big = malloc(cap);
        bool ok;

        if (!big)
                return fail("malloc");
        n += (size_t)snprintf(big, cap, "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[");
        for (size_t i = 0; i < 4097; i++)
                n += (size_t)snprintf(big + n, cap - n, "%s{}", i ? "," : "");
        snprintf(big + n, cap - n, "]}");
        ok = oci_refused(big, &err) && msg_has(&err, "4096");
        free(big);
        if (!ok)
                return false;
        if (!oci_refused("{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":"
                         "[\"dup\"],\"action\":\"SCMP_ACT_ERRNO\",\"args\":[{},{},{},{},{},{},{}"
                         "]}]}",
                         &err) ||
            !msg_has(&err, "syscalls[0].args"))
                return false;
        if (!oci_refused("{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":"
                         "[\"dup\"],\"action\":\"SCMP_ACT_ERRNO\",\"args\":[{\"index\":6,"
                         "\"op\":\"SCMP_CMP_EQ\"}]}]}",
                         &err) ||
            !msg_has(&err, "syscalls[0].args[0].index"))
                return false;
        if (seccomp_compile_oci("{}", SECCOMP_FILE_MAX + 1, "huge.json", &prog, &err) == 0)
                return fail("an oversized profile compiled");
        return msg_has(&err, "huge.json");
}

static bool test_oci_unreadable_file_names_path_and_errno(void)
{
        struct sock_fprog prog = {0};
        struct cs_error err = {0};

        if (seccomp_compile_file("/nonexistent/profile.json", &prog, &err) == 0)
                return fail("compiled a missing file");
        return msg_has(&err, "/nonexistent/profile.json") && msg_has(&err, strerror(ENOENT)) &&
               msg_has(&err, "--seccomp");
}

/* Found by tests/fuzz/fuzz_seccomp: argument rules on three of x86's multiplexed socket
 * calls (a leak inside libseccomp 2.5.4, suppressed in tests/lsan.supp) compile to a program
 * that still ends in a return. */
static bool test_oci_socketcall_rules_on_the_x86_sub_arch_compile(void)
{
        const char json[] = "{\"defaultAction\":\"SCMP_ACT_LOG\",\"archMap\":[{\"architecture\":"
                            "\"SCMP_ARCH_X86_64\",\"subArchitectures\":[\"SCMP_ARCH_X86\"]}],"
                            "\"syscalls\":[{\"names\":[\"setsockopt\",\"shutdown\",\"socketcall\"],"
                            "\"action\":\"SCMP_ACT_ALLOW\",\"args\":[{\"index\":1,\"op\":"
                            "\"SCMP_CMP_EQ\"}]}]}";
        struct sock_fprog prog = {0};

        if (!oci(json, &prog))
                return false;
        if (prog.len == 0 || BPF_CLASS(prog.filter[prog.len - 1].code) != BPF_RET)
                return fail("no program, or one that does not end in a return");
        seccomp_fprog_free(&prog);
        return true;
}

int main(void)
{
        RUN(test_builtin_programs_match_a_fresh_compile);
        RUN(test_builtin_none_and_file_have_no_program);
        RUN(test_default_denies_kernel_global_calls);
        RUN(test_default_denies_tiocsti_with_high_bits);
        RUN(test_default_clone3_returns_enosys);
        RUN(test_default_and_strict_refuse_links_and_set_id_modes);
        RUN(test_image_build_program_allows_links_and_set_id_modes);
        RUN(test_default_and_strict_keep_fork_working);
        RUN(test_default_allows_ptrace);
        RUN(test_default_keeps_namespaces_and_mounts_allowed);
#if defined(__x86_64__)
        RUN(test_default_denies_the_i386_abi_whole);
        RUN(test_default_denies_the_x32_abi_whole);
        RUN(test_oci_archmap_adds_sub_architectures);
        RUN(test_oci_socketcall_rules_on_the_x86_sub_arch_compile);
#endif
        RUN(test_strict_denies_everything_default_denies);
        RUN(test_strict_denies_new_namespaces);
        RUN(test_strict_denies_mount_calls);
        RUN(test_oci_podman_profile_loads);
        RUN(test_oci_podman_profile_denies_and_allows);
        RUN(test_oci_parse_error_has_line_and_column);
        RUN(test_oci_trailing_garbage_is_refused);
        RUN(test_oci_wrong_field_type_names_the_field);
        RUN(test_oci_notify_and_unknown_actions_are_refused);
        RUN(test_oci_unknown_syscall_names_are_skipped);
        RUN(test_oci_legacy_name_and_default_errno);
        RUN(test_oci_args_on_one_index_become_separate_rules);
        RUN(test_oci_args_on_distinct_indexes_must_all_match);
        RUN(test_oci_masked_eq_uses_value_as_mask);
        RUN(test_oci_rule_with_the_default_action_is_skipped);
        RUN(test_oci_includes_and_excludes_as_runc_applies_them);
        RUN(test_oci_native_arch_includes);
        RUN(test_oci_limits_are_enforced);
        RUN(test_oci_unreadable_file_names_path_and_errno);
        return failures ? EXIT_FAILURE : EXIT_SUCCESS;
}
