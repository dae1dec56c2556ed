"""Reference §5 and the rest of the session's settings: the gpg-agent, the clipboard relay,
--chrome and the memory and CPU limits, each run for real as the test user (a real gpg-agent
with a key; a host wl-paste that records how it was called) and checked on the host."""
import json
import os
import shutil
import signal
import subprocess


import pytest

from conftest import CSANDBOX, TIMEOUT, wait_until
from test_run import (HOME_IN, Profiles, agent, binds, env_of, git,  # noqa: F401 (agent, profiles)
                      import_busybox_image, profiles, shell_claude)


# --- gpg-agent ---------------------------------------------------------------------------

@pytest.fixture
def gpg(tmp_path):
    """A gpg home with a signing key and its agent running (sockets in the home: the test
    user has no /run/user)."""
    home = tmp_path / "gnupg"
    home.mkdir(mode=0o700)
    env = dict(os.environ, GNUPGHOME=str(home))
    subprocess.run(["gpg", "--batch", "--passphrase", "", "--quick-gen-key",
                    "Csb Signer <signer@example.invalid>", "ed25519", "sign", "0"],
                   env=env, check=True, capture_output=True, timeout=60)
    subprocess.run(["gpgconf", "--launch", "gpg-agent"], env=env, check=True, timeout=30)
    yield home
    subprocess.run(["gpgconf", "--kill", "gpg-agent"], env=env, timeout=30)


def _gpg_env(profiles, home, **extra):
    return profiles.env(GNUPGHOME=str(home), CLAUDE_PROFILE_SANDBOX_GPG="1", **extra)


def _repo(profiles):
    p = profiles.project
    git("init", "-q", cwd=p)
    (p / "f").write_text("x\n")
    git("add", "f", cwd=p)
    return p


SIGN_COMMIT = """cd "$PWD"
ls -A "$GNUPGHOME" > gnupghome; echo "$GNUPGHOME" > gnupgenv
git -c "user.name=Csb Signer" -c user.email=signer@example.invalid commit -q -S -m signed > commit.out 2>&1
echo $? > commit.rc
"""


def test_gpg_agent_signs_a_commit_inside_that_verifies_on_the_host(profiles, gpg):
    profiles.add()
    repo = _repo(profiles)
    shell_claude(profiles, SIGN_COMMIT)
    r = profiles.run(env=_gpg_env(profiles, gpg))
    assert r.returncode == 0, r.stderr
    assert (repo / "commit.rc").read_text().strip() == "0", (repo / "commit.out").read_text()
    assert (repo / "gnupgenv").read_text().strip() == HOME_IN + "/.gnupg"
    assert sorted((repo / "gnupghome").read_text().split()) == [
        "S.gpg-agent", "gpg.conf", "pubring.gpg"], "no secret key inside"
    v = subprocess.run(["git", "verify-commit", "-v", "HEAD"], cwd=repo, capture_output=True,
                       text=True, env=dict(os.environ, GNUPGHOME=str(gpg)))
    assert v.returncode == 0 and "Good signature" in v.stderr, v.stderr


def _identity(plan):
    """The git identity file the plan binds (its host copy)."""
    src = [m["source"] for m in plan["mounts"] if m["dest"] == HOME_IN + "/.gitconfig-identity"]
    return open(src[0]).read()


def _signing_repo(profiles, **config):
    """A profile and a repository whose own config holds these keys (dots as "__")."""
    profiles.add()
    repo = _repo(profiles)
    for key, value in config.items():
        git("config", key.replace("__", "."), value, cwd=repo)
    return repo


def test_gpg_forwarding_carries_the_signing_identity_and_the_socket(profiles, gpg):
    _signing_repo(profiles, user__email="me@example.invalid",
                  user__signingkey="signer@example.invalid", commit__gpgsign="true")
    plan = profiles.plan(env=_gpg_env(profiles, gpg))
    assert env_of(plan)["GNUPGHOME"] == HOME_IN + "/.gnupg"
    assert "gpg-agent is forwarded" in plan["argv"][plan["argv"].index("--append-system-prompt") + 1]
    assert (str(gpg / "S.gpg-agent.extra"), HOME_IN + "/.gnupg/S.gpg-agent", False) in binds(plan)
    files = {m["dest"]: m for m in plan["mounts"] if m["kind"] == "file"}
    assert HOME_IN + "/.gnupg/pubring.gpg" in files and HOME_IN + "/.gnupg/gpg.conf" in files
    text = _identity(plan)
    assert 'signingkey = "signer@example.invalid"' in text and 'gpgsign = "true"' in text
    # Without forwarding, no signing key reaches the sandbox (it could not sign).
    plan = profiles.plan(env=profiles.env(GNUPGHOME=str(gpg)))
    assert "GNUPGHOME" not in env_of(plan)
    assert "signingkey" not in _identity(plan)


