"""csandbox's relay as the session's network (--net relay, and `run`'s and `--net pasta`'s
network where /dev/net/tun cannot be used): TCP to any host, connected from the host's
network to the connection's own destination, and DNS A/AAAA through the host's resolver;
no other UDP; never the host's own addresses. Checked against tests/testnet's test host
(CSANDBOX_TEST_HOST, HTTP on 8080, NAME.csandbox.test resolving to it)."""
import json
import os
import re
import socket
import subprocess

import pytest

from conftest import TIMEOUT, base_env
from test_run import Profiles, shell_claude

TEST_HOST = os.environ.get("CSANDBOX_TEST_HOST")
TEST_HOST6 = os.environ.get("CSANDBOX_TEST_HOST6")
BODY = "csandbox-testhost\n"

# "$@" where /dev/net/tun is missing, as on a host without the tun module or in a container
# not given the device: an empty /dev/net in a user and mount namespace of the caller's.
NO_TUN = ["unshare", "-Urm", "sh", "-c", 'mount -t tmpfs none /dev/net && exec "$@"', "sh"]

RELAY_NOTE = "csandbox: the session's network is csandbox's relay, TCP and DNS only"

# What the session tries: a name and its server, UDP out, the host's own addresses.
SESSION = r"""
curl -sS -m 10 http://ok.csandbox.test:8080/; echo "rc=$?"
getent ahostsv4 ok.csandbox.test | head -1
python3 - "$@" <<'PY'
import socket, sys
host, own, port = sys.argv[-3], sys.argv[-2], int(sys.argv[-1])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    s.sendto(b"x" * 32, (host, 9))
    print("udp sent")
except OSError as e:
    print("udp errno", e.errno)
for addr in (own, "169.254.1.2"):
    c = socket.socket()
    c.settimeout(10)
    try:
        c.connect((addr, port))
        c.sendall(b"hello\n")
        print("own", addr, "got", c.recv(10))
    except OSError as e:
        print("own", addr, "refused", e.errno)
    c.close()
PY
"""


@pytest.fixture(scope="module", autouse=True)
def _test_network():
    assert TEST_HOST and TEST_HOST6, (
        "the relay tests need the test host of tests/testnet: run the suite with tests/run")


def own_listener():
    """A server on every address of the host's network namespace (as a service on 0.0.0.0
    would be), whose port the session aims at the host's own address: it must see nobody."""
    srv = socket.socket()
    srv.bind(("0.0.0.0", 0))
    srv.listen(8)
    srv.setblocking(False)
    return srv


def nobody_came(srv):
    try:
        srv.accept()
        return False
    except BlockingIOError:
        return True


