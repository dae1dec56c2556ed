"""What the host runs after a session: the profile's scripts are read-only inside, what
stays writable (nested repositories, submodule git dirs, gitlinks, files the settings run)
is reported after the session and the next launch refuses until the user accepts it,
csandbox's own git runs nothing a repository's config names, and csandbox's own variables
win over the profile's .env. Each attack is a program run inside as the fake claude."""
import json
import os
import subprocess
import time

from conftest import CSANDBOX, TIMEOUT
from test_run import CFG_IN, HOME_IN, Profiles, git, profiles, shell_claude  # noqa: F401
import pytest


@pytest.fixture
def repo(profiles):
    """A repository with one commit (the trust tests' shared fixture)."""
    git("init", "-q", cwd=profiles.project)
    git("commit", "-q", "--allow-empty", "-m", "start", cwd=profiles.project)
    return profiles.project


def host_git(cwd, *args):
    """The user's own git on the host, after the session (its exit status is not the point)."""
    env = {"PATH": os.environ["PATH"], "HOME": str(cwd), "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", *args], cwd=str(cwd), env=env, capture_output=True, text=True,
                          timeout=60)


def run_accepting(profiles, **kw):
    return subprocess.run([CSANDBOX, "run", "--accept-changes", "work"],
                          cwd=str(profiles.project), env=profiles.env(), capture_output=True,
                          text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL, **kw)


def refused_naming(profiles, *names):
    """The next launch refuses, naming each of names, and its claude never starts."""
    shell_claude(profiles, "echo second session\n")
    r = profiles.run()
    assert r.returncode == 125 and "second session" not in r.stdout, r.stderr
    for name in names:
        assert name in r.stderr, r.stderr


# --- read-only inside --------------------------------------------------------------------

def test_profile_scripts_and_the_files_settings_run_are_read_only_inside(profiles, repo):
    d = profiles.add(settings=json.dumps({
        "hooks": {"PreToolUse": [{"matcher": "", "hooks": [
            {"type": "command", "command": '"$CLAUDE_CONFIG_DIR"/scripts/run.sh --fast'}]}]},
        "statusLine": {"type": "command", "command": "~/.claude-profiles/work/statusline.sh"},
        "enabledPlugins": {"p@m": True},
    }))
    (profiles.base / "shared-settings.json").write_text(json.dumps({
        "hooks": {"Stop": [{"hooks": [
            {"type": "command", "command": "bash $CLAUDE_PROJECT_DIR/tools/lint.sh"}]}]}}))
    (d / "hooks").mkdir()
    (d / "plugins").mkdir()
    (d / "scripts").mkdir()
    (repo / "tools").mkdir()
    files = {d / "hooks" / "h.sh": CFG_IN + "/hooks/h.sh",
             d / "statusline.sh": CFG_IN + "/statusline.sh",
             d / "plugins" / "p.json": CFG_IN + "/plugins/p.json",
             d / "scripts" / "run.sh": CFG_IN + "/scripts/run.sh",
             repo / "tools" / "lint.sh": str(repo / "tools" / "lint.sh")}
    for host in files:
        host.write_text("#!/bin/sh\necho good\n")
    (repo / "tools" / "other.sh").write_text("x")
    script = ""
    for inside in files.values():
        script += (f'echo evil > "{inside}" && echo "wrote {inside}"\n'
                   f'rm -f "{inside}" && echo "removed {inside}"\n'
                   f'echo evil > /tmp/x; mv /tmp/x "{inside}" 2>/dev/null && echo "moved {inside}"\n')
    script += (f'touch "{CFG_IN}/hooks/new.sh" && echo "created hook"\n'
               f'echo ok > "{repo}/tools/other.sh" && echo "control writable"\n')
    shell_claude(profiles, script)
    r = profiles.run()
    assert r.returncode == 0, r.stderr
    assert "control writable" in r.stdout, r.stdout + r.stderr
    for word in ("wrote", "removed", "moved", "created hook"):
        assert word not in r.stdout, r.stdout
    assert "Read-only file system" in r.stderr
    for host in files:
        assert host.read_text() == "#!/bin/sh\necho good\n", host
    assert not (d / "hooks" / "new.sh").exists()


def test_plan_binds_the_named_files_read_only_over_themselves(profiles, repo):
    d = profiles.add(settings=json.dumps({"apiKeyHelper": "/bin/sh ./tools/key.sh",
                                          "statusLine": {"command": "/usr/bin/env true"}}))
    (repo / "tools").mkdir()
    (repo / "tools" / "key.sh").write_text("x")
    (d / "statusline.sh").write_text("x")
    plan = json.loads(profiles.run(cmd="plan").stdout)
    ro = {(m["source"], m["dest"]) for m in plan["mounts"]
          if m["kind"] == "bind" and m["readonly"]}
    assert (str(repo / "tools" / "key.sh"), str(repo / "tools" / "key.sh")) in ro
    assert (str(d / "statusline.sh"), CFG_IN + "/statusline.sh") in ro
    assert not any(s == "/bin/sh" or s == "/usr/bin/env" for s, _ in ro)


# --- reported after the session, refused until accepted ----------------------------------

