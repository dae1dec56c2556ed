"""`csandbox image build`: a Containerfile's steps run in csandbox's own sandbox, each RUN,
COPY and ADD made a layer of the store.

Two kinds of builds:
- busybox (tests/fixtures/oci.py's three-layer image imported as `bb`, a store of its own
  for each test): small, fast cases for each instruction, the cache, the errors, and hostile
  contexts, archives and RUN steps;
- Debian (the mmdebstrap root of tests/setup-root, pushed to a local registry started here
  and named in FROM): a multi-stage build whose RUN installs a package with the real apt-get
  from a local repository (apt drops to _apt, dpkg's postinst chowns to it: the subordinate
  range at work), built once per module, then run with `exec --image` and `csandbox run`.

The contract tested (what `image build` promises):
  csandbox image build [-f FILE] [-t NAME]... [--build-arg K=V]... [--target STAGE] [--pull]
      [--no-cache] [--network pasta|none] [--tls-verify=false] [--quiet] CONTEXT
  stderr: `STEP N/M: INSTRUCTION TEXT` per step, `--> Using cache` after a cached one;
  stdout: last line `sha256:<64 hex>`; errors in the Containerfile exit 125 with a message
  starting `Containerfile:LINE:`, a failing RUN exits 1 naming `Containerfile:LINE` and its
  status; a failed build tags nothing and leaves nothing in the store's tmp/."""
import io
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tarfile
import types
import uuid

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "fixtures"))
import oci  # noqa: E402
import rootfs as rootfs_builder  # noqa: E402

import test_pull  # noqa: E402
from conftest import CSANDBOX, PROBE, procs_with, wait_until  # noqa: E402
from test_image import layer_metadata  # noqa: E402
from test_packages import APT_BASE, build_repo  # noqa: E402
from test_run import Profiles, shell_claude  # noqa: E402

TIMEOUT = 180          # one busybox build or launch (the ASan build is slow)
DEBIAN_TIMEOUT = 600   # the Debian build: a pull of the base and apt-get
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
# podman prefixes a multi-stage build's steps with "[STAGE/STAGES] ": allowed
STEP = re.compile(r"^(?:\[\d+/\d+\] )?STEP (\d+)/(\d+): (.*)$")
TEST_HOST = os.environ.get("CSANDBOX_TEST_HOST")
BB_BASE = "bb:latest"
LAYER_STEPS = ("RUN", "COPY", "ADD")


# --- the store and the build ----------------------------------------------------------

class Store(test_pull.Store):
    """A store with a home and runtime dir of its own (no credential file of the test user
    is read), and the build command."""

    def run(self, *args, env=None, timeout=TIMEOUT, **kw):
        return subprocess.run([CSANDBOX, *args], capture_output=True, text=True,
                              timeout=timeout, env=env or self.env(),
                              stdin=subprocess.DEVNULL, **kw)

    def ls(self):  # test_image's ls() runs `csandbox ls`: this run() takes whole commands
        return json.loads(self.ok("image", "ls", "--json").stdout)

    def build(self, context, *args, timeout=TIMEOUT):
        return self.run("image", "build", *args, str(context), timeout=timeout)

    def built(self, context, *args, timeout=TIMEOUT):
        """Build, assert success, return (digest, CompletedProcess)."""
        p = self.build(context, *args, timeout=timeout)
        assert p.returncode == 0, f"exit {p.returncode}\nstderr:\n{p.stderr}\nstdout:\n{p.stdout}"
        last = p.stdout.rstrip("\n").splitlines()[-1] if p.stdout.strip() else ""
        assert DIGEST.match(last), f"the last line on stdout is no digest:\n{p.stdout}"
        return last, p

    def exec(self, image, *cmd, opts=(), timeout=TIMEOUT):
        """`exec --image image`, no network; cmd empty: the image's Entrypoint and Cmd."""
        argv = ["exec", "--image", image, "--net", "none", *opts]
        if cmd:
            argv += ["--", *cmd]
        return self.run(*argv, timeout=timeout)

    def sh(self, image, script, root=True):
        """A shell script's stdout in image (as root unless root=False), asserting exit 0."""
        opts = ("--uid", "0", "--gid", "0") if root else ()
        p = self.exec(image, "/bin/sh", "-c", script, opts=opts)
        assert p.returncode == 0, f"exit {p.returncode}\nstderr:\n{p.stderr}\nstdout:\n{p.stdout}"
        return p.stdout

    def cat(self, image, path):
        return self.sh(image, f"cat '{path}'")

    def inspect(self, image):
        return json.loads(self.ok("image", "inspect", image).stdout)

    def owner(self, image, path):
        """(mode, uid, gid) of path in image, from the metadata of its topmost layer that
        lists it (path relative to the root, as the metadata writes it)."""
        for diff in self.layers(image):
            meta = layer_metadata(diff)
            if path in meta:
                return meta[path]
        raise AssertionError(f"no layer of {image} lists {path}")

    def layers_hold(self, image, needle):
        """Files of image's layers (in the store, as the host sees them) whose content
        holds needle (bytes)."""
        found = []
        for diff in self.layers(image):
            for dirpath, dirnames, files in os.walk(diff):
                for f in files:
                    p = os.path.join(dirpath, f)
                    if not stat.S_ISREG(os.lstat(p).st_mode):
                        continue
                    try:
                        with open(p, "rb") as fh:
                            if needle in fh.read():
                                found.append(p)
                    except PermissionError:
                        pass
        return found

    def tmp_entries(self):
        tmp = os.path.join(self.images, "tmp")
        return sorted(os.listdir(tmp)) if os.path.isdir(tmp) else []


def steps(stderr):
    """The progress: [(N, M, text, served from the cache)], in order."""
    out = []
    for line in stderr.splitlines():
        m = STEP.match(line)
        if m:
            out.append([int(m.group(1)), int(m.group(2)), m.group(3), False])
        elif line.strip().startswith("--> Using cache") and out:
            out[-1][3] = True
    return [tuple(s) for s in out]


def layer_steps(stderr):
    """{instruction text: cached} of the RUN/COPY/ADD steps."""
    return {text: cached for _, _, text, cached in steps(stderr)
            if text.split(" ", 1)[0] in LAYER_STEPS}


