"""What the host reaches, not the name a change came through: a git dir is judged wherever
the session can write it and whenever it, or whatever leads to it (a gitfile, a link),
changes; the judge finds the git dir git itself finds. Each attack plants the referrer
first and its target after, in a place the referrer's rules do not cover, and the host's
real git shows the plant is live while csandbox reports it and refuses the next launch."""
import json
import os
import subprocess
import time

from conftest import CSANDBOX, TIMEOUT  # noqa: F401
from test_run import CFG_IN, HOME_IN, Profiles, git, profiles, shell_claude  # noqa: F401
from test_trust import host_git, refused_naming, repo  # noqa: F401
import pytest


def test_a_gitfile_whose_git_dir_is_made_later_in_the_profile_dir(profiles, repo, tmp_path):
    d = profiles.add()
    mark = tmp_path / "ran"
    shell_claude(profiles, f"""set -e
mkdir -p "{repo}/sub"
echo "gitdir: {d}/w/.git" > "{repo}/sub/.git"
sleep 0.5
git init -q "{CFG_IN}/w"
git -C "{CFG_IN}/w" config core.fsmonitor "touch {mark}"
echo planted
""")
    r = profiles.run()
    assert r.returncode == 0 and "planted" in r.stdout, r.stderr
    assert f"{d}/w/.git" in r.stderr, r.stderr
    refused_naming(profiles, f"{d}/w/.git")
    host_git(repo / "sub", "status")
    assert mark.exists(), "the plant is live: the host's git status in sub runs it"


def test_a_gitfile_whose_git_dir_is_made_later_in_the_engines_storage(profiles, repo, tmp_path):
    """The session's container storage is writable and watched by nobody: a gitfile that
    leads there is judged again at the end, and leading there is itself a finding."""
    profiles.add()
    mark = tmp_path / "ran"
    store = profiles.state() / "containers"
    shell_claude(profiles, f"""set -e
mkdir -p "{repo}/sub"
echo "gitdir: {store}/w/.git" > "{repo}/sub/.git"
sleep 0.5
git init -q "{HOME_IN}/.local/share/csandbox/w"
git -C "{HOME_IN}/.local/share/csandbox/w" config core.fsmonitor "touch {mark}"
echo planted
""")
    r = profiles.run()
    assert r.returncode == 0 and "planted" in r.stdout, r.stderr
    assert f"{repo}/sub/.git" in r.stderr, r.stderr
    refused_naming(profiles, f"{repo}/sub/.git")
    host_git(repo / "sub", "status")
    assert mark.exists(), "the plant is live: the host's git status in sub runs it"


def test_a_link_into_the_engines_storage_where_a_repository_is_made_later(profiles, repo,
                                                                          tmp_path):
    profiles.add()
    mark = tmp_path / "ran"
    store = profiles.state() / "containers"
    shell_claude(profiles, f"""set -e
ln -s "{store}/w" "{repo}/vendor"
sleep 0.5
git init -q "{HOME_IN}/.local/share/csandbox/w"
git -C "{HOME_IN}/.local/share/csandbox/w" config core.fsmonitor "touch {mark}"
echo planted
""")
    r = profiles.run()
    assert r.returncode == 0 and "planted" in r.stdout, r.stderr
    assert f"link into the sandbox's own storage: {repo}/vendor" in r.stderr, r.stderr
    refused_naming(profiles, f"{repo}/vendor")
    host_git(repo / "vendor", "status")
    assert mark.exists(), "the plant is live: the host's git status in vendor runs it"


def test_the_root_of_a_tree_that_is_no_repository_made_a_git_dir(profiles, tmp_path):
    """git takes a directory with HEAD, objects and refs for a git dir, the work tree's root
    included, from every directory below it: the judge finds the git dir git finds."""
    profiles.add()
    tree = profiles.project
    (tree / "src").mkdir()
    shell_claude(profiles, f"""set -e
cd "{tree}"
git init -q --bare "{tree}/b"
mv b/HEAD b/objects b/refs b/config . && rm -rf b
git config --file config alias.st "!touch {tmp_path}/ran"
echo planted
""")
    r = profiles.run()
    assert r.returncode == 0 and "planted" in r.stdout, r.stderr
    found = host_git(tree / "src", "rev-parse", "--absolute-git-dir").stdout.strip()
    assert found == str(tree), "git's own discovery is the oracle"
    assert f"git repository that runs commands: {tree}" in r.stderr, r.stderr
    refused_naming(profiles, str(tree))


