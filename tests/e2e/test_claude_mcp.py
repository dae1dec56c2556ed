"""The real Claude Code inside `csandbox run` starts the stdio MCP test server
(tests/fixtures/mcp_server.py, the server the sandbox-cache tests package as an image) named
in the profile's .claude.json, and `claude mcp list` shows it connected: as a plain program,
and as a container (`docker run -i --rm IMAGE`, csandbox's own docker in the session) from
the user's store after `csandbox sandbox-cache`, with the network off."""
import json
import os
import subprocess
import sys

from test_claude import profiles  # noqa: F401 (the fixture)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from conftest import CSANDBOX  # noqa: E402
from test_sandbox_cache import registry  # noqa: E402,F401 (a fixture)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "fixtures"))
import mcp_server  # noqa: E402

SERVER = "csbt-mcp"


def server_line(out):
    lines = [line for line in out.splitlines() if line.startswith(SERVER + ":")]
    assert len(lines) == 1, out
    return lines[0]


def test_the_mcp_test_server_speaks_mcp_to_the_real_claude(profiles):
    """The image's server, run as a plain stdio program from the work tree: claude's
    initialize handshake succeeds."""
    script = profiles.project / "mcp-server"
    script.write_text(mcp_server.SCRIPT)
    script.chmod(0o755)
    d = profiles.add()
    (d / ".claude.json").write_text(json.dumps({"mcpServers": {SERVER: {
        "type": "stdio", "command": "/bin/sh", "args": [str(script)]}}}))
    r = profiles.run(args=["mcp", "list"], timeout=180)
    assert r.returncode == 0, r.stderr
    assert "✔ Connected" in server_line(r.stdout), r.stdout


def test_container_mcp_server_connects_offline_after_sandbox_cache(profiles, registry):  # noqa: F811
    image = f"{registry.host}/mcp/server:1"
    d = profiles.add()
    (d / ".claude.json").write_text(json.dumps({"mcpServers": {SERVER: {
        "type": "stdio", "command": "docker", "args": ["run", "-i", "--rm", image]}}}))
    offline = profiles.env(CLAUDE_PROFILE_SANDBOX_EGRESS="none")

    # Not cached and no network: the session's docker cannot get the image.
    r = profiles.run(args=["mcp", "list"], env=offline, timeout=180)
    assert r.returncode == 0, r.stderr
    assert "Connected" not in server_line(r.stdout), r.stdout

    r = subprocess.run([CSANDBOX, "sandbox-cache", "work", "--tls-verify=false"],
                       cwd=str(profiles.project), env=profiles.env(), capture_output=True,
                       text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr + r.stdout
    # each image named with the server and file that asked for it, then pulled
    assert r.stdout.startswith(f"{image}: for server `csbt-mcp` in "), r.stdout
    assert f"\npulled {image} sha256:" in r.stdout, r.stdout

    r = profiles.run(args=["mcp", "list"], env=offline, timeout=180)
    assert r.returncode == 0, r.stderr
    line = server_line(r.stdout)
    assert f"docker run -i --rm {image}" in line and "✔ Connected" in line, r.stdout