def write_context(path, files):
    """A build context: files maps a relative path to its content (str or bytes), to
    ("link", target) for a symlink, or to ("mode", content, mode)."""
    path = str(path)
    os.makedirs(path, exist_ok=True)
    for rel, content in files.items():
        p = os.path.join(path, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        if isinstance(content, tuple) and content[0] == "link":
            os.symlink(content[1], p)
            continue
        mode = None
        if isinstance(content, tuple) and content[0] == "mode":
            _, content, mode = content
        with open(p, "wb") as f:
            f.write(content.encode() if isinstance(content, str) else content)
        if mode is not None:
            os.chmod(p, mode)
    return path


def targz(entries, compression="gz"):
    """A tar archive (bytes) of oci.py entries; compression "gz" or "" (plain)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:" + compression, format=tarfile.PAX_FORMAT) as t:
        for info, data in entries:
            t.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def message_at(stderr, name, line):
    """The stderr line that starts (after csandbox's own `csandbox: ` prefix, if any) with
    NAME:LINE:, or None."""
    pat = re.compile(rf"^(csandbox: )?{re.escape(name)}:{line}:")
    return next((s for s in stderr.splitlines() if pat.match(s)), None)


# --- fixtures -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def bb_layout(tmp_path_factory):
    """The busybox fixture image (three layers, whiteouts, an opaque dir) with a plain
    config: WorkingDir /, a PATH, no Entrypoint."""
    work = str(tmp_path_factory.mktemp("bb"))
    layout = os.path.join(work, "layout")
    oci.write_layout(layout, oci.busybox_layers(work, PROBE), config={
        "Env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin", "FIXTURE=bb"], "WorkingDir": "/",
        "Cmd": ["/bin/sh"]})
    return layout


@pytest.fixture
def store(tmp_path, bb_layout):
    """A store of its own holding the busybox image as `bb`."""
    s = Store(str(tmp_path / "store"))
    s.ok("image", "import", bb_layout, "--name", "bb", "--quiet")
    return s


@pytest.fixture
def ctx(tmp_path):
    """make(files) -> a fresh build context directory."""
    count = [0]

    def make(files):
        count[0] += 1
        return write_context(tmp_path / f"ctx{count[0]}", files)
    return make


@pytest.fixture
def secret_outside():
    """A host directory outside pytest's tree holding a file with a unique secret; it must
    stay exactly as it is, and the secret must reach no image."""
    path = f"/var/tmp/csb-build-outside-{uuid.uuid4().hex[:12]}"
    os.mkdir(path)
    secret = f"host-secret-{uuid.uuid4().hex}\n"
    with open(os.path.join(path, "host-secret"), "w") as f:
        f.write(secret)
    yield path, secret.encode()
    subprocess.run(["rm", "-rf", "--one-file-system", path], check=False)


@pytest.fixture(scope="module")
def registry(tmp_path_factory, bb_layout):
    """A plain-http registry (docker-registry on 127.0.0.1) holding test/bb:v1."""
    reg = test_pull.Registry(str(tmp_path_factory.mktemp("build-registry")))
    reg.bb_layout = bb_layout
    try:
        reg.seed(f"oci:{bb_layout}:latest", "test/bb:v1")
        yield reg
    finally:
        reg.stop()


# --- the basics -----------------------------------------------------------------------

def test_build_tags_lists_and_runs_the_image(store, ctx):
    c = ctx({"Containerfile": "FROM bb\nCOPY hello.txt /srv/hello.txt\n"
                              "RUN echo built >/built && cat /srv/hello.txt >>/built\n",
             "hello.txt": "hello from the context\n"})
    digest, p = store.built(c, "-t", "first", "-t", "second:v2")
    names = store.names()
    assert names.get("first:latest") == digest and names.get("second:v2") == digest, names
    assert "first" in store.ok("image", "ls").stdout
    assert store.cat("first", "/built") == "built\nhello from the context\n"
    assert store.cat("second:v2", "/srv/hello.txt") == "hello from the context\n"
    # the base's layers are the image's first ones
    base = store.inspect(BB_BASE)["rootfs"]["diff_ids"]
    cfg = store.inspect("first")
    assert cfg["rootfs"]["diff_ids"][:len(base)] == base
    assert len(cfg["rootfs"]["diff_ids"]) > len(base)
    assert "FIXTURE=bb" in cfg["config"]["Env"], "the base's config is inherited"
    assert store.tmp_entries() == []


def test_progress_is_one_line_per_step_and_the_digest_is_the_last_line(store, ctx):
    lines = ["FROM bb", "ENV A=1", "COPY hello.txt /hello.txt", "RUN true",
             "WORKDIR /srv", "CMD [\"/bin/sh\"]"]
    c = ctx({"Containerfile": "\n".join(lines) + "\n", "hello.txt": "hi\n"})
    digest, p = store.built(c, "-t", "prog")
    got = steps(p.stderr)
    assert [(n, m, text) for n, m, text, _ in got] == \
        [(i + 1, len(lines), text) for i, text in enumerate(lines)], p.stderr
    assert not any(cached for *_, cached in got), "a first build has no cache"
    assert p.stdout.rstrip("\n").splitlines()[-1] == digest


def test_quiet_prints_only_the_digest(store, ctx):
    c = ctx({"Containerfile": "FROM bb\nRUN touch /x\nCOPY a /a\n", "a": "a\n"})
    p = store.build(c, "--quiet", "-t", "q")
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert DIGEST.match(p.stdout.rstrip("\n").splitlines()[-1]), p.stdout
    assert "q:latest" in store.names()


def test_dockerfile_is_read_when_there_is_no_containerfile_and_f_names_another(store, ctx):
    c = ctx({"Dockerfile": "FROM bb\nRUN echo dockerfile >/which\n"})
    store.built(c, "-t", "d")
    assert store.cat("d", "/which") == "dockerfile\n"
    c = ctx({"Dockerfile": "FROM bb\nRUN echo dockerfile >/which\n",
             "Containerfile": "FROM bb\nRUN echo containerfile >/which\n",
             "build/Other.cf": "FROM bb\nRUN echo other >/which\n"})
    store.built(c, "-t", "c")
    assert store.cat("c", "/which") == "containerfile\n"
    store.built(c, "-t", "o", "-f", os.path.join(c, "build", "Other.cf"))
    assert store.cat("o", "/which") == "other\n"


def test_a_built_image_is_a_base_for_the_next_build(store, ctx):
    store.built(ctx({"Containerfile": "FROM bb\nRUN echo one >/one\n"}), "-t", "one")
    store.built(ctx({"Containerfile": "FROM one\nRUN cat /one >/two\n"}), "-t", "two")
    assert store.cat("two", "/two") == "one\n"


# --- instructions ---------------------------------------------------------------------

def test_env_and_arg_expand_and_build_arg_sets_them(store, ctx):
    c = ctx({"Containerfile": """\
ARG BASE=bb
ARG OUTER=outer-default
FROM $BASE
ARG OUTER
ARG GREETING=hello
ARG WHO
ARG UNSET
ENV APP_HOME=/app GREETING_ENV=${GREETING}-env
ENV PATH=$PATH:/app/bin
RUN mkdir -p $APP_HOME && echo "$GREETING $WHO" >$APP_HOME/args \\
    && echo "${UNSET:-fallback} $OUTER" >$APP_HOME/defaults && env >$APP_HOME/env
COPY ${WHO}.txt $APP_HOME/
"""})
    write_context(c, {"world.txt": "the world file\n"})
    store.built(c, "-t", "args", "--build-arg", "WHO=world")
    assert store.cat("args", "/app/args") == "hello world\n"
    assert store.cat("args", "/app/defaults") == "fallback outer-default\n"
    assert store.cat("args", "/app/world.txt") == "the world file\n"
    run_env = store.cat("args", "/app/env").splitlines()
    assert "WHO=world" in run_env, "an ARG is in the environment of later RUNs"
    env = store.inspect("args")["config"]["Env"]
    assert "APP_HOME=/app" in env and "GREETING_ENV=hello-env" in env, env
    assert "PATH=/usr/sbin:/usr/bin:/sbin:/bin:/app/bin" in env, env
    assert not any(e.startswith(("WHO=", "GREETING=", "OUTER=")) for e in env), \
        "an ARG is not in the image's config"
    # ENV reaches the image's processes
    assert "GREETING_ENV=hello-env" in store.sh("args", "env", root=False).splitlines()
    # --build-arg overrides a default, and an ARG set before FROM picks the base
    store.built(c, "-t", "args2", "--build-arg", "WHO=world", "--build-arg", "GREETING=hi",
                "--build-arg", "OUTER=given")
    assert store.cat("args2", "/app/args") == "hi world\n"
    assert store.cat("args2", "/app/defaults") == "fallback given\n"


def test_workdir_is_created_and_relative_ones_chain(store, ctx):
    c = ctx({"Containerfile": "FROM bb\nWORKDIR /a/b/c\nRUN pwd >here\nWORKDIR d\n"
                              "RUN pwd >here\nCOPY f .\n", "f": "f\n"})
    store.built(c, "-t", "wd")
    assert store.cat("wd", "/a/b/c/here") == "/a/b/c\n"
    assert store.cat("wd", "/a/b/c/d/here") == "/a/b/c/d\n"
    assert store.cat("wd", "/a/b/c/d/f") == "f\n"
    assert store.inspect("wd")["config"]["WorkingDir"] == "/a/b/c/d"
    assert store.sh("wd", "pwd", root=False) == "/a/b/c/d\n", "the image's default cwd"


def test_run_is_root_with_its_capabilities_and_user_switches_later_runs(store, ctx):
    c = ctx({"Containerfile": """\
FROM bb
RUN id -u >/root-uid && grep '^CapEff:' /proc/self/status >/root-caps \\
    && echo 'app:x:1234:1235::/home/app:/bin/sh' >>/etc/passwd \\
    && echo 'app:x:1235:' >>/etc/group && mkdir -p /home/app /out \\
    && chown 1234:1235 /home/app && chmod 0777 /out
USER app
RUN id -u >/out/uid && id -g >/out/gid && touch /out/by-app \\
    && grep '^CapEff:' /proc/self/status >/out/caps
USER 4321:4322
RUN id -u >/out/uid2 && id -g >/out/gid2
USER app
"""})
    store.built(c, "-t", "user")
    assert store.cat("user", "/root-uid") == "0\n"
    caps = int(store.cat("user", "/root-caps").split()[1], 16)
    for bit, name in ((0, "CHOWN"), (1, "DAC_OVERRIDE"), (3, "FOWNER"), (6, "SETGID"),
                      (7, "SETUID")):
        assert caps & (1 << bit), f"a RUN as root lacks CAP_{name}: {caps:#x}"
    assert store.cat("user", "/out/uid") == "1234\n"
    assert store.cat("user", "/out/gid") == "1235\n"
    assert int(store.cat("user", "/out/caps").split()[1], 16) == 0
    assert store.cat("user", "/out/uid2") == "4321\n"
    assert store.cat("user", "/out/gid2") == "4322\n"
    assert store.owner("user:latest", "out/by-app")[1:] == (1234, 1235)
    assert store.inspect("user")["config"]["User"] == "app"
    assert store.sh("user", "id -u", root=False) == "1234\n", "the image runs as its User"


def test_run_chown_into_the_subordinate_range_is_recorded(store, ctx):
    c = ctx({"Containerfile": """\
FROM bb
RUN touch /f42 /rootmade && chown 42:42 /f42 && mkdir /d && chown 1000:1001 /d \\
    && stat -c '%u:%g' /f42 >/seen-same-run
RUN stat -c '%u:%g' /rootmade >/seen-later
"""})
    store.built(c, "-t", "own")
    assert store.cat("own", "/seen-same-run") == "42:42\n"
    assert store.cat("own", "/seen-later") == "0:0\n", "root's files show as root in a later RUN"
    assert store.owner("own:latest", "f42")[1:] == (42, 42)
    assert store.owner("own:latest", "d") == (0o40755, 1000, 1001)
    assert store.owner("own:latest", "rootmade")[1:] == (0, 0)


def test_a_root_run_sees_and_keeps_the_owners_the_layers_record(store, ctx):
    """The layers on disk are the caller's; a RUN still finds each directory with the owner
    its layers record, as docker's RUN would: root switching to a user (su, runuser) writes
    in that user's directories, stat shows their owners, an explicit chown to root is kept,
    and what the step leaves as it was given is not copied into its layer."""
    c = ctx({"Containerfile": """\
FROM bb
RUN mkdir -p /home/u/sub /home/u/mine /var/grp /srv/mode && chown -R 1000:1000 /home/u \\
    && chown 0:50 /var/grp && chmod 2775 /var/grp && chown 7:7 /srv/mode
RUN /probe as 1000 1000 /bin/sh -c 'echo made >/home/u/new && mkdir /home/u/sub/deeper' \\
    && stat -c '%u:%g' /home/u/mine /var/grp >/seen && chown 0:0 /home/u/mine \\
    && chmod 0700 /srv/mode
"""})
    store.built(c, "-t", "owners")
    assert store.cat("owners", "/seen") == "1000:1000\n0:50\n"
    assert store.owner("owners:latest", "home/u/new")[1:] == (1000, 1000)
    assert store.owner("owners:latest", "home/u/sub/deeper")[1:] == (1000, 1000)
    assert store.owner("owners:latest", "home/u/mine")[1:] == (0, 0), "the chown to root is lost"
    assert store.owner("owners:latest", "var/grp") == (0o42775, 0, 50)
    # /var/grp was given its owner and left so: not in the layer; /srv/mode changed mode
    top = layer_metadata(store.layers("owners:latest")[0])
    assert sorted(top) == [".", "home", "home/u", "home/u/mine", "home/u/new", "home/u/sub",
                           "home/u/sub/deeper", "seen", "srv", "srv/mode"], sorted(top)
    assert top["srv/mode"] == (0o40700, 7, 7)


def test_a_directory_remade_under_a_replaced_parent_stays_in_the_layer(store, ctx):
    """A RUN that replaces a directory (opaque in its layer) and makes again an empty
    subdirectory the same as the one it hid (mode, owner, mtime) changed the image: the
    subdirectory is no copy-up and must stay in the layer."""
    c = ctx({"Containerfile": """\
FROM bb
RUN mkdir -p /opt/app/logs && chown 5:5 /opt/app/logs && touch -d '2020-01-01 00:00:00' /opt/app/logs
RUN rm -rf /opt/app && mkdir -p /opt/app/logs \\
    && chown 5:5 /opt/app/logs && touch -d '2020-01-01 00:00:00' /opt/app/logs
"""})
    store.built(c, "-t", "remade")
    top = layer_metadata(store.layers("remade:latest")[0])
    assert top.get("opt/app/logs") == (0o40755, 5, 5), sorted(top)


def test_shell_changes_the_shell_form_and_not_the_exec_form(store, ctx):
    c = ctx({"Containerfile": """\
FROM bb
RUN mkdir /out && printf '#!/bin/sh\\necho "myshell: $*" >>/out/shell\\n' >/bin/myshell \\
    && chmod 0755 /bin/myshell
SHELL ["/bin/myshell", "-z"]
RUN hello world
RUN ["/bin/sh", "-c", "echo exec form >/out/exec"]
"""})
    store.built(c, "-t", "shell")
    assert store.cat("shell", "/out/shell") == "myshell: -z hello world\n"
    assert store.cat("shell", "/out/exec") == "exec form\n"


def test_shell_form_cmd_and_entrypoint_run_through_sh(store, ctx):
    c = ctx({"Containerfile": "FROM bb\nENTRYPOINT echo from entrypoint\n"})
    store.built(c, "-t", "sf")
    assert store.inspect("sf")["config"]["Entrypoint"] == \
        ["/bin/sh", "-c", "echo from entrypoint"]
    c = ctx({"Containerfile": "FROM bb\nCMD echo default $FIXTURE\n"})
    store.built(c, "-t", "sf2")
    assert store.inspect("sf2")["config"]["Cmd"] == ["/bin/sh", "-c", "echo default $FIXTURE"]
    p = store.exec("sf2")
    assert p.returncode == 0 and p.stdout == "default bb\n", (p.stdout, p.stderr)


def test_exec_form_run_has_no_shell_and_no_expansion(store, ctx):
    c = ctx({"Containerfile": "FROM bb\nENV HOME=/root\n"
                              "RUN [\"/bin/touch\", \"/exec-$HOME\", \"/two words\"]\n"})
    store.built(c, "-t", "ef")
    out = store.sh("ef", "ls -1 /")
    assert "exec-$HOME" in out.splitlines() and "two words" in out.splitlines(), out


def test_entrypoint_cmd_labels_and_ports_are_recorded_and_run(store, ctx):
    c = ctx({"Containerfile": """\
FROM bb
LABEL org.example.a="one" b=two
LABEL "c d"="three four"
EXPOSE 8080 53/udp
ENTRYPOINT ["/bin/echo", "ep"]
CMD ["from-cmd"]
"""})
    store.built(c, "-t", "meta")
    cfg = store.inspect("meta")["config"]
    labels = cfg.get("Labels") or {}
    assert {k: labels.get(k) for k in ("org.example.a", "b", "c d")} == \
        {"org.example.a": "one", "b": "two", "c d": "three four"}, labels
    assert set(cfg.get("ExposedPorts") or {}) == {"8080/tcp", "53/udp"}, cfg
    assert cfg["Entrypoint"] == ["/bin/echo", "ep"] and cfg["Cmd"] == ["from-cmd"], cfg
    p = store.exec("meta")
    assert p.returncode == 0 and p.stdout == "ep from-cmd\n", (p.stdout, p.stderr)
    p = store.exec("meta", "/bin/echo", "given")
    assert p.returncode == 0 and p.stdout == "given\n", (p.stdout, p.stderr)


def test_copy_chown_and_chmod(store, ctx):
    c = ctx({"Containerfile": """\
FROM bb
RUN echo 'app:x:1234:1235::/:/bin/sh' >>/etc/passwd && echo 'grp:x:1235:' >>/etc/group
COPY --chown=42:43 a /a
COPY --chmod=0750 b /b
COPY --chown=app:grp --chmod=600 c /c
COPY --chown=app dir /dir/
""", "a": "a\n", "b": "b\n", "c": "c\n", "dir/inner": ("mode", "i\n", 0o640)})
    store.built(c, "-t", "cc")
    assert store.owner("cc:latest", "a") == (0o100644, 42, 43)
    assert store.owner("cc:latest", "b") == (0o100750, 0, 0)
    assert store.owner("cc:latest", "c") == (0o100600, 1234, 1235)
    assert store.owner("cc:latest", "dir/inner")[:2] == (0o100640, 1234)
    assert store.sh("cc", "stat -c %a /b /c /dir/inner") == "750\n600\n640\n"
    assert store.cat("cc", "/b") == "b\n"


def test_copy_globs_directories_and_renames(store, ctx):
    c = ctx({"Containerfile": """\
FROM bb
COPY src/*.txt /g/
COPY src/?.log /q/
COPY src /whole/
COPY src/sub/d.txt /renamed
COPY src/a.txt src/b.txt /multi/
COPY ["src/c.log", "/json dest/"]
""", "src/a.txt": "a\n", "src/b.txt": "b\n", "src/c.log": "c\n", "src/sub/d.txt": "d\n"})
    store.built(c, "-t", "glob")
    out = store.sh("glob", "cd / && find g q whole renamed multi 'json dest' | sort")
    assert out.splitlines() == sorted([
        "g", "g/a.txt", "g/b.txt", "q", "q/c.log",
        "whole", "whole/a.txt", "whole/b.txt", "whole/c.log", "whole/sub", "whole/sub/d.txt",
        "renamed", "multi", "multi/a.txt", "multi/b.txt", "json dest", "json dest/c.log"]), out
    assert store.cat("glob", "/renamed") == "d\n"


@pytest.mark.parametrize("ignore_file", [".dockerignore", ".containerignore"])
def test_ignore_file_excludes_and_bang_reincludes(store, ctx, ignore_file):
    c = ctx({"Containerfile": "FROM bb\nCOPY . /ctx/\n",
             ignore_file: "# comment\n*.log\n!keep.log\nsecret\n**/*.tmp\n",
             "a.txt": "a\n", "x.log": "x\n", "keep.log": "k\n", "secret/s.txt": "s\n",
             "deep/er/z.tmp": "z\n", "deep/er/ok.txt": "ok\n"})
    store.built(c, "-t", "ign")
    files = set(store.sh("ign", "cd /ctx && find . -type f").split())
    files -= {"./Containerfile", "./" + ignore_file}
    assert files == {"./a.txt", "./keep.log", "./deep/er/ok.txt"}, files


