/* §2.10: the git identity (user.name, user.email) the host's git gives for cwd, written as
 * a gitconfig the sandbox includes. */
#include "stage.h"
#include "stage_util.h"

#include "common/cleanup.h"
#include "common/error.h"
#include "common/fileio.h"
#include "common/sha256.h"
#include "policy/profile.h"
#include "policy/settings.h"
#include "policy/worktree.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#define SANDBOX_GITCONFIG "/home/appuser/.gitconfig"

/* §2.10's keys: the identity always, the signing keys only when the gpg-agent is
 * forwarded. */
static const char *const identity_keys[][2] = {{"user", "name"},
                                               {"user", "email"},
                                               {"user", "signingkey"},
                                               {"commit", "gpgsign"},
                                               {"gpg", "format"}};
#define IDENTITY_KEYS   5
#define IDENTITY_PLAIN  2 /* the first two; the rest sign */
#define IDENTITY_FORMAT 4

int stage_git_identity_start(const char *cwd, struct cs_spawned *ret, struct cs_error *err)
{
        char *args[] = {"config", "-z", "--get-regexp",
                        "^(user\\.(name|email|signingkey)|commit\\.gpgsign|gpg\\.format)$", NULL};

        return worktree_git_start(cwd, args, ret, err);
}

/* The keys' values as `git config --get` gives them (the last value of each), from one
 * `git config -z --get-regexp`: records "key\nvalue\0". */
static int git_identity_get(struct cs_spawned *git, bool signing, char *values[IDENTITY_KEYS],
                            struct cs_error *err)
{
        _cleanup_free_ char *out = NULL;
        size_t len = 0;
        int r;

        r = worktree_git_finish(git, true, &out, &len, err);
        if (r < 0 || !out)
                return r;
        for (char *rec = out; rec < out + len;) {
                char *end = memchr(rec, '\0', (size_t)(out + len - rec));
                char *nl = memchr(rec, '\n', end ? (size_t)(end - rec) : 0);

                if (!end || !nl)
                        break;
                *nl = '\0';
                for (size_t i = 0; i < IDENTITY_KEYS; i++) {
                        char key[64];

                        snprintf(key, sizeof(key), "%s.%s", identity_keys[i][0],
                                 identity_keys[i][1]);
                        if (strcasecmp(rec, key) != 0)
                                continue;
                        free(values[i]);
                        if (!(values[i] = strdup(nl + 1)))
                                return cs_error_set(err, ENOMEM, "git identity");
                }
                rec = end + 1;
        }
        /* Signing needs the agent; SSH or X.509 signing what the sandbox does not have. */
        if (!signing ||
            (values[IDENTITY_FORMAT] && strcmp(values[IDENTITY_FORMAT], "openpgp") != 0))
                for (size_t i = IDENTITY_PLAIN; i < IDENTITY_KEYS; i++) {
                        free(values[i]);
                        values[i] = NULL;
                }
        return 0;
}

static int append_identity(char **content, const char *section, const char *name, const char *value)
{
        size_t n = strlen(value), o = 0;
        _cleanup_free_ char *quoted = malloc(2 * n + 1);
        char *next = NULL;

        if (!quoted)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                /* A value from a config the work tree could have written: a newline in it
                 * must not start a line of its own in the file we write. */
                if (value[i] == '\n') {
                        quoted[o++] = '\\';
                        quoted[o++] = 'n';
                        continue;
                }
                if (value[i] == '\\' || value[i] == '"')
                        quoted[o++] = '\\';
                quoted[o++] = value[i];
        }
        quoted[o] = '\0';
        if (asprintf(&next, "%s[%s]\n\t%s = \"%s\"\n", *content, section, name, quoted) < 0)
                return -ENOMEM;
        free(*content);
        *content = next;
        return 0;
}

int stage_git_identity(const struct profile_config *c, struct cs_spawned *git, bool signing,
                       char **ret_path, struct cs_error *err)
{
        _cleanup_free_ char *content = strdup("[include]\n\tpath = " SANDBOX_GITCONFIG "\n");
        _cleanup_free_ char *dir = NULL;
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int dfd = -1;
        char hex[17], name[32];
        char *values[IDENTITY_KEYS] = {NULL};
        bool any = false;
        struct stat st;
        int r;

        if (!content)
                return cs_error_set(err, ENOMEM, "git identity");
        r = git_identity_get(git, signing, values, err);
        for (size_t i = 0; r >= 0 && i < IDENTITY_KEYS; i++) {
                if (!values[i])
                        continue;
                if (append_identity(&content, identity_keys[i][0], identity_keys[i][1], values[i]) <
                    0)
                        r = cs_error_set(err, ENOMEM, "git identity");
                any = true;
        }
        for (size_t i = 0; i < IDENTITY_KEYS; i++)
                free(values[i]);
        if (r < 0)
                return r;
        if (!any) {
                *ret_path = NULL;
                return 0;
        }
        if (stage_sha256_hex16(content, strlen(content), hex) < 0)
                return cs_error_setx(err, EIO, "sha256 of the git identity failed");
        snprintf(name, sizeof(name), "identity-%s", hex);
        if (asprintf(&dir, "%s/claude-profile/git", c->data_home) < 0)
                return cs_error_set(err, ENOMEM, "git identity");
        path = cs_path_join(dir, name);
        if (!path)
                return cs_error_set(err, ENOMEM, "git identity");
        r = stage_open_dir_parents(dir, &dfd, err);
        if (r < 0)
                return r;
        /* Content-addressed: an existing file already holds exactly this. */
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                r = cs_write_file_once(dfd, name, content, strlen(content), 0644, err);
                if (r < 0)
                        return r;
        }
        *ret_path = cs_take_ptr(&path);
        return 0;
}
