/* podman and docker inside a `run` session (containers.c). */
#pragma once
#include "../spec/spec.h"

/* csandbox's container engine in the session: the csandbox and csandbox-import binaries,
 * the host's loader and library directories at ENGINE_DIR, the podman/docker shim at
 * bin_dir/podman and bin_dir/docker, the host user's image store read-only at
 * ENGINE_HOST_STORE, and the session's own writable store: store_dir (below state_fd, the
 * verified directory state_dir) at home/.local/share/csandbox. */
int containers_plan(struct sandbox_spec *s, const char *bin_dir, const char *home, int state_fd,
                    const char *state_dir, struct cs_error *err);
