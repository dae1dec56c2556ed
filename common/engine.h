/* csandbox's container engine inside a session: where `run` puts it, and how a program
 * there starts it (the podman/docker shim) or starts a helper beside it (csandbox-import).
 *
 * A session's root may be an image whose C library is not the host's, so csandbox runs
 * there through the host's own dynamic loader, bound beside it as ENGINE_LOADER, with the
 * host's library directories bound as ENGINE_DIR/lib0, lib1, ... (policy/containers.c).
 * Such a process's /proc/self/exe is the loader: its siblings are the engine's binaries,
 * and each of them must be started through the loader too. */
#pragma once

#define ENGINE_DIR     "/run/csandbox/engine"
#define ENGINE_LOADER  ENGINE_DIR "/ld.so"
#define ENGINE_BINARY  ENGINE_DIR "/csandbox"
#define ENGINE_LIB_MAX 8
/* The host user's image store, read-only, inside a session. */
#define ENGINE_HOST_STORE "/run/csandbox/store"

/* "DIR/lib0:DIR/lib1:..." for each such directory present; NULL when none is (or on
 * ENOMEM). free() it. */
char *cs_engine_library_path(const char *dir);

/* execv(path, argv), through the engine's loader when this process itself runs through
 * it (its /proc/self/exe is ENGINE_LOADER): a host binary in an image session must not
 * meet the image's loader. Returns only on failure, with errno set. */
int cs_engine_execv(const char *path, char *const argv[]);