def test_ignored_file_named_by_copy_is_a_missing_source(store, ctx):
    c = ctx({"Containerfile": "FROM bb\nCOPY x.log /x.log\n", ".dockerignore": "*.log\n",
             "x.log": "x\n"})
    p = store.build(c, "-t", "no")
    assert p.returncode == 125 and message_at(p.stderr, "Containerfile", 2), p.stderr


def test_add_unpacks_a_local_tar_and_copy_does_not(store, ctx):
    entries = [oci.directory("pkg"), oci.file("pkg/file", "in the archive\n", 0o640),
               oci.symlink("pkg/link", "file")]
    c = ctx({"Containerfile": "FROM bb\nADD a.tar.gz /gz/\nADD b.tar /plain\n"
                              "COPY a.tar.gz /copied/\nADD note.txt /note.txt\n",
             "a.tar.gz": targz(entries), "b.tar": targz(entries, ""), "note.txt": "note\n"})
    store.built(c, "-t", "add")
    assert store.cat("add", "/gz/pkg/file") == "in the archive\n"
    assert store.cat("add", "/plain/pkg/link") == "in the archive\n"
    assert store.sh("add", "readlink /gz/pkg/link; stat -c %a /gz/pkg/file") == "file\n640\n"
    assert store.sh("add", "ls /copied") == "a.tar.gz\n"
    assert store.cat("add", "/note.txt") == "note\n"


