"""`csandbox image import|ls|inspect|rm|prune`: every import form, cross-checks against umoci
and skopeo, hostile images refused with the store unchanged, crash safety, concurrency.

Each test gets its own store (XDG_DATA_HOME under its tmp_path); images are built once per
session by tests/fixtures/oci.py from the busybox-static rootfs."""
import fcntl
import hashlib
import io
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tarfile
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "fixtures"))
import oci  # noqa: E402

from conftest import (CSANDBOX, PROBE, Screen, base_env, read_line, run_stderr_on_pty,  # noqa: E402
                      wait_until)

TIMEOUT = 120
# What the sandbox mounts itself (proc, dev, tmp) is not the image's.
VIEW_SCRIPT = "cd / && exec tar -cf - $(ls -A | grep -vx -e proc -e dev -e tmp -e sys)"


class Store:
    def __init__(self, root):
        self.data = str(root)
        self.images = os.path.join(self.data, "csandbox", "images")

    def env(self):
        return base_env(XDG_DATA_HOME=self.data)

    def run(self, *args, timeout=TIMEOUT):
        return subprocess.run([CSANDBOX, "image", *args], capture_output=True, text=True,
                              timeout=timeout, env=self.env(), stdin=subprocess.DEVNULL)

    def popen(self, *args):
        return subprocess.Popen([CSANDBOX, "image", *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=self.env(),
                                stdin=subprocess.DEVNULL, text=True)

    def ok(self, *args):
        p = self.run(*args)
        assert p.returncode == 0, f"exit {p.returncode}\nstderr:\n{p.stderr}\nstdout:\n{p.stdout}"
        return p

    def ls(self):
        return json.loads(self.ok("ls", "--json").stdout)

    def in_use(self, name, marker):
        """A sandbox running on image name until killed (it holds the image), once ready."""
        proc = subprocess.Popen([CSANDBOX, "exec", "--image", name, "--", "/probe",
                                 "spawn-sleeper", "30", marker], env=self.env(),
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        assert read_line(proc.stdout) == "ready\n", proc.stderr.read1().decode()
        return proc

    def digest(self, name):
        return {i["name"]: i["digest"] for i in self.ls()}[name]

    def image_dir(self, name):
        return os.path.join(self.images, "sha256", self.digest(name)[7:])

    def diff_ids(self, name):
        with open(os.path.join(self.image_dir(name), "config.json")) as f:
            return json.load(f)["rootfs"]["diff_ids"]

    def layers(self, name):
        """The image's layer trees in the store, top first."""
        return [os.path.join(self.images, "layers", "sha256", d[7:], "diff")
                for d in reversed(self.diff_ids(name))]

    def stored_layers(self):
        return sorted(os.listdir(os.path.join(self.images, "layers", "sha256")))

    def rootfs(self, name):
        """The image as a launch shows it: the overlay of its layers read from inside
        `exec --image` (tar of every top-level entry but the sandbox's own mountpoints),
        unpacked into a fresh directory."""
        self.views = getattr(self, "views", 0) + 1
        out = os.path.join(self.data, "views", str(self.views))
        p = subprocess.run([CSANDBOX, "exec", "--image", name, "--uid", "0", "--gid", "0", "--net", "host",
                            "--", "/bin/sh", "-c", VIEW_SCRIPT], capture_output=True,
                           timeout=TIMEOUT, env=self.env(), stdin=subprocess.DEVNULL)
        assert p.returncode == 0, p.stderr.decode()
        with tarfile.open(fileobj=io.BytesIO(p.stdout)) as t:
            t.extractall(out)
        return out

    def state(self):
        """What a later ls or launch could see: names and complete images, plus tmp/."""
        if not os.path.isdir(self.images):
            return {}
        names = None
        p = os.path.join(self.images, "names.json")
        if os.path.exists(p):
            with open(p) as f:
                names = json.load(f)
        shas = sorted(os.listdir(os.path.join(self.images, "sha256")))
        tmp = sorted(os.listdir(os.path.join(self.images, "tmp")))
        return {"names": names, "sha256": shas, "tmp": tmp}


@pytest.fixture
def store(tmp_path):
    return Store(tmp_path / "data")


@pytest.fixture(scope="session")
def images(tmp_path_factory):
    """The busybox image in every form."""
    work = str(tmp_path_factory.mktemp("images"))
    layers = oci.busybox_layers(work, PROBE)
    out = {"layers": layers, "work": work}
    out["oci"] = os.path.join(work, "layout")
    out["info"] = oci.write_layout(out["oci"], layers, ref="latest")
    out["oci-archive"] = oci.write_oci_archive(out["oci"], os.path.join(work, "image.oci.tar"))
    out["docker-archive"] = oci.write_docker_archive(layers, os.path.join(work, "image.docker.tar"))
    out["rootfs-tar"] = oci.write_rootfs_tar(layers, os.path.join(work, "rootfs.tar.gz"))
    # gzip and plain layers only: docker-archive cannot carry zstd
    gz = oci.busybox_layers(work, PROBE, ("gzip", "gzip", "none"))
    out["oci-gzip"] = os.path.join(work, "layout-gzip")
    oci.write_layout(out["oci-gzip"], gz, ref="latest")
    return out


def tree(root):
    """path -> (type, permission bits, link target or content digest)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            rel = os.path.relpath(p, root)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", None, os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode), None)
            else:
                with open(p, "rb") as f:
                    out[rel] = ("file", stat.S_IMODE(st.st_mode), hashlib.sha256(f.read()).hexdigest())
    return out


def check_busybox_tree(root):
    t = tree(root)
    assert t["bin/busybox"][0] == "file" and t["bin/sh"] == ("link", None, "/bin/busybox")
    assert "etc/hostname" not in t, "the whiteout of layer 2 was not applied"
    assert "var/cache" not in t and "var/cache/x" not in t, "directory whiteout not applied"
    assert sorted(k for k in t if k.startswith("opt/a/")) == ["opt/a/new"], "opaque dir kept lower entries"
    assert t["opt/link"] == ("link", None, "a/new")
    with open(os.path.join(root, "etc/motd")) as f:
        assert f.read() == "motd 3\n"
    assert t["etc/motd"][1] == 0o640
    assert t["srv/data"][1] == 0o600 and t["srv/tool"][1] == 0o4755 and t["srv/ro"][1] == 0o555
    assert os.lstat(os.path.join(root, "srv/hl")).st_ino == os.lstat(os.path.join(root, "srv/data")).st_ino
    return t


@pytest.mark.parametrize("form", ["oci", "oci-archive", "docker-archive"])
def test_import_each_form_gives_the_layered_tree(store, images, form):
    p = store.ok("import", images[form], "--name", f"bb-{form}")
    assert f"bb-{form}:latest" in p.stdout and "files" in p.stdout
    check_busybox_tree(store.rootfs(f"bb-{form}:latest"))


def test_all_forms_unpack_to_the_same_tree(store, images):
    trees = []
    for form in ("oci", "oci-archive", "docker-archive"):
        store.ok("import", images[form], "--name", form)
        trees.append(tree(store.rootfs(f"{form}:latest")))
    assert trees[0] == trees[1] == trees[2]


def test_rootfs_tar_import(store, images):
    store.ok("import", images["rootfs-tar"], "--name", "flat")
    t = tree(store.rootfs("flat:latest"))
    assert t["bin/busybox"][0] == "file" and t["opt/a/old"][0] == "file"
    cfg = json.loads(store.ok("inspect", "flat").stdout)
    assert cfg["rootfs"]["diff_ids"][0].startswith("sha256:")


def test_layout_ref_selects_and_names(store, images):
    p = store.ok("import", images["oci"] + ":latest")
    assert "layout:latest" in p.stdout
    p = store.run("import", images["oci"] + ":nope")
    assert p.returncode == 125 and "nope" in p.stderr


def test_unknown_platform_is_refused_naming_the_flag(store, images):
    p = store.run("import", images["oci"], "--platform", "linux/s390x")
    assert p.returncode == 125 and "--platform" in p.stderr
    assert store.ls() == []


def layer_metadata(layer_diff):
    lines = {}
    with open(os.path.join(os.path.dirname(layer_diff), "metadata")) as f:
        for line in f:
            mode, uid, gid, path = line.rstrip("\n").split(" ", 3)
            lines[path] = (int(mode, 8), int(uid), int(gid))
    return lines


def test_metadata_records_original_ownership_and_modes(store, images):
    store.ok("import", images["oci"], "--name", "bb")
    top, middle, base = [layer_metadata(d) for d in store.layers("bb:latest")]
    assert middle["srv/data"] == (0o100600, 33, 33)
    assert middle["srv/hl"] == (0o100600, 33, 33)
    assert middle["srv/tool"] == (0o104755, 0, 0)
    assert base["bin/busybox"][1:] == (0, 0)
    assert "etc/hostname" not in middle, "a whiteout is no file of the image"
    assert "bin/busybox" not in top and "srv/data" not in top, "each layer records its own"
    st = os.lstat(os.path.join(store.layers("bb:latest")[1], "srv/data"))
    assert st.st_uid == os.getuid(), "an unprivileged import owns files as the caller"


def test_devices_and_fifos_are_skipped_and_counted(store, tmp_path):
    layout = str(tmp_path / "dev")
    oci.write_layout(layout, [oci.Layer([oci.directory("dev"), oci.chardev("dev/null"),
                                         oci.fifo("dev/fifo"), oci.file("ok", "x")])])
    p = store.ok("import", layout, "--name", "dev")
    assert "2 skipped" in p.stdout
    root = store.layers("dev:latest")[0]
    assert os.path.exists(os.path.join(root, "ok")) and os.listdir(os.path.join(root, "dev")) == []


@pytest.mark.skipif(not shutil.which("umoci"), reason="umoci not installed")
def test_tree_equals_umoci_rootless_unpack(store, images, tmp_path):
    bundle = str(tmp_path / "bundle")
    # umoci 0.4 has no zstd: compare on the gzip/plain variant
    p = subprocess.run(["umoci", "unpack", "--rootless", "--image", images["oci-gzip"] + ":latest", bundle],
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert p.returncode == 0, p.stderr
    store.ok("import", images["oci-gzip"], "--name", "bb")
    # the merged view, as a launch shows it, against umoci's flattened unpack
    mine = tree(store.rootfs("bb:latest"))
    theirs = {k: v for k, v in tree(os.path.join(bundle, "rootfs")).items()
              if k.split("/")[0] not in ("proc", "dev", "tmp", "sys")}
    assert set(mine) == set(theirs), f"only csandbox: {set(mine) - set(theirs)}; only umoci: {set(theirs) - set(mine)}"
    diff = {k: (mine[k], theirs[k]) for k in mine if mine[k] != theirs[k]}
    assert not diff


@pytest.mark.skipif(not shutil.which("skopeo"), reason="skopeo not installed")
@pytest.mark.parametrize("dest", ["oci-archive", "docker-archive"])
def test_skopeo_conversions_unpack_to_the_same_tree(store, images, tmp_path, dest):
    out = str(tmp_path / f"conv.{dest}.tar")
    ref = f"{dest}:{out}:" + ("latest" if dest == "oci-archive" else "conv:latest")
    p = subprocess.run(["skopeo", "--insecure-policy", "copy", "oci:" + images["oci-gzip"] + ":latest", ref],
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert p.returncode == 0, p.stderr
    store.ok("import", images["oci-gzip"], "--name", "orig")
    store.ok("import", out, "--name", "conv")
    assert tree(store.rootfs("orig:latest")) == tree(store.rootfs("conv:latest"))


@pytest.fixture(scope="session")
def outside(tmp_path_factory):
    d = tmp_path_factory.mktemp("outside")
    return str(d)


EXPECT = {"dotdot": "..", "absolute": "absolute", "symlink-same-layer": "symlink",
          "hardlink-outside": "..",
          "hardlink-absolute": "absolute", "whiteout-dotdot": "..",
          "whiteout-names-dotdot": "whiteout", "digest-mismatch": "digest",
          "size-mismatch": "declares", "truncated-blob": "truncated",
          "diff-id-mismatch": "diff_id", "bomb": "--max-size", "foreign-layer": "foreign"}


# symlink-cross-layer is no longer refused: see test_entry_under_a_lower_layer_symlink_*.
@pytest.mark.parametrize("kind", [k for k in oci.MALICIOUS if k != "symlink-cross-layer"])
def test_hostile_image_is_refused_with_the_store_unchanged(store, images, tmp_path, outside, kind):
    store.ok("import", images["oci"], "--name", "keep")
    before, layers_before = store.state(), store.stored_layers()
    layout = str(tmp_path / kind)
    oci.malicious(kind, layout, outside)
    p = store.run("import", layout, "--name", "evil", "--max-size", "100M")
    assert p.returncode == 125, p.stdout + p.stderr
    assert EXPECT[kind] in p.stderr, p.stderr
    lines = p.stderr.splitlines()
    # layers verified before the bad one are logged, then one error line
    assert lines[-1].startswith("csandbox: ") and all(l.startswith("layer ") for l in lines[:-1]), p.stderr
    assert store.state() == before
    assert store.stored_layers() == layers_before, "a refused image's layers stay behind"
    assert os.listdir(outside) == [], "an entry landed outside the rootfs"
    assert [i["name"] for i in store.ls()] == ["keep:latest"]


@pytest.fixture(scope="session")
def big_image(tmp_path_factory):
    """Three plain layers of ~25 MB each: slow enough to be killed part-way."""
    work = str(tmp_path_factory.mktemp("big"))
    layers = []
    for n in range(3):
        entries = [oci.directory(f"d{n}")]
        for i in range(50):
            entries.append(oci.file(f"d{n}/f{i}", os.urandom(500_000)))
        layers.append(oci.Layer(entries, "none"))
    path = os.path.join(work, "layout")
    oci.write_layout(path, layers)
    return path


def test_sigkill_during_import_leaves_nothing_and_a_rerun_succeeds(store, big_image):
    t0 = time.monotonic()
    store.ok("import", big_image, "--name", "probe-timing")
    full = time.monotonic() - t0
    complete = store.ls()[0]
    store.ok("rm", "probe-timing")
    store.ok("prune")
    killed = 0
    for frac in (0.02, 0.1, 0.3, 0.5, 0.7, 0.9, 0.97):
        proc = store.popen("import", big_image, "--name", "big")
        time.sleep(full * frac)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=TIMEOUT)
        if proc.returncode == -signal.SIGKILL:
            killed += 1
            ls = store.ls()
            st = store.state()
            assert all(n.startswith(("import-", "layer-", "rm-")) for n in st["tmp"])
            for layer in store.stored_layers():  # a layer is in place only complete
                d = os.path.join(store.images, "layers", "sha256", layer)
                assert sorted(os.listdir(d)) == ["diff", "info.json", "metadata"], layer
            if ls:  # killed after the commit, before the exit: complete, never partial
                assert [(i["digest"], i["files"]) for i in ls] == [(complete["digest"], complete["files"])], \
                    f"killed at {frac:.0%}: ls shows a partial image"
                store.ok("rm", "big")
        else:
            store.ok("rm", "big")
    assert killed >= 3, "the import finished before most kills; the image is too small"
    p = store.ok("import", big_image, "--name", "big")
    assert store.state()["tmp"] == [], "the rerun swept the killed imports' leftovers"
    assert [i["name"] for i in store.ls()] == ["big:latest"]
    assert "imported" in p.stdout or "already stored" in p.stdout
    assert len(os.listdir(os.path.join(store.layers("big:latest")[0], "d2"))) == 50


def test_concurrent_imports_of_one_image_work_once_and_both_succeed(store, big_image):
    procs = [store.popen("import", big_image, "--name", f"c{i}") for i in range(4)]
    outs = [p.communicate(timeout=TIMEOUT) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert sum(o[0].startswith("imported") for o in outs) == 1
    assert sum(o[0].startswith("already stored") for o in outs) == 3
    assert len(store.state()["sha256"]) == 1
    assert sorted(i["name"] for i in store.ls()) == [f"c{i}:latest" for i in range(4)]


def test_ls_inspect_rm(store, images):
    store.ok("import", images["oci"], "--name", "one:1")
    store.ok("import", images["oci"], "--name", "two")
    ls = store.ls()
    assert [i["name"] for i in ls] == ["one:1", "two:latest"] and ls[0]["digest"] == ls[1]["digest"]
    assert ls[0]["digest"] == images["info"]["manifest"]
    text = store.ok("ls").stdout
    assert "NAME" in text and "one:1" in text
    cfg = json.loads(store.ok("inspect", "two").stdout)
    assert cfg["config"]["WorkingDir"] == "/opt" and "FIXTURE=1" in cfg["config"]["Env"]
    store.ok("rm", "one:1")
    assert [i["name"] for i in store.ls()] == ["two:latest"]
    assert len(store.state()["sha256"]) == 1, "the image still has a name"
    store.ok("rm", "two")
    assert store.ls() == [] and store.state()["sha256"] == []
    p = store.run("rm", "two")
    assert p.returncode == 125 and "no image named" in p.stderr
    p = store.run("inspect", "nope")
    assert p.returncode == 125 and "image import" in p.stderr


def test_rm_refuses_an_image_a_sandbox_holds(store, images):
    store.ok("import", images["oci"], "--name", "busy")
    fd = os.open(store.image_dir("busy:latest"), os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)  # what a launch holds while it runs
        p = store.run("rm", "busy")
        assert p.returncode == 125 and "in use" in p.stderr
        assert [i["name"] for i in store.ls()] == ["busy:latest"]
    finally:
        os.close(fd)
    store.ok("rm", "busy")
    assert store.ls() == []


def test_prune_removes_unnamed_images_and_stale_temporaries(store, images, tmp_path):
    store.ok("import", images["oci"], "--name", "x")
    old = store.digest("x:latest")
    store.ok("import", images["docker-archive"], "--name", "x")  # renames x to another image
    os.makedirs(os.path.join(store.images, "tmp", "import-stale", "rootfs", "a"))
    assert old[7:] in store.state()["sha256"]
    p = store.ok("prune")
    assert "1 unnamed" in p.stdout
    st = store.state()
    assert old[7:] not in st["sha256"] and len(st["sha256"]) == 1 and st["tmp"] == []
    assert [i["name"] for i in store.ls()] == ["x:latest"]


def test_import_progress_without_a_terminal_is_one_line_per_layer(store, images):
    p = store.ok("import", images["oci"], "--name", "bb")
    lines = p.stderr.splitlines()
    assert len(lines) == 3, p.stderr  # the busybox image has three layers
    for i, line in enumerate(lines, 1):
        assert line.startswith(f"layer {i}/3 sha256:"), line
        assert " done" in line or ("/s)" in line and " in " in line), line
    assert [line.split()[2] for line in lines] == [d[:19] for d in images["info"]["layers"]]
    assert "\x1b" not in p.stderr and "\r" not in p.stderr
    assert p.stdout.startswith("imported bb:latest")


def test_import_quiet_prints_no_progress(store, images):
    p = store.ok("import", "--quiet", images["oci"], "--name", "bb")
    assert p.stderr == "" and p.stdout.startswith("imported bb:latest")


def test_import_quiet_on_a_terminal_prints_nothing(store, images):
    p, text = run_stderr_on_pty([CSANDBOX, "image", "import", "--quiet", images["oci"],
                                 "--name", "bb"], store.env())
    assert p.returncode == 0 and text == "", repr(text)
    assert p.stdout.startswith(b"imported bb:latest")


@pytest.mark.parametrize("cols", [80, 40])
def test_import_progress_on_a_terminal_draws_one_line_in_place(store, big_image, cols):
    """One line redrawn in place: the layer, its bytes, size and rate, and the bytes of all
    layers; cut to the terminal's width (a wrapped line would not be redrawn in place), and
    cleared at the end."""
    p, text = run_stderr_on_pty([CSANDBOX, "image", "import", big_image, "--name", "big"],
                                store.env(), cols=cols)
    assert p.returncode == 0, text
    assert "\n" not in text, "a terminal gets one line redrawn, never a log"
    screen = Screen(text, cols)
    assert screen.unknown == [] and screen.wraps == 0, (screen.unknown, screen.wraps, text)
    assert screen.text() == [], "the progress line is cleared at the end"
    assert text.endswith("\r\x1b[K"), text
    drawn = text.split("\r\x1b[K")
    assert all(len(d) < cols for d in drawn), drawn
    size = r"[0-9.]+ [KMGT]?B"
    line = re.compile(rf"^importing layer ([1-3])/3  {size} / {size}  {size}/s  "
                      rf"total {size} / {size}$")
    if cols >= 80:
        assert {line.match(d).group(1) for d in drawn if line.match(d)} == {"1", "2", "3"}, drawn
    else:
        assert any(d.startswith("importing layer 3/3  ") for d in drawn), drawn


def test_bad_flags_and_sources_exit_125(store, tmp_path):
    for args in (["import"], ["import", str(tmp_path / "missing")], ["import", "x", "--format", "zip"],
                 ["import", "x", "--max-size", "lots"], ["frobnicate"]):
        p = store.run(*args)
        assert p.returncode == 125 and p.stderr.startswith("csandbox: "), (args, p.stderr)


# --- exec --image ------------------------------------------------------------------------

def exec_image(store, *args, timeout=TIMEOUT):
    return subprocess.run([CSANDBOX, "exec", *args], capture_output=True, text=True,
                          timeout=timeout, env=store.env(), stdin=subprocess.DEVNULL)


@pytest.fixture(scope="session")
def app_image(tmp_path_factory, images):
    """The busybox image with a config that names everything exec --image applies."""
    work = str(tmp_path_factory.mktemp("app"))
    layout = os.path.join(work, "layout")
    oci.write_layout(layout, images["layers"], ref="app", config={
        "Env": ["PATH=/bin", "FIXTURE=from-image"], "WorkingDir": "/opt/a",
        "User": "nobody", "Entrypoint": ["/probe"], "Cmd": ["report", "from-cmd"]})
    return layout


def test_exec_image_applies_env_workdir_user_entrypoint_and_cmd(store, app_image):
    store.ok("import", app_image, "--name", "app")
    p = exec_image(store, "--image", "app")
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert r["argv"] == ["/probe", "report", "from-cmd"]
    assert r["env"]["FIXTURE"] == "from-image" and r["env"]["PATH"] == "/bin"
    assert r["cwd"] == "/opt/a"
    assert (r["uid"], r["gid"]) == (65534, 65534)  # nobody, from the image's own passwd


def test_exec_image_flags_add_to_and_override_the_image(store, app_image):
    store.ok("import", app_image, "--name", "app")
    p = exec_image(store, "--image", "app", "--setenv", "EXTRA", "1", "--uid", "0", "--gid", "0",
                   "--chdir", "/", "--", "/probe", "report")
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert r["env"]["FIXTURE"] == "from-image" and r["env"]["EXTRA"] == "1"
    assert (r["uid"], r["gid"], r["cwd"]) == (0, 0, "/")
    assert r["caps"]["CapEff"] == "0000000000000000"


def test_exec_image_root_is_read_only_unless_writable(store, app_image):
    store.ok("import", app_image, "--name", "app")
    ro = exec_image(store, "--image", "app", "--", "/probe", "write", "/opt/a/new-file")
    assert json.loads(ro.stdout)["errno"] == "EROFS"
    rw = exec_image(store, "--image", "app", "--writable", "--", "/probe", "write",
                    "/opt/a/new-file")
    assert json.loads(rw.stdout)["errno"] == "ok"
    assert not any(os.path.exists(os.path.join(d, "opt/a/new-file")) for d in store.layers("app:latest"))


def test_exec_image_missing_is_a_clear_error(store):
    p = exec_image(store, "--image", "nothere", "--", "/bin/true")
    assert p.returncode == 125
    assert p.stderr.startswith("csandbox: --image nothere") and "import" in p.stderr


def test_rm_refused_while_an_exec_image_sandbox_runs(store, app_image):
    store.ok("import", app_image, "--name", "app")
    proc = store.in_use("app", "csbt-image-in-use")
    try:
        p = store.run("rm", "app")
        assert p.returncode == 125 and "in use" in p.stderr
        assert os.path.isdir(store.image_dir("app:latest"))
    finally:
        proc.kill()
        proc.wait()
    # The sandbox's pid 1 holds the lock until PDEATHSIG has taken it down too.
    assert wait_until(lambda: store.run("rm", "app").returncode == 0, 10)
    assert store.ls() == []
