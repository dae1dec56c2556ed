/* MCP servers that are containers: which image a `docker`/`podman` command line runs.
 * `csandbox sandbox-cache` uses this to know what to pull before a session starts. */
#pragma once
#include <stddef.h>

#include "common/error.h"

/* The image of `CMD [global options] run [options] IMAGE [ARG...]` (also `container run`),
 * read the way podman's parser does: options and their values are skipped, `--` ends
 * them. cmd is the server's "command" (a path's last component is what counts). Returns
 * 1 and points *image at the argv entry, 0 when the command is not docker/podman with a
 * `run` subcommand, or a negative errno with e saying which argument is wrong (an option
 * csandbox cannot classify, an option missing its value, no image). */
int mcp_run_image(const char *cmd, const char *const *argv, size_t argc, const char **image,
                  struct cs_error *e);
