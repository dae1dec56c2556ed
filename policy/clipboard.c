/* The clipboard (reference §5) without the Wayland socket, which would hand a session screen
 * capture and input injection: the clipboard relay (relay/clipboard.c) listens on a unix
 * socket bound into the sandbox at BRIDGE_CLIPBOARD_SOCK and runs the host's wl-paste with
 * the arguments decided here (a list of the types, or the content of one text/ or image/
 * type). Inside, the csandbox-wl-paste shim stands in for wl-paste, first on PATH, and talks
 * to it. */
#include "clipboard.h"
#include "bridge_paths.h"
#include "packages.h"
#include "plan.h"

#include "common/cleanup.h"
#include "common/error.h"
#include "common/path.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CLIPBOARD_SHIM "csandbox-wl-paste"

_Static_assert(BRIDGE_CLIPBOARD_REQUEST_MAX == RELAY_CLIPBOARD_REQUEST_MAX,
               "the shim and the relay read one request size");

static bool mime_allowed(const char *v)
{
        if (strncmp(v, "text/", 5) != 0 && strncmp(v, "image/", 6) != 0)
                return false;
        for (; *v; v++)
                if (!((*v >= 'a' && *v <= 'z') || (*v >= 'A' && *v <= 'Z') ||
                      (*v >= '0' && *v <= '9') || strchr("/.+-_;=", *v)))
                        return false;
        return true;
}

bool clipboard_args_allowed(char *const *argv, size_t n, const char **ret_bad)
{
        /* The reference's list, and --primary: claude reads the primary selection with it
         * (`wl-paste --primary --no-newline`), a read like the others. */
        static const char *const flags[] = {"-l", "--list-types", "-t", "--type",
                                            "-n", "--no-newline", "-p", "--primary"};

        for (size_t i = 0; i < n; i++) {
                bool ok = mime_allowed(argv[i]) ||
                          (strncmp(argv[i], "--type=", 7) == 0 && mime_allowed(argv[i] + 7));

                for (size_t f = 0; !ok && f < sizeof(flags) / sizeof(flags[0]); f++)
                        ok = strcmp(argv[i], flags[f]) == 0;
                if (!ok) {
                        *ret_bad = argv[i];
                        return false;
                }
        }
        return true;
}

int clipboard_plan(struct sandbox_spec *s, const struct profile *p, struct relay_clipboard *rc,
                   struct cs_error *err)
{
        _cleanup_free_ char *wl = cs_find_program("wl-paste");
        _cleanup_free_ char *shim = NULL;
        _cleanup_close_ int shim_fd = -1, fd = -1;
        int r;

        if (!wl)
                return cs_error_setx(err, ENOENT,
                                     "CLAUDE_PROFILE_SANDBOX_CLIPBOARD is set, but 'wl-paste' "
                                     "is not found on this host (no PATH entry has it). The "
                                     "sandbox reads the clipboard through the host's wl-paste: "
                                     "install wl-clipboard, or unset "
                                     "CLAUDE_PROFILE_SANDBOX_CLIPBOARD");
        r = plan_shim_open(CLIPBOARD_SHIM, "the clipboard (csandbox's wl-paste for inside)",
                           &shim_fd, &shim, err);
        if (r < 0)
                return r;
        r = relay_clipboard_listen(rc, p->state_fd, p->state_dir, &fd, err);
        if (r < 0)
                return cs_error_hint(err, "unset CLAUDE_PROFILE_SANDBOX_CLIPBOARD to launch "
                                          "without it");
        r = spec_add_bind(s, 0, &fd, "clipboard relay", BRIDGE_CLIPBOARD_SOCK, err);
        if (r >= 0)
                r = spec_add_bind(s, SPEC_MOUNT_RO, &shim_fd, shim,
                                  PLAN_HOME "/.local/bin/wl-paste", err);
        if (r < 0)
                return r;
        rc->wl_paste = cs_take_ptr(&wl);
        rc->allowed = clipboard_args_allowed;
        return 0;
}
