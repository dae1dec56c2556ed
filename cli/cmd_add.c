/* `csandbox add NAME [--sandbox]`: a new profile as claude-profile's `add` makes it (§6.2),
 * so a new user needs nothing but csandbox. It is built in a hidden directory beside its
 * final place and renamed there in one step (never over an existing profile): an error at
 * any point leaves nothing behind. */
#include "cmd_profile.h"
#include "cli.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"
#include "../common/path.h"
#include "../policy/profile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

#define SEED_MAX ((size_t)4 << 20)

static const char usage_add[] =
    "Usage: csandbox add NAME [--sandbox] [--link | --isolate]\n"
    "\n"
    "Create the profile NAME in ${CLAUDE_PROFILE_PROFILES_BASE:-~/.claude-profiles}, as\n"
    "claude-profile's add does: settings.json and CLAUDE.md copied from ~/.claude when they\n"
    "exist, statusline.sh linked to ~/.claude/statusline.sh when that exists, and commands,\n"
    "skills and hooks each either linked to the same dir in ~/.claude (shared by every\n"
    "profile) or a directory of the profile's own. You are asked for each (default: link);\n"
    "--link or --isolate answers for all three, and without a terminal they are linked.\n"
    "  --sandbox   mark it (NAME/.sandbox): `csandbox run NAME` launches it in the sandbox\n"
    "NAME: letters, digits, '.', '_' and '-', starting with a letter or digit, and not a\n"
    "command of csandbox or claude-profile.\n";

static const char *const reserved[] = {
    /* claude-profile's commands, then csandbox's */
    "list",
    "add",
    "remove",
    "links",
    "env",
    "build",
    "sandbox",
    "sandbox-skill",
    "sandbox-cache",
    "run",
    "plan",
    "exec",
    "image",
    "doctor",
    "help",
    "version",
    "shared-settings.json",
};

