/* What the host runs later that a sandboxed session could change. Three defences: the
 * profile's scripts are read-only inside (trust_protect), what stays writable is compared
 * before and after the session (trust_snapshot_watch), and a report waits in the state dir
 * until the user accepts it (trust_pending_*). Everything read here may have been written
 * by a session: opened by fd below a verified dir, never through a link, every size bounded. */
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
#define WALK_ENTRIES_MAX  2000000u
#define WALK_DEPTH_MAX    128
#define HOOKS_MAX         256

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

/* ---- opening below a verified dir ---- */

/* A directory rel below base (rel normalised: no "." or ".." or empty component), never
 * through a link: openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, or one component at a time
 * with O_NOFOLLOW where openat2 is refused (an old kernel, a container's seccomp) or keeps
 * failing with EAGAIN. */

#define EMPTY_TREE_DEPTH   8
#define EMPTY_TREE_ENTRIES 256

/* Whether the directory name below dirfd holds nothing but directories (a tree claude made
 * for later use, such as plugins/marketplaces): nothing in it can run. Not followed through
 * links; past the bounds it counts as holding something. */
static bool tree_is_empty(int parent, const char *name, int depth, size_t *budget)
{
        int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        struct dirent *de;
        bool empty = d != NULL && depth < EMPTY_TREE_DEPTH;

        if (!d && fd >= 0)
                close(fd);
        while (empty && (de = readdir(d))) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                empty = *budget > 0 && (*budget)-- && de->d_type == DT_DIR &&
                        tree_is_empty(dirfd(d), de->d_name, depth + 1, budget);
        }
        if (d)
                closedir(d);
        return empty;
}

/* What an entry is, so that any change shows: a link's target; a file's inode and ctime
 * (which no unprivileged process can set back); a directory's inode. NULL when missing, or
 * a directory tree with no file or link in it (as good as missing: nothing there runs). */
static char *entry_value(int dirfd, const char *name)
{
        struct stat st;
        char target[PATH_MAX], *v = NULL;
        size_t budget = EMPTY_TREE_ENTRIES;
        ssize_t n;

        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? NULL : strdup("unreadable");
        if (S_ISDIR(st.st_mode) && tree_is_empty(dirfd, name, 0, &budget))
                return NULL;
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

DIR *trust_dir_open(int dirfd, const char *name)
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
                        _cleanup_closedir_ DIR *sub = trust_dir_open(dirfd(d), de->d_name);

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
        return trust_dir_open(dirfd, name);
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
        /* Dropped: no readable index: no gitlinks to compare, recorded as such. */
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
                _cleanup_closedir_ DIR *d = trust_dir_open(root, ".");

                if (d)
                        walk_nested(&walk, d, w->work_root, 0);
        }
        if (w->git_dir) {
                /* Each git dir is bound on itself during a session: the same dir after it. */
                _cleanup_closedir_ DIR *gd = w->git_inside ? trust_dir_open(root, ".git")
                                                           : trust_dir_open(AT_FDCWD, w->git_dir);
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
