"""The egress allowlist against a real TLS server: tests/testnet's test host serves TLS on
8443 for every NAME.csandbox.test with certificates of a test CA (CSANDBOX_TEST_TLS_CA,
by default /run/csbt-tls/ca.pem), so a client that verifies its server goes through the
proxy end to end, IPv4 and IPv6; and a flood of idle connections leaves the proxy bounded
and serving."""
import os
import shutil

import pytest

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


FLOOD = r'''
import socket, time
addr = socket.getaddrinfo("a.csandbox.test", 8080, socket.AF_INET, socket.SOCK_STREAM)[0][4]
held = []
for _ in range(300):
    s = socket.socket()
    s.connect(addr)
    held.append(s)
time.sleep(1)
for s in held:
    s.close()
time.sleep(0.3)
s = socket.create_connection(addr, timeout=10)
s.sendall(b"GET / HTTP/1.0\r\nHost: a.csandbox.test\r\n\r\n")
data = b""
while True:
    c = s.recv(4096)
    if not c:
        break
    data += c
print(data.split(b"\r\n\r\n", 1)[-1].decode().strip(), flush=True)
'''


def test_a_flood_of_idle_connections_leaves_the_proxy_serving(csb, tmp_path):
    client = tmp_path / "flood.py"
    client.write_text(FLOOD)
    r = csb.run(["--egress", "allowlist", "--allow-host", "a.csandbox.test",
                 "--egress-log", str(tmp_path / "egress.log"),
                 "--ro-bind", str(client), "/mnt/flood.py", "--", "python3", "/mnt/flood.py"],
                timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "csandbox-testhost", (r.stdout, r.stderr)


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
