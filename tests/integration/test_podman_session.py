"""podman and docker inside `csandbox run`: csandbox's own engine, bound into every session,
runs each container as a sandbox nested in the session. The host user's images are there
read-only; what a session pulls or builds goes to the profile's own store; a container gets
no more than the session has. The fake claude is a shell script (the session's program),
the image the busybox fixture imported into the user's store."""
import json
import re
import os
import shutil
import subprocess

import pytest

from conftest import CSANDBOX, PROBE, TIMEOUT
from test_run import Profiles, shell_claude

IMAGE = "bb:1"


@pytest.fixture
def profiles(tmp_path, rootfs):
    p = Profiles(tmp_path)
    tar = tmp_path / "bb.tar"
    subprocess.run(["tar", "-C", rootfs, "-cf", str(tar), "."], check=True)
    r = subprocess.run([CSANDBOX, "image", "import", str(tar), "--name", IMAGE, "--quiet"],
                       env=p.env(), capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    # No network is needed: the image is the host's, read-only in the session.
    p.extra_env["CLAUDE_PROFILE_SANDBOX_EGRESS"] = "none"
    p.add()
    return p


def session(profiles, script, env=None):
    shell_claude(profiles, script)
    return profiles.run(env=env)


def store_listing(root):
    out = []
    for d, dirs, files in os.walk(root):
        for f in sorted(files + dirs):
            st = os.lstat(os.path.join(d, f))
            out.append((os.path.join(d, f), st.st_mode, st.st_size, st.st_mtime_ns))
    return sorted(out)


def test_podman_and_docker_run_a_host_image_in_the_session(profiles):
    host_store = profiles.data / "csandbox" / "images"
    before = store_listing(host_store)
    r = session(profiles, f"podman run --rm {IMAGE} sh -c 'echo from-podman; id -u'\n"
                          f"docker run --rm {IMAGE} echo from-docker\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["from-podman", "0", "from-docker"], r.stdout
    assert store_listing(host_store) == before  # read-only: nothing written, nothing locked


@pytest.mark.parametrize("root", ["default", "image"])
def test_a_container_writes_the_work_tree_as_the_host_user(profiles, root):
    env = profiles.env(CLAUDE_PROFILE_SANDBOX_IMAGE=IMAGE) if root == "image" else None
    r = session(profiles, f"podman run --rm -v \"$PWD:/src\" -w /src {IMAGE} "
                          "sh -c 'echo made > out; echo done'\n"
                          f"podman run --rm --user \"$(id -u):$(id -g)\" -v \"$PWD:/src\" "
                          f"-w /src {IMAGE} sh -c 'echo again > out2'\n", env=env)
    assert r.returncode == 0, r.stderr
    for name in ("out", "out2"):
        st = os.stat(profiles.project / name)
        assert (st.st_uid, st.st_gid) == (os.getuid(), os.getgid()), name
    assert (profiles.project / "out").read_text() == "made\n"


def test_what_a_session_builds_stays_in_the_profiles_store(profiles):
    (profiles.project / "Containerfile").write_text(
        f"FROM {IMAGE}\nCOPY hello /hello\nRUN echo run-step >> /hello\n"
        "CMD [\"cat\", \"/hello\"]\n")
    (profiles.project / "hello").write_text("built inside\n")
    r = session(profiles, "podman build -q -t localhost/made:1 . >/dev/null && "
                          "podman run --rm localhost/made:1\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "built inside\nrun-step\n"
    # The next session of the profile still has it; the host's store never had it.
    r = session(profiles, "podman images --format '{{.Repository}}:{{.Tag}}'\n")
    assert r.returncode == 0, r.stderr
    assert "localhost/made:1" in r.stdout.split(), r.stdout
    r = subprocess.run([CSANDBOX, "image", "ls"], env=profiles.env(), capture_output=True,
                       text=True, timeout=TIMEOUT)
    assert "made" not in r.stdout, r.stdout
    assert (profiles.state() / "containers" / "images").is_dir()


def disk_mounts(lines):
    """(device, root) of each mount of a filesystem that existed before the sandbox: a new
    tmpfs, proc, devpts, mqueue or overlay instance holds nothing of the host by itself."""
    out = []
    for line in lines:
        pre, _, post = line.partition(" - ")
        f = pre.split()
        if post.split()[0] not in ("tmpfs", "proc", "devpts", "mqueue", "overlay", "sysfs"):
            out.append((f[2], f[3]))
    return out


def test_a_container_sees_nothing_of_the_host_beyond_the_session(profiles):
    """The probe run in the session and in a nested container: every mount of the container
    shows a part of one the session has; ids map to the session's user; the host's store
    and the engine are not in it; a bind of a host path the session lacks is refused."""
    secret = profiles.home / "secret"
    secret.write_text("host only\n")
    shutil.copy(PROBE, profiles.project / "probe")
    r = session(profiles, "./probe > session.json\n"
                          f"podman run --rm --network none -v \"$PWD:/w\" {IMAGE} /w/probe "
                          "> nested.json; echo nested=$?\n"
                          f"podman run --rm -v {secret}:/s {IMAGE} cat /s; echo secret=$?\n")
    assert r.returncode == 0, r.stderr
    assert "nested=0" in r.stdout, r.stdout + r.stderr
    # A path of the host the session does not have: refused as podman does (125).
    assert "secret=125" in r.stdout and "host only" not in r.stdout, r.stdout
    outer = json.loads((profiles.project / "session.json").read_text())
    nested = json.loads((profiles.project / "nested.json").read_text())
    assert nested["uid_map"].split()[:3] == ["0", "1000", "1"], nested["uid_map"]
    have = disk_mounts(outer["mountinfo"])
    for dev, root in disk_mounts(nested["mountinfo"]):
        assert any(d == dev and (root == r or root.startswith(r.rstrip("/") + "/"))
                   for d, r in have), (dev, root)
    views = "\n".join(line.split(" - ")[0].split()[4] for line in nested["mountinfo"])
    for hidden in ("/run/csandbox/store", "/run/csandbox/engine", "/home/appuser/.claude"):
        assert hidden not in views, hidden
    assert [i["name"] for i in nested["interfaces"]] == ["lo"], nested["interfaces"]


def test_a_container_in_the_session_fails_as_podman_does(profiles):
    r = session(profiles, "podman run --rm no/such:image true; echo unknown=$?\n"
                          f"podman run --rm {IMAGE} /no/such; echo missing=$?\n"
                          f"podman run --rm {IMAGE} sh -c 'exit 7'; echo status=$?\n"
                          f"podman run --rm --publish 80:80/udp {IMAGE} true; echo publish=$?\n"
                          f"podman run -d --name in {IMAGE} sh -c 'echo inside >/mark; "
                          "exec sleep 100' >/dev/null\n"
                          "i=0; while [ $i -lt 200 ] && ! podman exec in test -e /mark 2>/dev/null; do "
                          "i=$((i+1)); sleep 0.1; done\n"
                          "podman exec in cat /mark; echo exec=$?\n"
                          "podman exec in cat /proc/self/status | grep -E '^CapEff|^Seccomp:'\n"
                          "podman rm -f in >/dev/null\n")
    assert r.returncode == 0, r.stderr
    for want in ("unknown=125", "missing=127", "status=7", "publish=125", "inside", "exec=0"):
        assert want in r.stdout.split(), (want, r.stdout, r.stderr)
    assert "tcp" in r.stderr
    # exec inside a session: the container's namespaces joined, nothing gained
    assert re.search(r"^CapEff:\s+0+$", r.stdout, re.M), r.stdout
    assert re.search(r"^Seccomp:\s+2$", r.stdout, re.M), r.stdout
