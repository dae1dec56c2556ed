"""`csandbox doctor`: each check done for real, each failure with its fix."""
import os
import subprocess

from conftest import CSANDBOX, PROBE, TIMEOUT, base_env


def doctor(env=None, wrap=()):
    return subprocess.run([*wrap, CSANDBOX, "doctor"], capture_output=True, text=True,
                          timeout=TIMEOUT, env=env or base_env(CLAUDE_PROFILE_CLAUDE_BIN=PROBE),
                          stdin=subprocess.DEVNULL)


def lines(r):
    return {l.split()[1]: l for l in r.stdout.splitlines() if l.split()}


def test_doctor_passes_on_a_machine_that_can_run_sandboxes():
    r = doctor()
    assert r.returncode == 0, r.stdout + r.stderr
    got = lines(r)
    for what in ("user", "openat2", "network", "--map-range", "claude"):
        assert got[what].startswith("ok"), got[what]


def test_doctor_names_the_cause_when_user_namespaces_are_off():
    script = f"echo 0 > /proc/sys/user/max_user_namespaces && exec {CSANDBOX} doctor"
    r = subprocess.run(["unshare", "-Ur", "sh", "-c", script], capture_output=True, text=True,
                       timeout=TIMEOUT, env=base_env(CLAUDE_PROFILE_CLAUDE_BIN=PROBE),
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 1
    line = lines(r)["user"]
    assert line.startswith("FAIL") and "user.max_user_namespaces" in line and "sysctl" in line


def test_doctor_reports_missing_pasta_and_claude_with_their_fixes(tmp_path):
    r = doctor(env=base_env(PATH=str(tmp_path), CLAUDE_PROFILE_CLAUDE_BIN=None))
    assert r.returncode == 1
    got = lines(r)
    assert got["network"].startswith("FAIL") and "apt-get install passt" in got["network"]
    assert got["claude"].startswith("FAIL") and "npm install -g" in got["claude"]


def test_doctor_sees_openat2_refused_under_an_old_container_profile(csb):
    outer = [CSANDBOX, "exec", "--seccomp", csb.no_openat2_profile(),
             "--ro-bind", CSANDBOX, CSANDBOX, "--ro-bind", PROBE, PROBE, "--"]
    r = doctor(wrap=outer)
    got = lines(r)
    assert got["openat2"].startswith("ok") and "refused here" in got["openat2"]
