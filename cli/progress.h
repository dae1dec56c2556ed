/* The progress lines of `image import` and `image pull` (csandbox-import). */
#pragma once
#include <stddef.h>
#include <stdint.h>

/* The import's progress line on a terminal (import's and pull's). */
struct import_progress;
void image_import_progress(void *opaque, const struct import_progress *p);

/* Progress on a terminal: the size of the terminal on stderr (80x24
 * when it does not say); text as one cleared line cut to fit cols (no newline: a line never
 * wraps, so moving the cursor up over drawn lines stays exact); a monotonic clock in
 * seconds; bytes over seconds as a human size (0 while under 50 ms). */
void progress_term_size(int *cols, int *rows);
void progress_put(const char *text, int cols);
double progress_now(void);
void progress_rate(uint64_t bytes, double seconds, char *buf, size_t len);
