/* Settings filtering for sandboxed launches (reference §3): the profile settings.json copy
 * and shared-settings.json. Pure functions over bytes: no files, no printing. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

struct cs_error;

/* Deny rules stripped in the sandbox (they would block what the sandbox grants). */
extern const char *const settings_sandbox_deny_prefixes[4];

/* claude's record that the user accepted bypass-permissions mode (its start-up dialog,
 * whose default answer ends the session), kept in the user settings. */
#define SETTINGS_BYPASS_ACCEPTED "skipDangerousModePermissionPrompt"

/* §3.1: the content of the sandbox's copy of a profile settings.json, from its raw bytes.
 * Invalid JSON, or nothing stripped: the raw bytes verbatim. Something stripped: re-serialised
 * as Python's json.dumps(data, indent=2) does (ensure_ascii, key order kept, no trailing
 * newline). *ret is a heap buffer (NUL-terminated, *ret_len bytes); *ret_stripped tells
 * whether a rule was dropped. accept_bypass: a JSON object also gets SETTINGS_BYPASS_ACCEPTED
 * true (re-serialised the same way) unless it says so already. */
int settings_profile_copy(const char *raw, size_t len, bool accept_bypass, char **ret,
                          size_t *ret_len, bool *ret_stripped, struct cs_error *err);

/* §3.2: shared-settings.json for a launch of profile `name`. origin is the file's path for
 * messages. sandbox=true re-points loopback http hooks to 169.254.1.2 (*ret_host_loopback
 * set when any was) and strips the denies; sandbox=false only substitutes {profile}. The
 * result is one argv element, as Python's json.dumps(data) prints it (", " and ": "
 * separators, ensure_ascii). Errors: invalid JSON ("Can't read <path>: ...") or a top level
 * that is not an object ("<path> must hold a JSON object."). */
int settings_shared(const char *raw, size_t len, const char *origin, const char *name, bool sandbox,
                    char **ret, bool *ret_host_loopback, struct cs_error *err);

/* Whether claude's args carry `flag` as `flag` or `flag=...` (--settings, --permission-mode,
 * --append-system-prompt, --dangerously-skip-permissions). */
bool settings_args_have(char *const *args, size_t n, const char *flag);
