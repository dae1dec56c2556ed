/* The after-session trust report (reference §6.4): what in the profile and the work tree
 * makes the host run something, recorded before the launch and compared after it. */
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

/* A file the host runs or follows: recorded with its content (bounded; a link as its target,
 * a directory as such), so a changed one counts too. dir/name, or path alone. */
static void trust_add_file(struct plan_trust *t, const char *kind, const char *dir,
                           const char *name)
{
        _cleanup_free_ char *path = NULL, *buf = NULL;
        /* Dropped: unreadable: recorded as its bare entry, which still shows a change. */
        struct cs_error ignored;
        struct stat st;
        char target[PATH_MAX];
        ssize_t n;

        if (name ? !(path = cs_path_join(dir, name)) : !(path = strdup(dir)))
                return;
        if (lstat(path, &st) < 0)
                return;
        if (S_ISLNK(st.st_mode) && (n = readlink(path, target, sizeof(target) - 1)) >= 0) {
                target[n] = '\0';
                cJSON *v = cJSON_CreateString(target);
                trust_add(t, kind, path, v);
                cJSON_Delete(v);
                return;
        }
        if (S_ISREG(st.st_mode) &&
            cs_read_file_at(AT_FDCWD, path, TRUST_FILE_MAX, true, &buf, NULL, &ignored) == 0) {
                cJSON *v = cJSON_CreateString(buf);
                trust_add(t, kind, path, v);
                cJSON_Delete(v);
                return;
        }
        trust_add(t, kind, path, NULL);
}

int plan_track_git_dir(struct plan *p, const char *git_dir)
{
        int r = strv_push_dup(&p->git_dirs, &p->n_git_dirs, git_dir);

        if (r < 0)
                return r;
        return 0;
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

void plan_trust_claude_json(struct plan_trust *t, const char *raw, size_t len)
{
        cJSON *j = cJSON_ParseWithLength(raw, len), *e, *projects;

        if (cJSON_IsObject(j)) {
                trust_servers(t, "user", cJSON_GetObjectItemCaseSensitive(j, "mcpServers"));
                projects = cJSON_GetObjectItemCaseSensitive(j, "projects");
                if (cJSON_IsObject(projects))
                        cJSON_ArrayForEach(e, projects)
                        {
                                const cJSON *en;

                                trust_servers(t, e->string,
                                              cJSON_GetObjectItemCaseSensitive(e, "mcpServers"));
                                en = cJSON_GetObjectItemCaseSensitive(e, "enabledMcpjsonServers");
                                if (cJSON_IsArray(en)) {
                                        const cJSON *x;

                                        cJSON_ArrayForEach(x, en) if (cJSON_IsString(x)) trust_add(
                                            t, "approved .mcp.json server", x->valuestring, NULL);
                                }
                                if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
                                        e, "enableAllProjectMcpServers")))
                                        trust_add(t, "all .mcp.json servers approved for",
                                                  e->string, NULL);
                        }
                e = cJSON_GetObjectItemCaseSensitive(j, "enabledMcpjsonServers");
                if (cJSON_IsArray(e)) {
                        const cJSON *x;

                        cJSON_ArrayForEach(x, e) if (cJSON_IsString(x))
                            trust_add(t, "approved .mcp.json server", x->valuestring, NULL);
                }
                if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "enableAllProjectMcpServers")))
                        trust_add(t, "all .mcp.json servers approved", "", NULL);
        }
        cJSON_Delete(j);
}

/* §6.4: what in the profile and the work tree makes the host run something. */
void plan_trust_snapshot(struct plan *p, struct plan_trust *t)
{
        _cleanup_free_ char *raw = NULL;
        /* Dropped: no readable .claude.json: nothing to compare, as for a new profile. */
        struct cs_error ignored;
        size_t len;

        memset(t, 0, sizeof(*t));
        if (cs_read_file_at(p->profile.dir_fd, ".claude.json", CLAUDE_JSON_MAX, true, &raw, &len,
                            &ignored) == 0)
                plan_trust_claude_json(t, raw, len);
        for (size_t i = 0; i < p->n_local_settings; i++)
                if (p->local_settings[i])
                        trust_add_file(t, "settings.local.json", p->local_settings[i], NULL);
        /* What makes the host's git take another git dir (and so another config and hooks). */
        for (size_t i = 0; i < p->n_git_dirs; i++)
                trust_add_file(t, "git commondir in", p->git_dirs[i], "commondir");
        if (p->work_root) {
                _cleanup_free_ char *dotgit = NULL;

                if ((dotgit = cs_path_join(p->work_root, ".git")))
                        trust_add_file(t, "git dir link", dotgit, NULL);
        }
        trust_snapshot_watch(t, &p->profile, &p->watch);
}

static void neutralise(char *s)
{
        for (; *s; s++)
                if (!isprint((unsigned char)*s))
                        *s = '?';
}

char *plan_trust_report(struct plan *p)
{
        struct plan_trust after;
        char *out = NULL;
        size_t len = 0;
        FILE *f;

        plan_trust_snapshot(p, &after);
        f = open_memstream(&out, &len);
        if (!f) {
                trust_free(&after);
                return NULL;
        }
        for (size_t i = 0; i < after.n; i++) {
                bool seen = false;
                char *kind, *name, *tab;

                for (size_t k = 0; k < p->trust_before.n && !seen; k++)
                        seen = strcmp(after.items[i], p->trust_before.items[k]) == 0;
                if (seen)
                        continue;
                kind = after.items[i];
                tab = strchr(kind, '\t');
                *tab = '\0';
                name = tab + 1;
                tab = strchr(name, '\t');
                *tab = '\0';
                neutralise(kind);
                neutralise(name);
                fprintf(f, "  %s: %s\n", kind, name);
        }
        fclose(f);
        trust_free(&after);
        if (len == 0) {
                free(out);
                return NULL;
        }
        char *msg = NULL;
        if (asprintf(&msg,
                     "Warning: the sandboxed session added or changed what claude runs on the "
                     "host:\n%sThe MCP entries are in %s/.claude.json. Check these before "
                     "running claude or git on the host with this profile or in this project.",
                     out, p->profile.dir) < 0)
                msg = NULL;
        free(out);
        return msg;
}
