"""Integration tests for csandbox: the built binary, driven as an unprivileged user.

How to run:
    tests/run                      # as root it creates/reuses a test user and drops to it
or, as an ordinary user, directly:
    CSANDBOX=$PWD/build/csandbox CSANDBOX_PROBE=$PWD/build/tests/probe \\
        /usr/bin/python3 -m pytest -p no:cacheprovider tests/integration
Both binaries must be readable and executable by that user, and pytest's temporary directory
(by default /tmp/pytest-of-$USER) must be owned by it. Nothing here needs root, a network
address other than loopback, or a pre-built image: rootfs fixtures are built per session
from busybox-static (tests/fixtures/rootfs.py).

Helpers:
    csb.run(args)            csandbox exec ARGS, as a CompletedProcess
    csb.probe(...)           run the probe inside (host root or a rootfs) and parse its JSON
    tier                     "direct", "userns" (inside `unshare -Urm` with a /proc file
                             overmounted, as container engines mask it), "csandbox"
                             (inside an outer csandbox, host root, default seccomp) or
                             "no-openat2" (the same with openat2 refused, EPERM, as old
                             container seccomp profiles do: the runner's walking fallback)
"""
import json
import os
import pwd
import select
import shlex
import signal
import subprocess
import sys
import time
import uuid

import pytest

# The suite checks what csandbox gives its payload, so it starts csandbox with the signal
# dispositions a login shell has: a suite started under nohup (SIGHUP ignored), or in the
# background of a script (SIGINT and SIGQUIT ignored), would otherwise hand that on, and
# the payload would rightly inherit it. SIGPIPE is Python's own; subprocess restores it.
for _sig in signal.valid_signals():
    if _sig in (signal.SIGKILL, signal.SIGSTOP, signal.SIGPIPE):
        continue
    try:
        if signal.getsignal(_sig) == signal.SIG_IGN:
            signal.signal(_sig, signal.default_int_handler if _sig == signal.SIGINT
                          else signal.SIG_DFL)
    except (OSError, ValueError):
        pass

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "fixtures"))
import rootfs as rootfs_builder  # noqa: E402

CSANDBOX = os.path.abspath(os.environ.get("CSANDBOX", "build/csandbox"))
PROBE = os.path.abspath(os.environ.get("CSANDBOX_PROBE", "build/tests/probe"))
# In host-root mode /tmp, /run, /home... are empty tmpfs inside; the probe is bound here.
HOST_PROBE = "/run/probe"
TIMEOUT = 30

# Masks a /proc file the way podman does, then runs "$@". The first file that exists is used.
MASK_PROC = ("for f in /proc/kcore /proc/timer_list /proc/keys /proc/sched_debug; do "
             "[ -e $f ] && mount --bind /dev/null $f && break; done; exec \"$@\"")

ZERO_CAPS = {k: "0000000000000000" for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")}


def base_env(**extra):
    """The environment csandbox itself is started with: the test user's, plus a marker
    that must never reach the payload."""
    env = dict(os.environ)
    env["CSB_LEAK_MARKER"] = "leaked-if-you-see-this"
    env.setdefault("HOME", pwd.getpwuid(os.getuid()).pw_dir)
    for k, v in extra.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


def parse_json(proc):
    assert proc.returncode == 0, f"exit {proc.returncode}\nstderr:\n{proc.stderr}\nstdout:\n{proc.stdout}"
    try:
        return json.loads(proc.stdout)
    except ValueError as e:
        raise AssertionError(f"stdout is not one JSON object ({e}):\n{proc.stdout}\nstderr:\n{proc.stderr}")


def mountinfo_entries(lines):
    """mountinfo lines as dicts: mountpoint, opts (per-mount), fstype, source, root."""
    out = []
    for line in lines:
        left, _, right = line.partition(" - ")
        f = left.split()
        r = right.split()
        if len(f) < 6 or len(r) < 2:
            continue
        out.append({"root": f[3], "mountpoint": f[4], "opts": f[5].split(","),
                    "fstype": r[0], "source": r[1], "super": r[2] if len(r) > 2 else ""})
    return out


def mount_at(report, path):
    """The topmost mount at path in a probe report, or None."""
    found = [m for m in mountinfo_entries(report["mountinfo"]) if m["mountpoint"] == path]
    return found[-1] if found else None


def procs_with(marker):
    """Host pids whose argv contains marker (the calling process excluded)."""
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if marker.encode() in argv:
            pids.append(int(name))
    return pids


def run_stderr_on_pty(argv, env, timeout=TIMEOUT, cols=80, rows=24):
    """Run argv with stderr on a fresh terminal of cols x rows (stdout a pipe); returns the
    process and all the terminal received, as text (read as it comes: a program that
    redraws a lot must not block on a full terminal)."""
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    out = b""
    try:
        p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=slave,
                             stdin=subprocess.DEVNULL)
        os.close(slave)
        slave = -1
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: every writer is gone
                    break
                if not chunk:
                    break
                out += chunk
        else:
            p.kill()
        stdout = p.communicate(timeout=30)[0]
        p = subprocess.CompletedProcess(argv, p.returncode, stdout, None)
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)
    return p, out.decode(errors="replace")