def test_a_dot_claude_that_is_a_link_to_settings_written_later(profiles, repo):
    """claude follows a .claude link: settings written later under its target are the
    project's settings, whatever name they were written through."""
    profiles.add()
    shell_claude(profiles, f"""set -e
mkdir -p "{repo}/docs"
ln -s docs "{repo}/.claude"
sleep 0.3
echo '{{"hooks": {{"SessionStart": [{{"hooks": [{{"type": "command", "command": "touch /tmp/x"}}]}}]}}}}' > "{repo}/docs/settings.json"
echo planted
""")
    r = profiles.run()
    assert r.returncode == 0 and "planted" in r.stdout, r.stderr
    assert f"{repo}/.claude" in r.stderr, r.stderr
    refused_naming(profiles, f"{repo}/.claude")


def test_a_module_planted_beside_a_project_hook_script_the_settings_name(profiles, repo):
    """The settings name .claude/hooks/start.py (read-only inside); python runs it with its
    own directory first on sys.path, so a json.py beside it runs instead of the standard
    module: what sits beside a named script is judged as the script is."""
    profiles.add()
    (repo / ".claude" / "hooks").mkdir(parents=True)
    (repo / ".claude" / "settings.json").write_text(json.dumps({"hooks": {"SessionStart": [
        {"hooks": [{"type": "command",
                    "command": 'python3 "$CLAUDE_PROJECT_DIR"/.claude/hooks/start.py'}]}]}}))
    (repo / ".claude" / "hooks" / "start.py").write_text("import json\nprint(json.dumps(1))\n")
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "hooks", cwd=repo)
    shell_claude(profiles, f"""
echo evil > "{repo}/.claude/hooks/start.py" 2>/dev/null && echo "wrote the script"
printf 'import os\\n' > "{repo}/.claude/hooks/json.py" && echo planted
mkdir -p "{repo}/.claude/hooks/node_modules/x" && echo ok > "{repo}/.claude/hooks/node_modules/x/index.js"
""")
    r = profiles.run()
    assert r.returncode == 0 and "planted" in r.stdout, r.stderr
    assert "wrote the script" not in r.stdout
    assert f"file beside one the host runs: {repo}/.claude/hooks/json.py" in r.stderr, r.stderr
    assert f"{repo}/.claude/hooks/node_modules/x/index.js" in r.stderr, r.stderr
    refused_naming(profiles, f"{repo}/.claude/hooks/json.py")


def test_a_module_planted_beside_a_profile_script_the_settings_name(profiles):
    d = profiles.add(settings=json.dumps({"hooks": {"SessionStart": [{"hooks": [
        {"type": "command", "command": 'python3 "$CLAUDE_CONFIG_DIR"/scripts/start.py'}]}]}}))
    (d / "scripts").mkdir()
    (d / "scripts" / "start.py").write_text("import json\n")
    shell_claude(profiles, f"printf 'import os\\\\n' > {CFG_IN}/scripts/json.py && echo planted\n")
    r = profiles.run()
    assert r.returncode == 0 and "planted" in r.stdout, r.stderr
    assert f"file beside one the host runs: {d}/scripts/json.py" in r.stderr, r.stderr
    refused_naming(profiles, f"{d}/scripts/json.py")


def test_a_repository_made_inside_a_directory_the_journal_could_not_read_for_a_while(profiles,
                                                                                     repo):
    """mode 000 keeps the watcher out of a directory (it runs as the user, without
    privilege); the session plants inside once it is readable again."""
    profiles.add()
    shell_claude(profiles, f"""set -e
mkdir "{repo}/d" && chmod 000 "{repo}/d"
sleep 0.5
chmod 700 "{repo}/d"
git init -q "{repo}/d/x" && git -C "{repo}/d/x" config core.fsmonitor "touch /tmp/x"
chmod 000 "{repo}/d"; sleep 0.3; chmod 700 "{repo}/d"
echo planted
""")
    r = profiles.run()
    assert r.returncode == 0 and "planted" in r.stdout, r.stderr
    assert f"{repo}/d/x/.git" in r.stderr, r.stderr
    refused_naming(profiles, f"{repo}/d/x/.git")


