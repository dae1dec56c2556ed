/* `run`'s egress policy, from the profile's settings (never from anything the session can
 * write): CLAUDE_PROFILE_SANDBOX_EGRESS and CLAUDE_PROFILE_SANDBOX_ALLOW_HOSTS. */
#include "plan.h"
#include "egress_file.h"

#include "../common/error.h"
#include "../common/strbuf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* Mode and list into s (errors name the setting); the mode's implications come later. */
static int plan_egress_settings(struct sandbox_spec *s, const struct profile_config *c,
                                struct cs_error *err)
{
        if (c->egress && !spec_egress_parse(c->egress, &s->egress))
                return cs_error_setx(err, EINVAL,
                                     "CLAUDE_PROFILE_SANDBOX_EGRESS=%.64s: expected open (the "
                                     "default), allowlist or none",
                                     c->egress);
        if (c->allow_hosts && s->egress != SPEC_EGRESS_ALLOWLIST)
                return cs_error_setx(err, EINVAL,
                                     "CLAUDE_PROFILE_SANDBOX_ALLOW_HOSTS is set but "
                                     "CLAUDE_PROFILE_SANDBOX_EGRESS is not allowlist: set "
                                     "CLAUDE_PROFILE_SANDBOX_EGRESS=allowlist, or unset the list");
        if (c->allow_hosts &&
            spec_egress_add_list(s, c->allow_hosts, "CLAUDE_PROFILE_SANDBOX_ALLOW_HOSTS=", err) < 0)
                return -err->err;
        {
                /* read here rather than with the others: an empty value is unset */
                const char *deny = getenv("CLAUDE_PROFILE_SANDBOX_DENY_HOSTS");

                if (deny && *deny && s->egress != SPEC_EGRESS_ALLOWLIST)
                        return cs_error_setx(err, EINVAL,
                                             "CLAUDE_PROFILE_SANDBOX_DENY_HOSTS is set but "
                                             "CLAUDE_PROFILE_SANDBOX_EGRESS is not allowlist: "
                                             "set CLAUDE_PROFILE_SANDBOX_EGRESS=allowlist, or "
                                             "unset the list");
                if (deny && *deny &&
                    spec_egress_deny_list(s, deny, "CLAUDE_PROFILE_SANDBOX_DENY_HOSTS=", err) < 0)
                        return -err->err;
        }
        {
                const char *file = getenv("CLAUDE_PROFILE_SANDBOX_EGRESS_FILE");

                if (file && *file && s->egress != SPEC_EGRESS_ALLOWLIST)
                        return cs_error_setx(err, EINVAL,
                                             "CLAUDE_PROFILE_SANDBOX_EGRESS_FILE is set but "
                                             "CLAUDE_PROFILE_SANDBOX_EGRESS is not allowlist: "
                                             "set CLAUDE_PROFILE_SANDBOX_EGRESS=allowlist, or "
                                             "unset it");
                if (file && *file &&
                    egress_file_load(s, file, "CLAUDE_PROFILE_SANDBOX_EGRESS_FILE=", err) < 0)
                        return -err->err;
        }
        return 0;
}

int plan_egress_check(const struct profile_config *c, struct cs_error *err)
{
        struct sandbox_spec t;
        int r;

        spec_init(&t);
        r = plan_egress_settings(&t, c, err);
        spec_free(&t);
        return r;
}

int plan_egress_spec(struct sandbox_spec *s, const struct profile_config *c, struct cs_error *err)
{
        if (plan_egress_settings(s, c, err) < 0)
                return -err->err;
        return spec_egress_finish(s, "CLAUDE_PROFILE_SANDBOX_EGRESS=", err);
}

int plan_egress(struct plan *p, const struct profile_config *c, struct cs_error *err)
{
        struct sandbox_spec *s = &p->spec;
        char when[32];
        time_t now = time(NULL);
        struct tm tm;

        if (plan_egress_settings(s, c, err) < 0)
                return -err->err;
        if (s->egress != SPEC_EGRESS_ALLOWLIST)
                return 0;
        if (spec_egress_add_builtin(s, err) < 0)
                return -err->err;
        /* claude's own switches for what the built-in list leaves out: its telemetry and
         * error reports go to multi-tenant intakes (anyone's key is accepted there), so they
         * stay off rather than allowed */
        {
                static const char *const off[] = {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
                                                  "DISABLE_TELEMETRY", "DISABLE_ERROR_REPORTING"};

                for (size_t i = 0; i < sizeof(off) / sizeof(*off); i++)
                        if (spec_env_set(s, off[i], "1", false, err) < 0)
                                return -err->err;
        }
        /* One log per session in the profile's state dir, which the session never sees. */
        gmtime_r(&now, &tm);
        strftime(when, sizeof(when), "%Y%m%dT%H%M%SZ", &tm);
        if (asprintf(&s->egress_log, "%s/egress-%s-%d.log", p->profile.state_dir, when,
                     (int)getpid()) < 0) {
                s->egress_log = NULL;
                return cs_error_set(err, ENOMEM, "the egress log's name");
        }
        return 0;
}

void egress_briefing(const struct sandbox_spec *s, struct strbuf *b)
{
        bool first = true;

        if (s->egress == SPEC_EGRESS_NONE) {
                sb_puts(b, " This session has no network at all (egress none): ask the user "
                           "for anything that needs one.");
                return;
        }
        if (s->egress != SPEC_EGRESS_ALLOWLIST)
                return;
        sb_puts(b, " This session's network reaches only these hosts (HTTPS with the real "
                   "name, or HTTP with a Host header; other protocols, UDP and raw addresses "
                   "are refused): ");
        for (size_t i = 0; i < s->n_egress_hosts; i++) {
                if (s->egress_hosts[i].builtin || s->egress_hosts[i].deny)
                        continue;
                sb_puts(b, first ? "" : ", ");
                sb_puts(b, s->egress_hosts[i].text);
                first = false;
        }
        sb_puts(b, first ? "none but Claude's own service" : ", and Claude's own service");
        sb_puts(b, ". If the work needs another host, ask the user to add it to "
                   "CLAUDE_PROFILE_SANDBOX_ALLOW_HOSTS; do not try to get around the "
                   "restriction.");
}