class Screen:
    """What a terminal of cols x rows shows after receiving text: printable characters (with
    the automatic wrap at the last column), CR, LF, and the sequences a progress display
    uses (ESC [ n A, ESC [ K, ESC [ J). `lines` holds every line, scrolled off or not;
    `wraps` counts lines that were too long for the width; `unknown` lists any other escape
    sequence."""

    def __init__(self, text, cols=80, rows=24):
        import re

        self.lines, self.wraps, self.unknown = [""], 0, []
        row = col = top = 0  # top: the first line of the visible screen
        pending = False  # the last column was written: the next character wraps

        def down():
            nonlocal row, top
            row += 1
            if row == len(self.lines):
                self.lines.append("")
            if row - top >= rows:
                top = row - rows + 1

        i = 0
        while i < len(text):
            ch = text[i]
            if ch == "\x1b":
                m = re.match(r"\x1b\[([0-9]*)([A-Za-z])", text[i:])
                if not m:
                    self.unknown.append(text[i:i + 8])
                    i += 1
                    continue
                n, op = int(m.group(1) or 1), m.group(2)
                if op == "A":
                    row = max(top, row - n)
                elif op == "K":
                    self.lines[row] = self.lines[row][:col]
                elif op == "J":
                    self.lines[row] = self.lines[row][:col]
                    del self.lines[row + 1:]
                else:
                    self.unknown.append(m.group(0))
                pending = False
                i += m.end()
                continue
            if ch == "\r":
                col, pending = 0, False
            elif ch == "\n":
                down()
                pending = False
            elif ch >= " ":
                if pending:
                    self.wraps += 1
                    down()
                    col, pending = 0, False
                line = self.lines[row].ljust(col)
                self.lines[row] = line[:col] + ch + line[col + 1:]
                if col == cols - 1:
                    pending = True
                else:
                    col += 1
            i += 1

    def text(self):
        """The lines that hold anything, in order."""
        return [line.rstrip() for line in self.lines if line.strip()]


def wait_until(predicate, deadline=15.0):
    """Poll predicate until it holds or the deadline passes; returns its last value.
    (A deadline for something to happen, not a timing assertion.)"""
    end = time.monotonic() + deadline
    while True:
        value = predicate()
        if value or time.monotonic() > end:
            return value
        time.sleep(0.05)


def read_line(stream, deadline=TIMEOUT):
    """One line from a pipe, or "" when nothing arrived before the deadline."""
    end = time.monotonic() + deadline
    buf = b""
    fd = stream.fileno()
    while not buf.endswith(b"\n"):
        left = end - time.monotonic()
        if left <= 0:
            break
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            break
        chunk = os.read(fd, 1)
        if not chunk:
            break
        buf += chunk
    return buf.decode(errors="replace")


