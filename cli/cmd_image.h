/* `csandbox image import|pull|ls|inspect|rm|prune`. */
#pragma once
#include <stddef.h>
#include <stdint.h>

/* argv[0] is the subcommand ("import", ...). Returns the exit status. */
int cmd_image(int argc, char **argv);

/* `image build`, in the csandbox-import helper (cli/build_main.c). */
int cmd_image_build(int argc, char **argv);
/* `image pull`, in the csandbox-import helper (runner/pull_main.c). */
int cmd_image_pull(int argc, char **argv);
/* csandbox-import --vault-ca HOST:PORT: the Agent Vault proxy's CA answer (vault_ca_main.c). */
int cmd_vault_ca(int argc, char **argv);
/* pull's progress display (cli/pull_main.c) on po and io, for `image pull` and the pulls of
 * `image build`; pull_display_end after the pull (NULL: nothing shown). */
struct pull_options;
struct import_options;
struct pull_display *pull_display_attach(struct pull_options *po, struct import_options *io);
void pull_display_end(struct pull_display *d, const struct import_options *io);
/* The import's progress line on a terminal (cli/import_main.c), for pull too. */
struct import_progress;
void image_import_progress(void *opaque, const struct import_progress *p);

/* Progress on a terminal (cli/import_main.c): the size of the terminal on stderr (80x24
 * when it does not say); text as one cleared line cut to fit cols (no newline: a line never
 * wraps, so moving the cursor up over drawn lines stays exact); a monotonic clock in
 * seconds; bytes over seconds as a human size (0 while under 50 ms). */
void progress_term_size(int *cols, int *rows);
void progress_put(const char *text, int cols);
double progress_now(void);
void progress_rate(uint64_t bytes, double seconds, char *buf, size_t len);
