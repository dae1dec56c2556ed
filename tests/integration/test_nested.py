"""The nested tier: key behaviours inside an outer user namespace whose /proc has an
overmount (as container engines mask it, so a fresh proc mount is refused), and inside an
outer csandbox (host root, default seccomp)."""
import os
import subprocess

import pytest

import rootfs as rootfs_builder
from conftest import MASK_PROC, TIMEOUT, ZERO_CAPS, base_env, parse_json


def _probe(csb, tier, opts=(), probe_args=("report",), rootfs=None, share=()):
    p = csb.run(csb.probe_argv(opts, probe_args, rootfs), tier=tier, share=share)
    return p, parse_json(p)


@pytest.mark.parametrize("mode", ["host", "rootfs"])
def test_nested_payload_is_confined(csb, rootfs, tier, mode):
    p, r = _probe(csb, tier, rootfs=rootfs if mode == "rootfs" else None)
    assert r["caps"] == ZERO_CAPS
    assert r["no_new_privs"] == 1
    assert r["seccomp"] == 2
    assert r["pid"] == 2
    assert r["blocked"]["tiocsti"] == "EPERM"
    assert r["blocked"]["tiocsti_high"] == "EPERM"
    assert r["blocked"]["keyctl"] == "EPERM"
    if tier == "direct":
        assert p.stderr == ""


@pytest.mark.parametrize("mode", ["host", "rootfs"])
def test_masked_proc_falls_back_to_read_only_bind_and_says_so_once_per_machine(csb, rootfs, mode,
                                                                               tmp_path):
    state = tmp_path / "state"
    env = base_env(XDG_STATE_HOME=str(state))
    argv = csb.probe_argv((), ("report",), rootfs if mode == "rootfs" else None)
    p = csb.run(argv, tier="userns", env=env)
    r = parse_json(p)
    proc_lines = [l for l in p.stderr.splitlines() if "/proc" in l]
    assert len(proc_lines) == 1, p.stderr
    # The cause and the fix where this runs (a plain unshare, not a container engine), and
    # that it will not be repeated.
    assert "a plain unshare" in proc_lines[0], p.stderr
    assert "unshare --fork --pid --mount-proc" in proc_lines[0], p.stderr
    assert "--security-opt" not in proc_lines[0], p.stderr
    assert "shown once on this machine" in proc_lines[0], p.stderr
    proc = [l for l in r["mountinfo"] if l.split()[4] == "/proc"]
    assert proc, r["mountinfo"]
    assert "ro" in proc[-1].split()[5].split(","), proc
    assert os.listdir(state / "csandbox" / "notes") == ["proc-bind"]
    # The next launch on this machine says nothing, and still binds the outer /proc.
    p = csb.run(argv, tier="userns", env=env)
    r = parse_json(p)
    assert "/proc" not in p.stderr and "note" not in p.stderr, p.stderr
    proc = [l for l in r["mountinfo"] if l.split()[4] == "/proc"]
    assert proc and "ro" in proc[-1].split()[5].split(","), proc


def test_csandbox_inside_csandbox_gets_fresh_proc_and_namespaces(csb):
    p, r = _probe(csb, "csandbox")
    assert p.stderr == ""
    assert r["procs"] == [1, 2]
    assert r["blocked"]["clone3"] == "ENOSYS"


def test_nested_ro_and_rw_binds(csb, tier, tmp_path):
    rw = tmp_path / "rw"
    rw.mkdir()
    opts = ["--ro-bind", str(rw), "/run/ro", "--bind", str(rw), "/run/rw"]
    _, r = _probe(csb, tier, opts, ("write", "/run/ro/x"))
    assert r["errno"] == "EROFS"
    _, r = _probe(csb, tier, opts, ("write", "/run/rw/y", "nested\n"))
    assert r["errno"] == "ok"
    assert (rw / "y").read_text() == "nested\n"
    assert sorted(os.listdir(rw)) == ["y"]


def test_nested_bind_destination_symlink_cannot_escape_rootfs(csb, make_rootfs, outside, tier,
                                                              tmp_path):
    root = make_rootfs("etc-dotdot", outside, mirror=True)
    src = tmp_path / "src"
    src.mkdir()
    (src / "payload").write_text("bound\n")
    before = rootfs_builder.snapshot(outside)
    _, r = _probe(csb, tier, ["--ro-bind", str(src), "/etc/sub", "--dir", "/etc/d"],
                  ("read", "/etc/sub/payload"), rootfs=root, share=[outside])
    assert r["content"] == "bound\n"
    assert rootfs_builder.snapshot(outside) == before


