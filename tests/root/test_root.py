"""The root tier: csandbox started by root (a CI job's default user, `sudo csandbox`).
tests/run runs this as root inside the test network namespace (tests/testnet), after the
unprivileged suite built the binaries; everything else runs as an unprivileged user.

    CSANDBOX=build/csandbox CSANDBOX_PROBE=build/tests/probe CSANDBOX_TEST_HOST=198.51.100.1 \\
        ip netns exec csbt-host python3 -m pytest -p no:cacheprovider -q tests/root
"""
import json
import os
import subprocess

import pytest

CSANDBOX = os.path.abspath(os.environ.get("CSANDBOX", "build/csandbox"))
PROBE = os.path.abspath(os.environ.get("CSANDBOX_PROBE", "build/tests/probe"))
TEST_HOST = os.environ.get("CSANDBOX_TEST_HOST")
SECONDARY = "198.51.100.3"  # a secondary address of the test host namespace (tests/testnet)


@pytest.fixture(scope="module", autouse=True)
def _as_root_in_the_test_network():
    assert os.geteuid() == 0, "the root tier runs as root (tests/run does that)"
    assert TEST_HOST, "the root tier needs the test host of tests/testnet"


def exec_probe(*args, opts=("--net", "pasta")):
    r = subprocess.run([CSANDBOX, "exec", *opts, "--ro-bind", PROBE, "/run/probe", "--",
                        "/run/probe", *args], capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_exec_net_pasta_as_root_reaches_the_test_host_and_no_host_address():
    assert exec_probe("connect", TEST_HOST, "8080")["errno"] == "ok"
    assert exec_probe("connect", SECONDARY, "8080")["errno"] == "ENETUNREACH"


def test_run_as_root_has_a_network(tmp_path):
    home = tmp_path / "home"
    (home / ".claude-profiles" / "work").mkdir(parents=True)
    (home / ".claude-profiles" / "work" / ".sandbox").touch()
    (home / "src").mkdir()
    claude = tmp_path / "claude"
    # A fake claude: what the session can reach, and as whom it runs.
    claude.write_text("#!/bin/sh\nexec /usr/bin/python3 -c 'import os, socket\n"
                      f"socket.create_connection((\"{TEST_HOST}\", 8080), 5)\n"
                      "print(\"reached\", os.getuid())'\n")
    claude.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "XDG_DATA_HOME": str(tmp_path / "data"),
           "CLAUDE_PROFILE_CLAUDE_BIN": str(claude), "LANG": "C.UTF-8"}
    r = subprocess.run([CSANDBOX, "run", "work"], cwd=home / "src", env=env,
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[0] == "reached", r.stdout


USER = os.environ.get("CSANDBOX_TEST_USER", "csbtest")


def as_user(cmd, **kw):
    return subprocess.run(["runuser", "-u", USER, "--", *cmd], capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL, **kw)


def test_map_range_without_a_subuid_range_is_a_clear_error(tmp_path):
    """A user without an /etc/subuid range (here: empty files bound over both in a private
    mount namespace) gets an error naming the file, the user and the fix."""
    empty = tmp_path / "empty"
    empty.write_text("")
    script = (f"mount --bind {empty} /etc/subuid && mount --bind {empty} /etc/subgid && "
              f"exec runuser -u {USER} -- {CSANDBOX} exec --map-range -- /bin/true")
    r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 125, r.stderr
    assert "--map-range: /etc/subuid has no subordinate range of at least 65536 ids" in r.stderr
    assert "usermod --add-subuids" in r.stderr and "drop --map-range" in r.stderr


def test_map_range_without_cap_sys_admin_in_the_bounding_set_names_it():
    """A container's default capability set (no CAP_SYS_ADMIN): newuidmap cannot write a
    range there; the error names the capability and the engine flag."""
    r = subprocess.run(["setpriv", "--bounding-set", "-sys_admin", "runuser", "-u", USER, "--",
                        CSANDBOX, "exec", "--map-range", "--", "/bin/true"],
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 125, r.stderr
    assert "CAP_SYS_ADMIN" in r.stderr and "--cap-add SYS_ADMIN" in r.stderr, r.stderr
    ok = as_user([CSANDBOX, "exec", "--map-range", "--", "/bin/true"])
    assert ok.returncode == 0, ok.stderr
