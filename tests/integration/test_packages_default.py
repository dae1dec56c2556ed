"""sudo on the embedded default: `exec --package-broker` on the host's read-only view gets a
writable layer of the session over /usr, /etc and the package databases at its first sudo
(runner/host_layer.c). The real apt-get of the host installs a package from a local
repository (the one the image tests use) into it; the host's files never change, and the
next session has none of it."""
import hashlib
import os
import shutil
import stat
import subprocess
import tempfile

from conftest import CSANDBOX, base_env
from test_packages import build_repo, in_a_sandbox
from test_run import profiles, shell_claude  # noqa: F401

TIMEOUT = 300
STATUS = "/var/lib/dpkg/status"


def default_session(script, *opts, tmp):
    """`exec --package-broker` on the embedded default, apt pointed at the local repository
    only, no network."""
    return subprocess.run([CSANDBOX, "exec", "--package-broker", "--net", "none",
                           "--ro-bind", str(tmp / "repo"), "/srv/repo",
                           "--ro-bind", str(tmp / "local.list"), "/etc/apt/sources.list",
                           "--tmpfs", "/etc/apt/sources.list.d", *opts, "--", "/bin/sh", "-c",
                           script], env=base_env(), capture_output=True, text=True,
                          timeout=TIMEOUT, stdin=subprocess.DEVNULL)


