/* What the host runs later that a sandboxed session could change. Three defences: the
 * profile's scripts are read-only inside (trust_protect), what stays writable is compared
 * before and after the session (trust_snapshot_watch), and a report waits in the state dir
 * until the user accepts it (trust_pending_*). Everything read here may have been written
 * by a session: opened by fd below a verified dir, never through a link, every size bounded. */
#include "trust.h"

#include "plan.h"
#include "profile.h"
#include "worktree.h"

#include "../common/cleanup.h"
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

#define SETTINGS_FILE_MAX (4u << 20)
#define INDEX_MAX         ((size_t)256 << 20)
#define INDEX_ENTRIES_MAX (16u << 20)
#define WALK_ENTRIES_MAX  2000000u
#define WALK_DEPTH_MAX    128
#define HOOKS_MAX         256
#define PENDING_MAX       64
#define PENDING_FILE_MAX  (256u << 10)
#define PENDING_DIR       "trust-pending"

/* ---- items ---- */

static void trust_add_text(struct plan_trust *t, const char *kind, const char *name,
                           const char *value)
{
        char **n = realloc(t->items, (t->n + 1) * sizeof(*n));

        if (n) {
                t->items = n;
                if (asprintf(&t->items[t->n], "%s\t%s\t%s", kind, name, value ? value : "") >= 0)
                        t->n++;
        }
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

/* ---- opening below a verified dir ---- */

/* A directory rel below base (rel normalised: no "." or ".." or empty component), never
 * through a link: openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, or one component at a time
 * with O_NOFOLLOW where openat2 is refused (an old kernel, a container's seccomp) or keeps
 * failing with EAGAIN. */

/* What an entry is, so that any change shows: a link's target; a file's inode and ctime
 * (which no unprivileged process can set back); a directory's inode. NULL when missing. */
static char *entry_value(int dirfd, const char *name)
{
        struct stat st;
        char target[PATH_MAX], *v = NULL;
        ssize_t n;

        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? NULL : strdup("unreadable");
        if (S_ISLNK(st.st_mode)) {
                n = readlinkat(dirfd, name, target, sizeof(target) - 1);
                target[n < 0 ? 0 : n] = '\0';
                if (asprintf(&v, "link to %s", target) < 0)
                        v = NULL;
        } else if (asprintf(&v, "%s %llu:%llu size %lld ctime %lld.%09ld",
                            S_ISDIR(st.st_mode)   ? "dir"
                            : S_ISREG(st.st_mode) ? "file"
                                                  : "other",
                            (unsigned long long)st.st_dev, (unsigned long long)st.st_ino,
                            (long long)st.st_size, (long long)st.st_ctim.tv_sec,
                            st.st_ctim.tv_nsec) < 0) {
                v = NULL;
        }
        return v;
}

/* entry_value of base/rel; "behind a link" when a directory on the way is not one. */
static char *path_value(int base, const char *rel)
{
        _cleanup_free_ char *parent = strdup(rel);
        _cleanup_close_ int pfd = -1;
        char *slash;

        if (!parent)
                return NULL;
        slash = strrchr(parent, '/');
        if (slash)
                *slash = '\0';
        pfd = cs_open_beneath(base, slash ? parent : "", O_PATH | O_DIRECTORY);
        if (pfd < 0)
                return errno == ENOENT ? NULL : strdup("behind a link or unreadable");
        return entry_value(pfd, slash ? slash + 1 : rel);
}

/* ---- read-only inside ---- */

static int list_add_unique(char ***list, size_t *n, const char *s)
{
        char **nl;

        for (size_t i = 0; i < *n; i++)
                if (strcmp((*list)[i], s) == 0)
                        return 0;
        nl = realloc(*list, (*n + 1) * sizeof(*nl));
        if (!nl)
                return -ENOMEM;
        *list = nl;
        if (!(nl[*n] = strdup(s)))
                return -ENOMEM;
        (*n)++;
        return 1;
}

/* A read-only bind of base/rel over itself (base_fd: base, verified), unless something is
 * mounted at dest already. The source is opened once beneath base_fd, like every bind. */
static int protect_bind(struct sandbox_spec *s, int base_fd, const char *base, const char *rel,
                        const char *dest_base, struct cs_error *err)
{
        _cleanup_free_ char *src = NULL, *dst = NULL;

        if (asprintf(&src, "%s/%s", base, rel) < 0 || asprintf(&dst, "%s/%s", dest_base, rel) < 0)
                return cs_error_set(err, ENOMEM, "protect %s", rel);
        for (size_t i = 0; i < s->n_mounts; i++)
                if (strcmp(s->mounts[i].dest, dst) == 0)
                        return 0;
        return plan_bind_at(s, base_fd, base, src, dst, SPEC_MOUNT_RO, err);
}

/* Collapse "//", "." and ".." in an absolute path, in place. */
static void path_normalise(char *path)
{
        char *out = path, *in = path;

        while (*in) {
                while (*in == '/')
                        in++;
                if (!*in)
                        break;
                if (in[0] == '.' && (in[1] == '/' || !in[1])) {
                        in++;
                        continue;
                }
                if (in[0] == '.' && in[1] == '.' && (in[2] == '/' || !in[2])) {
                        in += 2;
                        while (out > path && *--out != '/')
                                ;
                        continue;
                }
                *out++ = '/';
                while (*in && *in != '/')
                        *out++ = *in++;
        }
        if (out == path)
                *out++ = '/';
        *out = '\0';
}

/* The part of path below dir, or NULL when it is not below it. */
static const char *below(const char *path, const char *dir)
{
        size_t n = strlen(dir);

        if (n > 1 && strncmp(path, dir, n) == 0 && path[n] == '/' && path[n + 1])
                return path + n + 1;
        return NULL;
}

struct protect_ctx {
        struct sandbox_spec *s;
        const struct profile *p;
        struct trust_watch *w;
        const char *home, *config_dest;
        char *profile_norm, *profile_real; /* the profile dir as named, normalised; resolved */
        int root_fd;
};

/* One path a command names: watched, and read-only inside when it is a regular file now. */
static int protect_path(struct protect_ctx *x, char *path, struct cs_error *err)
{
        const char *rel;
        struct stat st;
        bool in_profile;
        int base, r;

        path_normalise(path);
        rel = x->profile_norm ? below(path, x->profile_norm) : NULL;
        if (!rel && x->profile_real)
                rel = below(path, x->profile_real);
        in_profile = rel != NULL;
        if (!rel)
                rel = below(path, x->w->work_root);
        if (!rel)
                return 0;
        base = in_profile ? x->p->dir_fd : x->root_fd;
        r = in_profile ? list_add_unique(&x->w->profile_files, &x->w->n_profile_files, rel)
                       : list_add_unique(&x->w->tree_files, &x->w->n_tree_files, rel);
        if (r < 0)
                return cs_error_set(err, ENOMEM, "watch %s", path);
        {
                _cleanup_free_ char *parent = strdup(rel);
                _cleanup_close_ int pfd = -1;
                char *slash = parent ? strrchr(parent, '/') : NULL;

                if (!parent)
                        return cs_error_set(err, ENOMEM, "watch %s", path);
                if (slash)
                        *slash = '\0';
                pfd = base >= 0 ? cs_open_beneath(base, slash ? parent : "", O_PATH | O_DIRECTORY)
                                : -1;
                if (pfd < 0 ||
                    fstatat(pfd, slash ? slash + 1 : rel, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                    !S_ISREG(st.st_mode))
                        return 0;
        }
        return protect_bind(x->s, base, in_profile ? x->p->dir : x->w->work_root, rel,
                            in_profile ? x->config_dest : x->w->work_root, err);
}

/* Each word of a shell command that names a path: absolute, ~/, $HOME/, $CLAUDE_CONFIG_DIR/
 * (the profile on the host), $CLAUDE_PROJECT_DIR/ or relative (both: the work tree, where
 * claude runs its commands). Quotes are dropped, not split at: "$CLAUDE_PROJECT_DIR"/x. */
static int protect_command(struct protect_ctx *x, const char *cmd, struct cs_error *err)
{
        static const struct {
                const char *var;
                int base; /* 0 home, 1 profile, 2 work root */
        } vars[] = {
            {"$HOME", 0},
            {"${HOME}", 0},
            {"~", 0},
            {"$CLAUDE_CONFIG_DIR", 1},
            {"${CLAUDE_CONFIG_DIR}", 1},
            {"$CLAUDE_PROJECT_DIR", 2},
            {"${CLAUDE_PROJECT_DIR}", 2},
        };
        size_t len = strlen(cmd);
        _cleanup_free_ char *word = malloc(len + 1);
        int r = 0;

        if (!word)
                return cs_error_set(err, ENOMEM, "read a command");
        for (size_t i = 0; i <= len && r >= 0;) {
                size_t n = 0;

                for (; i < len; i++) {
                        unsigned char ch = (unsigned char)cmd[i];

                        if (ch == '"' || ch == '\'' || ch == '\\')
                                continue;
                        if (!isalnum(ch) && !strchr("_./~${}-+,:@%", ch))
                                break;
                        word[n++] = (char)ch;
                }
                word[n] = '\0';
                i++;
                if (n == 0 || !strchr(word, '/'))
                        continue;
                {
                        const char *rest = word, *prefix = "";
                        _cleanup_free_ char *path = NULL;

                        for (size_t v = 0; v < sizeof(vars) / sizeof(vars[0]); v++) {
                                size_t vl = strlen(vars[v].var);

                                if (strncmp(word, vars[v].var, vl) == 0 && word[vl] == '/') {
                                        rest = word + vl;
                                        prefix = vars[v].base == 0   ? x->home
                                                 : vars[v].base == 1 ? x->p->dir
                                                                     : x->w->work_root;
                                        break;
                                }
                        }
                        if (rest == word && word[0] != '/') {
                                if (strchr(word, '$') || word[0] == '~')
                                        continue;
                                prefix = x->w->work_root;
                                if (asprintf(&path, "%s/%s", prefix, word) < 0)
                                        path = NULL;
                        } else if (asprintf(&path, "%s%s", prefix, rest) < 0) {
                                path = NULL;
                        }
                        if (!path)
                                return cs_error_set(err, ENOMEM, "read a command");
                        r = protect_path(x, path, err);
                }
        }
        return r;
}

static int protect_string(struct protect_ctx *x, const cJSON *v, struct cs_error *err)
{
        return cJSON_IsString(v) ? protect_command(x, v->valuestring, err) : 0;
}

/* The commands a settings file makes claude run on the host. */
static int protect_settings(struct protect_ctx *x, int dirfd, const char *path,
                            struct cs_error *err)
{
        static const char *const helpers[] = {"apiKeyHelper", "awsAuthRefresh",
                                              "awsCredentialExport", "otelHeadersHelper"};
        _cleanup_free_ char *raw = NULL;
        struct cs_error ignored;
        const cJSON *events, *ev, *group, *h;
        size_t len;
        cJSON *j;
        int r = 0;

        if (cs_read_file_at(dirfd, path, SETTINGS_FILE_MAX, true, &raw, &len, &ignored) < 0)
                return 0;
        j = cJSON_ParseWithLength(raw, len);
        if (!cJSON_IsObject(j)) {
                cJSON_Delete(j);
                return 0;
        }
        events = cJSON_GetObjectItemCaseSensitive(j, "hooks");
        /* Any container's members: a hook in an odd place is protected all the same. */
        cJSON_ArrayForEach(ev, events)
        {
                cJSON_ArrayForEach(group, ev)
                {
                        const cJSON *hs = cJSON_GetObjectItemCaseSensitive(group, "hooks");

                        cJSON_ArrayForEach(h, hs)
                        {
                                if (r >= 0)
                                        r = protect_string(
                                            x, cJSON_GetObjectItemCaseSensitive(h, "command"), err);
                        }
                }
        }
        if (r >= 0)
                r = protect_string(
                    x,
                    cJSON_GetObjectItemCaseSensitive(
                        cJSON_GetObjectItemCaseSensitive(j, "statusLine"), "command"),
                    err);
        for (size_t i = 0; r >= 0 && i < sizeof(helpers) / sizeof(helpers[0]); i++)
                r = protect_string(x, cJSON_GetObjectItemCaseSensitive(j, helpers[i]), err);
        cJSON_Delete(j);
        return r;
}

/* A linked worktree's own git dir, <common>/worktrees/NAME, where its index is: NAME from
 * the work tree's .git file, accepted only when that dir's gitdir points back at it. */
static char *linked_index_dir(const struct worktree *wt)
{
        _cleanup_free_ char *dotgit = NULL, *back = NULL, *want = NULL, *rel = NULL;
        _cleanup_close_ int common = -1, wd = -1;
        struct cs_error ignored;
        size_t len;
        char *name;

        if (asprintf(&want, "%s/.git", wt->root) < 0 ||
            cs_read_file_at(AT_FDCWD, want, 4096, true, &dotgit, &len, &ignored) < 0)
                return NULL;
        while (len > 0 && (dotgit[len - 1] == '\n' || dotgit[len - 1] == '/'))
                dotgit[--len] = '\0';
        name = strrchr(dotgit, '/');
        if (!name || !name[1] || name[1] == '.' || asprintf(&rel, "worktrees/%s", name + 1) < 0)
                return NULL;
        common = open(wt->common_dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        wd = common >= 0 ? cs_open_beneath(common, rel, O_PATH | O_DIRECTORY) : -1;
        if (wd < 0 || cs_read_file_at(wd, "gitdir", 4096, true, &back, &len, &ignored) < 0)
                return NULL;
        while (len > 0 && back[len - 1] == '\n')
                back[--len] = '\0';
        return strcmp(back, want) == 0 ? cs_take_ptr(&rel) : NULL;
}

int trust_protect(struct sandbox_spec *s, const struct profile_config *c, const struct profile *p,
                  const char *config_dest, const struct worktree *wt, struct trust_watch *w,
                  struct cs_error *err)
{
        /* What claude on the host runs from the profile by itself; commands and skills are
         * watched so that a retargeted link shows (their real dirs are prompts, not code). */
        static const char *const fixed[] = {"hooks", "statusline.sh", "plugins", "commands",
                                            "skills"};
        struct protect_ctx x = {.s = s, .p = p, .w = w, .home = c->home, .root_fd = -1};
        _cleanup_free_ char *shared = NULL;
        int r = 0;

        w->work_root = strdup(wt->root);
        if (!w->work_root)
                return cs_error_set(err, ENOMEM, "watch %s", wt->root);
        if (wt->common_dir && !wt->common_outside &&
            asprintf(&w->git_dir, "%s/.git", wt->root) >= 0 &&
            strcmp(w->git_dir, wt->common_dir) == 0) {
                w->git_inside = true;
                w->index_dir = strdup("");
        } else if (wt->common_dir && wt->common_outside) {
                free(w->git_dir);
                w->git_dir = strdup(wt->common_dir);
                w->index_dir = linked_index_dir(wt);
        } else {
                free(w->git_dir);
                w->git_dir = NULL;
        }
        if (list_add_unique(&w->tree_files, &w->n_tree_files, ".claude/settings.json") < 0)
                return cs_error_set(err, ENOMEM, "watch %s", wt->root);
        for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]) && r >= 0; i++) {
                struct stat st;

                if (list_add_unique(&w->profile_files, &w->n_profile_files, fixed[i]) < 0)
                        return cs_error_set(err, ENOMEM, "watch %s", fixed[i]);
                if (i < 3 && fstatat(p->dir_fd, fixed[i], &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                    (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)))
                        r = protect_bind(s, p->dir_fd, p->dir, fixed[i], config_dest, err);
        }
        if (r < 0)
                return r;
        x.config_dest = config_dest;
        x.profile_real = realpath(p->dir, NULL);
        x.profile_norm = strdup(p->dir);
        if (x.profile_norm)
                path_normalise(x.profile_norm);
        x.root_fd = open(w->work_root, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (asprintf(&shared, "%s/shared-settings.json", c->profiles_base) < 0)
                r = cs_error_set(err, ENOMEM, "shared settings");
        if (r >= 0)
                r = protect_settings(&x, p->dir_fd, "settings.json", err);
        if (r >= 0)
                r = protect_settings(&x, AT_FDCWD, shared, err);
        free(x.profile_real);
        free(x.profile_norm);
        if (x.root_fd >= 0)
                close(x.root_fd);
        return r;
}

void trust_watch_free(struct trust_watch *w)
{
        for (size_t i = 0; i < w->n_profile_files; i++)
                free(w->profile_files[i]);
        for (size_t i = 0; i < w->n_tree_files; i++)
                free(w->tree_files[i]);
        free(w->profile_files);
        free(w->tree_files);
        free(w->work_root);
        free(w->git_dir);
        free(w->index_dir);
        memset(w, 0, sizeof(*w));
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

/* ---- the snapshot ---- */

struct walk {
        struct plan_trust *t;
        size_t entries;
        bool truncated;
};

/* Everything in a git dir that makes git run something: config and config.worktree
 * (fsmonitor, hooksPath, filters, aliases), commondir (another config), and each hook. */
static char *git_dir_value(int gd)
{
        _cleanup_free_ char *config = entry_value(gd, "config");
        _cleanup_free_ char *wt_config = entry_value(gd, "config.worktree");
        _cleanup_free_ char *commondir = entry_value(gd, "commondir");
        _cleanup_free_ char *hooks_v = entry_value(gd, "hooks");
        _cleanup_closedir_ DIR *d = NULL;
        char *out = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&out, &len);
        int hfd;

        if (!f)
                return NULL;
        fprintf(f, "config: %s; config.worktree: %s; commondir: %s; hooks: %s",
                config ? config : "none", wt_config ? wt_config : "none",
                commondir ? commondir : "none", hooks_v ? hooks_v : "none");
        hfd = openat(gd, "hooks", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        d = hfd >= 0 ? fdopendir(hfd) : NULL;
        if (hfd >= 0 && !d)
                close(hfd);
        for (size_t n = 0; d && n < HOOKS_MAX;) {
                struct dirent *de = readdir(d);
                _cleanup_free_ char *v = NULL;

                if (!de)
                        break;
                if (de->d_name[0] == '.')
                        continue;
                n++;
                v = entry_value(dirfd(d), de->d_name);
                fprintf(f, "; %s: %s", de->d_name, v ? v : "none");
        }
        fclose(f);
        return out;
}

/* Entries of a directory at depth, one at a time, bounded over the whole walk. */
static struct dirent *walk_next(struct walk *w, DIR *d, int depth)
{
        struct dirent *de;

        if (depth > WALK_DEPTH_MAX) {
                w->truncated = true;
                return NULL;
        }
        while ((de = readdir(d))) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (++w->entries > WALK_ENTRIES_MAX) {
                        w->truncated = true;
                        return NULL;
                }
                return de;
        }
        return NULL;
}

static DIR *walk_open(int dirfd, const char *name)
{
        int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;

        if (fd >= 0 && !d)
                close(fd);
        return d;
}

static bool is_dir_entry(int dirfd, const struct dirent *de)
{
        struct stat st;

        if (de->d_type != DT_UNKNOWN)
                return de->d_type == DT_DIR;
        return fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

static bool is_bare_repo(int dirfd)
{
        struct stat st;

        return fstatat(dirfd, "objects", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) &&
               fstatat(dirfd, "refs", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

/* Every .git below the work root (a directory, a file, a link): git on the host takes each
 * for a repository of its own, with its own config and hooks. */
static void walk_nested(struct walk *w, DIR *d, const char *path, int depth)
{
        struct dirent *de;

        while ((de = walk_next(w, d, depth))) {
                _cleanup_free_ char *child = NULL;
                bool dotgit = strcmp(de->d_name, ".git") == 0, dir = is_dir_entry(dirfd(d), de);

                /* A bare repository (HEAD beside objects/ and refs/): git in it, or in a dir
                 * below it, takes its config, as safe.bareRepository=all allows. */
                if (!dir && strcmp(de->d_name, "HEAD") == 0 && is_bare_repo(dirfd(d))) {
                        _cleanup_free_ char *v = git_dir_value(dirfd(d));

                        trust_add_text(w->t, "bare git repository", path, v);
                }
                /* Most entries are files: no path built, nothing opened. */
                if ((!dotgit && !dir) || (dotgit && depth == 0)) /* depth 0: the repository */
                        continue;
                if (asprintf(&child, "%s/%s", path, de->d_name) < 0)
                        return;
                if (dotgit) {
                        _cleanup_free_ char *v = NULL;

                        if (dir) {
                                _cleanup_close_ int gd =
                                    openat(dirfd(d), ".git",
                                           O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

                                v = gd >= 0 ? git_dir_value(gd) : NULL;
                        } else {
                                v = entry_value(dirfd(d), ".git");
                        }
                        trust_add_text(w->t, "nested git repository", child, v);
                } else {
                        _cleanup_closedir_ DIR *sub = walk_open(dirfd(d), de->d_name);

                        if (sub)
                                walk_nested(w, sub, child, depth + 1);
                }
        }
}

/* A directory git reads below a git dir (path: its name for the report). git follows a
 * link there, csandbox does not: a link is named instead. */
static DIR *git_subdir(struct plan_trust *t, int dirfd, const char *name, const char *path)
{
        struct stat st;

        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
                _cleanup_free_ char *v = entry_value(dirfd, name);

                trust_add_text(t, "link that git follows in a git dir", path, v);
                return NULL;
        }
        return walk_open(dirfd, name);
}

/* Every git dir below <git dir>/modules (HEAD in it), and those below its own modules/. */
static void walk_modules(struct walk *w, DIR *d, const char *path, int depth)
{
        struct dirent *de;

        while ((de = walk_next(w, d, depth))) {
                _cleanup_free_ char *child = NULL;
                _cleanup_closedir_ DIR *sub = NULL;
                struct stat st;

                if ((!is_dir_entry(dirfd(d), de) && de->d_type != DT_LNK &&
                     de->d_type != DT_UNKNOWN) ||
                    asprintf(&child, "%s/%s", path, de->d_name) < 0)
                        continue;
                sub = git_subdir(w->t, dirfd(d), de->d_name, child);
                if (!sub)
                        continue;
                if (fstatat(dirfd(sub), "HEAD", &st, AT_SYMLINK_NOFOLLOW) == 0) {
                        _cleanup_free_ char *v = git_dir_value(dirfd(sub)), *mpath = NULL;
                        _cleanup_closedir_ DIR *mods = NULL;

                        trust_add_text(w->t, "submodule git dir", child, v);
                        if (asprintf(&mpath, "%s/modules", child) >= 0 &&
                            (mods = git_subdir(w->t, dirfd(sub), "modules", mpath)))
                                walk_modules(w, mods, mpath, depth + 1);
                } else {
                        walk_modules(w, sub, child, depth + 1);
                }
        }
}

static void snapshot_index(struct plan_trust *t, int gd, const char *root)
{
        _cleanup_free_ char *buf = NULL, *links = NULL;
        struct cs_error ignored;
        size_t len, n = 0;

        if (cs_read_file_at(gd, "index", INDEX_MAX, true, &buf, &len, &ignored) < 0) {
                /* git follows a link here; csandbox names it instead. */
                _cleanup_free_ char *v = ignored.err == ENOENT ? NULL : entry_value(gd, "index");

                if (v)
                        trust_add_text(t, "git index that is no plain file, in", root, v);
                return;
        }
        if (trust_index_gitlinks(buf, len, &links, &n) < 0) {
                trust_add_text(t, "unreadable git index in", root, NULL);
                return;
        }
        for (size_t o = 0; o < n; o += strlen(links + o) + 1) {
                _cleanup_free_ char *path = NULL;

                if (asprintf(&path, "%s/%s", root, links + o) >= 0)
                        trust_add_text(t, "gitlink in the index", path, NULL);
        }
}

static void snapshot_files(struct plan_trust *t, int base, const char *base_path, char **rels,
                           size_t n)
{
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *path = NULL, *v = NULL;

                if (asprintf(&path, "%s/%s", base_path, rels[i]) < 0)
                        continue;
                v = base >= 0 ? path_value(base, rels[i]) : NULL;
                if (v)
                        trust_add_text(t, "file the host runs", path, v);
        }
}

void trust_snapshot_watch(struct plan_trust *t, const struct profile *p,
                          const struct trust_watch *w)
{
        _cleanup_close_ int root = -1;
        struct walk walk = {.t = t};
        struct dirent *de;

        snapshot_files(t, p->dir_fd, p->dir, w->profile_files, w->n_profile_files);
        if (!w->work_root)
                return;
        root = open(w->work_root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (root < 0)
                return;
        snapshot_files(t, root, w->work_root, w->tree_files, w->n_tree_files);
        {
                _cleanup_free_ char *v = entry_value(root, ".gitmodules"), *path = NULL;

                if (v && asprintf(&path, "%s/.gitmodules", w->work_root) >= 0)
                        trust_add_text(t, "git .gitmodules", path, v);
        }
        {
                _cleanup_closedir_ DIR *d = walk_open(root, ".");

                if (d)
                        walk_nested(&walk, d, w->work_root, 0);
        }
        if (w->git_dir) {
                /* Each git dir is bound on itself during a session: the same dir after it. */
                _cleanup_closedir_ DIR *gd =
                    w->git_inside ? walk_open(root, ".git") : walk_open(AT_FDCWD, w->git_dir);
                _cleanup_free_ char *mpath = NULL, *wtpath = NULL;
                _cleanup_closedir_ DIR *mods = NULL, *wts = NULL;
                _cleanup_close_ int index_dir =
                    gd && w->index_dir
                        ? cs_open_beneath(dirfd(gd), w->index_dir, O_PATH | O_DIRECTORY)
                        : -1;
                _cleanup_free_ char *v = gd ? git_dir_value(dirfd(gd)) : NULL;

                if (gd && asprintf(&mpath, "%s/modules", w->git_dir) >= 0)
                        mods = git_subdir(t, dirfd(gd), "modules", mpath);
                if (gd && asprintf(&wtpath, "%s/worktrees", w->git_dir) >= 0)
                        wts = git_subdir(t, dirfd(gd), "worktrees", wtpath);

                if (index_dir >= 0)
                        snapshot_index(t, index_dir, w->work_root);
                /* The repository's own: config.worktree is read when the (read-only) config
                 * turns worktree configs on. */
                if (v)
                        trust_add_text(t, "git dir", w->git_dir, v);
                if (mods)
                        walk_modules(&walk, mods, mpath, 0);
                /* Each linked worktree's git dir: its config.worktree and commondir are read
                 * by git in that worktree. */
                while (wts && (de = walk_next(&walk, wts, 0))) {
                        _cleanup_close_ int wd = -1;
                        _cleanup_free_ char *wv = NULL, *wpath = NULL;

                        wd = openat(dirfd(wts), de->d_name,
                                    O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        wv = wd >= 0 ? git_dir_value(wd) : entry_value(dirfd(wts), de->d_name);
                        if (asprintf(&wpath, "%s/%s", wtpath, de->d_name) >= 0)
                                trust_add_text(t, "linked worktree git dir", wpath, wv);
                }
        }
        if (walk.truncated)
                trust_add_text(t, "work tree too large to check whole for repositories",
                               w->work_root, NULL);
}

/* ---- the review a later launch waits for ---- */

static int pending_dir(const struct profile *p, struct cs_error *err)
{
        int dfd;

        if (p->state_fd < 0)
                return cs_error_setx(err, EBADF, "no state dir for profile %s", p->name);
        if (mkdirat(p->state_fd, PENDING_DIR, 0700) < 0 && errno != EEXIST)
                return cs_error_set(err, errno, "create %s/%s", p->state_dir, PENDING_DIR);
        dfd = openat(p->state_fd, PENDING_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return cs_error_set(err, errno, "open %s/%s", p->state_dir, PENDING_DIR);
        return dfd;
}

static void now_text(char when[32], struct timespec *ret_now)
{
        struct tm tm;

        clock_gettime(CLOCK_REALTIME, ret_now);
        gmtime_r(&ret_now->tv_sec, &tm);
        strftime(when, 32, "%Y-%m-%d %H:%M:%S UTC", &tm);
}

int trust_pending_add(const struct profile *p, const char *work_root, const char *report,
                      struct cs_error *err)
{
        _cleanup_close_ int dfd = pending_dir(p, err);
        _cleanup_free_ char *text = NULL;
        struct timespec now;
        char name[64], when[32];

        if (dfd < 0)
                return dfd;
        now_text(when, &now);
        snprintf(name, sizeof(name), "%lld.%09ld-%d", (long long)now.tv_sec, now.tv_nsec,
                 (int)getpid());
        if (asprintf(&text, "After the session in %s that ended %s:\n%s\n", work_root, when,
                     report) < 0)
                return cs_error_set(err, ENOMEM, "record the trust report");
        return cs_write_file_once(dfd, name, text, strlen(text), 0600, err);
}

/* This boot's id and a process's start time (field 22 of /proc/PID/stat): together with the
 * pid they name one process, whatever reuses the pid later. */
static bool process_identity(pid_t pid, char boot[40], unsigned long long *ret_start)
{
        _cleanup_free_ char *b = NULL, *stat = NULL;
        struct cs_error ignored;
        char path[64];
        const char *f;
        size_t len;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        if (cs_read_file_at(AT_FDCWD, "/proc/sys/kernel/random/boot_id", 64, true, &b, &len,
                            &ignored) < 0 ||
            len < 36 || cs_read_file_at(AT_FDCWD, path, 4096, true, &stat, NULL, &ignored) < 0)
                return false;
        memcpy(boot, b, 36);
        boot[36] = '\0';
        f = strrchr(stat, ')');
        for (int field = 2; f && field < 22; field++)
                f = strchr(f + 1, ' ');
        return f && sscanf(f, " %llu", ret_start) == 1;
}

int trust_session_begin(const struct profile *p, const char *work_root, char **ret_name,
                        struct cs_error *err)
{
        _cleanup_close_ int dfd = pending_dir(p, err);
        _cleanup_free_ char *text = NULL;
        unsigned long long start;
        struct timespec now;
        char boot[40], when[32];

        *ret_name = NULL;
        if (dfd < 0)
                return dfd;
        if (!process_identity(getpid(), boot, &start))
                return cs_error_setx(err, ENOENT, "cannot read this process's start time");
        now_text(when, &now);
        if (asprintf(ret_name, "running-%d-%llu-%s", (int)getpid(), start, boot) < 0 ||
            asprintf(&text,
                     "A session in %s that started %s ended before csandbox could check what "
                     "it left (csandbox was killed, or the machine stopped). Check yourself, "
                     "before running git or claude there: any .git below %s, new dirs in its "
                     ".git/modules, gitlinks in its index (git ls-files -s | grep ^160000), "
                     ".gitmodules, and the profile's hooks, scripts and .claude.json.\n",
                     work_root, when, work_root) < 0) {
                free(*ret_name);
                *ret_name = NULL;
                return cs_error_set(err, ENOMEM, "record the session");
        }
        return cs_write_file_once(dfd, *ret_name, text, strlen(text), 0600, err);
}

void trust_session_end(const struct profile *p, const char *name)
{
        _cleanup_close_ int dfd = -1;

        if (!name || p->state_fd < 0)
                return;
        dfd = openat(p->state_fd, PENDING_DIR, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd >= 0)
                (void)unlinkat(dfd, name, 0);
}

/* A running-PID-START-BOOT record whose process is still there: its session goes on. */
static bool session_alive(const char *name)
{
        unsigned long long start, now_start;
        char boot[40], now_boot[40];
        int pid;

        if (sscanf(name, "running-%d-%llu-%39s", &pid, &start, boot) != 3)
                return false;
        return process_identity(pid, now_boot, &now_start) && start == now_start &&
               strcmp(boot, now_boot) == 0;
}

static int name_cmp(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

int trust_pending_take(const struct profile *p, bool accept, char **ret, struct cs_error *err)
{
        _cleanup_closedir_ DIR *d = NULL;
        char *names[PENDING_MAX], *out = NULL;
        size_t n = 0, len = 0;
        struct dirent *de;
        FILE *f;
        int r = 0;

        *ret = NULL;
        d = p->state_fd >= 0 ? walk_open(p->state_fd, PENDING_DIR) : NULL;
        if (!d)
                return 0;
        while ((de = readdir(d)) && n < PENDING_MAX)
                if (de->d_name[0] != '.' && !session_alive(de->d_name) &&
                    (names[n] = strdup(de->d_name)))
                        n++;
        if (n == 0)
                return 0;
        qsort(names, n, sizeof(names[0]), name_cmp);
        f = open_memstream(&out, &len);
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *text = NULL;
                struct cs_error ignored;

                if (f && cs_read_file_at(dirfd(d), names[i], PENDING_FILE_MAX, true, &text, NULL,
                                         &ignored) == 0)
                        fputs(text, f);
                /* Only what was listed goes: a report that lands meanwhile stays. */
                if (accept && unlinkat(dirfd(d), names[i], 0) < 0 && errno != ENOENT && r == 0)
                        r = cs_error_set(err, errno, "remove %s/%s/%s", p->state_dir, PENDING_DIR,
                                         names[i]);
                free(names[i]);
        }
        if (!f)
                return cs_error_set(err, ENOMEM, "read the trust reports");
        fclose(f);
        if (r < 0 || len == 0) {
                free(out);
                return r;
        }
        while (len > 0 && out[len - 1] == '\n')
                out[--len] = '\0';
        *ret = out;
        return 0;
}
