"""The egress allowlist against a real TLS server: tests/testnet's test host serves TLS on
8443 for every NAME.csandbox.test with certificates of a test CA (CSANDBOX_TEST_TLS_CA,
by default /run/csbt-tls/ca.pem), so a client that verifies its server goes through the
proxy end to end, IPv4 and IPv6; and a flood of idle connections leaves the proxy bounded
and serving."""
import os
import shutil
import socket
import subprocess

import pytest

from conftest import CSANDBOX, base_env

TEST_HOST = os.environ.get("CSANDBOX_TEST_HOST")
TLS_CA = os.environ.get("CSANDBOX_TEST_TLS_CA", "/run/csbt-tls/ca.pem")
CA_IN = "/mnt/csb-test-ca.pem"


@pytest.fixture(scope="module", autouse=True)
def _test_network():
    assert TEST_HOST, "the egress tests need the test host of tests/testnet (tests/run)"
    assert os.path.exists(TLS_CA), f"{TLS_CA}: the test network's CA is missing (tests/testnet up)"


@pytest.fixture
def ca(tmp_path):
    path = tmp_path / "ca.pem"
    shutil.copy(TLS_CA, path)
    return str(path)


def test_a_verifying_tls_client_reaches_the_allowed_name_over_ipv4_and_ipv6(csb, tmp_path, ca):
    log = tmp_path / "egress.log"
    r = csb.run(["--egress", "allowlist", "--allow-host", "a.csandbox.test",
                 "--allow-host", "a.v6.csandbox.test", "--egress-log", str(log),
                 "--ro-bind", ca, CA_IN, "--", "sh", "-c",
                 f"curl -sS -m 10 --noproxy '*' --cacert {CA_IN} -4 "
                 "https://a.csandbox.test:8443/; echo v4=$?; "
                 f"curl -sS -m 10 --noproxy '*' --cacert {CA_IN} -6 "
                 "https://a.v6.csandbox.test:8443/; echo v6=$?; "
                 f"curl -sS -m 10 --noproxy '*' --cacert {CA_IN} "
                 "https://b.csandbox.test:8443/; echo b=$?"], timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("tls a.csandbox.test\nv4=0\ntls a.v6.csandbox.test\nv6=0\n"), \
        (r.stdout, r.stderr)
    assert "b=0" not in r.stdout, r.stdout
    assert any("b.csandbox.test" in x for x in log.read_text().splitlines())


# The payload's side of the flood: one request first (so the proxy's steady state is
# measured), then N connections held at once, every other one silent and the rest dripping
# a request's head a byte at a time, never finishing it; the test reads the proxy's memory
# between the steps (each step waits for a line on stdin).
FLOOD = r"""
import resource, socket, sys, time
N = int(sys.argv[1])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, N + 200), hard))
addr = socket.getaddrinfo("a.csandbox.test", 8080, socket.AF_INET, socket.SOCK_STREAM)[0][4]

def get():
    s = socket.create_connection(addr, timeout=30)
    s.sendall(b"GET / HTTP/1.0\r\nHost: a.csandbox.test\r\n\r\n")
    data = b""
    while True:
        c = s.recv(4096)
        if not c:
            break
        data += c
    s.close()
    return data.split(b"\r\n\r\n", 1)[-1].decode().strip()

def step(what):
    print(what, flush=True)
    sys.stdin.readline()

first = get()
step("idle")
held = []
for i in range(N):
    s = socket.socket()
    s.connect(addr)
    held.append(s)
drip = held[1::2]
head = b"GET / HTTP/1.1\r\nHost: a.csandbox.test\r\n" + b"X: y\r\n" * 100
step("flooded")
closed = set()
for k in range(26):  # 13 s: past the proxy's 10 s for a connection's first bytes
    for s in drip:
        if s in closed:
            continue
        try:
            s.send(head[k:k + 1])
        except OSError:
            closed.add(s)
    time.sleep(0.5)
still = 0
for s in held:
    try:
        still += s.recv(1, socket.MSG_DONTWAIT) != b""
    except BlockingIOError:
        still += 1
    except OSError:
        pass
during = get()
for s in held:
    s.close()
after = get()
print("held", still, "bodies", first, during, after, flush=True)
step("done")
"""

# runner/egress_int.h's EGRESS_MAX_CONNS, and twice EGRESS_RESERVED: the slots kept for
# claude's own hosts, and the threads of silent connections whose reserved slot a newer one
# took, still ending
MAX_CONNS = 256 + 2 * 32
DNS_WORKERS = 8  # EGRESS_DNS_WORKERS
PER_CONN_KIB = 64  # the proxy's bound per open connection (the target)
# Under AddressSanitizer each connection's thread keeps the sanitizer's own caches and
# shadow memory too (measured: ~130 KiB): the suite's ASan run holds the proxy to 256 KiB
# per connection; the plain build, what users run, to the target.
THREAD_LAG = 0
with open(CSANDBOX, "rb") as _f:
    if b"__asan_init" in _f.read():
        PER_CONN_KIB = 256
        THREAD_LAG = 64


def proxy_status(csandbox_pid):
    """The egress proxy's /proc status fields (csandbox's child named csandbox-egress)."""
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/stat") as f:
                comm, rest = f.read().split(" (", 1)[1].rsplit(") ", 1)
            if comm != "csandbox-egress" or int(rest.split()[1]) != csandbox_pid:
                continue
            with open(f"/proc/{name}/status") as f:
                return {k: v.split()[0] for k, _, v in
                        (line.partition(":") for line in f) if v.split()}
        except (OSError, ValueError, IndexError):
            continue
    raise AssertionError("no csandbox-egress process under csandbox")


def host_serves():
    with socket.create_connection((TEST_HOST, 8080), timeout=10) as s:
        s.sendall(b"GET / HTTP/1.0\r\n\r\n")
        return s.recv(4096).endswith(b"csandbox-testhost\n")


@pytest.mark.parametrize("n", [10000])
def test_a_flood_of_idle_connections_leaves_the_proxy_serving(csb, tmp_path, n):
    """1200 connections held at once, half silent, half a slowloris: the proxy takes at
    most its bound at once (the rest are refused), lets go of each after 10 s however
    slowly it drips, serves an allowed request meanwhile and after; its memory (the peak
    too) stays within its idle size plus 64 KiB for each connection it may hold, its
    threads within their bound, and the host keeps serving."""
    client = tmp_path / "flood.py"
    client.write_text(FLOOD)
    log = tmp_path / "egress.log"
    env = base_env()
    if PER_CONN_KIB != 64:
        # ASan keeps what is freed in a quarantine (256 MiB by default) rather than reusing
        # it: each of the flood's connections would hold its buffer anew
        env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=4"
    p = subprocess.Popen([csb.binary, "exec", "--egress", "allowlist", "--allow-host",
                          "a.csandbox.test", "--egress-log", str(log), "--ro-bind",
                          str(client), "/mnt/flood.py", "--", "python3", "/mnt/flood.py",
                          str(n)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert p.stdout.readline() == "idle\n"
        idle = proxy_status(p.pid)
        p.stdin.write("\n")
        p.stdin.flush()
        assert p.stdout.readline() == "flooded\n"
        flooded = proxy_status(p.pid)
        assert host_serves()
        p.stdin.write("\n")
        p.stdin.flush()
        report = p.stdout.readline().split()
        assert p.stdout.readline() == "done\n"
        done = proxy_status(p.pid)
        p.stdin.write("\n")
        p.stdin.flush()
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    assert report == ["held", "0", "bodies"] + ["csandbox-testhost"] * 3, (report, err)
    # The idle size is the proxy's peak so far (its start-up may have peaked above what it
    # holds idle; ASan's quarantine makes that gap a few hundred KiB), not its RSS now.
    bound = max(int(idle["VmRSS"]), int(idle["VmHWM"])) + MAX_CONNS * PER_CONN_KIB
    for when in (flooded, done):
        assert int(when["VmHWM"]) <= bound, (idle, when)
        assert int(when["VmRSS"]) <= bound, (idle, when)
        # the proxy's own (main, two DNS sockets, the host's addresses' follower), its DNS
        # workers and its connections'; under ASan a thread that has ended its work still
        # counts while the sanitizer tears it down
        assert int(when["Threads"]) <= MAX_CONNS + 4 + DNS_WORKERS + THREAD_LAG, when
    assert host_serves()
    lines = log.read_text().splitlines()
    assert any("too many connections" in x for x in lines), lines[:5]
    assert not any("a.csandbox.test" in x and "name not allowed" in x for x in lines)


def test_a_proxy_aware_client_connects_through_the_proxy_with_the_same_checks(
        csb, tmp_path, ca):
    """HTTPS_PROXY pointing at the proxy's own address in the session: CONNECT to an
    allowed name is answered and tunnelled; to another name, 403 and a line in the log;
    anything but CONNECT there is refused."""
    log = tmp_path / "egress.log"
    proxy = "http://169.254.1.1:15001"
    r = csb.run(["--egress", "allowlist", "--allow-host", "a.csandbox.test",
                 "--egress-log", str(log), "--ro-bind", ca, CA_IN,
                 "--setenv", "HTTPS_PROXY", proxy, "--", "sh", "-c",
                 f"curl -sS -m 10 --cacert {CA_IN} https://a.csandbox.test:8443/; echo a=$?; "
                 f"curl -sS -m 10 --cacert {CA_IN} https://b.csandbox.test:8443/; echo b=$?; "
                 f"curl -fsS -m 10 -x {proxy} http://a.csandbox.test:8080/; echo g=$?"],
                timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("tls a.csandbox.test\na=0\n"), (r.stdout, r.stderr)
    assert "b=56\n" in r.stdout and "g=22\n" in r.stdout, (r.stdout, r.stderr)
    lines = log.read_text().splitlines()
    assert any("b.csandbox.test" in x and "name not allowed" in x for x in lines), lines
    assert any("not a whole CONNECT" in x for x in lines), lines
