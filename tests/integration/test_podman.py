"""`csandbox podman` / `docker`: run's options as podman's (each mapped onto a flag of
`csandbox exec`), podman's exit statuses, detached containers (ps, logs, stop, rm), and the
docker name. Runs the busybox fixture image from a store of this module's own."""
import os
import signal
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "fixtures"))
import oci  # noqa: E402

from conftest import CSANDBOX, PROBE, base_env, procs_with, read_line, wait_until  # noqa: E402

TIMEOUT = 60
BB = "bb"      # the fixture image: WorkingDir /, Cmd /bin/sh, no Entrypoint
EP = "bb-ep"   # the same layers with Entrypoint ["/bin/echo", "ep"] and Cmd ["cmd"]


@pytest.fixture(scope="module")
def data_home(tmp_path_factory):
    work = str(tmp_path_factory.mktemp("podman"))
    layers = oci.busybox_layers(work, PROBE)
    data = os.path.join(work, "data")
    env = base_env(XDG_DATA_HOME=data)
    for name, config in ((BB, {"WorkingDir": "/", "User": ""}),
                         (EP, {"WorkingDir": "/", "User": "", "Entrypoint": ["/bin/echo", "ep"],
                               "Cmd": ["cmd"]})):
        layout = os.path.join(work, name)
        oci.write_layout(layout, layers, config=config)
        p = subprocess.run([CSANDBOX, "image", "import", layout, "--name", name, "--quiet"],
                           capture_output=True, text=True, env=env, timeout=TIMEOUT)
        assert p.returncode == 0, p.stderr
    return data


class Podman:
    def __init__(self, data, runtime, prog=None):
        self.data = data
        self.runtime = runtime
        self.prog = prog

    def env(self, **extra):
        return base_env(XDG_DATA_HOME=self.data, XDG_RUNTIME_DIR=self.runtime, **extra)

    def argv(self, args):
        return [self.prog, *args] if self.prog else [CSANDBOX, "podman", *args]

    def run(self, *args, input=None, env=None, cwd="/"):
        return subprocess.run(self.argv(args), capture_output=True, text=True,
                              env=env or self.env(), timeout=TIMEOUT, cwd=cwd,
                              input=input, stdin=None if input is not None else subprocess.DEVNULL)

    def ok(self, *args, **kw):
        p = self.run(*args, **kw)
        assert p.returncode == 0, f"exit {p.returncode}\nstderr:\n{p.stderr}\nstdout:\n{p.stdout}"
        return p

    def ps(self, *args):
        """ps's rows (header dropped) as lists of columns split on 2+ spaces."""
        lines = self.ok("ps", *args).stdout.splitlines()
        assert lines[0].split() == ["CONTAINER", "ID", "IMAGE", "COMMAND", "CREATED", "STATUS",
                                    "PORTS", "NAMES"], lines[0]
        return lines[1:]


@pytest.fixture
def podman(data_home, tmp_path):
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    pm = Podman(data_home, str(runtime))
    yield pm
    # whatever a test left running goes
    p = pm.run("ps", "-a", "-q")
    ids = p.stdout.split()
    if ids:
        pm.run("rm", "-f", *ids)


def containers_dir(pm):
    return os.path.join(pm.runtime, "csandbox", "containers")


# ---- run's options ----

def test_env_workdir_user_map_onto_the_container(podman):
    env = podman.env(FROM_CALLER="caller-value")
    p = podman.ok("run", "--rm", "-e", "A=1", "--env=B=two", "-e", "FROM_CALLER", "-e", "UNSET_X",
                  "-w", "/etc", "-u", "1234:5678", BB,
                  "sh", "-c",
                  'echo "$A $B $FROM_CALLER ${UNSET_X-unset}"; pwd; id -u; id -g; echo $HOME',
                  env=env)
    # HOME is podman's for a user the image does not name: /, never the caller's
    assert p.stdout.splitlines() == ["1 two caller-value unset", "/etc", "1234", "5678", "/"]