def test_gpg_signing_keys_that_cannot_work_inside_are_dropped(profiles, gpg):
    _signing_repo(profiles, user__email="me@example.invalid", user__signingkey="~/.ssh/id.pub",
                  gpg__format="ssh")
    plan = profiles.plan(env=_gpg_env(profiles, gpg))
    text = _identity(plan)
    assert "me@example.invalid" in text
    assert "signingkey" not in text and "format" not in text


def test_gpg_without_an_agent_warns_and_forwards_nothing(profiles, tmp_path):
    profiles.add()
    home = tmp_path / "nognupg"
    home.mkdir(mode=0o700)
    # gpgconf --launch cannot start an agent in a home it cannot write.
    home.chmod(0o500)
    r = profiles.run(cmd="plan", env=_gpg_env(profiles, home))
    home.chmod(0o700)
    assert r.returncode == 0, r.stderr
    assert "Warning: CLAUDE_PROFILE_SANDBOX_GPG is set but no gpg-agent socket was found" in r.stderr
    plan = json.loads(r.stdout)
    assert "GNUPGHOME" not in env_of(plan)
    assert not any(m["dest"].startswith(HOME_IN + "/.gnupg") for m in plan["mounts"])


# --- the clipboard -----------------------------------------------------------------------

def _fake_wl_paste(profiles, tmp_path):
    """A host wl-paste that logs its arguments and answers like the real one."""
    d = tmp_path / "wlbin"
    d.mkdir(exist_ok=True)
    log = tmp_path / "wl.log"
    w = d / "wl-paste"
    w.write_text(f"""#!/bin/sh
echo "$*" >> {log}
case "$*" in
  "--list-types") printf 'text/plain\\nimage/png\\n' ;;
  "--type image/png") printf '\\211PNG\\r\\n\\032\\n\\000\\377' ;;
  "--no-newline") printf 'copied text' ;;
  "--primary --no-newline") printf 'primary text' ;;
  "--type text/slow") exec sleep 60 ;;
  *) echo "Nothing is copied" >&2; exit 1 ;;
esac
""")
    w.chmod(0o755)
    return profiles.env(PATH=f"{d}:{os.environ['PATH']}", CLAUDE_PROFILE_SANDBOX_CLIPBOARD="1"), log


CLIP = """cd "$PWD"
command -v wl-paste > which
wl-paste --list-types > types; echo $? >> rcs
wl-paste --type image/png > png; echo $? >> rcs
wl-paste --no-newline > text; echo $? >> rcs
wl-paste --primary --no-newline > primary; echo $? >> rcs
wl-paste --watch sh -c id > watch 2> watch.err; echo $? >> rcs
wl-paste --type application/x-secret > secret 2> secret.err; echo $? >> rcs
"""


def test_clipboard_reads_through_the_relay_and_only_allowed_reads_reach_the_host(
        profiles, tmp_path):
    profiles.add()
    env, log = _fake_wl_paste(profiles, tmp_path)
    shell_claude(profiles, CLIP)
    r = profiles.run(env=env)
    assert r.returncode == 0, r.stderr
    p = profiles.project
    assert (p / "which").read_text().strip() == HOME_IN + "/.local/bin/wl-paste"
    assert (p / "rcs").read_text().split() == ["0", "0", "0", "0", "1", "1"]
    assert (p / "types").read_text() == "text/plain\nimage/png\n"
    assert (p / "png").read_bytes() == b"\x89PNG\r\n\x1a\n\x00\xff"
    assert (p / "text").read_text() == "copied text"
    assert (p / "primary").read_text() == "primary text"
    assert "argument not allowed: --watch" in (p / "watch.err").read_text()
    assert "argument not allowed: application/x-secret" in (p / "secret.err").read_text()
    # The host's wl-paste ran for the four allowed reads only.
    assert log.read_text().splitlines() == ["--list-types", "--type image/png", "--no-newline",
                                            "--primary --no-newline"]
    # Its socket's name lived as long as the session.
    assert not list(profiles.state().glob("clipboard-*"))
    plan = profiles.plan(env=env)
    brief = plan["argv"][plan["argv"].index("--append-system-prompt") + 1]
    assert "clipboard can be read" in brief and "gpg-agent" not in brief


