/* What claude's .claude.json makes the host run (reference §6.4), read so that no other
 * parser can read it otherwise. */
#include "plan.h"
#include "plan_report.h"
#include "claude_json.h"

#include "trust.h"

#include "../common/cleanup.h"
#include "../common/strv.h"
#include "../common/error.h"
#include "../common/fileio.h"
#include "../common/path.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CLAUDE_JSON_MAX (32u << 20)

/* ---- the session's own copy, and what is written back ---- */

/* The keys of a scope (the top level, a project) that an earlier csandbox held back from the
 * session's copy (its proposals are that whole copy). */
static const char *const trust_keys[] = {"mcpServers", "enabledMcpjsonServers", "allowedTools",
                                         "enableAllProjectMcpServers"};

/* In dst's scope, the trust keys become src's (removed where src has none). */
static void scope_take(cJSON *dst, const cJSON *src)
{
        for (size_t i = 0; i < sizeof(trust_keys) / sizeof(trust_keys[0]); i++) {
                const cJSON *v = src ? cJSON_GetObjectItemCaseSensitive(src, trust_keys[i]) : NULL;

                cJSON_DeleteItemFromObjectCaseSensitive(dst, trust_keys[i]);
                if (v)
                        cJSON_AddItemToObject(dst, trust_keys[i], cJSON_Duplicate(v, true));
        }
}

/* dst's trust keys, at every scope, become src's: an earlier csandbox's proposal accepted. */
static void trust_take(cJSON *dst, const cJSON *src)
{
        const cJSON *sp = cJSON_GetObjectItemCaseSensitive(src, "projects"), *e;
        cJSON *dp = cJSON_GetObjectItemCaseSensitive(dst, "projects"), *d;

        scope_take(dst, src);
        cJSON_ArrayForEach(d, dp)
        {
                if (cJSON_IsObject(d) && d->string)
                        scope_take(d, cJSON_GetObjectItemCaseSensitive(sp, d->string));
        }
        /* A project only src has, with trust keys: its entry comes back with them. */
        cJSON_ArrayForEach(e, sp)
        {
                cJSON *n;

                if (!e->string || !cJSON_IsObject(e) ||
                    cJSON_GetObjectItemCaseSensitive(dp, e->string))
                        continue;
                if (!dp && !(dp = cJSON_AddObjectToObject(dst, "projects")))
                        return;
                n = cJSON_AddObjectToObject(dp, e->string);
                if (n)
                        scope_take(n, e);
        }
}

#define COPY_PREFIX   "claude-json."
#define PROPOSALS_DIR "trust-proposals"
/* {"host": the host's file, "session": the session's copy}; other names are whole copies. */
#define PROPOSAL_SUFFIX ".proposal.json"

int plan_claude_json_stage(struct plan *p, struct cs_error *err)
{
        _cleanup_free_ char *raw = NULL, *why = NULL, *text = NULL;
        /* Dropped: what cannot be read whole stays the host's file, judged by the journal. */
        struct cs_error ignored;
        struct stat st;
        size_t len;
        cJSON *j;
        int r;

        if (fstatat(p->profile.dir_fd, ".claude.json", &st, AT_SYMLINK_NOFOLLOW) < 0) {
                if (errno != ENOENT)
                        return 0;
                /* A mountpoint for the copy, as claude would make it on its first start. */
                r = cs_write_file_once(p->profile.dir_fd, ".claude.json", "{}\n", 3, 0600,
                                       &ignored);
                if (r < 0 && ignored.err != EEXIST)
                        return 0;
        }
        if (cs_read_file_at(p->profile.dir_fd, ".claude.json", CLAUDE_JSON_MAX, true, &raw, &len,
                            &ignored) < 0)
                return 0;
        j = claude_json_parse(raw, len, &why);
        if (!j)
                return 0;
        text = cJSON_Print(j);
        cJSON_Delete(j);
        if (!text || asprintf(&p->claude_copy, COPY_PREFIX "%d", (int)getpid()) < 0)
                return cs_error_set(err, ENOMEM, "stage .claude.json");
        r = cs_write_file_atomic(p->profile.state_fd, p->claude_copy, text, strlen(text), 0600,
                                 err);
        if (r >= 0) {
                _cleanup_free_ char *src = cs_path_join(p->profile.state_dir, p->claude_copy);

                r = src ? plan_bind_at(&p->spec, p->profile.state_fd, p->profile.state_dir, src,
                                       PLAN_CONFIG "/.claude.json", 0, err)
                        : cs_error_set(err, ENOMEM, "stage .claude.json");
        }
        if (r < 0) {
                free(p->claude_copy);
                p->claude_copy = NULL;
        }
        return r;
}

