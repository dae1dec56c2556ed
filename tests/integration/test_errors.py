"""csandbox's own errors: exit 125, `csandbox: ` lines naming the flag or file, nothing
created, nothing left running."""
import os
import re
import subprocess

import pytest

import rootfs as rootfs_builder
from conftest import HOST_PROBE


def _assert_error(p, *names):
    assert p.returncode == 125, f"exit {p.returncode}\n{p.stderr}"
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    assert lines, "no message on stderr"
    assert lines[0].startswith("csandbox: "), p.stderr
    for name in names:
        assert name in p.stderr, f"{name!r} not named in:\n{p.stderr}"
    assert p.stdout == ""


@pytest.fixture
def workdir(tmp_path):
    """An empty cwd for the failing command; it must stay empty."""
    d = tmp_path / "cwd"
    d.mkdir()
    yield d
    assert os.listdir(d) == [], "a failing csandbox created files in its cwd"


def test_unknown_flag_is_named(csb, workdir):
    _assert_error(csb.run(["--frobnicate", "--", "/bin/true"], cwd=workdir), "--frobnicate")


@pytest.mark.parametrize("args,flag", [
    (["--bind", "/usr"], "--bind"),
    (["--hostname"], "--hostname"),
    (["--uid"], "--uid"),
    (["--setenv", "ONLY_NAME"], "--setenv"),
    (["--symlink", "/x"], "--symlink"),
])
def test_missing_argument_names_the_flag(csb, workdir, args, flag):
    _assert_error(csb.run(args, cwd=workdir), flag)


def test_missing_rootfs_is_named_and_not_created(csb, tmp_path, workdir):
    missing = str(tmp_path / "no-rootfs")
    _assert_error(csb.run(["--rootfs", missing, "--", "/probe"], cwd=workdir), missing)
    assert not os.path.exists(missing)


def test_missing_bind_source_is_named_and_nothing_created(csb, rootfs, tmp_path, workdir):
    missing = str(tmp_path / "no-source")
    before = rootfs_builder.snapshot(rootfs)
    for flag in ("--bind", "--ro-bind"):
        p = csb.run(["--rootfs", rootfs, "--dir", "/newdir", flag, missing, "/mnt/x", "--",
                     "/probe"], cwd=workdir)
        _assert_error(p, missing)
    assert not os.path.exists(missing)
    assert rootfs_builder.snapshot(rootfs) == before


@pytest.mark.parametrize("flag", ["--bind", "--ro-bind", "--tmpfs", "--dir"])
def test_destination_with_dotdot_is_refused(csb, tmp_path, workdir, flag):
    dest = "/run/../etc/x"
    args = [flag, str(tmp_path), dest] if "bind" in flag else [flag, dest]
    _assert_error(csb.run([*args, "--", "/bin/true"], cwd=workdir), dest)


@pytest.mark.parametrize("flag", ["--bind", "--tmpfs", "--symlink"])
def test_relative_destination_is_refused(csb, tmp_path, workdir, flag):
    if flag == "--bind":
        args = [flag, str(tmp_path), "run/rel"]
    elif flag == "--symlink":
        args = [flag, "/x", "run/rel"]
    else:
        args = [flag, "run/rel"]
    p = csb.run([*args, "--", "/bin/true"], cwd=workdir)
    _assert_error(p)
    assert "run/rel" in p.stderr or flag in p.stderr, p.stderr


def test_unreadable_seccomp_file_is_named(csb, tmp_path, workdir):
    f = tmp_path / "profile.json"
    f.write_text('{"defaultAction": "SCMP_ACT_ALLOW"}')
    f.chmod(0)
    _assert_error(csb.run(["--seccomp", str(f), "--", "/bin/true"], cwd=workdir), str(f))
    missing = str(tmp_path / "missing.json")
    _assert_error(csb.run(["--seccomp", missing, "--", "/bin/true"], cwd=workdir), missing)


def test_invalid_seccomp_json_names_path_and_position(csb, tmp_path, workdir):
    f = tmp_path / "bad.json"
    f.write_text('{\n  "defaultAction": "SCMP_ACT_ALLOW",\n  "syscalls": [ oops ]\n}\n')
    p = csb.run(["--seccomp", str(f), "--", "/bin/true"], cwd=workdir)
    _assert_error(p, str(f))
    assert re.search(r"line 3, column \d+|\b3:\d+", p.stderr), p.stderr


def test_seccomp_json_with_unknown_syscall_action_is_refused(csb, tmp_path, workdir):
    f = tmp_path / "weird.json"
    f.write_text('{"defaultAction": "SCMP_ACT_NO_SUCH_THING"}')
    _assert_error(csb.run(["--seccomp", str(f), "--", "/bin/true"], cwd=workdir), str(f))


def test_unknown_seccomp_profile_name_or_net_mode_is_refused(csb, workdir):
    _assert_error(csb.run(["--net", "bogus", "--", "/bin/true"], cwd=workdir), "--net")


def test_missing_user_namespaces_names_cause_and_fix(csb, workdir):
    """Inside an outer user namespace whose user.max_user_namespaces is 0, csandbox cannot
    create its own: the message names the limit (and says what to do)."""
    script = 'echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"'
    import subprocess
    p = subprocess.run(["unshare", "-Ur", "sh", "-c", script, "sh", csb.binary, "exec",
                        "--ro-bind", csb.probe_path, HOST_PROBE, "--", HOST_PROBE, "exit", "0"],
                       capture_output=True, text=True, timeout=30, cwd=workdir)
    _assert_error(p, "max_user_namespaces")
    assert len(p.stderr.strip()) > len("csandbox: ") + 40, "no fix offered"


def test_map_range_in_a_user_namespace_without_the_ids_names_it(csb):
    """In a container or another sandbox whose uid map holds one id, no /etc/subuid entry
    could help: the error says the ids do not exist here (not "ask an administrator")."""
    r = subprocess.run(["unshare", "-Urm", csb.binary, "exec", "--map-range", "--", "/bin/true"],
                       capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert r.returncode == 125, r.stderr
    assert "/proc/self/uid_map maps 1 ids" in r.stderr and "drop --map-range" in r.stderr
    assert "usermod" not in r.stderr and "seccomp" not in r.stderr, r.stderr


def test_map_range_inside_a_sandbox_names_no_new_privs(csb):
    """Inside csandbox (no_new_privs, as in bubblewrap or a no-new-privileges container) the
    setuid helpers run without their privilege: named, instead of blaming /etc/subuid or a
    seccomp filter."""
    r = csb.run(["--map-range", "--", "/bin/true"], tier="csandbox")
    assert r.returncode == 125, r.stderr
    assert "no_new_privs" in r.stderr and "or drop --map-range" in r.stderr, r.stderr
    assert "/etc/subuid" not in r.stderr and "seccomp filter" not in r.stderr, r.stderr


def test_a_root_with_a_file_at_tmp_names_it_and_the_fix(csb, make_rootfs):
    root = make_rootfs()
    os.rmdir(os.path.join(root, "tmp"))
    with open(os.path.join(root, "tmp"), "w") as f:
        f.write("not a dir\n")
    p = csb.run(["--rootfs", root, "--", "/bin/true"])
    _assert_error(p, "/tmp is not a directory inside the sandbox",
                  "RUN rm -f /tmp && mkdir -p -m 1777 /tmp")


def test_proc_bind_given_inline_is_the_proc_mode_not_a_bind(csb):
    p = csb.run(["--proc=bind", "--", "/bin/true"])
    assert p.returncode == 0, p.stderr