def test_clipboard_relay_speaks_only_the_protocol(profiles, tmp_path):
    """A session that talks to the relay itself, not through the shim, gets no more."""
    profiles.add()
    env, log = _fake_wl_paste(profiles, tmp_path)
    shell_claude(profiles, """cd "$PWD"
python3 - <<'PY'
import socket
out = []
for req in [b"--list-types\\n", b"-w id\\n", b"--list-types;id\\n", b"x" * 5000,
            b"--type text/plain --type=image/png --type --type --type --type --type --type "
            b"--type --type --type --type --type --type --type --type --type\\n"]:
    s = socket.socket(socket.AF_UNIX)
    s.connect("/run/claude-sandbox/clipboard.sock")
    s.sendall(req)
    s.shutdown(socket.SHUT_WR)
    out.append(s.makefile("rb").readline().decode().strip())
open("answers", "w").write("\\n".join(out))
PY
""")
    r = profiles.run(env=env)
    assert r.returncode == 0, r.stderr
    answers = (profiles.project / "answers").read_text().splitlines()
    assert answers[0] == "OK"
    assert answers[1] == "ERR argument not allowed: -w"
    assert answers[2] == "ERR argument not allowed: --list-types;id"
    assert answers[3] == "ERR request too long"
    assert answers[4] == "ERR too many arguments"
    assert log.read_text().splitlines() == ["--list-types"]


def test_clipboard_hung_wl_paste_is_cut_at_the_timeout(profiles, tmp_path):
    profiles.add()
    env, log = _fake_wl_paste(profiles, tmp_path)
    shell_claude(profiles, 'cd "$PWD"; wl-paste --type text/slow > out 2> err; echo $? > rc\n')
    r = profiles.run(env=env, timeout=50)
    assert r.returncode == 0, r.stderr
    assert (profiles.project / "rc").read_text().strip() == "1"
    assert "did not answer within 10 s" in (profiles.project / "err").read_text()
    assert log.read_text().splitlines() == ["--type text/slow"]


def test_clipboard_without_wl_paste_on_the_host_is_a_clear_error(profiles, tmp_path):
    profiles.add()
    empty = tmp_path / "empty"
    empty.mkdir()
    env = profiles.env(PATH=f"{empty}:/usr/bin:/bin", CLAUDE_PROFILE_SANDBOX_CLIPBOARD="1")
    r = profiles.run(env=env)
    assert r.returncode == 125
    assert "CLAUDE_PROFILE_SANDBOX_CLIPBOARD is set, but 'wl-paste' is not found" in r.stderr
    assert not (profiles.project / "which").exists()


def test_clipboard_shim_runs_in_an_image_without_the_hosts_libraries(profiles, tmp_path):
    profiles.add()
    import_busybox_image(profiles, tmp_path)
    env, log = _fake_wl_paste(profiles, tmp_path)
    env["CLAUDE_PROFILE_SANDBOX_IMAGE"] = "sandbox-img"
    shell_claude(profiles, 'cd "$PWD"; wl-paste --no-newline > text; echo $? > rc\n')
    r = profiles.run(env=env)
    assert r.returncode == 0, r.stderr
    assert (profiles.project / "rc").read_text().strip() == "0"
    assert (profiles.project / "text").read_text() == "copied text"


