"""What a podman or docker user types daily, as podman does it: exec into a running
container, -p, named volumes, save and load, info and version --format, the harmless run
flags, -u of a missing user (126), a background run and SIGINT, -it's bytes as they are.
Runs the busybox fixture image of test_podman's store."""
import json
import os
import re
import select
import signal
import socket
import subprocess
import time

import pytest

from conftest import CSANDBOX, base_env, wait_until
from test_podman import BB, Podman, data_home, podman  # noqa: F401
from test_tty import Term

TIMEOUT = 60
LOOP = 'echo started; while :; do sleep 0.1; done'


def started(podman, name):
    assert wait_until(lambda: "started" in podman.run("logs", name).stdout), \
        podman.run("logs", name).stdout


def term_output(t, until=None, timeout=TIMEOUT):
    """What the terminal shows until csandbox exits (and the pty is drained)."""
    out = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r, _, _ = select.select([t.master], [], [], 0.2)
        if r:
            try:
                data = os.read(t.master, 65536)
            except OSError:
                break
            if not data:
                break
            out += data
            if until and until in out:
                break
        elif t.proc.poll() is not None:
            break
    return out


# ---- exec ----

def test_exec_joins_the_running_container(podman):
    podman.ok("run", "-d", "--name", "web", "-e", "FROM_RUN=run-value", "-w", "/etc",
              "-h", "webhost", BB, "sh", "-c", "echo inside > /tmp/mark; " + LOOP)
    started(podman, "web")
    # its root (the file its payload wrote), its environment, directory and hostname
    assert podman.ok("exec", "web", "cat", "/tmp/mark").stdout == "inside\n"
    p = podman.ok("exec", "web", "sh", "-c", 'echo "$FROM_RUN $(pwd) $(hostname)"')
    assert p.stdout == "run-value /etc webhost\n"
    p = podman.ok("exec", "-e", "FROM_RUN=exec-value", "--env=NEW=1", "-w", "/opt", "web",
                  "sh", "-c", 'echo "$FROM_RUN $NEW $(pwd)"')
    assert p.stdout == "exec-value 1 /opt\n"
    # its pid namespace: the payload's loop is there, the host's processes are not
    p = podman.ok("exec", "web", "sh", "-c", "cat /proc/[0-9]*/cmdline | tr '\\0' ' '")
    assert "while :" in p.stdout and "pytest" not in p.stdout, p.stdout
    # nothing gained: no capability, no_new_privs, the seccomp filter; no host data
    status = podman.ok("exec", "web", "cat", "/proc/self/status").stdout
    for field, want in (("CapEff", "0000000000000000"), ("CapBnd", "0000000000000000"),
                        ("CapPrm", "0000000000000000"), ("NoNewPrivs", "1"),
                        ("Seccomp", "2")):
        assert re.search(rf"^{field}:\s+{want}$", status, re.M), (field, status)
    p = podman.run("exec", "web", "cat", "/srv/csandbox-test-data/secret")
    assert p.returncode != 0 and "host data" not in p.stdout
    # the container's view of a mount attempt: refused, as in the container itself
    p = podman.run("exec", "web", "sh", "-c", "mount -t tmpfs x /mnt && echo mounted")
    assert "mounted" not in p.stdout
    # the exit statuses, as podman's
    assert podman.run("exec", "web", "sh", "-c", "exit 3").returncode == 3
    p = podman.run("exec", "web", "/no/such")
    assert p.returncode == 127 and "/no/such" in p.stderr, p.stderr
    p = podman.run("exec", "-u", "nosuchuser", "web", "true")
    assert p.returncode == 126 and "nosuchuser" in p.stderr, p.stderr
    p = podman.run("exec", "-u", "nobody", "web", "true")
    assert p.returncode == 125 and "one id" in p.stderr, p.stderr
    assert podman.ok("exec", "-u", "root", "web", "id", "-u").stdout == "0\n"
    # stdin only with -i
    assert podman.ok("exec", "-i", "web", "cat", input="typed\n").stdout == "typed\n"
    assert podman.ok("exec", "web", "cat", input="typed\n").stdout == ""
    # -t: a pty of the container's own; a piped stdin's end reaches the command through it
    assert podman.ok("exec", "-t", "web", "tty").stdout.strip().startswith("/dev/pts/")
    assert podman.ok("exec", "-it", "web", "wc", "-l", input="a\nb\n").stdout.split()[-1] == "2"
    # a stopped container and an unknown one
    podman.ok("stop", "-t", "0", "web")
    p = podman.run("exec", "web", "true")
    assert p.returncode == 125 and "not running" in p.stderr, p.stderr
    p = podman.run("exec", "nosuch", "true")
    assert p.returncode == 125 and "nosuch" in p.stderr, p.stderr