def host_status():
    with open(STATUS, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest(), os.stat(STATUS).st_mtime_ns


def test_sudo_apt_get_installs_into_the_sessions_layer_and_the_host_is_unchanged(tmp_path):
    build_repo(str(tmp_path))
    before = host_status()
    stamp = tmp_path / "stamp"
    stamp.write_text("")
    r = default_session("cat /etc/hostname; S=/run/csandbox/sudo; $S apt-get update -q >/dev/null &&"
                        " $S apt-get install -y -q csb-hello >/dev/null && csb-hello &&"
                        " ls -ln /usr/share/csb-hello/owned && id -u _apt &&"
                        " grep -c '^Package: csb-hello' /var/lib/dpkg/status;"
                        " touch /usr/bin/mine 2>/dev/null && echo PAYLOAD-WROTE-USR;"
                        " cat /etc/hostname", tmp=tmp_path)
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    out = r.stdout.splitlines()
    with open("/etc/hostname") as f:
        host_name = f.read().strip()
    assert out[0] == "csandbox" != host_name, r.stdout
    out = out[1:]
    assert out[0] == "hello from a package", r.stdout
    # the postinst's chown to _apt went through the layer, to the subordinate range's id
    assert out[1].split()[2] == out[2] and out[2] not in ("0", str(os.getuid())), r.stdout
    assert out[3] == "1", r.stdout
    assert "PAYLOAD-WROTE-USR" not in r.stdout, "the layer is root's, not the payload's"
    assert out[4] == "csandbox", "the session's own mounts below /etc stay where they were"
    # the host's dpkg database and /usr are as they were
    assert host_status() == before
    assert not os.path.exists("/usr/bin/csb-hello")
    newer = subprocess.run(["find", "/usr", "-xdev", "-newer", str(stamp)],
                           capture_output=True, text=True)
    assert newer.stdout == "", newer.stdout


REPO_DIR = os.environ.get("CSANDBOX_TEST_REPO", "/run/csbt-repo")


def test_sudo_apt_get_installs_from_the_test_networks_repository(tmp_path):
    """The same over the network: the repository is served by the test network's test host
    (HTTP, apt's own http method run by the broker as _apt), the session's network is pasta
    as in run; the host's dpkg database is unchanged after."""
    host = os.environ.get("CSANDBOX_TEST_HOST")
    assert host, "run the suite via tests/run (CSANDBOX_TEST_HOST: the test network)"
    assert os.path.isdir(REPO_DIR), f"{REPO_DIR}: the test host's repository dir is missing"
    served = tempfile.mkdtemp(dir=REPO_DIR, prefix=f"pkg-{os.getpid()}-")
    try:
        os.chmod(served, 0o755)
        build_repo(served)
        subprocess.run(["chmod", "-R", "a+rX", served], check=True)
        name = os.path.basename(served)
        (tmp_path / "net.list").write_text(
            f"deb [trusted=yes] http://{host}:8080/repo/{name}/repo ./\n")
        before = host_status()
        r = subprocess.run([CSANDBOX, "exec", "--package-broker", "--net", "pasta",
                            "--ro-bind", str(tmp_path / "net.list"), "/etc/apt/sources.list",
                            "--tmpfs", "/etc/apt/sources.list.d", "--", "/bin/sh", "-c",
                            "S=/run/csandbox/sudo; $S apt-get update -q >/dev/null &&"
                            " $S apt-get install -y -q csb-hello >/dev/null && csb-hello &&"
                            " grep -c '^Package: csb-hello' /var/lib/dpkg/status"],
                           env=base_env(), capture_output=True, text=True, timeout=TIMEOUT,
                           stdin=subprocess.DEVNULL)
        assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
        assert r.stdout.split("\n")[:2] == ["hello from a package", "1"], r.stdout
        assert host_status() == before
        assert not os.path.exists("/usr/bin/csb-hello")
    finally:
        shutil.rmtree(served, ignore_errors=True)


def test_a_second_session_does_not_see_the_package(tmp_path):
    build_repo(str(tmp_path))
    r = default_session("S=/run/csandbox/sudo; $S apt-get update -q >/dev/null &&"
                        " $S apt-get install -y -q csb-hello >/dev/null && command -v csb-hello",
                        tmp=tmp_path)
    assert r.returncode == 0 and r.stdout.strip() == "/usr/bin/csb-hello", r.stderr
    r = default_session("command -v csb-hello || echo none;"
                        " dpkg -s csb-hello >/dev/null 2>&1 && echo KNOWN || echo unknown",
                        tmp=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["none", "unknown"], r.stdout


def test_a_package_writing_into_an_unreadable_host_directory_fails_naming_it(tmp_path):
    """/etc/ssl/private is root's and unreadable to others on the host (Debian: 0700 or 0710
    ssl-cert): the layer cannot mirror it, so dpkg fails there, and sudo names it."""
    st = os.stat("/etc/ssl/private")
    assert st.st_uid == 0 and not (st.st_mode & stat.S_IROTH) and not os.access(
        "/etc/ssl/private", os.R_OK), "the host's /etc/ssl/private is root's, unreadable"
    pkg = tmp_path / "build" / "csb-secret"
    os.makedirs(pkg / "DEBIAN")
    os.makedirs(pkg / "etc" / "ssl" / "private")
    (pkg / "DEBIAN" / "control").write_text(
        "Package: csb-secret\nVersion: 1.0\nArchitecture: all\nMaintainer: t <t@t>\n"
        "Description: writes into an unreadable directory\n")
    (pkg / "etc" / "ssl" / "private" / "csb-secret").write_text("x\n")
    repo = build_repo(str(tmp_path))
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(pkg),
                    os.path.join(repo, "csb-secret_1.0_all.deb")], check=True,
                   capture_output=True)
    with open(os.path.join(repo, "Packages"), "w") as f:
        subprocess.run(["dpkg-scanpackages", "-m", ".", "/dev/null"], cwd=repo, check=True,
                       stdout=f, stderr=subprocess.DEVNULL)
    r = default_session("S=/run/csandbox/sudo; $S apt-get update -q >/dev/null;"
                        " $S apt-get install -y -q csb-secret; echo status=$?", tmp=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "status=0" not in r.stdout, r.stdout
    assert "unreadable to you" in r.stderr and "/etc/ssl/private" in r.stderr, r.stderr


def test_without_a_range_sudo_on_the_default_says_why_and_names_the_fix(tmp_path):
    """Inside another csandbox (no_new_privs: newuidmap gains nothing) there is no range."""
    r = subprocess.run(in_a_sandbox(str(tmp_path), [CSANDBOX, "exec", "--package-broker",
                                                    "--", "/run/csandbox/sudo", "apt-get",
                                                    "install", "x"]),
                       env=base_env(), capture_output=True, text=True, timeout=TIMEOUT,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 1, r.stderr
    assert "csandbox: sudo cannot install packages in this session" in r.stderr
    assert "subordinate id range" in r.stderr and "no_new_privs" in r.stderr, r.stderr
    assert "/etc/subuid" in r.stderr, r.stderr
    # the launch was not given --map-range, so no message tells the user to drop it
    assert "--map-range" not in r.stderr, r.stderr


def test_the_plan_names_the_layer_and_the_default_launch_has_no_helper():
    r = subprocess.run([CSANDBOX, "exec", "--package-broker", "--plan", "--", "true"],
                       env=base_env(), capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    import json
    plan = json.loads(r.stdout)
    assert plan["package_broker"] is True
    assert {"/usr", "/etc", "/var/lib/dpkg"} <= set(plan["broker"]["host_layer"]), plan
    r = subprocess.run([CSANDBOX, "exec", "--plan", "--", "true"], env=base_env(),
                       capture_output=True, text=True, timeout=TIMEOUT)
    plan = json.loads(r.stdout)
    assert plan["package_broker"] is False and "broker" not in plan


def test_run_on_the_default_has_sudo_when_the_profile_asks(profiles):  # noqa: F811
    """CLAUDE_PROFILE_SANDBOX_PACKAGES=1: run on the embedded default gets csandbox's sudo
    on its PATH, and the first sudo lays the layer over /usr; without it, no broker."""
    profiles.add()
    plan = profiles.plan()
    assert plan["package_broker"] is False
    brief = plan["argv"][plan["argv"].index("--append-system-prompt") + 1]
    assert "There is no sudo" in brief and "CLAUDE_PROFILE_SANDBOX_PACKAGES=1" in brief, brief
    assert "writable layer" not in brief, brief
    env = profiles.env(CLAUDE_PROFILE_SANDBOX_PACKAGES="1")
    plan = profiles.plan(env=env)
    assert plan["package_broker"] is True and "/usr" in plan["broker"]["host_layer"], plan
    brief = plan["argv"][plan["argv"].index("--append-system-prompt") + 1]
    assert "installs into a writable layer of this session over the host" in brief, brief
    assert "no sudo" not in brief and "no root" not in brief, brief
    shell_claude(profiles, "command -v sudo; grep -c ' /usr .* - overlay ' /proc/self/mountinfo;"
                           " sudo apt-get install -y -q >/dev/null; echo status=$?;"
                           " grep -c ' /usr .* - overlay ' /proc/self/mountinfo\n")
    r = profiles.run(env=env, timeout=TIMEOUT)
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    assert r.stdout.split() == ["/home/appuser/.local/bin/sudo", "0", "status=0", "1"], r.stdout


SYS_ADMIN_HOLDERS = ("for p in /proc/[0-9]*; do c=$(sed -n 's/^CapEff:\\t//p' $p/status"
                     " 2>/dev/null); [ -n \"$c\" ] && [ $((0x$c & 0x200000)) -ne 0 ] &&"
                     " echo \"${p#/proc/}:$(sed -n 's/^Uid:\\t\\([0-9]*\\).*/\\1/p' $p/status)\";"
                     " done | wc -l")


def test_only_the_mount_helper_holds_sys_admin_and_only_until_the_first_sudo(tmp_path):
    """Before the first sudo one process of the session holds CAP_SYS_ADMIN (the mount
    helper, uid 0 of the session); after it, none: the helper did its one sequence and
    exited. The payload's own capabilities stay empty throughout."""
    build_repo(str(tmp_path))
    r = default_session(f"grep '^CapEff' /proc/self/status; {SYS_ADMIN_HOLDERS};"
                        " /run/csandbox/sudo apt-get install -y -q >/dev/null; echo status=$?;"
                        f" {SYS_ADMIN_HOLDERS}; grep '^CapEff' /proc/self/status", tmp=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["CapEff:", "0000000000000000", "1", "status=0", "0",
                                "CapEff:", "0000000000000000"], r.stdout


def foreign(root):
    """What below root is owned by another uid than the user's (a subordinate id's)."""
    found = []
    for d, dirs, files in os.walk(root):
        for name in dirs + files:
            p = os.path.join(d, name)
            if os.lstat(p).st_uid != os.getuid():
                found.append(p)
    return found


def test_links_planted_in_var_lead_no_write_of_the_brokers_root_into_host_dirs(tmp_path):
    """The payload owns the session's /var: before the first sudo it points apt's and
    debconf's directories at the work tree and the profile dir, and after it moves /var/lib
    (the layer's mounts with it) aside for a /var/lib/dpkg that leads into the work tree. apt
    and dpkg, run as the broker's root, write neither: those host directories are read-only
    in the broker's mount namespace, so nothing owned by a subordinate id lands there."""
    build_repo(str(tmp_path))
    tree, prof = tmp_path / "tree", tmp_path / "profile"
    tree.mkdir()
    prof.mkdir()
    (tree / "mine").write_text("the user's\n")
    plant = (f"mkdir -p /var/log /var/cache && ln -s {tree} /var/cache/apt &&"
             f" ln -s {prof} /var/cache/debconf && ln -s {tree} /var/log/apt &&"
             f" mkdir {tree}/lists && ln -s {tree}/lists /var/lib/apt/lists 2>/dev/null;"
             " S=/run/csandbox/sudo; $S apt-get update -q; echo update=$?;"
             " $S apt-get install -y -q csb-hello; echo install=$?;"
             f" mv /var/lib /var/lib.aside && mkdir /var/lib && ln -s {tree} /var/lib/dpkg &&"
             f" ln -s {prof} /var/lib/apt && echo moved;"
             " $S apt-get install -y -q csb-hello; echo again=$?;"
             f" touch {tree}/payload-wrote {prof}/payload-wrote && echo payload-writes")
    r = default_session(plant, "--bind", str(tree), str(tree), "--bind", str(prof), str(prof),
                        tmp=tmp_path)
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    out = r.stdout.splitlines()
    assert "moved" in out and "payload-writes" in out, r.stdout
    assert "install=0" not in out and "again=0" not in out, r.stdout
    # apt reached the work tree through the link, and found it read-only
    assert "read only lock file /var/lib/dpkg/lock" in r.stderr, r.stderr
    assert foreign(str(tree)) == [] and foreign(str(prof)) == [], (foreign(str(tree)),
                                                                   foreign(str(prof)), r.stderr)
    assert sorted(os.listdir(tree)) == ["lists", "mine", "payload-wrote"], os.listdir(tree)
    assert os.listdir(tree / "lists") == []
    assert os.listdir(prof) == ["payload-wrote"], os.listdir(prof)


def test_the_broker_runs_apt_where_the_work_tree_is_read_only(tmp_path):
    """Without any link: the package manager's own view has the session's writable host
    binds read-only, the payload's stays writable, and the install lands in the layer."""
    build_repo(str(tmp_path))
    tree = tmp_path / "tree"
    tree.mkdir()
    r = default_session("S=/run/csandbox/sudo; $S apt-get update -q >/dev/null &&"
                        " $S apt-get install -y -q csb-hello >/dev/null && csb-hello &&"
                        " grep -c ' /usr .* - overlay ' /proc/self/mountinfo;"
                        f" grep ' {tree} ' /proc/self/mountinfo | grep -c ' rw,'",
                        "--bind", str(tree), str(tree), tmp=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["hello from a package", "1", "1"], r.stdout
