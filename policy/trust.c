/* What the host runs later that a sandboxed session could change. The defences: the
 * profile's scripts are read-only inside (trust_protect.c); every change the session makes
 * under its writable roots is judged by git's and claude's own rules while it runs
 * (runner/journal.c watches, trust_rules.c judges); a report waits until the user accepts
 * it (trust_pending.c). This file: the report's items, and the git index reader. */
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

#define INDEX_MAX         ((size_t)256 << 20)
#define INDEX_ENTRIES_MAX (16u << 20)

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

/* ---- the git index ---- */

static uint32_t be32(const unsigned char *p)
{
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* One pass over the entries with a hash of hash_len bytes; -EINVAL when they do not fit. */
static int index_parse(const unsigned char *b, size_t len, size_t hash_len, char **ret,
                       size_t *ret_len)
{
        uint32_t version, count;
        size_t pos = 12, prev_len = 0, out_len = 0, fixed = 40 + hash_len + 2;
        _cleanup_free_ char *prev = NULL, *out = NULL;

        if (len < 12 || memcmp(b, "DIRC", 4) != 0)
                return -EINVAL;
        version = be32(b + 4);
        count = be32(b + 8);
        if (version < 2 || version > 4 || count > INDEX_ENTRIES_MAX)
                return -EINVAL;
        prev = malloc(PATH_MAX + 1);
        if (!prev)
                return -ENOMEM;
        for (uint32_t i = 0; i < count; i++) {
                size_t start = pos, off, name_len, full_len;
                uint32_t mode;
                unsigned flags;
                const unsigned char *nul;

                if (len - pos < fixed)
                        return -EINVAL;
                mode = be32(b + pos + 24);
                flags = (unsigned)b[pos + 40 + hash_len] << 8 | b[pos + 41 + hash_len];
                off = pos + fixed;
                if (flags & 0x4000) {
                        if (version < 3 || len - off < 2)
                                return -EINVAL;
                        off += 2;
                }
                if (version == 4) {
                        /* The name is the previous one minus a varint's count of bytes,
                         * plus a NUL-terminated suffix. */
                        uint64_t strip = 0;
                        unsigned char ch;

                        do {
                                if (off >= len || strip > PATH_MAX)
                                        return -EINVAL;
                                ch = b[off++];
                                strip = (strip << 7) | (ch & 127);
                                if (ch & 128)
                                        strip++;
                        } while (ch & 128);
                        if (strip > prev_len)
                                return -EINVAL;
                        nul = memchr(b + off, '\0', len - off);
                        if (!nul)
                                return -EINVAL;
                        name_len = (size_t)(nul - (b + off));
                        full_len = prev_len - strip + name_len;
                        if (full_len > PATH_MAX)
                                return -EINVAL;
                        memcpy(prev + prev_len - strip, b + off, name_len);
                        pos = off + name_len + 1;
                } else {
                        nul = memchr(b + off, '\0', len - off);
                        if (!nul)
                                return -EINVAL;
                        full_len = name_len = (size_t)(nul - (b + off));
                        if (full_len > PATH_MAX)
                                return -EINVAL;
                        memcpy(prev, b + off, name_len);
                        /* Padded with 1 to 8 NULs to a multiple of 8 from the entry start. */
                        pos = start + ((off - start + name_len + 8) & ~(size_t)7);
                        if (pos > len)
                                return -EINVAL;
                        for (size_t k = off + name_len; k < pos; k++)
                                if (b[k])
                                        return -EINVAL;
                }
                prev[full_len] = '\0';
                prev_len = full_len;
                if ((flags & 0xfff) != (full_len < 0xfff ? full_len : 0xfff) || full_len == 0)
                        return -EINVAL;
                if ((mode & 0170000) == 0160000) {
                        char *n = realloc(out, out_len + full_len + 1);

                        if (!n)
                                return -ENOMEM;
                        out = n;
                        memcpy(out + out_len, prev, full_len + 1);
                        out_len += full_len + 1;
                }
        }
        *ret = cs_take_ptr(&out);
        *ret_len = out_len;
        return 0;
}

int trust_index_gitlinks(const char *buf, size_t len, char **ret, size_t *ret_len)
{
        /* The index does not say its hash: SHA-1 entries do not parse as SHA-256 ones. */
        int r = index_parse((const unsigned char *)buf, len, 20, ret, ret_len);

        if (r == -EINVAL)
                r = index_parse((const unsigned char *)buf, len, 32, ret, ret_len);
        return r;
}
