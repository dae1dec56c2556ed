"""Networking: pasta in the sandbox's own network namespace, the host-loopback mapping, no
leaks. The suite runs in the csbt-host network namespace that tests/testnet makes, with a
test host at CSANDBOX_TEST_HOST (HTTP on 8080, DNS on 53): nothing here can reach any other
address."""
import json
import os
import shutil
import signal
import socket
import subprocess
import threading

import pytest

from conftest import HOST_PROBE, base_env, parse_json, procs_with, read_line, wait_until

TEST_HOST = os.environ.get("CSANDBOX_TEST_HOST")
TEST_HOST6 = os.environ.get("CSANDBOX_TEST_HOST6")
MAPPED = "169.254.1.2"
DNS = "169.254.1.3"


@pytest.fixture(scope="module", autouse=True)
def _test_network():
    assert TEST_HOST and TEST_HOST6, (
        "the network tests need the test host of tests/testnet: run the suite with tests/run")


def pasta_procs():
    """Our own pasta/slirp4netns processes, zombies included: the user's, in this network
    namespace (where pasta runs for a sandbox started here), so another run of the suite in
    a test network of its own does not count."""
    found = []
    own_net = os.readlink("/proc/self/ns/net")
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                comm = f.read().split(" (", 1)[1].split(")", 1)[0]
            if os.stat(f"/proc/{name}").st_uid != os.getuid():
                continue
            # A zombie has no namespace links left: it is counted.
            net = os.readlink(f"/proc/{name}/ns/net") if os.path.exists(f"/proc/{name}/ns/net") else own_net
            if net != own_net:
                continue
        except (OSError, IndexError):
            continue
        if comm.startswith(("passt", "pasta", "slirp4netns")):
            found.append(int(name))
    return found


class LoopbackServer:
    """A TCP server on the host (by default its 127.0.0.1) that counts the connections it
    accepts."""

    def __init__(self, family=socket.AF_INET, addr=("127.0.0.1", 0)):
        self.sock = socket.socket(family)
        if family == socket.AF_INET6:
            self.sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        self.sock.bind(addr)
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.hits = 0
        self.requests = []
        self.stop = False
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.hits += 1
            conn.settimeout(2)
            try:
                self.requests.append(conn.recv(4096))
                conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
            except OSError:
                pass
            conn.close()

    def close(self):
        self.stop = True
        self.thread.join()
        self.sock.close()


@pytest.fixture
def loopback_server():
    srv = LoopbackServer()
    yield srv
    srv.close()


def probe(csb, *args, opts=("--net", "pasta"), rootfs=None, **kw):
    return csb.probe(*args, opts=list(opts), rootfs=rootfs, **kw)


def test_pasta_gives_ipv4_egress_to_the_test_host(csb):
    assert probe(csb, "connect", TEST_HOST, "8080")["errno"] == "ok"


def test_pasta_gives_ipv6_egress_to_the_test_host(csb):
    assert probe(csb, "connect", TEST_HOST6, "8080")["errno"] == "ok"


