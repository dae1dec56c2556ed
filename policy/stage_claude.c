/* The host claude binary staged into a cache keyed by its version (or its identity), so a
 * host upgrade never changes the file under a running sandbox; stale entries pruned. */
#include "stage.h"
#include "stage_util.h"

#include "common/cleanup.h"
#include "common/error.h"
#include "common/fileio.h"
#include "common/sha256.h"
#include "policy/profile.h"
#include "policy/settings.h"
#include "policy/worktree.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

/* shutil.which: the first executable regular file named `name` on PATH. */
static char *find_on_path(const char *name)
{
        const char *path = getenv("PATH");
        _cleanup_free_ char *copy = NULL;
        char *save = NULL, *dir;

        if (strchr(name, '/'))
                return access(name, X_OK) == 0 ? strdup(name) : NULL;
        copy = strdup(path && *path ? path : "/bin:/usr/bin");
        if (!copy)
                return NULL;
        for (dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
                char *cand = stage_path_join(dir, name);
                struct stat st;

                if (cand && stat(cand, &st) == 0 && S_ISREG(st.st_mode) && access(cand, X_OK) == 0)
                        return cand;
                free(cand);
        }
        return NULL;
}

static bool key_is_safe(const char *k)
{
        size_t n = strlen(k);

        if (n == 0 || n > 100 || k[0] == '.')
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((k[i] >= 'a' && k[i] <= 'z') || (k[i] >= 'A' && k[i] <= 'Z') ||
                      (k[i] >= '0' && k[i] <= '9') || k[i] == '.' || k[i] == '-' || k[i] == '_' ||
                      k[i] == '+'))
                        return false;
        return true;
}

static const char *last_component(const char *path, size_t len, size_t *ret_len)
{
        size_t i = len;

        while (i > 0 && path[i - 1] != '/')
                i--;
        *ret_len = len - i;
        return path + i;
}

static bool component_is(const char *path, size_t len, const char *want)
{
        size_t n;
        const char *c = last_component(path, len, &n);

        return n == strlen(want) && memcmp(c, want, n) == 0;
}

/* The version the install layout tells: …/claude/versions/<v> (native installer), or the
 * "version" of the package.json of a node_modules/@anthropic-ai/claude-code* dir above. */
static char *claude_version_key(const char *resolved)
{
        size_t len = strlen(resolved), dir_len, n;
        const char *name = last_component(resolved, len, &n);

        dir_len = len - n - (n < len ? 1 : 0);
        if (component_is(resolved, dir_len, "versions")) {
                size_t gp_len, pn;

                last_component(resolved, dir_len, &pn);
                gp_len = dir_len - pn - (pn < dir_len ? 1 : 0);
                if (component_is(resolved, gp_len, "claude") && key_is_safe(name))
                        return strdup(name);
        }
        for (size_t a = dir_len; a > 0;) {
                size_t an, p_len, pn, gp_len;
                const char *ac = last_component(resolved, a, &an);

                p_len = a - an - (an < a ? 1 : 0);
                last_component(resolved, p_len, &pn);
                gp_len = p_len - pn - (pn < p_len ? 1 : 0);
                if (an >= 11 && memcmp(ac, "claude-code", 11) == 0 &&
                    component_is(resolved, p_len, "@anthropic-ai") &&
                    component_is(resolved, gp_len, "node_modules")) {
                        _cleanup_free_ char *pkg_dir = strndup(resolved, a);
                        _cleanup_free_ char *pkg =
                            pkg_dir ? stage_path_join(pkg_dir, "package.json") : NULL;
                        _cleanup_free_ char *buf = NULL;
                        struct cs_error ignored;
                        cJSON *json, *v;
                        char *key = NULL;
                        size_t blen;

                        if (!pkg || cs_read_file_at(AT_FDCWD, pkg, (size_t)1 << 20, false, &buf,
                                                    &blen, &ignored) < 0)
                                return NULL;
                        json = cJSON_ParseWithLength(buf, blen);
                        v = cJSON_GetObjectItemCaseSensitive(json, "version");
                        if (cJSON_IsString(v) && key_is_safe(v->valuestring))
                                key = strdup(v->valuestring);
                        cJSON_Delete(json);
                        return key;
                }
                a = p_len;
        }
        return NULL;
}

/* A .<key>.<pid>.partial is kept while its pid is alive (a parallel launch copying). */
static bool claude_entry_stale(const char *name)
{
        size_t n = strlen(name), i, j;
        char pid[24];
        long v;

        if (n < 8 || strcmp(name + n - 8, ".partial") != 0)
                return true;
        j = n - 8;
        i = j;
        while (i > 0 && name[i - 1] != '.')
                i--;
        if (i == j || j - i >= sizeof(pid))
                return true;
        for (size_t k = i; k < j; k++)
                if (name[k] < '0' || name[k] > '9')
                        return true;
        memcpy(pid, name + i, j - i);
        pid[j - i] = '\0';
        v = strtol(pid, NULL, 10);
        if (v <= 0 || v > INT_MAX)
                return true;
        return kill((pid_t)v, 0) < 0 && errno == ESRCH;
}

static int prune_claude_cache(int cfd, const char *keep)
{
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        int fd2 = dup(cfd);

        if (fd2 < 0)
                return -errno;
        d = fdopendir(fd2);
        if (!d) {
                close(fd2);
                return -errno;
        }
        while ((errno = 0, de = readdir(d))) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
                    strcmp(de->d_name, keep) == 0 || !claude_entry_stale(de->d_name))
                        continue;
                /* A parallel launch may be pruning the same entry. */
                if (unlinkat(cfd, de->d_name, 0) < 0 && errno != ENOENT)
                        return -errno;
        }
        return errno ? -errno : 0;
}