def test_multi_stage_copy_from_and_target(store, ctx):
    c = ctx({"Containerfile": """\
FROM bb AS builder
RUN mkdir /out && echo built-in-builder >/out/artifact && echo only-here >/builder-only
FROM bb AS other
RUN echo other >/other
FROM bb
COPY --from=builder /out/artifact /artifact
COPY --from=other /other /from-other
RUN cat /artifact /from-other >/check
"""})
    store.built(c, "-t", "final")
    assert store.cat("final", "/check") == "built-in-builder\nother\n"
    assert store.sh("final", "ls /out /builder-only 2>&1; true").count("No such file") == 2
    store.built(c, "-t", "tgt", "--target", "builder")
    assert store.cat("tgt", "/builder-only") == "only-here\n"
    assert store.sh("tgt", "test -e /artifact || echo absent") == "absent\n"


def test_rm_of_a_base_file_in_run_is_gone_from_the_image(store, ctx):
    c = ctx({"Containerfile": "FROM bb\nRUN rm /etc/marker && rm -r /opt/a /srv/ro\n"})
    store.built(c, "-t", "rm")
    assert store.sh("rm", "ls /etc/marker /opt/a /srv/ro 2>&1; true").count("No such file") == 3
    assert store.sh("rm", "cat /etc/passwd >/dev/null && ls /srv") == "data\nhl\ntool\n"
    top = store.layers("rm:latest")[0]
    st = os.lstat(os.path.join(top, "etc", "marker"))
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == 0, "a whiteout in the store's form"
    # the base image is untouched
    assert store.cat(BB_BASE, "/etc/marker") == "rootfs etc\n"


def test_from_scratch_with_copy(store, ctx, tmp_path):
    c = ctx({"Containerfile": "FROM scratch\nCOPY probe /probe\nCOPY hello /etc/hello\n"
                              "ENTRYPOINT [\"/probe\"]\nCMD [\"report\"]\n",
             "hello": "from scratch\n"})
    shutil.copy(PROBE, os.path.join(c, "probe"))
    store.built(c, "-t", "scratch")
    assert len(store.inspect("scratch")["rootfs"]["diff_ids"]) == 2
    p = store.exec("scratch")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["argv"] == ["/probe", "report"]
    p = store.exec("scratch", "/probe", "read", "/etc/hello")
    assert p.returncode == 0 and "from scratch" in p.stdout, (p.stdout, p.stderr)


def test_run_network_is_pasta_by_default_and_none_on_request(store, ctx):
    assert TEST_HOST, "CSANDBOX_TEST_HOST is unset: run the suite in tests/testnet's network"
    # the probe connects (busybox-static's wget crashes on Debian 12, its nc hangs)
    run = f"RUN /probe connect {TEST_HOST} 8080 >/got\n"
    c = ctx({"Containerfile": "FROM bb\n" + run})
    store.built(c, "-t", "net")
    assert json.loads(store.cat("net", "/got"))["errno"] == "ok"
    c = ctx({"Containerfile": "FROM bb\n" + run +
             "RUN tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' >/ifs\n"})
    store.built(c, "-t", "nonet", "--network", "none")
    assert json.loads(store.cat("nonet", "/got"))["errno"] in ("ENETUNREACH", "EHOSTUNREACH")
    assert store.cat("nonet", "/ifs").split() == ["lo"]


# --- FROM through a registry ----------------------------------------------------------

def test_from_a_registry_pulls_and_pull_refreshes(store, ctx, registry, tmp_path):
    ref = f"{registry.host}/test/bb:v1"
    c = ctx({"Containerfile": f"FROM {ref}\nRUN cat /etc/marker >/seen\n"})
    store.built(c, "-t", "pulled", "--tls-verify=false")
    assert store.cat("pulled", "/seen") == "rootfs etc\n"
    # the tag moves to another image: without --pull the stored base is used
    layout = str(tmp_path / "v2")
    oci.write_layout(layout, [*oci.busybox_layers(str(tmp_path), PROBE),
                              oci.Layer([oci.directory("etc"),
                                         oci.file("etc/marker", "version 2\n")])],
                     config={"Env": ["PATH=/bin"], "WorkingDir": "/"})
    registry.seed(f"oci:{layout}:latest", "test/bb:v1")
    try:
        store.built(c, "-t", "again", "--tls-verify=false")
        assert store.cat("again", "/seen") == "rootfs etc\n"
        store.built(c, "-t", "fresh", "--tls-verify=false", "--pull")
        assert store.cat("fresh", "/seen") == "version 2\n"
    finally:
        registry.seed(f"oci:{registry.bb_layout}:latest", "test/bb:v1")


# --- the cache ------------------------------------------------------------------------

CACHE_FILE = """\
FROM bb
COPY one /one
RUN cat /one >/r1 && head -c 16 /dev/urandom | md5sum >/rand1
ENV STAGE=two
ADD arch.tar /arch/
COPY two /two
RUN cat /two >/r2 && head -c 16 /dev/urandom | md5sum >/rand2
"""


