/* `csandbox list` and `csandbox sandbox`: the profile commands of reference §6.1 and §6.3,
 * on claude-profile's own layout, so both tools agree on every profile's state. */
#include "cmd_profile.h"
#include "cli.h"

#include "../runner/runner.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../policy/profile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char usage_list[] =
    "Usage: csandbox list\n"
    "\n"
    "List the claude-profile profiles: the directories in\n"
    "${CLAUDE_PROFILE_PROFILES_BASE:-~/.claude-profiles}, whether each is logged in\n"
    "(.credentials.json), and whether its .sandbox marker sends it into the sandbox.\n"
    "CLAUDE_PROFILE_SANDBOX, when set, overrides every marker; list then says so.\n";

static const char usage_sandbox[] =
    "Usage: csandbox sandbox NAME [--on | --off]\n"
    "\n"
    "Without a flag, show where profile NAME launches (CLAUDE_PROFILE_SANDBOX, when set,\n"
    "wins over the profile's own setting).\n"
    "  --on    launch NAME in csandbox's sandbox: create the marker NAME/.sandbox\n"
    "  --off   launch NAME on the host: remove the marker\n"
    "The marker is the one claude-profile uses, so both tools see the same setting.\n";

static bool is_help(const char *arg)
{
        return strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0;
}

/* Directory names are printed to a terminal: no control characters. */
static void print_name(const char *s, int width)
{
        int n = 0;

        for (; *s; s++, n++)
                putchar(((unsigned char)*s < 0x20 || *s == 0x7f) ? '?' : *s);
        for (; n < width; n++)
                putchar(' ');
}

static const char *where(bool sandboxed)
{
        return sandboxed ? "in the sandbox" : "on the host";
}

static void print_override_note(const struct profile_config *c)
{
        printf("CLAUDE_PROFILE_SANDBOX is set, so every profile launches %s until it is "
               "unset.\n",
               where(c->sandbox_override == PROFILE_ON));
}

struct list_row {
        char *name;
        char *status;
        bool marked;
};

static void rows_free(struct list_row *rows, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                free(rows[i].name);
                free(rows[i].status);
        }
        free(rows);
}

static int row_cmp(const void *a, const void *b)
{
        return strcmp(((const struct list_row *)a)->name, ((const struct list_row *)b)->name);
}

static int rows_collect(const char *base, struct list_row **ret, size_t *ret_n,
                        struct cs_error *err)
{
        _cleanup_closedir_ DIR *d = opendir(base);
        struct list_row *rows = NULL;
        size_t n = 0;
        struct dirent *de;

        *ret = NULL;
        *ret_n = 0;
        if (!d && (errno == ENOENT || errno == ENOTDIR))
                return 0;
        if (!d)
                return cs_error_set(err, errno, "read the profiles dir %s", base);
        while ((errno = 0, de = readdir(d))) {
                struct profile p = {.dir_fd = -1, .state_fd = -1};
                struct list_row *nr;
                struct stat st;

                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
                    strcmp(de->d_name, "shared-settings.json") == 0)
                        continue;
                /* A profile is a directory, possibly through a link the user made. */
                p.dir_fd = openat(dirfd(d), de->d_name, O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (p.dir_fd < 0)
                        continue;
                nr = realloc(rows, (n + 1) * sizeof(*rows));
                if (!nr || !(nr[n].name = strdup(de->d_name))) {
                        rows = nr ? nr : rows;
                        close(p.dir_fd);
                        errno = ENOMEM;
                        break;
                }
                rows = nr;
                if (fstatat(p.dir_fd, ".credentials.json", &st, AT_SYMLINK_NOFOLLOW) == 0)
                        rows[n].status = strdup("authenticated");
                else if (asprintf(&rows[n].status,
                                  "not authenticated (run: csandbox run %s, then /login)",
                                  de->d_name) < 0)
                        rows[n].status = NULL;
                rows[n].marked = profile_marked(&p);
                close(p.dir_fd);
                if (!rows[n].status) {
                        free(rows[n].name);
                        errno = ENOMEM;
                        break;
                }
                n++;
        }
        if (errno) {
                int e = errno;

                rows_free(rows, n);
                return cs_error_set(err, e, "read the profiles dir %s", base);
        }
        if (n > 1)
                qsort(rows, n, sizeof(*rows), row_cmp);
        *ret = rows;
        *ret_n = n;
        return 0;
}

int cmd_list(int argc, char **argv)
{
        struct profile_config c = {0};
        struct cs_error err = {0};
        struct list_row *rows = NULL;
        size_t n = 0;
        int name_w = (int)strlen("Profile"), status_w = (int)strlen("Status");
        int r;

        if (argc >= 1 && is_help(argv[0])) {
                fputs(usage_list, stdout);
                return 0;
        }
        if (argc >= 1)
                return cli_usage_error("list", "unexpected argument `%s`", argv[0]);
        r = profile_config_load(&c, &err);
        if (r < 0)
                return cli_fail(&err);
        r = rows_collect(c.profiles_base, &rows, &n, &err);
        if (r < 0) {
                profile_config_free(&c);
                return cli_fail(&err);
        }
        if (n == 0) {
                printf("No profiles found. Create one with: csandbox add <name>\n");
        } else {
                for (size_t i = 0; i < n; i++) {
                        int w = (int)strlen(rows[i].name), s = (int)strlen(rows[i].status);

                        name_w = w > name_w ? w : name_w;
                        status_w = s > status_w ? s : status_w;
                }
                printf("%-*s  %-*s  %s\n", name_w, "Profile", status_w, "Status", "Sandbox");
                for (size_t i = 0; i < n; i++) {
                        print_name(rows[i].name, name_w);
                        fputs("  ", stdout);
                        print_name(rows[i].status, status_w);
                        /* An em dash, as the reference shows an unmarked profile. */
                        printf("  %s\n", rows[i].marked ? "yes" : "\u2014");
                }
        }
        if (c.sandbox_override != PROFILE_UNSET)
                print_override_note(&c);
        rows_free(rows, n);
        profile_config_free(&c);
        return 0;
}