def test_nested_exit_status_and_missing_command(csb, rootfs, tier):
    p = csb.run(csb.probe_argv((), ("exit", "5"), rootfs), tier=tier)
    assert p.returncode == 5, p.stderr
    p = csb.run(["--rootfs", rootfs, "--", "/no/such"], tier=tier)
    assert p.returncode == 127, p.stderr


def test_proc_fresh_refuses_where_the_kernel_does_and_names_the_fix(csb):
    """--proc=fresh: no silent fallback to the outer /proc; the error says why and what to
    pass instead."""
    p = csb.run(csb.probe_argv(["--proc=fresh"]), tier="userns")
    assert p.returncode == 125, p.stdout
    assert "--proc=fresh" in p.stderr and "overmounts" in p.stderr, p.stderr
    assert "unshare --fork --pid --mount-proc" in p.stderr and "--proc=bind" in p.stderr, p.stderr
    assert "--security-opt" not in p.stderr, p.stderr
    assert p.stdout == "", "the payload must not have started"


@pytest.mark.parametrize("tier_", ["direct", "userns"])
def test_proc_bind_shows_the_outer_pid_namespace_read_only(csb, tier_):
    p, r = _probe(csb, tier_, ["--proc", "bind"])
    assert p.returncode == 0, p.stderr
    assert "refused" not in p.stderr, "bind was asked for: no fallback message"
    assert len(r["procs"]) > 2 and r["procs"] != [1, 2], r["procs"]
    proc = [l for l in r["mountinfo"] if l.split()[4] == "/proc"]
    assert proc and "ro" in proc[-1].split()[5].split(","), proc


def test_proc_none_is_an_empty_read_only_proc(csb):
    p, r = _probe(csb, "direct", ["--proc=none"], ("ls", "/proc"))
    assert p.returncode == 0, p.stderr
    assert r == {"errno": "ok", "entries": []}
    _, r = _probe(csb, "direct", ["--proc=none"], ("write", "/proc/x"))
    assert r["errno"] == "EROFS"


def test_proc_flag_value_is_checked(csb):
    p = csb.run(["--proc=maybe", "--", "/bin/true"])
    assert p.returncode == 125
    assert "--proc `maybe`: expected auto, fresh, bind or none" in p.stderr


def test_a_pod_gets_the_pods_proc_fix(csb, tmp_path):
    """The same masked /proc seen from a Kubernetes pod (its service address in the
    environment): the fix is the pod's securityContext, not an engine's flag."""
    env = base_env(XDG_STATE_HOME=str(tmp_path / "state"), KUBERNETES_SERVICE_HOST="10.96.0.1")
    p = csb.run(csb.probe_argv((), ("report",)), tier="userns", env=env)
    assert p.returncode == 0, p.stderr
    proc_lines = [l for l in p.stderr.splitlines() if "/proc" in l]
    assert len(proc_lines) == 1, p.stderr
    assert "procMount to Unmasked" in proc_lines[0] and "pod" in proc_lines[0], p.stderr
    assert "--security-opt" not in proc_lines[0] and "unshare" not in proc_lines[0], p.stderr


def test_nested_csandbox_under_a_bound_proc_names_the_unshare_fix(csb, tmp_path):
    """A plain unshare whose /proc has a locked overmount: the outer csandbox binds that /proc,
    a csandbox inside it cannot write its id maps, and says why with the fix for a plain
    unshare (a /proc of its own), not a container engine's flags."""
    inner = [csb.binary, "exec", "--", "true"]
    outer = [csb.binary, "exec", "--ro-bind", csb.binary, csb.binary, "--uid", "1000", "--",
             *inner]
    argv = ["unshare", "-Urm", "sh", "-c", MASK_PROC, "sh", *outer]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT,
                       env=base_env(XDG_STATE_HOME=str(tmp_path)), stdin=subprocess.DEVNULL,
                       cwd="/")
    assert p.returncode == 125, p.stderr
    assert "This /proc is an outer pid namespace's" in p.stderr, p.stderr
    assert "a plain unshare" in p.stderr, p.stderr
    assert "unshare --fork --pid --mount-proc" in p.stderr, p.stderr
    assert "--security-opt" not in p.stderr, p.stderr


def test_doctor_in_a_plain_unshare_gives_its_proc_fix(csb, tmp_path):
    argv = ["unshare", "-Urm", "sh", "-c", MASK_PROC, "sh", csb.binary, "doctor"]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT,
                       env=base_env(XDG_STATE_HOME=str(tmp_path)), stdin=subprocess.DEVNULL,
                       cwd="/")
    notes = [l for l in p.stdout.splitlines() if l.split()[:2] == ["note", "proc"]]
    assert len(notes) == 1, p.stdout
    assert "unshare --fork --pid --mount-proc" in notes[0], notes
    assert "--security-opt" not in notes[0] and "container" not in notes[0], notes
