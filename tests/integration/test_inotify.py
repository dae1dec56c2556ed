"""The change journal cannot be blinded: the session's user namespace gets half of the
user's inotify watches and instances (the kernel charges the session's to the user's too,
and the journal outside needs the other half), and when the journal still runs out of
watches the session is paused until it can watch every directory again. Each attack is a
program run inside as the fake claude."""
import json
import os
import shutil
import signal
import subprocess
import time

from conftest import CSANDBOX, TIMEOUT
from test_run import Profiles, git, profiles, shell_claude  # noqa: F401
from test_trust import repo  # noqa: F401
import pytest


def host_limit(name, fs_name):
    """The user's limit as the kernel checks it: the lowest of this namespace's and the
    first one's."""
    values = [int(open(f"/proc/sys/user/{name}").read())]
    if fs_name:
        values.append(int(open(f"/proc/sys/fs/inotify/{fs_name}").read()))
    return min(values)


WATCHES = ("max_inotify_watches", "max_user_watches")
INSTANCES = ("max_inotify_instances", "max_user_instances")
USERNS = ("max_user_namespaces", None)

# Takes every inotify instance, then every watch (on files of its own in /tmp) it can get,
# and says where the kernel refused; then holds them while the rest of the script runs.
HOLDER = r"""
import ctypes, errno, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
fds = []
while True:
    fd = libc.inotify_init1(0)
    if fd < 0:
        e = ctypes.get_errno()
        break
    fds.append(fd)
print("instances", len(fds), errno.errorcode[e], flush=True)
os.makedirs("/tmp/w", exist_ok=True)
n = 0
while True:
    p = "/tmp/w/%d" % n
    os.mknod(p)
    if libc.inotify_add_watch(fds[0], p.encode(), 2) < 0:
        e = ctypes.get_errno()
        break
    n += 1
print("watches", n, errno.errorcode[e], flush=True)
if len(sys.argv) > 1:
    open(sys.argv[1], "w").write("full\n")
    while True:
        signal.pause()
"""


