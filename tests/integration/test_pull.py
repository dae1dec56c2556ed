"""`csandbox image pull` against a real registry (the distribution registry server of Debian's
docker-registry package), started here as the test user on 127.0.0.1 with its own storage,
seeded with skopeo from the OCI layouts of tests/fixtures/oci.py. A small reverse proxy in
front of it misbehaves on demand: alters a blob, drops the connection mid-blob, trickles a
blob, or asks for a bearer token."""
import base64
import contextlib
import hashlib
import http.client
import http.server
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "fixtures"))
import oci  # noqa: E402

import test_image  # noqa: E402
from conftest import (CSANDBOX, PROBE, Screen, base_env, run_stderr_on_pty,  # noqa: E402
                      wait_until)

TIMEOUT = 120
USER, PASSWORD = "alice", "s3cret pass:word"
MT_ACCEPT = ", ".join([oci.MT_MANIFEST, oci.MT_INDEX])
EMPTY = {"names": None, "sha256": [], "tmp": []}  # a store that was opened, nothing more


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Registry:
    """docker-registry serve, with a config written here; htpasswd auth when users given."""

    def __init__(self, work, htpasswd=None, tls=None):
        self.work = work
        self.port = free_port()
        self.host = f"127.0.0.1:{self.port}"
        os.makedirs(os.path.join(work, "run"), exist_ok=True)
        # skopeo's own credential lookup stays inside the test's directory
        self.skopeo_env = base_env(XDG_RUNTIME_DIR=os.path.join(work, "run"), HOME=work,
                                   REGISTRY_AUTH_FILE=None)
        config = ["version: 0.1", "log:", "  level: error", "storage:", "  filesystem:",
                  f"    rootdirectory: {work}/storage", "http:", f"  addr: {self.host}"]
        if htpasswd:
            path = os.path.join(work, "htpasswd")
            with open(path, "w") as f:
                f.write(htpasswd)
            config += ["auth:", "  htpasswd:", "    realm: csandbox-test", f"    path: {path}"]
        if tls:
            config += ["  tls:", f"    certificate: {tls[0]}", f"    key: {tls[1]}"]
        cfg = os.path.join(work, "config.yml")
        with open(cfg, "w") as f:
            f.write("\n".join(config) + "\n")
        self.log = open(os.path.join(work, "registry.log"), "w")
        self.proc = subprocess.Popen(["docker-registry", "serve", cfg], stdout=self.log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        assert wait_until(self.up, 30), f"the registry did not start: see {work}/registry.log"

    def up(self):
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True
        except OSError:
            return False

    def seed(self, src, dest, *extra):
        p = subprocess.run(["skopeo", "copy", "-q", "--dest-tls-verify=false", *extra, src,
                            f"docker://{self.host}/{dest}"], timeout=TIMEOUT,
                           capture_output=True, text=True, env=self.skopeo_env)
        assert p.returncode == 0, f"skopeo copy {src} failed:\n{p.stderr}"


    def manifest(self, repo, ref, auth=None):
        """(digest, manifest JSON) as the registry serves it."""
        req = urllib.request.Request(f"http://{self.host}/v2/{repo}/manifests/{ref}",
                                     headers={"Accept": MT_ACCEPT})
        if auth:
            req.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
        with urllib.request.urlopen(req, timeout=30) as r:
            body = r.read()
        return "sha256:" + hashlib.sha256(body).hexdigest(), json.loads(body)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.log.close()


class Proxy:
    """A reverse proxy to the registry. mode: None (pass through), "tamper" (flip a byte of
    blob `target`), "drop" (close the connection halfway through `target` the first time),
    "slow" (trickle `target`: pace bytes every 50 ms), "bearer" (require a token from its own /token endpoint),
    "redirect" (send blob requests to the host `target`), "storage" (send `target` as the
    Authorization upstream, whatever the client sent)."""

    TOKEN = "test-token-1234"

    def __init__(self, upstream, mode=None, target=None, ranges=True, pace=4096):
        self.upstream, self.mode, self.target, self.ranges = upstream, mode, target, ranges
        self.pace = pace
        self.requests, self.token_requests, self.authorizations = [], [], []
        self.dropped = False
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                proxy.serve(self)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.host = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def reply(self, h, status, body, headers=()):
        h.send_response(status)
        for k, v in headers:
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    def serve(self, h):
        self.requests.append((h.path, h.headers.get("Range")))
        self.authorizations.append((h.path, h.headers.get("Authorization")))
        if self.mode == "redirect" and "/blobs/" in h.path:
            return self.reply(h, 307, b"", [("Location", f"http://{self.target}{h.path}")])
        if self.mode == "bearer":
            if h.path.startswith("/token?"):
                self.token_requests.append((urllib.parse.parse_qs(h.path[7:]),
                                            h.headers.get("Authorization")))
                return self.reply(h, 200, json.dumps({"token": self.TOKEN}).encode(),
                                  [("Content-Type", "application/json")])
            if h.headers.get("Authorization") != f"Bearer {self.TOKEN}":
                challenge = (f'Bearer realm="http://{self.host}/token",service="csb-test",'
                             f'scope="repository:test/bb:pull"')
                return self.reply(h, 401, b'{"errors":[{"code":"UNAUTHORIZED"}]}',
                                  [("WWW-Authenticate", challenge)])
        # without ranges, the whole blob answers a range request, as some servers do
        forward = ("Accept", "Range", "Authorization") if self.ranges else ("Accept",)
        headers = {k: h.headers[k] for k in forward if h.headers.get(k)}
        if self.mode == "storage":  # a blob store elsewhere with access of its own
            headers["Authorization"] = self.target
        conn = http.client.HTTPConnection(self.upstream, timeout=60)
        conn.request("GET", h.path, headers=headers)
        r = conn.getresponse()
        body = r.read()
        conn.close()
        out = [(k, r.getheader(k)) for k in ("Content-Type", "Docker-Content-Digest",
                                             "Content-Range", "WWW-Authenticate", "Location")
               if r.getheader(k)]
        blob = (self.target and "/blobs/" in h.path and h.path.endswith(self.target)
                and r.status in (200, 206))
        if blob and self.mode == "tamper":
            body = bytearray(body)
            body[len(body) // 2] ^= 0xFF
            body = bytes(body)
        if blob and self.mode == "drop" and not self.dropped and r.status == 200:
            self.dropped = True
            h.send_response(200)
            for k, v in out:
                h.send_header(k, v)
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            h.wfile.write(body[:len(body) // 2])
            h.wfile.flush()
            h.close_connection = True
            h.connection.shutdown(socket.SHUT_RDWR)
            return
        if blob and self.mode == "slow":
            h.send_response(r.status)
            for k, v in out:
                h.send_header(k, v)
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            for i in range(0, len(body), self.pace):
                h.wfile.write(body[i:i + self.pace])
                h.wfile.flush()
                time.sleep(0.05)
            return
        self.reply(h, r.status, body, out)

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@contextlib.contextmanager
def proxy_to(registry, mode, target=None, ranges=True, pace=4096):
    proxy = Proxy(registry.host, mode, target, ranges, pace)
    try:
        yield proxy
    finally:
        proxy.stop()


class Store(test_image.Store):
    """test_image's store (its state()), with a home and runtime dir of its own so that no
    credential file of the test user is read."""

    def __init__(self, root):
        super().__init__(os.path.join(root, "data"))
        self.home = os.path.join(root, "home")
        self.run_dir = os.path.join(root, "run")
        for d in (self.home, self.run_dir):
            os.makedirs(d, exist_ok=True)

    def env(self, **extra):
        env = {"XDG_DATA_HOME": self.data, "HOME": self.home, "XDG_RUNTIME_DIR": self.run_dir,
               "REGISTRY_AUTH_FILE": None}
        env.update(extra)
        return base_env(**env)

    def run(self, *args, env=None, **kw):
        return subprocess.run([CSANDBOX, *args], capture_output=True, text=True,
                              timeout=TIMEOUT, env=env or self.env(), stdin=subprocess.DEVNULL,
                              **kw)

    def pull(self, *args, env=None):
        return self.run("image", "pull", "--tls-verify=false", *args, env=env)

    def ok(self, *args, env=None):
        p = self.run(*args, env=env)
        assert p.returncode == 0, f"exit {p.returncode}\nstderr:\n{p.stderr}\nstdout:\n{p.stdout}"
        return p

    def names(self):
        return {i["name"]: i["digest"] for i in json.loads(self.ok("image", "ls", "--json").stdout)}

    def fixture_env(self, name):
        """FIXTURE from the image's config, as exec --image gives it to the payload."""
        p = self.ok("exec", "--image", name, "--", "/probe", "report")
        return json.loads(p.stdout)["env"]["FIXTURE"]


@pytest.fixture
def store(tmp_path):
    return Store(str(tmp_path))


def multi_platform_layout(dest, layers):
    """A nested index (ref `multi`) of two manifests: another platform first, then this one;
    their configs say which is which in FIXTURE."""
    descs = []
    for mark in ("other-platform", "this-platform"):
        oci.write_layout(dest, layers, config={"Env": ["PATH=/bin", "FIXTURE=" + mark]})
        with open(os.path.join(dest, "index.json")) as f:
            d = json.load(f)["manifests"][0]
        d.pop("annotations", None)
        descs.append(d)
    other = "s390x" if oci._host_arch() != "s390x" else "amd64"
    descs[0]["platform"] = {"os": "linux", "architecture": other}
    inner = json.dumps({"schemaVersion": 2, "mediaType": oci.MT_INDEX,
                        "manifests": descs}).encode()
    digest = oci._put_blob(dest, inner)
    with open(os.path.join(dest, "index.json"), "w") as f:
        json.dump({"schemaVersion": 2, "mediaType": oci.MT_INDEX,
                   "manifests": [{"mediaType": oci.MT_INDEX, "digest": digest,
                                  "size": len(inner),
                                  "annotations": {"org.opencontainers.image.ref.name": "multi"}}]},
                  f)


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    """Plain-http registry with test/bb:v1 (3 layers), test/multi:v1 (two platforms)."""
    work = str(tmp_path_factory.mktemp("registry"))
    layers = oci.busybox_layers(work, PROBE)
    layout = os.path.join(work, "layout")
    oci.write_layout(layout, layers, ref="latest", config={"Env": ["PATH=/bin", "FIXTURE=bb"]})
    multi = os.path.join(work, "multi")
    multi_platform_layout(multi, layers)
    reg = Registry(os.path.join(work, "reg"))
    reg.layout = layout
    try:
        reg.seed(f"oci:{layout}:latest", "test/bb:v1")
        reg.seed(f"oci:{multi}:multi", "test/multi:v1", "--all")
        yield reg
    finally:
        reg.stop()


@pytest.fixture(scope="module")
def auth_registry(tmp_path_factory, registry):
    work = str(tmp_path_factory.mktemp("auth-registry"))
    entry = subprocess.run(["htpasswd", "-Bbn", USER, PASSWORD], capture_output=True, text=True,
                           check=True).stdout
    reg = Registry(work, htpasswd=entry)
    try:
        reg.seed(f"oci:{registry.layout}:latest", "test/bb:v1",
                 f"--dest-creds={USER}:{PASSWORD}")
        yield reg
    finally:
        reg.stop()


def make_test_ca(work, san="IP:127.0.0.1"):
    """A CA and a certificate for san (127.0.0.1) that it signed: (ca.crt, server.crt,
    server.key)."""
    ca, ca_key = os.path.join(work, "ca.crt"), os.path.join(work, "ca.key")
    crt, key, csr = (os.path.join(work, n) for n in ("server.crt", "server.key", "server.csr"))
    ext = os.path.join(work, "ext.cnf")
    with open(ext, "w") as f:
        f.write(f"subjectAltName={san}\nbasicConstraints=CA:FALSE\n")
    for cmd in (["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", ca,
                 "-days", "2", "-subj", "/CN=csandbox test CA"],
                ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr,
                 "-subj", "/CN=127.0.0.1"],
                ["x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
                 "-out", crt, "-days", "2", "-extfile", ext]):
        subprocess.run(["openssl", *cmd], check=True, capture_output=True, timeout=60)
    return ca, crt, key


@pytest.fixture(scope="module")
def tls_registry(tmp_path_factory, registry):
    work = str(tmp_path_factory.mktemp("tls-registry"))
    ca, crt, key = make_test_ca(work)
    reg = Registry(work, tls=(crt, key))
    reg.ca = ca
    try:
        reg.seed(f"oci:{registry.layout}:latest", "test/bb:v1")
        yield reg
    finally:
        reg.stop()


def biggest_layer(reg, repo="test/bb", ref="v1", auth=None):
    _, m = reg.manifest(repo, ref, auth)
    return max(m["layers"], key=lambda d: d["size"])["digest"]


# --- pulls -------------------------------------------------------------------------------

def test_pull_by_tag_then_exec_image_runs_it(store, registry):
    p = store.pull(f"{registry.host}/test/bb:v1")
    assert p.returncode == 0, p.stderr
    name = f"{registry.host}/test/bb:v1"
    digest, _ = registry.manifest("test/bb", "v1")
    assert store.names() == {name: digest}
    assert store.fixture_env(name) == "bb"
    # nothing left over in the store's tmp/
    assert os.listdir(os.path.join(store.images, "tmp")) == []


def test_pull_by_digest_names_the_image_by_its_digest(store, registry):
    digest, _ = registry.manifest("test/bb", "v1")
    ref = f"{registry.host}/test/bb@{digest}"
    p = store.pull(ref)
    assert p.returncode == 0, p.stderr
    assert store.names() == {ref: digest}
    assert store.fixture_env(ref) == "bb"


def test_pull_by_a_digest_the_registry_lacks_is_refused(store, registry):
    p = store.pull(f"{registry.host}/test/bb@sha256:" + "0" * 64)
    assert p.returncode == 125 and "HTTP 404" in p.stderr, p.stderr
    assert store.state() in ({}, EMPTY)


def test_pull_of_a_manifest_list_picks_this_machines_platform(store, registry):
    p = store.pull(f"{registry.host}/test/multi:v1")
    assert p.returncode == 0, p.stderr
    assert store.fixture_env(f"{registry.host}/test/multi:v1") == "this-platform"


def test_pull_with_platform_picks_the_other_one(store, registry):
    other = "s390x" if oci._host_arch() != "s390x" else "amd64"
    p = store.pull("--platform", f"linux/{other}", f"{registry.host}/test/multi:v1")
    assert p.returncode == 0, p.stderr
    cfg = json.loads(store.ok("image", "inspect", f"{registry.host}/test/multi:v1").stdout)
    assert "FIXTURE=other-platform" in cfg["config"]["Env"]


def test_pull_without_tls_verify_false_refuses_plain_http(store, registry):
    p = store.run("image", "pull", f"{registry.host}/test/bb:v1")
    assert p.returncode == 125 and "--tls-verify=false" in p.stderr, p.stderr
    assert store.state() in ({}, EMPTY)


def test_pull_over_https_refuses_an_unknown_ca_and_says_where_to_put_it(store, tls_registry):
    p = store.run("image", "pull", f"{tls_registry.host}/test/bb:v1")
    assert p.returncode == 125, p.stderr
    assert f"containers/certs.d/{tls_registry.host}/ca.crt" in p.stderr, p.stderr
    assert store.state() in ({}, EMPTY)


def test_pull_over_https_trusts_the_registrys_ca_from_certs_d(store, tls_registry):
    d = os.path.join(store.home, ".config", "containers", "certs.d", tls_registry.host)
    os.makedirs(d)
    with open(tls_registry.ca) as src, open(os.path.join(d, "ca.crt"), "w") as dst:
        dst.write(src.read())
    p = store.run("image", "pull", f"{tls_registry.host}/test/bb:v1")
    assert p.returncode == 0, p.stderr
    assert store.fixture_env(f"{tls_registry.host}/test/bb:v1") == "bb"


def test_pull_over_https_with_tls_verify_false_skips_the_check(store, tls_registry):
    p = store.pull(f"{tls_registry.host}/test/bb:v1")
    assert p.returncode == 0, p.stderr


# --- credentials -------------------------------------------------------------------------

def auth_json(host, user=USER, password=PASSWORD):
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return json.dumps({"auths": {host: {"auth": token}}})


def write_auth(store, host, password=PASSWORD):
    """podman's run-time auth.json with credentials for host."""
    path = os.path.join(store.run_dir, "containers", "auth.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(auth_json(host, password=password))
    return path


@pytest.mark.parametrize("where", ["REGISTRY_AUTH_FILE", "XDG_RUNTIME_DIR", "config", "docker"])
def test_pull_with_basic_auth_from_each_credential_file(store, auth_registry, where):
    paths = {"REGISTRY_AUTH_FILE": os.path.join(store.home, "elsewhere.json"),
             "XDG_RUNTIME_DIR": os.path.join(store.run_dir, "containers", "auth.json"),
             "config": os.path.join(store.home, ".config", "containers", "auth.json"),
             "docker": os.path.join(store.home, ".docker", "config.json")}
    path = paths[where]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    # the docker file's key form: a URL
    key = f"http://{auth_registry.host}/v2/" if where == "docker" else auth_registry.host
    with open(path, "w") as f:
        f.write(auth_json(key))
    env = store.env(REGISTRY_AUTH_FILE=path if where == "REGISTRY_AUTH_FILE" else None)
    p = store.pull(f"{auth_registry.host}/test/bb:v1", env=env)
    assert p.returncode == 0, p.stderr
    assert f"{auth_registry.host}/test/bb:v1" in store.names()


def test_pull_without_credentials_says_how_to_log_in(store, auth_registry):
    p = store.pull(f"{auth_registry.host}/test/bb:v1")
    assert p.returncode == 125, p.stderr
    assert "needs credentials" in p.stderr and "auth.json" in p.stderr, p.stderr
    assert store.state() in ({}, EMPTY)


def test_pull_with_wrong_credentials_is_refused_naming_the_file(store, auth_registry):
    path = write_auth(store, auth_registry.host, password="wrong")
    p = store.pull(f"{auth_registry.host}/test/bb:v1")
    assert p.returncode == 125 and path in p.stderr, p.stderr
    assert store.state() in ({}, EMPTY)


def test_pull_credentials_of_another_registry_are_not_sent(store, auth_registry, registry):
    write_auth(store, registry.host)  # the right password, for the wrong host
    p = store.pull(f"{auth_registry.host}/test/bb:v1")
    assert p.returncode == 125 and "needs credentials" in p.stderr, p.stderr


@pytest.mark.parametrize("with_creds", [False, True])
def test_pull_gets_a_bearer_token_from_the_challenge(store, registry, with_creds):
    with proxy_to(registry, "bearer") as proxy:
        if with_creds:
            write_auth(store, proxy.host)
        p = store.pull(f"{proxy.host}/test/bb:v1")
        assert p.returncode == 0, p.stderr
        assert proxy.token_requests, "no token was asked for"
        query, authz = proxy.token_requests[0]
        assert query["service"] == ["csb-test"] and query["scope"] == ["repository:test/bb:pull"]
        want = ("Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
                if with_creds else None)
        assert authz == want
        assert store.fixture_env(f"{proxy.host}/test/bb:v1") == "bb"


def test_pull_credentials_do_not_follow_a_redirect_to_another_host(store, auth_registry):
    """Registries redirect blobs to a storage host; the registry's password must not go along."""
    basic = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    with proxy_to(auth_registry, "storage", basic) as storage, \
            proxy_to(auth_registry, "redirect", storage.host) as front:
        write_auth(store, front.host)
        p = store.pull(f"{front.host}/test/bb:v1")
        assert p.returncode == 0, p.stderr
        assert [a for path, a in front.authorizations if "/manifests/" in path][-1] == basic
        blobs = [(path, a) for path, a in storage.authorizations if "/blobs/" in path]
        assert len(blobs) >= 4 and all(a is None for _, a in blobs), storage.authorizations
        assert store.fixture_env(f"{front.host}/test/bb:v1") == "bb"


# --- hostile or broken registries --------------------------------------------------------

def test_pull_of_a_tampered_blob_is_refused_and_the_store_unchanged(store, registry, tmp_path):
    # an image of its own layers: one sharing bb's would spare the pull that blob
    other = str(tmp_path / "other")
    oci.write_layout(other, [oci.Layer([oci.file("other", "x\n")])])
    store.ok("image", "import", other, "--name", "other")
    before, layers_before = store.state(), store.stored_layers()
    target = biggest_layer(registry)
    with proxy_to(registry, "tamper", target) as proxy:
        p = store.pull(f"{proxy.host}/test/bb:v1")
    assert p.returncode == 125, p.stderr
    assert target in p.stderr and "tampered" in p.stderr, p.stderr
    assert store.state() == before and before["tmp"] == []
    assert store.stored_layers() == layers_before


@pytest.mark.parametrize("ranges", [True, False], ids=["resumed", "restarted"])
def test_pull_retries_a_blob_after_the_connection_drops(store, registry, ranges):
    target = biggest_layer(registry)
    with proxy_to(registry, "drop", target, ranges) as proxy:
        p = store.pull(f"{proxy.host}/test/bb:v1")
    assert p.returncode == 0, p.stderr
    assert proxy.dropped
    asked = [r for path, r in proxy.requests if path.endswith(target) and r]
    assert asked and asked[0].startswith("bytes=") and asked[0] != "bytes=0-", proxy.requests
    assert store.fixture_env(f"{proxy.host}/test/bb:v1") == "bb"


def test_sigkill_during_a_pull_leaves_nothing_a_launch_could_use(store, registry):
    target = biggest_layer(registry)
    tmp = os.path.join(store.images, "tmp")

    def partial_written():
        for d in os.listdir(tmp) if os.path.isdir(tmp) else []:
            blobs = os.path.join(tmp, d, "blobs", "sha256")
            if os.path.isdir(blobs):
                for f in os.listdir(blobs):
                    if f.endswith(".partial") and os.path.getsize(os.path.join(blobs, f)) > 0:
                        return True
        return False

    with proxy_to(registry, "slow", target) as proxy:
        proc = subprocess.Popen([CSANDBOX, "image", "pull", "--tls-verify=false",
                                 f"{proxy.host}/test/bb:v1"], env=store.env(),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                stdin=subprocess.DEVNULL)
        assert wait_until(partial_written, 60), "the pull never started writing the layer"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    st = store.state()
    assert st["names"] is None and st["sha256"] == [] and len(st["tmp"]) == 1, st
    assert "test/bb" not in store.ok("image", "ls").stdout
    p = store.ok("image", "prune")
    assert "1 leftover" in p.stdout, p.stdout
    assert os.listdir(tmp) == []
    store.ok("image", "pull", "--tls-verify=false", f"{registry.host}/test/bb:v1")
    assert store.fixture_env(f"{registry.host}/test/bb:v1") == "bb"


# --- progress ----------------------------------------------------------------------------

SIZE = r"[0-9.]+ [KMGT]?B"
FINISHED = re.compile(rf"^layer sha256:[0-9a-f]{{12}}  {SIZE} (done|in [0-9.]+ s \({SIZE}/s\))$")
LIVE = re.compile(rf"^layer sha256:[0-9a-f]{{12}}  {SIZE} / {SIZE}  {SIZE}/s$")
LIVE_TOTAL = re.compile(rf"^total {SIZE} / {SIZE}  {SIZE}/s  [0-2] of 3 layers done$")
TOTAL = re.compile(rf"^total {SIZE} in [0-9.]+ s \({SIZE}/s\), 3 layers$")


def test_pull_progress_without_a_terminal_is_one_line_per_layer(store, registry):
    p = store.pull(f"{registry.host}/test/bb:v1")
    assert p.returncode == 0, p.stderr
    lines = p.stderr.splitlines()
    _, m = registry.manifest("test/bb", "v1")
    assert sorted(line.split()[1] for line in lines) == sorted(
        d["digest"][:19] for d in m["layers"]), p.stderr
    assert all(FINISHED.match(line) for line in lines), p.stderr
    assert "\x1b" not in p.stderr and "\r" not in p.stderr


def test_pull_quiet_prints_no_progress(store, registry):
    p = store.pull("--quiet", f"{registry.host}/test/bb:v1")
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert p.stdout.startswith("pulled ")


def test_pull_quiet_on_a_terminal_prints_nothing(store, registry):
    p, text = run_stderr_on_pty([CSANDBOX, "image", "pull", "--quiet", "--tls-verify=false",
                                 f"{registry.host}/test/bb:v1"], store.env())
    assert p.returncode == 0 and text == "", repr(text)
    assert p.stdout.startswith(b"pulled ")


@pytest.mark.parametrize("cols, rows", [(80, 24), (40, 24), (80, 3)])
def test_pull_progress_on_a_terminal_redraws_in_place(store, registry, cols, rows):
    """A line for each layer as it finishes; below them the layers in transfer (bytes, size,
    rate) and a total, redrawn in place. No line is wider than the terminal and the redrawn
    part fits in its height, so the screen ends with exactly those lines, whatever its size."""
    _, m = registry.manifest("test/bb", "v1")
    target = biggest_layer(registry)
    with proxy_to(registry, "slow", target, pace=32 << 10) as proxy:
        p, text = run_stderr_on_pty([CSANDBOX, "image", "pull", "--tls-verify=false",
                                     f"{proxy.host}/test/bb:v1"], store.env(), cols=cols,
                                    rows=rows)
    assert p.returncode == 0, text
    screen = Screen(text, cols, rows)
    assert screen.unknown == [] and screen.wraps == 0, (screen.unknown, screen.wraps, text)
    final = screen.text()
    assert len(final) == 4 and all(len(line) < cols for line in final), final
    assert sorted(line.split()[1] for line in final[:3]) == sorted(
        d["digest"][:19] for d in m["layers"]), final
    assert final[3].startswith("total "), final
    if cols < 80:
        return
    assert all(FINISHED.match(line) for line in final[:3]) and TOTAL.match(final[3]), final
    drawn = re.split(r"\r|\n|\x1b\[[0-9]*[A-Za-z]", text)
    live = [d for d in drawn if LIVE.match(d) and d.split()[1] == target[:19]]
    assert any(not d.endswith("  0 B/s") for d in live), drawn  # the slow layer, with a rate
    assert any(LIVE_TOTAL.match(d) for d in drawn), drawn


# --- bad input ---------------------------------------------------------------------------

@pytest.mark.parametrize("args, named", [
    ([""], "``"),
    (["Upper/Case:v1"], "Upper/Case:v1"),
    (["name@sha256:abc"], "name@sha256:abc"),
    (["a//b"], "a//b"),
    (["host:5000/"], "host:5000/"),
    (["name:"], "name:"),
    (["name:bad!tag"], "name:bad!tag"),
    (["name@md5:" + "0" * 32], "name@md5:"),
    (["--tls-verify=maybe", "x"], "--tls-verify"),
    (["--bogus", "x"], "--bogus"),
    (["a", "b"], "`b` is extra"),
    ([], "needs a REF"),
    (["--platform", "x/y/z/w", "x"], "x/y/z/w"),
])
def test_pull_bad_input_exits_125_naming_it(store, args, named):
    p = store.run("image", "pull", *args)
    assert p.returncode == 125, p.stderr
    assert p.stderr.startswith("csandbox: ") and named in p.stderr, p.stderr
    assert not os.path.exists(os.path.join(store.images, "names.json"))


def test_pull_of_a_stored_image_fetches_no_layer(store, registry):
    store.ok("image", "pull", "--tls-verify=false", f"{registry.host}/test/bb:v1")
    _, m = registry.manifest("test/bb", "v1")
    with proxy_to(registry, None) as proxy:
        p = store.pull(f"{proxy.host}/test/bb:v1")
    assert p.returncode == 0 and p.stdout.startswith("already stored"), p.stdout + p.stderr
    fetched = [path for path, _ in proxy.requests if "/blobs/" in path]
    assert fetched == [f"/v2/test/bb/blobs/{m['config']['digest']}"], proxy.requests
    assert store.fixture_env(f"{proxy.host}/test/bb:v1") == "bb"


def test_concurrent_pulls_of_one_image_store_it_once(store, registry):
    """Each pull downloads into its own locked tmp/ directory, which another pull's import
    must not sweep away; the image is stored once."""
    procs = [subprocess.Popen([CSANDBOX, "image", "pull", "--quiet", "--tls-verify=false",
                               f"{registry.host}/test/bb:v1"], env=store.env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, text=True) for _ in range(4)]
    outs = [p.communicate(timeout=TIMEOUT) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, outs
    digest, _ = registry.manifest("test/bb", "v1")
    st = store.state()
    assert st == {"names": {f"{registry.host}/test/bb:v1": digest}, "sha256": [digest[7:]],
                  "tmp": []}, st


def test_pull_of_an_image_sharing_layers_fetches_only_its_config(store, registry):
    """test/multi's manifest for this platform lists bb's three layers with a config of its
    own: the import of bb recorded which blob unpacks to which diff_id, so none is fetched
    or unpacked again."""
    store.ok("image", "pull", "--tls-verify=false", f"{registry.host}/test/bb:v1")
    layers = store.stored_layers()
    with proxy_to(registry, None) as proxy:
        p = store.pull(f"{proxy.host}/test/multi:v1")
        assert p.returncode == 0, p.stderr
        assert "3 layers (3 already stored)" in p.stdout, p.stdout
        fetched = [path for path, _ in proxy.requests if "/blobs/" in path]
        assert len(fetched) == 1, proxy.requests
        cfg = json.loads(store.ok("image", "inspect", f"{proxy.host}/test/multi:v1").stdout)
        assert "FIXTURE=this-platform" in cfg["config"]["Env"]
        assert fetched[0].startswith("/v2/test/multi/blobs/sha256:"), fetched
        assert store.fixture_env(f"{proxy.host}/test/multi:v1") == "this-platform"
    assert store.stored_layers() == layers


def test_concurrent_pulls_of_images_sharing_layers_store_each_layer_once(store, registry):
    procs = [subprocess.Popen([CSANDBOX, "image", "pull", "--quiet", "--tls-verify=false",
                               f"{registry.host}/test/{'bb' if i % 2 else 'multi'}:v1"],
                              env=store.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, text=True) for i in range(8)]
    outs = [p.communicate(timeout=TIMEOUT) for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, outs
    assert len(store.stored_layers()) == 3
    assert len(store.state()["sha256"]) == 2 and store.state()["tmp"] == []
    assert store.fixture_env(f"{registry.host}/test/bb:v1") == "bb"
    assert store.fixture_env(f"{registry.host}/test/multi:v1") == "this-platform"


# --- a registry that behaves as the big public ones do --------------------------------------

class HubLike:
    """Three servers, as a big public registry is three hosts: the registry API (in front of
    the test registry), a token service elsewhere that hands anonymous tokens, and a blob
    store elsewhere that serves blobs only at a signed URL the API redirects to. The API
    also answers the first manifest request 429 with Retry-After, and serves test/multi's
    index with an attestation manifest added (platform unknown/unknown, as image builders
    attach them), whose digest nobody can fetch."""

    TOKEN = "hub-anonymous-token"
    SIGNATURE = "X-Amz-Signature=0123abcd"

    def __init__(self, registry):
        self.registry = registry
        self.api_requests, self.token_requests, self.blob_requests = [], [], []
        self.limited = False
        self.attestation = "sha256:" + "ab" * 32
        self.token = self._server(self._serve_token)
        self.blobs = self._server(self._serve_blob)
        self.api = self._server(self._serve_api)

    def _server(self, serve):
        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                serve(self)

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        server.host = f"127.0.0.1:{server.server_address[1]}"
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server

    reply = Proxy.reply

    def upstream(self, path, accept=None):
        conn = http.client.HTTPConnection(self.registry.host, timeout=60)
        conn.request("GET", path, headers={"Accept": accept} if accept else {})
        r = conn.getresponse()
        body = r.read()
        conn.close()
        return r, body

    def _serve_token(self, h):
        self.token_requests.append((h.path, h.headers.get("Authorization")))
        self.reply(h, 200, json.dumps({"token": self.TOKEN, "expires_in": 300}).encode(),
                   [("Content-Type", "application/json")])

    def _serve_api(self, h):
        self.api_requests.append((h.path, time.monotonic()))
        if h.headers.get("Authorization") != f"Bearer {self.TOKEN}":
            challenge = (f'Bearer realm="http://{self.token.host}/token",'
                         f'service="hub.test",scope="repository:test/multi:pull"')
            return self.reply(h, 401, b'{"errors":[{"code":"UNAUTHORIZED"}]}',
                              [("WWW-Authenticate", challenge)])
        if "/manifests/" in h.path and not self.limited:
            self.limited = time.monotonic()
            return self.reply(h, 429, b'{"errors":[{"code":"TOOMANYREQUESTS"}]}',
                              [("Retry-After", "1")])
        if "/blobs/" in h.path:
            return self.reply(h, 307, b"", [(
                "Location", f"http://{self.blobs.host}/store{h.path}?X-Amz-Expires=600&"
                            f"{self.SIGNATURE}")])
        r, body = self.upstream(h.path, h.headers.get("Accept"))
        ctype = r.getheader("Content-Type", "")
        if r.status == 200 and "index" in ctype and h.path.endswith("/manifests/v1"):
            index = json.loads(body)
            index["manifests"].append({
                "mediaType": oci.MT_MANIFEST, "digest": self.attestation, "size": 840,
                "platform": {"os": "unknown", "architecture": "unknown"},
                "annotations": {"vnd.docker.reference.type": "attestation-manifest",
                                "vnd.docker.reference.digest":
                                    index["manifests"][-1]["digest"]}})
            body = json.dumps(index).encode()
        self.reply(h, r.status, body, [("Content-Type", ctype)])

    def _serve_blob(self, h):
        path, _, query = h.path.partition("?")
        self.blob_requests.append((path, query, h.headers.get("Authorization")))
        if self.SIGNATURE not in query or not path.startswith("/store/"):
            return self.reply(h, 403, b"<Error>SignatureDoesNotMatch</Error>")
        r, body = self.upstream(path[len("/store"):])
        self.reply(h, r.status, body, [("Content-Type", "application/octet-stream")])

    def stop(self):
        for s in (self.api, self.token, self.blobs):
            s.shutdown()
            s.server_close()


def test_pull_from_a_registry_that_behaves_as_the_big_ones_do(store, registry):
    """A token service on another host (anonymous), blobs at a signed URL on another host
    (no credentials go there, the query string intact), 429 with Retry-After honoured, an
    index carrying an attestation manifest (never fetched), zstd and gzip layers."""
    hub = HubLike(registry)
    try:
        p = store.pull(f"{hub.api.host}/test/multi:v1")
        assert p.returncode == 0, p.stderr
        assert store.fixture_env(f"{hub.api.host}/test/multi:v1") == "this-platform"
        assert hub.token_requests and all(a is None for _, a in hub.token_requests), \
            "an anonymous token is asked for without credentials"
        after = [t for path, t in hub.api_requests if "/manifests/" in path and t > hub.limited]
        assert hub.limited and after, "the manifest was not asked for again after the 429"
        assert after[0] - hub.limited >= 0.9, "Retry-After: 1 was not waited for"
        assert not any(hub.attestation in path for path, _ in hub.api_requests), \
            "the attestation manifest was fetched"
        assert len(hub.blob_requests) >= 4
        assert all(a is None and HubLike.SIGNATURE in q for _, q, a in hub.blob_requests), \
            hub.blob_requests
    finally:
        hub.stop()


def test_pull_told_to_wait_long_says_so_and_what_helps(store, registry):
    """A rate limit that asks for an hour: no silent hour-long wait, a message naming the
    registry, the wait, and what helps (credentials, a mirror)."""
    class Limited(HubLike):
        def _serve_api(self, h):
            if "/manifests/" in h.path:
                return self.reply(h, 429, b'{"errors":[{"code":"TOOMANYREQUESTS",'
                                          b'"message":"pull rate limit"}]}',
                                  [("Retry-After", "3600")])
            return super()._serve_api(h)
    hub = Limited(registry)
    hub.TOKEN = None  # no auth: straight to the limit
    try:
        start = time.monotonic()
        p = store.pull(f"{hub.api.host}/test/multi:v1")
        assert p.returncode == 125, p.stderr
        assert time.monotonic() - start < 60
        assert "429" in p.stderr and "3600" in p.stderr and hub.api.host in p.stderr, p.stderr
        assert "mirror" in p.stderr and "login" in p.stderr, p.stderr
        assert store.names() in (None, {}), "nothing stored"
    finally:
        hub.stop()


# --- Docker Hub's names -------------------------------------------------------------------

HUB_REGISTRY = """\
set -e
ip link set lo up
mount --bind "$1" /etc/hosts
docker-registry serve "$2" >"$3" 2>&1 &
reg=$!
i=0
until (exec 3<>/dev/tcp/127.0.0.1/443) 2>/dev/null; do
  i=$((i + 1)); [ $i -lt 300 ] || { echo "the registry did not start" >&2; exit 99; }
  sleep 0.1
done
shift 3
rc=0
"$@" || rc=$?
kill $reg
exit $rc
"""


def test_a_docker_io_name_is_pulled_from_docker_hubs_api_host_with_dockers_credentials(
        store, registry, tmp_path):
    """docker.io's images (and short names, library/ for one component) come from Docker
    Hub's API host, with the credentials docker login stored under its index URL. In a user,
    mount and network namespace of the test's own, /etc/hosts sends both docker.io and the
    API host to a registry on 127.0.0.1:443 whose certificate names both: its log says which
    host each request named."""
    registry.seed(f"oci:{registry.layout}:latest", "library/bb:v1")
    work = str(tmp_path)
    ca, crt, key = make_test_ca(work, "DNS:registry-1.docker.io,DNS:docker.io")
    hosts = os.path.join(work, "hosts")
    with open(hosts, "w") as f:
        f.write("127.0.0.1 localhost registry-1.docker.io docker.io index.docker.io\n")
    entry = subprocess.run(["htpasswd", "-Bbn", USER, PASSWORD], capture_output=True, text=True,
                           check=True).stdout
    with open(os.path.join(work, "htpasswd"), "w") as f:
        f.write(entry)
    cfg = os.path.join(work, "hub.yml")
    with open(cfg, "w") as f:
        f.write("\n".join([
            "version: 0.1", "log:", "  level: info", "storage:", "  filesystem:",
            f"    rootdirectory: {registry.work}/storage", "auth:", "  htpasswd:",
            "    realm: hub-test", f"    path: {work}/htpasswd", "http:", "  addr: 127.0.0.1:443",
            "  tls:", f"    certificate: {crt}", f"    key: {key}"]) + "\n")
    certs = os.path.join(store.home, ".config", "containers", "certs.d", "docker.io")
    os.makedirs(certs)
    with open(os.path.join(certs, "ca.crt"), "w") as f, open(ca) as src:
        f.write(src.read())
    os.makedirs(os.path.join(store.home, ".docker"))
    with open(os.path.join(store.home, ".docker", "config.json"), "w") as f:
        f.write(auth_json("https://index.docker.io/v1/"))
    empty = os.path.join(work, "registries.conf")  # no alias or search list of the machine's
    open(empty, "w").close()
    log = os.path.join(work, "hub.log")
    env = store.env(CONTAINERS_REGISTRIES_CONF=empty)
    p = subprocess.run(["unshare", "-Urmn", "bash", "-c", HUB_REGISTRY, "hub", hosts, cfg, log,
                        "sh", "-c", f'"{CSANDBOX}" image pull --quiet docker.io/library/bb:v1 && '
                        f'"{CSANDBOX}" image pull --quiet bb:v1'],
                       capture_output=True, text=True, timeout=TIMEOUT, env=env,
                       stdin=subprocess.DEVNULL)
    with open(log) as f:
        served = f.read()
    assert p.returncode == 0, f"{p.stderr}\n{served[-3000:]}"
    asked = set(re.findall(r"http\.request\.host=(\S+)", served))
    assert asked == {"registry-1.docker.io"}, asked
    assert re.search(r"http\.request\.uri=/v2/library/bb/manifests/v1 .*"
                     r"http\.response\.status=200", served), served[-3000:]
    assert store.names() == {"docker.io/library/bb:v1": registry.manifest("library/bb", "v1")[0]}
    assert store.fixture_env("docker.io/library/bb:v1") == "bb"


# --- registries.conf ----------------------------------------------------------------------

def registries_conf(store, text, where="env"):
    """A registries.conf: named by $CONTAINERS_REGISTRIES_CONF ("env"), or a drop-in of the
    user's registries.conf.d ("user-d"). Returns (path, env)."""
    if where == "env":
        path = os.path.join(store.home, "test-registries.conf")
        env = store.env(CONTAINERS_REGISTRIES_CONF=path)
    else:
        path = os.path.join(store.home, ".config", "containers", "registries.conf.d",
                            "50-test.conf")
        env = store.env()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    return path, env


def test_a_mirror_serves_a_registry_that_cannot_be_reached(store, registry):
    """How companies avoid a registry's rate limits: the [[registry]]'s location does not
    resolve; its mirror (the test registry, plain http: insecure) serves the image, stored
    under the name that was asked for."""
    with proxy_to(registry, None) as proxy:
        _, env = registries_conf(store, f"""
[[registry]]
prefix = "unreachable.invalid"
location = "unreachable.invalid"
[[registry.mirror]]
location = "{proxy.host}"
insecure = true
""")
        p = store.run("image", "pull", "unreachable.invalid/test/bb:v1", env=env)
        assert p.returncode == 0, p.stderr
        assert any(path == "/v2/test/bb/manifests/v1" for path, _ in proxy.requests), \
            proxy.requests
    name = "unreachable.invalid/test/bb:v1"
    assert store.names() == {name: registry.manifest("test/bb", "v1")[0]}
    assert store.fixture_env(name) == "bb"


def test_a_short_name_alias_from_a_users_drop_in_and_one_search_registry(store, registry):
    """An alias (in the user's registries.conf.d) names the image; a short name without one
    goes to the only unqualified-search registry; podman pull resolves as image pull does."""
    registries_conf(store, f"""
unqualified-search-registries = ["{registry.host}"]
[aliases]
"bbalias" = "{registry.host}/test/bb"
[[registry]]
location = "{registry.host}"
insecure = true
""", where="user-d")
    p = store.run("image", "pull", "bbalias:v1")
    assert p.returncode == 0, p.stderr
    p = store.run("podman", "pull", "test/multi:v1")
    assert p.returncode == 0, p.stderr
    assert set(store.names()) == {f"{registry.host}/test/bb:v1", f"{registry.host}/test/multi:v1"}
    # run by the short name it was pulled by, as podman finds it: the one stored name that
    # is some registry's test/multi:v1
    assert store.fixture_env("test/multi:v1") == "this-platform"


def test_a_blocked_registry_is_refused_naming_the_file(store, registry):
    path, env = registries_conf(store, f"""
[[registry]]
location = "{registry.host}"
blocked = true
""")
    p = store.run("image", "pull", "--tls-verify=false", f"{registry.host}/test/bb:v1", env=env)
    assert p.returncode == 125, p.stderr
    assert "blocked" in p.stderr and f"`{path}`" in p.stderr, p.stderr
    assert store.state() in ({}, EMPTY)


def test_an_ambiguous_short_name_is_refused_with_the_choices(store, registry):
    """Several unqualified-search registries and no alias: podman without a terminal to ask
    refuses (short-name-mode enforcing), and so does csandbox, listing the candidates."""
    path, env = registries_conf(store, f"""
unqualified-search-registries = ["{registry.host}", "other.invalid"]
""")
    p = store.run("image", "pull", "--tls-verify=false", "test/bb:v1", env=env)
    assert p.returncode == 125, p.stderr
    assert f"{registry.host}/test/bb:v1, other.invalid/test/bb:v1" in p.stderr, p.stderr
    assert f"`{path}`" in p.stderr, p.stderr
    assert store.state() in ({}, EMPTY)


def test_bad_registries_conf_is_refused_naming_file_and_line(store):
    path, env = registries_conf(store, "[[registry]]\nlocation = 'https://x.example'\n")
    p = store.run("image", "pull", "x.example/a:1", env=env)
    assert p.returncode == 125, p.stderr
    assert f"`{path}` line 2" in p.stderr and "scheme" in p.stderr, p.stderr