def test_run_without_tun_is_relayed_said_once_with_the_fix(tmp_path):
    own = TEST_HOST.rsplit(".", 1)[0] + ".2"  # the host's own (tests/testnet)
    srv = own_listener()
    profiles = Profiles(tmp_path)
    profiles.add()
    shell_claude(profiles, SESSION)
    env = profiles.env()
    cmd = ["run", "work", "--", TEST_HOST, own, str(srv.getsockname()[1])]
    r = subprocess.run([*NO_TUN, os.environ["CSANDBOX"], *cmd], cwd=str(profiles.project),
                       env=env, capture_output=True, text=True, timeout=120,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert BODY in out and "rc=0\n" in out, (out, r.stderr)
    assert re.search(r"^%s\s" % re.escape(TEST_HOST), out, re.M), out  # resolved
    assert "udp errno 1\n" in out, out  # dropped by the session's rules
    # the session's side sees its connection closed (the relay accepted it in the session);
    # the host's side sees nobody
    for addr in (own, "169.254.1.2"):
        assert re.search(r"^own %s (refused|got b'')" % re.escape(addr), out, re.M), out
    assert nobody_came(srv)
    srv.close()
    # said once, with the cause and the fix
    assert r.stderr.count(RELAY_NOTE) == 1, r.stderr
    assert "/dev/net/tun cannot be opened (No such file or directory)" in r.stderr, r.stderr
    assert r.stderr.count("csandbox: for the full network: ") == 1, r.stderr
    assert "modprobe tun" in r.stderr or "--device /dev/net/tun" in r.stderr, r.stderr
    # the refusals are counted at the end
    assert re.search(r"csandbox: relay: 2 connection\(s\) or queries refused", r.stderr), \
        r.stderr
    # plan shows the network the launch will have
    plan = subprocess.run([*NO_TUN, os.environ["CSANDBOX"], "plan", "work"],
                          cwd=str(profiles.project), env=env, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    assert plan.returncode == 0, plan.stderr
    sandbox = json.loads(plan.stdout)
    sandbox = sandbox.get("sandbox", sandbox)
    assert sandbox["net"] == "relay", sandbox["net"]
    assert sandbox["egress"]["mode"] == "open"
    assert sandbox["egress"]["network"]["pasta"] is False
    assert "never to the host's own" in sandbox["egress"]["network"]["tcp"]


def test_exec_net_pasta_without_tun_uses_the_relay(csb):
    r = subprocess.run([*NO_TUN, csb.binary, "exec", "--net", "pasta", "--", "sh", "-c",
                        "curl -sS -m 10 http://ok.v6.csandbox.test:8080/"],
                       capture_output=True, text=True, timeout=60, env=base_env(),
                       stdin=subprocess.DEVNULL, cwd="/")
    assert r.returncode == 0, r.stderr
    assert r.stdout == BODY, r.stdout
    assert r.stderr.count(RELAY_NOTE) == 1, r.stderr


def test_doctor_without_tun_names_the_relay_and_passes(tmp_path):
    from conftest import PROBE

    r = subprocess.run([*NO_TUN, os.environ["CSANDBOX"], "doctor"], capture_output=True,
                       text=True, timeout=120, env=base_env(CLAUDE_PROFILE_CLAUDE_BIN=PROBE),
                       stdin=subprocess.DEVNULL, cwd="/")
    got = {l.split()[1]: l for l in r.stdout.splitlines() if l.split()}
    assert r.returncode == 0, r.stdout + r.stderr
    net = got["network"]
    assert net.startswith("ok") and "csandbox's relay" in net, net
    assert "/dev/net/tun cannot be opened" in net and "for the full network" in net, net
    assert "(open and none can)" in got["egress"] or got["egress"].startswith("ok"), got


def test_run_where_the_machine_has_no_network_says_so(tmp_path):
    """As in a container started with --network none: no route but loopback. The session
    starts without a network and says why, instead of pasta's failure."""
    profiles = Profiles(tmp_path)
    profiles.add()
    shell_claude(profiles, "cat /proc/net/dev | grep -c : ; echo started\n")
    r = subprocess.run(["unshare", "-Urn", os.environ["CSANDBOX"], "run", "work"],
                       cwd=str(profiles.project), env=profiles.env(), capture_output=True,
                       text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1", "started"], r.stdout  # lo only
    assert r.stderr.count("csandbox: the session has no network: ") == 1, r.stderr
    assert "no network beyond loopback" in r.stderr, r.stderr
    assert "pasta failed" not in r.stderr, r.stderr


def test_net_relay_keeps_to_denied_hosts_and_the_host(csb, tmp_path):
    """--net relay where pasta could run too: every name resolves but a denied one, every
    address is reached but a denied range and the host's own; each refusal logged."""
    log = tmp_path / "relay.log"
    prefix = TEST_HOST.rsplit(".", 1)[0]
    r = csb.run(["--net", "relay", "--deny-host", "no.csandbox.test",
                 "--deny-host", f"{TEST_HOST6}/128", "--egress-log", str(log), "--", "sh", "-c",
                 "curl -sS -m 10 http://ok.csandbox.test:8080/; echo rc=$?; "
                 "curl -sS -m 10 http://no.csandbox.test:8080/; echo rc=$?; "
                 f"curl -sS -m 10 http://[{TEST_HOST6}]:8080/; echo rc=$?; "
                 f"curl -sS -m 10 http://{prefix}.3:8080/; echo rc=$?"], timeout=90)
    assert r.returncode == 0, r.stderr
    rcs = re.findall(r"rc=(\d+)", r.stdout)
    assert r.stdout.startswith(BODY) and rcs[0] == "0", r.stdout
    assert rcs[1] == "6", r.stdout  # the denied name does not resolve
    assert rcs[2] != "0" and rcs[3] != "0", r.stdout
    lines = log.read_text().splitlines()
    assert any("dns name=no.csandbox.test" in l and "a denied name" in l for l in lines), lines
    assert any(f"addr={TEST_HOST6} port=8080" in l and "denied range" in l for l in lines), lines
    assert any(f"addr={prefix}.3 port=8080" in l and "the host's own" in l for l in lines), lines
    plan = csb.plan(["--net", "relay", "--deny-host", "no.csandbox.test", "true"])
    assert plan["net"] == "relay" and plan["egress"]["deny"] == ["no.csandbox.test"], plan
    r = csb.run(["--net", "relay", "--allow-host", "ok.csandbox.test", "--", "true"])
    assert r.returncode == 125 and "--egress allowlist" in r.stderr, r.stderr


GREETED = r"""
import socket, sys
c = socket.create_connection(("169.254.1.2", int(sys.argv[1])), timeout=30)
print(c.recv(100).decode().strip() or "nothing")
"""


def test_a_server_that_speaks_first_is_relayed_at_once(csb):
    """The relay reads nothing before it connects (an SSH or SMTP server speaks first): a
    greeting from a server on the host's loopback, mapped, reaches a client that sends
    nothing; the server sees the connection."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    proc = subprocess.Popen([csb.binary, "exec", "--net", "relay", "--map-host-loopback", "--",
                             "python3", "-c", GREETED, str(port)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=base_env(),
                            stdin=subprocess.DEVNULL, cwd="/")
    try:
        srv.settimeout(TIMEOUT)
        conn, _ = srv.accept()
        conn.sendall(b"220 greeting\r\n")
        out, err = proc.communicate(timeout=TIMEOUT)
        conn.close()
    finally:
        proc.kill()
        srv.close()
    assert proc.returncode == 0, err
    assert out == "220 greeting\n", (out, err)
