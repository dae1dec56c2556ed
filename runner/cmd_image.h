/* `csandbox image import|ls|inspect|rm|prune`. */
#pragma once

/* argv[0] is the subcommand ("import", ...). Returns the exit status. */
int cmd_image(int argc, char **argv);