def test_a_killed_launchs_relay_socket_is_swept_by_the_next(profiles, tmp_path):
    profiles.add()
    env, _ = _fake_wl_paste(profiles, tmp_path)
    shell_claude(profiles, "sleep 60\n")
    proc = subprocess.Popen([CSANDBOX, "run", "work"], cwd=str(profiles.project), env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    state = profiles.state()
    assert wait_until(lambda: list(state.glob("clipboard-*.sock")), 10)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert list(state.glob("clipboard-*.sock")), "SIGKILL leaves the name"
    shell_claude(profiles, "true\n")
    # (The killed session's report is accepted: it has nothing to do with the clipboard.)
    r = subprocess.run([CSANDBOX, "run", "--accept-changes", "work"], cwd=str(profiles.project),
                       env=env, capture_output=True, text=True, timeout=TIMEOUT,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    assert not list(state.glob("clipboard-*.sock"))


# --- --chrome ----------------------------------------------------------------------------

def _argv(profiles, *args, **env):
    return profiles.plan(args=args, env=profiles.env(**env))["argv"]


def test_chrome_flag_is_added_before_the_users_args_unless_given(profiles):
    profiles.add()
    argv = _argv(profiles, "mcp", "add", "x", "--", "cmd", CLAUDE_PROFILE_SANDBOX_CHROME="1")
    assert argv[1:3] == ["--dangerously-skip-permissions", "--chrome"]
    assert argv[-5:] == ["mcp", "add", "x", "--", "cmd"]
    assert "--chrome" not in _argv(profiles, "-p", "x")
    assert argv.count("--chrome") == 1
    no = _argv(profiles, "--no-chrome", CLAUDE_PROFILE_SANDBOX_CHROME="1")
    assert "--chrome" not in no
    given = _argv(profiles, "--chrome", CLAUDE_PROFILE_SANDBOX_CHROME="1")
    assert given.count("--chrome") == 1


@pytest.mark.parametrize("scopes,warned", [(["user:inference"], True),
                                           (["user:inference", "user:profile"], False)])
def test_chrome_warns_when_the_login_lacks_its_scopes(profiles, scopes, warned):
    d = profiles.add()
    (d / ".credentials.json").write_text(json.dumps(
        {"claudeAiOauth": {"accessToken": "sk-secret", "scopes": scopes}}))
    r = profiles.run(cmd="plan", env=profiles.env(CLAUDE_PROFILE_SANDBOX_CHROME="1"))
    assert r.returncode == 0, r.stderr
    assert ("logged in without any scope Claude in Chrome uses" in r.stderr) == warned
    assert "sk-secret" not in r.stderr + r.stdout


# --- memory and CPU limits ---------------------------------------------------------------

def test_limits_reach_the_plan_and_a_host_without_them_says_why(profiles):
    profiles.add()
    env = profiles.env(CLAUDE_PROFILE_SANDBOX_RAM_MIB="2048", CLAUDE_PROFILE_SANDBOX_CPUS="1.5")
    plan = profiles.plan(env=env)
    assert plan["limits"] == {"memory_bytes": 2048 << 20, "cpus": 1.5}
    assert profiles.plan()["limits"] == {"memory_bytes": None, "cpus": None}
    r = profiles.run(env=env)
    # The test user has no systemd user session here (and this host keeps its controllers
    # on cgroup v1): the session starts, after one line naming what is missing and why.
    assert r.returncode == 0, r.stderr
    lines = [l for l in r.stderr.splitlines() if "runs without its memory and CPU limit" in l]
    assert len(lines) == 1, r.stderr
    assert "cgroup v1" in lines[0] or "systemd user session" in lines[0], lines[0]


@pytest.mark.parametrize("name,value", [("CLAUDE_PROFILE_SANDBOX_RAM_MIB", "4G"),
                                        ("CLAUDE_PROFILE_SANDBOX_RAM_MIB", "8"),
                                        ("CLAUDE_PROFILE_SANDBOX_CPUS", "0"),
                                        ("CLAUDE_PROFILE_SANDBOX_CPUS", "two"),
                                        ("CLAUDE_PROFILE_SANDBOX_CPUS", "1.2345")])
def test_a_bad_limit_is_refused_naming_the_setting(profiles, name, value):
    profiles.add()
    r = profiles.run(env=profiles.env(**{name: value}))
    assert r.returncode == 125
    assert f"{name}={value} is not a" in r.stderr
    assert not (profiles.state()).exists() or not list(profiles.state().glob("*.sock"))


def test_exec_takes_the_same_limits_as_flags():
    r = subprocess.run([CSANDBOX, "exec", "--memory", "512", "--cpus", "0.5", "--plan", "--",
                        "true"], capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["limits"] == {"memory_bytes": 512 << 20, "cpus": 0.5}
    r = subprocess.run([CSANDBOX, "exec", "--cpus", "lots", "--", "true"], capture_output=True,
                       text=True, timeout=TIMEOUT)
    assert r.returncode == 125 and "--cpus lots is not a number of CPUs" in r.stderr


# --- git push over ssh through the forwarded agent ----------------------------------------

TEST_HOST = os.environ.get("CSANDBOX_TEST_HOST")
SSH_KEYS = "/run/csbt-ssh/keys"  # tests/testnet's sshd on the test host reads <user> here


@pytest.fixture
def ssh_remote(tmp_path, agent):
    """A bare repository on the test host's sshd, the test user's key authorised there and
    held only by the agent; the host key in the home's known_hosts, as after a first ssh."""
    import getpass
    user = getpass.getuser()
    key = tmp_path / "id"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "csb-push", "-f",
                    str(key)], check=True)
    subprocess.run(["ssh-add", "-q", str(key)], env={"SSH_AUTH_SOCK": str(agent)}, check=True,
                   capture_output=True)
    os.unlink(key)  # from here on only the agent has it
    authorized = os.path.join(SSH_KEYS, user)
    with open(authorized, "w") as f:
        f.write((tmp_path / "id.pub").read_text())
    bare = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    hostkey = open("/run/csbt-ssh/host_key.pub").read().split()
    yield f"ssh://{user}@{TEST_HOST}{bare}", bare, f"{TEST_HOST} {hostkey[0]} {hostkey[1]}\n"
    os.unlink(authorized)


PUSH = """cd "$PWD"
git -c user.name=S -c user.email=s@example.invalid commit -q --allow-empty -m from-inside
for url; do :; done  # the last argument: claude's own come first
git push -q "$url" HEAD:main > push.out 2>&1; echo $? > push.rc
"""


def test_git_push_over_ssh_from_inside_uses_the_forwarded_agent(profiles, agent, ssh_remote):
    url, bare, known = ssh_remote
    profiles.add()
    with open(profiles.home / ".ssh" / "known_hosts", "a") as f:
        f.write(known)
    _repo(profiles)
    shell_claude(profiles, PUSH)
    env = profiles.env(SSH_AUTH_SOCK=str(agent), CLAUDE_PROFILE_SANDBOX_SSH_AGENT="1")
    r = profiles.run(args=(url,), env=env)
    assert r.returncode == 0, r.stderr
    p = profiles.project
    assert (p / "push.rc").read_text().strip() == "0", (p / "push.out").read_text()
    log = subprocess.run(["git", "--git-dir", str(bare), "log", "--format=%s", "main"],
                         capture_output=True, text=True, check=True).stdout
    assert log.splitlines()[0] == "from-inside"
    # Without the agent the same push has no key to offer, and is refused.
    shell_claude(profiles, PUSH.replace("from-inside", "no-agent"))
    r = profiles.run(args=(url,), env=profiles.env(SSH_AUTH_SOCK=str(agent)))
    assert r.returncode == 0, r.stderr
    assert (p / "push.rc").read_text().strip() != "0"
    assert "Permission denied" in (p / "push.out").read_text()


CGROUP2_VIEW = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
uid, gid = os.getuid(), os.getgid()
# A user, mount and cgroup namespace of the test's own, with a cgroup v2 at /sys/fs/cgroup:
# what a machine with the unified layout shows csandbox (this host keeps v1 controllers).
if libc.unshare(0x10000000 | 0x20000 | 0x02000000) != 0:
    sys.exit("unshare: %s" % os.strerror(ctypes.get_errno()))
open("/proc/self/setgroups", "w").write("deny")
open("/proc/self/uid_map", "w").write(f"{uid} {uid} 1")
open("/proc/self/gid_map", "w").write(f"{gid} {gid} 1")
for args in ((b"none", b"/", None, 0x4000 | 0x40000, None),
             (b"cgroup2", b"/sys/fs/cgroup", b"cgroup2", 0, None)):
    if libc.mount(*args) != 0:
        sys.exit("mount: %s" % os.strerror(ctypes.get_errno()))
os.execvp(sys.argv[1], sys.argv[1:])
"""


def test_limits_ask_the_user_manager_for_a_scope_holding_csandbox(profiles, tmp_path):
    """On a cgroup v2 machine csandbox asks systemd (busctl --user) for a transient scope
    with MemoryMax and the CPU quota, holding its own pid. The busctl here records the
    request and does nothing, so csandbox also says the move did not happen."""
    profiles.add()
    d = tmp_path / "busbin"
    d.mkdir()
    log = tmp_path / "busctl.log"
    (d / "busctl").write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {log}\n')
    (d / "busctl").chmod(0o755)
    wrapper = tmp_path / "cgroup2_view.py"
    wrapper.write_text(CGROUP2_VIEW)
    env = profiles.env(PATH=f"{d}:{os.environ['PATH']}", DBUS_SESSION_BUS_ADDRESS="unix:path=/x",
                       CLAUDE_PROFILE_SANDBOX_RAM_MIB="2048", CLAUDE_PROFILE_SANDBOX_CPUS="1.5")
    # `--version` alone starts claude with no network: pasta is beside the point here.
    r = subprocess.run(["python3", str(wrapper), CSANDBOX, "run", "work", "--", "--version"],
                       cwd=str(profiles.project), env=env, capture_output=True, text=True,
                       timeout=TIMEOUT, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    args = log.read_text().split("\n")
    assert args[:8] == ["--user", "--quiet", "call", "org.freedesktop.systemd1",
                        "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager",
                        "StartTransientUnit", "ssa(sv)a(sa(sv))"]
    unit, mode, nprops = args[8:11]
    pid = unit[len("csandbox-"):-len(".scope")]
    assert unit.startswith("csandbox-") and unit.endswith(".scope") and pid.isdigit()
    assert (mode, nprops) == ("fail", "4")
    props = args[11:]
    assert props[:4] == ["PIDs", "au", "1", pid], "csandbox's own pid goes into the scope"
    assert props[4:7] == ["MemoryMax", "t", str(2048 << 20)]
    assert props[7:10] == ["CPUQuotaPerSecUSec", "t", "1500000"]
    assert props[10:13] == ["CollectMode", "s", "inactive-or-failed"]
    assert "did not move csandbox into it" in r.stderr


# --- the SSH agents through csandbox's filtering relay ------------------------------------

AGENT_SOCK_IN = "/run/claude-sandbox/ssh-agent-%d.sock"

# Raw agent requests from inside (draft-miller-ssh-agent): each one's reply type, by name,
# into agent-replies.json. The key to add is a real one, so that an agent reached directly
# would accept every request here.
AGENT_CLIENT = r"""
import json, os, socket, struct, sys

def string(b):
    return struct.pack(">I", len(b)) + b

def exchange(sock_path, msg):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(sock_path)
    s.sendall(struct.pack(">I", len(msg)) + msg)
    head = b""
    while len(head) < 4:
        got = s.recv(4 - len(head))
        if not got:
            return None
        head += got
    body = b""
    (n,) = struct.unpack(">I", head)
    while len(body) < n:
        got = s.recv(n - len(body))
        if not got:
            return None
        body += got
    s.close()
    return body

def ask(sock_path, msg):
    body = exchange(sock_path, msg)
    return "closed" if body is None else body[0]

# What OpenSSH's ssh sends before it authenticates: session-bind@openssh.com with the
# server's host key and its signature of the session id. The agent's own key stands in for
# the host key (the agent signs the id through the relay), so a forwarded bind succeeds.
def session_bind(sock_path):
    ids = exchange(sock_path, bytes([11]))
    (n,) = struct.unpack(">I", ids[5:9])
    key = ids[9:9 + n]
    sid = os.urandom(32)
    sig = exchange(sock_path, bytes([13]) + string(key) + string(sid) + struct.pack(">I", 0))
    assert sig[0] == 14, sig[0]
    (n,) = struct.unpack(">I", sig[1:5])
    return ask(sock_path, bytes([27]) + string(b"session-bind@openssh.com") + string(key) +
               string(sid) + string(sig[5:5 + n]) + b"\0")

def oversized(sock_path):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(sock_path)
    s.sendall(struct.pack(">I", 256 * 1024 + 1) + b"\x0b" * 4096)
    try:
        return "closed" if s.recv(16) == b"" else "answered"
    except (ConnectionResetError, BrokenPipeError):
        return "closed"

# An ed25519 private key as ADD_IDENTITY wants it, from an unencrypted OpenSSH key file.
def add_identity(path):
    raw = open(path).read().split("-----")[2]
    import base64
    blob = base64.b64decode("".join(raw.split()))
    assert blob.startswith(b"openssh-key-v1\0")
    p = len(b"openssh-key-v1\0")
    def take():
        nonlocal p
        (n,) = struct.unpack(">I", blob[p:p + 4])
        v = blob[p + 4:p + 4 + n]
        p += 4 + n
        return v
    take(); take(); take()  # cipher, kdf, kdf options
    p += 4  # number of keys
    take()  # the public key
    priv = take()
    q = 8  # the two check integers
    def ptake():
        nonlocal q
        (n,) = struct.unpack(">I", priv[q:q + 4])
        v = priv[q + 4:q + 4 + n]
        q += 4 + n
        return v
    kind, pub, secret, comment = ptake(), ptake(), ptake(), ptake()
    return bytes([17]) + string(kind) + string(pub) + string(secret) + string(comment)

sock = sys.argv[1]
out = {
    "list": ask(sock, bytes([11])),
    "session_bind": session_bind(sock),
    "add": ask(sock, add_identity(sys.argv[2])),  # (before the lock, which refuses it)
    "remove_all": ask(sock, bytes([19])),
    "lock": ask(sock, bytes([22]) + string(b"not-the-users")),
    "remove_all_v1": ask(sock, bytes([9])),
    "query": ask(sock, bytes([27]) + string(b"query")),
    "bind_lookalike": ask(sock, bytes([27]) + string(b"session-bind@openssh.com.x")),
    "bind_truncated": ask(sock, bytes([27]) + struct.pack(">I", 24) + b"session-bind"),
    "unknown": ask(sock, bytes([200])),
    "list_after": ask(sock, bytes([11])),
    "oversized": oversized(sock),
}
json.dump(out, open("agent-replies.json", "w"))
"""

AGENT_SESSION = """cd "$PWD"
ssh-add -l > list.out 2>&1; echo $? > list.rc
echo signed-inside > msg
ssh-keygen -Y sign -f ./id.pub -n file msg > sign.out 2>&1; echo $? > sign.rc
ssh-add -D > delete.out 2>&1; echo $? > delete.rc
ssh-add ./intruder > add.out 2>&1; echo $? > add.rc
python3 agent-client.py "$SSH_AUTH_SOCK" ./intruder-raw
"""

SSH_AGENT_FAILURE, SSH_AGENT_SUCCESS, SSH_AGENT_IDENTITIES_ANSWER = 5, 6, 12


def _keygen(path, comment):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f",
                    str(path)], check=True)


def _host_keys(sock):
    return subprocess.run(["ssh-add", "-l"], env={"SSH_AUTH_SOCK": str(sock)},
                          capture_output=True, text=True, timeout=TIMEOUT)


def _keyed_agent(agent, tmp_path, comment="csb-relay-key"):
    """The agent holding one key, the private half only in the agent."""
    key = tmp_path / comment
    _keygen(key, comment)
    subprocess.run(["ssh-add", "-q", str(key)], env={"SSH_AUTH_SOCK": str(agent)}, check=True,
                   capture_output=True)
    os.unlink(key)
    return key.with_suffix(".pub")


def _relay_session(profiles, tmp_path, pub):
    p = profiles.project
    shutil.copy(pub, p / "id.pub")
    _keygen(p / "intruder", "csb-intruder")
    _keygen(p / "intruder-raw", "csb-intruder-raw")
    (p / "agent-client.py").write_text(AGENT_CLIENT)
    shell_claude(profiles, AGENT_SESSION)


def test_ssh_agent_relay_lists_and_signs_and_refuses_everything_else(profiles, agent, tmp_path):
    pub = _keyed_agent(agent, tmp_path)
    profiles.add()
    _relay_session(profiles, tmp_path, pub)
    r = profiles.run(env=profiles.env(SSH_AUTH_SOCK=str(agent),
                                      CLAUDE_PROFILE_SANDBOX_SSH_AGENT="1"))
    assert r.returncode == 0, r.stderr
    p = profiles.project
    out = lambda name: (p / name).read_text()  # noqa: E731
    # Listing and signing are the grant.
    assert out("list.rc").strip() == "0" and "csb-relay-key" in out("list.out"), out("list.out")
    assert out("sign.rc").strip() == "0", out("sign.out")
    signers = tmp_path / "allowed_signers"
    signers.write_text("signer " + pub.read_text())
    with open(p / "msg", "rb") as msg:
        v = subprocess.run(["ssh-keygen", "-Y", "verify", "-f", str(signers), "-I", "signer",
                            "-n", "file", "-s", str(p / "msg.sig")], stdin=msg,
                           capture_output=True, text=True, timeout=TIMEOUT)
    assert v.returncode == 0, v.stdout + v.stderr
    # ssh-add's own deletes and adds are refused.
    assert out("delete.rc").strip() != "0", out("delete.out")
    assert out("add.rc").strip() != "0", out("add.out")
    # So is every other request, spoken raw: each gets SSH_AGENT_FAILURE.
    replies = json.loads(out("agent-replies.json"))
    assert replies["list"] == replies["list_after"] == SSH_AGENT_IDENTITIES_ANSWER
    assert replies["session_bind"] == SSH_AGENT_SUCCESS, "OpenSSH's ssh sends it: it passes"
    for what in ("remove_all", "lock", "add", "remove_all_v1", "query", "bind_lookalike",
                 "bind_truncated", "unknown"):
        assert replies[what] == SSH_AGENT_FAILURE, (what, replies)
    assert replies["oversized"] == "closed"
    # The host's agent is as it was: the one key, unlocked (a locked agent lists none).
    host = _host_keys(agent)
    assert host.returncode == 0, host.stdout + host.stderr
    assert len(host.stdout.splitlines()) == 1 and "csb-relay-key" in host.stdout, host.stdout


AGENT_CROWD = r"""
import json, socket, struct, sys

def conn():
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    return s

def listed(s, timeout):
    s.settimeout(timeout)
    s.sendall(struct.pack(">I", 1) + bytes([11]))
    try:
        head = s.recv(5)
    except socket.timeout:
        return "waiting"
    return head[4] if len(head) == 5 else "closed"

out = {}
# One connection stopped halfway through a length, and 15 idle ones: a sixteenth is served.
half = conn()
half.sendall(b"\0\0")
idle = [conn() for _ in range(14)]
out["beside_a_half_message"] = listed(conn(), 10)
# Sixteen open: the seventeenth waits in the backlog until one closes.
idle.append(conn())
late = conn()
out["seventeenth"] = listed(late, 1)
half.close()
late.settimeout(10)
head = late.recv(5)
out["after_one_closed"] = head[4] if len(head) == 5 else "closed"
json.dump(out, open("crowd.json", "w"))
"""


def test_ssh_agent_relay_serves_16_connections_at_once_and_a_stalled_one_blocks_none(
        profiles, agent, tmp_path):
    _keyed_agent(agent, tmp_path)
    profiles.add()
    (profiles.project / "crowd.py").write_text(AGENT_CROWD)
    shell_claude(profiles, 'cd "$PWD"; python3 crowd.py "$SSH_AUTH_SOCK" > crowd.out 2>&1\n')
    r = profiles.run(env=profiles.env(SSH_AUTH_SOCK=str(agent),
                                      CLAUDE_PROFILE_SANDBOX_SSH_AGENT="1"))
    assert r.returncode == 0, r.stderr
    p = profiles.project
    assert (p / "crowd.json").exists(), (p / "crowd.out").read_text()
    crowd = json.loads((p / "crowd.json").read_text())
    assert crowd == {"beside_a_half_message": SSH_AGENT_IDENTITIES_ANSWER,
                     "seventeenth": "waiting",
                     "after_one_closed": SSH_AGENT_IDENTITIES_ANSWER}, crowd


def test_ssh_agent_relay_is_csandboxs_own_socket_gone_after_the_session(profiles, agent,
                                                                        tmp_path):
    _keyed_agent(agent, tmp_path)
    profiles.add()
    env = profiles.env(SSH_AUTH_SOCK=str(agent), CLAUDE_PROFILE_SANDBOX_SSH_AGENT="1")
    plan = profiles.plan(env=env)
    sources = [src for src, dst, _ in binds(plan) if dst == AGENT_SOCK_IN % 0]
    assert len(sources) == 1 and sources[0] != str(agent), binds(plan)
    assert str(agent) in sources[0], "the plan names the agent it relays to"
    # While the session runs: a socket in a 0700 directory of the state dir, not the agent.
    shell_claude(profiles, """cd "$PWD"
stat -L -c '%d:%i' "$SSH_AUTH_SOCK" > ino.tmp && mv ino.tmp inside-ino
while [ ! -e go ]; do sleep 0.05; done
""")
    proc = subprocess.Popen([CSANDBOX, "run", "work", "--"], cwd=str(profiles.project), env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert wait_until((profiles.project / "inside-ino").exists, TIMEOUT), proc.stderr
        dirs = [d for d in profiles.state().iterdir() if d.name.startswith("ssh-agent-")]
        assert len(dirs) == 1, dirs
        assert oct(dirs[0].stat().st_mode & 0o777) == "0o700"
        sock = dirs[0] / "0.sock"
        st = sock.stat()
        assert (profiles.project / "inside-ino").read_text().strip() == f"{st.st_dev}:{st.st_ino}"
        a = agent.stat()
        assert (st.st_dev, st.st_ino) != (a.st_dev, a.st_ino)
    finally:
        (profiles.project / "go").touch()
        _, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, err
    assert not [d for d in profiles.state().iterdir() if d.name.startswith("ssh-agent-")]


def test_ssh_agent_relay_left_by_a_killed_launch_is_swept_and_dies_with_it(profiles, agent,
                                                                          tmp_path):
    _keyed_agent(agent, tmp_path)
    profiles.add()
    env = profiles.env(SSH_AUTH_SOCK=str(agent), CLAUDE_PROFILE_SANDBOX_SSH_AGENT="1")
    shell_claude(profiles, 'cd "$PWD"; touch started; sleep 60\n')
    proc = subprocess.Popen([CSANDBOX, "run", "work", "--"], cwd=str(profiles.project), env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    assert wait_until((profiles.project / "started").exists, TIMEOUT)
    left = [d for d in profiles.state().iterdir() if d.name.startswith("ssh-agent-")]
    assert len(left) == 1
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=TIMEOUT)
    # The relay went with csandbox: nothing answers on its socket any more (reached through
    # the directory's fd: the path is longer than a socket address holds).
    dfd = os.open(left[0], os.O_RDONLY | os.O_DIRECTORY)

    def refused():
        import socket
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(f"/proc/self/fd/{dfd}/0.sock")
        except ConnectionRefusedError:
            return True
        finally:
            s.close()
        return False
    try:
        assert wait_until(refused, 10), "the relay outlived csandbox"
    finally:
        os.close(dfd)
    (profiles.project / "started").unlink()
    shell_claude(profiles, "true\n")
    # (The killed session's report is accepted: it has nothing to do with the agent.)
    r = subprocess.run([CSANDBOX, "run", "--accept-changes", "work"], cwd=str(profiles.project),
                       env=env, capture_output=True, text=True, timeout=TIMEOUT,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    assert not [d for d in profiles.state().iterdir() if d.name.startswith("ssh-agent-")]


def test_ssh_agent_relay_filters_the_1password_agent_too(profiles, agent, tmp_path):
    import tempfile
    short = tempfile.mkdtemp(prefix="csb-1p-")  # a socket path ssh-agent accepts (108 bytes)
    one = os.path.join(short, "agent.sock")
    proc = subprocess.Popen(["ssh-agent", "-D", "-a", one], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        assert wait_until(lambda: os.path.exists(one), 10)
        pub = _keyed_agent(one, tmp_path, "csb-onepassword-key")
        (profiles.home / ".1password").mkdir()
        os.symlink(one, profiles.home / ".1password" / "agent.sock")
        profiles.add()
        _relay_session(profiles, tmp_path, pub)
        # The host's SSH_AUTH_SOCK agent holds no key: 1Password's comes first, and is the
        # one SSH_AUTH_SOCK names inside.
        r = profiles.run(env=profiles.env(SSH_AUTH_SOCK=str(agent),
                                          CLAUDE_PROFILE_SANDBOX_SSH_AGENT="1"))
        assert r.returncode == 0, r.stderr
        p = profiles.project
        assert "csb-onepassword-key" in (p / "list.out").read_text()
        assert (p / "sign.rc").read_text().strip() == "0", (p / "sign.out").read_text()
        replies = json.loads((p / "agent-replies.json").read_text())
        for what in ("remove_all", "lock", "add"):
            assert replies[what] == SSH_AGENT_FAILURE, (what, replies)
        host = _host_keys(one)
        assert host.returncode == 0 and len(host.stdout.splitlines()) == 1, host.stdout
        assert "csb-onepassword-key" in host.stdout
        assert "no identities" in _host_keys(agent).stdout
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(short, ignore_errors=True)