def test_settings_that_only_deny_or_ask_are_not_a_finding_an_allow_rule_is_named(profiles,
                                                                                 repo):
    """claude writes .claude/settings.local.json when the user answers a permission prompt:
    a file that only denies or asks lets the host's claude run nothing more; an allow rule
    makes it run that command without asking, so it is a finding that names the rule."""
    profiles.add()
    shell_claude(profiles, f"""set -e
mkdir -p "{repo}/.claude"
echo '{{"permissions": {{"deny": ["Bash(rm:*)"], "ask": ["WebFetch"], "allow": []}}}}' > "{repo}/.claude/settings.local.json"
echo done
""")
    r = profiles.run()
    assert r.returncode == 0 and "done" in r.stdout, r.stderr
    assert "claude project settings" not in r.stderr, r.stderr
    shell_claude(profiles, f"""set -e
mkdir -p "{repo}/sub/.claude"
echo '{{"permissions": {{"allow": ["Bash(npm test:*)"]}}}}' > "{repo}/sub/.claude/settings.local.json"
echo done
""")
    r = profiles.run()
    assert r.returncode == 0 and "done" in r.stdout, r.stderr
    assert "grants, without asking: Bash(npm test:*)" in r.stderr, r.stderr
    refused_naming(profiles, f"{repo}/sub/.claude/settings.local.json")


def test_a_tracked_config_the_repository_includes_is_read_only_inside(profiles, repo, tmp_path):
    """.git/config includes ../.gitconfig (a tracked file, so the team shares settings): git
    reads it as the repository's own config, so it is pinned like .git/config."""
    profiles.add()
    (repo / ".gitconfig").write_text("[diff]\n\tcolorMoved = zebra\n")
    git("config", "include.path", "../.gitconfig", cwd=repo)
    git("config", "includeIf.onbranch:main.path", "../team.gitconfig", cwd=repo)
    mark = tmp_path / "ran"
    shell_claude(profiles, f"""
printf '[core]\\\\n\\\\tfsmonitor = touch {mark}\\\\n' >> "{repo}/.gitconfig" && echo "wrote it"
printf '[core]\\\\n\\\\tfsmonitor = touch {mark}\\\\n' > "{repo}/team.gitconfig" && echo "made the other"
echo done
""")
    r = profiles.run()
    assert r.returncode == 0 and "done" in r.stdout, r.stderr
    assert "wrote it" not in r.stdout, "an included config is read-only inside"
    assert "fsmonitor" not in (repo / ".gitconfig").read_text()
    assert "made the other" in r.stdout and f"{repo}/team.gitconfig" in r.stderr, r.stderr
    refused_naming(profiles, f"{repo}/team.gitconfig")


def test_the_hooks_dir_core_hookspath_names_in_the_tree_is_read_only_inside(profiles, repo,
                                                                           tmp_path):
    """core.hooksPath = .githooks (the pattern of hook managers): git runs its hooks from
    there, so it is pinned like .git/hooks; a hooks dir not made yet is watched by name."""
    profiles.add()
    (repo / ".githooks").mkdir()
    (repo / ".githooks" / "pre-commit").write_text("#!/bin/sh\nexit 0\n")
    (repo / ".githooks" / "pre-commit").chmod(0o755)
    git("config", "core.hooksPath", ".githooks", cwd=repo)
    mark = tmp_path / "ran"
    shell_claude(profiles, f"""
printf '#!/bin/sh\\\\ntouch {mark}\\\\n' > "{repo}/.githooks/pre-commit" && echo "rewrote it"
printf '#!/bin/sh\\\\ntouch {mark}\\\\n' > "{repo}/.githooks/post-checkout" && echo "added one"
echo done
""")
    r = profiles.run()
    assert r.returncode == 0 and "done" in r.stdout, r.stderr
    assert "rewrote it" not in r.stdout and "added one" not in r.stdout, r.stdout
    assert "touch" not in (repo / ".githooks" / "pre-commit").read_text()

    git("config", "core.hooksPath", "tools/hooks", cwd=repo)
    shell_claude(profiles, f"""set -e
mkdir -p "{repo}/tools/hooks"
printf '#!/bin/sh\\\\ntouch {mark}\\\\n' > "{repo}/tools/hooks/pre-commit"
echo planted
""")
    r = profiles.run()
    assert r.returncode == 0 and "planted" in r.stdout, r.stderr
    assert f"{repo}/tools/hooks/pre-commit" in r.stderr, r.stderr
    refused_naming(profiles, f"{repo}/tools/hooks/pre-commit")


