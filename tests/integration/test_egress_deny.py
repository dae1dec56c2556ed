"""Denied entries (--deny-host, CLAUDE_PROFILE_SANDBOX_DENY_HOSTS) win over allowed ones:
a denied name gets neither DNS nor a connection, a denied range no connection even for an
allowed name, and the plan lists them apart."""
import json
import os
import subprocess

from conftest import base_env

TEST_HOST = os.environ.get("CSANDBOX_TEST_HOST")

CLIENT = r'''
import socket, struct, sys
def dns(name):
    q = struct.pack("!HHHHHH", 7, 0x0100, 1, 0, 0, 0)
    for label in name.split("."):
        q += bytes([len(label)]) + label.encode()
    q += b"\0" + struct.pack("!HH", 1, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(5)
    s.sendto(q, ("169.254.1.3", 53))
    return s.recv(1500)[3] & 15
def http(name):
    try:
        s = socket.create_connection((name, 8080), timeout=5)
        s.sendall(("GET / HTTP/1.0\r\nHost: %s\r\n\r\n" % name).encode())
        return s.recv(100).startswith(b"HTTP/1.0 200")
    except OSError:
        return False
print(dns("a.csandbox.test"), dns("b.csandbox.test"), http("a.csandbox.test"),
      http("b.csandbox.test"), flush=True)
'''


def test_denied_names_and_ranges_win(csb, tmp_path):
    client = tmp_path / "c.py"
    client.write_text(CLIENT)
    base = ["--egress", "allowlist", "--allow-host", "*.csandbox.test",
            "--egress-log", str(tmp_path / "egress.log"),
            "--ro-bind", str(client), "/mnt/c.py"]
    r = csb.run([*base, "--deny-host", "b.csandbox.test", "--", "python3", "/mnt/c.py"],
                timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "5", "True", "False"], r.stdout
    # a denied range: the allowed name resolves, but its address is never reached
    r = csb.run([*base, "--deny-host", TEST_HOST + "/32", "--", "python3", "/mnt/c.py"],
                timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "0", "False", "False"], r.stdout
    assert "denied range" in (tmp_path / "egress.log").read_text()
    # a port: only that port of the name is denied, its DNS stays
    r = csb.run([*base, "--deny-host", "b.csandbox.test:8080", "--", "python3", "/mnt/c.py"],
                timeout=60)
    assert r.stdout.split() == ["0", "0", "True", "False"], r.stdout


def test_the_plan_lists_denied_entries_and_run_takes_the_setting(csb, tmp_path):
    out = subprocess.run([csb.binary, "exec", "--plan", "--egress", "allowlist",
                          "--allow-host", "a.example", "--deny-host", "b.example", "--", "true"],
                         capture_output=True, text=True, env=base_env(), timeout=30)
    eg = json.loads(out.stdout)["egress"]
    assert [h["host"] for h in eg["allow"]] == ["a.example"] or \
        [h["host"] for h in eg["allow"] if not h.get("builtin")] == ["a.example"]
    assert [h["host"] for h in eg["deny"]] == ["b.example"]
    r = subprocess.run([csb.binary, "exec", "--plan", "--deny-host", "b.example", "--", "true"],
                       capture_output=True, text=True, env=base_env(), timeout=30)
    assert r.returncode == 125 and "--deny-host" in r.stderr, r.stderr

    from test_run import Profiles
    profiles = Profiles(tmp_path)
    profiles.add()
    plan = profiles.plan(env=profiles.env(CLAUDE_PROFILE_SANDBOX_EGRESS="allowlist",
                                          CLAUDE_PROFILE_SANDBOX_ALLOW_HOSTS="*.x.example",
                                          CLAUDE_PROFILE_SANDBOX_DENY_HOSTS="bad.x.example"))
    sandbox = plan.get("sandbox", plan)
    assert [h["host"] for h in sandbox["egress"]["deny"]] == ["bad.x.example"]
    brief = sandbox["argv"][sandbox["argv"].index("--append-system-prompt") + 1]
    assert "bad.x.example" not in brief
    r = profiles.run(cmd="plan", env=profiles.env(CLAUDE_PROFILE_SANDBOX_DENY_HOSTS="a.example"))
    assert r.returncode == 125 and "CLAUDE_PROFILE_SANDBOX_DENY_HOSTS" in r.stderr, r.stderr
