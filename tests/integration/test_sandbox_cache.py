"""`csandbox sandbox-cache PROFILE`: the images of a profile's MCP servers that are
containers (`docker run … IMAGE` in .claude.json, and in the .mcp.json of the current
directory and its ancestors) are pulled into the user's store from a real registry
(docker-registry, as in test_pull.py), seeded with the MCP test server's image."""
import json
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "fixtures"))
import mcp_server  # noqa: E402

from conftest import CSANDBOX, PROBE, base_env  # noqa: E402
from test_pull import Registry  # noqa: E402

TIMEOUT = 120
PROFILE = "mcp"


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    """Plain-http registry with the MCP server's image as mcp/server:1 and mcp/other:latest."""
    work = str(tmp_path_factory.mktemp("mcp-registry"))
    layout = os.path.join(work, "layout")
    mcp_server.write_layout(work, PROBE, layout)
    other = os.path.join(work, "other")
    mcp_server.write_layout(work, PROBE, other, mark="other")
    reg = Registry(os.path.join(work, "reg"))
    try:
        reg.seed(f"oci:{layout}:latest", "mcp/server:1")
        reg.seed(f"oci:{other}:latest", "mcp/other:latest")
        yield reg
    finally:
        reg.stop()


class Home:
    """A user: HOME with the profile, a data dir (the store), a work tree two levels deep."""

    def __init__(self, root):
        self.home = os.path.join(root, "home")
        self.data = os.path.join(root, "data")
        self.profile = os.path.join(self.home, ".claude-profiles", PROFILE)
        self.top = os.path.join(root, "projects")
        self.work = os.path.join(self.top, "app", "src")
        for d in (self.profile, self.data, self.work):
            os.makedirs(d)

    def env(self):
        return base_env(HOME=self.home, XDG_DATA_HOME=self.data,
                        XDG_RUNTIME_DIR=os.path.join(self.home, "run"), REGISTRY_AUTH_FILE=None)

    def run(self, *args, name=PROFILE):
        return subprocess.run([CSANDBOX, "sandbox-cache", name, "--tls-verify=false", *args],
                              capture_output=True, text=True, timeout=TIMEOUT, env=self.env(),
                              cwd=self.work, stdin=subprocess.DEVNULL)

    def names(self):
        p = subprocess.run([CSANDBOX, "image", "ls", "--json"], capture_output=True, text=True,
                           timeout=TIMEOUT, env=self.env(), stdin=subprocess.DEVNULL)
        assert p.returncode == 0, p.stderr
        return sorted(i["name"] for i in json.loads(p.stdout))

    def store_entries(self):
        d = os.path.join(self.data, "csandbox", "images")
        return sorted(os.listdir(d)) if os.path.isdir(d) else []

    def claude_json(self, servers, projects=None):
        doc = {"mcpServers": servers}
        if projects:
            doc["projects"] = projects
        with open(os.path.join(self.profile, ".claude.json"), "w") as f:
            json.dump(doc, f)


def docker(image, *opts):
    return {"type": "stdio", "command": "docker", "args": ["run", *opts, image]}


@pytest.fixture
def home(tmp_path):
    return Home(str(tmp_path))


def test_pulls_claude_json_and_ancestor_mcp_json_images(home, registry):
    server, other = f"{registry.host}/mcp/server:1", f"{registry.host}/mcp/other"
    home.claude_json({"srv": docker(server, "-i", "--rm", "-e", "X=1"),
                      "local": {"command": "npx", "args": ["-y", "some-server"]}})
    with open(os.path.join(home.top, ".mcp.json"), "w") as f:
        json.dump({"mcpServers": {"proj": {"command": "podman",
                                           "args": ["run", "--rm", "-i", "--name", "x",
                                                    "-v", "/a:/b", other, "--serve"]}}}, f)
    p = home.run()
    assert p.returncode == 0, p.stderr + p.stdout
    assert home.names() == sorted([server, other + ":latest"])
    lines = p.stdout.splitlines()
    assert len(lines) == 3, p.stdout
    assert lines[0].startswith(f"pulled {server} sha256:"), p.stdout
    assert lines[1].startswith(f"pulled {other}:latest sha256:"), p.stdout
    assert lines[2] == f"sandbox-cache {PROFILE}: 2 images, 2 ready, 0 failed", p.stdout

    # The second run finds both stored and does not ask the registry.
    p = home.run()
    assert p.returncode == 0, p.stderr + p.stdout
    lines = p.stdout.splitlines()
    assert [l.split(" sha256:")[0] for l in lines[:2]] == [
        f"already stored {server}", f"already stored {other}:latest"], p.stdout
    assert all(l.endswith("not pulled again") for l in lines[:2]), p.stdout


