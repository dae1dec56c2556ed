/* What a launch must know of earlier sessions before it plans anything more: the trust
 * reports that wait (the profile's and the work tree's), and the .env names it can pass. */
#include "plan.h"
#include "plan_report.h"
#include "trust.h"

#include "../common/cleanup.h"
#include "../common/error.h"

#include <errno.h>
#include <stdio.h>
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

/* Sessions whose csandbox is gone before their check: a sandboxed launch finishes each
 * (run_trust.c) and starts when it finds nothing; accepting drops them; a host launch, which
 * has no judge's rules of its own, refuses and says which launch checks them; plan says
 * they wait. */
static int plan_unfinished(struct plan *p, const struct plan_request *req,
                           const struct trust_place *places, size_t n, ssize_t profile_place,
                           struct cs_error *err)
{
        _cleanup_free_ char *text = NULL;
        struct trust_unfinished *u = NULL;
        size_t nu = 0, len = 0;
        bool broken = false;
        FILE *f;
        int r = trust_unfinished_list(places, n, profile_place, &u, &nu, err);

        if (r < 0 || nu == 0)
                return r;
        for (size_t i = 0; i < nu; i++)
                broken |= u[i].broken;
        if (!p->host && !broken && req->pending != PLAN_PENDING_SHOW &&
            req->pending != PLAN_PENDING_ACCEPT) {
                p->unfinished = u;
                p->n_unfinished = nu;
                return 0;
        }
        f = open_memstream(&text, &len);
        if (!f) {
                trust_unfinished_free(u, nu);
                return cs_error_set(err, ENOMEM, "the session records");
        }
        for (size_t i = 0; i < nu; i++)
                trust_unfinished_text(u, nu, i, f);
        fclose(f);
        while (len > 0 && text[len - 1] == '\n')
                text[--len] = '\0';
        if (req->pending == PLAN_PENDING_ACCEPT) {
                for (size_t i = 0; i < nu; i++)
                        trust_unfinished_drop(&u[i]);
                r = stage_warn(&p->warnings, err, "Accepted without a check:\n%s", text);
        } else if (req->pending == PLAN_PENDING_SHOW) {
                r = stage_warn(&p->warnings, err,
                               "%s\nNot checked yet: `csandbox run %s` checks what it left "
                               "before it starts.",
                               text, req->name);
        } else {
                stage_warn(&p->warnings, err, "%s", text);
                r = cs_error_setx(err, EPERM,
                                  broken ? "Refusing to start %s for profile %s: an earlier "
                                           "sandboxed session was not checked and its record "
                                           "cannot be read (above). Check the tree and the "
                                           "profile yourself, then start with: csandbox run "
                                           "--accept-changes %s"
                                         : "Refusing to start %s for profile %s until what an "
                                           "earlier sandboxed session left is checked (above): "
                                           "`csandbox run --sandbox %s` checks it and starts if "
                                           "it changed nothing claude or git runs",
                                  p->host ? "claude on the host" : "the sandbox", req->name,
                                  req->name);
        }
        trust_unfinished_free(u, nu);
        return r;
}

/* An earlier session's report waits until the user accepts it: the profile's, and those of
 * the work tree the launch starts in (each directory from the cwd up: a report binds every
 * profile's launch in that tree, and every launch below its root). */
int plan_pending(struct plan *p, const struct plan_request *req, struct cs_error *err)
{
        struct trust_place places[TRUST_PLACES_MAX];
        _cleanup_free_ char *text = NULL, *dir = strdup(req->cwd);
        size_t n = 0;
        ssize_t profile_place;
        bool accepted = false;
        int r;

        if (!dir)
                return cs_error_set(err, ENOMEM, "trust reports");
        r = trust_place_profile(&p->profile, false, &places[n], err);
        if (r > 0)
                n++;
        profile_place = r > 0 ? 0 : -1;
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
                r = plan_unfinished(p, req, places, n, profile_place, err);
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