static int write_claude_json(int dirfd, const cJSON *j, struct cs_error *err)
{
        _cleanup_free_ char *text = cJSON_Print(j);

        if (!text)
                return cs_error_set(err, ENOMEM, "write .claude.json");
        return cs_write_file_atomic(dirfd, ".claude.json", text, strlen(text), 0600, err);
}

cJSON *plan_claude_json_read(int dirfd, const char *name, char **ret_why)
{
        _cleanup_free_ char *raw = NULL;
        struct cs_error e;
        size_t len;

        *ret_why = NULL;
        if (cs_read_file_at(dirfd, name, CLAUDE_JSON_MAX, true, &raw, &len, &e) < 0) {
                *ret_why = strdup(e.msg);
                return NULL;
        }
        return claude_json_parse(raw, len, ret_why);
}

/* What the session asked for waits for the user's yes, with the host's file it was judged
 * against: the accept takes exactly what the report showed. */
static void propose(struct plan *p, const cJSON *host, const cJSON *session)
{
        _cleanup_free_ char *text = NULL, *name = NULL;
        _cleanup_close_ int dfd = -1;
        struct cs_error err = {0};
        struct timespec now;
        cJSON *both = cJSON_CreateObject();

        if (both && (!cJSON_AddItemToObject(
                         both, "host", host ? cJSON_Duplicate(host, true) : cJSON_CreateObject()) ||
                     !cJSON_AddItemToObject(both, "session", cJSON_Duplicate(session, true))))
                goto out;
        text = both ? cJSON_PrintUnformatted(both) : NULL;
        clock_gettime(CLOCK_REALTIME, &now);
        if (mkdirat(p->profile.state_fd, PROPOSALS_DIR, 0700) < 0 && errno != EEXIST)
                goto out;
        dfd = openat(p->profile.state_fd, PROPOSALS_DIR,
                     O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd >= 0 && text &&
            asprintf(&name, "%lld.%09ld-%d" PROPOSAL_SUFFIX, (long long)now.tv_sec, now.tv_nsec,
                     (int)getpid()) >= 0 &&
            cs_write_file_once(dfd, name, text, strlen(text), 0600, &err) >= 0) {
                cJSON_Delete(both);
                return;
        }
out:
        cJSON_Delete(both);
        fprintf(stderr, "csandbox: warning: cannot keep the session's changes to claude's "
                        "config for later\n");
}

