"""Egress policy (--egress allowlist): every program of the session, proxy-aware or not,
reaches only the allowed names, through csandbox's proxy (the name from TLS SNI or the HTTP
Host, the address from csandbox's own resolver, and the two must agree); DNS answers only
allowed names; other UDP goes nowhere. The suite runs in tests/testnet's network, whose test
host (CSANDBOX_TEST_HOST) serves HTTP on 8080 and resolves NAME.csandbox.test to itself
(NAME.v6.csandbox.test to its IPv6 address too)."""
import json
import os
import re
import ssl
import subprocess

import pytest

from conftest import base_env

TEST_HOST = os.environ.get("CSANDBOX_TEST_HOST")
TEST_HOST6 = os.environ.get("CSANDBOX_TEST_HOST6")
BODY = "csandbox-testhost\n"


@pytest.fixture(scope="module", autouse=True)
def _test_network():
    assert TEST_HOST and TEST_HOST6, (
        "the egress tests need the test host of tests/testnet: run the suite with tests/run")


def allowlist(csb, tmp_path, hosts, cmd, timeout=60):
    """Run cmd under --egress allowlist with hosts; (result, the refusal log's lines)."""
    log = tmp_path / "egress.log"
    args = ["--egress", "allowlist", "--egress-log", str(log)]
    for h in hosts:
        args += ["--allow-host", h]
    r = csb.run([*args, "--", *cmd], timeout=timeout)
    lines = log.read_text().splitlines() if log.exists() else []
    return r, lines


def curl(url, *extra):
    return ["curl", "-sS", "-m", "10", "--noproxy", "*", *extra, url]


# A ClientHello with SNI `name` sent by a raw socket to `addr` (after resolving `resolve`,
# when given); prints what came back ("relayed" when the test host answered).
HELLO = r"""
import socket, ssl, sys
name, addr, resolve = sys.argv[1], sys.argv[2], sys.argv[3]
if resolve != "-":
    socket.getaddrinfo(resolve, 8080, socket.AF_UNSPEC, socket.SOCK_STREAM)
ctx = ssl.create_default_context()
inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
tls = ctx.wrap_bio(inc, out, server_hostname=name)
try:
    tls.do_handshake()
except ssl.SSLWantReadError:
    pass
hello = out.read()
fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
s = socket.socket(fam)
s.settimeout(10)
s.connect((addr, 8080))
s.sendall(hello)
try:
    got = s.recv(100)
except OSError as e:
    got = b""
print("relayed" if got.startswith(b"HTTP/1.0 200") else "refused")
"""


