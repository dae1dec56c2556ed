/* Seccomp profiles -> classic BPF programs, with libseccomp: the builtin profiles (the
 * design's `default` and `strict`) and the libseccomp plumbing every profile shares. An
 * OCI/Docker JSON profile is compiled in seccomp_oci.c. */
#include "seccomp.h"
#include "seccomp_bpf.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <seccomp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/utsname.h>

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
/* Linux 6.6; the same number on every arch since the syscall tables were unified. */
#ifndef CS_NR_FCHMODAT2
#define CS_NR_FCHMODAT2 452
#endif

/* Kernel-global operations: a sandboxed agent has no business with the machine's clock,
 * modules, keyrings, swap or kernel log, and each is a historic privilege-escalation surface. */
static const char *const default_denied[] = {
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "reboot",
    "swapon",
    "swapoff",
    "clock_settime",
    "clock_settime64",
    "clock_adjtime",
    "clock_adjtime64",
    "settimeofday",
    "adjtimex",
    "stime",
    "acct",
    "quotactl",
    "quotactl_fd",
    "add_key",
    "request_key",
    "keyctl",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "open_by_handle_at",
    "lookup_dcookie",
    "syslog",
    "iopl",
    "ioperm",
    /* obsolete: removed from the kernel or never needed by a userspace program */
    "uselib",
    "_sysctl",
    "nfsservctl",
    "vm86",
    "vm86old",
    "create_module",
    "get_kernel_syms",
    "query_module",
    "sysfs",
    "ustat",
    "bdflush",
};

/* TIOCSTI pushes input into the controlling terminal (the tty outside the sandbox);
 * TIOCLINUX can read and paste the Linux console; TIOCSETD on a terminal passed in
 * (--tty=inherit) swaps its line discipline and leaves it dead after the sandbox exits. */
static const unsigned long default_denied_ioctls[] = {TIOCSTI, TIOCLINUX, TIOCSETD};

static const char *const strict_denied[] = {
    "unshare",  "setns",   "mount",  "umount",     "umount2",   "pivot_root",    "fsopen",
    "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr",
};

/* CLONE_NEWTIME is included although clone(2) takes the exit signal in that byte: no valid
 * signal has bit 7 set, so only clone3 (ENOSYS here) and unshare could create a time ns. */
static const unsigned long strict_clone_flags[] = {
    CLONE_NEWNS,   CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
    CLONE_NEWUSER, CLONE_NEWPID,    CLONE_NEWNET, CLONE_NEWTIME,
};

/* Host trust: the session writes the work tree and the profile dir, which the host's git and
 * claude read afterwards, and the journal watches them by name. A hard link would give a
 * file there a second name the journal never sees (or one outside the tree): EXDEV, the
 * errno on which git, cp and pnpm fall back to a rename or a copy. */
static const char *const host_trust_no_link[] = {"link", "linkat"};

/* A setuid or setgid file left for the host runs as the user for whoever executes it. Each
 * call that sets a mode is refused when the mode carries either bit: the argument index of
 * the mode, and of the open flags when the mode only counts with O_CREAT (-1: always). */
static const struct {
        const char *name;
        int mode_arg;
        int flags_arg;
} host_trust_mode_calls[] = {
    {"chmod", 1, -1},   {"fchmod", 1, -1}, {"fchmodat", 2, -1}, {"fchmodat2", 2, -1},
    {"creat", 1, -1},   {"open", 2, 1},    {"openat", 3, 2},    {"mkdir", 1, -1},
    {"mkdirat", 2, -1}, {"mknod", 1, -1},  {"mknodat", 2, -1},
};

static const char *seccomp_kind_name(enum spec_seccomp kind)
{
        switch (kind) {
        case SPEC_SECCOMP_DEFAULT:
                return "default";
        case SPEC_SECCOMP_STRICT:
                return "strict";
        case SPEC_SECCOMP_NONE:
                return "none";
        case SPEC_SECCOMP_FILE:
                return "file";
        }
        return "unknown";
}

