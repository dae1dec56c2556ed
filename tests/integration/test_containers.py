"""Where csandbox itself runs confined — under a container engine's seccomp profile, in a
container without /dev/net/tun, inside another csandbox — emulated here: each refusal is
either worked around or named with the fix that applies there."""
import json
import os
import subprocess

import pytest

from conftest import HOST_PROBE, TIMEOUT, base_env

TEST_HOST = os.environ.get("CSANDBOX_TEST_HOST")


def outer_seccomp(csb, name, refused, args=()):
    """An OCI profile that allows everything but the given calls (EPERM; with args, only
    those calls), as a container engine's default profile refuses them."""
    path = os.path.join(csb.basetemp, f"{name}.json")
    rule = {"names": refused, "action": "SCMP_ACT_ERRNO", "errnoRet": 1}
    if args:
        rule["args"] = list(args)
    with open(path, "w") as f:
        json.dump({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [rule]}, f)
    return path


def nested(csb, inner, outer=()):
    """csandbox exec INNER inside an outer csandbox (host network, the binary bound in)."""
    return csb.run(["--net", "host", *outer, "--ro-bind", csb.binary, "/run/csandbox", "--",
                    "/run/csandbox", "exec", *inner])


def test_refused_sethostname_keeps_the_outer_hostname_said_by_doctor_only(csb):
    profile = outer_seccomp(csb, "no-sethostname", ["sethostname"])
    r = nested(csb, ["--hostname", "boxy", "--", "/bin/cat", "/proc/sys/kernel/hostname"],
               outer=["--hostname", "outer", "--seccomp", profile])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "outer\n"
    # Cosmetic: no line on a session's terminal at every launch.
    assert "hostname" not in r.stderr, r.stderr
    # doctor says it once, with its cause, and does not count the hostname as set.
    r = csb.run(["--net", "host", "--hostname", "outer", "--seccomp", profile, "--ro-bind",
                 csb.binary, "/run/csandbox", "--", "/run/csandbox", "doctor"])
    lines = r.stdout.splitlines()
    sandbox = [l for l in lines if l.split()[:2] == ["ok", "sandbox"]]
    assert len(sandbox) == 1, r.stdout + r.stderr
    assert "hostname," not in sandbox[0] and "not the hostname" in sandbox[0], sandbox
    notes = [l for l in lines if l.split()[:2] == ["note", "hostname"]]
    assert len(notes) == 1, r.stdout
    assert "refused" in notes[0] and "CAP_SYS_ADMIN" in notes[0], notes
    assert "hostname" not in r.stderr, r.stderr
    # Without the refusal the name is set as asked, and doctor notes nothing of it.
    r = nested(csb, ["--hostname", "boxy", "--", "/bin/cat", "/proc/sys/kernel/hostname"])
    assert (r.returncode, r.stdout, r.stderr) == (0, "boxy\n", "")
    r = csb.run(["--net", "host", "--ro-bind", csb.binary, "/run/csandbox", "--",
                 "/run/csandbox", "doctor"])
    assert "id maps, hostname," in r.stdout and "note  hostname" not in r.stdout, r.stdout


def test_refused_loopback_up_names_the_filter_and_its_fix(csb):
    # A capability-needing step refused inside the new namespaces, as a container engine's
    # filter (or AppArmor's userns restriction) does: ioctl(SIOCSIFFLAGS) on lo.
    profile = outer_seccomp(csb, "no-ifflags", ["ioctl"],
                            [{"index": 1, "value": 0x8914, "op": "SCMP_CMP_EQ"}])
    r = nested(csb, ["--", "true"], outer=["--seccomp", profile])
    assert r.returncode == 125, r.stderr
    assert "bring up loopback: set lo up: Operation not permitted" in r.stderr, r.stderr
    # The filter is the outer csandbox's, not a container engine's: its flag is the fix.
    assert "seccomp filter" in r.stderr and "the outer csandbox's" in r.stderr, r.stderr
    assert "start the outer csandbox with --seccomp default" in r.stderr, r.stderr
    assert "--security-opt" not in r.stderr, r.stderr