def test_second_run_needs_no_registry(home, registry, tmp_path):
    server = f"{registry.host}/mcp/server:1"
    home.claude_json({"srv": docker(server, "-i", "--rm")})
    assert home.run().returncode == 0
    # the same image named through a registry that does not answer is a failure...
    dead = "127.0.0.1:1/mcp/server:1"
    home.claude_json({"srv": docker(dead, "-i", "--rm")})
    p = home.run()
    assert p.returncode == 125 and f"not pulled {dead}" in p.stdout, p.stdout + p.stderr
    # ...while the stored one needs no registry at all
    home.claude_json({"srv": docker(server, "-i", "--rm")},
                     projects={"/x": {"mcpServers": {"again": docker(server, "--rm")}}})
    registry.proc.send_signal(19)  # SIGSTOP: a request would hang until the timeout
    try:
        p = home.run()
    finally:
        registry.proc.send_signal(18)  # SIGCONT
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.startswith(f"already stored {server} sha256:"), p.stdout


@pytest.mark.parametrize("kind", ["symlink", "huge", "not-json", "bad-args", "unknown-option"])
def test_hostile_claude_json_is_refused_and_nothing_pulled(home, registry, tmp_path, kind):
    path = os.path.join(home.profile, ".claude.json")
    server = f"{registry.host}/mcp/server:1"
    if kind == "symlink":
        target = os.path.join(str(tmp_path), "elsewhere.json")
        with open(target, "w") as f:
            json.dump({"mcpServers": {"srv": docker(server)}}, f)
        os.symlink(target, path)
    elif kind == "huge":
        with open(path, "w") as f:
            f.write('{"mcpServers":{"srv":' + json.dumps(docker(server)) + "}, \"pad\": \"")
            f.write("x" * (33 << 20))
            f.write('"}')
    elif kind == "not-json":
        with open(path, "w") as f:
            f.write('{"mcpServers":{"srv":' + json.dumps(docker(server)) + "}")
    elif kind == "bad-args":
        home.claude_json({"srv": {"command": "docker", "args": ["run", "-i", 7, server]}})
    else:
        home.claude_json({"ok": docker(server),
                          "srv": docker(server, "--frobnicate")})
    p = home.run()
    assert p.returncode == 125, p.stdout + p.stderr
    assert path in p.stderr, p.stderr
    if kind in ("bad-args", "unknown-option"):
        assert "server `srv`" in p.stderr, p.stderr
    if kind == "unknown-option":
        assert "--frobnicate" in p.stderr, p.stderr
    assert p.stdout == "", p.stdout
    assert home.store_entries() == [] or home.names() == [], home.names()


def test_hostile_ancestor_mcp_json_is_named(home, registry):
    home.claude_json({"srv": docker(f"{registry.host}/mcp/server:1")})
    bad = os.path.join(home.top, ".mcp.json")
    with open(bad, "w") as f:
        f.write("{not json")
    p = home.run()
    assert p.returncode == 125 and bad in p.stderr, p.stderr
    assert home.store_entries() == [] or home.names() == [], home.names()


def test_unknown_profile(home):
    p = home.run(name="nosuch")
    assert p.returncode == 125, p.stdout + p.stderr
    assert "nosuch" in p.stderr and "does not exist" in p.stderr, p.stderr
    assert home.store_entries() == []


def test_no_container_servers_pulls_nothing(home):
    home.claude_json({"local": {"command": "npx", "args": ["run", "x"]}})
    p = home.run()
    assert p.returncode == 0, p.stderr
    assert "nothing to pull" in p.stdout
    assert home.store_entries() == []
