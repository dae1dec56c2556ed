/* `csandbox image import|pull|ls|inspect|rm|prune`. */
#pragma once
#include <stddef.h>
#include <stdint.h>

/* argv[0] is the subcommand ("import", ...). Returns the exit status. */
int cmd_image(int argc, char **argv);

/* `image build`, in the csandbox-import helper (cli/build_main.c). */
int cmd_image_build(int argc, char **argv);
/* csandbox-import --save [--format docker-archive|oci-archive] [-o FILE] IMAGE: the image
 * as an archive (cli/save_main.c), for podman save. */
int cmd_image_save(int argc, char **argv);
/* `image pull`, in the csandbox-import helper (cli/pull_main.c). */
int cmd_image_pull(int argc, char **argv);
/* csandbox-import --vault-ca HOST:PORT: the Agent Vault proxy's CA answer (vault_ca_main.c). */
int cmd_vault_ca(int argc, char **argv);
/* pull's progress display (cli/pull_main.c) on po and io, for `image pull` and the pulls of
 * `image build`; pull_display_end after the pull (NULL: nothing shown). */
struct pull_options;
struct import_options;
struct pull_display *pull_display_attach(struct pull_options *po, struct import_options *io);
void pull_display_end(struct pull_display *d, const struct import_options *io);