# Run "$@" as on a host without the tun module: a new root at $NEWROOT without the container
# marks this test machine may carry (/.dockerenv), own pid and cgroup namespaces, /dev/net
# empty.
HOST_WITHOUT_TUN = r"""set -e
PATH=$PATH:/usr/sbin:/sbin
r=$NEWROOT
mount -t tmpfs none "$r"
for d in /*; do
        n=${d#/}
        if [ -L "$d" ]; then cp -P "$d" "$r/$n"
        elif [ -d "$d" ]; then mkdir "$r/$n"; mount --rbind "$d" "$r/$n"
        fi
done
mount -t tmpfs none "$r/dev/net"
mkdir "$r/.old"
cd "$r"
pivot_root . .old
umount -l /.old
cd /
exec "$@"
"""

# Run "$@" as in a podman container: /run/.containerenv, and /dev/net/tun missing or (with
# TUN=nodev) present on a nodev mount, as a volume would be.
CONTAINER = r"""set -e
mount -t tmpfs none /run
touch /run/.containerenv /run/tun
if [ "$TUN" = nodev ]; then
        mount --bind /dev/net/tun /run/tun
        mount -o remount,bind,nodev /run/tun
fi
mount -t tmpfs none /dev/net
if [ "$TUN" = nodev ]; then touch /dev/net/tun && mount --bind /run/tun /dev/net/tun; fi
exec "$@"
"""


RELAY_NOTE = "csandbox: the session's network is csandbox's relay, TCP and DNS only"


def pasta_in(csb, wrapper, extra_env=None):
    """`exec --net pasta` there: the session gets csandbox's relay, and the note names why
    and the fix for the full network."""
    env = base_env(**(extra_env or {}))
    r = subprocess.run(["unshare", "-Urmpf", "-C", "--mount-proc", "sh", "-c", wrapper, "sh",
                        csb.binary, "exec", "--net", "pasta", "--", "true"],
                       capture_output=True, text=True, timeout=TIMEOUT, env=env,
                       stdin=subprocess.DEVNULL, cwd="/")
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert r.stderr.count(RELAY_NOTE) == 1, r.stderr
    return r.stderr


def test_tun_missing_on_a_host_names_modprobe(csb, tmp_path):
    err = pasta_in(csb, HOST_WITHOUT_TUN, {"NEWROOT": str(tmp_path)})
    assert "/dev/net/tun cannot be opened (No such file or directory)" in err, err
    assert "sudo modprobe tun" in err and "--device" not in err, err


def test_tun_missing_in_a_container_names_the_device_flag(csb):
    err = pasta_in(csb, CONTAINER)
    assert "This runs in a container without the device" in err, err
    assert "--device /dev/net/tun" in err and "modprobe" not in err, err


def test_tun_on_a_nodev_mount_in_a_container_names_the_device_flag(csb):
    err = pasta_in(csb, CONTAINER, {"TUN": "nodev"})
    assert "/dev/net/tun is not usable by your user (Permission denied)" in err, err
    assert "--device /dev/net/tun" in err and "chmod" not in err, err


def test_tun_missing_inside_csandbox_names_dev_bind(csb):
    r = nested(csb, ["--net", "pasta", "--", "true"])
    assert r.returncode == 0, r.stderr
    assert r.stderr.count(RELAY_NOTE) == 1, r.stderr
    assert "This runs inside csandbox" in r.stderr
    assert "--dev-bind /dev/net/tun /dev/net/tun" in r.stderr and "modprobe" not in r.stderr


def test_tun_bound_nodev_inside_csandbox_names_dev_bind(csb):
    r = nested(csb, ["--net", "pasta", "--", "true"],
               outer=["--ro-bind", "/dev/net/tun", "/dev/net/tun"])
    assert r.returncode == 0, r.stderr
    assert r.stderr.count(RELAY_NOTE) == 1, r.stderr
    assert "whose binds are nodev" in r.stderr
    assert "--dev-bind /dev/net/tun /dev/net/tun" in r.stderr and "chmod" not in r.stderr