def cache_context(ctx):
    return ctx({"Containerfile": CACHE_FILE, "one": "one\n", "two": "two\n",
                "arch.tar": targz([oci.file("in-arch", "arch\n")], "")})


def test_unchanged_rebuild_uses_the_cache_for_every_step(store, ctx):
    c = cache_context(ctx)
    first, p1 = store.built(c, "-t", "cache")
    assert not any(layer_steps(p1.stderr).values()), p1.stderr
    rand = store.cat("cache", "/rand1") + store.cat("cache", "/rand2")
    second, p2 = store.built(c, "-t", "cache")
    cached = layer_steps(p2.stderr)
    assert len(cached) == 5 and all(cached.values()), p2.stderr
    assert second == first
    assert store.cat("cache", "/rand1") + store.cat("cache", "/rand2") == rand
    assert store.tmp_entries() == []


def test_a_changed_file_rebuilds_its_step_and_every_later_one(store, ctx):
    c = cache_context(ctx)
    first, _ = store.built(c, "-t", "cache")
    rand1 = store.cat("cache", "/rand1")
    rand2 = store.cat("cache", "/rand2")
    with open(os.path.join(c, "two"), "w") as f:
        f.write("two, changed\n")
    second, p = store.built(c, "-t", "cache")
    cached = layer_steps(p.stderr)
    assert cached == {"COPY one /one": True,
                      "RUN cat /one >/r1 && head -c 16 /dev/urandom | md5sum >/rand1": True,
                      "ADD arch.tar /arch/": True,
                      "COPY two /two": False,
                      "RUN cat /two >/r2 && head -c 16 /dev/urandom | md5sum >/rand2": False}, \
        p.stderr
    assert second != first
    assert store.cat("cache", "/r2") == "two, changed\n"
    assert store.cat("cache", "/rand1") == rand1 and store.cat("cache", "/rand2") != rand2
    # an earlier file's change invalidates everything from its step on
    with open(os.path.join(c, "one"), "w") as f:
        f.write("one, changed\n")
    _, p = store.built(c, "-t", "cache")
    assert not any(layer_steps(p.stderr).values()), p.stderr


def test_a_changed_build_arg_or_instruction_is_not_served_from_the_cache(store, ctx):
    c = ctx({"Containerfile": "FROM bb\nARG V=1\nRUN echo $V >/v\n"})
    store.built(c, "-t", "a")
    _, p = store.built(c, "-t", "a", "--build-arg", "V=2")
    assert store.cat("a", "/v") == "2\n" and not any(layer_steps(p.stderr).values()), p.stderr
    write_context(c, {"Containerfile": "FROM bb\nARG V=1\nRUN echo $V  >/v\n"})
    _, p = store.built(c, "-t", "a")
    assert not any(layer_steps(p.stderr).values()), p.stderr


def test_no_cache_rebuilds_every_step(store, ctx):
    c = cache_context(ctx)
    first, _ = store.built(c, "-t", "cache")
    rand = store.cat("cache", "/rand1")
    second, p = store.built(c, "-t", "cache", "--no-cache")
    cached = layer_steps(p.stderr)
    assert len(cached) == 5 and not any(cached.values()), p.stderr
    assert "Using cache" not in p.stderr
    assert second != first and store.cat("cache", "/rand1") != rand


# --- errors ---------------------------------------------------------------------------

ERRORS = {
    "bad-instruction": ("FROM bb\nRUN true\nCOPY onlyone\n", 3),
    "missing-source": ("FROM bb\nRUN true\nCOPY not-there /x\n", 3),
    "unknown-stage": ("FROM bb AS one\nRUN true\nFROM bb\nCOPY --from=nosuchstage /x /x\n", 4),
    "unknown-instruction": ("FROM bb\nFROBNICATE x\nRUN true\n", 2),
    "after-continuation": ("FROM bb\n# a comment\nRUN echo a \\\n    b\n\nBOGUS x\n", 6),
    "no-from": ("RUN true\n", 1),
}


@pytest.mark.parametrize("kind", list(ERRORS))
def test_containerfile_errors_exit_125_naming_the_line(store, ctx, kind):
    text, line = ERRORS[kind]
    c = ctx({"Containerfile": text})
    before = store.names()
    p = store.build(c, "-t", "broken")
    assert p.returncode == 125, f"exit {p.returncode}\n{p.stderr}"
    assert message_at(p.stderr, "Containerfile", line), p.stderr
    assert store.names() == before and list(before) == [BB_BASE]
    assert store.tmp_entries() == []


def test_error_names_the_base_name_of_the_file_given_with_f(store, ctx):
    c = ctx({"ci/Build.containerfile": "FROM bb\nNOPE x\n"})
    p = store.build(c, "-f", os.path.join(c, "ci", "Build.containerfile"))
    assert p.returncode == 125 and message_at(p.stderr, "Build.containerfile", 2), p.stderr


def test_unknown_target_is_refused(store, ctx):
    c = ctx({"Containerfile": "FROM bb AS one\nRUN true\n"})
    p = store.build(c, "-t", "t", "--target", "two")
    assert p.returncode == 125 and "two" in p.stderr, p.stderr
    assert "t:latest" not in store.names()


def test_failing_run_exits_1_naming_the_line_and_status(store, ctx):
    c = ctx({"Containerfile": "FROM bb\nCOPY a /a\n\nRUN echo step; exit 37\nRUN true\n",
             "a": "a\n"})
    before = store.names()
    p = store.build(c, "-t", "failed")
    assert p.returncode == 1, f"exit {p.returncode}\n{p.stderr}"
    named = [s for s in p.stderr.splitlines() if "Containerfile:4" in s]
    assert named and any(re.search(r"\b37\b", s) for s in named), p.stderr
    assert store.names() == before and store.tmp_entries() == []
    # and it fails again rather than being cached as a success
    p = store.build(c, "-t", "failed")
    assert p.returncode == 1, p.stderr


# --- hostile contexts, archives and steps ---------------------------------------------

def test_context_symlinks_are_copied_as_links_never_followed(store, ctx, secret_outside):
    outside, secret = secret_outside
    c = ctx({"Containerfile": "FROM bb\nCOPY . /ctx/\n",
             "abs": ("link", os.path.join(outside, "host-secret")),
             "rel": ("link", "../" * 12 + outside.lstrip("/") + "/host-secret"),
             "dirlink": ("link", outside),
             "plain": "plain\n"})
    store.built(c, "-t", "links")
    out = store.sh("links", "for l in abs rel dirlink; do readlink /ctx/$l; done")
    assert out.splitlines() == [os.path.join(outside, "host-secret"),
                                "../" * 12 + outside.lstrip("/") + "/host-secret", outside]
    assert store.layers_hold("links:latest", secret) == []
    # naming the link, or a path through it, never brings the host file in either
    for src in ("abs", "rel", "dirlink/host-secret", "dirlink/"):
        write_context(c, {"Containerfile": f"FROM bb\nCOPY {src} /taken\n"})
        p = store.build(c, "-t", "taken")
        assert p.returncode in (0, 125), (src, p.stderr)
        if p.returncode == 0:
            assert store.layers_hold("taken:latest", secret) == [], src
        else:
            assert message_at(p.stderr, "Containerfile", 2), p.stderr
    assert os.listdir(outside) == ["host-secret"]


def hostile_tar(kind, outside):
    """Entries of a tar that aims at the host directory outside, each kind on its own (an
    implementation that refuses the first bad entry must still meet every other kind)."""
    rel = outside.lstrip("/")
    up = "../" * 12 + rel
    return {
        "dotdot": [oci.file(up + "/dotdot-pwned", "x\n"), oci.file("ok", "ok\n")],
        "absolute": [oci.file(outside + "/abs-pwned", "x\n"), oci.file("ok", "ok\n")],
        "symlink-absolute": [oci.symlink("esc", outside), oci.file("esc/link-pwned", "x\n")],
        "symlink-dotdot": [oci.symlink("up", up), oci.file("up/up-pwned", "x\n")],
        "hardlink-absolute": [oci.hardlink("hl", outside + "/host-secret"),
                              oci.file("ok", "ok\n")],
        "hardlink-dotdot": [oci.hardlink("hl", up + "/host-secret"), oci.file("ok", "ok\n")],
    }[kind]


@pytest.mark.parametrize("kind", ["dotdot", "absolute", "symlink-absolute", "symlink-dotdot",
                                  "hardlink-absolute", "hardlink-dotdot"])