def test_env_file_and_default_workdir_and_user(podman, tmp_path):
    f = tmp_path / "env"
    f.write_text("K1=v1\nK2=v 2\n")
    p = podman.ok("run", "--env-file", str(f), BB, "sh", "-c",
                  'echo "$K1|$K2"; pwd; id -u; echo $HOME', cwd=str(tmp_path))
    # the caller's directory is not the container's: the image's WorkingDir (/), its user (0)
    assert p.stdout.splitlines() == ["v1|v 2", "/", "0", "/root"]
    f.write_text("HOME=/from-file\n")
    assert podman.ok("run", "--env-file", str(f), BB, "sh", "-c",
                     "echo $HOME").stdout == "/from-file\n"


def test_user_by_name_from_the_images_passwd(podman):
    p = podman.ok("run", "--user", "root", BB, "id", "-u")
    assert p.stdout.strip() == "0"
    p = podman.run("run", "--user", "no-such-user", BB, "true")
    assert p.returncode == 126 and "no-such-user" in p.stderr  # podman's status


def test_volume_write_is_owned_by_the_host_user(podman, tmp_path):
    d = tmp_path / "src"
    d.mkdir()
    podman.ok("run", "--rm", "-v", f"{d}:/src:z", "-w", "/src", BB,
              "sh", "-c", "echo made > out.txt")
    st = os.stat(d / "out.txt")
    assert (d / "out.txt").read_text() == "made\n"
    assert (st.st_uid, st.st_gid) == (os.getuid(), os.getgid())


def test_volume_ro_and_mount_readonly_refuse_writes(podman, tmp_path):
    d = tmp_path / "ro"
    d.mkdir()
    (d / "in").write_text("x\n")
    for opt in (["-v", f"{d}:/ro:ro"], ["--mount", f"type=bind,source={d},target=/ro,readonly"]):
        p = podman.run("run", *opt, BB, "sh", "-c", "cat /ro/in && echo y > /ro/new")
        assert p.stdout == "x\n"
        assert p.returncode != 0
        assert not (d / "new").exists()
    podman.ok("run", "--mount", f"type=bind,src={d},dst=/rw", BB, "sh", "-c", "echo y > /rw/new")
    assert (d / "new").read_text() == "y\n"


def test_root_is_writable_unless_read_only(podman):
    podman.ok("run", BB, "sh", "-c", "echo x > /made && cat /made")
    p = podman.run("run", "--read-only", BB, "sh", "-c", "echo x > /made")
    assert p.returncode != 0


def test_entrypoint_string_json_and_the_images(podman):
    assert podman.ok("run", "--entrypoint", "/bin/echo", BB, "a", "b").stdout == "a b\n"
    assert podman.ok("run", "--entrypoint", '["/bin/echo", "x y"]', BB, "z").stdout == "x y z\n"
    # the image's Entrypoint + Cmd; a COMMAND replaces the Cmd only
    assert podman.ok("run", EP).stdout == "ep cmd\n"
    assert podman.ok("run", EP, "given").stdout == "ep given\n"
    # --entrypoint replaces the image's Entrypoint and drops its Cmd
    assert podman.ok("run", "--entrypoint", "/bin/echo", EP).stdout == "\n"
    p = podman.run("run", "--entrypoint", "[1]", BB)
    assert p.returncode == 125 and "--entrypoint" in p.stderr


def host_interfaces():
    with open("/proc/net/dev") as f:
        return sorted(line.split(":")[0].strip() for line in f.readlines()[2:])


def interfaces(podman, *opts):
    out = podman.ok("run", *opts, BB, "cat", "/proc/net/dev").stdout
    return sorted(line.split(":")[0].strip() for line in out.splitlines()[2:])


