"""A session races a second launch of its profile in its tree: every directory on the way to
every bind source of a real `run` plan is swapped for a link to a host directory, again and
again, by a separate program (planter.py), while `csandbox run` starts repeatedly with a
claude that writes into everything it is given. Afterwards nothing outside the work tree and
the profile may have changed, and nothing may have been created through a link. Also: a
linked profile dir and profiles base (resolved once, then the fd), the chrome mask over
whatever <profile>/chrome is, and `exec --bind` / `--rootfs` sources swapped between the
moment csandbox read the flag and the mount (held there by a blocking --env-fd)."""
import os
import subprocess
import sys
import time

import pytest

from conftest import CSANDBOX, TIMEOUT
from test_run import CFG_IN, Profiles, git, profiles, shell_claude  # noqa: F401

PLANTER = os.path.join(os.path.dirname(__file__), "planter.py")
LAUNCHES = 50


def snapshot(root):
    """Every entry under root (links not followed) with its content or target."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            if os.path.islink(p):
                out[p] = "-> " + os.readlink(p)
            elif os.path.isfile(p):
                with open(p, "rb") as f:
                    out[p] = f.read()
            else:
                out[p] = "dir"
    return out


def host_dirs(profiles):
    """What a session wants: the user's ~/.ssh and global ~/.claude, each with a marker."""
    ssh, glob = profiles.home / ".ssh", profiles.home / ".claude"
    ssh.mkdir(exist_ok=True)
    (ssh / "id_ed25519").write_text("host key\n")
    (glob / "commands").mkdir(parents=True)
    (glob / "global-marker").write_text("global\n")
    return ssh, glob


def submodule_layout(profiles, repo):
    """A repository with a submodule git dir named like the host dir it wants (.ssh), .claude
    dirs at the root and the cwd, and the profile's linked global commands. Each swap makes
    the path the launch found lead to a host dir of the same name."""
    ssh, glob = host_dirs(profiles)
    git("init", "-q", cwd=repo)
    mod = repo / ".git" / "modules" / ".ssh"
    (mod / "objects").mkdir(parents=True)
    (mod / "hooks").mkdir()
    (mod / "HEAD").write_text("ref: refs/heads/main\n")
    (mod / "config").write_text("[core]\n\tbare = false\n")
    cwd = repo / "sub"
    (cwd / ".claude").mkdir(parents=True)
    (cwd / ".claude" / "settings.local.json").write_text("{}")
    (repo / ".claude").mkdir()
    (repo / ".claude" / "settings.local.json").write_text("{}")
    d = profiles.base / "work"
    os.symlink(glob / "commands", d / "commands")
    swaps = [(repo / ".git" / "modules", profiles.home), (mod, ssh), (mod / "hooks", ssh),
             (cwd, profiles.home), (repo / ".claude", glob), (repo / ".git", profiles.home),
             (d / "commands", ssh)]
    written = [mod, mod / "hooks", cwd / ".claude", repo / ".claude", glob / "commands",
               repo / ".git" / "hooks"]
    return cwd, swaps, written


def modules_link_layout(profiles, repo):
    """The attack as it was found: only .git/modules swapped for a link to the home, so the
    submodule git dir .git/modules/.ssh found by the walk is the host's ~/.ssh at the mount."""
    cwd, swaps, written = submodule_layout(profiles, repo)
    return cwd, [s for s in swaps if s[0].name == "modules"], written


def linked_worktree_layout(profiles, repo):
    """A linked worktree: the common dir, with a submodule git dir named .ssh, lives in the
    main repository."""
    ssh, glob = host_dirs(profiles)
    git("init", "-q", cwd=repo)
    (repo / "f").write_text("x")
    git("add", "f", cwd=repo)
    git("commit", "-q", "-m", "x", cwd=repo)
    linked = profiles.home / "src" / "linked"
    git("worktree", "add", "-q", str(linked), cwd=repo)
    common = repo / ".git"
    mod = common / "modules" / ".ssh"
    (mod / "objects").mkdir(parents=True)
    (mod / "HEAD").write_text("ref: refs/heads/main\n")
    (linked / ".claude").mkdir()
    swaps = [(common / "modules", profiles.home), (mod, ssh), (common / "hooks", ssh),
             (common / "worktrees", profiles.home), (linked / ".claude", glob)]
    written = [common, mod, mod / "hooks", common / "hooks", linked / ".claude"]
    return linked, swaps, written


@pytest.mark.parametrize("layout", [submodule_layout, modules_link_layout,
                                    linked_worktree_layout])
