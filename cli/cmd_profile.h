/* `csandbox list` and `csandbox sandbox <name> [--on|--off]`: manage claude-profile
 * profiles without claude-profile installed (reference §6.1, §6.3). */
#pragma once

/* argv holds the arguments after the command word. Each returns the exit status: 0, or 125
 * after printing "csandbox: <why>" on stderr. */
int cmd_list(int argc, char **argv);
int cmd_sandbox(int argc, char **argv);
/* cmd_add.c */
int cmd_add(int argc, char **argv);
/* cmd_cache.c: `csandbox sandbox-cache PROFILE` */
int cmd_sandbox_cache(int argc, char **argv);