def test_the_sessions_user_namespace_gets_half_of_the_users_inotify_limits(profiles, repo):
    profiles.add()
    plan = json.loads(profiles.run(cmd="plan").stdout)
    want = {WATCHES[0]: host_limit(*WATCHES) // 2, INSTANCES[0]: host_limit(*INSTANCES) // 2,
            USERNS[0]: host_limit(*USERNS) // 2}
    assert plan["userns_limits"] == want, plan["userns_limits"]
    shell_claude(profiles, "for f in max_inotify_watches max_inotify_instances "
                           "max_user_namespaces; do echo $f $(cat /proc/sys/user/$f); done\n")
    r = profiles.run()
    assert r.returncode == 0, r.stderr
    inside = dict(line.split() for line in r.stdout.splitlines())
    for name, value in want.items():
        assert int(inside[name]) == value, (name, inside)
        assert int(inside[name]) < host_limit(*{w[0]: w for w in (WATCHES, INSTANCES, USERNS)}
                                              [name])


def test_a_session_that_takes_every_watch_it_can_is_refused_and_its_plant_still_reported(
        profiles, repo, tmp_path):
    """The attack: every inotify instance and watch the session can get, then a nested
    repository whose fsmonitor runs a command. The kernel refuses the session at its half;
    the journal, with the other half, still sees the plant while the session runs."""
    profiles.add()
    mark = tmp_path / "fsmonitor-ran"
    shell_claude(profiles, f"""set -e
cd "{repo}"
python3 - <<'PY'
{HOLDER}
import subprocess
subprocess.run("mkdir -p sub && git -C sub init -q && git -C sub config core.fsmonitor "
               "'touch {mark}' && echo planted", shell=True, check=True)
PY
""")
    r = profiles.run()
    assert r.returncode == 0, r.stderr
    out = dict((w[0], w[1:]) for w in (line.split() for line in r.stdout.splitlines()))
    assert out["instances"] == [str(host_limit(*INSTANCES) // 2), "EMFILE"], r.stdout
    assert out["watches"][1] == "ENOSPC", r.stdout
    assert int(out["watches"][0]) <= host_limit(*WATCHES) // 2, r.stdout
    assert "planted" in r.stdout
    assert "paused" not in r.stderr, r.stderr
    assert f"{repo}/sub/.git (config sets core.fsmonitor)" in r.stderr, r.stderr
    r = profiles.run()
    assert r.returncode == 125 and f"{repo}/sub/.git" in r.stderr, r.stderr
    assert not mark.exists()


def session_pids(token):
    pids = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            if token in open(f"/proc/{p}/cmdline", "rb").read():
                pids.append(int(p))
        except OSError:
            pass
    return pids


def state_of(pid):
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


@pytest.mark.parametrize("nested", [False, True])
def test_a_journal_out_of_watches_pauses_the_session_until_it_can_watch_again(profiles, repo,
                                                                             tmp_path, nested):
    """The attack: the session holds every watch it may, then makes more directories than
    the user's watches left can cover, and plants a nested repository among them. The
    journal runs out: the session is paused (every process stopped) and the user told which
    sysctl to raise; once watches are free again (here: the holder is killed from outside)
    the session goes on, and the plant is reported and refuses the next launch. nested: the
    payload first moves into a user namespace of its own, which must not keep it going."""
    profiles.add()
    mark = tmp_path / "fsmonitor-ran"
    need = host_limit(*WATCHES) - host_limit(*WATCHES) // 2 + 2000
    token = "csb-inotify-holder"
    reexec = ('[ -n "$CSB_NESTED" ] || CSB_NESTED=1 exec unshare --user sh "$0"\n'
              if nested else "")
    shell_claude(profiles, f"""{reexec}set -e
cd "{repo}"
cat > /tmp/holder.py <<'PY'
{HOLDER}
PY
python3 /tmp/holder.py /tmp/full {token} &
holder=$!
while [ ! -e /tmp/full ]; do sleep 0.05; done
python3 -c 'import os
os.mkdir("many")
for i in range({need}): os.mkdir("many/%d" % i)'
mkdir -p many/sub && git -C many/sub init -q
git -C many/sub config core.fsmonitor "touch {mark}"
echo planted
wait $holder || true
echo resumed
""")
    proc = subprocess.Popen([CSANDBOX, "run", "work"], cwd=str(repo), env=profiles.env(),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        seen = ""
        while "the session is paused" not in seen:
            line = proc.stderr.readline()
            assert line, "csandbox's stderr ended without a pause: " + seen
            seen += line
        assert "sysctl fs.inotify.max_user_watches=" in seen, seen
        holder = session_pids(token.encode())
        assert len(holder) == 1, holder
        # Every process of the session stops (the pause lands just after the message).
        deadline = time.monotonic() + TIMEOUT
        while state_of(holder[0]) != "T" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert state_of(holder[0]) == "T"
        # Watches come free (as when the user closes a program or raises the limit).
        os.kill(holder[0], signal.SIGKILL)
        seen = ""
        while "watched again" not in seen:
            line = proc.stderr.readline()
            assert line, "csandbox's stderr ended without a resume: " + seen
            seen += line
        out, err = proc.communicate(timeout=TIMEOUT * 4)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0, err[-3000:]
    assert "planted" in out and "resumed" in out, out
    assert f"{repo}/many/sub/.git (config sets core.fsmonitor)" in err, err[-3000:]
    r = profiles.run()
    assert r.returncode == 125 and f"{repo}/many/sub/.git" in r.stderr, r.stderr[-3000:]
    assert not mark.exists()
    shutil.rmtree(repo / "many")


def test_a_paused_session_ends_when_csandbox_is_told_to_and_is_still_reported(profiles, repo,
                                                                             tmp_path):
    """The user ends a paused session instead (the `kill` the message names): the session
    cannot take the signal while stopped, so it is killed; what it planted is reported and
    refuses the next launch."""
    profiles.add()
    need = host_limit(*WATCHES) - host_limit(*WATCHES) // 2 + 2000
    shell_claude(profiles, f"""set -e
cd "{repo}"
mkdir -p sub && git -C sub init -q && git -C sub config core.fsmonitor "touch {tmp_path}/ran"
cat > /tmp/holder.py <<'PY'
{HOLDER}
PY
python3 /tmp/holder.py /tmp/full &
while [ ! -e /tmp/full ]; do sleep 0.05; done
python3 -c 'import os
os.mkdir("many")
for i in range({need}): os.mkdir("many/%d" % i)'
echo not-paused
sleep 120
""")
    proc = subprocess.Popen([CSANDBOX, "run", "work"], cwd=str(repo), env=profiles.env(),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        seen = ""
        while "the session is paused" not in seen:
            line = proc.stderr.readline()
            assert line, "csandbox's stderr ended without a pause: " + seen
            seen += line
        assert f"kill {proc.pid}" in seen, seen
        proc.terminate()
        out, err = proc.communicate(timeout=TIMEOUT * 4)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode != 0
    assert f"{repo}/sub/.git (config sets core.fsmonitor)" in seen + err, (seen + err)[-3000:]
    r = profiles.run()
    assert r.returncode == 125 and f"{repo}/sub/.git" in r.stderr, r.stderr[-3000:]
    shutil.rmtree(repo / "many")
