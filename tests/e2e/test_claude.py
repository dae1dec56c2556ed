"""The real Claude Code inside `csandbox run`: the npm package @anthropic-ai/claude-code at
the version .ci/run pins (a native binary that runs offline for --version and mcp list).
CSANDBOX_TEST_CLAUDE names it; tests/run sets it."""
import json
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from conftest import CSANDBOX  # noqa: E402
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


def test_real_claude_in_an_image_session_with_mcp_list_and_sudo_on_its_path(profiles):
    """The host's claude on a Debian root (tests/setup-root's mmdebstrap image), mounted as
    an overlay of its layer: it starts, reads the profile, and its shell finds csandbox's
    sudo first on PATH."""
    base = "/var/cache/csandbox-test/apt-base.tar"
    assert os.path.exists(base), f"{base} is missing: run tests/setup-root as root"
    d = profiles.add()
    (d / ".claude.json").write_text(json.dumps({"mcpServers": {
        "csbt-demo": {"type": "stdio", "command": "/bin/true", "args": []}}}))
    r = subprocess.run([CSANDBOX, "image", "import", base,
                        "--name", "debian", "--quiet"], env=profiles.env(), capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    env = profiles.env(CLAUDE_PROFILE_SANDBOX_IMAGE="debian")
    r = profiles.run(args=["mcp", "list"], env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "csbt-demo: /bin/true" in r.stdout
    plan = json.loads(profiles.run(cmd="plan", env=env).stdout)
    assert plan["package_broker"] is True and plan["root"]["kind"] == "dir"
    path = {e["name"]: e["value"] for e in plan["env"]}["PATH"]
    assert path.startswith("/home/appuser/.local/bin:"), path


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


def test_real_claude_new_profile_launched_three_times_headless_is_never_refused(profiles):
    """A brand-new profile, `-p hello` three times in a row with no terminal: claude writes
    its own state (.claude.json, projects/, sessions/, backups/, telemetry/...) and may fail
    to reach the API, but none of that is a finding, so no launch is refused."""
    profiles.add()
    for i in (1, 2, 3):
        r = profiles.run(args=["-p", "hello"], timeout=180)
        assert r.returncode != 125, f"launch {i} refused:\n{r.stderr}"
        assert "Refusing to start" not in r.stderr, f"launch {i}:\n{r.stderr}"
        assert "changed what claude or git runs" not in r.stderr, f"launch {i}:\n{r.stderr}"


def test_real_claude_sessions_ended_by_timeout_a_closed_pipe_and_sigkill_never_refuse(profiles):
    """The ordinary ends of a headless launch: the caller's `timeout` (SIGTERM to the whole
    process group), a pipe into `head -1` under an allowlist, and SIGKILL of csandbox
    (whose record the next launch finishes by itself): claude's own state is not a finding,
    so the next launch always starts, without a prompt."""
    import signal
    import time
    profiles.add()
    env = profiles.env()

    def starts():
        r = profiles.run(args=["--version"], timeout=180)
        assert r.returncode == 0 and "Refusing" not in r.stderr, r.stderr
        return r

    r = subprocess.run(["timeout", "2", CSANDBOX, "run", "work", "--", "-p", "hello"],
                       cwd=str(profiles.project), env=env, stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=180)
    assert r.returncode != 125, r.stderr
    starts()
    allow = profiles.env(CLAUDE_PROFILE_SANDBOX_EGRESS="allowlist")
    subprocess.run(f'"{CSANDBOX}" run work -- -p hello 2>&1 | head -1', shell=True,
                   executable="/bin/bash", cwd=str(profiles.project), env=allow,
                   stdin=subprocess.DEVNULL, capture_output=True, timeout=180)
    starts()
    proc = subprocess.Popen([CSANDBOX, "run", "work", "--", "-p", "hello"],
                            cwd=str(profiles.project), env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(2)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    r = starts()
    assert "changed what claude or git runs" not in r.stderr, r.stderr
