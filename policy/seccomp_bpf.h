/* The libseccomp plumbing shared by the builtin profiles (seccomp.c) and the OCI profile
 * compiler (seccomp_oci.c). Internal to policy/. */
#pragma once
#include <linux/filter.h>
#include <seccomp.h>
#include <stdint.h>

struct cs_error;

static inline void seccomp_ctx_releasep(scmp_filter_ctx *ctx)
{
        if (*ctx)
                seccomp_release(*ctx);
}
#define _cleanup_seccomp_ __attribute__((cleanup(seccomp_ctx_releasep)))

/* Add an architecture to the filter; one already there is fine. */
int cs_seccomp_arch_add(scmp_filter_ctx ctx, uint32_t arch, struct cs_error *err);
/* A new filter with default action def_action and no_new_privs left to the runner. */
int cs_seccomp_filter_new(uint32_t def_action, scmp_filter_ctx *ret, struct cs_error *err);
/* The filter as a BPF program (ret->filter is heap memory); what names it in errors. */
int cs_seccomp_export(scmp_filter_ctx ctx, const char *what, struct sock_fprog *ret,
                      struct cs_error *err);
