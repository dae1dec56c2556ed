/* Where the bridges appear inside the sandbox: shared by csandbox and the wl-paste shim that
 * runs inside it. */
#pragma once

#define BRIDGE_DIR            "/run/claude-sandbox"
#define BRIDGE_CLIPBOARD_SOCK BRIDGE_DIR "/clipboard.sock"
/* The relay's request: the wl-paste arguments separated by single spaces, then '\n', at most
 * this long. Its answer: "OK\n" and the bytes, or "ERR <reason>\n". */
#define BRIDGE_CLIPBOARD_REQUEST_MAX 1024