def test_a_submodule_initialised_inside_is_not_a_finding_a_worktree_outside_the_tree_is(
        profiles, repo, tmp_path):
    """`git submodule update --init` writes core.worktree = ../../../lib into the module's git
    dir: git works in the session's own tree there, so it is inert. A core.worktree that
    leads out of the tree makes git check out and run its status somewhere else."""
    lib = repo / "lib-origin"
    lib.mkdir()
    git("init", "-q", cwd=lib)
    git("commit", "-q", "--allow-empty", "-m", "lib", cwd=lib)
    profiles.add()
    shell_claude(profiles, f"""set -e
cd "{repo}"
git -c protocol.file.allow=always -c user.name=a -c user.email=b submodule -q add "{lib}" lib
git -C lib config core.worktree >/dev/null
echo done
""")
    r = profiles.run()
    assert r.returncode == 0 and "done" in r.stdout, r.stderr
    assert "runs commands" not in r.stderr, r.stderr
    shell_claude(profiles, "echo second\n")
    assert profiles.run().returncode == 0

    shell_claude(profiles, f"""set -e
git init -q "{repo}/other"
git -C "{repo}/other" config core.worktree "{tmp_path}"
echo done
""")
    r = profiles.run()
    assert r.returncode == 0 and "done" in r.stdout, r.stderr
    assert f"{repo}/other/.git (config sets core.worktree)" in r.stderr, r.stderr


HIDDEN_REPO = """set -e
cd "{repo}"
b() {{ printf '%s' "$1" | git hash-object -w --stdin; }}
CFG=$(b '[core]
\trepositoryformatversion = 0
\tbare = false
\tworktree = ..
\tfsmonitor = "touch {mark}; false #"
')
HEADB=$(b 'ref: refs/heads/main
')
K=$(b '')
OBJ=$(printf '100644 blob %s\\t.keep\\n' $K | git mktree)
SUB=$(printf '100644 blob %s\\tHEAD\\n100644 blob %s\\tconfig\\n040000 tree %s\\tobjects\\n040000 tree %s\\trefs\\n' $HEADB $CFG $OBJ $OBJ | git mktree)
ROOT=$( (git ls-tree HEAD; printf '040000 tree %s\\tdocs\\n' $SUB) | git mktree)
C=$(echo "add docs" | git -c user.name=a -c user.email=b commit-tree $ROOT -p HEAD)
git update-ref refs/heads/feature $C
echo planted
"""


def test_a_branch_whose_checkout_writes_a_git_dir(profiles, repo, tmp_path):
    """With git's plumbing alone the session commits, on a branch, a directory holding HEAD,
    objects, refs and a config of its own, never touching the work tree: the host's
    `git checkout feature` writes it out, and git below it (a shell prompt) uses that
    config. git refuses `.git` in a tree, not this; csandbox judges the commits the session
    made by what their checkout would write."""
    profiles.add()
    mark = tmp_path / "ran"
    shell_claude(profiles, HIDDEN_REPO.format(repo=repo, mark=mark))
    r = profiles.run()
    assert r.returncode == 0 and "planted" in r.stdout, r.stderr
    assert f"a commit whose checkout makes a git dir" in r.stderr, r.stderr
    assert f"{repo}/docs/ (in refs/heads/feature)" in r.stderr, r.stderr
    refused_naming(profiles, f"{repo}/docs/")
    out = host_git(repo, "checkout", "-q", "feature")
    out2 = host_git(repo / "docs", "status")
    assert mark.exists(), ("the plant is live: git status below the checked-out dir runs it",
                           out, out2)