def test_exec_it_on_a_terminal(podman):
    podman.ok("run", "-d", "--name", "tt", BB, "sh", "-c", LOOP)
    started(podman, "tt")
    t = Term([CSANDBOX, "podman", "exec", "-it", "tt", "sh", "-c",
              "read line; echo got-$line; tty"], env=podman.env())
    os.write(t.master, b"hello\n")
    out = term_output(t)
    assert t.proc.wait(timeout=TIMEOUT) == 0, out
    assert b"got-hello" in out and b"/dev/pts/" in out, out
    assert t.modes() == t.before  # the caller's terminal as it was
    # without -t, at a terminal: the command still gets a pty of the container's, never the
    # caller's terminal, whose modes it tries to change
    t = Term([CSANDBOX, "podman", "exec", "tt", "sh", "-c",
              "stty -F /dev/tty raw -echo -icanon; readlink /proc/self/fd/1; echo done"],
             env=podman.env())
    out = term_output(t)
    assert t.proc.wait(timeout=TIMEOUT) == 0, out
    assert re.match(rb"/dev/pts/\d+\r\ndone\r\n$", out), out
    assert t.modes() == t.before


# ---- -p ----

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fetch(port):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"ping\n")
        s.shutdown(socket.SHUT_WR)
        data = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                return data
            data += chunk


def test_publish_relays_a_host_port_to_the_containers(podman, tmp_path):
    # the server: a python listener on the host's busybox-less side is not in the image, so
    # the container runs a server from a bind of this test's own script
    server = tmp_path / "srv.py"
    ctr_port, host_port = free_port(), free_port()
    server.write_text(
        "import socket,sys\n"
        "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        f"s.bind(('127.0.0.1', {ctr_port})); s.listen(8); print('started', flush=True)\n"
        "while True:\n"
        "    c,_=s.accept(); d=c.recv(100); c.sendall(b'pong:'+d); c.close()\n")
    p = podman.ok("run", "-d", "--name", "srv", "-p", f"{host_port}:{ctr_port}",
                  "-v", "/usr:/usr:ro", "-v", "/lib:/lib:ro", "-v", "/lib64:/lib64:ro",
                  "-v", f"{tmp_path}:/srv-dir:ro", BB, "/usr/bin/python3", "-u",
                  "/srv-dir/srv.py")
    assert p.stderr == "", p.stderr
    started(podman, "srv")
    assert fetch(host_port) == b"pong:ping\n"
    assert fetch(ctr_port) == b"pong:ping\n"  # the shared network: as it is
    # the relay ends with the container
    podman.ok("rm", "-f", "srv")
    assert wait_until(lambda: _refused(host_port))
    # IP:HOST:CTR listens on that address alone (a foreground run this time)
    ip_port = free_port()
    srv = subprocess.Popen(
        [CSANDBOX, "podman", "run", "--rm", "-p", f"127.0.0.1:{ip_port}:{ctr_port}",
         "-v", "/usr:/usr:ro", "-v", "/lib:/lib:ro", "-v", "/lib64:/lib64:ro",
         "-v", f"{tmp_path}:/srv-dir:ro", BB, "/usr/bin/python3", "-u", "/srv-dir/srv.py"],
        stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, env=podman.env())
    try:
        assert srv.stdout.readline() == b"started\n"
        assert fetch(ip_port) == b"pong:ping\n"
    finally:
        srv.kill()
        srv.wait(timeout=TIMEOUT)
    assert wait_until(lambda: _refused(ip_port))
    # PORT:PORT: nothing to relay, said once
    p = podman.ok("run", "--rm", "-p", f"{ctr_port}:{ctr_port}", BB, "true")
    assert p.stderr.count("-p PORT:PORT changes nothing") == 1, p.stderr
    # a host port in use: 125 before anything starts
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        s.listen(1)
        busy = s.getsockname()[1]
        p = podman.run("run", "--rm", "-p", f"{busy}:{ctr_port}", BB, "true")
        assert p.returncode == 125 and str(busy) in p.stderr, p.stderr