def test_network_none_has_loopback_only_and_default_is_the_callers(podman):
    assert interfaces(podman, "--network", "none") == ["lo"]
    assert interfaces(podman, "--net=none") == ["lo"]
    assert host_interfaces() != ["lo"], "the test needs a machine with a network"
    assert interfaces(podman) == host_interfaces()
    assert interfaces(podman, "--network=bridge") == host_interfaces()
    p = podman.run("run", "--network", "container:x", BB, "true")
    assert p.returncode == 125 and "--network" in p.stderr


def test_stdin_only_with_interactive(podman):
    assert podman.ok("run", BB, "cat", input="data\n").stdout == ""
    assert podman.ok("run", "-i", BB, "cat", input="data\n").stdout == "data\n"
    assert podman.ok("run", "--interactive=true", BB, "cat", input="d2\n").stdout == "d2\n"


def test_hostname_default_is_the_short_id_and_can_be_given(podman):
    h = podman.ok("run", BB, "hostname").stdout.strip()
    assert len(h) == 12 and all(c in "0123456789abcdef" for c in h)
    assert podman.ok("run", "-h", "box", BB, "hostname").stdout.strip() == "box"


# ---- exit statuses ----

def test_exit_statuses_are_podmans(podman, tmp_path):
    assert podman.run("run", BB, "sh", "-c", "exit 7").returncode == 7
    assert podman.run("run", BB, "sh", "-c", "kill -TERM $$").returncode == 128 + signal.SIGTERM
    p = podman.run("run", BB, "/no/such/command")
    assert p.returncode == 127, p.stderr
    p = podman.run("run", BB, "/etc/passwd")
    assert p.returncode == 126, p.stderr
    p = podman.run("run", "--pull=never", "no-such-image", "true")
    assert p.returncode == 125 and "no-such-image" in p.stderr
    p = podman.run("run", "-v", f"{tmp_path}/missing:/m", BB, "true")
    assert p.returncode == 125 and "missing" in p.stderr


@pytest.mark.parametrize("args, named", [
    (["--publish", "80:80/udp"], "tcp"),
    (["-p", "8000-8010:80"], "ranges"),
    (["--network", "none", "-p", "8080:8080"], "--network none"),
    (["--privileged"], "--privileged"),
    (["-itP"], "-P"),
    (["-v", "my/vol:/data"], "my/vol"),
    (["-v", "/data"], "anonymous"),
    (["-v", "/tmp:/x:shared"], "shared"),
    (["--mount", "type=devpts,target=/x"], "type=devpts"),
    (["--platform", "linux/no-such-arch"], "platform"),
])
def test_unsupported_options_fail_naming_them(podman, args, named):
    p = podman.run("run", *args, BB, "true")
    assert p.returncode == 125
    assert named in p.stderr and "podman" in p.stderr, p.stderr


def test_unknown_subcommand_and_help(podman):
    p = podman.run("frobnicate")
    assert p.returncode == 125 and "frobnicate" in p.stderr
    p = podman.run("--log-level=debug", "run", BB, "true")
    assert p.returncode == 125 and "--log-level=debug is not supported" in p.stderr
    assert "run" in podman.ok("--help").stdout
    assert "--volume" in podman.ok("run", "--help").stdout
    assert "csandbox" in podman.ok("version").stdout


# ---- detached containers ----

LOOP = 'echo started; trap "echo bye; exit 3" TERM; while :; do sleep 0.1; done'


