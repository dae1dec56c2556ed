/* `csandbox image import|pull|ls|inspect|rm|prune`. */
#pragma once

/* argv[0] is the subcommand ("import", ...). Returns the exit status. */
int cmd_image(int argc, char **argv);

/* `image pull`, in the csandbox-import helper (runner/pull_main.c). */
int cmd_image_pull(int argc, char **argv);
/* The import's progress line on a terminal (runner/import_main.c), for pull too. */
struct import_progress;
void image_import_progress(void *opaque, const struct import_progress *p);
