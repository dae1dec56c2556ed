"""`csandbox doctor`: each check done for real, each failure with its fix."""
import json
import os
import subprocess

import pytest

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
    for what in ("user", "openat2", "network", "egress", "--map-range", "claude"):
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


def test_doctor_names_a_claude_that_is_there_but_cannot_run(tmp_path):
    claude = tmp_path / "claude"
    claude.write_text("#!/bin/sh\n")
    claude.chmod(0o644)
    r = doctor(env=base_env(CLAUDE_PROFILE_CLAUDE_BIN=str(claude)))
    assert r.returncode == 1
    line = lines(r)["claude"]
    assert line.startswith("FAIL") and f"claude is installed at {claude}" in line, line
    assert f"chmod +x {claude}" in line and "not installed" not in line, line


def test_doctor_sees_openat2_refused_under_an_old_container_profile(csb):
    outer = [CSANDBOX, "exec", "--seccomp", csb.no_openat2_profile(),
             "--ro-bind", CSANDBOX, CSANDBOX, "--ro-bind", PROBE, PROBE, "--"]
    r = doctor(wrap=outer)
    got = lines(r)
    assert got["openat2"].startswith("ok") and "refused here" in got["openat2"]


def outer_profile(csb, name, calls):
    path = os.path.join(csb.basetemp, f"doctor-deny-{name}.json")
    with open(path, "w") as f:
        json.dump({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [
            {"names": calls, "action": "SCMP_ACT_ERRNO", "errnoRet": 1}]}, f)
    return path


# Cells where a step of the launch is refused from outside, as container engines' and
# AppArmor's restrictions do: doctor's verdict must be the launch's own outcome.
CELLS = {
    "hostname": ["sethostname"],
    "mount-attrs": ["mount_setattr"],
    "pivot": ["pivot_root"],
    "new-mounts": ["fsopen", "fsmount", "open_tree", "move_mount", "mount"],
}


@pytest.mark.parametrize("cell", sorted(CELLS))
@pytest.mark.parametrize("net", ["none", "pasta"])
def test_doctor_verdict_is_the_launchs_outcome(csb, cell, net):
    outer = [CSANDBOX, "exec", "--seccomp", outer_profile(csb, cell, CELLS[cell]),
             "--ro-bind", CSANDBOX, CSANDBOX, "--ro-bind", PROBE, PROBE, "--"]
    r = doctor(wrap=outer)
    key = "sandbox" if net == "none" else "network"
    verdict = lines(r)[key]
    launch = subprocess.run([*outer, CSANDBOX, "exec", "--net", net, "--", "/bin/sh", "-c",
                             "exit 0"], capture_output=True, text=True, timeout=TIMEOUT,
                            env=base_env(), stdin=subprocess.DEVNULL)
    if launch.returncode == 0:
        assert verdict.startswith("ok"), verdict
    else:
        assert verdict.startswith("FAIL"), (verdict, launch.stderr)
        assert r.returncode == 1
        # The same first failing step, in the same words.
        first = launch.stderr.strip().splitlines()[-1].removeprefix("csandbox: ")
        assert first[:60] in verdict, (verdict, launch.stderr)


def test_doctor_names_the_relay_where_the_sandbox_has_no_tun(csb):
    """Nested in csandbox, /dev/net/tun is not there: pasta cannot work, so `run` gets
    csandbox's relay, and doctor says so, with why and the fix for pasta's network, and
    passes. Without a network at all (the outer sandbox's default), it says that."""
    outer = [CSANDBOX, "exec", "--net", "host", "--ro-bind", CSANDBOX, CSANDBOX,
             "--ro-bind", PROBE, PROBE, "--"]
    r = doctor(wrap=outer)
    net = lines(r)["network"]
    assert r.returncode == 0, r.stdout + r.stderr
    assert net.startswith("ok") and "csandbox's relay" in net, net
    assert "/dev/net/tun cannot be opened" in net and "--dev-bind /dev/net/tun" in net, net
    outer = [CSANDBOX, "exec", "--ro-bind", CSANDBOX, CSANDBOX, "--ro-bind", PROBE, PROBE, "--"]
    r = doctor(wrap=outer)
    net = lines(r)["network"]
    assert net.startswith("ok") and "start without a network" in net, net
    assert "the csandbox this runs in has no network" in net, net
    assert "--net pasta" in net, net