/* Where the staged copies of claude live: csandbox's data dir, unless its filesystem is
 * mounted noexec (the copy runs from where it lies, through a bind), then
 * $XDG_RUNTIME_DIR's; when neither can execute, an error that says how to fix it. */
static int claude_cache_open(const struct profile_config *c, char **ret_cache, int *ret_fd,
                             struct cs_error *err)
{
        const char *runtime = getenv("XDG_RUNTIME_DIR");
        const char *bases[] = {c->data_home, runtime && runtime[0] == '/' ? runtime : NULL};

        for (size_t i = 0; i < sizeof(bases) / sizeof(bases[0]); i++) {
                _cleanup_free_ char *cache = NULL;
                _cleanup_close_ int fd = -1;
                struct statvfs sv;
                int r;

                if (!bases[i])
                        continue;
                if (asprintf(&cache, "%s/csandbox/claude", bases[i]) < 0)
                        return cs_error_set(err, ENOMEM, "stage claude");
                r = stage_open_dir_parents(cache, &fd, err);
                if (r < 0)
                        return r;
                if (fstatvfs(fd, &sv) < 0)
                        return cs_error_set(err, errno, "statvfs %s", cache);
                if (!(sv.f_flag & ST_NOEXEC)) {
                        *ret_cache = cs_take_ptr(&cache);
                        *ret_fd = cs_take_fd(&fd);
                        return 0;
                }
        }
        return cs_error_setx(err, EACCES,
                             "the staged copy of claude could not execute: %s is on a filesystem "
                             "mounted noexec%s; set XDG_DATA_HOME (or XDG_RUNTIME_DIR) to a "
                             "directory on a filesystem that allows execution, or remount it "
                             "without noexec",
                             c->data_home,
                             bases[1] ? ", and so is $XDG_RUNTIME_DIR"
                                      : " and XDG_RUNTIME_DIR is not set");
}

int stage_claude(const struct profile_config *c, char **ret_path, bool *ret_missing,
                 struct stage_warnings *warn, struct cs_error *err)
{
        _cleanup_free_ char *found = NULL;
        _cleanup_free_ char *resolved = NULL;
        _cleanup_free_ char *key = NULL;
        _cleanup_free_ char *cache = NULL;
        _cleanup_free_ char *dest = NULL;
        _cleanup_close_ int in = -1, cfd = -1;
        char partial[160];
        struct stat st, dst_st;
        int r;

        (void)warn;
        found = find_on_path(c->claude_bin ? c->claude_bin : "claude");
        if (found)
                resolved = realpath(found, NULL);
        if (!found || !resolved) {
                *ret_path = NULL;
                *ret_missing = true;
                return 0;
        }
        in = open(resolved, O_RDONLY | O_NOCTTY | O_CLOEXEC);
        if (in < 0)
                return cs_error_set(err, errno, "open %s", resolved);
        if (fstat(in, &st) < 0)
                return cs_error_set(err, errno, "stat %s", resolved);
        if (!S_ISREG(st.st_mode))
                return cs_error_setx(err, EINVAL, "%s (claude) is not a regular file", resolved);
        key = claude_version_key(resolved);
        if (!key && asprintf(&key, "%llu-%llu-%lld-%lld.%09ld", (unsigned long long)st.st_dev,
                             (unsigned long long)st.st_ino, (long long)st.st_size,
                             (long long)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec) < 0)
                return cs_error_set(err, ENOMEM, "stage claude");
        r = claude_cache_open(c, &cache, &cfd, err);
        if (r < 0)
                return r;
        dest = stage_path_join(cache, key);
        if (!dest)
                return cs_error_set(err, ENOMEM, "stage claude");

        if (fstatat(cfd, key, &dst_st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(dst_st.st_mode)) {
                _cleanup_close_ int out = -1;

                snprintf(partial, sizeof(partial), ".%s.%d.partial", key, (int)getpid());
                (void)unlinkat(cfd, partial, 0);
                out = openat(cfd, partial, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                             0600);
                if (out < 0)
                        return cs_error_set(err, errno, "create %s/%s", cache, partial);
                /* A reflink where the filesystem shares blocks (btrfs, XFS), else a copy. */
                r = ioctl(out, FICLONE, in) == 0 ? 0 : stage_copy_fd_bytes(in, out);
                if (r == 0 && fchmod(out, st.st_mode & 0777) < 0)
                        r = -errno;
                if (r == 0 && fsync(out) < 0)
                        r = -errno;
                /* Never over an existing copy: a concurrent launch may be mounting it. The
                 * first copy to land wins; a link fails with EEXIST instead of replacing. */
                if (r == 0 && linkat(cfd, partial, cfd, key, 0) < 0 && errno != EEXIST)
                        r = -errno;
                (void)unlinkat(cfd, partial, 0);
                if (r < 0)
                        return cs_error_set(err, -r, "could not cache %s as %s", resolved, dest);
        }
        r = prune_claude_cache(cfd, key);
        if (r < 0)
                return cs_error_set(err, -r, "prune %s", cache);
        *ret_path = cs_take_ptr(&dest);
        *ret_missing = false;
        return 0;
}
