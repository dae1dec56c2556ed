/* The clipboard's part of the bridges (clipboard.c): what a session may ask the clipboard
 * relay for, and its socket and shim in the plan. */
#pragma once
#include "profile.h"

#include "../relay/relay.h"
#include "../spec/spec.h"

#include <stdbool.h>
#include <stddef.h>

/* The relay's rule (reference §5): the wl-paste arguments a session may ask for. */
bool clipboard_args_allowed(char *const *argv, size_t n, const char **ret_bad);
/* The clipboard's part of the plan (clipboard.c): the relay's socket, made and bound into
 * the sandbox (in BRIDGE_DIR, which the caller made) with the wl-paste shim; an error when the host
 * has no wl-paste. */
int clipboard_plan(struct sandbox_spec *s, const struct profile *p, struct relay_clipboard *rc,
                   struct cs_error *err);
