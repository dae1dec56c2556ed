"""The host's addresses are followed while a session runs: an address the host gains
mid-session (a VPN, a container bridge, an IPv6 privacy address) is refused as the host's
own by the allowlist proxy and made unreachable in a pasta session, both families; one it
loses gets its rule removed. "The host" here is a user and network namespace of the test's
own (unshare -Urn) with a veth pair, where the test may add addresses; a server there
listens on [::] and counts who connects."""
import json
import shutil
import subprocess

import pytest

from conftest import base_env

IP = shutil.which("ip") or "/usr/sbin/ip"
NEW4, NEW6 = "10.9.0.77", "2001:db8:9::77"

# Runs as root of the test's own namespaces: makes the "host" network, a server on [::],
# starts the session (argv[1:]: csandbox's command line) with the attacker on its stdin and
# stdout, adds NEW4 and NEW6 when the attacker is ready, removes them on its next word, and
# prints what the server saw and what the attacker said.
HOST = r"""
import json, socket, subprocess, sys, threading, time
ip, argv = sys.argv[1], sys.argv[2:]
def sh(*a):
    subprocess.run([ip, *a], check=True)
sh("link", "add", "d0", "type", "veth", "peer", "name", "d1")
sh("link", "set", "d1", "up"); sh("link", "set", "d0", "up"); sh("link", "set", "lo", "up")
sh("addr", "add", "10.9.0.1/24", "dev", "d0")
sh("-6", "addr", "add", "2001:db8:9::1/64", "dev", "d0", "nodad")
sh("route", "add", "default", "via", "10.9.0.254", "dev", "d0")
sh("-6", "route", "add", "default", "via", "2001:db8:9::fe", "dev", "d0")
srv = socket.socket(socket.AF_INET6)
srv.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
srv.bind(("::", 0)); srv.listen(16)
hits = []
def serve():
    while True:
        c, a = srv.accept()
        hits.append(a[0]); c.close()
threading.Thread(target=serve, daemon=True).start()
p = subprocess.Popen([*argv, str(srv.getsockname()[1])], stdin=subprocess.PIPE,
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
said = [json.loads(p.stdout.readline())]
sh("addr", "add", "10.9.0.77/24", "dev", "d0")
sh("-6", "addr", "add", "2001:db8:9::77/64", "dev", "d0", "nodad")
p.stdin.write("added\n"); p.stdin.flush()
said.append(json.loads(p.stdout.readline()))
sh("addr", "del", "10.9.0.77/24", "dev", "d0")
sh("-6", "addr", "del", "2001:db8:9::77/64", "dev", "d0")
p.stdin.write("removed\n"); p.stdin.flush()
out, err = p.communicate(timeout=60)
said += [json.loads(l) for l in out.splitlines()]
print(json.dumps({"said": said, "hits": hits, "rc": p.returncode, "stderr": err}))
"""

# The attacker in a pasta session: the rules it sees, then, once the host has gained NEW4
# and NEW6 and their rules are there (the watcher's, a moment after), a connection to each;
# then the rules once the host has lost them.
PASTA_ATTACKER = r"""
import errno, json, socket, subprocess, sys, time
ip, port = sys.argv[1], int(sys.argv[2])
new = ["10.9.0.77", "2001:db8:9::77"]
def rules():
    return sorted(r["dst"] for f in ("-4", "-6")
                  for r in json.loads(subprocess.check_output([ip, f, "-j", "rule"]))
                  if r.get("action") == "unreachable" and r.get("priority") == 1)
def wait(cond):
    end = time.monotonic() + 20
    while not cond(rules()) and time.monotonic() < end:
        time.sleep(0.02)
route6 = subprocess.check_output([ip, "-6", "route", "show", "default"], text=True)
print(json.dumps({"rules": rules(), "route6": route6}), flush=True)
sys.stdin.readline()
wait(lambda r: all(a in r for a in new))
out = {}
for a in new:
    s = socket.socket(socket.AF_INET6 if ":" in a else socket.AF_INET)
    s.settimeout(5)
    try:
        s.connect((a, port))
        out[a] = "ok"
    except OSError as e:
        out[a] = errno.errorcode.get(e.errno, "timeout")
    s.close()
print(json.dumps({"rules": rules(), "connect": out}), flush=True)
sys.stdin.readline()
wait(lambda r: not any(a in r for a in new))
print(json.dumps({"rules": rules()}), flush=True)
"""

