/* csandbox-podman: `podman` and `docker` inside a csandbox session. It starts csandbox's
 * own container engine, which `run` binds into every session at ENGINE_DIR with the host's
 * loader and libraries (policy/containers.c), as `csandbox podman ARGS` (or docker): each
 * container is then a sandbox nested in the session, made by the session itself, so it
 * can hold nothing the session does not. Linked statically: it runs in images whose
 * libraries csandbox does not know. */
#include "../common/engine.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
        const char *base = argc > 0 ? strrchr(argv[0], '/') : NULL;
        const char *prog = base ? base + 1 : argc > 0 ? argv[0] : "podman";
        char *libs, **v;
        size_t i = 0;

        if (strcmp(prog, "docker") != 0)
                prog = "podman";
        libs = cs_engine_library_path(ENGINE_DIR);
        v = calloc((size_t)argc + 8, sizeof(*v));
        if (!v)
                return 125;
        if (libs && access(ENGINE_LOADER, X_OK) == 0) {
                v[i++] = ENGINE_LOADER;
                v[i++] = "--library-path";
                v[i++] = libs;
                v[i++] = "--argv0";
                v[i++] = "csandbox";
        } else {
                /* no loader bound: the binary's own, where the host's root is the root */
                v[i++] = "csandbox";
        }
        const char *exe = i > 1 ? ENGINE_LOADER : ENGINE_BINARY;
        if (i > 1)
                v[i++] = ENGINE_BINARY;
        v[i++] = (char *)prog;
        for (int a = 1; a < argc; a++)
                v[i++] = argv[a];
        execv(exe, v);
        fprintf(stderr,
                "%s: csandbox's container engine is not in this session (%s: %s). `csandbox "
                "run` binds it at %s; outside a session, run `csandbox %s` itself\n",
                prog, exe, strerror(errno), ENGINE_DIR, prog);
        return errno == ENOENT ? 127 : 126;
}
