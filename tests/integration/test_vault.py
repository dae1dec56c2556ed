"""Agent Vault, Infisical and Pulumi (reference §8.9, §2.1 item 5): the .env's
CLAUDE_PROFILE_AGENT_VAULT_* keys never reach a session; a profile that opts in is checked
against a fake proxy serving a CA made here, and launched again through a fake `infisical`
that records its argv and starts what follows its `--` with the variables the real CLI sets.
Nothing here reaches the internet: the proxy is on 127.0.0.1, the CLIs are scripts."""
import base64
import hashlib
import http.server
import json
import os
import shutil
import ssl
import subprocess
import threading
import time

import pytest

from conftest import CSANDBOX, TIMEOUT, base_env, run_stderr_on_pty

PREFIX = "CLAUDE_PROFILE_AGENT_VAULT_"
SESSION_TOKEN = "agv_s3ssion-t0ken"
CLAUDE_NO_PROXY = ".anthropic.com,claude.ai,.claude.ai,claude.com,.claude.com,.claudeusercontent.com"
CA_VARS = ("SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
           "GIT_SSL_CAINFO", "DENO_CERT")
PROXY_VARS = ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy")
SYSTEM_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt",
                  "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", "/etc/ssl/ca-bundle.pem",
                  "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem")

# claude as a shell script: what it was given, and the CA bundle its SSL_CERT_FILE names.
CLAUDE = """#!/bin/sh
env > "$PWD/claude-env"
printf '%s\\n' "$@" > "$PWD/claude-argv"
cat "$SSL_CERT_FILE" > "$PWD/claude-bundle" 2>/dev/null
cat "$CLAUDE_CONFIG_DIR/.env" > "$PWD/claude-dotenv" 2>/dev/null
{ echo X=1 >> "$CLAUDE_CONFIG_DIR/.env"; } 2>/dev/null && echo yes > "$PWD/claude-dotenv-writable"
exit 0
"""

# `infisical agent-vault run` as far as a launch sees it: the argv recorded, the proxy's CA
# fetched (directly) into a file of its own, the proxy URLs with the session token, NO_PROXY
# from --no-proxy, the CA variables on that file, then what follows `--`.
INFISICAL = """#!/usr/bin/env python3
import json, os, sys, urllib.request
args = sys.argv[1:]
with open(os.environ["FAKE_INFISICAL_LOG"], "w") as f:
    json.dump({"argv": args, "run": os.environ.get("CLAUDE_PROFILE_AGENT_VAULT_RUN")}, f)
cut = args.index("--")
opts, cmd = args[:cut], args[cut + 1:]
proxy = opts[opts.index("--proxy") + 1]
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
cert = json.load(opener.open("http://%s/_agent-vault/ca" % proxy, timeout=5))["certificate"]
ca = os.path.join(os.environ["FAKE_INFISICAL_DIR"], "proxy-ca.pem")
with open(ca, "w") as f:
    f.write(cert)
url = "http://x-agent-vault:%s@%s" % (os.environ["FAKE_INFISICAL_TOKEN"], proxy)
env = dict(os.environ)
for k in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy", "OPENCLAW_PROXY_URL"):
    env[k] = url
env["NO_PROXY"] = env["no_proxy"] = opts[opts.index("--no-proxy") + 1]
env["NODE_USE_ENV_PROXY"] = "1"
for k in ("SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
          "GIT_SSL_CAINFO", "DENO_CERT"):
    env[k] = ca
os.execvpe(cmd[0], cmd, env)
"""


def make_ca(tmp_path, name):
    key, pem = tmp_path / (name + ".key"), tmp_path / (name + ".pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=" + name, "-days", "2",
                    "-keyout", str(key), "-out", str(pem)], check=True, capture_output=True)
    text = pem.read_text()
    digest = hashlib.sha256(ssl.PEM_cert_to_DER_cert(text)).hexdigest().upper()
    return text, "SHA256:" + ":".join(digest[i:i + 2] for i in range(0, 64, 2))