def test_add_of_a_tar_climbing_out_writes_nothing_outside(store, ctx, secret_outside,
                                                          tmp_path, kind):
    outside, secret = secret_outside
    c = ctx({"Containerfile": "FROM bb\nWORKDIR /deep/er\nADD evil.tar.gz ./\n",
             "evil.tar.gz": targz(hostile_tar(kind, outside))})
    before = rootfs_builder.snapshot(c)
    p = store.build(c, "-t", "evil")
    assert p.returncode in (0, 125), p.stderr
    assert os.listdir(outside) == ["host-secret"]
    with open(os.path.join(outside, "host-secret"), "rb") as f:
        assert f.read() == secret
    assert rootfs_builder.snapshot(c) == before, "the context changed"
    assert sorted(os.listdir(tmp_path)) == sorted(["ctx1", "store"])
    if p.returncode == 0:
        assert store.layers_hold("evil:latest", secret) == []
        host_ino = os.stat(os.path.join(outside, "host-secret")).st_ino
        for diff in store.layers("evil:latest"):
            for dirpath, _, files in os.walk(diff):
                for f in files:
                    assert os.lstat(os.path.join(dirpath, f)).st_ino != host_ino
        # whatever landed, landed under the root: nothing at the host's path inside either
        out = store.sh("evil", f"ls -A {outside} 2>/dev/null; true")
        assert out == "", out
    else:  # refused: said so, nothing named, nothing left over
        assert p.stderr.strip().splitlines()[-1].startswith("csandbox: "), p.stderr
        assert "evil:latest" not in store.names() and store.tmp_entries() == []


def test_hostile_run_leaves_the_host_unchanged(store, ctx, secret_outside, tmp_path, marker):
    """A RUN that tries to write outside its root, read the context's parent, reach host
    paths through leaked descriptors, mount, and kill everything it can."""
    outside, secret = secret_outside
    sibling = tmp_path / "sibling-secret"
    sibling.write_bytes(secret)
    c = ctx({"Containerfile": "FROM bb\nCOPY attack.sh /attack.sh\nRUN sh /attack.sh\n",
             "in-context": "context file\n"})
    store_data = store.data
    script = f"""\
mkdir -p /loot
for p in {outside}/pwned {c}/pwned {tmp_path}/pwned {store_data}/pwned \\
         /proc/1/root{outside}/pwned /proc/self/root/../../pwned; do
        echo pwned >"$p" 2>/dev/null && echo "wrote $p" >>/loot/log
done
cat {sibling} {outside}/host-secret >>/loot/read 2>/dev/null
cat {c}/../sibling-secret >>/loot/read 2>/dev/null
for fd in /proc/self/fd/* /proc/1/fd/* /proc/[0-9]*/fd/*; do
        readlink "$fd" >>/loot/fds 2>/dev/null
        cat "$fd/../sibling-secret" "$fd/../../sibling-secret" "$fd/host-secret" >>/loot/read 2>/dev/null
        ls -la "$fd/" >>/loot/fdls 2>/dev/null
done
mount -t tmpfs x /mnt 2>>/loot/mount && echo MOUNTED >>/loot/log
mount --bind / /mnt 2>>/loot/mount && echo BOUND >>/loot/log
kill -9 -1 2>/dev/null
true
"""
    write_context(c, {"attack.sh": script})
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", marker],
                               stdin=subprocess.DEVNULL)
    try:
        before_ctx = rootfs_builder.snapshot(c)
        before_tmp = sorted(os.listdir(tmp_path))
        before_store = sorted(os.listdir(store_data))
        p = store.build(c, "-t", "hostile")
        assert sleeper.poll() is None and procs_with(marker), "a RUN killed a host process"
    finally:
        sleeper.kill()
        sleeper.wait()
    assert os.listdir(outside) == ["host-secret"]
    assert rootfs_builder.snapshot(c) == before_ctx
    assert sorted(os.listdir(tmp_path)) == before_tmp
    assert sorted(os.listdir(store_data)) == before_store
    assert secret.decode().strip() not in p.stdout + p.stderr
    if p.returncode == 0:
        assert store.layers_hold("hostile:latest", secret) == [], "a host file reached the image"
    else:  # the kill may end the step; it must fail cleanly then
        assert p.returncode == 1 and store.tmp_entries() == [], p.stderr


# --- Debian from the registry, apt-get, multi-stage, exec and run -------------------------

DEBIAN_FILE = """\
FROM {base} AS base
COPY repo/ /srv/repo/
RUN echo 'deb [trusted=yes] file:/srv/repo ./' >/etc/apt/sources.list \\
    && rm -f /etc/apt/sources.list.d/*.sources \\
    && apt-get update -q && apt-get install -y -q --no-install-recommends csb-hello \\
    && rm -rf /var/lib/apt/lists/*
RUN useradd -m -u 1000 -s /bin/sh appuser

FROM base AS build
WORKDIR /work
COPY src/ ./
RUN sh make.sh && test -x out/tool

FROM base
COPY --from=build /work/out/tool /usr/local/bin/tool
ADD data.tar.gz /opt/data/
RUN touch /f42 && chown 42:42 /f42 && grep -c '^Package: csb-hello' /var/lib/dpkg/status >/installed
USER appuser
WORKDIR /home/appuser
RUN id -un >whoami && touch made-by-appuser
ENV GREETING=debian
CMD ["/usr/local/bin/tool"]
"""

MAKE_SH = """\
mkdir -p out
cat >out/tool <<'EOF'
#!/bin/sh
echo "tool: $GREETING $(id -un) $(cat /opt/data/data/d.txt)"
csb-hello
EOF
chmod 0755 out/tool
"""


@pytest.fixture(scope="module")
def debian(tmp_path_factory, registry):
    """The Debian build, once per module: .store, .name, .proc (the build), .ctx."""
    assert os.path.exists(APT_BASE), f"{APT_BASE} is missing: run tests/setup-root as root"
    work = str(tmp_path_factory.mktemp("debian"))
    layout = os.path.join(work, "layout")
    with open(APT_BASE, "rb") as f:
        base = oci.Layer(None, "none", raw=f.read())
    oci.write_layout(layout, [base], config={
        "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
        "WorkingDir": "/", "Cmd": ["/bin/bash"]},
        image={"history": [{"created": "2023-11-14T22:13:20Z", "created_by": "mmdebstrap"}]})
    del base
    registry.seed(f"oci:{layout}:latest", "test/debian:12")
    shutil.rmtree(layout)
    c = os.path.join(work, "ctx")
    repo_work = os.path.join(work, "repo-build")
    os.makedirs(repo_work)
    repo = build_repo(repo_work)
    write_context(c, {"Containerfile": DEBIAN_FILE.format(base=f"{registry.host}/test/debian:12"),
                      "src/make.sh": MAKE_SH,
                      "data.tar.gz": targz([oci.directory("data"),
                                            oci.file("data/d.txt", "data-from-tar")])})
    shutil.copytree(repo, os.path.join(c, "repo"))
    store = Store(os.path.join(work, "store"))
    proc = store.build(c, "-t", "deb", "--tls-verify=false", timeout=DEBIAN_TIMEOUT)
    return types.SimpleNamespace(store=store, name="deb", proc=proc, ctx=c)


def debian_built(debian):
    p = debian.proc
    assert p.returncode == 0, f"exit {p.returncode}\nstderr:\n{p.stderr}\nstdout:\n{p.stdout}"
    return debian.store, debian.name


def test_debian_build_succeeds_with_a_step_line_each(debian):
    store, name = debian_built(debian)
    p = debian.proc
    texts = [line for line in DEBIAN_FILE.splitlines() if line and not line.startswith(" ")]
    got = steps(p.stderr)
    assert sorted(s[2].split()[0] for s in got) == sorted(t.split()[0] for t in texts), p.stderr
    numbers = sorted((s[0], s[1]) for s in got)
    n = len(texts)
    # numbered through the whole file, or (as podman does) within each stage
    assert numbers == [(i, n) for i in range(1, n + 1)] or \
        numbers == sorted([(i, 4) for i in range(1, 5)] * 2 + [(i, 9) for i in range(1, 10)]), \
        p.stderr
    digest = p.stdout.rstrip("\n").splitlines()[-1]
    assert DIGEST.match(digest), p.stdout
    assert store.names()["deb:latest"] == digest