def test_pasta_egress_from_a_busybox_rootfs(csb, rootfs):
    r = csb.run(["--net", "pasta", "--rootfs", rootfs, "--", "/bin/busybox", "wget", "-q", "-O", "-",
                 f"http://{TEST_HOST}:8080/"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "csandbox-testhost\n"


def test_pasta_works_for_a_caller_that_ignores_sigpipe(csb, rootfs):
    """nohup, some CI runners and csandbox's own image build start csandbox with SIGPIPE
    ignored, which the process keeps across exec; this pasta then exited with `Couldn't
    install signal handlers` and the launch failed."""
    r = subprocess.run([csb.binary, "exec", "--net", "pasta", "--rootfs", rootfs, "--",
                        "/bin/busybox", "wget", "-q", "-O", "-", f"http://{TEST_HOST}:8080/"],
                       capture_output=True, text=True, timeout=60, env=base_env(),
                       stdin=subprocess.DEVNULL,
                       preexec_fn=lambda: signal.signal(signal.SIGPIPE, signal.SIG_IGN))
    assert r.returncode == 0, r.stderr
    assert r.stdout == "csandbox-testhost\n"


def test_net_none_reaches_nothing_but_its_own_loopback(csb, loopback_server):
    r = probe(csb, "connect", TEST_HOST, "8080", opts=["--net", "none"])
    assert r["errno"] == "ENETUNREACH"
    r = probe(csb, "connect", "127.0.0.1", str(loopback_server.port), opts=["--net", "none"])
    assert r["errno"] == "ECONNREFUSED"
    assert loopback_server.hits == 0


def test_host_loopback_unreachable_through_pasta_by_default(csb, loopback_server):
    port = str(loopback_server.port)
    assert probe(csb, "connect", "127.0.0.1", port)["errno"] == "ECONNREFUSED"
    assert probe(csb, "connect", MAPPED, port)["errno"] != "ok"
    # The gateway is the test host itself, not a door to the host's loopback.
    assert probe(csb, "connect", TEST_HOST, port)["errno"] != "ok"
    assert loopback_server.hits == 0


IP = "/usr/sbin/ip"

# The attacker inside: waits until its own link-local address is usable (DAD done, else a
# link-local connect fails for that reason alone), then connects to each address given and
# reports its own addresses and, per target, "ok" or the errno.
ATTACKER = r"""
import errno, json, socket, subprocess, sys, time
targets, port = json.loads(sys.argv[1]), int(sys.argv[2])
def links():
    with open("/proc/net/if_inet6") as f:
        rows = [l.split() for l in f]
    return [r for r in rows if r[5] != "lo" and int(r[3], 16) == 0x20]
end = time.monotonic() + 20
while not [r for r in links() if not int(r[4], 16) & 0x40]:
    assert time.monotonic() < end, "the sandbox's link-local address stays tentative"
    time.sleep(0.05)
scope = int(links()[0][1], 16)
own = [a["local"] for i in json.loads(subprocess.check_output([sys.argv[3], "-j", "addr"]))
       for a in i["addr_info"]]
out = {}
for addr, p in targets:
    six = ":" in addr
    s = socket.socket(socket.AF_INET6 if six else socket.AF_INET)
    s.settimeout(3)
    try:
        s.connect((addr, p, 0, scope if addr.startswith("fe80") else 0) if six else (addr, p))
        out[addr + " " + str(p)] = "ok"
    except OSError as e:
        out[addr + " " + str(p)] = errno.errorcode.get(e.errno, "timeout")
    s.close()
print(json.dumps({"own": own, "results": out}))
"""


def host_addresses():
    """Every address of the test host namespace but loopback: (address, scope)."""
    out = json.loads(subprocess.check_output([IP, "-j", "addr"]))
    return [(a["local"], a["scope"]) for i in out if i["ifname"] != "lo"
            for a in i["addr_info"]]


def attack(csb, targets, opts=("--net", "pasta")):
    r = csb.run([*opts, "--", "/usr/bin/python3", "-c", ATTACKER,
                 json.dumps(targets), "0", IP], timeout=60)
    return parse_json(r)


@pytest.fixture
def host_listeners():
    """Listeners on the test host: one on [::] (both families), one on the link-local
    address, one on a secondary IPv4 address (tests/testnet adds it)."""
    addrs = host_addresses()
    link = [a for a, scope in addrs if scope == "link"]
    secondary = [a for a, _ in addrs if a == "198.51.100.3"]
    assert link and secondary, f"tests/testnet gives csbt-h0 a link-local and 198.51.100.3: {addrs}"
    ifindex = socket.if_nametoindex("csbt-h0")
    servers = {"any": LoopbackServer(socket.AF_INET6, ("::", 0)),
               "link": LoopbackServer(socket.AF_INET6, (link[0], 0, 0, ifindex)),
               "secondary": LoopbackServer(socket.AF_INET, (secondary[0], 0))}
    yield addrs, link[0], secondary[0], servers
    for srv in servers.values():
        srv.close()


def test_host_addresses_unreachable_through_pasta(csb, host_listeners):
    addrs, link, secondary, srv = host_listeners
    targets = [[a, srv["any"].port] for a, _ in addrs]
    targets += [[link, srv["link"].port], [secondary, srv["secondary"].port],
                [TEST_HOST, 8080]]
    r = attack(csb, targets)
    res, own = r["results"], r["own"]
    # The test host behind the host stays reachable: the defence is not "no network".
    assert res.pop(f"{TEST_HOST} 8080") == "ok", r
    # Addresses the sandbox has itself are its own (nothing listens there); every other
    # host address is refused by the sandbox's own routing, before any packet leaves.
    for key, outcome in res.items():
        expected = "ECONNREFUSED" if key.split()[0] in own else "ENETUNREACH"
        assert outcome == expected, (key, r)
    assert link not in own and secondary not in own, r
    assert all(s.hits == 0 for s in srv.values()), {k: s.hits for k, s in srv.items()}


def test_run_session_cannot_reach_host_addresses(csb, tmp_path, host_listeners):
    """`run` (pasta, the embedded default root) with a claude that tries the host's
    link-local and secondary addresses and reports what it got."""
    _, link, secondary, srv = host_listeners
    home = tmp_path / "home"
    (home / ".claude-profiles" / "work").mkdir(parents=True)
    (home / ".claude-profiles" / "work" / ".sandbox").touch()
    (home / "src").mkdir()
    claude = tmp_path / "claude"
    targets = [[link, srv["link"].port], [secondary, srv["secondary"].port],
               [TEST_HOST, 8080]]
    claude.write_text(f"#!/bin/sh\nexec /usr/bin/python3 - '{json.dumps(targets)}' 0 {IP} "
                      f"<<'EOF'\n{ATTACKER}\nEOF\n")
    claude.chmod(0o755)
    r = subprocess.run([csb.binary, "run", "work"],
                       cwd=home / "src", capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL,
                       env=base_env(HOME=str(home), XDG_DATA_HOME=str(tmp_path / "data"),
                                    CLAUDE_PROFILE_CLAUDE_BIN=str(claude),
                                    CLAUDE_PROFILE_PROFILES_BASE=None, XDG_RUNTIME_DIR=None))
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)["results"]
    assert res == {f"{link} {srv['link'].port}": "ENETUNREACH",
                   f"{secondary} {srv['secondary'].port}": "ENETUNREACH",
                   f"{TEST_HOST} 8080": "ok"}, r.stdout
    assert all(s.hits == 0 for s in srv.values())


def test_host_secondary_address_unreachable_through_slirp4netns(csb, tmp_path,
                                                                 host_listeners):
    _, _, secondary, srv = host_listeners
    bindir = tmp_path / "bin"
    bindir.mkdir()
    os.symlink(shutil.which("slirp4netns"), bindir / "slirp4netns")
    r = csb.run(["--net", "pasta", "--ro-bind", csb.probe_path, HOST_PROBE, "--", HOST_PROBE,
                 "connect", secondary, str(srv["any"].port)], env=base_env(PATH=str(bindir)))
    assert parse_json(r)["errno"] == "ENETUNREACH"
    assert srv["any"].hits == 0


def test_map_host_loopback_reaches_host_127_at_169_254_1_2(csb, loopback_server):
    r = probe(csb, "connect", MAPPED, str(loopback_server.port),
              opts=["--net", "pasta", "--map-host-loopback"])
    assert r["errno"] == "ok"
    assert wait_until(lambda: loopback_server.hits == 1, 5)
    # Egress still works with the mapping on.
    r = probe(csb, "connect", TEST_HOST, "8080", opts=["--net", "pasta", "--map-host-loopback"])
    assert r["errno"] == "ok"


def test_map_host_loopback_http_request_arrives_on_host(csb, rootfs, loopback_server):
    r = csb.run(["--net", "pasta", "--map-host-loopback", "--rootfs", rootfs, "--",
                 "/bin/busybox", "wget", "-q", "-O", "-", f"http://{MAPPED}:{loopback_server.port}/hook"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "ok\n"
    assert loopback_server.requests and loopback_server.requests[0].startswith(b"GET /hook ")


def test_generated_resolv_conf_points_at_the_dns_forwarder(csb):
    r = probe(csb, "read", "/etc/resolv.conf")
    assert [l for l in r["content"].splitlines() if not l.startswith("#")] == [f"nameserver {DNS}"]


def test_dns_query_through_pasta_reaches_the_test_resolver(csb):
    r = probe(csb, "dns-a", "www.csandbox.test", DNS)
    assert r == {"errno": "ok", "address": TEST_HOST}


def test_generated_etc_files_match_the_network_and_are_read_only(csb):
    hosts = probe(csb, "read", "/etc/hosts", opts=["--net", "pasta", "--hostname", "boxy"])
    assert "127.0.0.1\tlocalhost" in hosts["content"]
    assert "\tboxy" in hosts["content"]
    assert MAPPED not in hosts["content"]
    mapped = probe(csb, "read", "/etc/hosts", opts=["--net", "pasta", "--map-host-loopback"])
    assert f"{MAPPED}\thost.containers.internal" in mapped["content"]
    name = probe(csb, "read", "/etc/hostname", opts=["--net", "pasta", "--hostname", "boxy"])
    assert name["content"] == "boxy\n"
    none = probe(csb, "read", "/etc/resolv.conf", opts=["--net", "none"])
    assert "nameserver" not in none["content"]
    w = probe(csb, "write", "/etc/resolv.conf", "nameserver 1.2.3.4\n")
    assert w["errno"] in ("EROFS", "EACCES")


def test_net_host_keeps_the_hosts_own_resolv_conf(csb):
    with open("/etc/resolv.conf") as f:
        host = f.read()
    r = probe(csb, "read", "/etc/resolv.conf", opts=["--net", "host"])
    assert r["content"] == host


def test_abstract_unix_socket_on_host_unreachable(csb):
    name = f"csbt-abstract-{os.getpid()}"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind("\0" + name)
    s.listen(4)
    try:
        for net in ("pasta", "none"):
            r = probe(csb, "connect-unix", "@" + name, opts=["--net", net])
            assert r["errno"] == "ECONNREFUSED", net
        # The contrast that shows the test can see a hit: the host's network shares them.
        assert probe(csb, "connect-unix", "@" + name, opts=["--net", "host"])["errno"] == "ok"
    finally:
        s.close()


def test_host_proxy_variables_never_reach_the_sandbox(csb):
    env = base_env(http_proxy="http://user:secret@proxy:3128", HTTPS_PROXY="http://p:1",
                   no_proxy="localhost", ALL_PROXY="socks5://p:2", ftp_proxy="http://p:3")
    r = probe(csb, env=env)
    leaked = [k for k in r["env"] if k.lower().endswith("_proxy")]
    assert leaked == []
    # Forwarding one by name is the way to get it.
    r = probe(csb, opts=["--net", "pasta", "--setenv", "https_proxy", "http://p:1"], env=env)
    assert r["env"].get("https_proxy") == "http://p:1" and "http_proxy" not in r["env"]


def test_hundred_pasta_launches_leave_no_pasta_behind(csb, rootfs):
    for _ in range(100):
        r = csb.run(["--net", "pasta", "--rootfs", rootfs, "--", "/bin/true"])
        assert r.returncode == 0, r.stderr
    assert wait_until(lambda: not pasta_procs(), 10), pasta_procs()


def test_sigkill_of_csandbox_leaves_neither_pasta_nor_payload(csb, marker):
    proc = csb.popen(["--net", "pasta", "--ro-bind", csb.probe_path, HOST_PROBE, "--",
                      HOST_PROBE, "spawn-sleeper", "300", marker])
    try:
        assert read_line(proc.stdout) == "ready\n", proc.stderr.read1().decode()
        assert pasta_procs(), "pasta should run while the sandbox does"
        proc.kill()
        proc.wait(timeout=30)
        assert wait_until(lambda: not procs_with(marker) and not pasta_procs()), (
            procs_with(marker), pasta_procs())
    finally:
        for pid in procs_with(marker) + pasta_procs():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_setup_error_with_pasta_leaves_no_pasta(csb):
    r = csb.run(["--net", "pasta", "--ro-bind", "/etc/hostname", "/no/such/host/dir", "--",
                 "true"])
    assert r.returncode == 125
    assert wait_until(lambda: not pasta_procs(), 10), pasta_procs()


def test_a_setup_error_is_reported_rather_than_pasta_losing_its_namespace(csb):
    """pid 1 failing takes its namespaces, and so pasta's target, with it: pasta then fails
    too, and whichever csandbox hears of first, the cause reported is the set-up error
    (40 launches, as the order of the two is a race: before the fix, 7 in 40 blamed pasta)."""
    for _ in range(40):
        r = csb.run(["--net", "pasta", "--ro-bind", "/etc/hostname", "/no/such/host/dir", "--",
                     "true"])
        assert r.returncode == 125, r.stderr
        assert "/no/such/host/dir" in r.stderr and "pasta failed" not in r.stderr, r.stderr


def test_missing_pasta_is_a_clear_error(csb, tmp_path):
    r = csb.run(["--net", "pasta", "--", "true"], env=base_env(PATH=str(tmp_path)))
    assert r.returncode == 125
    err = r.stderr
    assert err.startswith("csandbox: --net pasta:"), err
    assert "pasta" in err and "apt-get install passt" in err
    assert "--net host" in err and "127.0.0.1" in err, err


def test_slirp4netns_is_the_fallback_without_pasta(csb, tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    os.symlink(shutil.which("slirp4netns"), bindir / "slirp4netns")
    r = csb.run(["--net", "pasta", "--ro-bind", csb.probe_path, HOST_PROBE, "--", HOST_PROBE,
                 "connect", TEST_HOST, "8080"], env=base_env(PATH=str(bindir)))
    assert r.returncode == 0, r.stderr
    assert parse_json(r)["errno"] == "ok"
    assert "using" in r.stderr and "slirp4netns" in r.stderr
    r = csb.run(["--net", "pasta", "--ro-bind", csb.probe_path, HOST_PROBE, "--", HOST_PROBE,
                 "dns-a", "a.csandbox.test", DNS], env=base_env(PATH=str(bindir)))
    assert parse_json(r) == {"errno": "ok", "address": TEST_HOST}
    r = csb.run(["--net", "pasta", "--map-host-loopback", "--", "true"],
                env=base_env(PATH=str(bindir)))
    assert r.returncode == 125 and "--map-host-loopback needs pasta" in r.stderr
    assert wait_until(lambda: not pasta_procs(), 10), pasta_procs()


def fake_pasta(tmp_path, body):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "pasta").write_text("#!/bin/sh\n" + body)
    (bindir / "pasta").chmod(0o755)
    return base_env(PATH=f"{bindir}:/usr/bin:/bin")


def test_pasta_failure_is_summarised_without_syslog_noise_and_names_a_fix(csb, tmp_path):
    # What pasta prints as root without --runas, or when a security module confines it.
    env = fake_pasta(tmp_path, """
for l in "Failed to send 47 bytes to syslog" "Don't run as root. Changing to nobody..." \\
         "Failed to send 73 bytes to syslog" \\
         "Couldn't open user namespace /proc/4398/ns/user: Permission denied"; do
        echo "$l" >&2
done
exit 1
""")
    # A payload that waits: it starts without waiting for pasta, and pasta's failure ends it.
    r = csb.run(["--net", "pasta", "--", "sleep", "20"], env=env, timeout=15)
    assert r.returncode == 125, r.stderr
    assert "syslog" not in r.stderr and "nobody" not in r.stderr, r.stderr
    assert ("pasta failed to set up the sandbox's network (Couldn't open user namespace "
            "/proc/4398/ns/user: Permission denied)") in r.stderr, r.stderr
    assert "must enter the sandbox's namespaces" in r.stderr
    assert "AppArmor or SELinux profile of pasta" in r.stderr
    assert wait_until(lambda: not pasta_procs(), 10), pasta_procs()


def test_pasta_dying_silently_is_reported_with_its_signal(csb, tmp_path):
    env = fake_pasta(tmp_path, "kill -9 $$\n")
    r = csb.run(["--net", "pasta", "--", "sleep", "20"], env=env, timeout=15)
    assert r.returncode == 125, r.stderr
    assert "pasta failed to set up the sandbox's network (it was killed by signal 9)" in r.stderr


def test_first_connection_right_after_exec_never_fails(csb):
    """pid 1 makes pasta's interface and starts the payload without waiting for pasta: what
    the payload sends first (a SYN, a DNS query) waits in the kernel's neighbour queue until
    pasta answers the ARP or neighbour solicitation. 200 launches whose payload connects at
    once: none may fail."""
    failures = []
    for i in range(200):
        if i % 3 == 2:
            r = probe(csb, "dns-a", "www.csandbox.test", DNS)
            ok = r == {"errno": "ok", "address": TEST_HOST}
        else:
            r = probe(csb, "connect", TEST_HOST if i % 3 == 0 else TEST_HOST6, "8080")
            ok = r["errno"] == "ok"
        if not ok:
            failures.append((i, r))
    assert failures == []


SLOW_PASTA = f'sleep 0.3; exec {shutil.which("pasta")} "$@"\n'


@pytest.mark.parametrize("what", ["connect4", "connect6", "dns"])
def test_payload_starts_before_pasta_attaches_and_its_first_packet_waits(csb, tmp_path, what):
    """pasta delayed by 0.3 s: the payload starts while the interface has no carrier yet
    (nobody reads it), and what it sends first still arrives once pasta is up. A TCP SYN is
    held, not lost: lost, it would be sent again after 1 s (Tcp RetransSegs). This needs
    Linux 5.18 (arp_evict_nocarrier, ndisc_evict_nocarrier); before, pid 1 waits for pasta."""
    env = fake_pasta(tmp_path, SLOW_PASTA)
    act = {"connect4": f"{HOST_PROBE} connect {TEST_HOST} 8080",
           "connect6": f"{HOST_PROBE} connect {TEST_HOST6} 8080",
           "dns": f"{HOST_PROBE} dns-a www.csandbox.test {DNS}"}[what]
    r = csb.run(["--net", "pasta", "--ro-bind", csb.probe_path, HOST_PROBE, "--", "sh", "-c",
                 f"cat /sys/class/net/csbt-h0/carrier; {act}; echo; grep ^Tcp: /proc/net/snmp"],
                env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "0", "the payload should start before pasta attaches to the interface"
    got = json.loads(lines[1])
    if what == "dns":
        assert got == {"errno": "ok", "address": TEST_HOST}, got
    else:
        assert got["errno"] == "ok", got
    names, values = (line.split()[1:] for line in lines[-2:])
    assert dict(zip(names, values))["RetransSegs"] == "0", lines


@pytest.mark.parametrize("slow", [False, True])
def test_pasta_works_where_proc_sys_is_read_only(csb, tmp_path, slow):
    """As in a container (engines mount /proc/sys read-only), the tap's neighbour settings
    cannot be made: pasta then makes the tap and the payload waits for it (it starts with a
    carrier), and the first connection arrives, at once and with a slow pasta alike."""
    env = fake_pasta(tmp_path, SLOW_PASTA) if slow else base_env()
    script = ("mount --bind /proc/sys /proc/sys && mount -o remount,bind,ro /proc/sys &&"
              f' exec "$0" exec --net pasta --ro-bind {csb.probe_path} {HOST_PROBE} -- sh -c'
              f' "cat /sys/class/net/csbt-h0/carrier; {HOST_PROBE} connect {TEST_HOST} 8080"')
    r = subprocess.run(["unshare", "-Urm", "--propagation", "private", "sh", "-c", script,
                        csb.binary], capture_output=True, text=True, timeout=120, env=env,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "1", r.stdout
    assert json.loads(lines[1])["errno"] == "ok", r.stdout


def parent_of(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except OSError:
        return None


def pasta_cmdline(csb, marker, *opts):
    proc = csb.popen([*opts, "--net", "pasta", "--ro-bind", csb.probe_path, HOST_PROBE, "--",
                      HOST_PROBE, "spawn-sleeper", "300", marker])
    try:
        assert read_line(proc.stdout) == "ready\n", proc.stderr.read1().decode()
        found = [p for p in pasta_procs() if parent_of(p) == proc.pid]
        assert len(found) == 1, found
        with open(f"/proc/{found[0]}/cmdline", "rb") as f:
            return f.read().decode().split("\0")[:-1]
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_pasta_gets_the_addresses_pid_1_configures(csb, marker):
    """The host's default-route interface, address and gateway (what pasta would pick) are
    given to pasta explicitly and set by pid 1, so both sides agree; pasta does not
    configure the namespace itself."""
    args = pasta_cmdline(csb, marker)
    assert "--config-net" not in args, args
    assert args[args.index("-I") + 1] == "csbt-h0", args
    assert ["-a", "198.51.100.2", "-n", "24", "-g", "198.51.100.1"] == args[
        args.index("-a"):args.index("-a") + 6], args
    six = args[args.index("-a", args.index("-a") + 1):][:4]
    assert six[0] == "-a" and six[1] in ("2001:db8:51::2", "2001:db8:51::3"), args
    assert six[2:] == ["-g", "2001:db8:51::1"], args
    inside = csb.run(["--net", "pasta", "--", "ip", "-j", "addr", "show", "csbt-h0"])
    assert inside.returncode == 0, inside.stderr
    link = json.loads(inside.stdout)[0]
    addrs = {a["local"]: a for a in link["addr_info"]}
    assert addrs["198.51.100.2"]["prefixlen"] == 24, addrs
    assert addrs[six[1]].get("nodad") is True, addrs
    assert link["mtu"] == 65520 and "UP" in link["flags"], link


def test_map_host_loopback_makes_169_254_1_2_the_gateway(csb, marker):
    args = pasta_cmdline(csb, marker, "--map-host-loopback")
    assert args[args.index("-g") + 1] == MAPPED and "--no-map-gw" not in args, args
    r = csb.run(["--net", "pasta", "--map-host-loopback", "--", "ip", "-j", "route", "show",
                 "default"])
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)[0]["gateway"] == MAPPED, r.stdout


def test_pasta_failing_after_the_payload_started_ends_the_session(csb, tmp_path):
    """pid 1 starts the payload, pasta attaches to the tap, then dies before it is ready:
    the session ends at once with pasta's reason and 125, as if it had never started."""
    env = fake_pasta(tmp_path, """exec python3 - "$@" <<'PY'
import ctypes, fcntl, os, struct, sys, time
args = sys.argv[1:]
ifname = args[args.index("-I") + 1]
libc = ctypes.CDLL(None, use_errno=True)
for opt in ("--userns", "--netns"):
    fd = os.open(args[args.index(opt) + 1], os.O_RDONLY)
    assert libc.setns(fd, 0) == 0, ctypes.get_errno()
tun = os.open("/dev/net/tun", os.O_RDWR)
fcntl.ioctl(tun, 0x400454ca, struct.pack("16sH", ifname.encode(), 0x0002 | 0x1000))  # TUNSETIFF, IFF_TAP|IFF_NO_PI
time.sleep(0.5)
print("Couldn't set up the tap's queue: No buffer space available", file=sys.stderr)
sys.exit(1)
PY
""")
    r = csb.run(["--net", "pasta", "--", "sh", "-c", "echo started; exec sleep 20"], env=env,
                timeout=15)
    assert r.returncode == 125, r.stderr
    assert r.stdout == "started\n", "the payload should start once the interface exists"
    assert ("pasta failed to set up the sandbox's network (Couldn't set up the tap's queue: "
            "No buffer space available)") in r.stderr, r.stderr


def test_unusable_tun_gives_the_relay_and_names_the_fix(csb):
    """/dev/net/tun as a user without access sees it (here: a root-only file over it, in an
    outer sandbox, as a desktop without udev's 0666 would have it)."""
    r = csb.run(["--net", "host", "--ro-bind", "/etc/shadow", "/dev/net/tun",
                 "--ro-bind", csb.binary, "/run/csandbox", "--",
                 "/run/csandbox", "exec", "--net", "pasta", "--", "true"])
    # the session runs on csandbox's relay; the note says why and how to get pasta's network
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("the session's network is csandbox's relay") == 1, r.stderr
    assert "/dev/net/tun is not usable by your user" in r.stderr
    assert "csandbox: for the full network: " in r.stderr
    assert "chmod 0666 /dev/net/tun" in r.stderr


def test_net_mode_in_plan_and_help(csb):
    plan = csb.plan(["--net", "pasta", "--map-host-loopback", "true"])
    assert plan["net"] == "pasta" and plan["map_host_loopback"] is True
    assert "net" in plan["namespaces"]
    files = {m["dest"]: m for m in plan["mounts"] if m["kind"] == "file"}
    assert {"/etc/resolv.conf", "/etc/hosts", "/etc/hostname"} <= set(files)
    assert csb.plan(["--net", "host", "true"])["net"] == "host"
    r = csb.run(["--help"])
    assert "--net none|pasta|relay|host" in r.stdout and "--map-host-loopback" in r.stdout
    r = csb.run(["--map-host-loopback", "--", "true"])
    assert r.returncode == 125 and "--map-host-loopback needs --net pasta" in r.stderr