int cs_seccomp_arch_add(scmp_filter_ctx ctx, uint32_t arch, struct cs_error *err)
{
        int r = seccomp_arch_add(ctx, arch);

        if (r < 0 && r != -EEXIST)
                return cs_error_set(err, -r, "seccomp: add architecture 0x%x", arch);
        return 0;
}

/* The flags argument of clone: s390 swaps the first two arguments. */
static unsigned clone_flags_arg(void)
{
        uint32_t native = seccomp_arch_native();

        return native == SCMP_ARCH_S390X || native == SCMP_ARCH_S390 ? 1 : 0;
}

static int builtin_rule_add(scmp_filter_ctx ctx, uint32_t action, const char *name, unsigned n_cmp,
                            const struct scmp_arg_cmp *cmp, struct cs_error *err)
{
        int nr = seccomp_syscall_resolve_name(name);
        int r;

        /* Newer than some libseccomp releases; the filter is for the native ABI only. */
        if (nr == __NR_SCMP_ERROR && strcmp(name, "fchmodat2") == 0)
                nr = CS_NR_FCHMODAT2;

        /* A builtin rule that libseccomp cannot express must fail the build, never vanish. */
        if (nr == __NR_SCMP_ERROR)
                return cs_error_set(err, ENOSYS,
                                    "seccomp: libseccomp %u.%u.%u does not know the syscall %s",
                                    seccomp_version()->major, seccomp_version()->minor,
                                    seccomp_version()->micro, name);
        r = seccomp_rule_add_array(ctx, action, nr, n_cmp, cmp);
        if (r < 0)
                return cs_error_set(err, -r, "seccomp: add the builtin rule for %s", name);
        return 0;
}

static int host_trust_rules_add(scmp_filter_ctx ctx, struct cs_error *err)
{
        static const mode_t set_id_bits[] = {S_ISUID, S_ISGID};
        int r;

        for (size_t i = 0; i < sizeof(host_trust_no_link) / sizeof(*host_trust_no_link); i++) {
                r = builtin_rule_add(ctx, SCMP_ACT_ERRNO(EXDEV), host_trust_no_link[i], 0, NULL,
                                     err);
                if (r < 0)
                        return r;
        }
        /* The kernel reads the mode as 16 bits and the flags as 32: a masked compare of the
         * one bit each is all that counts, whatever the high bits say. */
        for (size_t i = 0; i < sizeof(host_trust_mode_calls) / sizeof(*host_trust_mode_calls);
             i++) {
                for (size_t b = 0; b < sizeof(set_id_bits) / sizeof(*set_id_bits); b++) {
                        struct scmp_arg_cmp cmp[2] = {{
                            .arg = (unsigned)host_trust_mode_calls[i].mode_arg,
                            .op = SCMP_CMP_MASKED_EQ,
                            .datum_a = set_id_bits[b],
                            .datum_b = set_id_bits[b],
                        }};
                        unsigned n = 1;

                        if (host_trust_mode_calls[i].flags_arg >= 0)
                                cmp[n++] = (struct scmp_arg_cmp){
                                    .arg = (unsigned)host_trust_mode_calls[i].flags_arg,
                                    .op = SCMP_CMP_MASKED_EQ,
                                    .datum_a = O_CREAT,
                                    .datum_b = O_CREAT,
                                };
                        r = builtin_rule_add(ctx, SCMP_ACT_ERRNO(EPERM),
                                             host_trust_mode_calls[i].name, n, cmp, err);
                        if (r < 0)
                                return r;
                }
        }
        /* openat2 takes its mode in memory, out of BPF's reach; with ENOSYS callers fall
         * back to openat, whose mode the rules above see. */
        return builtin_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), "openat2", 0, NULL, err);
}