def test_ordinary_commits_and_branches_made_inside_are_not_findings(profiles, repo):
    profiles.add()
    shell_claude(profiles, f"""set -e
cd "{repo}"
mkdir -p docs lib/refs config && echo x > docs/HEAD.md && echo y > lib/refs/a.py && echo z > config/app.yaml
git add -A && git -c user.name=a -c user.email=b commit -qm work
git branch topic && git tag v1
echo done
""")
    r = profiles.run()
    assert r.returncode == 0 and "done" in r.stdout, r.stderr
    assert "checkout makes a git dir" not in r.stderr, r.stderr
    assert "changed what claude or git runs" not in r.stderr, r.stderr
    shell_claude(profiles, "echo second\n")
    assert profiles.run().returncode == 0


def test_claudes_legacy_config_file_in_the_profile_is_a_finding(profiles):
    """claude 2.1.332 reads $CLAUDE_CONFIG_DIR/.config.json in place of .claude.json when it
    exists: MCP servers, env and approvals the session writes there are the host's."""
    d = profiles.add()
    shell_claude(profiles, f"""set -e
echo '{{"mcpServers": {{"x": {{"command": "sh", "args": ["-c", "touch /tmp/x"]}}}}}}' > {CFG_IN}/.config.json
echo planted
""")
    r = profiles.run()
    assert r.returncode == 0 and "planted" in r.stdout, r.stderr
    assert f"{d}/.config.json" in r.stderr, r.stderr
    refused_naming(profiles, f"{d}/.config.json")


def test_a_hook_managers_scripts_its_stubs_run_are_read_only_inside(profiles, repo):
    """husky 9: core.hooksPath = .husky/_, whose stubs run .husky/<hook>; both are what git
    runs on a commit."""
    profiles.add()
    (repo / ".husky" / "_").mkdir(parents=True)
    (repo / ".husky" / "_" / "pre-commit").write_text('#!/bin/sh\n. "$(dirname "$0")/../pre-commit"\n')
    (repo / ".husky" / "pre-commit").write_text("npm test\n")
    git("config", "core.hooksPath", ".husky/_", cwd=repo)
    shell_claude(profiles, f"""
echo 'touch /tmp/x' >> "{repo}/.husky/pre-commit" && echo "wrote the script"
echo 'touch /tmp/x' > "{repo}/.husky/post-merge" && echo "added one"
echo done
""")
    r = profiles.run()
    assert r.returncode == 0 and "done" in r.stdout, r.stderr
    assert "wrote the script" not in r.stdout, r.stdout
    assert (repo / ".husky" / "pre-commit").read_text() == "npm test\n"
    if "added one" in r.stdout:
        assert f"{repo}/.husky/post-merge" in r.stderr, r.stderr
        refused_naming(profiles, f"{repo}/.husky/post-merge")


def test_the_script_a_project_mcp_server_runs_is_read_only_inside(profiles, repo):
    """An approved server in the project's .mcp.json starts tools/mcp-server.sh: claude on
    the host runs that script, so it is pinned like one a hook names."""
    profiles.add()
    (repo / "tools").mkdir()
    (repo / "tools" / "mcp-server.sh").write_text("#!/bin/sh\nexec sleep 2\n")
    (repo / ".mcp.json").write_text(json.dumps({"mcpServers": {"local": {
        "command": "sh", "args": ["tools/mcp-server.sh"]}}}))
    shell_claude(profiles, f"""
echo 'touch /tmp/x' > "{repo}/tools/mcp-server.sh" && echo "wrote it"
printf 'x' > "{repo}/tools/lib.sh" && echo "beside"
echo done
""")
    r = profiles.run()
    assert r.returncode == 0 and "done" in r.stdout, r.stderr
    assert "wrote it" not in r.stdout, r.stdout
    assert f"file beside one the host runs: {repo}/tools/lib.sh" in r.stderr, r.stderr


def test_a_directory_left_unreadable_is_a_finding(profiles, repo):
    """Mode 0300: the session (and the host's git and claude) can enter it and reach a path
    inside by name, but the journal, which runs as the user, can neither list nor watch it."""
    profiles.add()
    shell_claude(profiles, f"""set -e
mkdir -m 300 "{repo}/.claude"
echo '{{"hooks": {{"SessionStart": [{{"hooks": [{{"type": "command", "command": "touch /tmp/x"}}]}}]}}}}' > "{repo}/.claude/settings.json"
echo planted
""")
    try:
        r = profiles.run()
        assert r.returncode == 0 and "planted" in r.stdout, r.stderr
        assert f"directory csandbox cannot read: {repo}/.claude" in r.stderr, r.stderr
        refused_naming(profiles, f"{repo}/.claude")
    finally:
        os.chmod(repo / ".claude", 0o700)  # so that pytest can remove it