def test_allowed_name_reached_by_a_proxy_unaware_client_others_refused(csb, tmp_path):
    r, log = allowlist(csb, tmp_path, ["ok.csandbox.test"], [
        "sh", "-c", "curl -sS -m 10 --noproxy '*' http://ok.csandbox.test:8080/; "
        "echo rc=$?; curl -sS -m 10 --noproxy '*' http://no.csandbox.test:8080/; echo rc=$?"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(BODY), r.stdout
    # the denied name does not even resolve
    assert "rc=0\n" in r.stdout and "rc=6\n" in r.stdout, (r.stdout, r.stderr)
    assert any(" dns name=no.csandbox.test " in line and "name not allowed" in line
               for line in log), log
    assert not any("ok.csandbox.test" in line for line in log), log


def test_a_large_download_through_the_proxy_arrives_whole(csb, tmp_path):
    """The relay (spliced through pipes) carries 64 MiB byte for byte."""
    n = 64 << 20
    r, log = allowlist(csb, tmp_path, ["big.csandbox.test"], [
        "sh", "-c", f"curl -sS -m 60 --noproxy '*' http://big.csandbox.test:8080/big/{n} | "
        "python3 -c 'import sys; d = sys.stdin.buffer.read(); print(len(d), d.count(0))'"],
        timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(n), str(n)], (r.stdout, r.stderr)
    assert log == []


def test_a_raw_address_is_refused(csb, tmp_path):
    r, log = allowlist(csb, tmp_path, ["ok.csandbox.test"],
                       curl(f"http://{TEST_HOST}:8080/"))
    assert r.returncode != 0 and BODY not in r.stdout
    assert any(f"addr={TEST_HOST} port=8080 refused" in line for line in log), log


def test_a_host_header_lie_is_refused(csb, tmp_path):
    """The Host names an allowed host, the connection goes to an address the session's
    resolver never gave for it."""
    r, log = allowlist(csb, tmp_path, ["ok.csandbox.test"],
                       curl(f"http://{TEST_HOST}:8080/", "-H", "Host: ok.csandbox.test"))
    assert r.returncode != 0 and BODY not in r.stdout
    assert any("name=ok.csandbox.test" in line and "resolver" in line for line in log), log


def test_sni_of_an_allowed_name_must_go_to_its_resolved_address(csb, tmp_path):
    code = ["python3", "-c", HELLO]
    # resolved first, to the address it resolves to: relayed (the proxy never decrypts)
    r, _ = allowlist(csb, tmp_path, ["ok.csandbox.test"],
                     [*code, "ok.csandbox.test", TEST_HOST, "ok.csandbox.test"])
    assert r.stdout.strip() == "relayed", (r.stdout, r.stderr)
    # never resolved in this session: refused
    r, log = allowlist(csb, tmp_path, ["ok.csandbox.test"],
                       [*code, "ok.csandbox.test", TEST_HOST, "-"])
    assert r.stdout.strip() == "refused", (r.stdout, r.stderr)
    # resolved, but sent to another address (the host's IPv6 one, never given for it)
    r, log = allowlist(csb, tmp_path, ["ok.csandbox.test"],
                       [*code, "ok.csandbox.test", TEST_HOST6, "ok.csandbox.test"])
    assert r.stdout.strip() == "refused", (r.stdout, r.stderr)
    assert any(f"addr={TEST_HOST6}" in line for line in log), log
    # a denied name's SNI to the allowed name's address
    r, log = allowlist(csb, tmp_path, ["ok.csandbox.test"],
                       [*code, "no.csandbox.test", TEST_HOST, "ok.csandbox.test"])
    assert r.stdout.strip() == "refused", (r.stdout, r.stderr)
    assert any("name=no.csandbox.test" in line and "name not allowed" in line
               for line in log), log


# A DNS query straight to the session's resolver; prints the response code.
DNS = r"""
import socket, struct, sys
name, qtype = sys.argv[1], int(sys.argv[2])
q = struct.pack("!HHHHHH", 7, 0x0100, 1, 0, 0, 0)
q += b"".join(bytes([len(x)]) + x.encode() for x in name.split(".")) + b"\0"
q += struct.pack("!HH", qtype, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(5)
s.sendto(q, ("169.254.1.3", 53))
a = s.recv(600)
print(a[3] & 15, struct.unpack("!H", a[6:8])[0])
"""


@pytest.mark.parametrize("qtype", [1, 28, 16])
def test_dns_for_a_denied_name_is_refused(csb, tmp_path, qtype):
    r, log = allowlist(csb, tmp_path, ["ok.csandbox.test"],
                       ["python3", "-c", DNS, "data.no.csandbox.test", str(qtype)])
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["5", "0"]  # REFUSED, no answers
    assert any("dns name=data.no.csandbox.test" in line for line in log), log


def test_dns_for_an_allowed_name_is_answered(csb, tmp_path):
    r, _ = allowlist(csb, tmp_path, ["ok.csandbox.test"],
                     ["python3", "-c", DNS, "ok.csandbox.test", "1"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "1"]


# A query for a name whose lookup hangs (the test host never answers for *.slow.csandbox.test),
# sent 12 times as a client's retries are (the same id), more than the resolver's 8 lookup
# workers; then one for an allowed name that resolves; prints the first answer's id, code,
# count.
SLOW_DNS = r"""
import socket, struct
def query(qid, name):
    q = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(x)]) + x.encode() for x in name.split(".")) + b"\0"
    return q + struct.pack("!HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(60)
for _ in range(12):
    s.sendto(query(1, "x.slow.csandbox.test"), ("169.254.1.3", 53))
s.sendto(query(2, "ok.csandbox.test"), ("169.254.1.3", 53))
a = s.recv(600)
print(struct.unpack("!H", a[:2])[0], a[3] & 15, struct.unpack("!H", a[6:8])[0])
"""


def test_a_lookup_that_hangs_does_not_hold_up_another_name(csb, tmp_path):
    """The resolver looks names up beside each other, and a retry of a query being looked up
    takes no second worker: the answer for ok.csandbox.test comes first although its query
    came after one whose lookup never ends and its 11 retries (answered in order, or with
    every worker taken by the retries, the hanging one's SERVFAIL would come first, after
    the host resolver's time-outs)."""
    r, log = allowlist(csb, tmp_path, ["ok.csandbox.test", "x.slow.csandbox.test"],
                       ["python3", "-c", SLOW_DNS], timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["2", "0", "1"], (r.stdout, r.stderr)
    assert log == [], log


UDP = r"""
import socket, sys
s = socket.socket(socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET, socket.SOCK_DGRAM)
try:
    s.sendto(b"x" * 32, (sys.argv[1], int(sys.argv[2])))
    print("sent")
except OSError as e:
    print("errno", e.errno)
"""


@pytest.mark.parametrize("which", ["4", "6"])
@pytest.mark.parametrize("port", ["8080", "443"])
def test_udp_goes_nowhere(csb, tmp_path, which, port):
    addr = TEST_HOST if which == "4" else TEST_HOST6
    r, _ = allowlist(csb, tmp_path, ["ok.csandbox.test", f"{addr}/32" if which == "4"
                                     else f"{addr}/128"], ["python3", "-c", UDP, addr, port])
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "errno 1", r.stdout  # EPERM: the rules drop it


def test_ipv6_as_ipv4(csb, tmp_path):
    r, log = allowlist(csb, tmp_path, ["ok.v6.csandbox.test"], [
        "sh", "-c", "curl -6 -sS -m 10 --noproxy '*' http://ok.v6.csandbox.test:8080/; "
        f"echo rc=$?; curl -sS -m 10 --noproxy '*' 'http://[{TEST_HOST6}]:8080/'; echo rc=$?"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(BODY + "rc=0\n"), (r.stdout, r.stderr)
    assert r.stdout.count(BODY) == 1
    assert any(f"addr={TEST_HOST6} port=8080" in line for line in log), log


def test_an_address_range_allows_raw_addresses(csb, tmp_path):
    r, log = allowlist(csb, tmp_path, [f"{TEST_HOST}/32"], curl(f"http://{TEST_HOST}:8080/"))
    assert r.returncode == 0, r.stderr
    assert r.stdout == BODY and log == []


def test_allowlist_without_entries_runs_a_session_and_reports(csb, tmp_path):
    r, log = allowlist(csb, tmp_path, [], ["sh", "-c", "echo hi; cat /etc/resolv.conf"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("hi\n") and "nameserver 169.254.1.3" in r.stdout
    assert re.search(r"csandbox: egress: 0 connection\(s\) or queries refused; each is in "
                     + re.escape(str(tmp_path / "egress.log")), r.stderr), r.stderr
    plan = csb.plan(["--egress", "allowlist", "--", "true"])
    assert plan["egress"]["mode"] == "allowlist"
    assert {"host": "api.anthropic.com:443", "builtin": True} in plan["egress"]["allow"]
    assert plan["net_helper"] is None  # no pasta


def children(pid):
    """{pid: command name} of pid's children."""
    got = {}
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/stat") as f:
                comm, rest = f.read().split(" (", 1)[1].rsplit(") ", 1)
        except (OSError, ValueError, IndexError):
            continue
        if int(rest.split()[1]) == pid:
            got[int(name)] = comm
    return got


def test_the_plan_shows_the_network_an_allowlist_session_gets(csb):
    """Not pasta's: loopback only, with the plan's addresses, every route to it, the plan's
    resolver; and no pasta runs beside the session."""
    plan = csb.plan(["--egress", "allowlist", "--", "true"])
    assert plan["net"] == "egress-proxy" and plan["net_helper"] is None, plan["net"]
    net = plan["egress"]["network"]
    assert net["pasta"] is False and net["interfaces"] == "lo only"
    p = subprocess.Popen([csb.binary, "exec", "--egress", "allowlist", "--", "sh", "-c",
                          "ls /sys/class/net; ip -o addr; ip route; ip -6 route; "
                          "grep ^nameserver /etc/resolv.conf; echo up; read x"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=base_env())
    out = []
    for line in p.stdout:
        out.append(line)
        if line == "up\n":
            break
    kids = children(p.pid)
    rest, err = p.communicate("\n", timeout=60)
    assert p.returncode == 0, err
    out = "".join(out)
    assert "pasta" not in kids.values() and "slirp4netns" not in kids.values(), kids
    assert out.split("\n")[0] == "lo", out  # the only interface
    addrs = set(re.findall(r"inet6? ([0-9a-f.:]+)/", out))
    assert addrs == set(net["loopback_addresses"]), (addrs, net)
    assert re.search(r"^default dev lo .*src 169\.254\.1\.1", out, re.M), out
    assert re.search(r"^default dev lo .*src fd00:c5b::1", out, re.M), out
    nameserver = re.search(r"^nameserver (\S+)", out, re.M).group(1)
    assert f"resolv.conf: {nameserver})" in net["dns"], (nameserver, net["dns"])


def test_refusals_are_counted_on_stderr(csb, tmp_path):
    r, log = allowlist(csb, tmp_path, [], curl(f"http://{TEST_HOST}:8080/"))
    assert r.returncode != 0
    assert "csandbox: egress: 1 connection(s) or queries refused" in r.stderr, r.stderr
    assert len(log) == 1 and re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ tcp ", log[0]), log


def test_egress_none_has_no_network(csb):
    plan = csb.plan(["--egress", "none", "--net", "pasta", "--", "true"])
    assert plan["net"] == "none" and plan["egress"]["mode"] == "none"


@pytest.mark.parametrize("args,word", [
    (["--egress", "wide"], "--egress"),
    (["--egress", "allowlist", "--allow-host", "a b"], "--allow-host"),
    (["--egress", "allowlist", "--allow-host", "x.test:99999"], "--allow-host"),
    (["--allow-host", "x.test"], "--egress allowlist"),
    (["--egress", "allowlist", "--net", "host"], "--net host"),
])
def test_bad_values_exit_125_naming_the_flag(csb, args, word):
    r = csb.run([*args, "--", "true"])
    assert r.returncode == 125, r.stderr
    assert word in r.stderr, r.stderr


def test_run_settings_bad_values_exit_125_naming_the_setting(csb, tmp_path):
    home = tmp_path / "home"
    (home / ".claude-profiles" / "w").mkdir(parents=True)
    for extra, word in [({"CLAUDE_PROFILE_SANDBOX_EGRESS": "wide"}, "CLAUDE_PROFILE_SANDBOX_EGRESS"),
                        ({"CLAUDE_PROFILE_SANDBOX_EGRESS": "allowlist",
                          "CLAUDE_PROFILE_SANDBOX_ALLOW_HOSTS": "ok.test,bad host"},
                         "CLAUDE_PROFILE_SANDBOX_ALLOW_HOSTS"),
                        ({"CLAUDE_PROFILE_SANDBOX_ALLOW_HOSTS": "ok.test"},
                         "CLAUDE_PROFILE_SANDBOX_EGRESS")]:
        r = subprocess.run([csb.binary, "plan", "w"], capture_output=True, text=True,
                           env=base_env(HOME=str(home), **extra), cwd=str(tmp_path), timeout=30)
        assert r.returncode == 125, (extra, r.stderr)
        assert word in r.stderr, r.stderr


def test_the_hosts_own_addresses_stay_unreachable_even_in_an_allowed_range(csb, tmp_path):
    """The proxy connects from the host's network: the host's own addresses (tests/testnet
    gives it 198.51.100.2 and .3) are refused whatever the list says."""
    prefix = TEST_HOST.rsplit(".", 1)[0]
    r, log = allowlist(csb, tmp_path, [f"{prefix}.0/24"],
                       ["sh", "-c", f"curl -sS -m 10 --noproxy '*' http://{prefix}.3:8080/; "
                        f"echo rc=$?; curl -sS -m 10 --noproxy '*' http://{TEST_HOST}:8080/"])
    assert r.stdout.endswith(BODY), (r.stdout, r.stderr)
    assert "rc=0" not in r.stdout
    assert any(f"addr={prefix}.3 port=8080 refused: the host's own" in line for line in log), log


def test_where_nftables_is_refused_the_launch_is_refused_saying_why(csb, tmp_path):
    """An outer sandbox whose filter refuses netfilter's netlink socket (as a container
    engine's may): the inner allowlist session does not start, and says why."""
    prof = tmp_path / "no-nftables.json"
    prof.write_text(json.dumps({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [
        {"names": ["socket"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1, "args": [
            {"index": 0, "value": 16, "op": "SCMP_CMP_EQ"},      # AF_NETLINK
            {"index": 2, "value": 12, "op": "SCMP_CMP_EQ"}]}]}))  # NETLINK_NETFILTER
    inner = "/opt/csandbox-inner"
    r = csb.run(["--seccomp", str(prof), "--ro-bind", csb.binary, inner, "--", inner, "exec",
                 "--egress", "allowlist", "--", "echo", "started"])
    assert r.returncode == 125, (r.stdout, r.stderr)
    assert "started" not in r.stdout
    assert "nftables cannot be used" in r.stderr and "does not start it" in r.stderr, r.stderr
    # the same outer sandbox runs an open session
    r = csb.run(["--seccomp", str(prof), "--ro-bind", csb.binary, inner, "--", inner, "exec",
                 "--", "echo", "started"])
    assert r.returncode == 0 and r.stdout == "started\n", r.stderr


def test_run_takes_the_policy_from_the_profile_settings(tmp_path):
    from test_run import Profiles

    profiles = Profiles(tmp_path)
    profiles.add()
    env = profiles.env(CLAUDE_PROFILE_SANDBOX_EGRESS="allowlist",
                       CLAUDE_PROFILE_SANDBOX_ALLOW_HOSTS="ok.csandbox.test, *.svc.test:8443")
    plan = profiles.plan(env=env)
    sandbox = plan.get("sandbox", plan)
    assert sandbox["egress"]["mode"] == "allowlist"
    hosts = [h["host"] for h in sandbox["egress"]["allow"]]
    assert hosts[:2] == ["ok.csandbox.test", "*.svc.test:8443"] and "claude.ai:443" in hosts
    assert sandbox["egress"]["log"].startswith(str(profiles.state()) + "/egress-")
    r = profiles.run(env=env)
    assert r.returncode == 0, r.stderr
    argv = json.loads(r.stdout)["argv"]
    brief = argv[argv.index("--append-system-prompt") + 1]
    assert "reaches only these hosts" in brief and "ok.csandbox.test, *.svc.test:8443" in brief
    m = re.search(r"csandbox: egress: 0 connection\(s\) or queries refused; each is in (\S+)",
                  r.stderr)
    assert m and m.group(1).startswith(str(profiles.state()) + "/egress-"), r.stderr
    # without a setting, nothing changes: no egress line, an open network
    r = profiles.run()
    assert r.returncode == 0 and "egress" not in r.stderr, r.stderr
