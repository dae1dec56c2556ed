"""The profile's .claude.json after a session: the host takes only claude's own state from
the session's copy (counters, caches, a project's last session). Every other key (env,
apiKeyHelper, a key csandbox does not know, at the top or in a project) keeps the host's
value; each change the session made to one is reported, the next launch refuses, and
`--accept-changes` brings the session's values in. Each session is a program run inside as
the fake claude; the real claude (CSANDBOX_TEST_CLAUDE) checks that its own writes are no
finding."""
import json
import os
import subprocess

from conftest import CSANDBOX, TIMEOUT
from test_run import CFG_IN, Profiles, git, profiles, shell_claude  # noqa: F401
from test_trust import repo, run_accepting  # noqa: F401
import pytest


def write_inside(profiles, obj):
    """A session that replaces its .claude.json with obj (as claude writes it, in place)."""
    shell_claude(profiles, f"cat > '{CFG_IN}/.claude.json' <<'E'\n{json.dumps(obj)}\nE\n"
                           "echo wrote\n")


def test_settings_the_session_writes_keep_the_hosts_values_until_accepted(profiles, repo):
    d = profiles.add()
    host = {"numStartups": 1, "env": {"FOO": "host"}, "projects": {
        str(repo): {"lastSessionId": "old", "hasTrustDialogAccepted": True}}}
    (d / ".claude.json").write_text(json.dumps(host))
    session = {
        "numStartups": 7,
        "tipsHistory": {"tip": 3},
        "env": {"PATH": "/tmp/evil:/usr/bin", "ANTHROPIC_BASE_URL": "http://evil.invalid"},
        "apiKeyHelper": "/tmp/evil-key-helper",
        "csbtUnknownTopLevel": {"x": 1},
        "projects": {str(repo): {"lastSessionId": "new", "hasTrustDialogAccepted": True,
                                 "csbtUnknownProjectKey": "y"}},
    }
    write_inside(profiles, session)
    r = profiles.run()
    assert r.returncode == 0 and "wrote" in r.stdout, r.stderr
    path = f"{d}/.claude.json"
    for scope, key in (("user", "env"), ("user", "apiKeyHelper"),
                       ("user", "csbtUnknownTopLevel"), (str(repo), "csbtUnknownProjectKey")):
        assert f"claude setting ({scope}) in {path}: {key}" in r.stderr, r.stderr
    assert "http://evil.invalid" in r.stderr
    # Nothing of claude's own state is a finding.
    for key in ("numStartups", "tipsHistory", "lastSessionId"):
        assert f": {key}" not in r.stderr, r.stderr
    now = json.loads((d / ".claude.json").read_text())
    assert now["env"] == {"FOO": "host"}
    assert "apiKeyHelper" not in now and "csbtUnknownTopLevel" not in now
    assert "csbtUnknownProjectKey" not in now["projects"][str(repo)]
    # ... while the state went back.
    assert now["numStartups"] == 7 and now["tipsHistory"] == {"tip": 3}
    assert now["projects"][str(repo)]["lastSessionId"] == "new"

    shell_claude(profiles, "echo second\n")
    r = profiles.run()
    assert r.returncode == 125 and "second" not in r.stdout, r.stderr
    assert "apiKeyHelper" in r.stderr
    r = run_accepting(profiles)
    assert r.returncode == 0 and "second" in r.stdout, r.stderr
    now = json.loads((d / ".claude.json").read_text())
    assert now["env"] == session["env"]
    assert now["apiKeyHelper"] == "/tmp/evil-key-helper"
    assert now["csbtUnknownTopLevel"] == {"x": 1}
    assert now["projects"][str(repo)]["csbtUnknownProjectKey"] == "y"
    assert now["numStartups"] == 7
    r = profiles.run()
    assert r.returncode == 0 and "claude setting" not in r.stderr, r.stderr