static bool name_ok(const char *name)
{
        if (!((name[0] >= 'a' && name[0] <= 'z') || (name[0] >= 'A' && name[0] <= 'Z') ||
              (name[0] >= '0' && name[0] <= '9')) ||
            strlen(name) > PROFILE_NAME_MAX)
                return false;
        for (const char *p = name; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                      (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' || *p == '-'))
                        return false;
        for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++)
                if (strcmp(name, reserved[i]) == 0)
                        return false;
        return true;
}

/* "Link NAME/x to ~/.claude/x? [Y/n]" on the terminal; yes unless the answer starts n. */
static bool ask_link(const char *name, const char *what)
{
        char line[64];

        fprintf(stderr, "Link %s/%s to ~/.claude/%s, shared with your other profiles? [Y/n] ", name,
                what, what);
        fflush(stderr);
        if (!fgets(line, sizeof(line), stdin))
                return true;
        return line[0] != 'n' && line[0] != 'N';
}

static int seed_copy(int dfd, const char *gdir, const char *file, struct cs_error *err)
{
        _cleanup_free_ char *src = cs_path_join(gdir, file), *buf = NULL;
        /* Dropped: a global file that is missing or unreadable is not seeded, as claude-profile
         * skips it. */
        struct cs_error ignored;
        size_t len;

        if (!src)
                return cs_error_set(err, ENOMEM, "seed %s", file);
        if (cs_read_file_at(AT_FDCWD, src, SEED_MAX, false, &buf, &len, &ignored) < 0)
                return 0; /* missing (or not a file): skipped, as claude-profile does */
        return cs_write_file_atomic(dfd, file, buf, len, 0644, err);
}

/* Remove what seeding made in the hidden directory, then the directory. */
static void discard(int base_fd, const char *tmp)
{
        static const char *const made[] = {"settings.json", "CLAUDE.md", "statusline.sh",
                                           "commands",      "skills",    "hooks",
                                           ".sandbox"};
        int dfd = openat(base_fd, tmp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

        for (size_t i = 0; dfd >= 0 && i < sizeof(made) / sizeof(made[0]); i++)
                if (unlinkat(dfd, made[i], 0) < 0 && errno == EISDIR)
                        unlinkat(dfd, made[i], AT_REMOVEDIR);
        for (size_t i = 0; dfd >= 0 && i < sizeof(made) / sizeof(made[0]); i++)
                unlinkat(dfd, made[i], AT_REMOVEDIR);
        if (dfd >= 0)
                close(dfd);
        unlinkat(base_fd, tmp, AT_REMOVEDIR);
}

int cmd_add(int argc, char **argv)
{
        static const char *const linkable[] = {"commands", "skills", "hooks"};
        struct profile_config c = {0};
        struct cs_error err = {0};
        const char *name = NULL;
        bool sandbox = false, link_all = false, isolate_all = false, link[3];
        _cleanup_free_ char *gdir = NULL, *dir = NULL;
        _cleanup_close_ int base_fd = -1, dfd = -1;
        char tmp[PROFILE_NAME_MAX + 32];
        struct stat st;
        int r;

        for (int i = 0; i < argc; i++) {
                if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
                        fputs(usage_add, stdout);
                        return 0;
                } else if (strcmp(argv[i], "--sandbox") == 0) {
                        sandbox = true;
                } else if (strcmp(argv[i], "--link") == 0) {
                        link_all = true;
                } else if (strcmp(argv[i], "--isolate") == 0) {
                        isolate_all = true;
                } else if (argv[i][0] == '-' || name) {
                        return cli_usage_error("add", "unexpected argument `%s`", argv[i]);
                } else {
                        name = argv[i];
                }
        }
        if (!name)
                return cli_usage_error("add", "no NAME given");
        if (link_all && isolate_all)
                return cli_usage_error("add", "--link and --isolate contradict each other");
        if (!name_ok(name))
                return cli_usage_error("add",
                                       "'%s' can't be a profile name. Use letters, digits, '.', "
                                       "'_' and '-', starting with a letter or digit, and not a "
                                       "command of csandbox or claude-profile",
                                       name);
        r = profile_config_load(&c, &err);
        if (r < 0)
                return cli_fail(&err);
        gdir = cs_path_join(c.home, ".claude");
        dir = cs_path_join(c.profiles_base, name);
        if (!gdir || !dir)
                goto oom;
        r = cs_mkdir_parents(c.profiles_base, 0700, &err);
        base_fd = r < 0 ? -1 : open(c.profiles_base, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (r >= 0 && base_fd < 0)
                r = cs_error_set(&err, errno, "open %s", c.profiles_base);
        if (r >= 0 && fstatat(base_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
                r = cs_error_setx(&err, EEXIST, "Profile '%s' already exists at %s", name, dir);
        if (r < 0)
                goto fail;
        /* The questions come first: nothing is made until they are answered. */
        for (size_t i = 0; i < 3; i++) {
                _cleanup_free_ char *global = cs_path_join(gdir, linkable[i]);

                if (!global)
                        goto oom;
                link[i] = false;
                if (stat(global, &st) < 0 || !S_ISDIR(st.st_mode)) {
                        if (!isolate_all)
                                fprintf(stderr,
                                        "Not linking %s: %s does not exist; %s/%s is a directory "
                                        "of its own.\n",
                                        linkable[i], global, name, linkable[i]);
                        continue;
                }
                link[i] = link_all || (!isolate_all && (!isatty(0) || ask_link(name, linkable[i])));
        }
        snprintf(tmp, sizeof(tmp), ".%s.new-%d", name, (int)getpid());
        if (mkdirat(base_fd, tmp, 0700) < 0) {
                r = cs_error_set(&err, errno, "create %s/%s", c.profiles_base, tmp);
                goto fail;
        }
        dfd = openat(base_fd, tmp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        r = dfd < 0 ? cs_error_set(&err, errno, "open %s/%s", c.profiles_base, tmp) : 0;
        if (r >= 0)
                r = seed_copy(dfd, gdir, "settings.json", &err);
        if (r >= 0)
                r = seed_copy(dfd, gdir, "CLAUDE.md", &err);
        if (r >= 0) {
                _cleanup_free_ char *sl = cs_path_join(gdir, "statusline.sh");

                if (sl && access(sl, F_OK) == 0 && symlinkat(sl, dfd, "statusline.sh") < 0)
                        r = cs_error_set(&err, errno, "link statusline.sh");
        }
        for (size_t i = 0; r >= 0 && i < 3; i++) {
                _cleanup_free_ char *global = cs_path_join(gdir, linkable[i]);

                if (!global || (link[i] ? symlinkat(global, dfd, linkable[i])
                                        : mkdirat(dfd, linkable[i], 0755)) < 0)
                        r = cs_error_set(&err, errno, "create %s/%s", name, linkable[i]);
        }
        if (r >= 0 && sandbox) {
                int m = openat(dfd, ".sandbox", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);

                if (m < 0)
                        r = cs_error_set(&err, errno, "create %s/.sandbox", name);
                else
                        close(m);
        }
        if (r >= 0 && renameat2(base_fd, tmp, base_fd, name, RENAME_NOREPLACE) < 0)
                r = cs_error_set(&err, errno,
                                 errno == EEXIST ? "Profile '%s' already exists at %s"
                                                 : "create the profile %s at %s",
                                 name, dir);
        if (r < 0) {
                discard(base_fd, tmp);
                goto fail;
        }
        printf("Created profile '%s' at %s\n", name, dir);
        if (sandbox)
                printf("Sandbox mode: launches run in csandbox's sandbox.\n");
        else
                printf("Launches run on the host (csandbox sandbox %s --on to change that).\n",
                       name);
        printf("Authenticate with: csandbox run %s, then /login\n", name);
        profile_config_free(&c);
        return 0;
oom:
        r = cs_error_set(&err, ENOMEM, "add %s", name);
fail:
        profile_config_free(&c);
        return cli_fail(&err);
}