def _refused(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return False
    except OSError:
        return True


# ---- named volumes ----

def test_named_volumes(podman):
    assert podman.ok("volume", "create", "data").stdout == "data\n"
    p = podman.run("volume", "create", "data")
    assert p.returncode == 125 and "already exists" in p.stderr
    assert podman.ok("volume", "create", "--ignore", "data").stdout == "data\n"
    podman.ok("run", "--rm", "-v", "data:/data", BB, "sh", "-c", "echo kept > /data/f")
    assert podman.ok("run", "--rm", "-v", "data:/d:ro", BB, "cat", "/d/f").stdout == "kept\n"
    p = podman.run("run", "--rm", "-v", "data:/d:ro", BB, "sh", "-c", "echo x > /d/g")
    assert p.returncode != 0
    # a volume run names is made, as podman makes it; --mount type=volume too
    podman.ok("run", "--rm", "--mount", "type=volume,source=auto,target=/a", BB,
              "touch", "/a/made")
    assert podman.ok("volume", "ls", "-q").stdout == "auto\ndata\n"
    lines = podman.ok("volume", "ls").stdout.splitlines()
    assert lines[0].split() == ["DRIVER", "VOLUME", "NAME"] and lines[1].split() == ["local", "auto"]
    mp = podman.ok("volume", "inspect", "--format", "{{.Mountpoint}}", "data").stdout.strip()
    assert mp == os.path.join(podman.data, "csandbox", "volumes", "data", "_data")
    assert open(os.path.join(mp, "f")).read() == "kept\n"
    [info] = json.loads(podman.ok("volume", "inspect", "data").stdout)
    assert info["Name"] == "data" and info["Driver"] == "local" and info["Mountpoint"] == mp
    assert podman.run("volume", "exists", "data").returncode == 0
    assert podman.run("volume", "exists", "nope").returncode == 1
    assert podman.ok("volume", "rm", "data", "auto").stdout == "data\nauto\n"
    assert not os.path.exists(mp)
    p = podman.run("volume", "rm", "data")
    assert p.returncode == 1 and "no volume with name" in p.stderr
    assert podman.ok("volume", "ls", "-q").stdout == ""
    p = podman.run("volume", "prune")
    assert p.returncode == 125 and "volume rm" in p.stderr
    p = podman.run("volume", "create", "--opt", "type=nfs", "x")
    assert p.returncode == 125 and "--opt" in p.stderr


# ---- version and info ----

def test_version_and_info_as_tools_read_them(podman):
    v = podman.ok("version", "--format", "{{.Client.Version}}").stdout
    assert re.fullmatch(r"\d+\.\d+\.\d+\+csandbox\n", v), v
    assert podman.ok("version", "--format", "{{.Server.Version}}").stdout == v
    assert podman.ok("version", "-f", "{{.Client.Version}}").stdout == v
    assert podman.ok("--version").stdout == f"podman version {v}"
    assert podman.ok("version").stdout.startswith("Client:")
    j = json.loads(podman.ok("version", "--format", "json").stdout)
    assert j["Client"]["Version"] == v.strip() and j["Client"]["OsArch"].startswith("linux/")
    p = podman.run("version", "--format", "{{.Client.NoSuchField}}")
    assert p.returncode == 125 and "NoSuchField" in p.stderr and p.stdout == ""
    assert podman.ok("info", "--format", "{{.Host.Security.Rootless}}").stdout == "true\n"
    info = json.loads(podman.ok("info", "--format", "json").stdout)
    assert info["store"]["graphRoot"] == os.path.join(podman.data, "csandbox", "images")
    assert info["version"]["Version"] == v.strip()
    assert "ociRuntime:" in podman.ok("info").stdout


# ---- run's harmless flags, -u, build ----

def test_harmless_flags_are_accepted_with_a_note(podman):
    arch = json.loads(podman.ok("version", "--format", "json").stdout)["Client"]["OsArch"]
    p = podman.ok("run", "--rm", "--init", "--label", "a=b", "-l", "c=d", "--add-host",
                  "db:192.0.2.1", "--memory", "64m", "--platform", arch, BB, "echo", "ran")
    assert p.stdout == "ran\n"
    assert p.stderr.count("--label is ignored") == 1, p.stderr
    assert p.stderr.count("--add-host db:192.0.2.1 is ignored") == 1, p.stderr


def test_a_user_the_image_lacks_is_126(podman):
    p = podman.run("run", "--rm", "-u", "nosuchuser", BB, "true")
    assert p.returncode == 126 and "nosuchuser" in p.stderr, p.stderr


# ---- signals and the terminal ----

def test_a_background_run_in_a_script_stops_on_sigint(podman):
    # A shell starts a `&` job with SIGINT and SIGQUIT ignored; podman still delivers them
    # to the container's process, which starts with their default actions.
    script = (f'"{CSANDBOX}" podman run {BB} sh -c '
              '"grep SigIgn /proc/self/status; echo started; sleep 60" > out & pid=$!\n'
              'while ! grep -q started out 2>/dev/null; do sleep 0.1; done\n'
              'kill -INT $pid; wait $pid; echo rc=$?; cat out\n')
    p = subprocess.run(["sh", "-c", script], capture_output=True, text=True,
                       env=podman.env(), timeout=TIMEOUT, cwd=podman.runtime)
    assert "rc=130" in p.stdout, p.stdout + p.stderr
    assert re.search(r"^SigIgn:\s+0+$", p.stdout, re.M), p.stdout


def test_it_output_is_the_containers_bytes(podman):
    # a title change is the container's own: not wrapped in a title push and pop
    t = Term([CSANDBOX, "podman", "run", "--rm", "-it", BB, "sh", "-c",
              r"printf '\033]0;title\007hi\n'"], env=podman.env())
    out = term_output(t)
    assert t.proc.wait(timeout=TIMEOUT) == 0
    assert out == b"\x1b]0;title\x07hi\r\n", out
    assert t.modes() == t.before


# ---- load and save ----

def test_load_reads_what_podman_and_docker_save(podman, tmp_path):
    import oci
    from conftest import PROBE
    layers = oci.busybox_layers(str(tmp_path), PROBE)
    archive = tmp_path / "docker.tar"
    oci.write_docker_archive(layers, str(archive), tag="saved:one")
    p = podman.ok("load", "-i", str(archive))
    assert p.stdout == "Loaded image: saved:one\n", p.stdout
    assert podman.ok("run", "--rm", "saved:one", "cat", "/etc/motd").stdout == "motd 3\n"
    # from stdin, a pipe (as `docker load < FILE` through a shell pipeline) and a file
    layout = tmp_path / "layout"
    oci.write_layout(str(layout), layers, ref="two")
    oci_tar = tmp_path / "oci.tar"
    oci.write_oci_archive(str(layout), str(oci_tar))
    p = subprocess.run(f'cat "{oci_tar}" | "{CSANDBOX}" podman load', shell=True,
                       capture_output=True, text=True, env=podman.env(TMPDIR=str(tmp_path)),
                       timeout=TIMEOUT)
    assert p.returncode == 0 and p.stdout.startswith("Loaded image: "), p.stderr
    name = p.stdout.split(": ", 1)[1].strip()
    assert podman.ok("run", "--rm", name, "cat", "/etc/motd").stdout == "motd 3\n"
    with open(archive, "rb") as f:
        p = subprocess.run([CSANDBOX, "podman", "load"], stdin=f, capture_output=True,
                           text=True, env=podman.env(), timeout=TIMEOUT)
    assert p.stdout == "Loaded image: saved:one\n", p.stderr
    # nothing left behind in the temporary directory
    assert not [n for n in os.listdir(tmp_path) if n.startswith("csandbox-load")]
    p = podman.run("load", "-i", str(tmp_path / "missing.tar"))
    assert p.returncode == 125 and "missing.tar" in p.stderr, p.stderr


TREE = "ls -lnR /etc /opt /srv /var 2>&1; cat /opt/link; stat -c '%a %u %g %n' /srv/tool /srv/data"


def test_save_then_load_elsewhere_is_the_same_image(podman, tmp_path):
    import tarfile
    from test_build import write_context
    want = podman.ok("run", "--rm", BB, "sh", "-c", TREE).stdout
    other = Podman(str(tmp_path / "other-data"), podman.runtime)
    for fmt in ("docker-archive", "oci-archive"):
        out = tmp_path / f"{fmt}.tar"
        p = podman.ok("save", "--format", fmt, "-o", str(out), BB)
        assert p.stdout == ""
        names = tarfile.open(out).getnames()
        assert ("manifest.json" if fmt == "docker-archive" else "index.json") in names, names
        if fmt == "docker-archive":
            # the layers carry the image's owners, modes, whiteouts and opaque directories
            outer = tarfile.open(out)
            [m] = json.loads(outer.extractfile("manifest.json").read())
            members = {}
            for layer in m["Layers"]:
                for e in tarfile.open(fileobj=outer.extractfile(layer)):
                    members[e.name] = e
            assert (members["srv/data"].uid, members["srv/data"].gid) == (33, 33)
            assert members["srv/data"].mode & 0o7777 == 0o600
            assert members["srv/tool"].mode & 0o7777 == 0o4755
            assert "etc/.wh.hostname" in members and "opt/a/.wh..wh..opq" in members
        p = other.ok("load", "-i", str(out))
        assert p.stdout == "Loaded image: bb:latest\n", p.stdout
        # the same files, owners, modes, whiteouts and opaque directories
        assert other.ok("run", "--rm", "bb", "sh", "-c", TREE).stdout == want
        other.ok("rmi", "bb")
    # to stdout, as `podman save IMAGE > FILE`; not to a terminal
    with open(tmp_path / "stdout.tar", "wb") as f:
        p = subprocess.run([CSANDBOX, "podman", "save", BB], stdout=f, stderr=subprocess.PIPE,
                           env=podman.env(), timeout=TIMEOUT)
    assert p.returncode == 0, p.stderr
    assert other.ok("load", "-i", str(tmp_path / "stdout.tar")).stdout == "Loaded image: bb:latest\n"
    # a built image keeps its ID: its layers come out as the build hashed them
    ctx = write_context(tmp_path / "ctx", {"Containerfile": "FROM bb\nRUN echo built > /built\n"})
    iid = podman.ok("build", "-q", "-t", "built:v1", "--network", "none", str(ctx)).stdout.strip()
    podman.ok("save", "-o", str(tmp_path / "built.tar"), "built:v1")
    [m] = json.loads(tarfile.open(tmp_path / "built.tar").extractfile("manifest.json").read())
    stored = json.load(open(os.path.join(podman.data, "csandbox", "images", "sha256", iid,
                                         "config.json")))
    saved = json.loads(tarfile.open(tmp_path / "built.tar").extractfile(m["Config"]).read())
    assert saved["rootfs"]["diff_ids"][-1] == stored["rootfs"]["diff_ids"][-1]
    other.ok("load", "-i", str(tmp_path / "built.tar"))
    assert other.ok("run", "--rm", "built:v1", "cat", "/built").stdout == "built\n"
    p = podman.run("save", "-o", str(tmp_path / "x.tar"), "no-such-image")
    assert p.returncode == 125 and "no-such-image" in p.stderr
    assert not (tmp_path / "x.tar").exists()
    assert not [n for n in os.listdir("/tmp") if n.startswith("csandbox-save-")]


def test_exec_into_a_named_foreground_run(podman):
    # `run --name dev -it ...` in one terminal, `exec dev ...` in another
    fg = subprocess.Popen([CSANDBOX, "podman", "run", "--name", "dev", BB, "sh", "-c", LOOP],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=podman.env(),
                          stdin=subprocess.DEVNULL)
    try:
        assert fg.stdout.readline() == b"started\n"
        assert podman.ok("exec", "dev", "echo", "in-dev").stdout == "in-dev\n"
        assert [r.split()[-1] for r in podman.ps()] == ["dev"]
        podman.ok("stop", "dev")  # SIGTERM through the run, which exits with the container
        assert fg.wait(timeout=TIMEOUT) == 128 + signal.SIGTERM
        assert podman.ps("-a") == []  # gone with its run, as a foreground run leaves nothing
        # a run killed outright leaves a record the next reader drops
        fg = subprocess.Popen([CSANDBOX, "podman", "run", "--name", "dev", BB, "sh", "-c", LOOP],
                              stdout=subprocess.PIPE, env=podman.env(), stdin=subprocess.DEVNULL)
        assert fg.stdout.readline() == b"started\n"
        fg.kill()
        fg.wait(timeout=TIMEOUT)
        assert podman.ps("-a") == []
        assert podman.ok("run", "--rm", "--name", "dev", BB, "echo", "again").stdout == "again\n"
    finally:
        fg.kill()
        fg.wait(timeout=TIMEOUT)


def test_exec_joins_a_network_of_the_containers_own(podman):
    podman.ok("run", "-d", "--name", "nonet", "--network", "none", BB, "sh", "-c", LOOP)
    started(podman, "nonet")
    out = podman.ok("exec", "nonet", "cat", "/proc/net/dev").stdout
    assert [line.split(":")[0].strip() for line in out.splitlines()[2:]] == ["lo"], out
    # the host's interfaces are not the exec's
    with open("/proc/net/dev") as f:
        assert len(f.readlines()[2:]) > 1