# The attacker in an allowlist session whose allowed ranges hold the host's new addresses:
# connects to each (the proxy answers every connection; what counts is whether the server
# behind it got one) once the proxy has had the time to hear of them.
ALLOWLIST_ATTACKER = r"""
import json, socket, sys, time
port = int(sys.argv[1])
print(json.dumps({}), flush=True)
sys.stdin.readline()
time.sleep(1)  # the proxy hears of the address from the kernel within milliseconds
for a in ["10.9.0.77", "2001:db8:9::77"]:
    s = socket.socket(socket.AF_INET6 if ":" in a else socket.AF_INET)
    s.settimeout(5)
    try:
        s.connect((a, port))
        s.sendall(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n")
        s.recv(10)
    except OSError:
        pass
    s.close()
print(json.dumps({"connected": True}), flush=True)
sys.stdin.readline()
"""


def host_session(csb, opts, attacker, *args):
    r = subprocess.run(["unshare", "-Urn", "/usr/bin/python3", "-c", HOST, IP, csb.binary,
                        "exec", *opts, "--", "/usr/bin/python3", "-c", attacker, *args],
                       capture_output=True, text=True, timeout=120, env=base_env(),
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["rc"] == 0, got
    return got


def test_pasta_session_follows_the_hosts_addresses(csb):
    got = host_session(csb, ["--net", "pasta"], PASTA_ATTACKER, IP)
    before, added, removed = got["said"]
    # the session has an IPv6 route out: ENETUNREACH below is the rule's
    assert "default" in before["route6"], before
    assert "2001:db8:9::1" in before["rules"] and NEW4 not in before["rules"], before
    assert NEW4 in added["rules"] and NEW6 in added["rules"], added
    assert added["connect"] == {NEW4: "ENETUNREACH", NEW6: "ENETUNREACH"}, added
    assert got["hits"] == [], got
    # the addresses the host lost are destinations like any other again; its own stay
    assert NEW4 not in removed["rules"] and NEW6 not in removed["rules"], removed
    assert "2001:db8:9::1" in removed["rules"], removed


def test_allowlist_proxy_refuses_an_address_the_host_gains(csb, tmp_path):
    log = tmp_path / "egress.log"
    got = host_session(csb, ["--egress", "allowlist", "--egress-log", str(log),
                             "--allow-host", "10.9.0.0/24", "--allow-host", "2001:db8:9::/64"],
                       ALLOWLIST_ATTACKER)
    assert got["said"][1] == {"connected": True}, got
    assert got["hits"] == [], got
    lines = log.read_text().splitlines()
    for a in (NEW4, NEW6):
        assert any(f"addr={a} " in l and "the host's own" in l for l in lines), lines


@pytest.mark.parametrize("opts", [["--net", "pasta"], ["--egress", "allowlist"]])
def test_no_follower_outlives_its_session(csb, opts):
    """The watcher and the proxy end with the session: no csandbox-addrs or
    csandbox-egress process of ours is left."""
    r = subprocess.run(["unshare", "-Urnmpf", "--mount-proc", "sh", "-c",
                        f"ip link add d0 type veth peer name d1 && ip link set d0 up && "
                        f"ip link set d1 up && ip addr add 10.9.0.1/24 dev d0 && "
                        f"ip route add default via 10.9.0.254 && \"$@\" && "
                        f"! grep -lx -e csandbox-addrs -e csandbox-egress /proc/[0-9]*/comm",
                        "sh", csb.binary, "exec", *opts, "--", "true"],
                       capture_output=True, text=True, timeout=60, env=base_env(),
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, (r.stdout, r.stderr)


def test_run_session_follows_the_hosts_addresses(csb, tmp_path):
    """`run` (its network made ahead of the launch) with a claude that is the attacker."""
    home = tmp_path / "home"
    (home / ".claude-profiles" / "work").mkdir(parents=True)
    (home / ".claude-profiles" / "work" / ".sandbox").touch()
    (home / "src").mkdir()
    claude = tmp_path / "claude"
    claude.write_text("#!/bin/sh\neval \"port=\\${$#}\"\nexec /usr/bin/python3 -c "
                      f"\"$(cat <<'EOF'\n{PASTA_ATTACKER}\nEOF\n)\" {IP} \"$port\"\n")
    claude.chmod(0o755)
    env = base_env(HOME=str(home), XDG_DATA_HOME=str(tmp_path / "data"),
                   CLAUDE_PROFILE_CLAUDE_BIN=str(claude), CLAUDE_PROFILE_PROFILES_BASE=None,
                   XDG_RUNTIME_DIR=None)
    r = subprocess.run(["unshare", "-Urn", "/usr/bin/python3", "-c", HOST, IP, csb.binary,
                        "run", "work", "--"], capture_output=True, text=True, timeout=120,
                       env=env, cwd=home / "src", stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["rc"] == 0, got
    _, added, removed = got["said"]
    assert added["connect"] == {NEW4: "ENETUNREACH", NEW6: "ENETUNREACH"}, added
    assert got["hits"] == [], got
    assert NEW4 not in removed["rules"] and NEW6 not in removed["rules"], removed


# The host's server keeps what each connection sends (within a second), for the attack below.
HOST_READING = HOST.replace('''        c, a = srv.accept()
        hits.append(a[0]); c.close()''', '''        c, a = srv.accept()
        c.settimeout(1)
        try:
            got = c.recv(100)
        except OSError:
            got = b""
        hits.append(got.decode(errors="replace")); c.close()''')

# The attacker on csandbox's relay: a connection to 10.77.0.1 before the host has it (the
# proxy's SYN waits behind a gateway that never answers), then the host gains it while the
# SYN retries: what lands on the host must carry nothing of the session's.
PENDING_ATTACKER = r"""
import json, socket, sys, threading, time
port = int(sys.argv[1])
res = {}
def go():
    s = socket.socket()
    s.settimeout(10)
    try:
        s.connect(("10.77.0.1", port))
        s.sendall(b"PAYLOAD-FROM-THE-SESSION")
        time.sleep(3)
        res["sent"] = True
    except OSError:
        res["sent"] = False
t = threading.Thread(target=go)
t.start()
time.sleep(0.3)
print(json.dumps({}), flush=True)
sys.stdin.readline()
t.join()
print(json.dumps(res), flush=True)
sys.stdin.readline()
"""


def test_an_address_the_host_gains_while_a_connect_waits_gets_nothing(csb, tmp_path):
    """The relay judged the address when its connect began; the host gained it while the
    SYN retried. Judged again once connected: the host's service gets no byte."""
    log = tmp_path / "egress.log"
    host = HOST_READING.replace(
        'sh("route", "add", "default", "via", "10.9.0.254", "dev", "d0")',
        'sh("route", "add", "default", "via", "10.9.0.254", "dev", "d0"); '
        'sh("neigh", "add", "10.9.0.254", "lladdr", "02:00:00:00:00:fe", "dev", "d0", "nud", '
        '"permanent")').replace(
        'sh("addr", "add", "10.9.0.77/24", "dev", "d0")',
        'sh("addr", "add", "10.77.0.1/32", "dev", "d0")').replace(
        'sh("addr", "del", "10.9.0.77/24", "dev", "d0")',
        'sh("addr", "del", "10.77.0.1/32", "dev", "d0")')
    assert host.count("10.77.0.1") == 2 and "permanent" in host
    r = subprocess.run(["unshare", "-Urn", "/usr/bin/python3", "-c", host,
                        IP, csb.binary, "exec", "--net", "relay", "--egress-log", str(log), "--",
                        "/usr/bin/python3", "-c", PENDING_ATTACKER],
                       capture_output=True, text=True, timeout=120, env=base_env(),
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["rc"] == 0, got
    assert not any("PAYLOAD" in h for h in got["hits"]), got
    lines = log.read_text().splitlines()
    assert any("addr=10.77.0.1 " in x and "gained the address while connecting" in x
               for x in lines), (lines, got)


# The host gains a local route wider than one address (`ip route add local ... dev lo`, how
# AnyIP is set up): it answers every address of it as its own.
HOST_LOCAL_ROUTE = HOST_READING.replace(
    'sh("addr", "add", "10.9.0.77/24", "dev", "d0")',
    'sh("route", "add", "local", "10.88.0.0/16", "dev", "lo")').replace(
    'sh("addr", "del", "10.9.0.77/24", "dev", "d0")',
    'sh("route", "del", "local", "10.88.0.0/16", "dev", "lo")')

LOCAL_ROUTE_ATTACKER = r"""
import errno, json, socket, sys, time
port = int(sys.argv[1])
print(json.dumps({}), flush=True)
sys.stdin.readline()
time.sleep(1)  # the follower hears of the route from the kernel within milliseconds
s = socket.socket()
s.settimeout(5)
try:
    s.connect(("10.88.0.5", port))
    s.sendall(b"PAYLOAD-FROM-THE-SESSION")
    s.recv(10)
    r = "connected"
except OSError as e:
    r = errno.errorcode.get(e.errno, "timeout")
print(json.dumps({"connect": r}), flush=True)
sys.stdin.readline()
"""


@pytest.mark.parametrize("opts", [["--net", "pasta"], ["--net", "relay"]])
def test_a_local_route_the_host_gains_is_the_hosts_too(csb, opts):
    assert HOST_LOCAL_ROUTE.count("10.88.0.0/16") == 2
    r = subprocess.run(["unshare", "-Urn", "/usr/bin/python3", "-c", HOST_LOCAL_ROUTE, IP,
                        csb.binary, "exec", *opts, "--", "/usr/bin/python3", "-c",
                        LOCAL_ROUTE_ATTACKER],
                       capture_output=True, text=True, timeout=120, env=base_env(),
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["rc"] == 0, got
    assert not any("PAYLOAD" in h for h in got["hits"]), got
    if opts[1] == "pasta":
        assert got["said"][1] == {"connect": "ENETUNREACH"}, got