def test_a_file_the_settings_run_created_in_the_session_is_reported_and_refused(profiles):
    profiles.add(settings=json.dumps({"statusLine": {
        "command": "$CLAUDE_CONFIG_DIR/scripts/later.sh"}}))
    shell_claude(profiles, f'mkdir -p "{CFG_IN}/scripts"; echo evil > "{CFG_IN}/scripts/later.sh"\n')
    r = profiles.run()
    assert r.returncode == 0, r.stderr
    assert "file the host runs" in r.stderr and "later.sh" in r.stderr
    shell_claude(profiles, "echo second session; exit 0\n")
    r = profiles.run()
    assert r.returncode == 125
    assert "second session" not in r.stdout
    assert "later.sh" in r.stderr and "--accept-changes" in r.stderr


def _killed_session(profiles, repo, script):
    """A session whose csandbox is killed (SIGKILL) once the fake claude said "started"."""
    shell_claude(profiles, script + 'echo started; exec sleep 60\n')
    proc = subprocess.Popen([CSANDBOX, "run", "work"], cwd=str(repo), env=profiles.env(),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"started\n"
        # A concurrent launch of the same profile is not refused by a live session.
        shell_claude(profiles, "exit 0\n")
        assert profiles.run().returncode == 0
        proc.kill()
        proc.wait(timeout=TIMEOUT)
    finally:
        proc.kill()
        proc.communicate()


def test_a_killed_session_that_changed_nothing_is_checked_by_the_next_launch_which_starts(
        profiles, repo):
    """Only SIGKILL (or a machine stop) leaves a record; the next launch finishes its check by
    a walk for what changed since it started, and starts when that finds nothing."""
    profiles.add()
    _killed_session(profiles, repo, f'echo "ordinary work" > "{repo}/notes.txt"\n')
    shell_claude(profiles, "echo second session\n")
    r = profiles.run()
    assert r.returncode == 0, r.stderr
    assert "second session" in r.stdout
    assert r.stderr.count("checked now: it changed nothing claude or git runs") == 1, r.stderr
    assert "Refusing" not in r.stderr
    r = profiles.run()
    assert r.returncode == 0 and "checked now" not in r.stderr, r.stderr


def test_a_killed_session_that_planted_a_hook_is_refused_by_the_next_launch(profiles, repo,
                                                                            tmp_path):
    """The walk judges what the session left, planted at its last moment (no live warning
    needed): the next launch refuses, names it, once; plan says it waits; accepted, it
    starts."""
    profiles.add()
    mark = tmp_path / "hook-ran"
    _killed_session(profiles, repo, f"""cd "{repo}"
mkdir -p lib && git -C lib init -q && printf '#!/bin/sh\\ntouch {mark}\\n' > lib/.git/hooks/post-checkout
chmod +x lib/.git/hooks/post-checkout
""")
    shell_claude(profiles, "echo second session\n")
    r = profiles.run()
    assert r.returncode == 125, r.stderr
    assert "second session" not in r.stdout
    assert f"{repo}/lib/.git" in r.stderr and "checked now" in r.stderr, r.stderr
    assert r.stderr.count("(its csandbox was killed") == 1, r.stderr
    r = profiles.run(cmd="plan")
    assert r.returncode == 0 and "Not accepted yet" in r.stderr and f"{repo}/lib/.git" in r.stderr
    assert profiles.run().returncode == 125
    r = run_accepting(profiles)
    assert r.returncode == 0 and "second session" in r.stdout, r.stderr
    assert profiles.run().returncode == 0
    assert not mark.exists()


def test_a_session_ended_by_sigterm_is_judged_and_the_next_launch_starts(profiles, repo):
    """`timeout` (a CI job's limit, docker stop, systemd) sends SIGTERM to csandbox's whole
    process group: the session ends gracefully, its changes are judged, nothing is left
    that refuses the next launch; a plant made before it is reported as usual."""
    profiles.add()
    shell_claude(profiles, 'echo started; exec sleep 60\n')
    r = subprocess.run(["timeout", "3", CSANDBOX, "run", "work"], cwd=str(repo),
                       env=profiles.env(), stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, timeout=TIMEOUT)
    assert r.returncode == 124 and "started" in r.stdout, r.stderr
    assert "journal" not in r.stderr and "Refusing" not in r.stderr, r.stderr
    shell_claude(profiles, "echo second session\n")
    r = profiles.run()
    assert r.returncode == 0 and "second session" in r.stdout, r.stderr
    assert "checked now" not in r.stderr, "a graceful end leaves no record to finish"

    shell_claude(profiles, f'git -C "{repo}" init -q sub && '
                           f'git -C "{repo}/sub" config core.pager "touch /tmp/x"; '
                           'echo started; exec sleep 60\n')
    r = subprocess.run(["timeout", "-s", "INT", "3", CSANDBOX, "run", "work"], cwd=str(repo),
                       env=profiles.env(), stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, timeout=TIMEOUT)
    assert f"{repo}/sub/.git" in r.stderr, r.stderr
    shell_claude(profiles, "echo third session\n")
    r = profiles.run()
    assert r.returncode == 125 and f"{repo}/sub/.git" in r.stderr, r.stderr


def test_a_closed_pipe_at_the_end_of_an_allowlist_session_leaves_nothing_that_refuses(
        profiles, repo):
    """`csandbox run ... 2>&1 | head -1`: the egress line at the end meets a closed pipe;
    csandbox does not die of SIGPIPE before the session's check."""
    profiles.add()
    shell_claude(profiles, "echo one; echo two; echo three\n")
    env = profiles.env(CLAUDE_PROFILE_SANDBOX_EGRESS="allowlist")
    r = subprocess.run(f'"{CSANDBOX}" run work 2>&1 | head -1; echo "rc=${{PIPESTATUS[0]}}"',
                       shell=True, executable="/bin/bash", cwd=str(repo), env=env,
                       stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=TIMEOUT)
    assert r.stdout.startswith("one\n"), r.stdout
    shell_claude(profiles, "echo second session\n")
    r = profiles.run(env=env)
    assert r.returncode == 0 and "second session" in r.stdout, r.stderr
    assert "checked now" not in r.stderr and "Refusing" not in r.stderr, r.stderr


def test_a_setuid_bit_a_file_in_the_tree_gets_during_the_session_is_removed(profiles, repo):
    """Whatever gives a file in a writable root a setuid or setgid bit while the session runs
    (here the host itself, beside it), the journal takes the bit off and reports the file:
    no other local account can run it as the user."""
    profiles.add()
    tool = repo / "tool"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    shell_claude(profiles, 'echo started; read line; echo done\n')
    proc = subprocess.Popen([CSANDBOX, "run", "work"], cwd=str(repo), env=profiles.env(),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"started\n"
        tool.chmod(0o6755)
        deadline = time.monotonic() + 10
        while tool.stat().st_mode & 0o6000 and time.monotonic() < deadline:
            time.sleep(0.05)
        out, err = proc.communicate(b"go\n", timeout=TIMEOUT)
    finally:
        proc.kill()
    assert tool.stat().st_mode & 0o7777 == 0o755, oct(tool.stat().st_mode)
    assert b"setuid or setgid file" in err and str(tool).encode() in err, err


def test_nested_repository_with_fsmonitor_and_gitlink_is_reported_and_refused(profiles, repo,
                                                                              tmp_path):
    """The attack: src/.git whose core.fsmonitor runs a command, registered as a gitlink in
    the writable index, so that the host's next `git status` at the root runs it."""
    profiles.add()
    mark = tmp_path / "fsmonitor-ran"
    shell_claude(profiles, f"""set -e
cd "{repo}"
mkdir -p src
git -C src init -q
git -C src config core.fsmonitor "touch {mark}"
git update-index --add --cacheinfo 160000,1234567890123456789012345678901234567890,src
echo planted
""")
    r = profiles.run()
    assert r.returncode == 0, r.stderr
    assert "planted" in r.stdout, r.stderr
    found = f"git repository that runs commands: {repo}/src/.git (config sets core.fsmonitor)"
    assert found in r.stderr, r.stderr
    assert not mark.exists(), "csandbox's own git ran the fsmonitor"

    shell_claude(profiles, "echo second session; exit 0\n")
    r = profiles.run()
    assert r.returncode == 125, r.stderr
    assert "second session" not in r.stdout
    assert f"{repo}/src/.git" in r.stderr and "csandbox run --accept-changes work" in r.stderr
    r = profiles.run(cmd="plan")
    assert r.returncode == 0 and "Not accepted yet" in r.stderr, r.stderr
    assert profiles.run().returncode == 125, "plan accepts nothing"
    assert not mark.exists()

    r = run_accepting(profiles)
    assert r.returncode == 0, r.stderr
    assert "second session" in r.stdout and "Accepted" in r.stderr
    assert found in r.stderr
    r = profiles.run()
    assert r.returncode == 0, r.stderr
    assert "runs commands" not in r.stderr, "accepted, and not new since"
    assert not mark.exists(), "csandbox's own git ran the fsmonitor"
    # The attack is real: the host's plain git status at the root runs it.
    host_git(repo, "status")
    assert mark.exists()


def test_submodule_and_worktree_git_dirs_that_run_commands_are_reported(profiles, repo):
    """A git dir below .git/modules or .git/worktrees is judged as git reads it; a plain
    `git init` there (what `git submodule add` makes) runs nothing and is not reported."""
    profiles.add()
    shell_claude(profiles, f"""set -e
cd "{repo}"
mkdir -p .git/modules .git/worktrees/w
git init -q --bare .git/modules/lib
git init -q --bare .git/modules/quiet
git config -f .git/modules/lib/config core.fsmonitor "touch /tmp/x"
printf 'ref: refs/heads/main\\n' > .git/worktrees/w/HEAD
printf '../..\\n' > .git/worktrees/w/commondir
printf '[core]\\n\\tfsmonitor = touch /tmp/x\\n' > .git/worktrees/w/config.worktree
printf '[core]\\n\\tfsmonitor = touch /tmp/x\\n' > .git/config.worktree
""")
    r = profiles.run()
    assert r.returncode == 0, r.stderr
    assert (f"git repository that runs commands: {repo}/.git/modules/lib "
            "(config sets core.fsmonitor)") in r.stderr, r.stderr
    assert (f"git repository that runs commands: {repo}/.git/worktrees/w "
            "(config.worktree sets core.fsmonitor)") in r.stderr
    assert f"git dir that runs commands: {repo}/.git (config.worktree sets" in r.stderr
    assert "modules/quiet" not in r.stderr


def test_modules_dir_made_a_link_is_reported(profiles, repo):
    """git follows .git/modules -> a dir of the session's: csandbox names the link."""
    profiles.add()
    shell_claude(profiles, f"""set -e
cd "{repo}"
mkdir -p tools/mods && git init -q --bare tools/mods/lib
ln -s ../tools/mods .git/modules
""")
    r = profiles.run()
    assert r.returncode == 0, r.stderr
    assert f"link that git follows in a git dir: {repo}/.git/modules" in r.stderr, r.stderr


def test_index_swapped_for_a_link_is_reported(profiles, repo):
    """git follows a linked index; csandbox does not read through it, so it names it."""
    profiles.add()
    shell_claude(profiles, f'cd "{repo}" && mv .git/index idx && ln -s ../idx .git/index\n')
    r = profiles.run()
    assert r.returncode == 0, r.stderr
    assert f"link that git follows in a git dir: {repo}/.git/index" in r.stderr, r.stderr


def test_changed_project_settings_are_reported(profiles, repo):
    profiles.add()
    (repo / ".claude").mkdir()
    (repo / ".claude" / "settings.json").write_text("{}")
    shell_claude(profiles, f"""cat > "{repo}/.claude/settings.json.new" <<'E'
{{"hooks": {{"Stop": [{{"hooks": [{{"type": "command", "command": "touch /tmp/x"}}]}}]}}}}
E
mv "{repo}/.claude/settings.json.new" "{repo}/.claude/settings.json"
""")
    r = profiles.run()
    assert r.returncode == 0, r.stderr
    assert f"claude project settings: {repo}/.claude/settings.json" in r.stderr, r.stderr


def test_changed_nested_repository_config_and_a_new_bare_repository_are_reported(profiles, repo):
    profiles.add()
    (repo / "vendor").mkdir()
    git("init", "-q", cwd=repo / "vendor")
    r = profiles.run()
    assert r.returncode == 0 and "nested git repository" not in r.stderr, r.stderr
    shell_claude(profiles, f'git -C "{repo}/vendor" config core.hooksPath /tmp\n'
                           f'git init -q --bare "{repo}/fixtures/bare.git"\n'
                           f'git init -q --bare "{repo}/fixtures/quiet.git"\n'
                           f'git config -f "{repo}/fixtures/bare.git/config" core.pager evil\n')
    r = profiles.run()
    assert r.returncode == 0, r.stderr
    assert (f"git repository that runs commands: {repo}/vendor/.git "
            "(config sets core.hookspath)") in r.stderr, r.stderr
    assert (f"git repository that runs commands: {repo}/fixtures/bare.git "
            "(config sets core.pager)") in r.stderr
    assert "quiet.git" not in r.stderr


def test_nothing_reported_or_refused_after_an_ordinary_session(profiles, repo):
    profiles.add()
    shell_claude(profiles, f'cd "{repo}" && date +%s%N > f && git add f && '
                           'git -c user.name=a -c user.email=b commit -qm f && echo committed\n')
    for _ in range(2):
        r = profiles.run()
        assert r.returncode == 0, r.stderr
        assert "committed" in r.stdout, r.stderr
        assert "changed what claude or git runs" not in r.stderr


# --- csandbox's own git ------------------------------------------------------------------

PLANTS = {
    "core.fsmonitor": "touch {m}",
    "core.sshCommand": "touch {m}",
    "credential.helper": "!touch {m}",
    "core.pager": "touch {m}; cat",
    "diff.external": "touch {m}",
    "filter.evil.clean": "touch {m}; cat",
    "filter.evil.smudge": "touch {m}; cat",
    "core.editor": "touch {m}",
    "gpg.program": "touch {m}",
}


def test_csandbox_git_runs_nothing_the_repository_config_names(profiles, repo, tmp_path):
    profiles.add()
    marks = {}
    for i, (key, cmd) in enumerate(PLANTS.items()):
        marks[key] = tmp_path / f"mark-{i}"
        git("config", key, cmd.format(m=marks[key]), cwd=repo)
    hooks = repo / ".git" / "hooks"
    hooks_mark = tmp_path / "mark-hook"
    for name in ("post-checkout", "post-index-change", "reference-transaction", "pre-auto-gc"):
        (hooks / name).write_text(f"#!/bin/sh\ntouch {hooks_mark}\n")
        (hooks / name).chmod(0o755)
    git("config", "core.hooksPath", str(hooks), cwd=repo)
    (repo / ".gitattributes").write_text("* filter=evil diff=evil\n")
    (repo / "f").write_text("x")
    r = profiles.run(cmd="plan")
    assert r.returncode == 0, r.stderr
    r = profiles.run()
    assert r.returncode == 0, r.stderr
    ran = [k for k, m in marks.items() if m.exists()] + (["hooks"] if hooks_mark.exists() else [])
    assert ran == []
    # The plants are live: the host's own git runs the fsmonitor and the clean filter.
    host_git(repo, "add", "f")
    host_git(repo, "status")
    assert marks["core.fsmonitor"].exists() and marks["filter.evil.clean"].exists()


# --- the environment ---------------------------------------------------------------------

def test_env_file_cannot_override_what_csandbox_sets(profiles):
    d = profiles.add()
    (d / ".env").write_text("HOME=/evil\nUSER=evil\nCLAUDE_CONFIG_DIR=/evil\nTERM=evil\n"
                            "PATH=/evil\nNODE_EXTRA_CA_CERTS=/evil.pem\nMY_VAR=mine\n")
    r = profiles.report(env=profiles.env(TERM="xterm"))
    env = r["env"]
    assert env["HOME"] == HOME_IN and env["USER"] == "appuser"
    assert env["CLAUDE_CONFIG_DIR"] == CFG_IN and env["TERM"] == "xterm"
    assert env["PATH"].startswith(HOME_IN + "/.local/bin:") and "/evil" not in env["PATH"]
    assert env["NODE_EXTRA_CA_CERTS"] == "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem"
    assert env["MY_VAR"] == "mine"
    # Forwarded by name, the CA variable keeps the forwarded value (here the .env's).
    r = profiles.report(env=profiles.env(CLAUDE_PROFILE_SANDBOX_FORWARD_ENV="NODE_EXTRA_CA_CERTS",
                                         NODE_EXTRA_CA_CERTS=None))
    assert r["env"]["NODE_EXTRA_CA_CERTS"] == "/evil.pem"
    assert r["env"]["HOME"] == HOME_IN
    # Forwarding one of csandbox's own names does not change it either.
    r = profiles.run(env=profiles.env(CLAUDE_PROFILE_SANDBOX_FORWARD_ENV="HOME,PATH"))
    assert r.returncode == 0, r.stderr
    env = json.loads(r.stdout)["env"]
    assert env["HOME"] == HOME_IN and env["PATH"].startswith(HOME_IN + "/.local/bin:")
    assert "names HOME, which csandbox sets itself" in r.stderr
    assert ".env sets HOME, which csandbox sets itself" in r.stderr


def test_claude_making_empty_plugin_dirs_is_not_a_change_but_a_plugin_file_is(profiles):
    """Claude Code makes ~/.claude/plugins/marketplaces on its first start: empty dirs run
    nothing, so the next launch goes on; a file in that tree is reported."""
    profiles.add()
    shell_claude(profiles, f'mkdir -p "{CFG_IN}/plugins/marketplaces/m/.claude-plugin"\n')
    r = profiles.run()
    assert r.returncode == 0, r.stderr
    assert "changed what claude or git runs" not in r.stderr
    r = profiles.run()
    assert r.returncode == 0, r.stderr
    shell_claude(profiles, f'echo "#!/bin/sh" > "{CFG_IN}/plugins/marketplaces/m/hook.sh"; true\n')
    # No setting enables a plugin: plugins/ is claude's state, writable, and not a finding.
    r = profiles.run()
    assert r.returncode == 0 and "changed what claude or git runs" not in r.stderr, r.stderr
    assert (profiles.base / "work" / "plugins" / "marketplaces" / "m" / "hook.sh").exists()


def test_plugin_files_are_state_until_the_settings_enable_a_plugin(profiles):
    """claude keeps plugin state in plugins/ (store/, marketplaces/) from its first session:
    nothing there runs until the settings (read-only inside) enable a plugin."""
    d = profiles.add()
    shell_claude(profiles, f'mkdir -p "{CFG_IN}/plugins/m" && echo x > "{CFG_IN}/plugins/m/f"\n')
    r = profiles.run()
    assert r.returncode == 0 and "changed what claude or git runs" not in r.stderr, r.stderr
    assert profiles.run().returncode == 0
    (d / "plugins").rename(d / "plugins.old")
    (d / "settings.json").write_text(json.dumps({"enabledPlugins": {"p@m": True}}))
    r = profiles.run()
    assert r.returncode == 0, r.stderr
    assert "plugin file (the settings enable plugins)" in r.stderr and "plugins/m/f" in r.stderr
    assert profiles.run().returncode == 125


# --- attacks on the report itself (each as the session would run it) ---------------------

def test_a_live_plant_is_shown_while_the_session_runs_and_kept_after_it_is_gone(profiles, repo,
                                                                                tmp_path):
    """The session plants a nested repository whose fsmonitor runs a command, waits until
    the user's own `git status` has run it, removes it and exits. The user is told while
    the session runs, before that git status, and the report keeps it after it is gone."""
    profiles.add()
    mark = tmp_path / "fsmonitor-ran"
    go = repo / "go"
    shell_claude(profiles, f"""set -e
cd "{repo}"
mkdir -p src && git -C src init -q
git -C src config core.fsmonitor "touch {mark}"
echo planted
while [ ! -e "{go}" ]; do sleep 0.05; done
rm -rf src "{go}"
echo removed
""")
    proc = subprocess.Popen([CSANDBOX, "run", "work"], cwd=str(repo), env=profiles.env(),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "planted\n"
        # Told while the session runs: the warning comes before anything else happens.
        seen = ""
        while "runs commands" not in seen:
            line = proc.stderr.readline()
            assert line, "the session's stderr ended without a warning"
            seen += line
        assert f"{repo}/src/.git (config sets core.fsmonitor)" in seen, seen
        # Only now, told, does the user's git status run it (it would, on any host).
        host_git(repo / "src", "status")
        go.touch()
        out, err = proc.communicate(timeout=TIMEOUT)
    finally:
        proc.kill()
    assert proc.returncode == 0 and "removed" in out, err
    assert not (repo / "src").exists()
    assert f"{repo}/src/.git (config sets core.fsmonitor)" in err, err
    r = profiles.run()
    assert r.returncode == 125 and f"{repo}/src/.git" in r.stderr, r.stderr


def test_a_report_too_long_to_show_still_refuses_and_says_where_it_is(profiles, repo):
    """3000 long-named .git files bury one real plant: the next launch still refuses, shows
    how much more there is and where, and the plant is in that file."""
    profiles.add()
    long = "d" * 200
    shell_claude(profiles, f"""set -e
cd "{repo}"
mkdir -p bulk
i=0; while [ $i -lt 3000 ]; do mkdir -p bulk/{long}$i; echo x > bulk/{long}$i/.git; i=$((i+1)); done
mkdir -p zz && git -C zz init -q && git -C zz config core.fsmonitor evil
""")
    r = profiles.run(timeout=TIMEOUT * 4)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "and " in r.stderr and "more, listed in" in r.stderr
    shell_claude(profiles, "echo second; exit 0\n")
    r = profiles.run()
    assert r.returncode == 125, r.stderr[-2000:]
    assert "second" not in r.stdout
    assert "more bytes of this report" in r.stderr
    path = r.stderr.split("more bytes of this report: ")[1].split("\n")[0]
    assert f"{repo}/zz/.git (config sets core.fsmonitor)" in open(path).read()


@pytest.mark.parametrize("attack", ["duplicate", "deep", "large", "nul"])
def test_claude_json_that_two_parsers_read_differently_is_not_written_back(profiles, repo,
                                                                           attack):
    """An MCP server claude (JSON.parse) would start but cJSON would not see: the session
    writes its own copy; csandbox, reading it one way only, keeps it out of the host's
    file, says so, and the next launch refuses."""
    d = profiles.add()
    (d / ".claude.json").write_text('{"numStartups": 1}')
    server = '{"command": "touch /tmp/evil"}'
    if attack == "duplicate":
        body = '{"mcpServers": {"evil": ' + server + '}, "mcpServers": {}}'
    elif attack == "deep":
        body = '{"x": ' + "[" * 1100 + "]" * 1100 + ', "mcpServers": {"evil": ' + server + "}}"
    elif attack == "nul":
        body = '{"mcpServers\\u0000": {}, "mcpServers": {"evil": ' + server + "}}"
    if attack == "large":
        script = (f"{{ printf '{{\"pad\": \"'; head -c 40000000 /dev/zero | tr '\\\\0' a; "
                  f"printf '\", \"mcpServers\": {{\"evil\": {server}}}}}'; }} "
                  f"> '{CFG_IN}/.claude.json'\n")
    else:
        script = f"cat > '{CFG_IN}/.claude.json' <<'E'\n{body}\nE\n"
    shell_claude(profiles, script)
    r = profiles.run(timeout=TIMEOUT * 2)
    assert r.returncode == 0, r.stderr
    assert "claude's config read differently by two parsers" in r.stderr, r.stderr
    assert json.loads((d / ".claude.json").read_text()) == {"numStartups": 1}
    shell_claude(profiles, "exit 0\n")
    r = profiles.run()
    assert r.returncode == 125, r.stderr
    assert str(d / ".claude.json") in r.stderr


def test_the_session_cannot_replace_claude_json_with_a_link(profiles, repo):
    d = profiles.add()
    shell_claude(profiles, f"echo '{{}}' > '{repo}/cfg.json'; rm -f '{CFG_IN}/.claude.json' && "
                           f"echo removed; ln -s '{repo}/cfg.json' '{CFG_IN}/.claude.json' && "
                           "echo linked; exit 0\n")
    r = profiles.run()
    assert r.returncode == 0 and "removed" not in r.stdout and "linked" not in r.stdout, r.stdout
    assert (d / ".claude.json").is_file() and not (d / ".claude.json").is_symlink()


def test_an_mcp_server_added_waits_for_a_yes_and_the_rest_is_written_back(profiles, repo):
    """claude's own state in .claude.json goes back to the host's file; an MCP server the
    session added is kept out of it until the user accepts, then put in."""
    d = profiles.add()
    shell_claude(profiles, f"""cat > '{CFG_IN}/.claude.json' <<'E'
{{"numStartups": 3, "projects": {{"{repo}": {{"mcpServers": {{"x": {{"command": "evil"}}}},
 "hasTrustDialogAccepted": true}}}}}}
E
""")
    r = profiles.run()
    assert r.returncode == 0, r.stderr
    assert f"MCP server ({repo}) in {d}/.claude.json: x" in r.stderr, r.stderr
    assert '"command":"evil"' in r.stderr
    host = json.loads((d / ".claude.json").read_text())
    assert host["numStartups"] == 3 and host["projects"][str(repo)]["hasTrustDialogAccepted"]
    assert "mcpServers" not in host["projects"][str(repo)], host
    shell_claude(profiles, "exit 0\n")
    assert profiles.run().returncode == 125
    r = run_accepting(profiles)
    assert r.returncode == 0, r.stderr
    host = json.loads((d / ".claude.json").read_text())
    assert host["projects"][str(repo)]["mcpServers"] == {"x": {"command": "evil"}}
    assert host["numStartups"] == 3
    r = profiles.run()
    assert r.returncode == 0 and "MCP server" not in r.stderr, r.stderr


@pytest.mark.parametrize("layout", ["commondir", "linked-objects"])
def test_a_directory_git_takes_for_a_repository_by_its_own_rules_is_reported(profiles, repo,
                                                                           layout, tmp_path):
    """No .git anywhere: src/ is a git dir to git (HEAD with commondir, or HEAD, config and
    linked objects/refs), and host git in src runs the alias its config names."""
    profiles.add()
    mark = tmp_path / "pager-ran"
    if layout == "commondir":
        plant = f"""mkdir -p cd/objects cd/refs src
printf '[alias]\\n\\tst = !touch {mark}\\n' > cd/config
echo 'ref: refs/heads/main' > src/HEAD
echo ../cd > src/commondir"""
    else:
        plant = f"""mkdir -p store/objects store/refs src
echo 'ref: refs/heads/main' > src/HEAD
printf '[alias]\\n\\tst = !touch {mark}\\n' > src/config
ln -s ../store/objects src/objects; ln -s ../store/refs src/refs"""
    shell_claude(profiles, f'set -e\ncd "{repo}"\n{plant}\n')
    r = profiles.run()
    assert r.returncode == 0, r.stderr
    assert f"git repository that runs commands: {repo}/src" in r.stderr, r.stderr
    assert "alias.st" in r.stderr
    assert profiles.run().returncode == 125
    # The plant is real: git in src takes it for a repository (safe.bareRepository=all).
    subprocess.run(["git", "-c", "safe.bareRepository=all", "st"], cwd=str(repo / "src"),
                   env={"PATH": os.environ["PATH"], "HOME": str(tmp_path),
                        "GIT_CONFIG_NOSYSTEM": "1"}, capture_output=True, timeout=60)
    assert mark.exists()


def test_project_settings_mcp_json_and_the_scripts_they_name_anywhere_are_reported(profiles,
                                                                                  repo):
    profiles.add()
    (repo / ".claude").mkdir()
    (repo / ".claude" / "hooks").mkdir()
    (repo / ".claude" / "hooks" / "x.sh").write_text("#!/bin/sh\necho good\n")
    (repo / ".claude" / "settings.json").write_text(json.dumps({"hooks": {"Stop": [{"hooks": [
        {"type": "command", "command": '"$CLAUDE_PROJECT_DIR"/.claude/hooks/x.sh'},
        {"type": "command", "command": '"$CLAUDE_PROJECT_DIR"/.claude/hooks/y.sh'}]}]}}))
    shell_claude(profiles, f"""set -e
cd "{repo}"
echo evil > .claude/hooks/x.sh 2>/dev/null && echo "x writable" || true
echo evil > .claude/hooks/y.sh
mkdir -p sub/.claude deep/er
echo '{{"env": {{"X": "1"}}}}' > sub/.claude/settings.local.json
echo '{{"mcpServers": {{"s": {{"command": "evil"}}}}}}' > deep/er/.mcp.json
echo '{{"mcpServers": {{"r": {{"command": "evil"}}}}}}' > .mcp.json
""")
    r = profiles.run()
    assert r.returncode == 0, r.stderr
    assert "x writable" not in r.stdout, "a script the project's settings name is read-only"
    for line in (f"file claude runs: {repo}/.claude/hooks/y.sh",
                 f"claude project settings: {repo}/sub/.claude/settings.local.json",
                 f"project MCP servers (.mcp.json): {repo}/deep/er/.mcp.json",
                 f"project MCP servers (.mcp.json): {repo}/.mcp.json"):
        assert line in r.stderr, (line, r.stderr)


def test_a_report_in_a_tree_refuses_every_profile_there_even_on_the_host(profiles, repo,
                                                                         tmp_path):
    """The work tree is every profile's: a report left by one profile's session refuses the
    next launch of another (unmarked: a host launch) in that tree, and in a subdir of it."""
    profiles.add()
    profiles.add("other", sandbox=False)
    mark = tmp_path / "ran"
    shell_claude(profiles, f'set -e\ncd "{repo}"\nmkdir -p .claude\n'
                           f"echo '{{\"hooks\": {{\"Stop\": [{{\"hooks\": [{{\"type\": \"command\", "
                           f"\"command\": \"touch {mark}\"}}]}}]}}}}' > .claude/settings.json\n")
    assert profiles.run().returncode == 0
    shell_claude(profiles, f"touch {mark}\n")
    (repo / "deeper").mkdir()
    for cwd in (repo, repo / "deeper"):
        r = profiles.run("other", cwd=cwd)
        assert r.returncode == 125, r.stderr
        assert "claude on the host" in r.stderr and ".claude/settings.json" in r.stderr
    assert not mark.exists()
    # Elsewhere the other profile is not bound by this tree's report.
    elsewhere = profiles.home / "elsewhere"
    elsewhere.mkdir()
    assert profiles.run("other", cwd=elsewhere).returncode == 0


def test_a_linked_marker_removed_inside_refuses_the_next_launch(profiles, repo):
    """A .sandbox that is a link (GNU stow, home-manager) is not pinned: removing it from
    inside is judged a change of the launch configuration, so the next launch does not run
    on the host unannounced."""
    d = profiles.add(sandbox=False)
    dot = profiles.home / "dotfiles-sandbox"
    dot.touch()
    (d / ".sandbox").symlink_to(dot)
    shell_claude(profiles, f'rm -f "{CFG_IN}/.sandbox"; echo removed\n')
    r = profiles.run()
    assert r.returncode == 0 and "removed" in r.stdout, r.stderr
    assert f"launch configuration changed: {d}/.sandbox" in r.stderr, r.stderr
    r = profiles.run()
    assert r.returncode == 125, r.stderr
    assert "claude on the host" in r.stderr


def test_a_setuid_copy_of_a_shell_cannot_be_left_in_the_tree(profiles, repo):
    # The session's seccomp filter refuses the mode (test_host_trust_syscalls.py has every
    # call); the journal's report of such a file is the second line of defence.
    profiles.add()
    shell_claude(profiles, f'cp /bin/sh "{repo}/tool" && chmod 4755 "{repo}/tool" || '
                           'echo refused\n')
    r = profiles.run()
    assert r.returncode == 0 and "refused" in r.stdout, r.stderr
    assert not os.stat(repo / "tool").st_mode & 0o6000


def test_a_config_read_as_git_reads_it_hides_no_key(profiles, repo, tmp_path):
    """A backslash at the end of a comment does not continue the line for git: the key on
    the next line is one git reads, and the judge reads it too."""
    profiles.add()
    mark = tmp_path / "fsmonitor-ran"
    shell_claude(profiles, f"""set -e
cd "{repo}"
git init -q vendor
printf '[core]\\n\\tbare = false # \\\\\\n\\tfsmonitor = touch {mark}\\n' >> vendor/.git/config
""")
    r = profiles.run()
    assert r.returncode == 0, r.stderr
    assert (f"git repository that runs commands: {repo}/vendor/.git "
            "(config sets core.fsmonitor)") in r.stderr, r.stderr
    assert profiles.run().returncode == 125
    host_git(repo / "vendor", "status")
    assert mark.exists(), "the plant is real: the host's git status runs it"


def test_a_repository_inside_what_looks_like_a_git_dir_is_reported(profiles, repo, tmp_path):
    """fake/ has HEAD, objects and refs (git refuses its HEAD); fake/inner/.git is a
    repository git uses from fake/inner. The judge looks past the first git dir on a path."""
    profiles.add()
    mark = tmp_path / "fsmonitor-ran"
    shell_claude(profiles, f"""set -e
cd "{repo}"
mkdir -p fake/objects fake/refs
echo garbage > fake/HEAD
git init -q fake/inner
git -C fake/inner config core.fsmonitor "touch {mark}"
""")
    r = profiles.run()
    assert r.returncode == 0, r.stderr
    assert (f"git repository that runs commands: {repo}/fake/inner/.git "
            "(config sets core.fsmonitor)") in r.stderr, r.stderr
    host_git(repo / "fake" / "inner", "status")
    assert mark.exists(), "the plant is real: the host's git status runs it"


def test_a_common_dir_without_head_armed_in_a_later_session_is_reported(profiles, repo,
                                                                        tmp_path):
    """A linked worktree's git dir names a common dir by its commondir; the common dir needs
    no HEAD. Made inert in one session, it is armed in the next: git in w reads its config."""
    profiles.add()
    mark = tmp_path / "fsmonitor-ran"
    shell_claude(profiles, f"""set -e
cd "{repo}"
git init -q --bare common && rm common/HEAD
mkdir -p w/gd
echo 'ref: refs/heads/main' > w/gd/HEAD
echo ../../common > w/gd/commondir
echo 'gitdir: gd' > w/.git
""")
    r = profiles.run()
    assert r.returncode == 0 and "runs commands" not in r.stderr, r.stderr
    shell_claude(profiles, f'git config -f "{repo}/common/config" core.fsmonitor "touch {mark}"\n')
    r = profiles.run()
    assert r.returncode == 0, r.stderr
    assert (f"git repository that runs commands: {repo}/common "
            "(config sets core.fsmonitor)") in r.stderr, r.stderr
    host_git(repo / "w", "status")
    assert mark.exists(), "the plant is real: the host's git status in w runs it"


def test_core_worktree_sending_checkouts_elsewhere_is_reported(profiles, repo):
    """core.worktree runs nothing, but the host's checkout in that repository writes where it
    points (here the user's home): it is off the inert list."""
    profiles.add()
    shell_claude(profiles, f"""set -e
cd "{repo}"
git init -q vendor
git -C vendor config core.worktree "{profiles.home}"
""")
    r = profiles.run()
    assert r.returncode == 0, r.stderr
    assert (f"git repository that runs commands: {repo}/vendor/.git "
            "(config sets core.worktree)") in r.stderr, r.stderr


def test_claudes_own_state_and_inert_repositories_are_not_findings(profiles, repo):
    """What claude writes in every session (state, transcripts, plugin store, its config's
    other keys) and a repository cloned or made inside (git writes nothing that runs) are
    not findings: the second and third launches start."""
    d = profiles.add()
    shell_claude(profiles, f"""set -e
c="{CFG_IN}"
mkdir -p "$c/plugins/store" "$c/plugins/marketplaces" "$c/projects/p" "$c/sessions" \
  "$c/backups" "$c/telemetry"
echo '{{"usage-rows-queued": "x"}}' > "$c/plugins/store/cc-plugin-agents-md_builtin-1.json"
echo '{{}}' > "$c/projects/p/s.jsonl"; echo x > "$c/telemetry/t.json"; date > "$c/.last-cleanup"
cp "$c/.claude.json" "$c/backups/.claude.json.backup.1" 2>/dev/null || true
echo '{{"numStartups": 2, "projects": {{"{repo}": {{"hasTrustDialogAccepted": true}}}}}}' \
  > "$c/.claude.json"
cd "{repo}"
git init -q made && git clone -q "{repo}" cloned && git -C made commit -q --allow-empty -m x \
  -c user.name=a -c user.email=b 2>/dev/null || true
echo done
""")
    for _ in range(3):
        r = profiles.run()
        assert r.returncode == 0 and "done" in r.stdout, r.stderr
        assert "changed what claude or git runs" not in r.stderr, r.stderr
    assert (d / "plugins" / "store").is_dir()