class Proxy:
    """The proxy's certificate endpoint on 127.0.0.1, as the vault's proxy answers it."""

    def __init__(self, pem):
        self.pem, self.hits = pem, 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                outer.hits += 1
                if self.path != "/_agent-vault/ca":
                    self.send_error(404)
                    return
                body = json.dumps({"proxyId": "p-1", "name": "test", "certificate": outer.pem,
                                   "fingerprint": "ignored"}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.addr = "127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class Vault:
    """A temporary HOME with one profile `work`, a fake claude, infisical and proxy."""

    def __init__(self, tmp_path, sandbox=True):
        self.tmp = tmp_path
        self.home = tmp_path / "home"
        self.base = self.home / ".claude-profiles"
        self.data = tmp_path / "data"
        self.bin = tmp_path / "bin"
        self.project = self.home / "src" / "project"
        for d in (self.base, self.data, self.bin, self.project):
            d.mkdir(parents=True)
        self.profile = self.base / "work"
        self.profile.mkdir()
        if sandbox:
            (self.profile / ".sandbox").touch()
        self.script("claude", CLAUDE)
        self.script("infisical", INFISICAL)
        self.log = tmp_path / "infisical.json"
        self.pem, self.fingerprint = make_ca(tmp_path, "test-proxy-ca")
        self.proxy = Proxy(self.pem)

    def script(self, name, text):
        p = self.bin / name
        p.write_text(text)
        p.chmod(0o755)

    def dotenv(self, text):
        (self.profile / ".env").write_text(text)

    def opt_in(self, extra=""):
        self.dotenv(f"OTHER=kept\n{PREFIX}BUNDLE=coding\n{PREFIX}PROXY={self.proxy.addr}\n"
                    f"{PREFIX}CA_FINGERPRINT={self.fingerprint.lower()}\n{extra}")

    def env(self, **extra):
        e = base_env(HOME=str(self.home), XDG_DATA_HOME=str(self.data),
                     PATH=f"{self.bin}:{os.environ['PATH']}",
                     CLAUDE_PROFILE_CLAUDE_BIN=str(self.bin / "claude"),
                     CLAUDE_PROFILE_PROFILES_BASE=None, CLAUDE_PROFILE_SANDBOX_FORWARD_ENV=None,
                     XDG_RUNTIME_DIR=None, FAKE_INFISICAL_LOG=str(self.log),
                     FAKE_INFISICAL_DIR=str(self.tmp), FAKE_INFISICAL_TOKEN=SESSION_TOKEN)
        for k, v in extra.items():
            if v is None:
                e.pop(k, None)
            else:
                e[k] = v
        return e

    def run(self, cmd="run", args=("-p", "hi"), env=None, flags=()):
        return subprocess.run([CSANDBOX, cmd, *flags, "work", "--", *args],
                              cwd=str(self.project), env=env or self.env(),
                              capture_output=True, text=True, timeout=TIMEOUT,
                              stdin=subprocess.DEVNULL)

    def claude_env(self):
        lines = (self.project / "claude-env").read_text().splitlines()
        return dict(x.split("=", 1) for x in lines if "=" in x)

    def claude_argv(self):
        return (self.project / "claude-argv").read_text()

    def infisical(self):
        return json.loads(self.log.read_text())

    def bundles(self):
        d = self.data / "csandbox" / "agent-vault"
        return sorted(d.glob("ca-bundle-*.pem")) if d.exists() else []


@pytest.fixture
def vault(tmp_path):
    v = Vault(tmp_path)
    yield v
    v.proxy.close()


@pytest.fixture
def host_vault(tmp_path):
    v = Vault(tmp_path, sandbox=False)
    yield v
    v.proxy.close()


def host_system_bundle():
    for b in SYSTEM_BUNDLES:
        if os.path.isfile(b):
            return b
    raise AssertionError("this host has no system CA bundle")


# --- the keys never reach a session ------------------------------------------------------

@pytest.mark.parametrize("sandboxed", [True, False])
def test_vault_keys_never_reach_the_session(tmp_path, sandboxed):
    v = Vault(tmp_path, sandbox=sandboxed)
    try:
        # No BUNDLE: the vault is off, and the other keys wait for it.
        v.dotenv(f"OTHER=kept\n{PREFIX}PROXY={v.proxy.addr}\n{PREFIX}CA_FINGERPRINT="
                 f"{v.fingerprint}\n{PREFIX}INFISICAL_PROFILE=dev\n{PREFIX}NO_PROXY=x.example\n")
        env = v.env(**{PREFIX + "NO_PROXY": "exported.example",
                       "CLAUDE_PROFILE_SANDBOX_FORWARD_ENV": PREFIX + "PROXY"})
        r = v.run(env=env)
        assert r.returncode == 0, r.stderr
        inside = v.claude_env()
        assert inside["OTHER"] == "kept"
        leaked = [k for k in inside if k.startswith(PREFIX)]
        assert leaked == [], leaked
        assert v.proxy.addr not in json.dumps(inside)
        assert "CLAUDE_SANDBOX_AGENT_VAULT" not in inside, "no vault, no note"
        assert v.proxy.hits == 0 and not v.log.exists()
        if sandboxed:
            # Not through the profile's .env either: the session's copy has the rest.
            assert (v.project / "claude-dotenv").read_text() == "OTHER=kept\n"
            assert not (v.project / "claude-dotenv-writable").exists()
            assert PREFIX in (v.profile / ".env").read_text(), "the host's file is untouched"
            assert f"names {PREFIX}PROXY, an Agent Vault setting" in r.stderr
            plan = json.loads(v.run(cmd="plan", env=env).stdout)
            assert not [e for e in plan["env"] if e["name"].startswith(PREFIX)]
        else:
            plan = json.loads(v.run(cmd="plan", env=env).stdout)
            assert plan["launch"] == "host"
            assert not [k for k in plan["env_added"] if k.startswith(PREFIX)]
    finally:
        v.proxy.close()


@pytest.mark.parametrize("sandboxed", [True, False])
def test_an_unknown_vault_key_is_refused_naming_it_and_the_file(tmp_path, sandboxed):
    v = Vault(tmp_path, sandbox=sandboxed)
    try:
        v.opt_in(f"{PREFIX}BUNDEL=typo\n")
        for cmd in ("run", "plan"):
            r = v.run(cmd=cmd)
            assert r.returncode == 125, (cmd, r.stdout, r.stderr)
            assert f"{PREFIX}BUNDEL is not one of its settings" in r.stderr
            assert str(v.profile / ".env") in r.stderr
            for known in ("BUNDLE", "PROXY", "CA_FINGERPRINT", "INFISICAL_PROFILE", "NO_PROXY"):
                assert known in r.stderr
        assert not (v.project / "claude-env").exists()
        assert v.proxy.hits == 0 and not v.log.exists()
    finally:
        v.proxy.close()


def test_bundle_without_proxy_or_fingerprint_is_refused(vault):
    vault.dotenv(f"{PREFIX}BUNDLE=coding\n{PREFIX}CA_FINGERPRINT={vault.fingerprint}\n")
    r = vault.run()
    assert r.returncode == 125, r.stderr
    assert f"{PREFIX}PROXY is not set" in r.stderr and "BUNDLE needs it" in r.stderr
    vault.dotenv(f"{PREFIX}BUNDLE=coding\n{PREFIX}PROXY={vault.proxy.addr}\n")
    r = vault.run()
    assert r.returncode == 125 and f"{PREFIX}CA_FINGERPRINT is not set" in r.stderr, r.stderr
    vault.dotenv(f"{PREFIX}BUNDLE=coding\n{PREFIX}PROXY={vault.proxy.addr}\n"
                 f"{PREFIX}CA_FINGERPRINT=9f2c\n")
    r = vault.run()
    assert r.returncode == 125 and "SHA256:9F:2C" in r.stderr, r.stderr
    assert not (vault.project / "claude-env").exists() and vault.proxy.hits == 0


# --- the vault works ---------------------------------------------------------------------

def expected_infisical_argv(vault, *, profile=None, extra_no_proxy=None, inner=("run",)):
    argv = ["agent-vault", "run", "--silent"]
    if profile:
        argv += ["--profile", profile]
    no_proxy = CLAUDE_NO_PROXY + ("," + extra_no_proxy if extra_no_proxy else "")
    return argv + ["--access-bundle", "coding", "--proxy", vault.proxy.addr, "--ca-fingerprint",
                   vault.fingerprint, "--ttl", "24h", "--no-proxy", no_proxy, "--",
                   os.path.realpath(CSANDBOX), *inner, "work", "--", "-p", "hi"]


def test_the_vault_flow_in_a_sandbox(vault):
    vault.opt_in(f"{PREFIX}INFISICAL_PROFILE=dev\n{PREFIX}NO_PROXY= internal.example , \n")
    r = vault.run()
    assert r.returncode == 0, r.stderr
    assert "unavailable" not in r.stderr
    log = vault.infisical()
    assert log["argv"] == expected_infisical_argv(vault, profile="dev",
                                                  extra_no_proxy="internal.example")
    assert log["run"] == "work"
    inside = vault.claude_env()
    url = f"http://x-agent-vault:{SESSION_TOKEN}@{vault.proxy.addr}"
    for k in PROXY_VARS:
        assert inside[k] == url, k
    assert "OPENCLAW_PROXY_URL" not in inside
    no_proxy = (CLAUDE_NO_PROXY + ",internal.example,169.254.1.2,host.containers.internal,"
                "host.csandbox.internal")
    assert inside["NO_PROXY"] == inside["no_proxy"] == no_proxy
    assert inside["NODE_USE_ENV_PROXY"] == "1"
    system = os.path.realpath(host_system_bundle())
    for k in CA_VARS:
        assert inside[k] == system, k
    assert inside["CLAUDE_SANDBOX_AGENT_VAULT"] == "active"
    assert inside["OTHER"] == "kept"
    assert not [k for k in inside if k.startswith(PREFIX)]
    # The combined bundle, over the system bundle: the host's roots and the proxy's CA.
    seen = (vault.project / "claude-bundle").read_text()
    assert vault.pem.strip() in seen
    host = open(host_system_bundle()).read().strip()
    assert seen.startswith(host)
    [bundle] = vault.bundles()
    assert bundle.read_text() == seen
    assert "Credentials are brokered by Infisical Agent Vault" in vault.claude_argv()
    assert "coding" not in (vault.project / "claude-dotenv").read_text()


def test_the_vault_flow_on_an_image_without_a_ca_bundle(vault):
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "fixtures"))
    import oci
    from conftest import PROBE
    layout = str(vault.tmp / "layout")
    oci.write_layout(layout, oci.busybox_layers(str(vault.tmp), PROBE), ref="latest")
    r = subprocess.run([CSANDBOX, "image", "import", layout, "--name", "vault-img"],
                       env=vault.env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    vault.opt_in()
    r = vault.run(flags=("--image", "vault-img"))
    assert r.returncode == 0, r.stderr
    argv = vault.infisical()["argv"]
    assert argv[argv.index("--") + 1:] == [os.path.realpath(CSANDBOX), "run", "--image",
                                            "vault-img", "work", "--", "-p", "hi"]
    inside = vault.claude_env()
    # The image has no system bundle: the combined one is made at the first usual path.
    for k in CA_VARS:
        assert inside[k] == "/etc/ssl/certs/ca-certificates.crt", k
    seen = (vault.project / "claude-bundle").read_text()
    assert vault.pem.strip() in seen
    assert inside["CLAUDE_SANDBOX_AGENT_VAULT"] == "active"


def test_plan_shows_the_vault_command_and_the_session_with_secrets_redacted(vault):
    vault.opt_in()
    plan = json.loads(vault.run(cmd="plan").stdout)
    assert plan["launch"] == "agent-vault"
    assert plan["path"] == str(vault.bin / "infisical")
    argv = plan["argv"]
    assert argv[argv.index("--access-bundle") + 1] == "<redacted>"
    assert "coding" not in json.dumps(plan)
    assert argv[argv.index("--") + 1:][:3] == [os.path.realpath(CSANDBOX), "run", "work"]
    assert plan["env_added"] == {PREFIX + "RUN": "work"}
    assert not vault.log.exists(), "plan starts nothing"
    # The launch infisical starts, planned.
    r = subprocess.run([str(vault.bin / "infisical"), "agent-vault", "run", "--proxy",
                        vault.proxy.addr, "--no-proxy", "x.example", "--", CSANDBOX, "plan",
                        "work"], cwd=str(vault.project),
                       env=vault.env(**{PREFIX + "RUN": "work"}), capture_output=True,
                       text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    inner = json.loads(r.stdout)
    env = {e["name"]: e["value"] for e in inner["env"]}
    for k in PROXY_VARS:
        assert env[k] == "<redacted>"
    assert SESSION_TOKEN not in r.stdout
    assert env["CLAUDE_SANDBOX_AGENT_VAULT"] == "active"
    [bundle] = vault.bundles()
    system = os.path.realpath(host_system_bundle())
    mounts = [(m["source"], m["dest"], m["readonly"]) for m in inner["mounts"]
              if m["kind"] == "bind"]
    assert (str(bundle), system, True) in mounts


def test_the_vault_flow_on_the_host(host_vault):
    v = host_vault
    v.opt_in()
    r = v.run()
    assert r.returncode == 0, r.stderr
    assert v.infisical()["argv"] == expected_infisical_argv(v)
    seen = v.claude_env()
    url = f"http://x-agent-vault:{SESSION_TOKEN}@{v.proxy.addr}"
    for k in (*PROXY_VARS, "OPENCLAW_PROXY_URL"):
        assert seen[k] == url, k
    [bundle] = v.bundles()
    for k in CA_VARS:
        assert seen[k] == str(bundle), k
    assert seen["NO_PROXY"] == CLAUDE_NO_PROXY
    assert seen["OTHER"] == "kept"
    assert not [k for k in seen if k.startswith(PREFIX)], "not even _RUN"
    assert "CLAUDE_SANDBOX_AGENT_VAULT" not in seen
    text = (v.project / "claude-bundle").read_text()
    assert v.pem.strip() in text and text.startswith(open(host_system_bundle()).read().strip())
    # Planned, as infisical starts it: the token redacted.
    r = subprocess.run([str(v.bin / "infisical"), "agent-vault", "run", "--proxy", v.proxy.addr,
                        "--no-proxy", "x.example", "--", CSANDBOX, "plan", "work"],
                       cwd=str(v.project), env=v.env(**{PREFIX + "RUN": "work"}),
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    added = json.loads(r.stdout)["env_added"]
    for k in (*PROXY_VARS, "OPENCLAW_PROXY_URL"):
        assert added[k] == "<redacted>", k
    assert added["SSL_CERT_FILE"] == str(bundle) and added["NO_PROXY"] == "x.example"
    assert SESSION_TOKEN not in r.stdout


# --- the vault fails: the session runs without it ------------------------------------------

def check_unavailable(vault, r, why):
    assert r.returncode == 0, r.stderr
    assert "Agent Vault is unavailable" in r.stderr and why in r.stderr, r.stderr
    assert "launches without it" in r.stderr
    assert not vault.log.exists(), "infisical never ran"
    inside = vault.claude_env()
    assert inside["CLAUDE_SANDBOX_AGENT_VAULT"] == "unavailable"
    assert not [k for k in inside if k.startswith(PREFIX) or k in PROXY_VARS]
    assert "Agent Vault could not be used when this session started" in vault.claude_argv()


def test_a_fingerprint_mismatch_launches_without_the_vault(vault):
    other_pem, other = make_ca(vault.tmp, "another-ca")
    vault.dotenv(f"{PREFIX}BUNDLE=coding\n{PREFIX}PROXY={vault.proxy.addr}\n"
                 f"{PREFIX}CA_FINGERPRINT={other}\n")
    r = vault.run()
    check_unavailable(vault, r, f"serves the CA {vault.fingerprint}, not the pinned {other}")
    assert vault.proxy.hits == 1


def test_a_proxy_that_is_down_launches_without_the_vault(vault):
    vault.opt_in()
    vault.proxy.close()
    start = time.monotonic()
    r = vault.run()
    check_unavailable(vault, r, f"the proxy at {vault.proxy.addr} did not serve its CA")
    assert time.monotonic() - start < 20


def test_the_unavailable_note_is_bold_red_on_a_terminal(vault):
    vault.opt_in()
    p, text = run_stderr_on_pty([CSANDBOX, "plan", "work"],
                                vault.env(CLAUDE_PROFILE_INFISICAL_BIN="infisical-not-here"))
    assert p.returncode == 0, text
    assert "\x1b[1;31mcsandbox: Agent Vault is unavailable: the infisical CLI" in text, text
    env = {e["name"]: e["value"] for e in json.loads(p.stdout)["env"]}
    assert env["CLAUDE_SANDBOX_AGENT_VAULT"] == "unavailable"


def test_a_forged_run_variable_is_refused(vault):
    vault.opt_in()
    r = vault.run(env=vault.env(**{PREFIX + "RUN": "work"}))
    assert r.returncode == 125 and "not started by `infisical agent-vault run`" in r.stderr
    assert not (vault.project / "claude-env").exists()


# --- Infisical and Pulumi ----------------------------------------------------------------

def jwt(exp):
    def part(obj):
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")
    return f"{part({'alg': 'HS256'})}.{part({'exp': exp, 'sub': 'x'})}.c2ln"


def test_infisical_logins_are_passed_in_with_their_note(vault):
    live, dead = jwt(int(time.time()) + 86400), jwt(int(time.time()) - 10)
    cfg = vault.home / ".infisical"
    cfg.mkdir()
    (cfg / "infisical-config.json").write_text(json.dumps({
        "loggedInUserEmail": "a@corp.example",
        "loggedInUsers": [
            {"email": "b@corp.example", "domain": "https://eu.infisical.example"},
            {"email": "a@corp.example", "domain": "https://app.infisical.example"},
            {"email": "c@other.example", "domain": "https://app.infisical.example"},
            {"email": "d@jimcorp.example", "domain": "https://x.example"}]}))
    vault.script("secret-tool", f"""#!/bin/sh
[ "$1 $2 $3 $4" = "lookup service infisical-cli username" ] || exit 2
case "$5" in
a@corp.example) echo '{{"JTWToken": "{live}", "RefreshToken": "r"}}' ;;
b@corp.example) echo '{{"JTWToken": "{dead}"}}' ;;
*) exit 1 ;;
esac
""")
    env = vault.env(CLAUDE_PROFILE_SANDBOX_INFISICAL="Corp.example, nobody@none.example")
    r = vault.run(env=env)
    assert r.returncode == 0, r.stderr
    inside = vault.claude_env()
    assert "INFISICAL_TOKEN" in inside, r.stderr
    assert inside["INFISICAL_TOKEN"] == live
    assert inside["INFISICAL_API_URL"] == inside["INFISICAL_DOMAIN"] == \
        "https://app.infisical.example"
    assert inside["CLAUDE_SANDBOX_INFISICAL"] == json.dumps([
        {"email": "a@corp.example", "domain": "https://app.infisical.example", "token": live}])
    assert "b@corp.example has no valid token" in r.stderr
    assert "matches `nobody@none.example`" in r.stderr
    assert "jimcorp" not in inside["CLAUDE_SANDBOX_INFISICAL"]
    argv = vault.claude_argv()
    assert "The infisical CLI is logged in" in argv
    assert "a@corp.example (https://app.infisical.example)" in argv and live not in argv
    plan = json.loads(vault.run(cmd="plan", env=env).stdout)
    penv = {e["name"]: e["value"] for e in plan["env"]}
    assert penv["INFISICAL_TOKEN"] == penv["CLAUDE_SANDBOX_INFISICAL"] == "<redacted>"
    assert live not in json.dumps(plan)
    # Without secret-tool the logins cannot be read: a warning, nothing passed in.
    (vault.bin / "secret-tool").unlink()
    env["PATH"] = f"{vault.bin}:/usr/bin:/bin"
    if shutil.which("secret-tool", path=env["PATH"]):
        pytest.fail("secret-tool is installed on this host; the test needs it absent")
    r = vault.run(env=env)
    assert r.returncode == 0 and "secret-tool is not installed" in r.stderr, r.stderr
    assert "INFISICAL_TOKEN" not in vault.claude_env()


def test_pulumi_access_token_is_passed_in(vault):
    d = vault.home / ".pulumi"
    d.mkdir()
    creds = d / "credentials.json"
    creds.write_text(json.dumps({"current": "https://api.pulumi.example",
                                 "accessTokens": {"https://api.pulumi.example": "pul-t0ken"}}))
    env = vault.env(CLAUDE_PROFILE_SANDBOX_PULUMI="1")
    r = vault.run(env=env)
    assert r.returncode == 0, r.stderr
    assert vault.claude_env()["PULUMI_ACCESS_TOKEN"] == "pul-t0ken"
    assert "PULUMI_ACCESS_TOKEN is set" in vault.claude_argv()
    plan = json.loads(vault.run(cmd="plan", env=env).stdout)
    assert {e["name"]: e["value"] for e in plan["env"]}["PULUMI_ACCESS_TOKEN"] == "<redacted>"
    # A self-managed backend has no token: a warning.
    creds.write_text(json.dumps({"current": "s3://bucket", "accessTokens": {}}))
    r = vault.run(env=env)
    assert r.returncode == 0 and "no Pulumi Cloud token" in r.stderr, r.stderr
    assert "PULUMI_ACCESS_TOKEN" not in vault.claude_env()
    # No credentials file at all: the warning says the file is missing, not tokenless.
    creds.unlink()
    r = vault.run(env=env)
    assert r.returncode == 0 and "credentials.json does not exist" in r.stderr, r.stderr
    assert "no Pulumi Cloud token" not in r.stderr
    r = vault.run()
    assert "PULUMI" not in r.stderr and "PULUMI_ACCESS_TOKEN" not in vault.claude_env()
