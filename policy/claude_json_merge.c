/* What of a session's .claude.json the host takes: only the keys claude 2.1.332 keeps as its
 * own state (counters, caches, notices seen, a project's last-session figures). Any other
 * key, known or not, can change what the host's claude runs or where it sends data (env,
 * apiKeyHelper, customApiKeyResponses, oauthAccount, MCP servers...): it keeps the host's
 * value until the user accepts the session's. */
#include "claude_json.h"

#include "../common/cleanup.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Top-level keys claude writes as its own bookkeeping, from its skip-safe sets and its first
 * starts; none names a command, a host, a key, an approval or what data is sent. Not here:
 * a prompt answered (customApiKeyResponses, bypassPermissionsModeAccepted, the auto mode's
 * warnings), the account, the updater's and IDE's settings, telemetry and training consent
 * caches. The official marketplace's retry bookkeeping is here: its source is claude's own,
 * these only time the next try. */
static const char *const state_user[] = {
    "additionalModelCostsCache",
    "additionalModelOptionsAnsweredAt",
    "additionalModelOptionsCache",
    "agentLastUsedMigrationDone",
    "announcementImpressions",
    "apiCreditLinkStatusCache",
    "autoCompactWindowsCache",
    "autoScrollEnabled",
    "briefTranscript",
    "btwUseCount",
    "cachedArtifactRoster",
    "cachedChangelog",
    "cachedDynamicConfigs",
    "cachedExperimentData",
    "cachedExperimentFeatures",
    "cachedExtraUsageDisabledReason",
    "cachedFeatureFlags",
    "cachedFeatureFlagsAt",
    "cachedGrowthBookFeatures",
    "cachedGrowthBookFeaturesAt",
    "cachedStatsigGates",
    "cachedUsageUtilization",
    "changelogLastFetched",
    "claudeCodeFirstTokenDate",
    "clientDataCacheSlots",
    "closedIssuesLastChecked",
    "diffSidebarOpen",
    "editorMode",
    "experimentNoticesSeenCount",
    "fable51OrgPickMoveDone",
    "fable51OrgPickMoveWaitingSince",
    "feedbackRefusedByServer",
    "firstStartTime",
    "firstStartVersion",
    "firstWeek",
    "fullscreenUpsellSeenCount",
    "gzipRequestBodiesLatchedOff",
    "hasCompletedOnboarding",
    "hasResetAutoModeOptInForDefaultOffer",
    "hasSeenAutoDefaultNotice",
    "hasSeenTasksHint",
    "hasUsedBackgroundTask",
    "hasUsedBackslashReturn",
    "hasUsedStash",
    "hostBootstrapSeed",
    "lastOnboardingVersion",
    "lastReleaseNotesSeen",
    "lastShownEmergencyTip",
    "legacyOpusMigrationTimestamp",
    "lspRecommendationIgnoredCount",
    "machineID",
    "memoryUsageCount",
    "migrationVersion",
    "modelAccessCache",
    "numStartups",
    "officialMarketplaceAutoInstallAttempted",
    "officialMarketplaceAutoInstallFailReason",
    "officialMarketplaceAutoInstallLastAttemptTime",
    "officialMarketplaceAutoInstallNextRetryTime",
    "officialMarketplaceAutoInstallRetryCount",
    "officialMarketplaceAutoInstalled",
    "opusProMigrationComplete",
    "opusProMigrationTimestamp",
    "orgModelDefaultCache",
    "passesEligibilityCache",
    "passesUpsellSeenCount",
    "penguinModeOrgEnabled",
    "pluginUsage",
    "powerShellCommandLostAt",
    "promptQueueUseCount",
    "promptSuggestionUnusedStreak",
    "queuedCommandUpHintCount",
    "savedModelSuccessorShown",
    "seenNotifications",
    "showExpandedTodos",
    "showMessageTimestamps",
    "showTurnDuration",
    "skillUsage",
    "startupPrefetchedAt",
    "subagentConfigChecks",
    "subagentConfigClassifierCalls",
    "subagentConfigWarningShown",
    "subscriptionNoticeCount",
    "subscriptionUpsellShownCount",
    "terminalProgressBarEnabled",
    "theme",
    "tipLifetimeShownCounts",
    "tipsHistory",
    "tipsHistoryByCommand",
    "unusedLimitResetStatusCache",
    "userID",
    "verbose",
    "voiceFooterHintSeenCount",
    "voiceLangHintShownCount",
};

/* A project's keys claude itself counts as skip-safe (its last session's figures, history,
 * onboarding), and the folder-trust answer (doc/host-trust.md: not protected). */