def test_debian_image_runs_its_cmd_as_its_user(debian):
    store, name = debian_built(debian)
    p = store.exec(name)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["tool: debian appuser data-from-tar",
                                     "hello from a package"], p.stdout
    assert store.sh(name, "cat /home/appuser/whoami; cat /installed; pwd", root=False) == \
        "appuser\n1\n/home/appuser\n"


def test_debian_apt_get_ran_with_the_subordinate_range(debian):
    """apt fetched as _apt and dpkg's postinst chowned a file to it: the layer records
    uid 42, as it does a RUN's own chown; appuser's files are 1000's."""
    store, name = debian_built(debian)
    image = name + ":latest"
    assert store.owner(image, "usr/share/csb-hello/owned")[1] == 42
    assert store.owner(image, "usr/bin/csb-hello")[1:] == (0, 0)
    assert store.owner(image, "f42")[1:] == (42, 42)
    assert store.owner(image, "home/appuser/made-by-appuser")[1:] == (1000, 1000)
    assert store.owner(image, "home/appuser")[1:] == (1000, 1000)
    cfg = store.inspect(name)["config"]
    assert cfg["User"] == "appuser" and cfg["WorkingDir"] == "/home/appuser"
    assert "GREETING=debian" in cfg["Env"] and cfg["Cmd"] == ["/usr/local/bin/tool"]


def test_debian_intermediate_stage_is_not_in_the_image(debian):
    store, name = debian_built(debian)
    assert store.sh(name, "test -e /work && echo there || echo absent") == "absent\n"


def test_debian_image_runs_claude_with_csandbox_run(debian, tmp_path):
    store, name = debian_built(debian)
    profiles = Profiles(tmp_path)
    profiles.data = store.data  # the store holding the image
    profiles.add()
    shell_claude(profiles, "csb-hello; id -un; cat /home/appuser/whoami; /usr/local/bin/tool\n")
    r = profiles.run(env=profiles.env(CLAUDE_PROFILE_SANDBOX_IMAGE=name), timeout=TIMEOUT)
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    assert r.stdout.splitlines() == ["hello from a package", "appuser", "appuser",
                                     "tool: debian appuser data-from-tar",
                                     "hello from a package"], r.stdout


def test_debian_rebuild_is_served_from_the_cache(debian):
    store, name = debian_built(debian)
    first = debian.proc.stdout.rstrip("\n").splitlines()[-1]
    digest, p = store.built(debian.ctx, "-t", name, "--tls-verify=false", timeout=DEBIAN_TIMEOUT)
    cached = layer_steps(p.stderr)
    assert len(cached) == 9 and all(cached.values()), p.stderr
    assert digest == first


def test_debian_root_run_switches_to_the_user_with_su_and_runuser(debian, tmp_path):
    """Debian's own su and runuser in a root RUN on the built image: appuser (made by
    useradd -m in an earlier layer) writes in its home, and what it made is its own."""
    store, name = debian_built(debian)
    c = write_context(tmp_path / "su", {"Containerfile": f"""\
FROM {name}
USER root
RUN su appuser -c 'touch /home/appuser/by-su' \\
    && runuser -u appuser -- mkdir /home/appuser/by-runuser \\
    && stat -c %U /home/appuser >/home-owner
"""})
    store.built(c, "-t", "deb-su")
    assert store.cat("deb-su", "/home-owner") == "appuser\n"
    assert store.owner("deb-su:latest", "home/appuser/by-su")[1:] == (1000, 1000)
    assert store.owner("deb-su:latest", "home/appuser/by-runuser")[1:] == (1000, 1000)


# --- a build killed while a step runs --------------------------------------------------