def test_racing_planter_never_gets_a_host_dir_mounted_or_created(profiles, tmp_path, layout):
    profiles.add()
    repo = profiles.project
    cwd, swaps, written = layout(profiles, repo)
    ssh, glob = profiles.home / ".ssh", profiles.home / ".claude"
    seen = repo / "seen.txt"
    # claude writes into, and lists, every directory it was given.
    shell_claude(profiles, "".join(
        f'{{ echo pwned > "{p}/pwned"; mkdir "{p}/pwned-dir"; ls -a "{p}" >> "{seen}"; }} '
        "2>/dev/null\n" for p in written) + "exit 0\n")
    home_entries = set(os.listdir(profiles.home))
    before = (snapshot(ssh), snapshot(glob))
    stop, count = tmp_path / "stop", tmp_path / "count"
    statuses = []
    planter = subprocess.Popen([sys.executable, PLANTER, str(stop), str(count),
                                *(f"{p}={t}" for p, t in swaps)])
    try:
        time.sleep(0.05)
        for _ in range(LAUNCHES):
            # The planter's links are what the trust report exists to show; accepting them
            # each time keeps every launch racing the mounts instead of refusing up front.
            r = subprocess.run([CSANDBOX, "run", "--accept-changes", "work", "--"], cwd=str(cwd),
                               env=profiles.env(), capture_output=True, text=True,
                               timeout=TIMEOUT, stdin=subprocess.DEVNULL)
            statuses.append(r.returncode)
            assert r.returncode in (0, 125), r.stderr
    finally:
        stop.write_text("")
        planter.wait(timeout=30)
    assert planter.returncode == 0
    assert int(count.read_text()) > LAUNCHES, "the planter did not race the launches"
    # Whatever each launch did, the host dirs behind the links are as they were, nothing
    # was made in the home through a link, and no launch showed claude a host dir.
    assert (snapshot(ssh), snapshot(glob)) == before
    assert set(os.listdir(profiles.home)) == home_entries, "created in the home through a link"
    listed = seen.read_text() if seen.exists() else ""
    assert "id_ed25519" not in listed and "global-marker" not in listed
    for p, _ in swaps:
        assert os.path.lexists(p) and not os.path.lexists(f"{p}.planted"), p
    # And launches that won the race ran, so the defence is not "always refuse".
    print("launch statuses:", {s: statuses.count(s) for s in set(statuses)})
    assert statuses.count(0) > 0, statuses


def test_linked_profile_dir_runs_from_its_target(profiles, tmp_path):
    target = tmp_path / "elsewhere" / "work"
    target.mkdir(parents=True)
    (target / "CLAUDE.md").write_text("linked profile\n")
    (target / ".sandbox").touch()
    os.symlink(target, profiles.base / "work")
    r = profiles.report(env=profiles.env(CSB_FAKE_CLAUDE_WRITABLE=CFG_IN + "/CLAUDE.md"))
    assert r["writable"][CFG_IN + "/CLAUDE.md"] == "ok"
    plan = profiles.plan()
    src = [m["source"] for m in plan["mounts"] if m["kind"] == "bind" and m["dest"] == CFG_IN]
    assert src == [str(profiles.base / "work")]
    assert (target / "chrome").is_dir()


def test_linked_profiles_base_runs(profiles, tmp_path):
    real = tmp_path / "real-base"
    real.mkdir()
    (real / "work").mkdir()
    (real / "work" / "CLAUDE.md").write_text("x\n")
    (real / "work" / ".sandbox").touch()
    profiles.base.rmdir()
    os.symlink(real, profiles.base)
    r = profiles.report(env=profiles.env(CSB_FAKE_CLAUDE_WRITABLE=CFG_IN + "/CLAUDE.md"))
    assert r["writable"][CFG_IN + "/CLAUDE.md"] == "ok"


def test_chrome_link_refuses_the_launch_and_its_target_is_untouched(profiles, tmp_path):
    d = profiles.add()
    host_chrome = tmp_path / "host-chrome"
    host_chrome.mkdir()
    (host_chrome / "chrome-native-host").write_text("#!/bin/sh\nreal\n")
    os.symlink(host_chrome, d / "chrome")
    shell_claude(profiles, f'echo pwned > "{CFG_IN}/chrome/chrome-native-host"\n')
    r = profiles.run()
    assert r.returncode == 125, r.stdout
    assert "chrome is a symlink" in r.stderr and str(host_chrome) in r.stderr
    assert "rm " in r.stderr
    assert (host_chrome / "chrome-native-host").read_text() == "#!/bin/sh\nreal\n"
    assert os.listdir(host_chrome) == ["chrome-native-host"]


def test_chrome_file_refuses_the_launch_with_the_reason(profiles):
    d = profiles.add()
    (d / "chrome").write_text("not a dir\n")
    r = profiles.run()
    assert r.returncode == 125
    assert "chrome is not a directory" in r.stderr
    assert (d / "chrome").read_text() == "not a dir\n"


def test_chrome_dir_gets_the_mask(profiles):
    d = profiles.add()
    (d / "chrome").mkdir()
    (d / "chrome" / "chrome-native-host").write_text("real\n")
    shell_claude(profiles, f'echo pwned > "{CFG_IN}/chrome/chrome-native-host"; echo rc=$?\n')
    r = profiles.run()
    assert r.returncode == 0, r.stderr
    assert "rc=0" in r.stdout
    assert (d / "chrome" / "chrome-native-host").read_text() == "real\n"


