/* csandbox: command dispatch. The only place that prints errors and decides exit codes. */
#include "cmd_doctor.h"
#include "cmd_egress.h"
#include "cli.h"
#include "cmd_exec.h"
#include "cmd_image.h"
#include "cmd_profile.h"
#include "cmd_run.h"
#include "podman.h"

#include "../common/error.h"

#include <stdio.h>
#include <string.h>

static const char usage_main[] =
    "Usage: csandbox COMMAND [ARGS]\n"
    "\n"
    "Commands:\n"
    "  run PROFILE [-- CLAUDE_ARGS...]    Claude Code for a claude-profile profile, in a\n"
    "                                     sandbox (see csandbox run --help)\n"
    "  plan PROFILE [-- CLAUDE_ARGS...]   print that sandbox as JSON, start nothing\n"
    "  exec [OPTIONS] [--] CMD [ARG...]   run CMD in a sandbox (see csandbox exec --help)\n"
    "  image import|ls|inspect|rm|prune   OCI images to run from (see csandbox image --help)\n"
    "  add NAME [--sandbox]               create a profile (see csandbox add --help)\n"
    "  list                               the profiles, their login and sandbox marker\n"
    "  sandbox NAME [--on|--off]          show or set a profile's sandbox marker\n"
    "  sandbox-cache NAME                 pull the images of its container MCP servers\n"
    "  doctor [PROFILE]                   check what this machine and user can run\n"
    "  egress-log PROFILE                 the refusals of its newest allowlist session\n"
    "  podman|docker COMMAND [ARGS]       containers as podman runs them (see csandbox\n"
    "                                     podman --help)\n"
    "  help                               show this text\n"
    "  version                            show the version\n";

int main(int argc, char **argv)
{
        const char *base = argv[0] ? strrchr(argv[0], '/') : NULL;

        base = base ? base + 1 : argv[0];
        /* csandbox under the name podman or docker (a symlink, or the session's shim) */
        if (base && (strcmp(base, "podman") == 0 || strcmp(base, "docker") == 0))
                return podman_main(argc, argv);
        if (argc < 2) {
                fputs(usage_main, stderr);
                return CS_EXIT_SETUP;
        }
        /* `csandbox help COMMAND` is `csandbox COMMAND --help`. */
        if (argc == 3 && strcmp(argv[1], "help") == 0 && strcmp(argv[2], "help") != 0) {
                char *again[] = {argv[0], argv[2], "--help", NULL};

                return main(3, again);
        }
        if (strcmp(argv[1], "podman") == 0 || strcmp(argv[1], "docker") == 0)
                return podman_main(argc - 1, argv + 1);
        if (strcmp(argv[1], "exec") == 0)
                return cmd_exec(argc - 2, argv + 2);
        if (strcmp(argv[1], "image") == 0)
                return cmd_image(argc - 2, argv + 2);
        if (strcmp(argv[1], "list") == 0)
                return cmd_list(argc - 2, argv + 2);
        if (strcmp(argv[1], "egress-log") == 0)
                return cmd_egress_log(argc - 2, argv + 2);
        if (strcmp(argv[1], "doctor") == 0)
                return cmd_doctor(argc - 2, argv + 2);
        if (strcmp(argv[1], "sandbox") == 0)
                return cmd_sandbox(argc - 2, argv + 2);
        if (strcmp(argv[1], "sandbox-cache") == 0)
                return cmd_sandbox_cache(argc - 2, argv + 2);
        if (strcmp(argv[1], "add") == 0)
                return cmd_add(argc - 2, argv + 2);
        if (strcmp(argv[1], "run") == 0)
                return cmd_run(argc - 2, argv + 2, false);
        if (strcmp(argv[1], "plan") == 0)
                return cmd_run(argc - 2, argv + 2, true);
        if (strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 ||
            strcmp(argv[1], "-h") == 0) {
                fputs(usage_main, stdout);
                return 0;
        }
        if (strcmp(argv[1], "version") == 0 || strcmp(argv[1], "--version") == 0) {
                printf("csandbox %s\n", CSANDBOX_VERSION);
                return 0;
        }
        fprintf(stderr, "csandbox: unknown command `%s`; see `csandbox help`\n", argv[1]);
        return CS_EXIT_SETUP;
}
