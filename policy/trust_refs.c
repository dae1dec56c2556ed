/* What a session's commits make the host's git write on a later checkout (trust.h,
 * trust_refs_*). A session can commit, with git's plumbing alone and without touching a
 * file of the work tree, a tree that holds a directory git takes for a git dir (HEAD beside
 * objects and refs, a config of its own): the host's `git checkout` of that branch writes
 * it out, and git run below it (a shell prompt) uses its config. git refuses `.git` in a
 * tree, not this. The refs are read before and after the session (no process: the loose
 * refs and packed-refs); for each ref the session moved, what its commit adds over the
 * commit HEAD named when the session started is listed by the host's git, hardened as
 * every git csandbox runs, and each directory that would be a git dir is a finding. */
#include "trust.h"
#include "trust_rules.h"
#include "worktree.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"
#include "../common/spawn.h"
#include "../common/strv.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define REFS_MAX      20000u
#define REF_FILE_MAX  4096u
#define PACKED_MAX    (16u << 20)
#define REFS_DEPTH    16
#define CANDIDATE_MAX 64u

static bool is_oid(const char *s, size_t n)
{
        if (n != 40 && n != 64)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return true;
}

/* "oid refname" entries, refname last so that a sort groups a ref's two readings. */
static void refs_add(struct trust_refs *t, const char *name, const char *oid, size_t oid_len)
{
        char *e = NULL;

        if (t->n >= REFS_MAX) {
                t->truncated = true;
                return;
        }
        if (asprintf(&e, "%s %.*s", name, (int)oid_len, oid) >= 0)
                (void)strv_push(&t->items, &t->n, e);
}