/* --on: a linked marker is removed first, so creating the marker never creates (or
 * touches) whatever the link points at; then a fresh empty file, O_EXCL|O_NOFOLLOW. */
static int marker_create(const struct profile *p, struct cs_error *err)
{
        struct stat st;

        for (int attempt = 0; attempt < 3; attempt++) {
                int fd;

                if (fstatat(p->dir_fd, ".sandbox", &st, AT_SYMLINK_NOFOLLOW) == 0) {
                        if (S_ISREG(st.st_mode))
                                return 0;
                        if (!S_ISLNK(st.st_mode))
                                return cs_error_setx(err, EEXIST,
                                                     "%s/.sandbox exists and is not a file; "
                                                     "remove it, then try again",
                                                     p->dir);
                        if (unlinkat(p->dir_fd, ".sandbox", 0) < 0 && errno != ENOENT)
                                return cs_error_set(err, errno,
                                                    "remove the linked marker %s/.sandbox", p->dir);
                } else if (errno != ENOENT) {
                        return cs_error_set(err, errno, "stat %s/.sandbox", p->dir);
                }
                fd = openat(p->dir_fd, ".sandbox",
                            O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
                if (fd >= 0) {
                        close(fd);
                        return 0;
                }
                if (errno != EEXIST)
                        return cs_error_set(err, errno, "create %s/.sandbox", p->dir);
                /* Someone made one meanwhile: look again. */
        }
        return cs_error_setx(err, EAGAIN, "%s/.sandbox keeps changing; try again", p->dir);
}

static int marker_remove(const struct profile *p, struct cs_error *err)
{
        if (unlinkat(p->dir_fd, ".sandbox", 0) < 0 && errno != ENOENT)
                return cs_error_set(err, errno, "remove %s/.sandbox", p->dir);
        return 0;
}

int cmd_sandbox(int argc, char **argv)
{
        struct profile_config c = {0};
        struct profile p = {.dir_fd = -1, .state_fd = -1};
        struct cs_error err = {0};
        const char *name = NULL;
        bool on = false, off = false;
        int r, status = 0;

        for (int i = 0; i < argc; i++) {
                if (is_help(argv[i])) {
                        fputs(usage_sandbox, stdout);
                        return 0;
                }
                if (strcmp(argv[i], "--on") == 0)
                        on = true;
                else if (strcmp(argv[i], "--off") == 0)
                        off = true;
                else if (argv[i][0] == '-' && argv[i][1] != '\0')
                        return cli_usage_error("sandbox", "unknown option `%s`", argv[i]);
                else if (name)
                        return cli_usage_error("sandbox", "unexpected argument `%s`", argv[i]);
                else
                        name = argv[i];
        }
        if (on && off) {
                fprintf(stderr, "csandbox: sandbox: --on and --off are mutually exclusive\n");
                return CS_EXIT_SETUP;
        }
        if (!name)
                return cli_usage_error("sandbox", "which profile? give its name");
        r = profile_config_load(&c, &err);
        if (r < 0)
                return cli_fail(&err);
        r = profile_open(&c, name, &p, &err);
        if (r < 0) {
                profile_config_free(&c);
                return cli_fail(&err);
        }
        if (on || off) {
                r = on ? marker_create(&p, &err) : marker_remove(&p, &err);
                if (r < 0) {
                        status = cli_fail(&err);
                        goto out;
                }
                if (on)
                        printf("Sandbox enabled for '%s': it launches in csandbox's sandbox.\n",
                               name);
                else
                        printf("Sandbox disabled for '%s': it launches on the host.\n", name);
                /* Say so when the override keeps the new setting from taking effect. */
                if (c.sandbox_override != PROFILE_UNSET && (c.sandbox_override == PROFILE_ON) != on)
                        print_override_note(&c);
        } else {
                bool sandboxed = profile_sandboxed(&c, &p);

                printf("Profile '%s' launches %s: %s\n", name, sandboxed ? "in" : "on",
                       sandboxed ? "the sandbox" : "the host");
                if (c.sandbox_override != PROFILE_UNSET)
                        printf("CLAUDE_PROFILE_SANDBOX is set, so every profile launches %s "
                               "until it is unset. Its own setting is %s.\n",
                               where(c.sandbox_override == PROFILE_ON),
                               profile_marked(&p) ? "the sandbox" : "the host");
        }
out:
        profile_close(&p);
        profile_config_free(&c);
        return status;
}