def test_detach_ps_logs_stop_rm(podman):
    cid = podman.ok("run", "-d", "--name", "web", BB, "sh", "-c", LOOP).stdout.strip()
    assert len(cid) == 64 and all(c in "0123456789abcdef" for c in cid)
    assert wait_until(lambda: "started" in podman.run("logs", "web").stdout)
    rows = podman.ps()
    assert len(rows) == 1 and rows[0].startswith(cid[:12]) and rows[0].endswith("web")
    assert "Up " in rows[0] and BB in rows[0]
    assert podman.ok("ps", "-q").stdout.split() == [cid[:12]]
    assert podman.ok("ps", "--format", "{{.Names}} {{.ID}}").stdout == f"web {cid[:12]}\n"
    # logs by id prefix too
    assert "started" in podman.ok("logs", cid[:8]).stdout
    p = podman.run("rm", "web")
    assert p.returncode != 0 and "running" in p.stderr
    assert podman.ok("stop", "-t", "20", "web").stdout == "web\n"
    assert podman.ps() == []
    rows = podman.ps("-a")
    assert len(rows) == 1 and "Exited (3)" in rows[0], rows
    assert podman.ok("logs", "web").stdout == "started\nbye\n"
    assert podman.ok("wait", "web").stdout == "3\n"
    podman.ok("rm", "web")
    assert podman.ps("-a") == []
    assert os.listdir(containers_dir(podman)) == []
    p = podman.run("logs", "web")
    assert p.returncode == 125 and "web" in p.stderr


def test_stop_kills_what_ignores_sigterm(podman):
    podman.ok("run", "-d", "--name", "stubborn", BB, "sh", "-c",
              'trap "" TERM; echo started; while :; do sleep 0.1; done')
    assert wait_until(lambda: "started" in podman.run("logs", "stubborn").stdout)
    podman.ok("stop", "--time=1", "stubborn")
    rows = podman.ps("-a")
    assert len(rows) == 1 and "Exited (137)" in rows[0], rows


def test_logs_follow_ends_with_the_container(podman):
    podman.ok("run", "-d", "--name", "short", BB, "sh", "-c",
              "echo one; sleep 1; echo two")
    p = podman.ok("logs", "-f", "short")
    assert p.stdout == "one\ntwo\n"
    assert "Exited (0)" in podman.ps("-a")[0]


def test_detach_rm_removes_the_container_when_it_exits(podman):
    podman.ok("run", "-d", "--rm", BB, "true")
    assert wait_until(lambda: podman.ps("-a") == [])
    assert wait_until(lambda: os.listdir(containers_dir(podman)) == [])


def test_detached_hostname_is_its_short_id(podman):
    cid = podman.ok("run", "-d", BB, "hostname").stdout.strip()
    assert podman.ok("wait", cid[:12]).stdout == "0\n"
    assert podman.ok("logs", cid).stdout == cid[:12] + "\n"
    # a name of podman's kind when none is given
    name = podman.ok("ps", "-a", "--format", "{{.Names}}").stdout.strip()
    assert name and name.replace("_", "").isalnum(), name


def test_detach_failure_is_recorded_as_its_status(podman):
    podman.ok("run", "-d", "--name", "nocmd", BB, "/no/such/command")
    assert podman.ok("wait", "nocmd").stdout == "127\n"


def test_name_clash_is_refused(podman):
    podman.ok("run", "-d", "--name", "dup", BB, "sh", "-c", LOOP)
    p = podman.run("run", "-d", "--name", "dup", BB, "true")
    assert p.returncode == 125 and "dup" in p.stderr
    p = podman.run("run", "--name", "dup", BB, "true")
    assert p.returncode == 125 and "dup" in p.stderr
    assert len(podman.ps("-a")) == 1
    podman.ok("rm", "-f", "dup")
    assert podman.ps("-a") == []


def test_detach_with_tty_is_refused(podman):
    p = podman.run("run", "-dit", BB, "sh")
    assert p.returncode == 125 and "--tty" in p.stderr


# ---- what a killed run leaves ----

def test_killed_run_leaves_no_process_and_no_state(podman, marker):
    proc = subprocess.Popen(podman.argv(["run", "--rm", BB, "/probe", "spawn-sleeper", "60",
                                         marker]),
                            env=podman.env(), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert read_line(proc.stdout) == "ready\n", proc.stderr.read1().decode()
        assert procs_with(marker)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=TIMEOUT)
        assert wait_until(lambda: not procs_with(marker)), procs_with(marker)
    finally:
        proc.kill()
        proc.wait()
    d = containers_dir(podman)
    assert not os.path.exists(d) or os.listdir(d) == []