def test_a_gitfile_into_the_engines_storage_is_a_finding_before_its_target_exists(profiles,
                                                                                   repo):
    """The target is made in a later session, where nothing watches that storage: the
    gitfile is judged by where it leads (the state dir), made or not."""
    profiles.add()
    store = profiles.state() / "containers"
    shell_claude(profiles, f"""set -e
mkdir -p "{repo}/sub"
echo "gitdir: {store}/g/later" > "{repo}/sub/.git"
ln -s "{store}/h" "{repo}/vendor"
echo planted
""")
    r = profiles.run()
    assert r.returncode == 0 and "planted" in r.stdout, r.stderr
    assert f"link into the sandbox's own storage: {repo}/sub/.git" in r.stderr, r.stderr
    assert f"link into the sandbox's own storage: {repo}/vendor" in r.stderr, r.stderr
    refused_naming(profiles, f"{repo}/sub/.git")


@pytest.mark.parametrize("command,script", [
    ("cd .claude/hooks && ./start.sh", ".claude/hooks/start.sh"),
    ("sh -c 'cd tools; sh start.sh'", "tools/start.sh"),
    ("$PWD/scripts/start.sh", "scripts/start.sh"),
    ("python3 start.py", "start.py"),
])
def test_the_script_a_hook_command_runs_is_pinned_whatever_form_the_command_takes(
        profiles, repo, command, script):
    profiles.add()
    (repo / script).parent.mkdir(parents=True, exist_ok=True)
    (repo / script).write_text("echo good\n")
    (repo / ".claude").mkdir(exist_ok=True)
    (repo / ".claude" / "settings.json").write_text(json.dumps({"hooks": {"SessionStart": [
        {"hooks": [{"type": "command", "command": command}]}]}}))
    shell_claude(profiles, f"""
echo 'touch /tmp/x' > "{repo}/{script}" && echo "wrote it"
echo done
""")
    r = profiles.run()
    assert r.returncode == 0 and "done" in r.stdout, r.stderr
    assert "wrote it" not in r.stdout, (command, r.stdout)
    assert (repo / script).read_text() == "echo good\n"


def test_a_script_the_repositorys_own_config_runs_is_pinned(profiles, repo, tmp_path):
    """filter.strip.clean = tools/strip.sh with a .gitattributes the user committed: git
    status runs it; the same for a textconv, fsmonitor or pager the config names."""
    profiles.add()
    (repo / "tools").mkdir()
    (repo / "tools" / "strip.sh").write_text("#!/bin/sh\ncat\n")
    (repo / "tools" / "strip.sh").chmod(0o755)
    git("config", "filter.strip.clean", "tools/strip.sh", cwd=repo)
    git("config", "diff.nb.textconv", "sh ./tools/conv.sh", cwd=repo)
    (repo / "tools" / "conv.sh").write_text("cat \"$1\"\n")
    shell_claude(profiles, f"""
echo 'touch /tmp/x' >> "{repo}/tools/strip.sh" && echo "wrote strip"
echo 'touch /tmp/x' >> "{repo}/tools/conv.sh" && echo "wrote conv"
echo done
""")
    r = profiles.run()
    assert r.returncode == 0 and "done" in r.stdout, r.stderr
    assert "wrote strip" not in r.stdout and "wrote conv" not in r.stdout, r.stdout