static void refs_walk(struct trust_refs *t, int dfd, const char *prefix, int depth)
{
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        if (fd < 0 || !(d = fdopendir(fd))) {
                if (fd >= 0)
                        close(fd);
                return;
        }
        while ((de = readdir(d))) {
                _cleanup_free_ char *name = NULL, *text = NULL;
                struct cs_error ignored;
                struct stat st;
                size_t len;

                if (de->d_name[0] == '.' ||
                    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                    asprintf(&name, "%s/%s", prefix, de->d_name) < 0)
                        continue;
                if (S_ISDIR(st.st_mode) && depth < REFS_DEPTH) {
                        _cleanup_close_ int sub = openat(
                            dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

                        if (sub >= 0)
                                refs_walk(t, sub, name, depth + 1);
                } else if (S_ISREG(st.st_mode) &&
                           cs_read_file_at(dirfd(d), de->d_name, REF_FILE_MAX, true, &text, &len,
                                           &ignored) == 0) {
                        while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r'))
                                text[--len] = '\0';
                        if (is_oid(text, len))
                                refs_add(t, name, text, len);
                }
        }
}

void trust_refs_read(int git_fd, struct trust_refs *ret)
{
        _cleanup_free_ char *packed = NULL;
        _cleanup_close_ int refs = -1;
        struct cs_error ignored;
        size_t len;

        memset(ret, 0, sizeof(*ret));
        if (git_fd < 0)
                return;
        refs = openat(git_fd, "refs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (refs >= 0)
                refs_walk(ret, refs, "refs", 0);
        if (cs_read_file_at(git_fd, "packed-refs", PACKED_MAX, true, &packed, &len, &ignored) == 0)
                for (char *line = packed, *next; line && *line; line = next) {
                        char *sp = strchr(line, ' ');

                        next = strchr(line, '\n');
                        if (next)
                                *next++ = '\0';
                        if (sp && is_oid(line, (size_t)(sp - line)))
                                refs_add(ret, sp + 1, line, (size_t)(sp - line));
                }
        {
                _cleanup_free_ char *head = NULL;

                if (cs_read_file_at(git_fd, "HEAD", REF_FILE_MAX, true, &head, &len, &ignored) ==
                    0) {
                        while (len > 0 && (head[len - 1] == '\n' || head[len - 1] == '\r'))
                                head[--len] = '\0';
                        free(ret->head);
                        ret->head = strdup(head);
                }
        }
}

void trust_refs_free(struct trust_refs *t)
{
        strv_free(&t->items, &t->n);
        free(t->head);
        memset(t, 0, sizeof(*t));
}

/* The oid a ref (or HEAD's symbolic target) has in t, or NULL. */
static const char *ref_oid(const struct trust_refs *t, const char *name)
{
        size_t l = strlen(name);

        for (size_t i = 0; i < t->n; i++)
                if (strncmp(t->items[i], name, l) == 0 && t->items[i][l] == ' ')
                        return t->items[i] + l + 1;
        return NULL;
}

static const char *head_oid(const struct trust_refs *t)
{
        if (!t->head)
                return NULL;
        if (strncmp(t->head, "ref: ", 5) == 0)
                return ref_oid(t, t->head + 5);
        return is_oid(t->head, strlen(t->head)) ? t->head : NULL;
}

/* git's output (NULL: none); *failed when git could not give it whole (too large, too
 * slow): what it would have listed is then unknown, which is a finding of its own. */
static char *git_out(const char *work_root, char *const *args, bool *failed)
{
        struct cs_error ignored;
        char *out = NULL;
        size_t len = 0;

        if (worktree_git(work_root, args, true, &out, &len, &ignored) < 0) {
                if (failed)
                        *failed = true;
                return NULL;
        }
        return out;
}

/* Whether dir (with a trailing '/', "" for the root) of commit oid holds what makes git
 * take it for a git dir: HEAD beside objects and refs, or beside a commondir. */
static bool tree_dir_is_git_dir(const char *work_root, const char *oid, const char *dir)
{
        _cleanup_free_ char *spec = NULL, *out = NULL;
        bool head = false, objects = false, refs = false, common = false;

        if (asprintf(&spec, "%s:%s", oid, dir) < 0)
                return true;
        bool failed = false;

        out = git_out(work_root, (char *[]){"ls-tree", "--name-only", "-z", spec, NULL}, &failed);
        if (!out)
                return failed;
        for (char *e = out; *e; e += strlen(e) + 1) {
                head |= strcmp(e, "HEAD") == 0;
                objects |= strcmp(e, "objects") == 0;
                refs |= strcmp(e, "refs") == 0;
                common |= strcmp(e, "commondir") == 0;
        }
        return head && ((objects && refs) || common);
}

void trust_refs_judge(const char *work_root, const struct trust_refs *before,
                      const struct trust_refs *after, struct plan_trust *out)
{
        const char *base = head_oid(before);

        if (after->truncated) {
                trust_add(out, "git refs too many to check", work_root, NULL);
                return;
        }
        for (size_t i = 0; i < after->n; i++) {
                const char *sp = strchr(after->items[i], ' ');
                _cleanup_free_ char *name =
                    sp ? strndup(after->items[i], (size_t)(sp - after->items[i])) : NULL;
                const char *was, *oid = sp ? sp + 1 : NULL;
                _cleanup_free_ char *diff = NULL;
                char **cand = NULL;
                size_t n_cand = 0;

                if (!name || !oid)
                        continue;
                was = ref_oid(before, name);
                if (was && strcmp(was, oid) == 0)
                        continue;
                /* What the ref's commit holds that the commit checked out when the session
                 * started did not: paths added or changed (a tag or a non-commit lists
                 * nothing). */
                bool failed = false;

                /* git shows a replaced commit's replacement in checkouts and logs: the
                 * session can make the user's next checkout write what no branch shows */
                if (strncmp(name, "refs/replace/", 13) == 0) {
                        trust_add(out,
                                  "a replace ref (the host's git shows another commit in "
                                  "its place, in checkouts too)",
                                  name, NULL);
                        continue;
                }
                diff = base ? git_out(work_root,
                                      (char *[]){"diff-tree", "-r", "--no-renames", "--name-only",
                                                 "-z", (char *)base, (char *)oid, NULL},
                                      &failed)
                            : git_out(work_root,
                                      (char *[]){"ls-tree", "-r", "--name-only", "-z", (char *)oid,
                                                 NULL},
                                      &failed);
                if (failed)
                        trust_add(out,
                                  "a commit csandbox could not list (git too slow or its list "
                                  "too long): what its checkout writes is unknown",
                                  name, NULL);
                for (char *p = diff; p && *p; p += strlen(p) + 1) {
                        /* a file the host reads by its name, which a checkout or a merge of
                         * the ref writes into the tree */
                        const char *kind = trust_host_reads(p);

                        if (kind) {
                                _cleanup_free_ char *what = NULL;

                                if (asprintf(&what,
                                             "%s/%s (in %s: a checkout or a merge writes it)",
                                             work_root, p, name) >= 0)
                                        trust_add(out, kind, what, NULL);
                        }
                }
                for (char *p = diff; p && *p && n_cand < CANDIDATE_MAX; p += strlen(p) + 1) {
                        /* the directory that may be a git dir: the one above HEAD, config,
                         * commondir, or above objects/ or refs/ */
                        _cleanup_free_ char *dir = NULL;
                        char *c = strstr(p, "/objects/") ? strstr(p, "/objects/")
                                  : strstr(p, "/refs/")  ? strstr(p, "/refs/")
                                                         : strrchr(p, '/');
                        const char *last = strrchr(p, '/') ? strrchr(p, '/') + 1 : p;

                        if (strcmp(last, "HEAD") != 0 && strcmp(last, "config") != 0 &&
                            strcmp(last, "commondir") != 0 && !strstr(p, "objects/") &&
                            !strstr(p, "refs/"))
                                continue;
                        if (strncmp(p, "objects/", 8) == 0 || strncmp(p, "refs/", 5) == 0 || !c)
                                dir = strdup("");
                        else
                                dir = strndup(p, (size_t)(c - p) + 1);
                        if (dir)
                                (void)strv_add_unique(&cand, &n_cand, dir);
                }
                if (n_cand == CANDIDATE_MAX)
                        trust_add(out, "git commit too large to check", name, NULL);
                for (size_t k = 0; k < n_cand; k++)
                        if (tree_dir_is_git_dir(work_root, oid, cand[k])) {
                                _cleanup_free_ char *what = NULL;

                                if (asprintf(&what, "%s/%s (in %s)", work_root, cand[k], name) >= 0)
                                        trust_add(out,
                                                  "a commit whose checkout makes a git dir "
                                                  "(git run below it uses its config)",
                                                  what, NULL);
                        }
                strv_free(&cand, &n_cand);
        }
}