def test_killed_detached_supervisor_takes_its_container(podman, marker):
    podman.ok("run", "-d", "--name", "sleeper", BB, "/probe", "spawn-sleeper", "60", marker)
    assert wait_until(lambda: "ready" in podman.run("logs", "sleeper").stdout)
    assert procs_with(marker)
    podman.ok("kill", "sleeper")
    assert wait_until(lambda: not procs_with(marker)), procs_with(marker)
    assert "Exited (137)" in podman.ps("-a")[0]


# ---- the docker name ----

def test_docker_symlink_dispatches(data_home, tmp_path):
    link = tmp_path / "docker"
    os.symlink(CSANDBOX, link)
    runtime = tmp_path / "rt"
    runtime.mkdir(mode=0o700)
    docker = Podman(data_home, str(runtime), prog=str(link))
    assert docker.ok("run", "--rm", BB, "echo", "hi").stdout == "hi\n"
    p = docker.run("run", "--publish", "1:1/udp", BB, "true")
    assert p.returncode == 125 and p.stderr.startswith("docker: run: --publish")
    p = subprocess.run([CSANDBOX, "docker", "run", "-p", "1-2", BB], capture_output=True, text=True,
                       env=docker.env(), timeout=TIMEOUT)
    assert p.returncode == 125 and p.stderr.startswith("docker: run: -p")


def test_kill_forwards_a_signal_and_refuses_one_it_cannot_deliver(podman):
    podman.ok("run", "-d", "--name", "trapper", BB, "sh", "-c", LOOP)
    assert wait_until(lambda: "started" in podman.run("logs", "trapper").stdout)
    p = podman.run("kill", "-s", "STOP", "trapper")
    assert p.returncode == 125 and "STOP" in p.stderr
    podman.ok("kill", "--signal=SIGTERM", "trapper")
    assert podman.ok("wait", "trapper").stdout == "3\n"
    assert podman.ok("logs", "trapper").stdout == "started\nbye\n"


# ---- inside a session ----

def test_inside_a_session_containers_get_the_sessions_network(data_home):
    """podman inside a csandbox sandbox (its default network: loopback only): the default
    network of a container is the session's, and -d keeps its records in the session."""
    script = (f"{CSANDBOX} podman run --rm {BB} cat /proc/net/dev | tail -n +3 | cut -d: -f1; "
              f"{CSANDBOX} podman run -d --name inner {BB} sleep 60 >/dev/null && "
              f"{CSANDBOX} podman ps --format '{{{{.Names}}}}' && "
              f"{CSANDBOX} podman rm -f inner >/dev/null && {CSANDBOX} podman ps -a -q")
    p = subprocess.run([CSANDBOX, "exec", "--bind", data_home, data_home,
                        "--ro-bind", CSANDBOX, CSANDBOX, "--setenv", "XDG_DATA_HOME", data_home,
                        "--", "sh", "-c", script],
                       capture_output=True, text=True, env=base_env(), timeout=TIMEOUT,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    assert [l.strip() for l in p.stdout.splitlines()] == ["lo", "inner"], p.stdout + p.stderr


def test_tty_only_with_t(podman):
    # stdout is a pipe here: without -t the container has no terminal, with -t one of its own
    p = podman.run("run", BB, "tty")
    assert p.returncode != 0 and "not a tty" in p.stdout
    p = podman.ok("run", "-t", BB, "tty")
    assert p.stdout.strip().startswith("/dev/pts/"), p.stdout


def test_stop_and_rm_take_several_containers(podman):
    for name in ("one", "two", "three"):
        podman.ok("run", "-d", "--name", name, BB, "sh", "-c", LOOP)
    assert podman.ok("stop", "-t", "20", "one", "two", "three").stdout == "one\ntwo\nthree\n"
    assert podman.ps() == []
    assert sorted(r.split()[-1] for r in podman.ps("-a")) == ["one", "three", "two"]
    podman.ok("rm", "one", "two", "three")
    assert podman.ps("-a") == []