def test_dev_bind_gives_a_nested_csandbox_its_pasta_network(csb):
    plan = csb.plan(["--dev-bind", "/dev/net/tun", "/dev/net/tun", "true"])
    tun = [m for m in plan["mounts"] if m["dest"] == "/dev/net/tun"]
    assert tun and tun[0]["kind"] == "bind" and tun[0]["devices"] is True, tun
    r = nested(csb, ["--net", "pasta", "--ro-bind", HOST_PROBE, HOST_PROBE, "--", HOST_PROBE,
                     "connect", TEST_HOST, "8080"],
               outer=["--dev-bind", "/dev/net/tun", "/dev/net/tun",
                      "--ro-bind", csb.probe_path, HOST_PROBE])
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["errno"] == "ok"
    # A device on a plain bind stays unusable: nodev is the default.
    r = csb.run(["--bind", "/dev/null", "/run/null", "--", "/bin/sh", "-c",
                 "echo x > /run/null"])
    assert r.returncode != 0 and "Permission denied" in r.stderr, r.stderr
    r = csb.run(["--dev-bind", "/dev/null", "/run/null", "--", "/bin/sh", "-c",
                 "echo x > /run/null"])
    assert r.returncode == 0, r.stderr


def test_run_inside_csandbox_exec_without_tun_names_the_outer_exec_flag(csb, tmp_path):
    """`run` takes no --dev-bind and no --net: the message names the flag of the outer
    `csandbox exec`, and offers no network choice `run` does not have."""
    home = tmp_path / "home"
    (home / ".claude-profiles" / "work").mkdir(parents=True)
    (home / ".claude-profiles" / "work" / ".sandbox").touch()
    (tmp_path / "proj").mkdir()
    r = csb.run(["--net", "host", "--bind", str(tmp_path), str(tmp_path),
                 "--ro-bind", csb.binary, "/run/csandbox", "--setenv", "HOME", str(home),
                 "--setenv", "CLAUDE_PROFILE_CLAUDE_BIN", "/bin/true",
                 "--chdir", str(tmp_path / "proj"), "--",
                 "/run/csandbox", "run", "work"])
    assert r.returncode == 0, r.stderr
    assert r.stderr.count(RELAY_NOTE) == 1, r.stderr
    assert "This runs inside csandbox (an outer `csandbox exec`)" in r.stderr, r.stderr
    assert "start that outer `csandbox exec` with --dev-bind /dev/net/tun /dev/net/tun" \
        in r.stderr, r.stderr
    assert "--net none" not in r.stderr and "--net pasta" not in r.stderr, r.stderr


def test_proc_fresh_refused_under_a_seccomp_filter_blames_no_filter(csb):
    """The kernel refuses a fresh proc beside /proc overmounts whatever the filter: under
    one (here csandbox's own) the message names the overmounts and no seccomp profile."""
    mask = ("for f in /proc/kcore /proc/timer_list /proc/keys /proc/sched_debug; do "
            "[ -e $f ] && mount --bind /dev/null $f && break; done; exec \"$@\"")
    r = csb.run(["--ro-bind", csb.binary, "/run/csandbox", "--", "unshare", "-Urm", "sh", "-c",
                 mask, "sh", "/run/csandbox", "exec", "--proc=fresh", "--", "true"])
    assert r.returncode == 125, r.stderr
    assert "the kernel refused a fresh proc" in r.stderr and "overmounts" in r.stderr, r.stderr
    assert "seccomp" not in r.stderr, r.stderr


