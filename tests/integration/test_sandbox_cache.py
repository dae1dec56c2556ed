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
from test_run import CFG_IN, Profiles, shell_claude  # noqa: E402

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
    assert len(lines) == 5, p.stdout
    # each image after the server and the file that asked for it
    assert lines[0] == f"{server}: for server `srv` in {home.profile}/.claude.json", p.stdout
    assert lines[1].startswith(f"pulled {server} sha256:"), p.stdout
    assert lines[2] == f"{other}: for server `proj` in {home.top}/.mcp.json", p.stdout
    assert lines[3].startswith(f"pulled {other}:latest sha256:"), p.stdout
    assert lines[4] == f"sandbox-cache {PROFILE}: 2 images, 2 ready, 0 failed", p.stdout

    # The second run finds both stored and does not ask the registry.
    p = home.run()
    assert p.returncode == 0, p.stderr + p.stdout
    lines = p.stdout.splitlines()[1::2][:2]
    assert [l.split(" sha256:")[0] for l in lines] == [
        f"already stored {server}", f"already stored {other}:latest"], p.stdout
    assert all(l.endswith("not pulled again") for l in lines), p.stdout


def test_second_run_needs_no_registry(home, registry, tmp_path):
    server = f"{registry.host}/mcp/server:1"
    home.claude_json({"srv": docker(server, "-i", "--rm")})
    assert home.run().returncode == 0
    # the same image named through a registry that does not answer is a failure...
    dead = "127.0.0.1:1/mcp/server:1"
    home.claude_json({"srv": docker(dead, "-i", "--rm")})
    p = home.run()
    assert p.returncode == 125 and f"\nnot pulled {dead}\n" in p.stdout, p.stdout + p.stderr
    # ...while the stored one needs no registry at all
    home.claude_json({"srv": docker(server, "-i", "--rm")},
                     projects={"/x": {"mcpServers": {"again": docker(server, "--rm")}}})
    registry.proc.send_signal(19)  # SIGSTOP: a request would hang until the timeout
    try:
        p = home.run()
    finally:
        registry.proc.send_signal(18)  # SIGCONT
    assert p.returncode == 0, p.stdout + p.stderr
    # one pull for the image both servers name, each shown
    assert p.stdout.splitlines()[:3] == [
        f"{server}: for server `srv` in {home.profile}/.claude.json",
        f"{server}: for server `again` in {home.profile}/.claude.json",
        p.stdout.splitlines()[2]], p.stdout
    assert p.stdout.splitlines()[2].startswith(f"already stored {server} sha256:"), p.stdout
    assert p.stdout.splitlines()[3] == f"sandbox-cache {PROFILE}: 1 image, 1 ready, 0 failed"


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


# --- what a session wrote waits for the user -----------------------------------------------

def session_writes(profiles, script):
    """A sandboxed session of profile `work` in the project (a git work tree) running
    script as its claude; it ends normally and leaves its report."""
    subprocess.run(["git", "init", "-q"], cwd=profiles.project, check=True)
    shell_claude(profiles, script)
    r = profiles.run()
    assert r.returncode == 0, r.stderr
    return r


def cache(profiles, cwd=None):
    env = profiles.env(REGISTRY_AUTH_FILE=None)
    return subprocess.run([CSANDBOX, "sandbox-cache", "work", "--tls-verify=false"],
                          capture_output=True, text=True, timeout=TIMEOUT, env=env,
                          cwd=str(cwd or profiles.project), stdin=subprocess.DEVNULL)


def stored(profiles):
    d = profiles.data / "csandbox" / "images"
    return sorted(os.listdir(d)) if d.is_dir() else []


def test_an_mcp_json_a_session_wrote_is_not_pulled_until_accepted(tmp_path, registry):
    """The session writes a .mcp.json naming a registry and an image: sandbox-cache names
    the file and the server, pulls nothing and says how to accept (from the project and
    from a directory below it); a .mcp.json above the work tree, which the tree's report does
    not cover, is not among what waits. Once `run --accept-changes` accepted, it pulls."""
    profiles = Profiles(tmp_path)
    profiles.add()
    image = f"{registry.host}/mcp/other"
    mcp = profiles.project / ".mcp.json"
    r = session_writes(profiles, f"""cat > '{mcp}' <<'E'
{{"mcpServers": {{"planted": {{"command": "docker", "args": ["run", "-i", "{image}"]}}}}}}
E
""")
    assert f"project MCP servers (.mcp.json): {mcp}" in r.stderr, r.stderr
    above = profiles.project.parent / ".mcp.json"
    above.write_text(json.dumps({"mcpServers": {"mine": docker(f"{registry.host}/mcp/server:1")}}))
    below = profiles.project / "sub"
    below.mkdir()
    for cwd in (profiles.project, below):
        p = cache(profiles, cwd)
        assert p.returncode == 125, p.stdout + p.stderr
        assert p.stdout == "", p.stdout
        assert f"  {image}, for server `planted` in {mcp}" in p.stderr, p.stderr
        assert f"the work tree {profiles.project}" in p.stderr, p.stderr
        assert "csandbox run --accept-changes work" in p.stderr, p.stderr
        assert str(mcp) in p.stderr and "not accepted yet" in p.stderr, p.stderr
        assert str(above) not in p.stderr, p.stderr
        assert stored(profiles) == [], stored(profiles)
    shell_claude(profiles, "exit 0\n")
    r = subprocess.run([CSANDBOX, "run", "--accept-changes", "work"], cwd=str(profiles.project),
                       env=profiles.env(), capture_output=True, text=True, timeout=TIMEOUT,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    p = cache(profiles)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.splitlines()[0] == f"{image}: for server `planted` in {mcp}", p.stdout
    assert p.stdout.splitlines()[1].startswith(f"pulled {image}:latest sha256:"), p.stdout
    assert p.stdout.splitlines()[2] == (f"{registry.host}/mcp/server:1: for server `mine` in"
                                        f" {above}"), p.stdout


def test_a_waiting_report_of_the_profile_holds_its_claude_json(tmp_path, registry):
    """A session that added an MCP server to the profile's .claude.json leaves a report for
    the profile: the images the profile's file names wait for it."""
    profiles = Profiles(tmp_path)
    d = profiles.add()
    server = f"{registry.host}/mcp/server:1"
    (d / ".claude.json").write_text(json.dumps({"mcpServers": {"srv": docker(server)}}))
    r = session_writes(profiles, f"""cat > '{CFG_IN}/.claude.json' <<'E'
{{"mcpServers": {{"srv": {json.dumps(docker(server))}, "x": {{"command": "evil"}}}}}}
E
""")
    assert f"in {d}/.claude.json: x" in r.stderr, r.stderr
    p = cache(profiles)
    assert p.returncode == 125, p.stdout + p.stderr
    assert f"  {server}, for server `srv` in {d}/.claude.json" in p.stderr, p.stderr
    assert f"the profile {d}" in p.stderr and "--accept-changes work" in p.stderr, p.stderr
    assert stored(profiles) == []