class Csandbox:
    def __init__(self, basetemp):
        self.binary = CSANDBOX
        self.probe_path = PROBE
        self.basetemp = str(basetemp)

    def argv(self, args, tier="direct", share=()):
        """The full command line for `csandbox exec ARGS`, wrapped for a nested tier.
        share: extra host paths the outer csandbox must expose at the same path."""
        inner = [self.binary, "exec", *args]
        if tier == "direct":
            return inner
        if tier == "userns":
            return ["unshare", "-Urm", "sh", "-c", MASK_PROC, "sh", *inner]
        if tier in ("csandbox", "no-openat2"):
            outer = [self.binary, "exec", "--bind", self.basetemp, self.basetemp,
                     "--ro-bind", self.binary, self.binary,
                     "--ro-bind", self.probe_path, self.probe_path]
            if tier == "no-openat2":
                # As under a container engine whose seccomp profile predates openat2.
                outer += ["--seccomp", self.no_openat2_profile()]
            for p in share:
                outer += ["--bind", p, p]
            return [*outer, "--", *inner]
        raise ValueError(tier)

    def no_openat2_profile(self):
        path = os.path.join(self.basetemp, "no-openat2.json")
        if not os.path.exists(path):
            with open(path, "w") as f:
                json.dump({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [
                    {"names": ["openat2"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1}]}, f)
        return path

    def run(self, args, *, tier="direct", share=(), env=None, timeout=TIMEOUT, cwd="/",
            pass_fds=(), input=None):
        return subprocess.run(self.argv(list(args), tier, share), capture_output=True,
                              text=True, timeout=timeout, env=env or base_env(), cwd=cwd,
                              pass_fds=pass_fds, input=input,
                              stdin=None if input is not None else subprocess.DEVNULL)

    def popen(self, args, *, env=None, cwd="/"):
        return subprocess.Popen([self.binary, "exec", *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                env=env or base_env(), cwd=cwd)

    def probe_argv(self, opts=(), probe_args=("report",), rootfs=None):
        """Options and command running the probe, in host-root mode or inside rootfs."""
        if rootfs is None:
            return [*opts, "--ro-bind", self.probe_path, HOST_PROBE, "--", HOST_PROBE,
                    *probe_args]
        return ["--rootfs", str(rootfs), *opts, "--", "/probe", *probe_args]

    def run_probe(self, *probe_args, opts=(), rootfs=None, **kw):
        return self.run(self.probe_argv(opts, probe_args or ("report",), rootfs), **kw)

    def probe(self, *probe_args, opts=(), rootfs=None, **kw):
        """Run the probe and return its parsed JSON (asserting exit 0)."""
        return parse_json(self.run_probe(*probe_args, opts=opts, rootfs=rootfs, **kw))

    def plan(self, args, **kw):
        return parse_json(self.run(["--plan", *args], **kw))


@pytest.fixture(scope="session", autouse=True)
def _binaries_present():
    for path in (CSANDBOX, PROBE):
        assert os.access(path, os.X_OK), f"{path} is missing or not executable (set CSANDBOX / CSANDBOX_PROBE)"
    assert os.getuid() != 0, "the integration suite must run as an unprivileged user (tests/run drops to one)"


@pytest.fixture(scope="session")
def csb(tmp_path_factory):
    return Csandbox(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="session")
def rootfs(tmp_path_factory):
    """A plain busybox rootfs shared by the whole session: tests must not change it (the
    ones that check it stays unchanged snapshot it)."""
    return rootfs_builder.build(str(tmp_path_factory.mktemp("rootfs") / "plain"), PROBE)


@pytest.fixture
def make_rootfs(tmp_path):
    """make_rootfs(variant, outside=None, mirror=False) -> path of a fresh rootfs."""
    count = [0]

    def make(variant="plain", outside=None, mirror=False):
        count[0] += 1
        return rootfs_builder.build(str(tmp_path / f"rootfs-{variant}-{count[0]}"), PROBE,
                                    variant, outside, mirror)
    return make


@pytest.fixture
def outside():
    """A host directory *outside* pytest's /tmp (under /var/tmp, which a rootfs also has),
    holding one file. Hostile rootfs symlinks point here; it must stay untouched."""
    path = f"/var/tmp/csb-outside-{uuid.uuid4().hex[:12]}"
    os.mkdir(path)
    with open(os.path.join(path, "host-file"), "w") as f:
        f.write("host\n")
    yield path
    subprocess.run(["rm", "-rf", "--one-file-system", path], check=False)


@pytest.fixture
def marker():
    return f"csb-marker-{uuid.uuid4().hex[:12]}"


@pytest.fixture(params=["direct", "userns", "csandbox", "no-openat2"])
def tier(request):
    return request.param


def host_ns(name):
    return os.readlink(f"/proc/self/ns/{name}")


def shell_quote(args):
    return " ".join(shlex.quote(a) for a in args)
