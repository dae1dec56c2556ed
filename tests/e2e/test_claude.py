"""The real Claude Code inside `csandbox run`: the npm package @anthropic-ai/claude-code at
the version .ci/run pins (a native binary that runs offline for --version and mcp list).
CSANDBOX_TEST_CLAUDE names it; tests/run sets it."""
import json
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from test_run import Profiles  # noqa: E402

CLAUDE = os.environ.get("CSANDBOX_TEST_CLAUDE")
VERSION = "2.1.332"


@pytest.fixture
def profiles(tmp_path):
    assert CLAUDE and os.access(CLAUDE, os.X_OK), (
        "set CSANDBOX_TEST_CLAUDE to the pinned claude (tests/run installs it)")
    p = Profiles(tmp_path)
    p.claude = CLAUDE
    return p


def test_real_claude_version_inside_csandbox_run(profiles):
    profiles.add()
    r = profiles.run(args=["--version"], timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"{VERSION} (Claude Code)"


def test_real_claude_lists_the_profiles_mcp_servers(profiles):
    d = profiles.add()
    (d / ".claude.json").write_text(json.dumps({"mcpServers": {
        "csbt-demo": {"type": "stdio", "command": "/bin/true", "args": []}}}))
    r = profiles.run(args=["mcp", "list"], timeout=120)
    assert r.returncode == 0, r.stderr
    assert "csbt-demo: /bin/true" in r.stdout


def test_real_claude_is_the_host_file_first_on_path(profiles):
    profiles.add()
    plan = json.loads(profiles.run(cmd="plan").stdout)
    env = {e["name"]: e["value"] for e in plan["env"]}
    assert env["PATH"].startswith("/home/appuser/.local/bin:")
    assert env["DISABLE_AUTOUPDATER"] == "1"
    claude = [m for m in plan["mounts"] if m["dest"] == "/home/appuser/.local/bin/claude"]
    assert claude and claude[0]["readonly"]
    assert claude[0]["source"] == os.path.realpath(CLAUDE), "the host's file, not a copy"