/* The address families a session uses: unix, inet, inet6, netlink (its own network's
 * routes and links) and packet (its own network's raw frames). Every other family fails
 * with EAFNOSUPPORT, as on a kernel built without it: AF_VSOCK reaches the hypervisor
 * around the namespace's network, and the rest (bluetooth, can, rds, tipc, alg, xdp, key,
 * ...) are kernel code no session needs. The kernel reads the family as an int: the
 * equality tests compare 32 bits, and a value above AF_PACKET with any high bit is
 * refused too. */
static const int socket_families_refused[] = {0, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15};
#define SOCKET_FAMILY_LAST_ALLOWED 17 /* AF_PACKET */

static int socket_families_add(scmp_filter_ctx ctx, struct cs_error *err)
{
        static const char *const calls[] = {"socket", "socketpair"};
        int r;

        for (size_t c = 0; c < 2; c++) {
                struct scmp_arg_cmp above = {
                    .arg = 0, .op = SCMP_CMP_GT, .datum_a = SOCKET_FAMILY_LAST_ALLOWED};

                r = builtin_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), calls[c], 1, &above, err);
                for (size_t i = 0; r >= 0 && i < sizeof(socket_families_refused) /
                                                     sizeof(*socket_families_refused);
                     i++) {
                        struct scmp_arg_cmp cmp = SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu,
                                                          (scmp_datum_t)socket_families_refused[i]);

                        r = builtin_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), calls[c], 1, &cmp,
                                             err);
                }
                if (r < 0)
                        return r;
        }
        return 0;
}

static int builtin_rules_add(scmp_filter_ctx ctx, enum spec_seccomp kind, bool host_trust,
                             struct cs_error *err)
{
        int r;

        for (size_t i = 0; i < sizeof(default_denied) / sizeof(*default_denied); i++) {
                r = builtin_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), default_denied[i], 0, NULL, err);
                if (r < 0)
                        return r;
        }
        /* The kernel reads the request as 32 bits: compare only those, or a caller sets
         * high bits to slip past an equality test. */
        for (size_t i = 0; i < sizeof(default_denied_ioctls) / sizeof(*default_denied_ioctls);
             i++) {
                struct scmp_arg_cmp cmp =
                    SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, default_denied_ioctls[i]);

                r = builtin_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), "ioctl", 1, &cmp, err);
                if (r < 0)
                        return r;
        }
        /* clone3 passes its flags in memory, out of BPF's reach; with ENOSYS glibc falls
         * back to clone, whose flags a filter can inspect. */
        r = builtin_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), "clone3", 0, NULL, err);
        if (r < 0)
                return r;
        if (host_trust) {
                r = host_trust_rules_add(ctx, err);
                if (r < 0)
                        return r;
        }
        r = socket_families_add(ctx, err);
        if (r < 0)
                return r;
        if (kind != SPEC_SECCOMP_STRICT)
                return 0;

        for (size_t i = 0; i < sizeof(strict_denied) / sizeof(*strict_denied); i++) {
                r = builtin_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), strict_denied[i], 0, NULL, err);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < sizeof(strict_clone_flags) / sizeof(*strict_clone_flags); i++) {
                struct scmp_arg_cmp cmp = {
                    .arg = clone_flags_arg(),
                    .op = SCMP_CMP_MASKED_EQ,
                    .datum_a = strict_clone_flags[i],
                    .datum_b = strict_clone_flags[i],
                };

                r = builtin_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), "clone", 1, &cmp, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* libseccomp 2.5 has no in-memory export: write the program to a memfd and read it back. */
int cs_seccomp_export(scmp_filter_ctx ctx, const char *what, struct sock_fprog *ret,
                      struct cs_error *err)
{
        _cleanup_close_ int fd = -1;
        _cleanup_free_ char *buf = NULL;
        size_t len = 0, n_insns;
        struct stat st;
        int r;

