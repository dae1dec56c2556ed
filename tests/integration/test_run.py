"""`csandbox run <profile>`: claude-profile's sandbox launch without podman. Profiles live
under a temporary HOME; claude is the probe placed as `claude` (it reports its argv,
environment, ids, cwd, mountinfo and, for CSB_FAKE_CLAUDE_WRITABLE, which paths it can open
for writing). Each test is a behaviour of the reference's checklist or an attack planted by
an earlier sandboxed session."""
import json
import os
import shlex
import shutil
import socket
import subprocess
import threading

import pytest

from conftest import CSANDBOX, PROBE, TIMEOUT, base_env, mountinfo_entries, wait_until

HOME_IN = "/home/appuser"
KNOWN_HOSTS = "git.example ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n"
CFG_IN = HOME_IN + "/.claude"
CLAUDE_IN = HOME_IN + "/.local/bin/claude"


def git(*args, cwd):
    env = {"PATH": os.environ["PATH"], "HOME": cwd, "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "-c", "user.name=T", "-c", "user.email=t@example.invalid",
                    "-c", "init.defaultBranch=main", *args], cwd=cwd, env=env, check=True,
                   capture_output=True)


class Profiles:
    """A temporary HOME with claude-profile's layout and a fake claude."""

    def __init__(self, tmp_path):
        self.home = tmp_path / "home"
        self.base = self.home / ".claude-profiles"
        self.data = tmp_path / "data"
        self.bin = tmp_path / "bin"
        for d in (self.home, self.base, self.data, self.bin):
            d.mkdir(parents=True)
        shutil.copy(PROBE, self.bin / "claude")
        self.claude = self.bin / "claude"
        self.project = self.home / "src" / "project"
        self.project.mkdir(parents=True)
        # As on a desktop that has used ssh: its copy goes to /etc/ssh/ssh_known_hosts.
        (self.home / ".ssh").mkdir(mode=0o700)
        (self.home / ".ssh" / "known_hosts").write_text(KNOWN_HOSTS)
        self.extra_env = {}

    def add(self, name="work", settings=None, sandbox=True):
        """A profile; marked for the sandbox (its .sandbox file) unless sandbox=False."""
        d = self.base / name
        d.mkdir()
        if sandbox:
            (d / ".sandbox").touch()
        if settings is not None:
            (d / "settings.json").write_text(settings)
        return d

    def env(self, **extra):
        e = base_env(HOME=str(self.home), XDG_DATA_HOME=str(self.data),
                     CLAUDE_PROFILE_CLAUDE_BIN=str(self.claude), CLAUDE_PROFILE_PROFILES_BASE=None,
                     CLAUDE_PROFILE_SANDBOX_FORWARD_ENV=None, XDG_RUNTIME_DIR=None)
        e.update(self.extra_env)
        for k, v in extra.items():
            if v is None:
                e.pop(k, None)
            else:
                e[k] = v
        # The fake claude's knobs reach it the way a user forwards a variable by name.
        fake = [k for k in e if k.startswith("CSB_FAKE_CLAUDE_")]
        if fake:
            given = e.get("CLAUDE_PROFILE_SANDBOX_FORWARD_ENV")
            e["CLAUDE_PROFILE_SANDBOX_FORWARD_ENV"] = ",".join(([given] if given else []) + fake)
        return e

    def state(self, name="work"):
        return self.data / "claude-profile" / "profiles" / name

    def run(self, name="work", args=(), cwd=None, env=None, cmd="run", timeout=TIMEOUT):
        return subprocess.run([CSANDBOX, cmd, name, "--", *args], cwd=str(cwd or self.project),
                              env=env or self.env(), capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)

    def report(self, name="work", args=(), **kw):
        r = self.run(name, args, **kw)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    def plan(self, name="work", args=(), **kw):
        r = self.run(name, args, cmd="plan", **kw)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)


@pytest.fixture
def profiles(tmp_path):
    return Profiles(tmp_path)


def env_of(plan):
    return {e["name"]: e["value"] for e in plan["env"]}


def binds(plan):
    return [(m["source"], m["dest"], m["readonly"]) for m in plan["mounts"] if m["kind"] == "bind"]


# --- the launch --------------------------------------------------------------------------

def test_claude_runs_as_appuser_in_the_cwd_with_the_profile_config(profiles):
    profiles.add()
    sub = profiles.project / "sub"
    sub.mkdir()
    r = profiles.report(cwd=sub)
    assert r["uid"] == 1000 and r["gid"] == 1000
    assert r["env"]["HOME"] == HOME_IN
    assert r["env"]["CLAUDE_CONFIG_DIR"] == CFG_IN
    assert r["cwd"] == str(sub)
    assert r["caps"]["CapEff"] == "0000000000000000" and r["seccomp"] == 2
    assert r["argv"][0] == CLAUDE_IN, "the host's claude by its path, never found on PATH"


def test_session_flags_come_first_then_the_users_args(profiles):
    profiles.add()
    r = profiles.report(args=["-p", "hello", "mcp"])
    argv = r["argv"]
    assert argv[1] == "--dangerously-skip-permissions"
    assert argv[2] == "--append-system-prompt"
    assert argv[4:] == ["-p", "hello", "mcp"]


@pytest.mark.parametrize("given", [["--permission-mode", "plan"], ["--permission-mode=plan"],
                                   ["--dangerously-skip-permissions"]])
def test_permission_mode_or_explicit_skip_is_not_doubled(profiles, given):
    profiles.add()
    argv = profiles.report(args=given)["argv"]
    assert argv.count("--dangerously-skip-permissions") == given.count(
        "--dangerously-skip-permissions")
    assert argv[-len(given):] == given


def test_user_system_prompt_replaces_the_briefing(profiles):
    profiles.add()
    argv = profiles.report(args=["--append-system-prompt=mine"])["argv"]
    assert argv.count("--append-system-prompt") == 0 and argv[-1] == "--append-system-prompt=mine"


def test_briefing_is_true_for_this_sandbox(profiles):
    profiles.add()
    argv = profiles.report()["argv"]
    brief = argv[argv.index("--append-system-prompt") + 1]
    for s in ["sandbox", "persists on the host", ".git/config is read-only",
              "git push origin HEAD", ".git/hooks", '--user "$(id -u):$(id -g)"',
              "podman and docker are here", "--network none"]:
        assert s in brief, s
    for s in ["microVM", "podman/krun", "/run/.containerenv", "passwordless sudo"]:
        assert s not in brief, s


def test_exit_status_is_claudes(profiles):
    profiles.add()
    r = profiles.run(env=profiles.env(CSB_FAKE_CLAUDE_EXIT="7"))
    assert r.returncode == 7, r.stderr


def test_missing_profile_is_a_clear_error(profiles):
    r = profiles.run("nope")
    assert r.returncode == 125
    assert "Profile 'nope' does not exist" in r.stderr


def test_no_claude_installed_is_one_clear_error(profiles):
    profiles.add()
    r = profiles.run(env=profiles.env(CLAUDE_PROFILE_CLAUDE_BIN="claude", PATH="/nonexistent"))
    assert r.returncode == 125
    assert r.stderr.count("csandbox:") == 1
    assert "claude is not installed" in r.stderr and "npm install -g" in r.stderr