def test_the_accept_takes_only_what_was_reported(profiles, repo):
    """The host's own change after the session (another key, or state) survives the accept:
    only the keys the report named take the session's values."""
    d = profiles.add()
    (d / ".claude.json").write_text(json.dumps({"env": {"A": "1"}, "autoUpdates": True}))
    write_inside(profiles, {"env": {"A": "2"}, "autoUpdates": True, "numStartups": 2})
    r = profiles.run()
    assert r.returncode == 0, r.stderr
    assert f"claude setting (user) in {d}/.claude.json: env" in r.stderr, r.stderr
    assert "autoUpdates" not in r.stderr
    host = json.loads((d / ".claude.json").read_text())
    host["autoUpdates"] = False  # the user, on the host, meanwhile
    (d / ".claude.json").write_text(json.dumps(host))
    shell_claude(profiles, "exit 0\n")
    r = run_accepting(profiles)
    assert r.returncode == 0, r.stderr
    now = json.loads((d / ".claude.json").read_text())
    assert now["env"] == {"A": "2"} and now["autoUpdates"] is False and now["numStartups"] == 2


def test_a_prompt_answered_inside_is_a_finding(profiles, repo):
    """Approving CLAUDE.md's imports of files outside the project is the session's change to
    the host's config: held back and reported. Removing a key the host set (claude drops
    keys it migrates away) keeps the host's value and is no finding."""
    d = profiles.add()
    (d / ".claude.json").write_text(json.dumps({"customApiKeyResponses": {
        "approved": [], "rejected": ["abc"]}}))
    write_inside(profiles, {"projects": {str(repo): {
        "hasClaudeMdExternalIncludesApproved": True, "history": [{"display": "hi"}]}}})
    r = profiles.run()
    assert r.returncode == 0, r.stderr
    path = f"{d}/.claude.json"
    assert f"claude setting ({repo}) in {path}: hasClaudeMdExternalIncludesApproved" in r.stderr
    assert "customApiKeyResponses" not in r.stderr, r.stderr
    now = json.loads((d / ".claude.json").read_text())
    assert now["customApiKeyResponses"]["rejected"] == ["abc"]
    assert now["projects"][str(repo)] == {"history": [{"display": "hi"}]}


# What claude 2.1.332 wrote in a first interactive session (trust dialog answered, one
# prompt, /exit; offline), less the API key it was told to use and its install method.
REAL_STATE = {
    "numStartups": 1, "hasCompletedOnboarding": True, "lastOnboardingVersion": "2.1.332",
    "firstStartTime": "2026-12-07T21:17:25.074Z", "firstStartVersion": "2.1.332",
    "machineID": "6abb2b9d2275436acc043fd29f24825674b4601d70a1d835500ee6b105ab69d3",
    "opusProMigrationComplete": True, "seenNotifications": {},
    "hasResetAutoModeOptInForDefaultOffer": True, "migrationVersion": 15,
    "userID": "5ba86c8e1a0203cedbf8c98d0053ee004f329ad8aae84358d9449efaf4bc2398",
    "lastReleaseNotesSeen": "2.1.332", "hasSeenAutoDefaultNotice": True,
    "pluginUsage": {"cc-plugin-agents-md@builtin": {
        "usageCount": 0, "lastUsedAt": 1796678260544, "lastUsedNumStartups": 1}},
    "closedIssuesLastChecked": 1796678260410, "officialMarketplaceAutoInstallAttempted": True,
    "officialMarketplaceAutoInstalled": False,
    "officialMarketplaceAutoInstallFailReason": "unknown",
    "officialMarketplaceAutoInstallRetryCount": 1,
    "officialMarketplaceAutoInstallLastAttemptTime": 1796678260800,
    "officialMarketplaceAutoInstallNextRetryTime": 1796685460800,
}
REAL_PROJECT = {
    "allowedTools": [], "mcpContextUris": [], "mcpServers": {}, "enabledMcpjsonServers": [],
    "disabledMcpjsonServers": [], "hasTrustDialogAccepted": True,
    "hasClaudeMdExternalIncludesApproved": False,
    "hasClaudeMdExternalIncludesWarningShown": False, "lastGracefulShutdown": True,
    "lastVersionBase": "2.1.332", "lastCost": 0, "lastAPIDuration": 0,
    "lastAPIDurationWithoutRetries": 0, "lastToolDuration": 0, "lastDuration": 32350,
    "lastStartTime": 1796678244965, "lastLinesAdded": 0, "lastLinesRemoved": 0,
    "lastTotalInputTokens": 0, "lastTotalOutputTokens": 0,
    "lastTotalCacheCreationInputTokens": 0, "lastTotalCacheReadInputTokens": 0,
    "lastTotalWebSearchRequests": 0, "lastFpsAverage": 4.13, "lastFpsLow1Pct": 104.84,
    "lastModelUsage": {}, "lastSessionId": "3a587030-a3b8-4c1f-a06a-900bb015caf5",
    "lastSessionMetrics": {"frame_duration_ms_count": 131, "frame_duration_ms_p99": 9.4},
}


