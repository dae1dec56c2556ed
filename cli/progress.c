/* The progress lines of `image import` and `image pull`: one line redrawn in place on a
 * terminal, a log otherwise. */
#include "progress.h"

#include "../common/fileio.h"
#include "../image/store/store.h"

#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

void progress_term_size(int *cols, int *rows)
{
        struct winsize ws = {0};

        if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) < 0) /* not a terminal after all: defaults */
                ws = (struct winsize){0};
        *cols = ws.ws_col ? ws.ws_col : 80;
        *rows = ws.ws_row ? ws.ws_row : 24;
}

void progress_put(const char *text, int cols)
{
        size_t len = strlen(text);

        /* one column short of the width: a line that fills the last column makes some
         * terminals wrap, and the next redraw would move up one line too few */
        if (cols > 1 && len > (size_t)cols - 1)
                len = (size_t)cols - 1;
        fputs("\r\033[K", stderr);
        fwrite(text, 1, len, stderr);
}

double progress_now(void)
{
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

void progress_rate(uint64_t bytes, double seconds, char *buf, size_t len)
{
        cs_human_size(seconds > 0.05 ? (uint64_t)((double)bytes / seconds) : 0, buf, len);
}

/* How a layer is named in the log: a digest by its first 12 hex digits (as podman shows
 * it), a member name of an archive whole (a cut one names nothing). */
static int layer_name_len(const char *what)
{
        return strncmp(what, "sha256:", 7) == 0 ? 19 : (int)strlen(what);
}

/* On a terminal (opaque NULL) one line redrawn in place: the layer, its bytes and rate, and
 * the bytes of all layers; otherwise (opaque non-NULL) a log: one line per finished layer,
 * nothing in between. */
void image_import_progress(void *opaque, const struct import_progress *p)
{
        char done[32], total[32], rate[32], all_done[32], all_total[32], line[256];
        int cols, rows;

        cs_human_size(p->done, done, sizeof(done));
        cs_human_size(p->total, total, sizeof(total));
        progress_rate(p->done, p->seconds, rate, sizeof(rate));
        if (p->reused) {
                if (opaque)
                        fprintf(stderr, "layer %zu/%zu %.*s  already stored\n", p->layer,
                                p->n_layers, layer_name_len(p->what), p->what);
                return;
        }
        if (opaque) {
                if (!p->finished)
                        return;
                if (p->seconds < 0.05)
                        fprintf(stderr, "layer %zu/%zu %.*s  %s done\n", p->layer, p->n_layers,
                                layer_name_len(p->what), p->what, total);
                else
                        fprintf(stderr, "layer %zu/%zu %.*s  %s in %.1f s (%s/s)\n", p->layer,
                                p->n_layers, layer_name_len(p->what), p->what, total, p->seconds,
                                rate);
                return;
        }
        cs_human_size(p->all_done, all_done, sizeof(all_done));
        cs_human_size(p->all_total, all_total, sizeof(all_total));
        snprintf(line, sizeof(line), "importing layer %zu/%zu  %s%s%s  %s/s  total %s%s%s",
                 p->layer, p->n_layers, done, p->total ? " / " : "", p->total ? total : "", rate,
                 all_done, p->all_total ? " / " : "", p->all_total ? all_total : "");
        progress_term_size(&cols, &rows);
        progress_put(line, cols);
        fflush(stderr);
}