def test_claude_is_the_host_file_and_an_update_by_rename_reaches_the_next_launch(profiles):
    """No copy: the session runs the host's file, read-only; an update renamed over it (as
    npm and the native installer do) leaves the running session's file as it was, and the
    next launch runs the new one. Copies an older csandbox staged are removed."""
    profiles.add()
    old_cache = profiles.data / "csandbox" / "claude"
    old_cache.mkdir(parents=True)
    (old_cache / "2.1.1").write_text("a copy")
    p = profiles.project
    shell_claude(profiles, f"""# version one
touch started
while [ ! -e go ]; do sleep 0.05; done
cat {CLAUDE_IN} > seen
(echo x >> {CLAUDE_IN}) 2>/dev/null && touch wrote
true
""")
    host = profiles.claude.read_text()
    proc = subprocess.Popen([CSANDBOX, "run", "work"], cwd=str(p), env=profiles.env(),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert wait_until(lambda: (p / "started").exists(), 60), proc.stderr.read()
        new = profiles.bin / "claude.new"
        new.write_text("#!/bin/sh\n# version two\necho two > seen2\n")
        new.chmod(0o755)
        os.rename(new, profiles.claude)
        (p / "go").touch()
        out, err = proc.communicate(timeout=TIMEOUT)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert (p / "seen").read_text() == host, "the session's claude changed under it"
    assert not (p / "wrote").exists(), "claude was writable inside"
    assert not old_cache.exists(), "the old copies were kept"
    r = profiles.run()
    assert r.returncode == 0, r.stderr
    assert (p / "seen2").read_text() == "two\n"


def test_claude_writable_by_every_user_is_refused(profiles):
    profiles.add()
    profiles.claude.chmod(0o757)
    r = profiles.run()
    assert r.returncode == 125
    assert str(profiles.claude) in r.stderr and "chmod o-w" in r.stderr


@pytest.mark.parametrize("where", ["home", "above-home", "profiles", "inside-profiles"])
def test_refuses_a_work_root_that_would_mount_home_or_profiles(profiles, where):
    d = profiles.add()
    cwd = {"home": profiles.home, "above-home": profiles.home.parent,
           "profiles": profiles.base, "inside-profiles": d}[where]
    r = profiles.run(cwd=cwd)
    assert r.returncode == 125
    assert "Refusing to start the sandbox" in r.stderr
    assert not profiles.state().exists(), "a refusal must come before anything is created"


def test_home_of_host_invisible_and_profile_mounted(profiles):
    d = profiles.add()
    (profiles.home / "secret.txt").write_text("host secret\n")
    (d / "CLAUDE.md").write_text("profile file\n")
    r = profiles.report(env=profiles.env(CSB_FAKE_CLAUDE_WRITABLE=":".join([
        str(profiles.home / "secret.txt"), CFG_IN + "/CLAUDE.md"])))
    assert r["writable"][str(profiles.home / "secret.txt")] == "ENOENT"
    assert r["writable"][CFG_IN + "/CLAUDE.md"] == "ok"


# --- environment -------------------------------------------------------------------------

def test_environment_is_built_from_scratch_with_dotenv_and_forwarded_names(profiles):
    d = profiles.add()
    (d / ".env").write_text("A_TOKEN='from-dotenv'\n# comment\nSHARED=dotenv\n")
    env = profiles.env(SHARED="host-wins", CLAUDE_PROFILE_SANDBOX_FORWARD_ENV="SHARED,MISSING",
                       http_proxy="http://u:p@proxy:1", TERM="xterm-256color", COLORTERM="truecolor")
    r = profiles.run(env=env)
    assert r.returncode == 0, r.stderr
    inside = json.loads(r.stdout)["env"]
    assert inside["A_TOKEN"] == "from-dotenv"
    assert inside["SHARED"] == "host-wins"
    assert "MISSING" in r.stderr
    assert "CSB_LEAK_MARKER" not in inside and "http_proxy" not in inside
    assert inside["TERM"] == "xterm-256color" and inside["COLORTERM"] == "truecolor"


def test_secrets_are_redacted_in_plan_and_never_on_argv(profiles):
    d = profiles.add()
    (d / ".env").write_text("A_TOKEN=hunter2\n")
    plan = profiles.plan()
    assert env_of(plan)["A_TOKEN"] == "<redacted>"
    assert "hunter2" not in json.dumps(plan["argv"])
    assert "hunter2" not in json.dumps(plan)


def test_symlinked_env_is_refused(profiles):
    d = profiles.add()
    (profiles.home / "elsewhere").write_text("EVIL=1\n")
    os.symlink(profiles.home / "elsewhere", d / ".env")
    r = profiles.run()
    assert r.returncode == 125
    assert "Refusing to use" in r.stderr and "symlink" in r.stderr


def test_env_is_created_empty_and_pinned_read_only(profiles):
    d = profiles.add()
    r = profiles.report(env=profiles.env(CSB_FAKE_CLAUDE_WRITABLE=CFG_IN + "/.env"))
    assert (d / ".env").read_text() == ""
    assert oct((d / ".env").stat().st_mode & 0o777) == "0o600"
    assert r["writable"][CFG_IN + "/.env"] == "EROFS"


# --- settings ----------------------------------------------------------------------------

def test_profile_settings_copy_strips_sudo_denies_and_writes_stay_in_the_copy(profiles):
    orig = json.dumps({"permissions": {"deny": ["Bash(sudo *)", "Bash(rm -rf *)"]}})
    d = profiles.add(settings=orig)
    r = profiles.report(env=profiles.env(CSB_FAKE_CLAUDE_WRITABLE=CFG_IN + "/settings.json"))
    assert r["writable"][CFG_IN + "/settings.json"] == "ok"
    copy = json.loads((profiles.state() / "settings.json").read_text())
    assert copy["permissions"]["deny"] == ["Bash(rm -rf *)"]
    assert (d / "settings.json").read_text() == orig


def test_settings_copy_is_byte_identical_when_nothing_is_stripped(profiles):
    raw = '{ "theme":"dark" ,\n "x": [1,2] }\n'
    profiles.add(settings=raw)
    profiles.report(args=("--permission-mode", "plan"))
    assert (profiles.state() / "settings.json").read_text() == raw


def test_settings_copy_accepts_bypass_mode_only_when_the_session_is_in_it(profiles):
    raw = '{"theme": "dark"}'
    d = profiles.add(settings=raw)
    profiles.report()
    copy = json.loads((profiles.state() / "settings.json").read_text())
    assert copy == {"theme": "dark", "skipDangerousModePermissionPrompt": True}
    assert (d / "settings.json").read_text() == raw, "the profile's own file is untouched"
    off = profiles.env(CLAUDE_PROFILE_SANDBOX_SKIP_PERMISSIONS="0")
    profiles.report(env=off)
    assert (profiles.state() / "settings.json").read_text() == raw
    profiles.report(args=("--dangerously-skip-permissions",), env=off)
    assert json.loads((profiles.state() / "settings.json").read_text())[
        "skipDangerousModePermissionPrompt"] is True


def test_shared_settings_substitute_profile_strip_denies_and_repoint_loopback_hooks(profiles):
    profiles.add()
    shared = {"env": {"P": "{profile}-x"}, "permissions": {"deny": ["Read(~/.ssh/**)", "Bash(x)"]},
              "hooks": {"Stop": [{"hooks": [{"type": "http", "url": "http://localhost:9/{profile}"}]}]}}
    (profiles.base / "shared-settings.json").write_text(json.dumps(shared))
    plan = profiles.plan()
    argv = plan["argv"]
    got = json.loads(argv[argv.index("--settings") + 1])
    assert got["env"]["P"] == "work-x"
    assert got["permissions"]["deny"] == ["Bash(x)"]
    assert got["hooks"]["Stop"][0]["hooks"][0]["url"] == "http://169.254.1.2:9/work"
    assert plan["net"] == "pasta" and plan["map_host_loopback"] is True


def test_user_settings_flag_skips_the_shared_file(profiles):
    profiles.add()
    (profiles.base / "shared-settings.json").write_text("{}")
    r = profiles.run(args=["--settings", "{}"], cmd="plan")
    assert r.returncode == 0, r.stderr
    argv = json.loads(r.stdout)["argv"]
    assert argv.count("--settings") == 1
    assert "is not applied" in r.stderr


def test_shared_settings_that_are_not_an_object_are_an_error(profiles):
    profiles.add()
    (profiles.base / "shared-settings.json").write_text("[1, 2]")
    r = profiles.run()
    assert r.returncode == 125 and "must hold a JSON object" in r.stderr


# --- git ---------------------------------------------------------------------------------

@pytest.fixture
def repo(profiles):
    git("init", "-q", cwd=profiles.project)
    (profiles.project / ".git" / "hooks" / "pre-commit").write_text("#!/bin/sh\nexit 0\n")
    return profiles.project


def test_whole_work_tree_mounted_from_a_subdirectory(profiles, repo):
    profiles.add()
    sub = repo / "a" / "b"
    sub.mkdir(parents=True)
    (repo / "top.txt").write_text("t")
    r = profiles.report(cwd=sub, env=profiles.env(CSB_FAKE_CLAUDE_WRITABLE=str(repo / "top.txt")))
    assert r["writable"][str(repo / "top.txt")] == "ok"
    assert r["cwd"] == str(sub)


def test_git_config_is_read_only_and_hooks_are_a_throwaway_copy(profiles, repo):
    profiles.add()
    cfg, hook = repo / ".git" / "config", repo / ".git" / "hooks" / "pre-commit"
    r = profiles.report(env=profiles.env(CSB_FAKE_CLAUDE_WRITABLE=f"{cfg}:{hook}"))
    assert r["writable"][str(cfg)] == "EROFS"
    assert r["writable"][str(hook)] == "ok"
    hooks = [m for m in mountinfo_entries(r["mountinfo"]) if m["mountpoint"] == str(repo / ".git" / "hooks")]
    assert hooks and hooks[-1]["fstype"] == "tmpfs", "the copy is a tmpfs over .git/hooks"
    assert hook.read_text() == "#!/bin/sh\nexit 0\n"


def test_hooks_copy_is_made_inside_and_nothing_reaches_the_host(profiles, repo):
    """The copy is made by the runner in a tmpfs of the sandbox from the hooks dir's fd: the
    session sees the host's hooks, what it writes there is gone with it, and neither plan
    nor run writes a copy on the host (older versions kept them in the state dir: those of
    launches that are gone are removed)."""
    profiles.add()
    old = profiles.state() / "git-hooks"
    (old / "0123456789abcdef-999999999").mkdir(parents=True)
    (old / "0123456789abcdef-999999999" / "pre-commit").write_text("old")
    plan = profiles.plan()
    copies = [m for m in plan["mounts"] if m["kind"] == "copy"]
    assert [(m["source"], m["dest"]) for m in copies] == [(str(repo / ".git" / "hooks"),) * 2]
    assert not old.exists(), "the old copies of gone launches stay"
    shell_claude(profiles, """cat .git/hooks/pre-commit > seen
echo evil > .git/hooks/pre-commit && touch .git/hooks/new && echo wrote > wrote
""")
    r = profiles.run()
    assert r.returncode == 0, r.stderr
    assert (repo / "seen").read_text() == "#!/bin/sh\nexit 0\n"
    assert (repo / "wrote").exists(), "the copy is writable inside"
    assert (repo / ".git" / "hooks" / "pre-commit").read_text() == "#!/bin/sh\nexit 0\n"
    assert not (repo / ".git" / "hooks" / "new").exists()
    assert not old.exists()


@pytest.mark.parametrize("lead", [".:", ":"])
def test_programs_planted_in_the_work_tree_never_run_on_the_host_whatever_path_says(
        profiles, repo, lead):
    """A `.` or an empty PATH entry means the current directory, the session's work tree:
    csandbox finds git (which it runs on the host) and claude by absolute entries only."""
    profiles.add()
    marker = profiles.home / "pwned"
    for name in ("git", "claude"):
        evil = repo / name
        evil.write_text(f"#!/bin/sh\ntouch {marker}\nexit 0\n")
        evil.chmod(0o755)
    path = lead + str(profiles.bin) + ":" + os.environ["PATH"]
    r = profiles.run(cmd="plan", env=profiles.env(PATH=path, CLAUDE_PROFILE_CLAUDE_BIN="claude"))
    assert r.returncode == 0, r.stderr
    assert not marker.exists(), "a program from the work tree ran on the host"
    plan = json.loads(r.stdout)
    claude = [m for m in plan["mounts"] if m["dest"] == CLAUDE_IN]
    assert claude and claude[0]["source"] == str(profiles.claude)
    assert any(m["kind"] == "copy" for m in plan["mounts"]), "git was not found: no git dirs"


def test_local_settings_are_copies(profiles, repo):
    profiles.add()
    (repo / ".claude").mkdir()
    local = repo / ".claude" / "settings.local.json"
    local.write_text('{"a": 1}')
    plan = profiles.plan()
    assert any(dst == str(local) for _, dst, _ in binds(plan))
    src = [s for s, dst, _ in binds(plan) if dst == str(local)][0]
    assert src.startswith(str(profiles.state() / "local-settings"))


# --- attacks planted by an earlier session ---------------------------------------------

def test_planted_settings_link_gives_empty_settings_and_is_not_read(profiles):
    d = profiles.add()
    (profiles.home / ".ssh").mkdir(exist_ok=True)
    (profiles.home / ".ssh" / "id_rsa").write_text("PRIVATE KEY")
    os.symlink(profiles.home / ".ssh" / "id_rsa", d / "settings.json")
    r = profiles.run()
    assert r.returncode == 0, r.stderr
    # Empty settings, with only the bypass-mode acceptance the session's flags need.
    assert json.loads((profiles.state() / "settings.json").read_text()) == {
        "skipDangerousModePermissionPrompt": True}
    assert "is a symlink" in r.stderr


def test_planted_commands_link_to_ssh_is_not_mounted(profiles):
    d = profiles.add()
    (profiles.home / ".ssh").mkdir(exist_ok=True)
    os.symlink(profiles.home / ".ssh", d / "commands")
    r = profiles.run(cmd="plan")
    assert r.returncode == 0, r.stderr
    assert not any(s.endswith("/.ssh") for s, _, _ in binds(json.loads(r.stdout)))
    assert "not mounting" in r.stderr


def test_correct_global_link_is_mounted_read_only(profiles):
    d = profiles.add()
    glob = profiles.home / ".claude" / "commands"
    glob.mkdir(parents=True)
    os.symlink(glob, d / "commands")
    plan = profiles.plan()
    assert (str(glob), str(glob), True) in binds(plan)


def test_planted_hooks_link_is_not_mounted(profiles, repo):
    profiles.add()
    hooks = repo / ".git" / "hooks"
    shutil.rmtree(hooks)
    (profiles.home / "evil-hooks").mkdir()
    os.symlink(profiles.home / "evil-hooks", hooks)
    r = profiles.run(cmd="plan")
    assert r.returncode == 0, r.stderr
    assert not any(dst == str(hooks) for _, dst, _ in binds(json.loads(r.stdout)))
    assert "is a symlink" in r.stderr


def test_planted_local_settings_link_gives_empty_copy(profiles, repo):
    profiles.add()
    (repo / ".claude").mkdir()
    (profiles.home / "creds").write_text('{"token": "x"}')
    os.symlink(profiles.home / "creds", repo / ".claude" / "settings.local.json")
    r = profiles.run(cmd="plan")
    assert r.returncode == 0, r.stderr
    copies = list((profiles.state() / "local-settings").iterdir())
    assert [c.read_text() for c in copies] == ["{}\n"]


# --- after the session -------------------------------------------------------------------

def test_trust_report_names_an_mcp_server_the_session_added(profiles):
    profiles.add()
    r = profiles.run(env=profiles.env(CSB_FAKE_CLAUDE_MCP_ADD="evil\x1b[31m"))
    assert r.returncode == 0, r.stderr
    assert "changed what claude or git runs on the host" in r.stderr
    assert "evil?[31m" in r.stderr and "\x1b" not in r.stderr


def test_no_trust_report_when_nothing_changed(profiles):
    profiles.add()
    r = profiles.run()
    assert r.returncode == 0
    assert "changed what claude or git runs" not in r.stderr


def test_sixteen_concurrent_runs_of_one_profile_all_succeed(profiles, repo):
    profiles.add(settings='{"permissions": {"deny": ["Bash(sudo x)"]}}')
    results = [None] * 16

    def one(i):
        results[i] = profiles.run(timeout=120)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.returncode for r in results] == [0] * 16, [r.stderr for r in results if r.returncode]
    state = profiles.state()
    assert json.loads((state / "settings.json").read_text()) == {
        "permissions": {"deny": []}, "skipDangerousModePermissionPrompt": True}
    leftovers = [p for p in state.rglob("*") if p.name.endswith(".partial")]
    leftovers += [p for p in (profiles.data / "csandbox").rglob("*") if p.name.endswith(".partial")]
    assert leftovers == []


