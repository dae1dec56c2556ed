/* What a launch must know of earlier sessions before it plans anything more: the trust
 * reports that wait (the profile's and the work tree's), and the .env names it can pass. */
#include "plan.h"
#include "plan_report.h"
#include "trust.h"

#include "../common/cleanup.h"
#include "../common/error.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

bool plan_dotenv_name_ok(struct plan *p, const char *name, struct cs_error *err)
{
        if (spec_env_name_valid(name))
                return true;
        if (!*name)
                stage_warn(&p->warnings, err,
                           "Warning: %s/.env has a line `=...` with no name before the `=`; it is "
                           "skipped.",
                           p->profile.dir);
        else
                stage_warn(&p->warnings, err,
                           "Warning: %s/.env sets `%s`, which is not a valid variable name; it is "
                           "skipped.",
                           p->profile.dir, name);
        return false;
}

/* An earlier session's report waits until the user accepts it: the profile's, and those of
 * the work tree the launch starts in (each directory from the cwd up: a report binds every
 * profile's launch in that tree, and every launch below its root). */
int plan_pending(struct plan *p, const struct plan_request *req, struct cs_error *err)
{
        struct trust_place places[TRUST_PLACES_MAX];
        _cleanup_free_ char *text = NULL, *dir = strdup(req->cwd);
        size_t n = 0;
        bool accepted = false;
        int r;

        if (!dir)
                return cs_error_set(err, ENOMEM, "trust reports");
        r = trust_place_profile(&p->profile, false, &places[n], err);
        if (r > 0)
                n++;
        while (r >= 0 && n < TRUST_PLACES_MAX) {
                char *slash;

                r = trust_place_tree(req->config->data_home, dir, false, &places[n], err);
                if (r > 0)
                        n++;
                slash = strrchr(dir, '/');
                if (!slash || slash == dir) {
                        if (strcmp(dir, "/") == 0)
                                break;
                        strcpy(dir, "/");
                        continue;
                }
                *slash = '\0';
        }
        if (r >= 0)
                r = trust_pending_take(places, n, req->pending == PLAN_PENDING_ACCEPT,
                                       req->pending == PLAN_PENDING_REFUSE ? req->confirm : NULL,
                                       req->confirm_ctx, &text, &accepted, err);
        for (size_t i = 0; i < n; i++)
                trust_place_close(&places[i]);
        if (r < 0 || !text)
                return r;
        if (accepted) {
                r = plan_claude_json_accept(p, err);
                if (r < 0)
                        return r;
                return stage_warn(&p->warnings, err, "Accepted:\n%s", text);
        }
        if (req->pending == PLAN_PENDING_SHOW)
                return stage_warn(&p->warnings, err,
                                  "%s\nNot accepted yet: `csandbox run %s` refuses to start until "
                                  "`csandbox run --accept-changes %s`.",
                                  text, req->name, req->name);
        if (!req->confirm)
                stage_warn(&p->warnings, err, "%s", text);
        return cs_error_setx(err, EPERM,
                             "Refusing to start %s for profile %s: an earlier "
                             "sandboxed session changed what claude or git runs on the host "
                             "(listed above). Check each of them (a nested repository's config "
                             "or a hook runs commands in any git or claude on the host), then "
                             "accept them and start with: csandbox run --accept-changes %s",
                             p->host ? "claude on the host" : "the sandbox", req->name, req->name);
}
