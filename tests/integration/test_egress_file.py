"""An srt settings file as egress entries (exec --egress-file, run's
CLAUDE_PROFILE_SANDBOX_EGRESS_FILE): network.allowedDomains and network.deniedDomains as
they are, and never a file the session can write."""
import json
import shutil

from conftest import parse_json
from test_run import Profiles


def test_an_srt_file_gives_entries_and_must_be_out_of_the_sessions_reach(csb, tmp_path):
    srt = tmp_path / "srt-settings.json"
    srt.write_text(json.dumps({"network": {"allowedDomains": ["*.csandbox.test", "github.com"],
                                           "deniedDomains": ["b.csandbox.test"]},
                               "filesystem": {"denyRead": ["~/.ssh"]}}))
    eg = parse_json(csb.run(["--plan", "--egress", "allowlist", "--egress-file", str(srt),
                             "--", "true"]))["egress"]
    assert [h["host"] for h in eg["allow"] if not h.get("builtin")] == \
        ["*.csandbox.test", "github.com"]
    assert [h["host"] for h in eg["deny"]] == ["b.csandbox.test"]
    rw = tmp_path / "rw"
    rw.mkdir()
    shutil.copy(srt, rw / "srt.json")
    r = csb.run(["--plan", "--egress", "allowlist", "--bind", str(rw), "/mnt/rw",
                 "--egress-file", str(rw / "srt.json"), "--", "true"])
    assert r.returncode == 125 and "the session can write it" in r.stderr, r.stderr
    r = csb.run(["--plan", "--egress", "allowlist", "--ro-bind", str(rw), "/mnt/rw",
                 "--egress-file", str(rw / "srt.json"), "--", "true"])
    assert r.returncode == 0, r.stderr
    for bad in ({"network": {"allowedDomains": "x.com"}}, {"network": {"allowedDomains": [1]}},
                {"sandbox": {}}, {"network": {"allowedDomains": ["bad domain"]}}):
        srt.write_text(json.dumps(bad))
        r = csb.run(["--plan", "--egress", "allowlist", "--egress-file", str(srt), "--", "true"])
        assert r.returncode == 125 and "--egress-file" in r.stderr, r.stderr


def test_run_takes_an_srt_file_outside_the_work_tree_and_refuses_one_inside(tmp_path):
    profiles = Profiles(tmp_path)
    profiles.add()
    policy = {"network": {"allowedDomains": ["a.csandbox.test"], "deniedDomains": []}}
    outside = tmp_path / "srt.json"
    outside.write_text(json.dumps(policy))
    plan = profiles.plan(env=profiles.env(CLAUDE_PROFILE_SANDBOX_EGRESS="allowlist",
                                          CLAUDE_PROFILE_SANDBOX_EGRESS_FILE=str(outside)))
    sandbox = plan.get("sandbox", plan)
    assert "a.csandbox.test" in [h["host"] for h in sandbox["egress"]["allow"]]
    inside = profiles.project / ".srt-settings.json"
    inside.write_text(json.dumps(policy))
    r = profiles.run(cmd="plan", env=profiles.env(CLAUDE_PROFILE_SANDBOX_EGRESS="allowlist",
                                                  CLAUDE_PROFILE_SANDBOX_EGRESS_FILE=str(inside)))
    assert r.returncode == 125 and "the session can write it" in r.stderr, r.stderr
    r = profiles.run(cmd="plan", env=profiles.env(CLAUDE_PROFILE_SANDBOX_EGRESS_FILE=str(outside)))
    assert r.returncode == 125 and "CLAUDE_PROFILE_SANDBOX_EGRESS" in r.stderr, r.stderr