def test_loopback_http_hook_in_shared_settings_reaches_the_host(profiles):
    """The network side of the hook rewrite: the fake claude POSTs to the re-pointed URL and
    the request arrives on the host's 127.0.0.1."""
    profiles.add()
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    srv.settimeout(20)
    port = srv.getsockname()[1]
    got = []

    def accept():
        try:
            conn, _ = srv.accept()
            conn.settimeout(5)
            got.append(conn.recv(4096))
            conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n")
            conn.close()
        except OSError:
            pass

    t = threading.Thread(target=accept)
    t.start()
    shared = {"hooks": {"Stop": [{"hooks": [{"type": "http",
                                             "url": f"http://127.0.0.1:{port}/stop-hook"}]}]}}
    (profiles.base / "shared-settings.json").write_text(json.dumps(shared))
    try:
        r = profiles.run(env=profiles.env(CSB_FAKE_CLAUDE_HOOK="1"))
    finally:
        t.join()
        srv.close()
    assert r.returncode == 0, r.stderr
    assert got and got[0].startswith(b"POST /stop-hook "), got


# --- an imported image as the root -----------------------------------------------------

def import_busybox_image(profiles, tmp_path, name="sandbox-img", config=None):
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "fixtures"))
    import oci
    layout = str(tmp_path / "layout")
    oci.write_layout(layout, oci.busybox_layers(str(tmp_path), PROBE), ref="latest",
                     config=config)
    r = subprocess.run([CSANDBOX, "image", "import", layout, "--name", name],
                       env=profiles.env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_run_on_an_imported_image_under_a_writable_overlay(profiles, tmp_path):
    profiles.add()
    import_busybox_image(profiles, tmp_path)
    env = profiles.env(CLAUDE_PROFILE_SANDBOX_IMAGE="sandbox-img")
    plan = profiles.plan(env=env)
    assert plan["root"]["kind"] == "dir" and plan["root"]["writable"] is True
    assert not any(m["dest"] == "/home" for m in plan["mounts"]), "no host hides on an image"
    r = profiles.report(env=env)
    assert (r["uid"], r["gid"]) == (1000, 1000)
    assert r["env"]["FIXTURE"] == "1", "the image's Env is the base environment"
    assert r["env"]["PATH"] == HOME_IN + "/.local/bin:/bin:/usr/bin"
    root = [m for m in mountinfo_entries(r["mountinfo"]) if m["mountpoint"] == "/"]
    assert root and root[0]["fstype"] == "overlay"
    assert r["cwd"] == str(profiles.project)


def _host_known_hosts_mount(report):
    m = [e for e in mountinfo_entries(report["mountinfo"])
         if e["mountpoint"] == "/etc/ssh/ssh_known_hosts"]
    assert m, "the host known_hosts copy is not mounted"
    return m[-1]


def test_known_hosts_on_the_host_root_leaves_etc_ssh_as_it_was(profiles):
    """~/.ssh/known_hosts goes to /etc/ssh/ssh_known_hosts although the host's /etc/ssh
    (read-only inside) lacks that file, or /etc lacks ssh altogether: made in memory."""
    profiles.add()
    before = sorted(os.listdir("/etc/ssh")) if os.path.isdir("/etc/ssh") else None
    r = profiles.report()
    assert _host_known_hosts_mount(r)["root"].endswith("/host_known_hosts")
    etc = [e for e in mountinfo_entries(r["mountinfo"])
           if e["mountpoint"] == "/etc" or e["mountpoint"].startswith("/etc/")]
    assert all("ro" in e["opts"] for e in etc), etc
    after = sorted(os.listdir("/etc/ssh")) if os.path.isdir("/etc/ssh") else None
    assert after == before


# Runs "$@" where /etc has no ssh (a tmpfs on /etc holding binds of every other entry), in
# a user and mount namespace of the test user's own ids that keeps its capabilities.
HIDE_ETC_SSH = r"""set -e
t=$(mktemp -d)
mount -n -t tmpfs -o mode=0755 none "$t"
for e in /etc/* /etc/.[!.]*; do
  [ -e "$e" ] || [ -L "$e" ] || continue
  n=${e#/etc/}
  [ "$n" = ssh ] && continue
  if [ -L "$e" ]; then cp -P "$e" "$t/$n"
  elif [ -d "$e" ]; then mkdir "$t/$n"; mount -n --rbind "$e" "$t/$n"
  else : > "$t/$n"; mount -n --rbind "$e" "$t/$n"; fi
done
mount -n --move "$t" /etc
[ ! -e /etc/ssh ]
exec "$@"
"""


def test_known_hosts_on_a_host_root_without_etc_ssh(profiles):
    profiles.add()
    wrap = ["unshare", "-Um", f"--map-user={os.getuid()}", f"--map-group={os.getgid()}",
            "--keep-caps", "sh", "-c", HIDE_ETC_SSH, "sh"]
    p = subprocess.run([*wrap, CSANDBOX, "run", "work", "--"], cwd=str(profiles.project),
                       env=profiles.env(), capture_output=True, text=True, timeout=TIMEOUT,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    assert _host_known_hosts_mount(json.loads(p.stdout))["root"].endswith("/host_known_hosts")


# Runs "$@" with a noexec tmpfs on $1 (shifted), as HIDE_ETC_SSH runs.
NOEXEC_AT = 'mount -n -t tmpfs -o noexec,mode=0700 none "$1" && shift && exec "$@"'


def _run_with_noexec_data_home(profiles, env):
    wrap = ["unshare", "-Um", f"--map-user={os.getuid()}", f"--map-group={os.getgid()}",
            "--keep-caps", "sh", "-c", NOEXEC_AT, "sh", str(profiles.data)]
    return subprocess.run([*wrap, CSANDBOX, "run", "work", "--"], cwd=str(profiles.project),
                          env=env, capture_output=True, text=True, timeout=TIMEOUT,
                          stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("runtime", [True, False])
def test_noexec_data_home_changes_nothing_for_claude(profiles, tmp_path, runtime):
    """claude is the host's file bound where it lies (no copy under the data dir), so a
    noexec XDG_DATA_HOME, with or without XDG_RUNTIME_DIR, does not matter."""
    profiles.add()
    rt = tmp_path / "runtime"
    rt.mkdir(mode=0o700)
    p = _run_with_noexec_data_home(profiles,
                                   profiles.env(XDG_RUNTIME_DIR=str(rt) if runtime else None))
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert r["argv"][0] == CLAUDE_IN
    m = [e for e in mountinfo_entries(r["mountinfo"]) if e["mountpoint"] == CLAUDE_IN]
    assert m and m[-1]["root"].endswith(str(profiles.claude)), m
    assert "ro" in m[-1]["opts"], m


NOEXEC_CLAUDE = ('mount -n -t tmpfs -o noexec none "$1" && cp "$2" "$1/claude" && shift 2 && '
                 'exec "$@"')


@pytest.mark.parametrize("where", ["--sandbox", "--host"])
def test_claude_on_a_noexec_mount_is_named_with_the_mount_and_the_fix(profiles, tmp_path,
                                                                       where):
    """Not "not installed": the file is there, on a mount where nothing may run."""
    profiles.add()
    nx = tmp_path / "nx"
    nx.mkdir()
    wrap = ["unshare", "-Um", f"--map-user={os.getuid()}", f"--map-group={os.getgid()}",
            "--keep-caps", "sh", "-c", NOEXEC_CLAUDE, "sh", str(nx), str(profiles.claude)]
    p = subprocess.run([*wrap, CSANDBOX, "run", where, "work"], cwd=str(profiles.project),
                       env=profiles.env(CLAUDE_PROFILE_CLAUDE_BIN=str(nx / "claude")),
                       capture_output=True, text=True, timeout=TIMEOUT,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 125, p.stderr
    assert f"claude is installed at {nx}/claude (CLAUDE_PROFILE_CLAUDE_BIN), but it cannot " \
        f"run: it lies on {nx}, which is mounted noexec" in p.stderr, p.stderr
    assert f"sudo mount -o remount,exec {nx}" in p.stderr, p.stderr
    assert "not installed" not in p.stderr


def test_known_hosts_on_an_image_without_etc_ssh(profiles, tmp_path):
    profiles.add()
    import_busybox_image(profiles, tmp_path)
    r = profiles.report(env=profiles.env(CLAUDE_PROFILE_SANDBOX_IMAGE="sandbox-img"))
    assert _host_known_hosts_mount(r)["root"].endswith("/host_known_hosts")


def test_run_with_image_flag_overrides_the_setting(profiles, tmp_path):
    profiles.add()
    import_busybox_image(profiles, tmp_path, "other")
    r = subprocess.run([CSANDBOX, "plan", "--image", "other", "work"], cwd=str(profiles.project),
                       env=profiles.env(CLAUDE_PROFILE_SANDBOX_IMAGE="nothere"),
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["root"]["kind"] == "dir"


def test_run_with_an_image_that_is_not_imported_says_how_to_import_it(profiles):
    profiles.add()
    r = profiles.run(env=profiles.env(CLAUDE_PROFILE_SANDBOX_IMAGE="nothere"))
    assert r.returncode == 125
    assert "csandbox image import" in r.stderr and "nothere" in r.stderr
    assert not profiles.state().exists(), "nothing is created before the image is found"
    assert not (profiles.base / "work" / ".env").exists()


# --- list and sandbox ------------------------------------------------------------------

def cli(profiles, *args, env=None):
    return subprocess.run([CSANDBOX, *args], env=env or profiles.env(), capture_output=True,
                          text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL)


def test_list_shows_login_and_marker_and_a_dangling_marker_counts(profiles):
    a = profiles.add("alpha", sandbox=False)
    b = profiles.add("beta", sandbox=False)
    (a / ".credentials.json").write_text("{}")
    os.symlink(profiles.home / "nowhere", b / ".sandbox")
    (profiles.base / "shared-settings.json").write_text("{}")
    r = cli(profiles, "list")
    assert r.returncode == 0, r.stderr
    lines = {l.split()[0]: l for l in r.stdout.splitlines() if l.split() and l.split()[0] in ("alpha", "beta")}
    assert "not authenticated" not in lines["alpha"] and "not authenticated" in lines["beta"]
    assert lines["beta"].rstrip().endswith("yes")
    assert "shared-settings.json" not in r.stdout


def test_list_notes_the_override(profiles):
    profiles.add("alpha")
    r = cli(profiles, "list", env=profiles.env(CLAUDE_PROFILE_SANDBOX="0"))
    assert "CLAUDE_PROFILE_SANDBOX is set" in r.stdout


def test_list_without_profiles(profiles):
    r = cli(profiles, "list")
    assert r.returncode == 0 and "No profiles found" in r.stdout


def test_sandbox_on_replaces_a_linked_marker_without_creating_its_target(profiles):
    d = profiles.add(sandbox=False)
    target = profiles.home / "should-not-exist"
    os.symlink(target, d / ".sandbox")
    r = cli(profiles, "sandbox", "work", "--on")
    assert r.returncode == 0, r.stderr
    assert not target.exists()
    assert (d / ".sandbox").is_file() and not (d / ".sandbox").is_symlink()
    r = cli(profiles, "sandbox", "work")
    assert "the sandbox" in r.stdout
    r = cli(profiles, "sandbox", "work", "--off")
    assert r.returncode == 0 and not os.path.lexists(d / ".sandbox")
    assert cli(profiles, "sandbox", "work", "--off").returncode == 0


def test_sandbox_flags_and_missing_profile_are_errors(profiles):
    profiles.add()
    r = cli(profiles, "sandbox", "work", "--on", "--off")
    assert r.returncode == 125 and "mutually exclusive" in r.stderr
    r = cli(profiles, "sandbox", "nope")
    assert r.returncode == 125 and "nope" in r.stderr


def test_planted_old_state_names_in_the_profile_are_never_mount_sources(profiles):
    """Older layouts kept generated files in the profile dir; links planted under those
    names (and known_hosts pointing at a private key) are never used."""
    d = profiles.add()
    (profiles.home / ".ssh").mkdir(exist_ok=True)
    key = profiles.home / ".ssh" / "id_rsa"
    key.write_text("PRIVATE KEY")
    for name in ("known_hosts", "settings.sandbox.json", "chrome.sandbox", "storage.sandbox.conf"):
        os.symlink(key, d / name)
    plan = profiles.plan()
    sources = [s for s, _, _ in binds(plan)]
    assert not any(s.startswith(str(d) + "/") and os.path.basename(s) in (
        "known_hosts", "settings.sandbox.json", "chrome.sandbox", "storage.sandbox.conf")
        for s in sources), sources
    assert str(key) not in sources
    kh = [s for s, dst, _ in binds(plan) if dst == HOME_IN + "/.ssh/known_hosts"]
    assert kh == [str(profiles.state() / "known_hosts")]


def test_retargeted_statusline_link_is_not_mounted(profiles):
    d = profiles.add()
    os.symlink("/etc/passwd", d / "statusline.sh")
    r = profiles.run(cmd="plan")
    assert r.returncode == 0, r.stderr
    assert not any(s == "/etc/passwd" for s, _, _ in binds(json.loads(r.stdout)))
    assert "not mounting" in r.stderr and "statusline.sh" in r.stderr
    assert "ln -sfn" in r.stderr


# --- git state a previous session could forge (found in review) -------------------------

def shell_claude(profiles, script):
    """A fake claude that is a shell script, for attacks that need a shell inside."""
    path = profiles.bin / "claude"
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)


def test_core_worktree_pointing_outside_the_cwd_is_refused(profiles, repo):
    profiles.add()
    (profiles.home / ".ssh").mkdir(exist_ok=True)
    git("config", "core.worktree", str(profiles.home / ".ssh"), cwd=repo)
    r = profiles.run(cmd="plan")
    assert r.returncode == 125, r.stdout
    assert "does not contain it" in r.stderr
    assert str(profiles.home / ".ssh") not in r.stdout


def test_planted_commondir_is_refused_on_the_next_launch(profiles, repo):
    profiles.add()
    (repo / ".git" / "commondir").write_text("../evil\n")
    r = profiles.run()
    assert r.returncode == 125
    assert "commondir" in r.stderr and "planted" in r.stderr


def test_foreign_git_dir_outside_the_tree_is_refused(profiles, repo):
    profiles.add()
    other = profiles.home / "secret"
    other.mkdir()
    git("init", "-q", cwd=other)
    shutil.rmtree(repo / ".git")
    (repo / ".git").write_text(f"gitdir: {other / '.git'}\n")
    r = profiles.run(cmd="plan")
    assert r.returncode == 125
    assert "pointing back" in r.stderr
    assert str(other) not in r.stdout


def test_linked_worktree_common_dir_is_mounted(profiles, repo):
    profiles.add()
    (repo / "f").write_text("x")
    git("add", "f", cwd=repo)
    git("commit", "-q", "-m", "x", cwd=repo)
    linked = profiles.home / "src" / "linked"
    git("worktree", "add", "-q", str(linked), cwd=repo)
    plan = profiles.plan(cwd=linked)
    assert (str(repo / ".git"), str(repo / ".git"), False) in binds(plan)
    assert (str(repo / ".git" / "config"), str(repo / ".git" / "config"), True) in binds(plan)


# --- the embedded default shows the host's system, not its data --------------------------

HOST_DATA = ["/srv", "/mnt", "/media", "/var/log", "/var/backups"]

LIST_VIEW = """
import json, os
def ls(p):
    try:
        return sorted(os.listdir(p))
    except OSError as e:
        return e.strerror
out = {p: ls(p) for p in %r}
out["var"] = ls("/var")
out["var/lib"] = ls("/var/lib")
out["dpkg"] = os.path.isfile("/var/lib/dpkg/status")
out["var/run"] = os.path.realpath("/var/run")
out["usr/bin/git"] = os.access("/usr/bin/git", os.X_OK)
print(json.dumps(out))
"""


def test_the_embedded_default_hides_the_hosts_data_and_shows_its_system(profiles):
    for d in HOST_DATA:
        assert os.path.isfile(f"{d}/csandbox-test-data/secret"), "run the suite via tests/run"
    profiles.add()
    shell_claude(profiles, "exec /usr/bin/python3 -c " + shlex.quote(LIST_VIEW % (HOST_DATA,)) + "\n")
    r = profiles.run()
    assert r.returncode == 0, r.stderr
    view = json.loads(r.stdout)
    for d in ["/srv", "/mnt", "/media"]:
        assert view[d] == [], (d, view[d])
    for d in ["/var/log", "/var/backups"]:
        assert view[d] == "No such file or directory", (d, view[d])
    # /var holds what programs read, no service's data.
    assert set(view["var"]) <= {"cache", "lib", "lock", "run", "tmp", "mail", "spool", "opt",
                                "local"}, view["var"]
    assert "dpkg" in view["var/lib"] and view["dpkg"], view
    hidden = sorted(set(os.listdir("/var/lib")) - set(view["var/lib"]))
    assert hidden, "the test host has /var/lib entries programs do not need (systemd, misc...)"
    assert view["var/run"] == "/run"
    assert view["usr/bin/git"]


def test_host_paths_setting_shows_a_host_dir_read_only(profiles):
    profiles.add()
    data = "/srv/csandbox-test-data"
    assert os.path.isfile(f"{data}/secret"), "run the suite via tests/run"
    shell_claude(profiles, f"cat {data}/secret; echo x > {data}/new; echo write=$?\n")
    r = profiles.run(env=profiles.env(CLAUDE_PROFILE_SANDBOX_HOST_PATHS=f" {data} , "))
    assert r.returncode == 0, r.stderr
    assert "host data in /srv" in r.stdout and "write=0" not in r.stdout, r.stdout
    assert not os.path.exists(f"{data}/new")


@pytest.mark.parametrize("value,why", [
    ("relative/path", "not an absolute path"),
    ("/nonexistent-csandbox-path", "cannot be shown"),
    ("HOME", "your whole home directory"),
    ("/", "your whole home directory"),
    ("BASE/work", "the profiles dir"),
])
def test_host_paths_setting_refuses_what_it_must_not_show(profiles, value, why):
    profiles.add()
    value = value.replace("HOME", str(profiles.home)).replace("BASE", str(profiles.base))
    r = profiles.run(env=profiles.env(CLAUDE_PROFILE_SANDBOX_HOST_PATHS=value))
    assert r.returncode == 125, r.stdout
    assert "CLAUDE_PROFILE_SANDBOX_HOST_PATHS" in r.stderr and why in r.stderr, r.stderr


def make_submodule(profiles, repo):
    """repo with a submodule checkout at lib/, as `git submodule add` makes it: lib/.git a
    file naming .git/modules/lib, whose config has core.worktree pointing back."""
    upstream = profiles.home / "upstream"
    upstream.mkdir()
    git("init", "-q", cwd=upstream)
    (upstream / "u").write_text("u")
    git("add", "u", cwd=upstream)
    git("commit", "-q", "-m", "u", cwd=upstream)
    git("-c", "protocol.file.allow=always", "submodule", "add", "-q", str(upstream), "lib",
        cwd=repo)
    (repo / ".git" / "modules" / "lib" / "hooks" / "post-checkout").write_text("#!/bin/sh\n")
    return repo / "lib", repo / ".git" / "modules" / "lib"


def test_a_submodule_checkout_launches_with_its_git_dir_protected(profiles, repo):
    profiles.add()
    sub, gitdir = make_submodule(profiles, repo)
    shell_claude(profiles, "git status --short >/dev/null 2>&1;"
                           " echo status=$?; echo '[alias] x = !id' >> " + str(gitdir / "config") +
                           " ; echo config=$?; echo t > " + str(gitdir / "hooks" / "post-checkout") +
                           "; echo hook=$?; echo f > " + str(gitdir / "f") + "; echo gitdir=$?\n")
    plan = profiles.plan(cwd=sub)
    assert (str(sub), str(sub), False) in binds(plan)
    assert (str(gitdir), str(gitdir), False) in binds(plan)
    assert (str(gitdir / "config"), str(gitdir / "config"), True) in binds(plan)
    assert [m["kind"] for m in plan["mounts"] if m["dest"] == str(gitdir / "hooks")] == ["copy"]
    before = (gitdir / "config").read_text()
    r = profiles.run(cwd=sub)
    assert r.returncode == 0, r.stderr
    assert "status=0" in r.stdout and "gitdir=0" in r.stdout, r.stdout
    assert "config=0" not in r.stdout, r.stdout
    assert "hook=0" in r.stdout, "the hooks are the session's own copy"
    assert (gitdir / "config").read_text() == before
    assert (gitdir / "hooks" / "post-checkout").read_text() == "#!/bin/sh\n"
    assert (gitdir / "f").read_text() == "f\n"


def test_a_gitfile_naming_a_git_dir_whose_worktree_is_elsewhere_is_refused(profiles, repo):
    """A session in a submodule can rewrite its .git file: naming another submodule's git dir
    (whose core.worktree points at its own checkout) must not mount that one."""
    profiles.add()
    sub, gitdir = make_submodule(profiles, repo)
    other = profiles.home / "src" / "other"
    other.mkdir()
    (other / ".git").write_text(f"gitdir: {gitdir}\n")
    r = profiles.run(cmd="plan", cwd=other)
    assert r.returncode == 125, r.stdout
    assert "does not contain it" in r.stderr or "pointing back" in r.stderr, r.stderr
    assert str(gitdir) not in r.stdout


def test_session_cannot_rename_git_or_dotclaude_away(profiles, repo):
    profiles.add()
    (repo / ".claude").mkdir()
    (repo / ".claude" / "settings.local.json").write_text("{}")
    shell_claude(profiles, "mv .git .git-old; echo git=$?; mv .claude .claude-old; echo claude=$?\n"
                           "echo x > .git/commondir; echo commondir=$?\n")
    r = profiles.run()
    assert r.returncode == 0, r.stderr
    assert "git=0" not in r.stdout and "claude=0" not in r.stdout, r.stdout
    assert (repo / ".git").is_dir() and (repo / ".claude").is_dir()
    # What it could still write, the report names after the session.
    assert "commondir=0" in r.stdout
    assert f"git dir that runs commands: {repo}/.git" in r.stderr and "changed what claude or git runs" in r.stderr


@pytest.mark.parametrize("arg", ["--version", "-v", "--help", "-h"])
def test_version_and_help_alone_get_no_session_flags(profiles, arg):
    profiles.add()
    (profiles.base / "shared-settings.json").write_text("{}")
    plan = profiles.plan(args=[arg])
    assert plan["argv"] == [CLAUDE_IN, arg]
    assert plan["net"] == "none", "no session, no network: pasta is not started"
    assert profiles.plan()["net"] == "pasta"


def test_host_ca_anchors_and_extracted_are_mounted_as_a_read_only_pair(profiles):
    """tests/setup-root gives the test machine an anchor and an extracted bundle."""
    anchors, extracted = "/etc/pki/ca-trust/source/anchors", "/etc/pki/ca-trust/extracted"
    assert os.listdir(anchors) and os.path.isdir(extracted), "run the suite via tests/run"
    profiles.add()
    plan = profiles.plan()
    got = [(s, d, ro) for s, d, ro in binds(plan) if s in (anchors, extracted)]
    assert sorted(got) == [(extracted, extracted, True), (anchors, anchors, True)]
    env = env_of(plan)
    bundle = extracted + "/pem/tls-ca-bundle.pem"
    assert env["NODE_EXTRA_CA_CERTS"] == env["SSL_CERT_FILE"] == env["REQUESTS_CA_BUNDLE"] == bundle
    # A forwarded value is never overridden.
    plan = profiles.plan(env=profiles.env(SSL_CERT_FILE="/mine.pem",
                                          CLAUDE_PROFILE_SANDBOX_FORWARD_ENV="SSL_CERT_FILE"))
    assert env_of(plan)["SSL_CERT_FILE"] == "<redacted>"


def test_secrets_never_reach_an_argv_or_the_environment_of_a_host_side_process(profiles):
    """While a session runs, no process of ours outside the sandbox (csandbox itself, pasta)
    carries a .env value in its argv or environment; only claude inside has it."""
    d = profiles.add()
    secret = "csbt-secret-" + str(os.getpid())
    (d / ".env").write_text(f"API_TOKEN={secret}\n")
    shell_claude(profiles, 'echo "ready $API_TOKEN"; exec sleep 30\n')
    proc = subprocess.Popen([CSANDBOX, "run", "work"], cwd=str(profiles.project),
                            env=profiles.env(), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        line = proc.stdout.readline().decode()
        assert line == f"ready {secret}\n", proc.stderr.read1().decode()
        mine = os.readlink("/proc/self/ns/pid")
        leaks = []
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                if os.readlink(f"/proc/{name}/ns/pid") != mine:
                    continue  # inside the sandbox
                for what in ("environ", "cmdline"):
                    with open(f"/proc/{name}/{what}", "rb") as f:
                        if secret.encode() in f.read():
                            leaks.append((name, what))
            except OSError:
                continue
        assert leaks == []
    finally:
        proc.kill()
        proc.wait()


def test_run_and_plan_take_the_proc_mode(profiles):
    profiles.add()
    for flag in (["--proc=none"], ["--proc", "none"]):
        r = subprocess.run([CSANDBOX, "plan", *flag, "work"], cwd=str(profiles.project),
                           env=profiles.env(), capture_output=True, text=True, timeout=TIMEOUT)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["proc"] == "none"
    assert profiles.plan()["proc"] == "auto"
    r = subprocess.run([CSANDBOX, "run", "--proc=sometimes", "work"], cwd=str(profiles.project),
                       env=profiles.env(), capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 125 and "--proc `sometimes`" in r.stderr, r.stderr


# --- bridges (reference §5) -------------------------------------------------------------

@pytest.fixture
def agent(tmp_path):
    """A real ssh-agent of the test user's, on a socket of its own."""
    d = tmp_path / "agent"
    d.mkdir(mode=0o700)
    sock = d / "agent.sock"
    proc = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    assert wait_until(sock.exists, 10), "ssh-agent did not start"
    yield sock
    proc.kill()
    proc.wait()


def _agent_env(profiles, sock, **extra):
    return profiles.env(SSH_AUTH_SOCK=str(sock), CLAUDE_PROFILE_SANDBOX_SSH_AGENT="1", **extra)


AGENT_IN = "/run/claude-sandbox/ssh-agent-0.sock"
AGENT_PROBE = """ssh-add -l > keys 2>&1; echo "${SSH_AUTH_SOCK-unset}" > sock
ls -A ~/.ssh > sshdir; true
"""


def test_ssh_agent_with_keys_is_bound_and_named_by_ssh_auth_sock(profiles, agent, tmp_path):
    key = tmp_path / "id"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "csb-test-key", "-f",
                    str(key)], check=True)
    subprocess.run(["ssh-add", "-q", str(key)], env={"SSH_AUTH_SOCK": str(agent)}, check=True,
                   capture_output=True)
    profiles.add()
    plan = profiles.plan(env=_agent_env(profiles, agent))
    # csandbox's relay to it (test_bridges.py), never the agent's own socket.
    assert (f"ssh-agent relay to {agent}", AGENT_IN, False) in binds(plan)
    assert env_of(plan)["SSH_AUTH_SOCK"] == AGENT_IN
    shell_claude(profiles, AGENT_PROBE)
    r = profiles.run(env=_agent_env(profiles, agent))
    assert r.returncode == 0, r.stderr
    p = profiles.project
    assert "csb-test-key" in (p / "keys").read_text()
    assert (p / "sock").read_text().strip() == AGENT_IN
    assert (p / "sshdir").read_text().split() == ["known_hosts"], "nothing else of ~/.ssh"
    assert "SSH_AGENT" not in r.stderr


def test_ssh_agent_without_keys_is_still_bound(profiles, agent):
    profiles.add()
    shell_claude(profiles, AGENT_PROBE)
    r = profiles.run(env=_agent_env(profiles, agent))
    assert r.returncode == 0, r.stderr
    assert "no identities" in (profiles.project / "keys").read_text()
    assert (profiles.project / "sock").read_text().strip() == AGENT_IN


def test_ssh_agent_dead_or_off_gives_no_socket_and_the_reference_warning(profiles, agent, tmp_path):
    profiles.add()
    shell_claude(profiles, AGENT_PROBE)
    r = profiles.run(env=_agent_env(profiles, tmp_path / "gone.sock"))
    assert r.returncode == 0, r.stderr
    assert ("Warning: CLAUDE_PROFILE_SANDBOX_SSH_AGENT is set but no live SSH agent was found "
            "(SSH_AUTH_SOCK or ~/.1password/agent.sock)") in r.stderr
    assert (profiles.project / "sock").read_text().strip() == "unset"
    plan = profiles.plan(env=profiles.env(SSH_AUTH_SOCK=str(agent)))
    assert not any(dst.startswith("/run/claude-sandbox") for _, dst, _ in binds(plan))
    assert "SSH_AUTH_SOCK" not in env_of(plan)


def _fake_gh(profiles, tmp_path, script):
    d = tmp_path / "ghbin"
    d.mkdir(exist_ok=True)
    gh = d / "gh"
    gh.write_text("#!/bin/sh\n" + script)
    gh.chmod(0o755)
    return profiles.env(PATH=f"{d}:{os.environ['PATH']}", CLAUDE_PROFILE_SANDBOX_GH="1")


TOKEN_PROBE = 'echo "${GH_TOKEN-unset}" > tok\n'


def test_gh_token_reaches_claude_and_no_plan_or_argv(profiles, tmp_path):
    profiles.add()
    env = _fake_gh(profiles, tmp_path,
                   '[ "$1 $2" = "auth token" ] && echo gho_csbtesttoken123 || exit 3\n')
    r = profiles.run(cmd="plan", env=env)
    assert r.returncode == 0, r.stderr
    assert "gho_csbtesttoken123" not in r.stdout + r.stderr
    assert env_of(json.loads(r.stdout))["GH_TOKEN"] == "<redacted>"
    assert "gho_csbtesttoken123" not in " ".join(json.loads(r.stdout)["argv"])
    shell_claude(profiles, TOKEN_PROBE)
    r = profiles.run(env=env)
    assert r.returncode == 0, r.stderr
    assert (profiles.project / "tok").read_text() == "gho_csbtesttoken123\n"


def test_gh_token_forwarded_from_the_host_wins(profiles, tmp_path):
    profiles.add()
    env = _fake_gh(profiles, tmp_path, "echo from-gh\n")
    env.update(GH_TOKEN="from-host", CLAUDE_PROFILE_SANDBOX_FORWARD_ENV="GH_TOKEN")
    shell_claude(profiles, TOKEN_PROBE)
    r = profiles.run(env=env)
    assert r.returncode == 0, r.stderr
    assert (profiles.project / "tok").read_text() == "from-host\n"


@pytest.mark.parametrize("script,why", [("exit 1\n", "gh failed"),
                                        ("sleep 30\n", "did not answer within 10 s"),
                                        ("echo\n", "printed no token")])
def test_gh_without_a_token_warns_and_sets_nothing(profiles, tmp_path, script, why):
    profiles.add()
    env = _fake_gh(profiles, tmp_path, script)
    shell_claude(profiles, TOKEN_PROBE)
    r = profiles.run(env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "CLAUDE_PROFILE_SANDBOX_GH is set, but `gh auth token` gave no token" in r.stderr
    assert why in r.stderr
    assert (profiles.project / "tok").read_text() == "unset\n"


# --- where the profile launches (reference §1.5) -----------------------------------------

HOST_PROBE_SCRIPT = """cd "$PWD"
printf '%s\\n' "$0" "$@" > host-argv
echo "${CLAUDE_CONFIG_DIR-unset} ${FROM_DOTENV-unset} ${KEPT_FROM_CALLER-unset}" > host-env
[ -e /proc/self/ns/user ] && readlink /proc/self/ns/user > host-userns
"""


def _host_setup(profiles, **add):
    d = profiles.add(**add)
    (d / ".env").write_text("FROM_DOTENV=secret-value\n")
    shell_claude(profiles, HOST_PROBE_SCRIPT)
    return d


def test_a_profile_without_its_marker_launches_claude_on_the_host_and_says_so(profiles):
    d = _host_setup(profiles, sandbox=False)
    (profiles.base / "shared-settings.json").write_text(json.dumps({
        "permissions": {"deny": ["Bash(sudo *)"]}, "x": "{profile}"}))
    r = profiles.run(args=("-p", "hi"), env=profiles.env(KEPT_FROM_CALLER="kept"))
    assert r.returncode == 0, r.stderr
    lines = [l for l in r.stderr.splitlines() if "launches on the host, not in a sandbox" in l]
    assert len(lines) == 1 and "no .sandbox marker" in lines[0], r.stderr
    p = profiles.project
    argv = (p / "host-argv").read_text().splitlines()
    assert argv[0] == str(profiles.claude)
    # The shared settings as the host gets them: denies kept, {profile} filled.
    assert argv[1] == "--settings"
    assert json.loads(argv[2]) == {"permissions": {"deny": ["Bash(sudo *)"]}, "x": "work"}
    assert argv[3:] == ["-p", "hi"], "no sandbox flags, no briefing"
    assert (p / "host-env").read_text().split() == [str(d), "secret-value", "kept"]
    assert (p / "host-userns").read_text() == os.readlink("/proc/self/ns/user") + "\n"
    assert not profiles.state().exists(), "a host launch stages nothing"


def test_host_launch_reads_a_dotenv_and_creates_none(profiles):
    """The reference creates .env only for the sandbox's read-only pin."""
    d = profiles.add(sandbox=False)
    shell_claude(profiles, HOST_PROBE_SCRIPT)
    r = profiles.run()
    assert r.returncode == 0, r.stderr
    assert not os.path.lexists(d / ".env")
    assert (profiles.project / "host-env").read_text().split()[1] == "unset"


def test_override_and_flags_decide_where_it_launches(profiles):
    _host_setup(profiles, sandbox=True)
    plan = profiles.plan(env=profiles.env(CLAUDE_PROFILE_SANDBOX="0"))
    assert plan["launch"] == "host" and plan["why"] == "CLAUDE_PROFILE_SANDBOX=0"
    assert plan["env_added"]["FROM_DOTENV"] == "<redacted>"
    assert "secret-value" not in json.dumps(plan)
    r = subprocess.run([CSANDBOX, "plan", "--host", "work"], cwd=str(profiles.project),
                       env=profiles.env(), capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0 and json.loads(r.stdout)["why"] == "run --host", r.stderr
    # A marked profile is sandboxed; CLAUDE_PROFILE_SANDBOX=1 sandboxes an unmarked one, and
    # --sandbox one launch.
    assert "mounts" in profiles.plan()
    (profiles.base / "work" / ".sandbox").unlink()
    assert profiles.plan()["launch"] == "host"
    assert "mounts" in profiles.plan(env=profiles.env(CLAUDE_PROFILE_SANDBOX="1"))
    r = subprocess.run([CSANDBOX, "plan", "--sandbox", "work"], cwd=str(profiles.project),
                       env=profiles.env(), capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0 and "mounts" in json.loads(r.stdout), r.stderr
    r = subprocess.run([CSANDBOX, "run", "--sandbox", "--host", "work"], env=profiles.env(),
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 125 and "contradict" in r.stderr
    r = subprocess.run([CSANDBOX, "run", "--image", "x", "work"], cwd=str(profiles.project),
                       env=profiles.env(), capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 125 and "--image is for a sandboxed launch" in r.stderr


def test_host_launch_of_a_sandboxed_profile_warns_of_a_replaced_statusline(profiles):
    d = _host_setup(profiles, sandbox=True)
    (d / "statusline.sh").write_text("#!/bin/sh\necho planted\n")
    r = profiles.run(env=profiles.env(CLAUDE_PROFILE_SANDBOX="0"))
    assert r.returncode == 0, r.stderr
    assert f"Warning: {d}/statusline.sh is not the link to" in r.stderr
    assert "ln -sfn" in r.stderr
    (d / "statusline.sh").unlink()
    os.symlink(profiles.home / ".claude" / "statusline.sh", d / "statusline.sh")
    r = profiles.run(env=profiles.env(CLAUDE_PROFILE_SANDBOX="0"))
    assert r.returncode == 0 and "statusline.sh is not the link" not in r.stderr, r.stderr


def test_a_waiting_report_stops_a_host_launch_too(profiles):
    d = profiles.add()
    shell_claude(profiles, f'mkdir -p "{CFG_IN}/scripts"; echo x > "{CFG_IN}/hooks-new"; '
                 f'echo \'{{"mcpServers": {{"evil": {{"command": "sh"}}}}}}\' > "{CFG_IN}/.claude.json"\n')
    r = profiles.run()
    assert r.returncode == 0 and "changed what claude or git runs" in r.stderr, r.stderr
    shell_claude(profiles, HOST_PROBE_SCRIPT)
    r = profiles.run(env=profiles.env(CLAUDE_PROFILE_SANDBOX="0"))
    assert r.returncode == 125
    assert "Refusing to start claude on the host for profile work" in r.stderr
    assert not (profiles.project / "host-argv").exists()


# --- csandbox add (reference §6.2) -------------------------------------------------------

def _global_claude(profiles, *dirs):
    g = profiles.home / ".claude"
    g.mkdir(exist_ok=True)
    (g / "settings.json").write_text('{"model": "opus"}\n')
    (g / "CLAUDE.md").write_text("be brief\n")
    (g / "statusline.sh").write_text("#!/bin/sh\n")
    for d in dirs:
        (g / d).mkdir()
    return g


def test_add_seeds_links_and_marks_a_profile_a_run_can_launch(profiles):
    g = _global_claude(profiles, "commands", "skills")
    r = cli(profiles, "add", "new", "--sandbox")
    assert r.returncode == 0, r.stderr
    d = profiles.base / "new"
    assert f"Created profile 'new' at {d}" in r.stdout and "csandbox run new" in r.stdout
    assert (d / ".sandbox").is_file()
    assert (d / "settings.json").read_text() == '{"model": "opus"}\n'
    assert (d / "CLAUDE.md").read_text() == "be brief\n"
    assert os.readlink(d / "statusline.sh") == str(g / "statusline.sh"), "a link, not a copy"
    assert os.readlink(d / "commands") == str(g / "commands")
    assert os.readlink(d / "skills") == str(g / "skills")
    assert (d / "hooks").is_dir() and not (d / "hooks").is_symlink()
    assert "Not linking hooks" in r.stderr
    assert not [n for n in os.listdir(profiles.base) if n.startswith(".")]
    assert "mounts" in profiles.plan("new"), "the marked profile is sandboxed"


def test_add_without_sandbox_or_seeds_makes_a_host_profile_with_its_own_dirs(profiles):
    r = cli(profiles, "add", "plain", "--link")
    assert r.returncode == 0, r.stderr
    d = profiles.base / "plain"
    assert not (d / ".sandbox").exists()
    assert sorted(os.listdir(d)) == ["commands", "hooks", "skills"]
    assert profiles.plan("plain")["launch"] == "host"


def test_add_asks_on_a_terminal_and_isolate_answers_for_all(profiles):
    import pty
    _global_claude(profiles, "commands", "skills", "hooks")
    master, slave = pty.openpty()
    os.write(master, b"y\nn\n\n")
    r = subprocess.run([CSANDBOX, "add", "asked"], stdin=slave, env=profiles.env(),
                       capture_output=True, text=True, timeout=TIMEOUT)
    os.close(slave)
    os.close(master)
    assert r.returncode == 0, r.stderr
    d = profiles.base / "asked"
    assert r.stderr.count("[Y/n]") == 3
    assert (d / "commands").is_symlink() and not (d / "skills").is_symlink()
    assert (d / "hooks").is_symlink(), "an empty answer is yes"
    r = cli(profiles, "add", "apart", "--isolate")
    assert r.returncode == 0, r.stderr
    assert not any((profiles.base / "apart" / n).is_symlink()
                   for n in ("commands", "skills", "hooks"))


@pytest.mark.parametrize("name", ["build", "sandbox-cache", "shared-settings.json", "../x",
                                  ".hidden", "run", "a/b", "-x", "x" * 300])
def test_add_refuses_names_that_cannot_be_profiles_and_creates_nothing(profiles, name):
    r = cli(profiles, "add", "--", name) if name.startswith("-") else cli(profiles, "add", name)
    assert r.returncode == 125
    assert "can't be a profile name" in r.stderr or "unexpected argument" in r.stderr
    assert os.listdir(profiles.base) == []


def test_add_refuses_an_existing_profile_and_leaves_it_as_it_was(profiles):
    d = profiles.add("taken", settings='{"mine": true}')
    r = cli(profiles, "add", "taken", "--sandbox")
    assert r.returncode == 125 and f"Profile 'taken' already exists at {d}" in r.stderr
    assert (d / "settings.json").read_text() == '{"mine": true}'
    assert sorted(os.listdir(profiles.base)) == ["taken"]


# --- where csandbox differs from claude-profile (doc/differences.md) --

ENV_DUMP = 'cd "$PWD"; env -0 > env.bin\n'


def _env_inside(profiles, env=None):
    shell_claude(profiles, ENV_DUMP)
    r = profiles.run(env=env)
    assert r.returncode == 0, r.stderr
    pairs = (profiles.project / "env.bin").read_bytes().split(b"\0")
    return dict(p.split(b"=", 1) for p in pairs if b"=" in p), r.stderr


@pytest.mark.parametrize("name", ["..", ".", "a/b"])
def test_diff_a_profile_name_that_is_a_path_is_refused(profiles, name):
    r = profiles.run(name)
    assert r.returncode == 125 and "can't be a profile name" in r.stderr, r.stderr


def test_diff_dotenv_lines_the_reference_fails_on_are_skipped_with_a_warning(profiles):
    d = profiles.add()
    (d / ".env").write_text("export X=1\nBAD-NAME=2\n1BAD=3\n=4\nOK=5\n")
    env, err = _env_inside(profiles)
    assert env[b"OK"] == b"5"
    for shown in ("`export X`", "`BAD-NAME`", "`1BAD`", "a line `=...` with no name"):
        assert shown in err, shown
    assert not any(k in env for k in (b"export X", b"BAD-NAME", b"1BAD", b""))


def test_diff_dotenv_bytes_pass_as_they_are_and_unicode_line_breaks_end_lines(profiles):
    d = profiles.add()
    (d / ".env").write_bytes(b"BIN=\xff\xfe\nU1=a\xe2\x80\xa8U2=b\xc2\x85U3=c\n")
    env, _ = _env_inside(profiles)
    assert env[b"BIN"] == b"\xff\xfe"
    assert (env[b"U1"], env[b"U2"], env[b"U3"]) == (b"a", b"b", b"c")


@pytest.mark.parametrize("kind", ["fifo", "dir", "big"])
def test_diff_a_dotenv_that_is_no_file_or_too_big_is_refused_at_once(profiles, kind):
    d = profiles.add()
    if kind == "fifo":
        os.mkfifo(d / ".env")
    elif kind == "dir":
        (d / ".env").mkdir()
    else:
        (d / ".env").write_text("A=" + "x" * (1 << 20) + "\n")
    r = profiles.run(timeout=30)
    assert r.returncode == 125
    assert ("not a regular file" if kind != "big" else "larger than") in r.stderr, r.stderr


def test_diff_forward_env_names_skip_with_the_right_reason_and_newlines_pass(profiles):
    profiles.add()
    env = profiles.env(CLAUDE_PROFILE_SANDBOX_FORWARD_ENV="BAD-NAME,MULTI",
                       MULTI="line one\nline two")
    env["BAD-NAME"] = "set on the host"
    inside, err = _env_inside(profiles, env)
    assert "names `BAD-NAME`, which is not a valid variable name" in err
    assert inside[b"MULTI"] == b"line one\nline two"
    assert "line one" not in err


def test_diff_a_linked_ancestor_mcp_json_is_not_mounted_and_is_named(profiles):
    profiles.add()
    real = profiles.home / "elsewhere.json"
    real.write_text("{}")
    os.symlink(real, profiles.home / "src" / ".mcp.json")
    plan = profiles.plan()
    assert not any(m["dest"].endswith(".mcp.json") and "src" in m["dest"]
                   for m in plan["mounts"])
    r = profiles.run(cmd="plan")
    assert ".mcp.json is a symlink, so it is not mounted" in r.stderr


def test_diff_git_hooks_that_is_a_file_gets_no_copy_and_a_warning(profiles):
    profiles.add()
    git("init", "-q", cwd=profiles.project)
    hooks = profiles.project / ".git" / "hooks"
    shutil.rmtree(hooks)
    hooks.write_text("not a dir\n")
    r = profiles.run()
    assert r.returncode == 0, r.stderr
    assert ".git/hooks is not a directory, so the sandbox does not give it a copy" in r.stderr
    assert hooks.read_text() == "not a dir\n"


@pytest.mark.parametrize("encoding", ["deep", "utf-16"])
def test_diff_settings_csandbox_cannot_parse_are_copied_with_their_denies(profiles, encoding):
    d = profiles.add()
    rules = {"permissions": {"deny": ["Bash(sudo *)"]}}
    if encoding == "deep":
        raw = (json.dumps(rules)[:-1] + ', "x": ' + "[" * 100 + "]" * 100 + "}").encode()
    else:
        raw = json.dumps(rules).encode("utf-16")
    (d / "settings.json").write_bytes(raw)
    profiles.report()
    assert (profiles.state() / "settings.json").read_bytes() == raw


def test_diff_settings_over_4_mib_are_refused(profiles):
    d = profiles.add()
    (d / "settings.json").write_text('{"a": "' + "x" * (4 << 20) + '"}')
    r = profiles.run()
    assert r.returncode == 125 and "larger than the limit" in r.stderr


def test_run_starts_the_network_before_the_plan_and_the_payload_connects_at_once(profiles):
    """`run` makes the session's user and network namespaces and starts pasta before it
    plans the launch, then builds the sandbox inside them: a claude that connects as its
    first act reaches the test host on every launch, and no holder or pasta outlives one."""
    host = os.environ["CSANDBOX_TEST_HOST"]

    def ours():
        # a killed pasta takes tens of milliseconds to unregister its tap and exit
        r = subprocess.run(["pgrep", "-u", str(os.getuid()), "-f", "pasta|csandbox run"],
                           capture_output=True, text=True)
        return set(r.stdout.split()) - before

    before = set()
    before = ours()
    profiles.add()
    shell_claude(profiles, f'exec bash -c "exec 3<>/dev/tcp/{host}/8080 && echo connected"\n')
    for i in range(60):
        r = profiles.run()
        assert r.returncode == 0 and r.stdout == "connected\n", (i, r.stderr)
    assert wait_until(lambda: not ours(), 10), f"outlived their launch: {ours()}"


def test_diff_colorterm_of_the_host_wins_over_dotenv_and_term_is_the_launchers(profiles):
    """COLORTERM as the reference's `-e COLORTERM` over its env file: the host's when set,
    else the .env's. TERM is csandbox's own: the host's, or `dumb` when it has none."""
    d = profiles.add()
    (d / ".env").write_text("COLORTERM=from-dotenv\nTERM=from-dotenv\n")
    env, err = _env_inside(profiles, profiles.env(COLORTERM="truecolor", TERM="xterm-kitty"))
    assert (env[b"COLORTERM"], env[b"TERM"]) == (b"truecolor", b"xterm-kitty")
    assert ".env sets TERM, which csandbox sets itself" in err
    env, _ = _env_inside(profiles, profiles.env(COLORTERM=None, TERM=None))
    assert (env[b"COLORTERM"], env[b"TERM"]) == (b"from-dotenv", b"dumb")


def test_diff_the_launchers_own_errors_exit_125(profiles):
    r = profiles.run("nosuchprofile")
    assert r.returncode == 125 and "does not exist" in r.stderr, r.stderr
    profiles.add(sandbox=False)
    r = profiles.run(env=profiles.env(CLAUDE_PROFILE_CLAUDE_BIN="no-such-claude"))
    assert r.returncode == 127 and "claude is not installed" in r.stderr, r.stderr


def test_diff_an_images_user_and_entrypoint_are_not_used_and_not_warned_about(profiles,
                                                                               tmp_path):
    profiles.add()
    import_busybox_image(profiles, tmp_path, config={"User": "nobody",
                                                     "Entrypoint": ["/bin/false"]})
    r = profiles.run(env=profiles.env(CLAUDE_PROFILE_SANDBOX_IMAGE="sandbox-img"))
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert (rep["uid"], rep["gid"]) == (1000, 1000) and rep["argv"][0] == CLAUDE_IN
    assert r.stderr == "", r.stderr


def test_diff_no_host_ids_or_bridge_variables_and_no_loopback_for_a_bridge(profiles, agent):
    """The reference passes HOST_UID/HOST_GID for its entrypoint and its TCP bridge's port,
    token and forwards, and maps the host's loopback for a bridge; csandbox binds sockets."""
    profiles.add()
    env = _agent_env(profiles, agent)
    plan = profiles.plan(env=env)
    assert plan["map_host_loopback"] is False
    inside = profiles.report(env=env)["env"]
    for name in ("HOST_UID", "HOST_GID", "CLAUDE_SANDBOX_FORWARDS", "CLAUDE_SANDBOX_BRIDGE_PORT",
                 "CLAUDE_SANDBOX_BRIDGE_TOKEN"):
        assert name not in inside, name
    assert inside["SSH_AUTH_SOCK"] == AGENT_IN


def test_diff_no_shared_image_store_is_mounted(profiles):
    """claude-profile's sandbox-cache store: csandbox has no podman inside to use it."""
    profiles.add()
    (profiles.data / "claude-profile" / "image-store" / "overlay-images").mkdir(parents=True)
    dests = [m["dest"] for m in profiles.plan()["mounts"]]
    assert "/var/lib/shared-mcp-store" not in dests
    assert "/etc/containers/storage.conf" not in dests


def test_diff_a_profile_dir_that_is_not_yours_is_refused(profiles):
    r = profiles.run("lib", env=profiles.env(CLAUDE_PROFILE_PROFILES_BASE="/usr"), cmd="plan")
    assert r.returncode == 125, r.stderr
    assert "profile 'lib': /usr/lib is not yours" in r.stderr, r.stderr


@pytest.mark.parametrize("command", ["remove", "links", "env", "build", "sandbox-skill"])
def test_diff_claude_profiles_other_commands_are_not_csandboxs(profiles, command):
    profiles.add()
    r = subprocess.run([CSANDBOX, command, "work"], env=profiles.env(), capture_output=True,
                       text=True, timeout=TIMEOUT)
    assert r.returncode == 125 and f"unknown command `{command}`" in r.stderr, r.stderr
    assert (profiles.base / "work").is_dir()


def test_diff_the_hostname_inside_is_csandbox(profiles):
    profiles.add()
    assert profiles.report()["hostname"] == "csandbox"


def test_diff_every_test_the_differences_table_names_exists():
    """Each row of doc/differences.md's table names its test or is a test_diff_* here."""
    import glob
    import re
    here = os.path.dirname(os.path.abspath(__file__))
    table = open(os.path.join(here, "..", "..", "doc", "differences.md")).read()
    named = set(re.findall(r"`(test_[a-z0-9_]+)`", table))
    source = "".join(open(f).read() for f in glob.glob(os.path.join(here, "*.py")))
    assert len(named) > 20
    assert [n for n in sorted(named) if f"def {n}(" not in source] == []


def test_csandbox_inside_a_run_session_without_tun_says_run_cannot_be_given_it(profiles):
    """A session's claude that starts csandbox with pasta gets csandbox's relay, and is told
    the session cannot get the device (run takes no --dev-bind), and what can."""
    profiles.add()
    inner = profiles.project / "csandbox"
    shutil.copy(CSANDBOX, inner)
    shell_claude(profiles, f'cd "$PWD"; {inner} exec --net pasta -- true 2> err; echo $? > rc\n')
    r = profiles.run()
    assert r.returncode == 0, r.stderr
    err = (profiles.project / "err").read_text()
    assert (profiles.project / "rc").read_text() == "0\n", err
    assert err.count("the session's network is csandbox's relay") == 1, err
    assert "This runs inside csandbox (a `csandbox run` session)" in err, err
    assert "`run` cannot be given the device" in err, err
    assert "csandbox exec --dev-bind /dev/net/tun /dev/net/tun" in err, err


def test_run_with_a_missing_image_says_each_fix_once(profiles):
    """A profile's image that is not in the store: one message, naming the setting, how to
    import or pull it, and the embedded default, each once; nothing starts."""
    profiles.add()
    r = profiles.run(env=profiles.env(CLAUDE_PROFILE_SANDBOX_IMAGE="nosuch-image"))
    assert r.returncode == 125, r.stderr
    assert r.stderr.count("csandbox image import") == 1, r.stderr
    assert "csandbox image pull" in r.stderr and "CLAUDE_PROFILE_SANDBOX_IMAGE" in r.stderr
    assert "nosuch-image" in r.stderr


def test_run_at_a_terminal_says_how_to_log_in_until_the_profile_has_a_login(profiles):
    """A profile made by hand (mkdir, as the README's first command does) has no login: at a
    terminal, run says to type /login, once; with a login in the profile it says nothing."""
    import pty
    import select

    def stderr_at_terminal():
        master, slave = pty.openpty()
        r = subprocess.run([CSANDBOX, "run", "work", "--", "--version"], cwd=str(profiles.project),
                           env=profiles.env(), stdin=slave, stdout=subprocess.PIPE, stderr=slave,
                           timeout=TIMEOUT)
        os.close(slave)
        out = b""
        while select.select([master], [], [], 0.2)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        os.close(master)
        assert r.returncode == 0, out
        return out.decode(errors="replace")

    d = profiles.add()
    err = stderr_at_terminal()
    assert err.count("/login") == 1 and "not logged in" in err, err
    assert "/login" not in profiles.run(args=["--version"]).stderr, "not at a terminal"
    (d / ".credentials.json").write_text("{}")
    assert "/login" not in stderr_at_terminal()