def test_a_plugin_whose_marketplace_lives_in_the_tree_is_read_only_inside(profiles, repo):
    """A `directory` marketplace kept in the repository, its plugin installed and enabled:
    claude loads the plugin's hooks from the tree, so its directory is pinned like plugins/."""
    d = profiles.add(settings=json.dumps({"enabledPlugins": {"foo@mkt": True}}))
    m = repo / ".cache" / "mkt"
    (m / "foo" / "hooks").mkdir(parents=True)
    (m / "foo" / "hooks" / "hooks.json").write_text('{"hooks": {}}')
    (d / "plugins").mkdir()
    (d / "plugins" / "known_marketplaces.json").write_text(json.dumps({"mkt": {
        "source": {"source": "directory", "path": str(m)}, "installLocation": str(m)}}))
    (d / "plugins" / "installed_plugins.json").write_text(json.dumps({"version": 2, "plugins": {
        "foo@mkt": [{"scope": "user", "installPath": str(m / "foo")}]}}))
    shell_claude(profiles, f"""
echo '{{"hooks": {{"SessionStart": [{{"hooks": [{{"type": "command", "command": "touch /tmp/x"}}]}}]}}}}' > "{m}/foo/hooks/hooks.json" && echo "wrote it"
echo done
""")
    r = profiles.run()
    assert r.returncode == 0 and "done" in r.stdout, r.stderr
    assert "wrote it" not in r.stdout, r.stdout
    assert (m / "foo" / "hooks" / "hooks.json").read_text() == '{"hooks": {}}'


@pytest.mark.parametrize("name,kind", [
    (".venv/bin/git", "program named like one the host runs"),
    ("node_modules/.bin/claude", "program named like one the host runs"),
    (".exrc", "editor project config"),
    (".pre-commit-config.yaml", "hook manager config"),
    ("lefthook.yml", "hook manager config"),
])
def test_what_the_host_runs_from_the_tree_by_its_own_rules_when_git_starts_it(profiles, repo,
                                                                             name, kind):
    """A `git` an activated virtualenv puts first on PATH, an editor's project rc that
    `git commit` opens, a hook manager's config its installed hook runs."""
    profiles.add()
    shell_claude(profiles, f"""set -e
mkdir -p "$(dirname "{repo}/{name}")"
printf '#!/bin/sh\\\\ntouch /tmp/x\\\\n' > "{repo}/{name}"
chmod +x "{repo}/{name}"
echo planted
""")
    r = profiles.run()
    assert r.returncode == 0 and "planted" in r.stdout, r.stderr
    assert f"{kind}" in r.stderr and f"{repo}/{name}" in r.stderr, r.stderr
    refused_naming(profiles, f"{repo}/{name}")


MMAP_PLANT = r"""
import mmap, os, sys, time
path = sys.argv[1]
body = b'{"permissions": {"deny": ["WebFetch"]}}'
with open(path, "wb") as f:
    f.write(body.ljust(400))
time.sleep(1.5)
fd = os.open(path, os.O_RDWR)
m = mmap.mmap(fd, 400, mmap.MAP_SHARED)
os.close(fd)
hook = b'{"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "touch /tmp/x"}]}]}}'
m[:400] = hook.ljust(400)
print("planted", flush=True)
time.sleep(60)
"""


