"""--map-host-loopback under an allowlist (a launch's loopback hooks, Agent Vault's proxy):
a plain HTTP request reaches the host's 127.0.0.1; a proxy request there (CONNECT, an
absolute URI) only for an allowed name; anything but HTTP not at all."""
from test_net import LoopbackServer

SCRIPT = r'''
import socket, sys
port = int(sys.argv[1])
def send(data):
    s = socket.create_connection(("169.254.1.2", port), timeout=5)
    s.sendall(data)
    try:
        r = s.recv(100)
    except OSError:
        r = b""
    print(repr(r[:12]), flush=True)
send(b"POST /hook HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n")
send(b"CONNECT b.csandbox.test:443 HTTP/1.1\r\nHost: b.csandbox.test:443\r\n\r\n")
send(b"GET http://b.csandbox.test/ HTTP/1.1\r\nHost: b.csandbox.test\r\n\r\n")
send(b"CONNECT a.csandbox.test:8443 HTTP/1.1\r\nHost: a.csandbox.test:8443\r\n\r\n")
send(b"\x16\x03\x01\x00\x05\x01\x00\x00\x01\x00")
'''


def test_the_mapped_host_loopback_serves_hooks_and_a_proxy_there_only_allowed_names(
        csb, tmp_path):
    srv = LoopbackServer()
    try:
        script = tmp_path / "c.py"
        script.write_text(SCRIPT)
        log = tmp_path / "egress.log"
        r = csb.run(["--egress", "allowlist", "--allow-host", "a.csandbox.test",
                     "--map-host-loopback", "--egress-log", str(log),
                     "--ro-bind", str(script), "/mnt/c.py", "--", "python3", "/mnt/c.py",
                     str(srv.port)], timeout=60)
    finally:
        srv.close()
    assert r.returncode == 0, r.stderr
    got = r.stdout.splitlines()
    assert got[0].startswith("b'HTTP/1.0 200") and got[3].startswith("b'HTTP/1.0 200"), got
    assert got[1] == got[2] == got[4] == "b''", got
    assert [x.split(b" ")[0] for x in srv.requests] == [b"POST", b"CONNECT"], srv.requests
    assert b"a.csandbox.test:8443" in srv.requests[1]
    lines = log.read_text().splitlines()
    assert len(lines) == 3 and "HTTP requests only" in lines[2], lines
    assert all("a proxy request for a name not allowed" in x for x in lines[:2]), lines