def test_uid_0_inside_csandbox_names_setfcap_and_the_outer_uid(csb):
    """As uid 0 inside csandbox (every capability dropped), the kernel refuses to map that
    uid 0 into a new user namespace without CAP_SETFCAP: the message says so and names the
    outer csandbox's --uid, not a container's seccomp filter, on one line."""
    r = nested(csb, ["--", "true"], outer=["--uid", "0"])
    assert r.returncode == 125, r.stderr
    assert r.stderr.count("\n") == 1, r.stderr
    assert "write /proc/" in r.stderr and "uid_map (`0 0 1`)" in r.stderr, r.stderr
    assert "uid 0 inside csandbox" in r.stderr and "CAP_SETFCAP" in r.stderr, r.stderr
    assert "csandbox exec --uid 1000" in r.stderr, r.stderr
    assert "container" not in r.stderr and "seccomp=unconfined" not in r.stderr, r.stderr
    # The fix it names works, and doctor there gives the same verdict in the same words.
    assert nested(csb, ["--", "true"], outer=["--uid", "1000"]).returncode == 0
    r = csb.run(["--net", "host", "--uid", "0", "--ro-bind", csb.binary, "/run/csandbox", "--",
                 "/run/csandbox", "doctor"])
    sandbox = [l for l in r.stdout.splitlines() if l.split()[1:2] == ["sandbox"]]
    assert r.returncode == 1 and sandbox and sandbox[0].startswith("FAIL"), r.stdout
    assert "CAP_SETFCAP" in sandbox[0] and "--uid 1000" in sandbox[0], sandbox


# Run "$@" in a root without /tmp (an image built without it): every directory of / but /tmp
# bound into a tmpfs at $NEWROOT; with MARK=container, as in a podman container.
ROOT_WITHOUT_TMP = r"""set -e
PATH=$PATH:/usr/sbin:/sbin
r=$NEWROOT
mount -t tmpfs none "$r"
# csandbox itself into the new root: the build it runs from may lie under /tmp
cp "$1" "$r/.csandbox-under-test"
shift
set -- /.csandbox-under-test "$@"
for d in /*; do
        n=${d#/}
        [ "$n" = tmp ] && continue
        if [ -L "$d" ]; then cp -P "$d" "$r/$n"
        elif [ -d "$d" ]; then mkdir "$r/$n"; mount --rbind "$d" "$r/$n"
        fi
done
if [ "${MARK:-}" = container ]; then mount -t tmpfs none "$r/run"; touch "$r/run/.containerenv"; fi
mkdir "$r/.old"
cd "$r"
pivot_root . .old
umount -l /.old
cd /
exec "$@"
"""


@pytest.mark.parametrize("where", ["unshare", "container", "pod"])
def test_a_root_without_tmp_names_the_fix_where_csandbox_runs(csb, tmp_path, where):
    extra = {"NEWROOT": str(tmp_path)}
    if where == "container":
        extra["MARK"] = "container"
    if where == "pod":
        extra["KUBERNETES_SERVICE_HOST"] = "10.96.0.1"
    r = subprocess.run(["unshare", "-Urm", "sh", "-c", ROOT_WITHOUT_TMP, "sh", csb.binary,
                        "exec", "--", "true"], capture_output=True, text=True,
                       timeout=TIMEOUT, env=base_env(**extra), stdin=subprocess.DEVNULL, cwd="/")
    assert r.returncode == 125, r.stderr
    assert "staging tmpfs on /tmp: No such file or directory" in r.stderr, r.stderr
    assert "no /tmp directory" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    want = {"unshare": "mkdir -m 1777 /tmp", "container": "--tmpfs /tmp",
            "pod": "emptyDir volume at /tmp"}[where]
    assert want in r.stderr, r.stderr


def test_an_allowlist_with_no_network_says_so_at_launch(csb):
    """Where the machine routes nowhere but loopback (a container started with --network
    none; here a network namespace of its own), an allowlist session says at launch that
    nothing can be reached and why, not only "0 connection(s) refused" at its end."""
    r = subprocess.run(["unshare", "-Urn", csb.binary, "exec", "--egress", "allowlist", "--",
                        "true"], capture_output=True, text=True, timeout=TIMEOUT,
                       env=base_env(), stdin=subprocess.DEVNULL, cwd="/")
    first = r.stderr.splitlines()[0] if r.stderr else ""
    assert first.startswith("csandbox: egress:") and "no network beyond loopback" in first, \
        r.stderr
    assert "nothing outside can be reached" in first, r.stderr
    # With a network, nothing of the kind.
    r = csb.run(["--egress", "allowlist", "--", "true"])
    assert r.returncode == 0 and "no network" not in r.stderr, r.stderr
