#include "sha256.h"

#include "cleanup.h"

#include <dlfcn.h>
#include <errno.h>
#include <linux/if_alg.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The kernel's own SHA-256 through an AF_ALG socket: no library to load (libcrypto and its
 * configuration cost a launch milliseconds). Refused where a seccomp filter or a kernel
 * without algif_hash says no: then -ENOSYS and the library below. */
static int kernel_sha256(const void *data, size_t len, unsigned char out[32])
{
        struct sockaddr_alg sa = {
            .salg_family = AF_ALG, .salg_type = "hash", .salg_name = "sha256"};
        _cleanup_close_ int tfm = socket(AF_ALG, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        _cleanup_close_ int op = -1;
        const unsigned char *p = data;

        if (tfm < 0 || bind(tfm, (struct sockaddr *)&sa, sizeof(sa)) < 0)
                return -ENOSYS;
        op = accept4(tfm, NULL, NULL, SOCK_CLOEXEC);
        if (op < 0)
                return -ENOSYS;
        do {
                size_t chunk = len > 65536 ? 65536 : len;
                ssize_t n = send(op, p, chunk, len > chunk ? MSG_MORE : 0);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -ENOSYS;
                p += n;
                len -= (size_t)n;
        } while (len > 0);
        return read(op, out, 32) == 32 ? 0 : -ENOSYS;
}

/* The two calls we need, by name, from OpenSSL 3's libcrypto (the package the build uses
 * for image import; every distribution that has it names it libcrypto.so.3). */
typedef const void *(*evp_sha256_fn)(void);
typedef int (*evp_digest_fn)(const void *data, size_t len, unsigned char *md, unsigned int *n,
                             const void *type, void *engine);
typedef int (*init_crypto_fn)(uint64_t opts, const void *settings);
/* OPENSSL_INIT_NO_LOAD_CONFIG: openssl.cnf says nothing a digest of a path needs, and reading
 * it costs a launch 0.4 ms here. */
#define NO_LOAD_CONFIG 0x00000080L

int cs_sha256(const void *data, size_t len, unsigned char out[32])
{
        static evp_sha256_fn evp_sha256;
        static evp_digest_fn evp_digest;
        static bool tried;
        unsigned int n = 0;

        if (kernel_sha256(data, len, out) == 0)
                return 0;
        if (!tried) {
                void *h = dlopen("libcrypto.so.3", RTLD_NOW | RTLD_LOCAL);

                if (!h)
                        h = dlopen("libcrypto.so", RTLD_NOW | RTLD_LOCAL);
                if (h) {
                        init_crypto_fn init;

                        *(void **)&init = dlsym(h, "OPENSSL_init_crypto");
                        if (init)
                                init(NO_LOAD_CONFIG, NULL);
                        *(void **)&evp_sha256 = dlsym(h, "EVP_sha256");
                        *(void **)&evp_digest = dlsym(h, "EVP_Digest");
                }
                tried = true;
        }
        if (!evp_sha256 || !evp_digest)
                return -ENOSYS;
        if (!evp_digest(data, len, out, &n, evp_sha256(), NULL) || n != 32)
                return -EIO;
        return 0;
}