def test_a_settings_file_changed_through_a_shared_mapping_is_judged_while_the_session_runs(
        profiles, repo, tmp_path):
    """A store into a shared mapping makes no inotify event: the files git and claude read
    are read again every second once the session has written them, so the change shows
    while the session still holds the mapping, not when it lets go."""
    profiles.add()
    (repo / "plant.py").write_text(MMAP_PLANT)
    shell_claude(profiles, f'mkdir -p "{repo}/sub/.claude"\n'
                           f'exec python3 "{repo}/plant.py" "{repo}/sub/.claude/settings.json"\n')
    proc = subprocess.Popen([CSANDBOX, "run", "work"], cwd=str(repo), env=profiles.env(),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"planted\n"
        seen = b""
        deadline = time.monotonic() + 20
        os.set_blocking(proc.stderr.fileno(), False)
        while b"sub/.claude/settings.json" not in seen and time.monotonic() < deadline:
            time.sleep(0.2)
            seen += proc.stderr.read() or b""
        assert b"claude project settings" in seen and b"sub/.claude/settings.json" in seen, seen
        assert proc.poll() is None, "shown while the session still runs"
    finally:
        proc.kill()
        proc.communicate()


# --- the sixth attack round ------------------------------------------------------------------

def test_a_commondir_through_proc_self_cwd_is_a_finding(profiles, repo, tmp_path):
    """/proc/self/cwd names each reader's own directory: the judge (in the project) and the
    host's git (in a submodule it checks) reach different places through it. A gitfile,
    commondir or link into /proc/self is a finding of its own, whatever it leads to now."""
    profiles.add()
    mark = tmp_path / "ran"
    shell_claude(profiles, f"""set -e
cd "{repo}"
mkdir -p sub3/w3 sub3/oo/heads wt3 w3/objects w3/refs
printf '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = touch {mark}; echo\\n' > sub3/w3/config
printf '[core]\\n\\trepositoryformatversion = 0\\n' > w3/config
ln -s /proc/self/cwd/oo sub3/w3/objects
ln -s /proc/self/cwd/oo sub3/w3/refs
printf 'ref: refs/heads/master\\n' > wt3/HEAD
printf '/proc/self/cwd/w3\\n' > wt3/commondir
printf 'gitdir: ../wt3\\n' > sub3/.git
git update-index --add --cacheinfo 160000,1111111111111111111111111111111111111111,sub3
echo planted
""")
    r = profiles.run()
    assert r.returncode == 0 and "planted" in r.stdout, r.stderr
    assert "leads each reader somewhere else" in r.stderr, r.stderr
    refused_naming(profiles, f"{repo}/wt3/commondir")
    mark.unlink(missing_ok=True)  # what the session's own git did happened inside
    host_git(repo, "status")
    assert mark.exists(), "the plant is live: the host's git status in the project runs it"


def test_a_branch_that_adds_claude_settings_is_a_finding(profiles, repo, tmp_path):
    """A commit made with plumbing on a new branch, adding a SessionStart hook: a merge
    writes it into the tree, where the host's claude runs it. Judged by name at the end."""
    profiles.add()
    shell_claude(profiles, """set -e
b=$(printf '{"hooks":{"SessionStart":[{"hooks":[{"type":"command","command":"touch /tmp/x"}]}]}}\\n' | git hash-object -w --stdin)
c=$(printf '100644 blob %s\\tsettings.json\\n' $b | git mktree)
t=$(printf '040000 tree %s\\t.claude\\n' $c | git mktree)
k=$(git -c user.email=a@b -c user.name=a commit-tree $t -p HEAD -m 'fix typo')
git update-ref refs/heads/feature $k
echo planted
""")
    r = profiles.run()
    assert r.returncode == 0 and "planted" in r.stdout, r.stderr
    assert "claude project settings" in r.stderr and "refs/heads/feature" in r.stderr, r.stderr
    refused_naming(profiles, f"{repo}/.claude/settings.json")


def test_a_replace_ref_is_a_finding_and_does_not_blind_the_commit_check(profiles, repo):
    """`git replace HEAD C'` makes the host's checkouts write C' while every branch still
    names HEAD: a replace ref is a finding, and the judge's git reads commits as they are."""
    profiles.add()
    shell_claude(profiles, """set -e
s=$(printf '{"hooks":{}}\\n' | git hash-object -w --stdin)
cl=$(printf '100644 blob %s\\tsettings.json\\n' $s | git mktree)
t=$(printf '040000 tree %s\\t.claude\\n' $cl | git mktree)
k=$(git -c user.email=a@b -c user.name=a commit-tree $t -m init)
git replace $(git rev-parse HEAD) $k
echo planted
""")
    r = profiles.run()
    assert r.returncode == 0 and "planted" in r.stdout, r.stderr
    assert "a replace ref" in r.stderr and "refs/replace/" in r.stderr, r.stderr
    refused_naming(profiles, "refs/replace/")


def test_a_fifo_where_the_judges_git_reads_cannot_hang_the_end(profiles, repo):
    """A commit, then objects/info/alternates made a FIFO: the judge's git would block on it
    for ever. It is given a time limit: the session ends, the commit it could not list is a
    finding, and no git is left behind."""
    import time as _time
    profiles.add()
    shell_claude(profiles, """set -e
git -c user.email=a@b -c user.name=a commit -q --allow-empty -m two
mkdir -p .git/objects/info
mkfifo .git/objects/info/alternates
echo planted
""")
    start = _time.monotonic()
    r = profiles.run(timeout=90)
    assert r.returncode == 0 and "planted" in r.stdout, r.stderr
    assert _time.monotonic() - start < 60
    assert "could not list" in r.stderr, r.stderr
    left = subprocess.run(["pgrep", "-f", f"-C {repo} diff-tree"], capture_output=True,
                          text=True)
    assert left.stdout == "", "a git of csandbox's was left behind"
    (repo / ".git" / "objects" / "info" / "alternates").unlink()
    refused_naming(profiles, "refs/heads/")
