/* What claude's .claude.json makes the host run (reference §6.4), read so that no other
 * parser can read it otherwise. */
#include "plan.h"
#include "plan_report.h"

#include "trust.h"

#include "../common/cleanup.h"
#include "../common/strv.h"
#include "../common/error.h"
#include "../common/fileio.h"
#include "../common/path.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CLAUDE_JSON_MAX (32u << 20)
#define TRUST_FILE_MAX  (1u << 20)

static int name_cmp(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Whether an object anywhere in j has a name twice: cJSON keeps the first, JSON.parse the
 * last, so the two would read different servers. */
static bool has_duplicates(const cJSON *j)
{
        const cJSON *e;
        size_t n = 0, i = 0;
        bool dup = false;

        cJSON_ArrayForEach(e, j)
        {
                n++;
                if (has_duplicates(e))
                        return true;
        }
        if (!cJSON_IsObject(j) || n < 2)
                return false;
        {
                _cleanup_free_ const char **names = calloc(n, sizeof(*names));

                if (!names)
                        return true;
                cJSON_ArrayForEach(e, j) names[i++] = e->string ? e->string : "";
                qsort(names, n, sizeof(*names), name_cmp);
                for (i = 1; i < n && !dup; i++)
                        dup = strcmp(names[i - 1], names[i]) == 0;
        }
        return dup;
}

static void trust_servers(struct plan_trust *t, const char *scope, const cJSON *servers)
{
        const cJSON *e;

        if (!cJSON_IsObject(servers))
                return;
        cJSON_ArrayForEach(e, servers)
        {
                char kind[PATH_MAX + 32];

                snprintf(kind, sizeof(kind), "MCP server (%s)", scope);
                trust_add(t, kind, e->string, e);
        }
}

static void trust_strings(struct plan_trust *t, const char *kind, const char *scope,
                          const cJSON *list)
{
        const cJSON *x;

        cJSON_ArrayForEach(x, list)
        {
                if (cJSON_IsString(x)) {
                        char k[PATH_MAX + 64];

                        snprintf(k, sizeof(k), "%s (%s)", kind, scope);
                        trust_add(t, k, x->valuestring, NULL);
                }
        }
}

static void trust_scope(struct plan_trust *t, const char *scope, const cJSON *o)
{
        trust_servers(t, scope, cJSON_GetObjectItemCaseSensitive(o, "mcpServers"));
        trust_strings(t, "approved .mcp.json server", scope,
                      cJSON_GetObjectItemCaseSensitive(o, "enabledMcpjsonServers"));
        trust_strings(t, "tool allowed without asking", scope,
                      cJSON_GetObjectItemCaseSensitive(o, "allowedTools"));
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "enableAllProjectMcpServers")))
                trust_add(t, "all .mcp.json servers approved", scope, NULL);
}

int plan_trust_claude_json(struct plan_trust *t, const char *raw, size_t len, char **ret_why)
{
        const char *end = NULL;
        cJSON *j, *e;

        *ret_why = NULL;
        /* A \u0000 ends a name for cJSON, not for JSON.parse. */
        if (memmem(raw, len, "\\u0000", 6)) {
                *ret_why = strdup("a \\u0000 escape, which two parsers read differently");
                return -EINVAL;
        }
        j = cJSON_ParseWithLengthOpts(raw, len, &end, false);
        while (j && end && end < raw + len && isspace((unsigned char)*end))
                end++;
        if (!cJSON_IsObject(j) || (end && end < raw + len && *end)) {
                cJSON_Delete(j);
                *ret_why = strdup("not one JSON object csandbox's parser reads whole (nesting "
                                  "deeper than 1000, trailing bytes, or invalid JSON)");
                return -EINVAL;
        }
        if (has_duplicates(j)) {
                cJSON_Delete(j);
                *ret_why = strdup("a key given twice in one object, which two parsers read "
                                  "differently");
                return -EINVAL;
        }
        trust_scope(t, "user", j);
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(j, "projects"))
        {
                if (e->string)
                        trust_scope(t, e->string, e);
        }
        cJSON_Delete(j);
        return 0;
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
        if (cs_read_file_at(p->profile.dir_fd, ".claude.json", CLAUDE_JSON_MAX, true, &raw, &len,
                            &ignored) == 0)
                (void)plan_trust_claude_json(&ret->claude_before, raw, len, &why);
        return 0;
oom:
        trust_rules_free(ret);
        return cs_error_set(err, ENOMEM, "the trust rules");
}
