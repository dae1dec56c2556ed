/* Seccomp profiles -> classic BPF programs (libseccomp). The builtin profiles are compiled
 * at build time (seccomp-gen) so a launch only loads them. */
#pragma once
#include <linux/filter.h>
#include <stddef.h>

#include "../spec/spec.h"

struct cs_error;

/* Limits on an untrusted JSON profile. */
#define SECCOMP_FILE_MAX (4u << 20)

/* The precompiled program of a builtin profile (DEFAULT or STRICT); ret->filter points at
 * static storage: do not free. */
int seccomp_builtin(enum spec_seccomp kind, struct sock_fprog *ret, struct cs_error *err);
/* The precompiled program of an image build's steps: default without the host-trust rules
 * (no hard links, no setuid or setgid modes, no openat2), since a package install needs
 * them and writes only the layer being built. Static storage, as seccomp_builtin's. */
int seccomp_builtin_image_build(struct sock_fprog *ret);
/* Compile a builtin profile with libseccomp now (used by seccomp-gen and the unit tests). */
int seccomp_compile_builtin(enum spec_seccomp kind, struct sock_fprog *ret, struct cs_error *err);
int seccomp_compile_image_build(struct sock_fprog *ret, struct cs_error *err);
/* Compile an OCI/Docker JSON seccomp profile. origin names it in errors (the file path);
 * parse errors carry line:column. */
int seccomp_compile_oci(const char *json, size_t len, const char *origin, struct sock_fprog *ret,
                        struct cs_error *err);
/* Read (bounded, regular file only) and compile a JSON profile. */
int seccomp_compile_file(const char *path, struct sock_fprog *ret, struct cs_error *err);
/* Free a program returned by a compile function. */
void seccomp_fprog_free(struct sock_fprog *prog);