def test_seven_hundred_submodule_git_dirs_fit_under_a_soft_limit_of_1024_fds(profiles):
    """Every git dir is an open fd from the walk until the mount: the launch raises its own
    soft RLIMIT_NOFILE instead of failing with EMFILE."""
    import resource

    profiles.add()
    repo = profiles.project
    git("init", "-q", cwd=repo)
    for i in range(700):
        mod = repo / ".git" / "modules" / f"m{i}"
        (mod / "objects").mkdir(parents=True)
        (mod / "HEAD").write_text("ref: refs/heads/main\n")
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    assert hard > 2048, "the test needs a hard limit above the soft one"

    def soft_1024():
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))

    r = subprocess.run([CSANDBOX, "plan", "work"], cwd=str(repo), env=profiles.env(),
                       capture_output=True, text=True, timeout=120, preexec_fn=soft_1024)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count('/.git/modules/m') >= 700


def exec_swapped_between_parse_and_mount(tmp_path, flags, swap):
    """csandbox exec FLAGS --env-fd N -- cat /tmp/x/marker, where reading the --env-fd pipe
    holds csandbox after it has opened every source given before it: swap() runs in that
    window, then the pipe is closed and the launch goes on."""
    import conftest

    r, w = os.pipe()
    p = subprocess.Popen([CSANDBOX, "exec", *flags, "--env-fd", str(r), "--", "/bin/cat",
                          "/tmp/x/marker"], env=conftest.base_env(), pass_fds=(r,),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    os.close(r)
    time.sleep(0.3)
    swap()
    os.close(w)
    out, err = p.communicate(timeout=30)
    return p.returncode, out, err


def test_exec_bind_source_is_the_object_opened_at_parse_time(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "marker").write_text("checked\n")
    host = tmp_path / "host-secret"
    host.mkdir()
    (host / "marker").write_text("secret\n")
    rc, out, err = exec_swapped_between_parse_and_mount(
        tmp_path, ["--bind", str(src), "/tmp/x"], lambda: None)
    assert rc == 0 and out == "checked\n", err

    def to_other_dir():
        src.rename(tmp_path / "src.old")
        src.mkdir()
        (src / "marker").write_text("swapped\n")
    rc, out, err = exec_swapped_between_parse_and_mount(
        tmp_path, ["--bind", str(src), "/tmp/x"], to_other_dir)
    assert rc == 125 and "replaced between its check and the mount" in err, (rc, out, err)

    def to_link():
        os.rename(src, tmp_path / "src.new")
        os.symlink(host, src)
    rc, out, err = exec_swapped_between_parse_and_mount(
        tmp_path, ["--bind", str(src), "/tmp/x"], to_link)
    assert rc == 125 and "secret" not in out, (rc, out, err)
    assert (host / "marker").read_text() == "secret\n" and os.listdir(host) == ["marker"]


def test_exec_rootfs_is_the_tree_opened_at_parse_time(tmp_path, rootfs):
    import shutil

    root = tmp_path / "root"
    shutil.copytree(rootfs, root, symlinks=True)

    def to_other_tree():
        root.rename(tmp_path / "root.old")
        shutil.copytree(rootfs, root, symlinks=True)
    rc, out, err = exec_swapped_between_parse_and_mount(
        tmp_path, ["--rootfs", str(root), "--dir", "/tmp/x"], to_other_tree)
    assert rc == 125 and "find the root" in err, (rc, out, err)


def _soft_nofile_1024():
    import resource

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))


def test_exec_with_1100_binds_under_a_soft_limit_of_1024_and_the_payload_gets_1024(tmp_path):
    """One fd per bind source until the mounts are done: csandbox raises its own soft limit
    for that, and gives the payload the caller's limit back."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_text("x")
    binds = ["--tmpfs", "/run/many"]
    for i in range(1100):
        binds += ["--ro-bind", str(src), f"/run/many/d{i}"]
    r = subprocess.run([CSANDBOX, "exec", *binds, "--", "/bin/sh", "-c",
                        "cat /run/many/d1099/f; echo; ulimit -n"], capture_output=True,
                       text=True, timeout=120, preexec_fn=_soft_nofile_1024,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["x", "1024"]


def test_run_gives_claude_the_callers_open_file_limit(profiles):
    profiles.add()
    profiles.claude.write_text("#!/bin/sh\nulimit -n > nofile\n")
    profiles.claude.chmod(0o755)
    r = subprocess.run([CSANDBOX, "run", "work"], cwd=str(profiles.project), env=profiles.env(),
                       capture_output=True, text=True, timeout=120,
                       preexec_fn=_soft_nofile_1024, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    assert (profiles.project / "nofile").read_text() == "1024\n"
