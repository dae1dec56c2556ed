"""Exit statuses, signal forwarding, and that nothing outlives a sandbox."""
import os
import signal

import pytest

import rootfs as rootfs_builder
from conftest import HOST_PROBE, read_line, procs_with, wait_until


@pytest.mark.parametrize("mode", ["host", "rootfs"])
@pytest.mark.parametrize("probe_args,status", [
    (["exit", "0"], 0),
    (["exit", "3"], 3),
    (["exit", "125"], 125),
    (["kill-self", "TERM"], 128 + signal.SIGTERM),
    (["kill-self", "KILL"], 128 + signal.SIGKILL),
    (["kill-self", "USR1"], 128 + signal.SIGUSR1),
], ids=["exit-0", "exit-3", "exit-125", "sigterm", "sigkill", "sigusr1"])
def test_exit_status_is_payloads(csb, rootfs, mode, probe_args, status):
    p = csb.run_probe(*probe_args, rootfs=rootfs if mode == "rootfs" else None)
    assert p.returncode == status, p.stderr


def test_non_executable_command_exits_126(csb, rootfs, tmp_path):
    p = csb.run(["--rootfs", rootfs, "--", "/not-executable"])
    assert p.returncode == 126, p.stderr
    script = tmp_path / "nx"
    script.write_text("#!/bin/sh\necho no\n")
    script.chmod(0o644)
    p = csb.run(["--ro-bind", str(script), "/run/nx", "--", "/run/nx"])
    assert p.returncode == 126, p.stderr
    assert p.stdout == ""


def test_directory_as_command_exits_126(csb, rootfs):
    p = csb.run(["--rootfs", rootfs, "--", "/etc"])
    assert p.returncode == 126, p.stderr


@pytest.mark.parametrize("command", ["/no/such/command", "csb-no-such-command"])
def test_missing_command_exits_127(csb, rootfs, command):
    assert csb.run(["--rootfs", rootfs, "--", command]).returncode == 127
    assert csb.run(["--", command]).returncode == 127


def test_bad_flag_exits_125(csb):
    p = csb.run(["--no-such-flag", "--", "/bin/true"])
    assert p.returncode == 125
    assert p.stderr.startswith("csandbox: ")


def test_command_found_through_default_path(csb, rootfs):
    p = csb.run(["--rootfs", rootfs, "--", "sh", "-c", "exit 7"])
    assert p.returncode == 7, p.stderr


def test_stdin_reaches_payload(csb, rootfs):
    p = csb.run(["--rootfs", rootfs, "--", "/bin/cat"], input="through stdin\n")
    assert p.returncode == 0, p.stderr
    assert p.stdout == "through stdin\n"


def _start_waiting(csb, rootfs, extra=()):
    proc = csb.popen(["--rootfs", rootfs, *extra, "--", "/probe", "wait-signal"])
    line = read_line(proc.stdout)
    if line != "ready\n":
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"payload not ready: {line!r} {out!r} {err!r}")
    return proc


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1,
                                 signal.SIGUSR2, signal.SIGWINCH, signal.SIGQUIT],
                         ids=lambda s: signal.Signals(s).name)
def test_signal_to_csandbox_is_forwarded_to_payload(csb, rootfs, sig):
    proc = _start_waiting(csb, rootfs)
    proc.send_signal(sig)
    try:
        out, err = proc.communicate(timeout=30)
    except Exception:
        proc.kill()
        proc.communicate()
        raise
    name = signal.Signals(sig).name
    assert out.decode() == f"{name}\n", err.decode()
    assert proc.returncode == 128 + sig, err.decode()


def test_sigterm_to_csandbox_exits_143(csb, rootfs):
    proc = _start_waiting(csb, rootfs)
    proc.terminate()
    out, err = proc.communicate(timeout=30)
    assert out == b"SIGTERM\n"
    assert proc.returncode == 143, err.decode()


@pytest.mark.parametrize("mode", ["host", "rootfs"])
def test_sigkill_of_csandbox_leaves_nothing_running(csb, rootfs, marker, mode):
    if mode == "rootfs":
        args = ["--rootfs", rootfs, "--", "/probe"]
    else:
        args = ["--ro-bind", csb.probe_path, HOST_PROBE, "--", HOST_PROBE]
    proc = csb.popen([*args, "spawn-sleeper", "300", marker])
    try:
        assert read_line(proc.stdout) == "ready\n", proc.stderr.read1().decode()
        # csandbox, its pid 1, the payload and the grandchild sleeper carry the marker.
        inside = [p for p in procs_with(marker) if p != proc.pid]
        assert len(inside) >= 2, inside
        proc.kill()
        proc.wait(timeout=30)
        left = wait_until(lambda: not procs_with(marker))
        assert left, f"still running after SIGKILL of csandbox: {procs_with(marker)}"
    finally:
        for pid in procs_with(marker):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_payload_exit_ends_its_leftover_children(csb, rootfs, marker):
    p = csb.run(["--rootfs", rootfs, "--", "/probe", "spawn-sleeper", "120", marker, "--exit"],
                timeout=60)
    try:
        assert p.returncode == 0, p.stderr
        assert p.stdout == "ready\n"
        assert wait_until(lambda: not procs_with(marker)), procs_with(marker)
    finally:
        for pid in procs_with(marker):
            os.kill(pid, signal.SIGKILL)


def _own_processes():
    result = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.stat(f"/proc/{name}").st_uid != os.getuid():
                continue
            with open(f"/proc/{name}/cmdline", "rb") as f:
                result[int(name)] = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
    return result


def _mountinfo():
    with open("/proc/self/mountinfo") as f:
        return f.read()


def test_many_runs_leave_no_process_or_mount_behind(csb, rootfs, tmp_path):
    bound = tmp_path / "bound"
    bound.mkdir()
    procs_before = _own_processes()
    mounts_before = _mountinfo()
    root_before = rootfs_builder.snapshot(rootfs)
    failures = []
    for i in range(200):
        if i % 2:
            p = csb.run(["--rootfs", rootfs, "--bind", str(bound), "/mnt/b", "--", "/probe",
                         "exit", "0"])
        else:
            p = csb.run_probe("exit", "0", opts=["--ro-bind", str(bound), "/run/b"])
        if p.returncode != 0:
            failures.append((i, p.returncode, p.stderr))
    assert not failures, failures[:3]
    after = _own_processes()
    leaked = {pid: cmd for pid, cmd in after.items()
              if pid not in procs_before and pid != os.getpid()
              and ("csandbox" in cmd or "probe" in cmd)}
    assert not leaked, leaked
    assert _mountinfo() == mounts_before
    assert rootfs_builder.snapshot(rootfs) == root_before
    assert os.listdir(bound) == []
