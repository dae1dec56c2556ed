"""A work tree another uid owns (tests/setup-root makes one, uid 2999's, whose own config
lists every directory in safe.directory): `run` launches there only when git's
safe.directory lists it in the protected config (system, global), and doctor's work tree line
gives the same verdict. doc/differences.md's row on a work tree another uid owns."""
import json
import os
import subprocess

import pytest

from test_run import CSANDBOX, Profiles, binds

FOREIGN = "/var/cache/csandbox-test/foreign/workspace"
FIX = f"git config --global --add safe.directory {FOREIGN}"


@pytest.fixture
def profiles(tmp_path):
    p = Profiles(tmp_path)
    p.add()
    return p


def listing(profiles, *values):
    """~/.gitconfig with safe.directory set to each value in turn."""
    text = "[safe]\n" + "".join(f"\tdirectory = {v}\n" for v in values)
    (profiles.home / ".gitconfig").write_text(text)


def doctor_line(profiles):
    r = subprocess.run([CSANDBOX, "doctor"], cwd=FOREIGN, env=profiles.env(), text=True,
                       capture_output=True, stdin=subprocess.DEVNULL)
    lines = [l for l in r.stdout.splitlines() if l[6:].startswith("work tree")]
    assert len(lines) == 1, r.stdout + r.stderr
    return lines[0]


def test_the_fixture_is_another_uids_tree_with_a_hostile_local_safe_directory():
    assert os.stat(FOREIGN).st_uid not in (0, os.getuid())
    assert "directory = *" in open(os.path.join(FOREIGN, ".git", "config")).read()


@pytest.mark.parametrize("values", [[], ["/somewhere/else"], ["*", ""],
                                    ["/var/cache/csandbox-test/foreign"]])
def test_not_listed_is_refused_naming_safe_directory_and_the_fix(profiles, values):
    if values:
        listing(profiles, *values)
    r = profiles.run(cmd="plan", cwd=FOREIGN)
    assert r.returncode == 125, r.stdout
    assert f"the work tree {FOREIGN} belongs to uid {os.stat(FOREIGN).st_uid}" in r.stderr
    assert "safe.directory" in r.stderr and FIX in r.stderr, r.stderr
    assert r.stdout == ""
    line = doctor_line(profiles)
    assert line.startswith("FAIL") and FIX in line, line


def git_takes(profiles):
    """Whether this machine's git works in the tree with the caller's config."""
    r = subprocess.run(["git", "-C", FOREIGN, "rev-parse", "--git-dir"], env=profiles.env(),
                       capture_output=True, text=True)
    return r.returncode == 0


@pytest.mark.parametrize("values", [[FOREIGN], ["*"], ["", FOREIGN], ["*", "/else", FOREIGN]])
def test_listed_in_the_global_config_is_launched_from(profiles, values):
    listing(profiles, *values)
    assert git_takes(profiles)
    plan = profiles.plan(cwd=FOREIGN)
    got = binds(plan)
    assert (FOREIGN, FOREIGN, False) in got, got
    # The git dir on itself, its config read-only, as in a tree of the caller's.
    assert (FOREIGN + "/.git", FOREIGN + "/.git", False) in got, got
    assert (FOREIGN + "/.git/config", FOREIGN + "/.git/config", True) in got, got
    line = doctor_line(profiles)
    assert line.startswith("ok") and "safe.directory" in line, line


# Forms newer git takes (a trailing slash, "<dir>/*", "~/"): csandbox goes by this git.
@pytest.mark.parametrize("values", [[FOREIGN + "/"], ["/var/cache/csandbox-test/foreign/*"],
                                    ["~/../../../../../../var/cache/csandbox-test/foreign/*"]])
def test_forms_only_newer_git_takes_follow_this_git(profiles, values):
    listing(profiles, *values)
    r = profiles.run(cmd="plan", cwd=FOREIGN)
    line = doctor_line(profiles)
    if git_takes(profiles):
        assert r.returncode == 0, r.stderr
        assert (FOREIGN + "/.git/config", FOREIGN + "/.git/config", True) in binds(
            json.loads(r.stdout))
        assert line.startswith("ok"), line
    else:
        assert r.returncode == 125 and FIX in r.stderr, r.stderr
        assert "in a form this git takes" in r.stderr, r.stderr
        assert line.startswith("FAIL") and FIX in line, line


def test_listed_tree_launches_and_other_foreign_objects_stay_refused(profiles, tmp_path):
    listing(profiles, FOREIGN)
    r = profiles.run(cwd=FOREIGN, args=("report",))
    assert r.returncode == 0, r.stderr
    # Only the tree's owner below the tree: the profile dir stays the caller's alone.
    assert "belongs to uid" not in r.stderr, r.stderr


LINKED = "/var/cache/csandbox-test/foreign/linked"


def test_a_listed_linked_worktree_gets_its_common_dir_of_the_same_owner(profiles):
    # The common dir (FOREIGN/.git) is outside the linked tree: accepted with it, as git does.
    listing(profiles, FOREIGN)
    r = profiles.run(cmd="plan", cwd=LINKED)
    assert r.returncode == 125 and f"git config --global --add safe.directory {LINKED}" in r.stderr
    listing(profiles, LINKED)
    assert git_takes_at(profiles, LINKED)
    got = binds(profiles.plan(cwd=LINKED))
    assert (LINKED, LINKED, False) in got, got
    assert (FOREIGN + "/.git", FOREIGN + "/.git", False) in got, got
    assert (FOREIGN + "/.git/config", FOREIGN + "/.git/config", True) in got, got
    # The main tree is not mounted for it.
    assert not [b for b in got if b[0] == FOREIGN], got


def git_takes_at(profiles, path):
    r = subprocess.run(["git", "-C", path, "rev-parse", "--git-dir"], env=profiles.env(),
                       capture_output=True, text=True)
    return r.returncode == 0
