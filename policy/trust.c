/* What the host runs later that a sandboxed session could change. The defences: the
 * profile's scripts are read-only inside (trust_protect.c); every change the session makes
 * under its writable roots is judged by git's and claude's own rules while it runs
 * (runner/journal.c watches, trust_rules.c judges); a report waits until the user accepts
 * it (trust_pending.c). This file: the report's items. */
#include "trust.h"
#include "trust_util.h"

#include "plan.h"
#include "profile.h"
#include "worktree.h"

#include "../common/cleanup.h"
#include "../common/strv.h"
#include "../common/error.h"
#include "../common/fileio.h"
#include "../common/resolve.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* ---- items ---- */

static void trust_add_text(struct plan_trust *t, const char *kind, const char *name,
                           const char *value)
{
        size_t fields = strlen(kind) + 1 + strlen(name);
        char *item;

        if (asprintf(&item, "%s\t%s\t%s", kind, name, value ? value : "") < 0)
                return;
        /* Kind and name come from the session's files: a tab in them would shift the fields
         * the report splits to show them. */
        for (char *c = item; c < item + fields; c++)
                if (*c == '\t' && c != item + strlen(kind))
                        *c = '?';
        (void)strv_push(&t->items, &t->n, item); /* dropped on ENOMEM: as if unchanged */
}

void trust_add(struct plan_trust *t, const char *kind, const char *name, const cJSON *value)
{
        char *v = value ? cJSON_PrintUnformatted(value) : NULL;

        trust_add_text(t, kind, name, v);
        free(v);
}

void trust_free(struct plan_trust *t)
{
        for (size_t i = 0; i < t->n; i++)
                free(t->items[i]);
        free(t->items);
        memset(t, 0, sizeof(*t));
}

/* The part of path below dir, or NULL when it is not below it. */
const char *trust_path_below(const char *path, const char *dir)
{
        size_t n = strlen(dir);

        if (n > 1 && strncmp(path, dir, n) == 0 && path[n] == '/' && path[n + 1])
                return path + n + 1;
        return NULL;
}