def test_a_build_killed_in_a_run_step_is_cleared_by_the_next_build(store, ctx):
    """SIGKILL while a RUN step runs leaves its upper dir in tmp/, with files of subordinate
    ids that the user cannot remove: prune says so (and which command clears it), and the
    next build removes it as root of a user namespace with the same map."""
    c = ctx({"Containerfile": "FROM bb\nRUN mkdir /d && touch /d/f && chown -R 42:42 /d "
                              "&& chmod 500 /d && touch /ready && sleep 600\n"})
    p = subprocess.Popen([CSANDBOX, "image", "build", "--quiet", str(c)], env=store.env(),
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    tmp = os.path.join(store.images, "tmp")

    def ready():
        return [e for e in store.tmp_entries()
                if os.path.exists(os.path.join(tmp, e, "diff", "ready"))]

    try:
        assert wait_until(ready, 60), "the RUN step never started"
        assert os.stat(os.path.join(tmp, ready()[0], "diff", "d")).st_uid != os.getuid()
    finally:
        p.kill()
        p.wait()
    assert wait_until(lambda: not procs_with("sleep 600"), 10), "the step outlived its build"
    # The build's other processes (the step's supervisor holds the tree's lock) end on their
    # parent's death too, some moments after the step's own: prune skips a locked tree.
    r = None

    def reported():
        nonlocal r
        r = store.run("image", "prune")
        return r.returncode != 0 or "0 leftover" not in r.stdout
    assert wait_until(reported, 10), f"the killed build's tree stays locked: {r.stdout}"
    assert r.returncode == 125, r.stderr
    assert "subordinate ids" in r.stderr and "image build" in r.stderr, r.stderr
    store.built(ctx({"Containerfile": "FROM bb\nRUN true\n"}), "--quiet")
    assert store.tmp_entries() == []
    assert store.run("image", "prune").returncode == 0


# --- claude-profile's reference image, in its structure ---------------------------------

REFERENCE_FILE = """\
ARG BASE_DIGEST={digest}
FROM {base}@${{BASE_DIGEST}}
COPY repo/ /srv/repo/
RUN echo 'deb [trusted=yes] file:/srv/repo ./' >/etc/apt/sources.list \\
    && rm -f /etc/apt/sources.list.d/*.sources \\
    && apt-get update -q && apt-get install -y -q --no-install-recommends csb-hello \\
    && apt-get clean && rm -rf /var/lib/apt/lists/*
RUN useradd -m -u 1000 -U appuser \\
    && mkdir -p /etc/sudoers.d \\
    && printf 'appuser ALL=(root) NOPASSWD: /usr/bin/apt-get\\n' >/etc/sudoers.d/appuser \\
    && chmod 0440 /etc/sudoers.d/appuser
RUN mkdir -p /etc/containers \\
    && printf '[storage]\\ndriver = "overlay"\\n' >/etc/containers/storage.conf
USER appuser
RUN mkdir -p /home/appuser/.local/bin \\
    && printf '#!/bin/sh\\necho "claude of the image as $(id -un): $*"\\n' \\
       >/home/appuser/.local/bin/claude \\
    && chmod +x /home/appuser/.local/bin/claude
USER root
COPY --chmod=0755 entrypoint.sh /entrypoint.sh
COPY --chmod=0755 wl-paste /usr/local/bin/wl-paste
ENV PATH="/home/appuser/.local/bin:$PATH"
ENTRYPOINT ["/entrypoint.sh"]
CMD ["claude"]
"""


def test_the_reference_containerfile_structure_builds_and_runs(debian, tmp_path):
    """claude-profile's sandbox image (reference §4.2) in its structure: a base pinned by
    digest through an ARG before FROM, packages from the distribution's manager, appuser
    with uid and gid 1000 and a 0440 sudoers file, a RUN as appuser writing into its home,
    USER root again at the end, COPY --chmod of the entrypoint and a shim, ENV PATH
    extending the inherited one, ENTRYPOINT and CMD; the result runs with `exec --image`
    and under `csandbox run`."""
    store, _ = debian_built(debian)
    base = next(n for n in (i["name"] for i in store.ls()) if n.endswith("/test/debian:12"))
    digest = next(i["digest"] for i in store.ls() if i["name"] == base)
    c = tmp_path / "ref"
    write_context(c, {
        "Containerfile": REFERENCE_FILE.format(base=base.rsplit(":", 1)[0], digest=digest),
        "entrypoint.sh": "#!/bin/sh\nexec \"$@\"\n",
        "wl-paste": "#!/bin/sh\necho shim\n"})
    shutil.copytree(os.path.join(debian.ctx, "repo"), c / "repo")
    store.built(c, "-t", "reference", "--tls-verify=false", timeout=DEBIAN_TIMEOUT)
    cfg = store.inspect("reference")["config"]
    assert cfg["Entrypoint"] == ["/entrypoint.sh"] and cfg["Cmd"] == ["claude"]
    assert cfg.get("User") == "root"
    path = next(e for e in cfg["Env"] if e.startswith("PATH="))
    assert path.startswith("PATH=/home/appuser/.local/bin:/usr/local/sbin:"), path
    assert store.sh("reference", "id appuser; stat -c '%a %U' /etc/sudoers.d/appuser "
                    "/entrypoint.sh /usr/local/bin/wl-paste; csb-hello") == (
        "uid=1000(appuser) gid=1000(appuser) groups=1000(appuser)\n"
        "440 root\n755 root\n755 root\nhello from a package\n")
    p = store.exec("reference")
    assert p.returncode == 0 and p.stdout.startswith("claude of the image as "), p.stderr
    profiles = Profiles(tmp_path)
    profiles.data = store.data
    profiles.add()
    shell_claude(profiles, "command -v wl-paste; csb-hello; cat /etc/containers/storage.conf\n")
    r = profiles.run(env=profiles.env(CLAUDE_PROFILE_SANDBOX_IMAGE="reference"),
                     timeout=TIMEOUT)
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    assert "hello from a package" in r.stdout and 'driver = "overlay"' in r.stdout, r.stdout


def test_prune_drops_cache_entries_whose_layers_are_gone(store, ctx):
    c = ctx({"Containerfile": "FROM bb\nRUN echo one >/one\nRUN true\n"})
    store.built(c, "-t", "cached")
    cache = os.path.join(store.images, "build-cache")
    entries = sorted(os.listdir(cache))
    assert len(entries) == 2  # a layer, and "empty" for the RUN that changed nothing
    store.ok("image", "rm", "cached")
    store.ok("image", "prune")
    kept = sorted(os.listdir(cache))
    assert len(kept) == 1
    with open(os.path.join(cache, kept[0])) as f:
        assert f.read() == "empty\n"
    # the rebuild runs the step whose layer went, and is cached again
    _, p = store.built(c, "-t", "cached")
    assert p.stderr.count("--> Using cache") == 1, p.stderr


def test_a_run_step_sees_no_terminal_even_when_the_build_has_one(store, ctx):
    """A RUN's stdout and stderr are a pipe csandbox relays, never the caller's terminal:
    a step could otherwise read what the user types or change the terminal's modes."""
    from conftest import run_stderr_on_pty
    # the marker is split in the instruction, which the STEP line shows
    c = ctx({"Containerfile": "FROM bb\nRUN for fd in 0 1 2; do [ -t $fd ] && "
                              "echo IS-A''-TERMINAL$fd; done; echo checked >&2\n"})
    p, screen = run_stderr_on_pty([CSANDBOX, "image", "build", "--no-cache", str(c)],
                                  store.env())
    assert p.returncode == 0, screen
    assert "checked" in screen and "IS-A-TERMINAL" not in screen, screen


def test_xattrs_a_run_step_sets_are_part_of_the_layer_digest(store, ctx):
    """Two steps that differ only in an xattr they set make two layers, not one."""
    ids = []
    for value in ("one", "two"):
        c = ctx({"Containerfile": "FROM bb\nRUN touch /x && "
                                  f"/probe setxattr /x user.csandbox {value}\n"})
        store.built(c, "-t", f"x-{value}")
        ids.append(store.inspect(f"x-{value}")["rootfs"]["diff_ids"][-1])
    assert ids[0] != ids[1], ids


def test_a_users_run_owns_what_the_image_gave_it_and_nothing_else(store, ctx):
    """After USER, a RUN writes where the Containerfile gave the user a place (a directory
    chowned in a RUN, a file COPY --chown'ed into it) and nowhere root owns: /etc/passwd
    stays unwritable and a root-only file unreadable, as with docker's USER."""
    c = ctx({"Containerfile": """\
FROM bb
RUN echo 'bob:x:1000:1000::/home/bob:/bin/sh' >>/etc/passwd \\
    && echo 'bob:x:1000:' >>/etc/group \\
    && mkdir -p /home/bob && chown bob:bob /home/bob && echo secret >/root-only \\
    && chmod 600 /root-only
COPY --chown=bob --chmod=600 note /home/bob/note
USER bob
RUN touch /home/bob/made && cat /home/bob/note \\
    && { echo evil >>/etc/passwd && echo PASSWD''-WRITTEN || echo passwd-refused; } \\
    && { cat /root-only || echo root-only-refused; } \\
    && { touch /bin/planted && echo PLAN''TED || echo bin-refused; }
""", "note": "mine\n"})
    _, p = store.built(c, "-t", "bob")
    for line in ("mine", "passwd-refused", "root-only-refused", "bin-refused"):
        assert line in p.stderr, p.stderr
    assert "PASSWD-WRITTEN" not in p.stderr and "PLANTED" not in p.stderr, p.stderr
    assert store.owner("bob:latest", "home/bob/made")[1:] == (1000, 1000)
    assert store.owner("bob:latest", "home/bob")[1:] == (1000, 1000)
    assert "evil" not in store.cat("bob", "/etc/passwd")


def test_a_user_in_roots_group_is_given_only_its_own(store, ctx):
    """USER 1000:0: what the layers record as group 0 is nearly everything; only the
    user's own files are given to it, so its step's layer holds what it wrote and its
    home, not a copy of the image."""
    c = ctx({"Containerfile": "FROM bb\nRUN mkdir -p /home/u && chown 1000:0 /home/u\n"
                              "USER 1000:0\nRUN touch /home/u/made\n"})
    store.built(c, "-t", "grp")
    top = layer_metadata(store.layers("grp:latest")[0])
    assert sorted(top) == [".", "home", "home/u", "home/u/made"], sorted(top)


# The session's move against the build cache: the context (its work tree) holds A when the
# key is taken, B while the step copies it, and A again before anything looks twice. The
# program reacts to the build's own reads (inotify: a read, then the file closed), so the
# swap lands between the key's read and the copy's, and back after the copy.
SWAP_ATTACK = r"""
import ctypes, os, struct, sys
path, a, b = sys.argv[1], sys.argv[2].encode(), sys.argv[3].encode()
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(os.O_CLOEXEC)
IN_ACCESS, IN_CLOSE_NOWRITE = 0x1, 0x10
assert libc.inotify_add_watch(fd, path.encode(), IN_ACCESS | IN_CLOSE_NOWRITE) >= 0
print("ready", flush=True)
def read_then_closed():
    seen = False
    while True:
        buf = os.read(fd, 4096)
        for off in range(0, len(buf), 16):
            mask = struct.unpack_from("iIII", buf, off)[1]
            seen |= bool(mask & IN_ACCESS)
            if seen and mask & IN_CLOSE_NOWRITE:
                return
def put(data):
    with open(path, "r+b") as f:
        f.write(data)
read_then_closed()
put(b)
print("swapped", flush=True)
read_then_closed()
put(a)
print("restored", flush=True)
"""


@pytest.mark.parametrize("kind", ["COPY", "ADD"])
def test_a_context_swapped_during_the_copy_and_back_is_refused(store, ctx, kind):
    """A file changed between the key's read and the copy's, and changed back after it,
    must not become a layer cached under the content the key names: the copy is digested
    from what was written, so the build fails and caches nothing; a rebuild copies A."""
    a, b = "A" * 65536 + "\n", "B" * 65536 + "\n"
    c = ctx({"Containerfile": f"FROM bb\n{kind} data.txt /data.txt\n", "data.txt": a})
    data = os.path.join(str(c), "data.txt")
    attacker = subprocess.Popen([sys.executable, "-c", SWAP_ATTACK, data, a, b],
                                stdout=subprocess.PIPE, text=True)
    try:
        assert attacker.stdout.readline() == "ready\n"
        p = store.build(c, "-t", "swapped")
        said = attacker.stdout.read()
    finally:
        attacker.kill()
        attacker.wait()
    assert said == "swapped\nrestored\n", f"the attack did not run its course: {said!r}"
    with open(data) as f:
        assert f.read() == a
    assert p.returncode != 0, f"a swapped context was built:\n{p.stderr}"
    assert "changed while" in p.stderr and "Containerfile:2" in p.stderr, p.stderr
    assert "swapped:latest" not in store.names()
    assert store.tmp_entries() == []
    # nothing cached under A's key: the rebuild copies the context as it is
    _, p = store.built(c, "-t", "swapped")
    assert "--> Using cache" not in p.stderr, p.stderr
    assert store.cat("swapped", "/data.txt") == a