static const char *const state_project[] = {
    "devIntentsDetected",
    "exampleFiles",
    "exampleFilesGeneratedAt",
    "hasClaudeMdExternalIncludesWarningShown",
    "hasCompletedProjectOnboarding",
    "hasTrustDialogAccepted",
    "history",
    "lastAPIDuration",
    "lastAPIDurationWithoutRetries",
    "lastCost",
    "lastDuration",
    "lastFpsAverage",
    "lastFpsLow1Pct",
    "lastGracefulShutdown",
    "lastLinesAdded",
    "lastLinesRemoved",
    "lastModelUsage",
    "lastSessionId",
    "lastSessionMetrics",
    "lastStartTime",
    "lastToolDuration",
    "lastTotalCacheCreationInputTokens",
    "lastTotalCacheReadInputTokens",
    "lastTotalInputTokens",
    "lastTotalOutputTokens",
    "lastTotalWebSearchRequests",
    "lastVersionBase",
    "projectOnboardingSeenCount",
};

/* What claude reads for a key it does not find (its default objects): a session that writes
 * the default has changed nothing. */
static const char default_user[] =
    "{\"installMethod\":null,\"autoUpdates\":null,\"preferredNotifChannel\":\"auto\","
    "\"autoCompactEnabled\":true,\"externalEditorContext\":false,\"diffTool\":\"auto\","
    "\"customApiKeyResponses\":{\"approved\":[],\"rejected\":[]},\"env\":{},"
    "\"todoFeatureEnabled\":true,\"messageIdleNotifThresholdMs\":60000,"
    "\"autoConnectIde\":false,\"autoInstallIdeExtension\":true,"
    "\"fileCheckpointingEnabled\":true,\"respectGitignore\":true,\"copyFullResponse\":false}";
static const char default_project[] =
    "{\"allowedTools\":[],\"mcpContextUris\":[],\"mcpServers\":{},"
    "\"enabledMcpjsonServers\":[],\"disabledMcpjsonServers\":[],"
    "\"hasClaudeMdExternalIncludesApproved\":false}";

bool claude_json_state_key(bool project, const char *name)
{
        const char *const *set = project ? state_project : state_user;
        size_t n = project ? sizeof(state_project) / sizeof(state_project[0])
                           : sizeof(state_user) / sizeof(state_user[0]);

        for (size_t i = 0; name && i < n; i++)
                if (strcmp(name, set[i]) == 0)
                        return true;
        return false;
}

/* Reported item by item (each server, each tool) by claude_json_items. */
static bool trust_key(const char *name)
{
        return strcmp(name, "mcpServers") == 0 || strcmp(name, "enabledMcpjsonServers") == 0 ||
               strcmp(name, "allowedTools") == 0 || strcmp(name, "enableAllProjectMcpServers") == 0;
}

struct merge {
        const cJSON *defaults[2];
        struct plan_trust *changes;
        const char *path;
};

/* Whether claude reads the same for name in a as in b (a missing key is its default). */
static bool same(const struct merge *m, bool project, const char *name, const cJSON *a,
                 const cJSON *b)
{
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(m->defaults[project], name);

        a = a ? a : d;
        b = b ? b : d;
        if (!a || !b)
                return a == b;
        return cJSON_Compare(a, b, true);
}

/* In dst, name becomes v (removed when v is NULL), in its place when it was there. */
static void set_key(cJSON *dst, const char *name, const cJSON *v)
{
        cJSON *dup;

        if (!v) {
                cJSON_DeleteItemFromObjectCaseSensitive(dst, name);
                return;
        }
        if (!(dup = cJSON_Duplicate(v, true)))
                return;
        if (cJSON_GetObjectItemCaseSensitive(dst, name))
                cJSON_ReplaceItemInObjectCaseSensitive(dst, name, dup);
        else
                cJSON_AddItemToObject(dst, name, dup);
}

static void report(struct merge *m, const char *scope, const char *name, const cJSON *v)
{
        char kind[PATH_MAX + 64];

        if (!m->changes)
                return;
        if (m->path)
                snprintf(kind, sizeof(kind), "claude setting (%s) in %s", scope, m->path);
        else
                snprintf(kind, sizeof(kind), "claude setting (%s)", scope);
        if (v)
                trust_add(m->changes, kind, name, v);
        else {
                cJSON *gone = cJSON_CreateString("(removed)");

                trust_add(m->changes, kind, name, gone);
                cJSON_Delete(gone);
        }
}

/* One scope (the top level without its projects, or one project): with changes (the
 * write-back), dst is the host's and takes b's state keys, and each other key where b
 * differs from a is reported; without (the accept), dst takes b's value for each other key
 * where b differs from a. */