def outer_launch(outer, args):
    return subprocess.run([*outer, CSANDBOX, "exec", *args, "--", "/bin/sh", "-c", "exit 0"],
                          capture_output=True, text=True, timeout=TIMEOUT, env=base_env(),
                          stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("cell", ["as-is", "no-nftables"])
def test_doctor_says_whether_an_allowlist_session_can_start_and_what_to_install(
        csb, tmp_path, cell):
    """The egress line is an allowlist launch's own outcome, tried in a throwaway session
    (no library is needed: csandbox sends the rules itself): netfilter's netlink socket
    refused (a container engine's filter) says nftables cannot be used. It does not make
    `open` sessions fail, so it does not count in the exit status."""
    outer = [CSANDBOX, "exec", "--ro-bind", CSANDBOX, CSANDBOX, "--ro-bind", PROBE, PROBE]
    if cell == "no-nftables":
        prof = tmp_path / "no-netfilter.json"
        outer += ["--seccomp", str(prof)]
        with open(prof, "w") as f:
            json.dump({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [
                {"names": ["socket"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1, "args": [
                    {"index": 0, "value": 16, "op": "SCMP_CMP_EQ"},      # AF_NETLINK
                    {"index": 2, "value": 12, "op": "SCMP_CMP_EQ"}]}]}, f)  # NETFILTER
    outer.append("--")
    r = doctor(wrap=outer)
    line = lines(r)["egress"]
    launch = outer_launch(outer, ["--egress", "allowlist"])
    if cell == "as-is":
        assert line.startswith("ok") and "nftables rules accepted" in line, r.stdout
        assert launch.returncode == 0, launch.stderr
        return
    assert line.startswith("no ") and "allowlist sessions cannot start here" in line, r.stdout
    assert launch.returncode == 125, launch.stderr
    want = "nftables cannot be used"
    assert want in line and want in launch.stderr, (line, launch.stderr)
    # an open session starts in the same place, and doctor's status does not count it
    assert outer_launch(outer, ["--net", "none"]).returncode == 0
    assert not any(l.startswith("FAIL") and "egress" in l for l in r.stdout.splitlines())


def inside_csandbox(args, env_vars, binds=(), chdir="/"):
    """csandbox ARGS inside an outer csandbox on the host's network, without /dev/net/tun
    (pasta cannot start there; csandbox's proxy can), the settings given by --setenv."""
    outer = [CSANDBOX, "exec", "--net", "host", "--ro-bind", CSANDBOX, CSANDBOX,
             "--ro-bind", PROBE, PROBE]
    for b in binds:
        outer += ["--bind", b, b]
    for k, v in env_vars.items():
        outer += ["--setenv", k, v]
    outer += ["--chdir", chdir]
    return subprocess.run([*outer, "--", CSANDBOX, *args], capture_output=True, text=True,
                          timeout=TIMEOUT, env=base_env(), stdin=subprocess.DEVNULL, cwd="/")


@pytest.mark.parametrize("egress", ["open", "allowlist", "none"])
def test_doctor_judges_with_the_profiles_egress_as_run_does(tmp_path, egress):
    """Where pasta cannot start (inside csandbox, no tun), `run` works with each
    CLAUDE_PROFILE_SANDBOX_EGRESS: open on csandbox's relay, allowlist through its proxy,
    none without a network; doctor, judging with the profile's setting, exits 0 for each,
    as `run` itself (with a fake claude) starts."""
    from test_run import Profiles

    profiles = Profiles(tmp_path)
    profiles.add("work")
    env = {k: v for k, v in profiles.env(CLAUDE_PROFILE_SANDBOX_EGRESS=egress).items()
           if k.startswith(("CLAUDE_PROFILE_", "HOME", "XDG_"))}
    r = inside_csandbox(["doctor", "work"], env, binds=[str(tmp_path)],
                        chdir=str(profiles.project))
    got = lines(r)
    assert got["profile"].startswith("ok"), r.stdout
    run = inside_csandbox(["run", "work", "--", "report"], env, binds=[str(tmp_path)],
                          chdir=str(profiles.project))
    assert r.returncode == 0, r.stdout
    if egress == "open":
        assert got["network"].startswith("ok") and "csandbox's relay" in got["network"], r.stdout
        assert "csandbox's relay" in run.stderr, run.stderr
    if egress == "allowlist":
        assert got["egress"].startswith("ok") and "profile's list" in got["egress"], r.stdout
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["argv"], run.stdout


def test_doctor_with_an_allowlist_and_no_network_fails_naming_it():
    env = base_env(CLAUDE_PROFILE_CLAUDE_BIN=PROBE, CLAUDE_PROFILE_SANDBOX_EGRESS="allowlist")
    r = doctor(env=env, wrap=("unshare", "-Urn"))
    line = lines(r)["egress"]
    assert r.returncode == 1, r.stdout
    assert line.startswith("FAIL") and "no network beyond loopback" in line, line


def test_doctor_names_a_profile_run_cannot_open():
    r = subprocess.run([CSANDBOX, "doctor", "no-such-profile"], capture_output=True, text=True,
                       timeout=TIMEOUT, env=base_env(CLAUDE_PROFILE_CLAUDE_BIN=PROBE),
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 1, r.stdout
    line = lines(r)["profile"]
    assert line.startswith("FAIL") and "'no-such-profile' does not exist" in line, line
    r = subprocess.run([CSANDBOX, "doctor", "a", "b"], capture_output=True, text=True,
                       timeout=TIMEOUT, env=base_env(), stdin=subprocess.DEVNULL)
    assert r.returncode == 125 and "unexpected argument `b`" in r.stderr, r.stderr
