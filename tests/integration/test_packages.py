"""The package broker: in an image session, csandbox's sudo hands a package manager command
to a broker that runs it as the sandbox's root (the subordinate range maps uid 0), with a
few capabilities and the payload's seccomp filter, and refuses anything else. Tested with a
fake package manager that reports what it was given, and with the real apt-get of a Debian
root (tests/setup-root builds it with mmdebstrap) installing from a local repository."""
import json
import os
import subprocess
import sys
import tarfile

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "fixtures"))
import oci  # noqa: E402
import rootfs as rootfs_builder  # noqa: E402

from conftest import CSANDBOX, PROBE, base_env  # noqa: E402
from test_run import import_busybox_image, profiles, shell_claude  # noqa: E402,F401

TIMEOUT = 120
APT_BASE = "/var/cache/csandbox-test/apt-base.tar"
# CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER FSETID KILL SETGID SETUID, and SETFCAP (31).
BROKER_CAPS = "00000000800000ff"

FAKE_MANAGER = r"""#!/bin/sh
touch /tmp/manager-ran
echo "ran as $(id -u):$(id -g): $*"
grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status
mkdir -p /usr/share/pkgs
for p in "$@"; do
        case "$p" in
        -*|install|add|update) ;;
        ask) read -r line; echo "got: $line" ;;
        slow) exec sleep 4242 ;;
        fail) echo "failing as asked" >&2; exit 7 ;;
        mount) mount -t tmpfs x /mnt 2>/dev/null && echo MOUNTED || echo "mount refused" ;;
        *) echo "$p" >/usr/share/pkgs/"$p"; chown 42:42 /usr/share/pkgs/"$p" && echo "chowned $p" ;;
        esac
done
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A store holding `fakepm`: busybox with the fake as apt-get, dnf and apk."""
    base = tmp_path_factory.mktemp("pkg")
    root = rootfs_builder.build(str(base / "rootfs"), PROBE)
    for d in ("usr/bin", "sbin", "usr/share", "mnt"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    for path in ("usr/bin/apt-get", "usr/bin/dnf", "sbin/apk"):
        with open(os.path.join(root, path), "w") as f:
            f.write(FAKE_MANAGER)
        os.chmod(os.path.join(root, path), 0o755)
    tar = str(base / "fakepm.tar")
    with tarfile.open(tar, "w") as t:
        t.add(root, arcname=".")
    data = str(base / "data")
    r = subprocess.run([CSANDBOX, "image", "import", tar, "--name", "fakepm", "--quiet"],
                       env=base_env(XDG_DATA_HOME=data), capture_output=True, text=True,
                       timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    return data


def session(store, script, *opts, image="fakepm", input=None, timeout=TIMEOUT):
    """`exec --image` as uid 1000 with the broker, running script with sh."""
    return subprocess.run([CSANDBOX, "exec", "--image", image, "--writable", "--uid", "1000",
                           "--gid", "1000", "--package-broker", *opts, "--", "/bin/sh", "-c",
                           script], env=base_env(XDG_DATA_HOME=store), capture_output=True,
                          text=True, timeout=timeout, input=input,
                          stdin=None if input is not None else subprocess.DEVNULL)


def test_sudo_runs_the_package_manager_as_the_sandboxs_root(store):
    r = session(store, "id -u; /run/csandbox/sudo apt-get install -y hello; echo status=$?;"
                       "ls -ln /usr/share/pkgs/hello; echo mine >/usr/share/pkgs/hello"
                       " 2>/dev/null || echo 'cannot write it'")
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert out[0] == "1000", "the payload stays the unprivileged user"
    assert "ran as 0:0: install -y hello" in out
    assert "chowned hello" in out, "the subordinate range gives other ids to chown to"
    assert "status=0" in out
    assert any(l.split()[2:4] == ["42", "42"] and l.endswith("/usr/share/pkgs/hello")
               for l in out), out
    assert out[-1] == "cannot write it", "what root installed is not the payload's to change"


def test_broker_holds_only_what_a_package_manager_needs(store):
    r = session(store, "/run/csandbox/sudo apt-get install mount")
    assert r.returncode == 0, r.stderr
    status = dict(l.split(":\t") for l in r.stdout.splitlines() if ":\t" in l)
    assert status["CapEff"] == BROKER_CAPS and status["CapBnd"] == BROKER_CAPS, status
    assert status["NoNewPrivs"] == "1" and status["Seccomp"] == "2", status
    assert "mount refused" in r.stdout and "MOUNTED" not in r.stdout


def test_stdio_and_the_exit_status_pass_through(store):
    r = session(store, "/run/csandbox/sudo -n dnf install ask fail; echo status=$?",
                input="yes please\n")
    assert r.returncode == 0, r.stderr
    assert "got: yes please" in r.stdout
    assert "failing as asked" in r.stderr
    assert r.stdout.rstrip().endswith("status=7")


@pytest.mark.parametrize("argv,says", [
    (["sh", "-c", "id"], "runs only a package manager"),
    (["apt-get", "install", "./evil.deb"], "is not a package name"),
    (["apt-get", "install", "http://example.invalid/x.deb"], "is not a package name"),
    (["apt-get", "-o", "APT::Update::Pre-Invoke::=touch /tmp/pwn", "update"],
     "the option -o is not one sudo passes"),
    (["apt-get", "download", "hello"], "installs, removes and updates packages only"),
    (["apk", "add", "--repository", "http://example.invalid", "x"],
     "the option --repository is not one"),
    (["dnf", "install", "--setopt=tsflags=noscripts", "x"], "the option --setopt=tsflags"),
    (["apt-get"], "say what to do"),
])
def test_sudo_refuses_what_is_not_a_package_operation(store, argv, says):
    quoted = " ".join("'" + a.replace("'", "'\\''") + "'" for a in argv)
    r = session(store, f"/run/csandbox/sudo {quoted}; echo status=$?;"
                       "test -e /tmp/manager-ran && echo MANAGER-RAN; test -e /tmp/pwn && echo PWN; true")
    assert r.returncode == 0, r.stderr
    assert "status=1" in r.stdout and "MANAGER-RAN" not in r.stdout and "PWN" not in r.stdout
    assert says in r.stderr, r.stderr


def test_sudo_never_runs_the_callers_own_program(store):
    """Only the base name travels: the broker runs the image's apt-get, not one the session
    wrote."""
    r = session(store, "mkdir -p /tmp/evil && printf '#!/bin/sh\\ntouch /tmp/evil-ran\\n' "
                       ">/tmp/evil/apt-get && chmod +x /tmp/evil/apt-get &&"
                       " PATH=/tmp/evil:$PATH /run/csandbox/sudo /tmp/evil/apt-get install x;"
                       " test -e /tmp/evil-ran && echo EVIL-RAN; cat /usr/share/pkgs/x; true")
    assert r.returncode == 0, r.stderr
    assert "EVIL-RAN" not in r.stdout and "ran as 0:0: install x" in r.stdout


def test_killing_sudo_ends_the_package_manager(store):
    r = session(store, "/run/csandbox/sudo apt-get install slow & pid=$!; sleep 1;"
                       " kill -9 $pid; sleep 1; for p in /proc/[0-9]*; do"
                       " tr '\\0' ' ' <$p/cmdline 2>/dev/null; echo; done | grep -c '^sleep 4242'")
    assert r.stdout.strip().splitlines()[-1] == "0", r.stdout


def test_installs_are_gone_with_the_session(store):
    session(store, "/run/csandbox/sudo apt-get install gone")
    r = session(store, "ls /usr/share/pkgs 2>&1")
    assert "gone" not in r.stdout


def test_without_a_usable_range_sudo_says_why(store, tmp_path):
    """Inside another csandbox (no_new_privs: newuidmap gains nothing), the session starts
    without a broker, says so, and sudo names the reason."""
    r = subprocess.run([CSANDBOX, "exec", "--net", "host", "--bind", store, store,
                        "--setenv", "XDG_DATA_HOME", store, "--ro-bind", CSANDBOX, CSANDBOX,
                        "--ro-bind", os.path.join(os.path.dirname(CSANDBOX), "csandbox-sudo"),
                        os.path.join(os.path.dirname(CSANDBOX), "csandbox-sudo"),
                        "--", CSANDBOX, "exec", "--image", "fakepm", "--writable",
                        "--package-broker", "--", "/run/csandbox/sudo", "apt-get", "install",
                        "x"], env=base_env(XDG_DATA_HOME=store), capture_output=True, text=True,
                       timeout=TIMEOUT, stdin=subprocess.DEVNULL)
    assert r.returncode == 1, r.stderr
    assert "csandbox: sudo cannot install packages in this session" in r.stderr
    assert "no_new_privs" in r.stderr
    assert "sudo: this session cannot install packages" in r.stderr


def in_a_sandbox(store, argv):
    """argv run inside another csandbox: no_new_privs there, so no subordinate range."""
    sudo = os.path.join(os.path.dirname(CSANDBOX), "csandbox-sudo")
    return [CSANDBOX, "exec", "--net", "host", "--bind", store, store, "--setenv",
            "XDG_DATA_HOME", store, "--ro-bind", CSANDBOX, CSANDBOX, "--ro-bind", sudo, sudo,
            "--", *argv]


SET_UP = ("cat /proc/self/uid_map; echo @@; cat /proc/self/gid_map; echo @@;"
          " test -S /run/csandbox/packages.sock && echo socket || echo none; echo @@;"
          " cat /proc/self/mountinfo")


def id_map(text):
    return [tuple(int(w) for w in line.split()) for line in text.splitlines() if line.strip()]


@pytest.mark.parametrize("has_range", [True, False], ids=["range", "no-range"])
def test_the_plan_is_what_pid_1_set_up(store, has_range):
    """--plan prints what runs: for a broker launch with and without a subordinate range,
    the plan's id maps, broker and mounts are those the payload finds."""
    inner = [CSANDBOX, "exec", "--image", "fakepm", "--writable", "--uid", "1000", "--gid",
             "1000", "--package-broker"]
    wrap = (lambda a: a) if has_range else (lambda a: in_a_sandbox(store, a))

    def run(*extra):
        r = subprocess.run(wrap(inner + [*extra, "--", "/bin/sh", "-c", SET_UP]),
                           env=base_env(XDG_DATA_HOME=store), capture_output=True, text=True,
                           timeout=TIMEOUT, stdin=subprocess.DEVNULL)
        assert r.returncode == 0, r.stderr
        return r

    p = run("--plan")
    plan = json.loads(p.stdout)
    r = run()
    uid_map, gid_map, socket, mountinfo = r.stdout.split("@@\n")
    ids = plan["ids"]
    assert ids["map_range"] is has_range and plan["package_broker"] is has_range, plan
    for got, inside, outside in ((id_map(uid_map), ids["uid"], ids["host_uid"]),
                                 (id_map(gid_map), ids["gid"], ids["host_gid"])):
        assert (inside, outside, 1) in got, got
        if ids["map_range"]:
            assert sum(n for _, _, n in got) == 65536, got
        else:
            assert got == [(inside, outside, 1)], got
    assert socket.strip() == ("socket" if plan["package_broker"] else "none")
    if plan["package_broker"]:
        assert plan["broker"]["caps"] == BROKER_CAPS
        assert plan["broker"]["managers"]["apt-get"] == "/usr/bin/apt-get"
        assert plan["warnings"] == []
    else:
        assert "broker" not in plan
        warned = [w for w in plan["warnings"] if "sudo cannot install packages" in w]
        assert len(warned) == 1 and "no_new_privs" in warned[0], plan["warnings"]
        # the launch says what the plan said, once, and the runner adds nothing of its own
        assert r.stderr.count(warned[0]) == 1, r.stderr
    points = {line.split()[4] for line in mountinfo.splitlines() if line.strip()}
    for m in plan["mounts"]:
        if m["kind"] in ("bind", "tmpfs", "proc", "dev", "copy") and not m["optional"]:
            assert m["dest"] in points, (m, sorted(points))
    assert "/run/csandbox" in points


def test_package_broker_on_the_default_is_a_layer_over_the_host():
    """--package-broker with no root of its own: the host's view gets a layer (see
    test_packages_default.py); the payload's own launch is unchanged until sudo."""
    r = subprocess.run([CSANDBOX, "exec", "--package-broker", "--", "test", "-S",
                        "/run/csandbox/packages.sock"], capture_output=True, text=True,
                       env=base_env(), stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr


def test_diff_run_on_an_image_has_csandboxs_sudo_on_its_path_and_says_so(profiles, tmp_path):  # noqa: F811
    profiles.add()
    import_busybox_image(profiles, tmp_path)
    env = profiles.env(CLAUDE_PROFILE_SANDBOX_IMAGE="sandbox-img")
    plan = profiles.plan(env=env)
    assert plan["package_broker"] is True
    dests = {m["dest"] for m in plan["mounts"]}
    assert {"/run/csandbox", "/run/csandbox/sudo", "/home/appuser/.local/bin/sudo"} <= dests
    assert any("sudo apt-get install -y NAME" in a for a in plan["argv"]), plan["argv"]
    shell_claude(profiles, "command -v sudo; sudo apt-get install x; echo status=$?\n")
    r = profiles.run(env=env)
    assert r.stdout.splitlines()[0] == "/home/appuser/.local/bin/sudo", r.stdout
    assert "runs only a package manager" not in r.stderr
    # The busybox image has no apt-get of its own: the broker says the image lacks it.
    assert "/usr/bin/apt-get" in r.stderr and "status=127" in r.stdout, (r.stdout, r.stderr)
    # Without an image there is no broker (the host's root is read-only).
    assert profiles.plan()["package_broker"] is False


def build_repo(dest):
    """A flat apt repository with csb-hello, whose postinst chowns a file to _apt."""
    pkg = os.path.join(dest, "build", "csb-hello")
    os.makedirs(os.path.join(pkg, "DEBIAN"))
    os.makedirs(os.path.join(pkg, "usr", "bin"))
    os.makedirs(os.path.join(pkg, "usr", "share", "csb-hello"))
    with open(os.path.join(pkg, "DEBIAN", "control"), "w") as f:
        f.write("Package: csb-hello\nVersion: 1.0\nArchitecture: all\nMaintainer: t <t@t>\n"
                "Description: csandbox test package\n")
    with open(os.path.join(pkg, "DEBIAN", "postinst"), "w") as f:
        f.write("#!/bin/sh\nset -e\ntouch /usr/share/csb-hello/owned\n"
                "chown _apt /usr/share/csb-hello/owned\n")
    os.chmod(os.path.join(pkg, "DEBIAN", "postinst"), 0o755)
    with open(os.path.join(pkg, "usr", "bin", "csb-hello"), "w") as f:
        f.write("#!/bin/sh\necho hello from a package\n")
    os.chmod(os.path.join(pkg, "usr", "bin", "csb-hello"), 0o755)
    repo = os.path.join(dest, "repo")
    os.makedirs(repo)
    deb = os.path.join(repo, "csb-hello_1.0_all.deb")
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", pkg, deb], check=True,
                   capture_output=True)
    subprocess.run(["dpkg-scanpackages", "-m", ".", "/dev/null"], cwd=repo, check=True,
                   stdout=open(os.path.join(repo, "Packages"), "w"), stderr=subprocess.DEVNULL)
    with open(os.path.join(dest, "local.list"), "w") as f:
        f.write("deb [trusted=yes] file:/srv/repo ./\n")
    return repo


def test_real_apt_get_installs_a_package_inside_an_image_session(tmp_path):
    assert os.path.exists(APT_BASE), f"{APT_BASE} is missing: run tests/setup-root as root"
    data = str(tmp_path / "data")
    r = subprocess.run([CSANDBOX, "image", "import", APT_BASE, "--name", "debian-apt",
                        "--quiet"], env=base_env(XDG_DATA_HOME=data), capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    repo = build_repo(str(tmp_path))
    r = session(data, "sudo() { /run/csandbox/sudo \"$@\"; };"
                      " sudo apt-get update -q && sudo apt-get install -y -q csb-hello &&"
                      " csb-hello && id -u _apt && ls -ln /usr/share/csb-hello/owned &&"
                      " grep -c '^Package: csb-hello' /var/lib/dpkg/status",
                image="debian-apt", timeout=300,
                *["--net", "none", "--ro-bind", repo, "/srv/repo",
                  "--ro-bind", str(tmp_path / "local.list"), "/etc/apt/sources.list",
                  "--tmpfs", "/etc/apt/sources.list.d"])
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    assert "hello from a package" in r.stdout
    out = r.stdout.splitlines()
    owned = [l for l in out if l.endswith("/usr/share/csb-hello/owned")]
    apt_uid = out[out.index("hello from a package") + 1]
    assert apt_uid not in ("0", "1000"), r.stdout
    assert owned and owned[0].split()[2] == apt_uid, r.stdout  # chowned through the range
    assert r.stdout.rstrip().endswith("1")


def test_real_apt_get_in_run_on_a_two_layer_image(profiles, tmp_path):  # noqa: F811
    """`run` on an image whose second layer brings a local repository, points apt at it and
    whites out the base's own sources: claude (here a shell script) runs `sudo apt-get
    install` and then the package's program, with no network beyond the test host."""
    assert os.path.exists(APT_BASE), f"{APT_BASE} is missing: run tests/setup-root as root"
    repo = build_repo(str(tmp_path))
    entries = [oci.directory("srv"), oci.directory("srv/repo"),
               oci.file("etc/apt/sources.list", "deb [trusted=yes] file:/srv/repo ./\n"),
               oci.whiteout("etc/apt/sources.list.d/0000debian.sources")]
    for name in sorted(os.listdir(repo)):
        with open(os.path.join(repo, name), "rb") as f:
            entries.append(oci.file(f"srv/repo/{name}", f.read()))
    with open(APT_BASE, "rb") as f:
        base = oci.Layer(None, "none", raw=f.read())
    layout = str(tmp_path / "layout")
    oci.write_layout(layout, [base, oci.Layer(entries, "gzip")])
    profiles.add()
    r = subprocess.run([CSANDBOX, "image", "import", layout, "--name", "debian-local",
                        "--quiet"], env=profiles.env(), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    shell_claude(profiles, "set -e; sudo apt-get update -q >/dev/null;"
                           " sudo apt-get install -y -q csb-hello >/dev/null; csb-hello; id -un\n")
    r = profiles.run(env=profiles.env(CLAUDE_PROFILE_SANDBOX_IMAGE="debian-local"),
                     timeout=300)
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    assert r.stdout.splitlines() == ["hello from a package", "appuser"], r.stdout


def test_a_session_that_rewrites_the_package_manager_gets_only_the_brokers_root(store,
                                                                                 tmp_path):
    """The image's files are the session's own (the host user owns the store), so a session
    can replace apt-get and have sudo run it: the allowlist keeps sudo to its purpose, it is
    not the boundary. The boundary is what the broker holds: uid 0 of the namespace with
    the nine capabilities, no_new_privs and the filter; no mount, and a read-only bind of a
    host file stays read-only."""
    host_file = tmp_path / "host-file"
    host_file.write_text("host\n")
    r = session(store, "cat >/usr/bin/apt-get <<'X'\n#!/bin/sh\nid -u\n"
                       "grep -E '^CapEff:' /proc/self/status\n"
                       "echo pwned >/ro/host-file 2>/dev/null && echo WROTE || echo read-only\n"
                       "mount -o remount,rw /ro/host-file 2>/dev/null && echo REMOUNTED"
                       " || echo no-remount\n"
                       "umount /ro/host-file 2>/dev/null && echo UNMOUNTED || echo no-umount\nX\n"
                       "/run/csandbox/sudo apt-get install x",
                *["--ro-bind", str(host_file), "/ro/host-file"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "CapEff:", BROKER_CAPS, "read-only", "no-remount",
                                "no-umount"], r.stdout
    assert host_file.read_text() == "host\n"