static void merge_scope(struct merge *m, cJSON *dst, const cJSON *a, const cJSON *b, bool project,
                        const char *scope)
{
        const cJSON *e;

        for (int side = 0; side < 2; side++) {
                const cJSON *from = side ? a : b, *other = side ? b : a;

                cJSON_ArrayForEach(e, from)
                {
                        const cJSON *av, *bv;

                        if (!e->string || (!project && strcmp(e->string, "projects") == 0))
                                continue;
                        /* A key both have: seen from b's side. */
                        if (side && cJSON_GetObjectItemCaseSensitive(other, e->string))
                                continue;
                        av = cJSON_GetObjectItemCaseSensitive(a, e->string);
                        bv = cJSON_GetObjectItemCaseSensitive(b, e->string);
                        if (claude_json_state_key(project, e->string)) {
                                if (m->changes)
                                        set_key(dst, e->string, bv);
                        } else if (bv && !same(m, project, e->string, av, bv)) {
                                /* (A key the session removed keeps the host's value and is
                                 * no change to accept: claude drops keys it migrated away,
                                 * and a removal makes the host run nothing new.) */
                                if (!m->changes)
                                        set_key(dst, e->string, bv);
                                else if (!trust_key(e->string))
                                        report(m, scope, e->string, bv);
                        }
                }
        }
}

/* dst's map of projects, made (or made a map) when it is not one. */
static cJSON *projects_of(cJSON *dst)
{
        cJSON *dp = cJSON_GetObjectItemCaseSensitive(dst, "projects");

        if (dp && !cJSON_IsObject(dp)) {
                cJSON_DeleteItemFromObjectCaseSensitive(dst, "projects");
                dp = NULL;
        }
        return dp ? dp : cJSON_AddObjectToObject(dst, "projects");
}

static void merge(struct merge *m, cJSON *dst, const cJSON *a, const cJSON *b)
{
        const cJSON *ap = cJSON_GetObjectItemCaseSensitive(a, "projects");
        const cJSON *bp = cJSON_GetObjectItemCaseSensitive(b, "projects"), *e;

        merge_scope(m, dst, a, b, false, "user");
        if ((ap && !cJSON_IsObject(ap)) || (bp && !cJSON_IsObject(bp))) {
                /* Not a map of projects: one value, as any other key. */
                if (!cJSON_Compare(ap, bp, true)) {
                        if (m->changes)
                                report(m, "user", "projects", bp);
                        else
                                set_key(dst, "projects", bp);
                }
                return;
        }
        for (int side = 0; side < 2; side++) {
                cJSON_ArrayForEach(e, (side ? ap : bp))
                {
                        const cJSON *av, *bv;
                        cJSON *dp, *d;
                        bool had;

                        if (!e->string)
                                continue;
                        av = cJSON_GetObjectItemCaseSensitive(ap, e->string);
                        bv = cJSON_GetObjectItemCaseSensitive(bp, e->string);
                        if ((side && bv) || !(dp = projects_of(dst)))
                                continue;
                        if ((av && !cJSON_IsObject(av)) || (bv && !cJSON_IsObject(bv))) {
                                /* Not a project's settings: one value, the host's unless
                                 * accepted. */
                                if (!(av && bv && cJSON_Compare(av, bv, true))) {
                                        if (m->changes)
                                                report(m, e->string, "(the project's entry)", bv);
                                        else
                                                set_key(dp, e->string, bv);
                                }
                                continue;
                        }
                        d = cJSON_GetObjectItemCaseSensitive(dp, e->string);
                        had = d != NULL;
                        if (d && !cJSON_IsObject(d)) {
                                cJSON_DeleteItemFromObjectCaseSensitive(dp, e->string);
                                d = NULL;
                        }
                        if (!d && !(d = cJSON_AddObjectToObject(dp, e->string)))
                                continue;
                        merge_scope(m, d, av, bv, true, e->string);
                        /* Nothing of the host's in it, and the session dropped it or only
                         * made it here: no entry. */
                        if (!d->child && (!bv || !had))
                                cJSON_DeleteItemFromObjectCaseSensitive(dp, e->string);
                }
        }
}

static int merge_run(cJSON *dst, const cJSON *a, const cJSON *b, struct plan_trust *changes,
                     const char *path)
{
        struct merge m = {.changes = changes, .path = path};
        int r = 0;

        m.defaults[0] = cJSON_Parse(default_user);
        m.defaults[1] = cJSON_Parse(default_project);
        if (!m.defaults[0] || !m.defaults[1])
                r = -1;
        else
                merge(&m, dst, a, b);
        cJSON_Delete((cJSON *)m.defaults[0]);
        cJSON_Delete((cJSON *)m.defaults[1]);
        return r;
}

cJSON *claude_json_writeback(const cJSON *host, const cJSON *session, struct plan_trust *changes,
                             const char *path)
{
        cJSON *out = host ? cJSON_Duplicate(host, true) : cJSON_CreateObject();
        struct plan_trust none = {0};

        if (out && merge_run(out, host, session, changes ? changes : &none, path) < 0) {
                cJSON_Delete(out);
                out = NULL;
        }
        trust_free(&none);
        return out;
}

int claude_json_accept(cJSON *host, const cJSON *base, const cJSON *session)
{
        return merge_run(host, base, session, NULL, NULL);
}
