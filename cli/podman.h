/* `csandbox podman|docker ARGS`: csandbox's own podman front-end. */
#pragma once

/* The image subcommands (pull, build, images, rmi, inspect, tag) on csandbox's own store
 * (cli/podman_images.c). prog: "podman" or "docker" (for messages); argv[0] is the
 * subcommand. Returns the exit status (125 for a bad option or an unknown image). */
int podman_images_main(const char *prog, int argc, char **argv);
