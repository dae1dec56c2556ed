/* A seccomp profile in the OCI/podman JSON format (`--seccomp FILE`, an image's or a
 * user's file), compiled to BPF. Invariants: an accepted profile gives a program the kernel
 * can load (1 to BPF_MAXINSNS instructions) that ends in a return. */
#include "fuzz.h"

#include "common/error.h"
#include "policy/seccomp.h"

#include <linux/filter.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct cs_error err = {0};
        struct sock_fprog prog = {0};

        if (seccomp_compile_oci((const char *)data, size, "fuzz.json", &prog, &err) < 0) {
                FUZZ_CHECK(err.msg[0] != '\0');
                return 0;
        }
        FUZZ_CHECK(prog.len > 0 && prog.len <= BPF_MAXINSNS && prog.filter);
        FUZZ_CHECK(BPF_CLASS(prog.filter[prog.len - 1].code) == BPF_RET);
        seccomp_fprog_free(&prog);
        return 0;
}
