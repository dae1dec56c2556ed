"""The real Claude Code inside `csandbox run` starts the stdio MCP test server
(tests/fixtures/mcp_server.py, the server the sandbox-cache tests package as an image) named
in the profile's .claude.json, and `claude mcp list` shows it connected. A session has no
`docker` or `podman` yet, so the server runs as a plain program here."""
import json
import os
import sys

from test_claude import profiles  # noqa: F401 (the fixture)

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