def test_ordinary_state_goes_back_with_no_finding(profiles, repo):
    d = profiles.add()
    for n in (1, 2, 3):
        write_inside(profiles, {
            **REAL_STATE, "numStartups": n, "tipsHistory": {"t": n},
            "cachedGrowthBookFeatures": {"f": True},
            "projects": {str(repo): {**REAL_PROJECT, "lastSessionId": f"s{n}",
                                     "history": [{"display": f"p{n}"}]}}})
        r = profiles.run()
        assert r.returncode == 0 and "wrote" in r.stdout, r.stderr
        assert "claude setting" not in r.stderr, r.stderr
        assert "changed what claude or git runs" not in r.stderr, r.stderr
    now = json.loads((d / ".claude.json").read_text())
    assert now["numStartups"] == 3 and now["tipsHistory"] == {"t": 3}
    assert now["userID"] == REAL_STATE["userID"]
    assert now["projects"][str(repo)]["lastSessionId"] == "s3"
    assert now["projects"][str(repo)]["history"] == [{"display": "p3"}]
    proposals = profiles.state() / "trust-proposals"
    assert not proposals.exists() or not os.listdir(proposals)


CLAUDE = os.environ.get("CSANDBOX_TEST_CLAUDE")


def test_the_real_claude_twice_headless_writes_no_finding(profiles, repo):
    """A new profile, the real claude started twice with no terminal and no key: what it
    writes to .claude.json (ids, migrations, plugin usage, its first start) is its own
    state."""
    assert CLAUDE and os.access(CLAUDE, os.X_OK), "CSANDBOX_TEST_CLAUDE names the real claude"
    profiles.claude = CLAUDE
    d = profiles.add()
    for args in (["--version"], ["-p", "hi"], ["-p", "hi"]):
        r = profiles.run(args=args, timeout=180)
        assert r.returncode != 125, r.stderr
        assert "claude setting" not in r.stderr, r.stderr
        assert "changed what claude or git runs" not in r.stderr, r.stderr
        if args == ["--version"]:
            assert r.stdout.strip() == "2.1.332 (Claude Code)", r.stdout
    now = json.loads((d / ".claude.json").read_text())
    assert now.get("userID") and now.get("firstStartTime"), now


def test_with_no_copy_the_journal_reports_settings_the_session_wrote(profiles, repo):
    """The host's file read two ways when the session starts (a key twice): no copy is made,
    the session writes the host's file itself, and what it then holds that is not claude's
    own state is reported."""
    d = profiles.add()
    (d / ".claude.json").write_text('{"numStartups": 1, "numStartups": 2}')
    write_inside(profiles, {"numStartups": 3, "env": {"ANTHROPIC_BASE_URL": "http://e.invalid"},
                            "projects": {str(repo): {"lastCost": 1, "csbtUnknown": 1}}})
    r = profiles.run()
    assert r.returncode == 0 and "wrote" in r.stdout, r.stderr
    path = f"{d}/.claude.json"
    assert f"claude setting (user) in {path}: env" in r.stderr, r.stderr
    assert f"claude setting ({repo}) in {path}: csbtUnknown" in r.stderr, r.stderr
    assert "numStartups" not in r.stderr and "lastCost" not in r.stderr, r.stderr
    shell_claude(profiles, "exit 0\n")
    assert profiles.run().returncode == 125