        fd = memfd_create("csandbox-seccomp", MFD_CLOEXEC);
        if (fd < 0)
                return cs_error_set(err, errno, "seccomp: memfd_create");
        r = seccomp_export_bpf(ctx, fd);
        if (r < 0)
                return cs_error_set(err, -r, "seccomp: export the BPF program of %s", what);
        if (fstat(fd, &st) < 0)
                return cs_error_set(err, errno, "seccomp: stat the exported program");
        n_insns = (size_t)st.st_size / sizeof(struct sock_filter);
        if (st.st_size <= 0 || (size_t)st.st_size % sizeof(struct sock_filter) != 0)
                return cs_error_set(err, 0,
                                    "seccomp: libseccomp exported %lld bytes for %s, not a "
                                    "whole number of BPF instructions",
                                    (long long)st.st_size, what);
        if (n_insns > BPF_MAXINSNS) {
                cs_error_set(err, 0,
                             "seccomp: %s compiles to %zu BPF instructions, over the kernel's "
                             "limit of %d",
                             what, n_insns, BPF_MAXINSNS);
                return cs_error_hint(err, "Merge rules or drop argument filters");
        }
        if (lseek(fd, 0, SEEK_SET) < 0)
                return cs_error_set(err, errno, "seccomp: seek the exported program");
        r = cs_read_fd(fd, "the exported seccomp program", (size_t)st.st_size, &buf, &len, err);
        if (r < 0)
                return r;
        if (len != (size_t)st.st_size)
                return cs_error_set(err, EIO, "seccomp: short read of the exported program");
        ret->len = (unsigned short)n_insns;
        ret->filter = cs_take_ptr(&buf);
        return 0;
}

int cs_seccomp_filter_new(uint32_t def_action, scmp_filter_ctx *ret, struct cs_error *err)
{
        scmp_filter_ctx ctx = seccomp_init(def_action);
        int r;

        if (!ctx)
                return cs_error_set(err, ENOMEM, "seccomp: seccomp_init");
        /* The runner sets no_new_privs itself, before loading, for every profile. */
        r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
        if (r < 0) {
                seccomp_release(ctx);
                return cs_error_set(err, -r, "seccomp: clear SCMP_FLTATR_CTL_NNP");
        }
        *ret = ctx;
        return 0;
}

static int builtin_compile(enum spec_seccomp kind, bool host_trust, struct sock_fprog *ret,
                           struct cs_error *err)
{
        _cleanup_seccomp_ scmp_filter_ctx ctx = NULL;
        char what[64];
        int r;

        if (kind != SPEC_SECCOMP_DEFAULT && kind != SPEC_SECCOMP_STRICT)
                return cs_error_set(err, 0, "seccomp: the profile '%s' has no builtin program",
                                    seccomp_kind_name(kind));
        /* The native ABI only: a call through another one (i386's int 0x80, x32's numbers)
         * takes libseccomp's bad-arch action and kills the process. The compat syscall layer
         * is a classic source of kernel bugs, and each filtered ABI doubles the program the
         * kernel must JIT on every launch (131 instructions and 0.25 ms with i386 and x32,
         * 54 and 0.11 ms without). */
        r = cs_seccomp_filter_new(SCMP_ACT_ALLOW, &ctx, err);
        if (r < 0)
                return r;
        /* The whole process, not just the calling thread. */
        r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
        if (r < 0)
                return cs_error_set(err, -r, "seccomp: set the action for other ABIs");
        r = builtin_rules_add(ctx, kind, host_trust, err);
        if (r < 0)
                return r;
        snprintf(what, sizeof(what), "the builtin profile '%s'%s", seccomp_kind_name(kind),
                 host_trust ? "" : " for image builds");
        return cs_seccomp_export(ctx, what, ret, err);
}

int seccomp_compile_builtin(enum spec_seccomp kind, struct sock_fprog *ret, struct cs_error *err)
{
        return builtin_compile(kind, true, ret, err);
}

int seccomp_compile_image_build(struct sock_fprog *ret, struct cs_error *err)
{
        return builtin_compile(SPEC_SECCOMP_DEFAULT, false, ret, err);
}

void seccomp_fprog_free(struct sock_fprog *prog)
{
        if (!prog)
                return;
        free(prog->filter);
        prog->filter = NULL;
        prog->len = 0;
}
