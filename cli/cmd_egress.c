/* csandbox egress-log PROFILE: the newest refusal log in the profile's state dir (one
 * file per session, <state dir>/egress-<time>-<pid>.log, written by csandbox's proxy). */
#include "cmd_egress.h"
#include "cli.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"
#include "../policy/profile.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LOG_READ_MAX ((size_t)8 << 20)

static const char usage_egress_log[] =
    "Usage: csandbox egress-log PROFILE\n"
    "\n"
    "Print the egress log of PROFILE's newest session under\n"
    "CLAUDE_PROFILE_SANDBOX_EGRESS=allowlist: one line per refused connection or DNS\n"
    "query (time, name, address, port, reason). Its path goes to stderr.\n";

/* The newest egress-*.log in dirfd (the time follows the prefix), or NULL. */
static char *newest_log(int dirfd)
{
        DIR *d = fdopendir(dirfd);
        struct dirent *e;
        char *best = NULL;

        if (!d) {
                close(dirfd);
                return NULL;
        }
        while ((e = readdir(d))) {
                size_t n = strlen(e->d_name);

                if (n < 12 || strncmp(e->d_name, "egress-", 7) != 0 ||
                    strcmp(e->d_name + n - 4, ".log") != 0)
                        continue;
                if (!best || strcmp(e->d_name, best) > 0) {
                        free(best);
                        best = strdup(e->d_name);
                }
        }
        closedir(d);
        return best;
}

int cmd_egress_log(int argc, char **argv)
{
        struct profile_config c = {0};
        struct profile p = {.dir_fd = -1, .state_fd = -1};
        struct cs_error err = {0};
        _cleanup_free_ char *dir = NULL, *name = NULL, *buf = NULL;
        size_t len = 0;
        int fd, r;

        if (argc >= 1 && (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0)) {
                fputs(usage_egress_log, stdout);
                return 0;
        }
        if (argc != 1)
                return cli_usage_error("egress-log", "give one PROFILE");
        r = profile_config_load(&c, &err);
        if (r >= 0)
                r = profile_open(&c, argv[0], &p, &err);
        if (r < 0) {
                profile_config_free(&c);
                return cli_fail(&err);
        }
        if (asprintf(&dir, "%s", p.state_dir) < 0)
                dir = NULL;
        fd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
        if (fd < 0) {
                fprintf(stderr, "csandbox: profile %s has no egress log yet (%s)\n", argv[0],
                        dir ? dir : "?");
                profile_close(&p);
                profile_config_free(&c);
                return 0;
        }
        {
                int again = fcntl(fd, F_DUPFD_CLOEXEC, 0);

                name = newest_log(fd);
                if (name && again >= 0)
                        r = cs_read_file_at(again, name, LOG_READ_MAX, true, &buf, &len, &err);
                if (again >= 0)
                        close(again);
        }
        profile_close(&p);
        profile_config_free(&c);
        if (!name) {
                fprintf(stderr, "csandbox: profile %s has no egress log yet (%s)\n", argv[0], dir);
                return 0;
        }
        if (r < 0)
                return cli_fail(&err);
        fprintf(stderr, "%s/%s\n", dir, name);
        fwrite(buf, 1, len, stdout);
        return 0;
}