void plan_claude_json_writeback(struct plan *p, struct plan_trust *found)
{
        _cleanup_free_ char *why = NULL, *hwhy = NULL, *path = NULL;
        struct cs_error err = {0};
        struct plan_trust before = {0}, after = {0};
        cJSON *session, *host, *out;
        size_t fresh = 0;

        if (!p->claude_copy)
                return;
        if (asprintf(&path, "%s/.claude.json", p->profile.dir) < 0)
                return;
        session = plan_claude_json_read(p->profile.state_fd, p->claude_copy, &why);
        if (!session) {
                /* Kept out of the host's file, and kept for the user to look at. */
                {
                        char *item = NULL;

                        if (asprintf(&item,
                                     "claude's config read differently by two parsers\t%s\tthe "
                                     "session's copy is kept out of it: %s; it is in %s/%s",
                                     path, why ? why : "unreadable", p->profile.state_dir,
                                     p->claude_copy) >= 0)
                                (void)strv_push(&found->items, &found->n, item);
                }
                free(p->claude_copy);
                p->claude_copy = NULL;
                return;
        }
        /* The host's file now (another launch may have written it since), else as staged. */
        host = plan_claude_json_read(p->profile.dir_fd, ".claude.json", &hwhy);
        if (host)
                claude_json_items(&before, host);
        claude_json_items(&after, session);
        for (size_t i = 0; i < after.n; i++) {
                char *item = NULL, *name, *value;
                _cleanup_free_ char *copy = NULL;

                if (strv_has(before.items, before.n, after.items[i]) ||
                    !(copy = strdup(after.items[i])))
                        continue;
                name = strchr(copy, '\t');
                *name++ = '\0';
                value = strchr(name, '\t');
                *value++ = '\0';
                if (asprintf(&item, "%s in %s\t%s\t%s", copy, path, name, value) >= 0)
                        (void)strv_push(&found->items, &found->n, item);
                fresh++;
        }
        /* Only claude's own state is the session's to write: every other key keeps the
         * host's value, and the session's change to it is one item. */
        {
                size_t had = found->n;

                out = claude_json_writeback(host, session, found, path);
                fresh += found->n - had;
        }
        if (fresh)
                propose(p, host, session);
        if (out && (host || !hwhy))
                (void)write_claude_json(p->profile.dir_fd, out, &err);
        (void)unlinkat(p->profile.state_fd, p->claude_copy, 0);
        free(p->claude_copy);
        p->claude_copy = NULL;
        cJSON_Delete(out);
        cJSON_Delete(session);
        cJSON_Delete(host);
        trust_free(&before);
        trust_free(&after);
}

/* The user accepted proposal name: into the host's file. */
static int accept_one(struct plan *p, int dfd, const char *name, struct cs_error *err)
{
        _cleanup_free_ char *why = NULL, *hwhy = NULL;
        cJSON *prop = plan_claude_json_read(dfd, name, &why);
        cJSON *host = plan_claude_json_read(p->profile.dir_fd, ".claude.json", &hwhy);
        size_t n = strlen(name), k = strlen(PROPOSAL_SUFFIX);
        int r = 0;

        if (prop && !host)
                host = cJSON_CreateObject();
        if (prop && host) {
                if (n > k && strcmp(name + n - k, PROPOSAL_SUFFIX) == 0) {
                        const cJSON *base = cJSON_GetObjectItemCaseSensitive(prop, "host");
                        const cJSON *session = cJSON_GetObjectItemCaseSensitive(prop, "session");

                        if (cJSON_IsObject(base) && cJSON_IsObject(session) &&
                            claude_json_accept(host, base, session) < 0)
                                r = cs_error_set(err, ENOMEM, "accept");
                } else {
                        /* Kept by an earlier csandbox: the session's whole copy, of which
                         * only these keys were held back. */
                        trust_take(host, prop);
                }
                if (r >= 0)
                        r = write_claude_json(p->profile.dir_fd, host, err);
        }
        cJSON_Delete(prop);
        cJSON_Delete(host);
        return r;
}

