/* A stage's layers (layers.h). */
#include "layers.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void build_layers_free(struct build_layers *l)
{
        for (size_t i = 0; i < l->n; i++) {
                free(l->diff_ids[i]);
                if (l->held[i] >= 0)
                        close(l->held[i]);
                if (l->diff_fds[i] >= 0)
                        close(l->diff_fds[i]);
        }
        free(l->diff_ids);
        free(l->held);
        free(l->diff_fds);
        *l = (struct build_layers){0};
}

int build_layers_add(struct build_layers *l, const char *diff_id, int held_fd, struct cs_error *err)
{
        _cleanup_close_ int held = held_fd;
        char **ids = realloc(l->diff_ids, (l->n + 1) * sizeof(*ids));
        int *h, *d;

        if (ids)
                l->diff_ids = ids;
        h = ids ? realloc(l->held, (l->n + 1) * sizeof(*h)) : NULL;
        if (h)
                l->held = h;
        d = h ? realloc(l->diff_fds, (l->n + 1) * sizeof(*d)) : NULL;
        if (d)
                l->diff_fds = d;
        if (!d || !(ids[l->n] = strdup(diff_id)))
                return cs_error_set(err, ENOMEM, "build");
        d[l->n] = openat(held, LAYER_DIFF, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (d[l->n] < 0) {
                free(ids[l->n]);
                return cs_error_set(err, errno, "the layer %s", diff_id);
        }
        h[l->n] = cs_take_fd(&held);
        l->n++;
        return 0;
}

int build_layers_copy(struct build_layers *dst, const struct build_layers *src,
                      struct cs_error *err)
{
        for (size_t i = 0; i < src->n; i++) {
                int fd = fcntl(src->held[i], F_DUPFD_CLOEXEC, 3);

                if (fd < 0)
                        return cs_error_set(err, errno, "build");
                if (build_layers_add(dst, src->diff_ids[i], fd, err) < 0)
                        return -1;
        }
        return 0;
}
