"""What the host runs after a session: the profile's scripts are read-only inside, what
stays writable (nested repositories, submodule git dirs, gitlinks, files the settings run)
is reported after the session and the next launch refuses until the user accepts it,
csandbox's own git runs nothing a repository's config names, and csandbox's own variables
win over the profile's .env. Each attack is a program run inside as the fake claude."""
import json
import os
import subprocess

from conftest import CSANDBOX, TIMEOUT
from test_run import CFG_IN, HOME_IN, Profiles, git, shell_claude  # noqa: F401
import pytest


@pytest.fixture
def profiles(tmp_path):
    return Profiles(tmp_path)


@pytest.fixture
def repo(profiles):
    git("init", "-q", cwd=profiles.project)
    git("commit", "-q", "--allow-empty", "-m", "start", cwd=profiles.project)
    return profiles.project


def host_git(repo, *args):
    """The user's own git on the host, after the session (its exit status is not the point)."""
    env = {"PATH": os.environ["PATH"], "HOME": str(repo), "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", *args], cwd=str(repo), env=env, capture_output=True, timeout=60)


def run_accepting(profiles, **kw):
    return subprocess.run([CSANDBOX, "run", "--accept-changes", "work"],
                          cwd=str(profiles.project), env=profiles.env(), capture_output=True,
                          text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL, **kw)


# --- read-only inside --------------------------------------------------------------------

def test_profile_scripts_and_the_files_settings_run_are_read_only_inside(profiles, repo):
    d = profiles.add(settings=json.dumps({
        "hooks": {"PreToolUse": [{"matcher": "", "hooks": [
            {"type": "command", "command": '"$CLAUDE_CONFIG_DIR"/scripts/run.sh --fast'}]}]},
        "statusLine": {"type": "command", "command": "~/.claude-profiles/work/statusline.sh"},
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


def test_a_session_whose_csandbox_was_killed_refuses_the_next_launch(profiles, repo):
    """Nobody lived to compare: the record written before the launch stands for the report."""
    profiles.add()
    shell_claude(profiles, 'echo started; exec sleep 60\n')
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
    r = profiles.run()
    assert r.returncode == 125, r.stderr
    assert "ended before csandbox could check" in r.stderr and str(repo) in r.stderr
    assert run_accepting(profiles).returncode == 0
    assert profiles.run().returncode == 0


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
    assert f"nested git repository: {repo}/src/.git" in r.stderr, r.stderr
    assert f"gitlink in the index: {repo}/src" in r.stderr
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
    assert "nested git repository" in r.stderr
    r = profiles.run()
    assert r.returncode == 0, r.stderr
    assert "nested git repository" not in r.stderr, "accepted, and not new since"
    assert not mark.exists(), "csandbox's own git ran the fsmonitor"
    # The attack is real: the host's plain git status at the root runs it.
    host_git(repo, "status")
    assert mark.exists()


def test_new_submodule_and_worktree_git_dirs_and_gitmodules_are_reported(profiles, repo):
    profiles.add()
    shell_claude(profiles, f"""set -e
cd "{repo}"
mkdir -p .git/modules/lib .git/worktrees/w
git init -q --bare .git/modules/lib
printf '[submodule "lib"]\\n\\tpath = lib\\n\\turl = ./lib\\n' > .gitmodules
printf '[core]\\n\\tfsmonitor = touch /tmp/x\\n' > .git/config.worktree
printf '[core]\\n\\tfsmonitor = touch /tmp/x\\n' > .git/worktrees/w/config.worktree
""")
    r = profiles.run()
    assert r.returncode == 0, r.stderr
    assert f"submodule git dir: {repo}/.git/modules/lib" in r.stderr, r.stderr
    assert f"git .gitmodules: {repo}/.gitmodules" in r.stderr
    assert f"git dir: {repo}/.git\n" in r.stderr
    assert f"linked worktree git dir: {repo}/.git/worktrees/w" in r.stderr


def test_gitlink_added_in_a_linked_worktree_is_reported(profiles, repo):
    profiles.add()
    linked = profiles.home / "src" / "linked"
    git("worktree", "add", "-q", str(linked), cwd=repo)
    shell_claude(profiles, f'cd "{linked}" && git update-index --add --cacheinfo '
                           '160000,1234567890123456789012345678901234567890,vendored\n')
    r = profiles.run(cwd=linked)
    assert r.returncode == 0, r.stderr
    assert f"gitlink in the index: {linked}/vendored" in r.stderr, r.stderr


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
    assert f"git index that is no plain file, in: {repo}" in r.stderr, r.stderr


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
    assert f"file the host runs: {repo}/.claude/settings.json" in r.stderr, r.stderr


def test_changed_nested_repository_config_and_a_new_bare_repository_are_reported(profiles, repo):
    profiles.add()
    (repo / "vendor").mkdir()
    git("init", "-q", cwd=repo / "vendor")
    r = profiles.run()
    assert r.returncode == 0 and "nested git repository" not in r.stderr, r.stderr
    shell_claude(profiles, f'git -C "{repo}/vendor" config core.hooksPath /tmp\n'
                           f'git init -q --bare "{repo}/fixtures/bare.git"\n')
    r = profiles.run()
    assert r.returncode == 0, r.stderr
    assert f"nested git repository: {repo}/vendor/.git" in r.stderr, r.stderr
    assert f"bare git repository: {repo}/fixtures/bare.git" in r.stderr


def test_nothing_reported_or_refused_after_an_ordinary_session(profiles, repo):
    profiles.add()
    shell_claude(profiles, f'cd "{repo}" && date +%s%N > f && git add f && '
                           'git -c user.name=a -c user.email=b commit -qm f && echo committed\n')
    for _ in range(2):
        r = profiles.run()
        assert r.returncode == 0, r.stderr
        assert "committed" in r.stdout, r.stderr
        assert "added or changed" not in r.stderr


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
    assert "added or changed" not in r.stderr
    r = profiles.run()
    assert r.returncode == 0, r.stderr
    shell_claude(profiles, f'echo "#!/bin/sh" > "{CFG_IN}/plugins/marketplaces/m/hook.sh"; true\n')
    # plugins/ now exists: read-only inside, so the write fails and nothing changes.
    r = profiles.run()
    assert r.returncode == 0 and "added or changed" not in r.stderr, r.stderr
    assert not (profiles.base / "work" / "plugins" / "marketplaces" / "m" / "hook.sh").exists()


def test_a_plugin_file_made_in_a_new_plugins_tree_is_reported(profiles):
    profiles.add()
    shell_claude(profiles, f'mkdir -p "{CFG_IN}/plugins/m" && echo x > "{CFG_IN}/plugins/m/f"\n')
    r = profiles.run()
    assert r.returncode == 0, r.stderr
    assert "added or changed" in r.stderr and "plugins" in r.stderr
    assert profiles.run().returncode == 125