int plan_claude_json_accept(struct plan *p, struct cs_error *err)
{
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        char **names = NULL;
        size_t n = 0;
        int fd, r = 0;

        if (p->profile.state_fd < 0)
                return 0;
        fd = openat(p->profile.state_fd, PROPOSALS_DIR,
                    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        d = fd >= 0 ? fdopendir(fd) : NULL;
        if (!d) {
                if (fd >= 0)
                        close(fd);
                return 0;
        }
        while ((de = readdir(d)))
                if (de->d_name[0] != '.' && strv_push_dup(&names, &n, de->d_name) < 0)
                        return cs_error_set(err, ENOMEM, "accept");
        if (n)
                qsort(names, n, sizeof(char *), claude_json_name_cmp);
        for (size_t i = 0; i < n && r >= 0; i++) {
                r = accept_one(p, dirfd(d), names[i], err);
                if (r >= 0)
                        (void)unlinkat(dirfd(d), names[i], 0);
        }
        strv_free(&names, &n);
        return r;
}

int plan_trust_rules(const struct plan *p, const struct profile_config *c, struct trust_rules *ret,
                     struct cs_error *err)
{
        const struct trust_watch *w = &p->watch;
        _cleanup_free_ char *raw = NULL, *why = NULL;
        _cleanup_close_ int gd = -1;
        /* Dropped: no readable .claude.json: it made the host run nothing. */
        struct cs_error ignored;
        struct stat st;
        size_t len;

        memset(ret, 0, sizeof(*ret));
        ret->root_path[TRUST_ROOT_PROFILE] = strdup(p->profile.dir);
        ret->home = strdup(c->home);
        if (w->work_root)
                ret->root_path[TRUST_ROOT_WORK] = strdup(w->work_root);
        if (w->git_dir && !w->git_inside)
                ret->root_path[TRUST_ROOT_COMMON] = strdup(w->git_dir);
        ret->plugins_enabled = w->plugins_enabled;
        for (size_t i = 0; i < w->n_profile_files; i++)
                if (strv_push_dup(&ret->named[TRUST_ROOT_PROFILE],
                                  &ret->n_named[TRUST_ROOT_PROFILE], w->profile_files[i]) < 0)
                        goto oom;
        for (size_t i = 0; i < w->n_profile_configs; i++)
                if (strv_push_dup(&ret->configs[TRUST_ROOT_PROFILE],
                                  &ret->n_configs[TRUST_ROOT_PROFILE], w->profile_configs[i]) < 0)
                        goto oom;
        for (size_t i = 0; i < w->n_tree_configs; i++)
                if (strv_push_dup(&ret->configs[TRUST_ROOT_WORK], &ret->n_configs[TRUST_ROOT_WORK],
                                  w->tree_configs[i]) < 0)
                        goto oom;
        for (size_t i = 0; i < w->n_tree_files; i++)
                if (strv_push_dup(&ret->named[TRUST_ROOT_WORK], &ret->n_named[TRUST_ROOT_WORK],
                                  w->tree_files[i]) < 0)
                        goto oom;
        if (!ret->root_path[TRUST_ROOT_PROFILE] || !ret->home)
                goto oom;
        if (w->git_dir) {
                gd = open(w->git_dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (gd >= 0 && fstat(gd, &st) == 0) {
                        ret->main_dev = (unsigned long long)st.st_dev;
                        ret->main_ino = (unsigned long long)st.st_ino;
                }
        }
        if (w->work_root && stat(w->work_root, &st) == 0) {
                ret->work_dev = (unsigned long long)st.st_dev;
                ret->work_ino = (unsigned long long)st.st_ino;
        }
        if (p->profile.state_fd >= 0 && fstat(p->profile.state_fd, &st) == 0) {
                ret->state_dev = (unsigned long long)st.st_dev;
                ret->state_ino = (unsigned long long)st.st_ino;
        }
        /* With a copy of its own, the session cannot write the host's file: only without
         * one does the journal judge it, against what it held at the start. */
        ret->claude_json_copied = p->claude_copy != NULL;
        if (!ret->claude_json_copied &&
            cs_read_file_at(p->profile.dir_fd, ".claude.json", CLAUDE_JSON_MAX, true, &raw, &len,
                            &ignored) == 0)
                (void)plan_trust_claude_json(&ret->claude_before, raw, len, &why);
        return 0;
oom:
        trust_rules_free(ret);
        return cs_error_set(err, ENOMEM, "the trust rules");
}
