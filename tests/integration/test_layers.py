"""The layer store: each layer unpacked once into layers/sha256/DIFFID and shared by every
image that lists it; launches mount the layers as overlay lower dirs; rm and prune remove the
layers no image lists, never one an image in use lists; old-layout images keep working."""
import json
import os
import resource
import shutil
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "fixtures"))
import oci  # noqa: E402

from conftest import CSANDBOX, PROBE, wait_until  # noqa: E402
# the store fixture: a store of its own for each test
from test_image import TIMEOUT, check_busybox_tree, store, tree  # noqa: E402,F401


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """Two images on one busybox base layer, each with a small layer of its own."""
    work = str(tmp_path_factory.mktemp("shared"))
    base = oci.busybox_layers(work, PROBE)[0]
    out = {}
    for name in ("a", "b"):
        own = oci.Layer([oci.directory("own"), oci.file(f"own/{name}", f"{name}\n")])
        out[name] = os.path.join(work, name)
        out[name + "-info"] = oci.write_layout(out[name], [base, own])
    return out


def store_bytes(store):
    total = 0
    for dirpath, _, files in os.walk(store.images):
        for f in files:
            total += os.lstat(os.path.join(dirpath, f)).st_size
    return total


def exec_image(store, name, *cmd):
    return subprocess.run([CSANDBOX, "exec", "--image", name, "--net", "host", "--", *cmd],
                          capture_output=True, text=True, timeout=TIMEOUT, env=store.env(),
                          stdin=subprocess.DEVNULL)


def test_two_images_sharing_a_base_store_it_once(store, shared, tmp_path):
    b = str(tmp_path / "b")
    shutil.copytree(shared["b"], b)
    store.ok("import", shared["a"], "--name", "a")
    after_a = store_bytes(store)
    base = store.diff_ids("a:latest")[0]
    busybox = os.path.join(store.images, "layers", "sha256", base[7:], "diff", "bin", "busybox")
    ino = os.lstat(busybox).st_ino
    # the base blob is gone from b's layout: the import may not even read it
    os.unlink(os.path.join(b, "blobs", "sha256", shared["b-info"]["layers"][0][7:]))
    p = store.ok("import", b, "--name", "b")
    assert "2 layers (1 already stored)" in p.stdout, p.stdout
    assert p.stderr.splitlines()[0].startswith("layer 1/2 sha256:") and \
        p.stderr.splitlines()[0].endswith("already stored"), p.stderr
    assert store.diff_ids("b:latest")[0] == base
    assert len(store.stored_layers()) == 3, "the base is stored once, each image's own once"
    grown = store_bytes(store) - after_a
    assert grown < after_a / 10, f"the second image took {grown} bytes, the first {after_a}"
    assert os.lstat(busybox).st_ino == ino, "the base layer was unpacked again"
    for name in ("a", "b"):
        p = exec_image(store, name, "/bin/cat", f"/own/{name}")
        assert p.returncode == 0 and p.stdout == f"{name}\n", p.stderr


def test_concurrent_imports_of_images_sharing_layers_store_each_once(store, shared):
    procs = [store.popen("import", shared["a" if i % 2 else "b"], "--name", f"c{i}")
             for i in range(8)]
    outs = [p.communicate(timeout=TIMEOUT) for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, outs
    assert len(store.stored_layers()) == 3
    assert len(store.state()["sha256"]) == 2 and store.state()["tmp"] == []
    assert sum(o[0].startswith("imported") for o in outs) == 2, outs
    for i in (0, 1):
        p = exec_image(store, f"c{i}", "/bin/ls", "/own")
        assert p.returncode == 0 and p.stdout == ("a\n" if i % 2 else "b\n"), p.stderr


def test_rm_keeps_a_layer_another_image_lists(store, shared):
    store.ok("import", shared["a"], "--name", "a")
    store.ok("import", shared["b"], "--name", "b")
    base, own_a = store.diff_ids("a:latest")
    own_b = store.diff_ids("b:latest")[1]
    store.ok("rm", "a")
    assert store.stored_layers() == sorted([base[7:], own_b[7:]])
    p = exec_image(store, "b", "/bin/cat", "/own/b")
    assert p.returncode == 0 and p.stdout == "b\n", p.stderr
    store.ok("rm", "b")
    assert store.stored_layers() == []
    assert os.listdir(os.path.join(store.images, "layers", "blobs")) == [], \
        "the records of removed layers go with them"


def test_layers_of_an_image_in_use_survive_rm_and_prune(store, shared):
    store.ok("import", shared["a"], "--name", "a")
    store.ok("import", shared["b"], "--name", "b")
    base, own_b = store.diff_ids("b:latest")
    proc = store.in_use("b", "csbt-layers-in-use")
    try:
        p = store.run("rm", "b")
        assert p.returncode == 125 and "in use" in p.stderr
        store.ok("rm", "a")
        p = store.ok("prune")
        assert "0 unnamed images, 0 unused layers" in p.stdout, p.stdout
        assert store.stored_layers() == sorted([base[7:], own_b[7:]])
        p = exec_image(store, "b", "/bin/cat", "/own/b")
        assert p.returncode == 0 and p.stdout == "b\n", p.stderr
    finally:
        proc.kill()
        proc.wait()
    assert wait_until(lambda: store.run("rm", "b").returncode == 0, 10)
    assert store.stored_layers() == []


def test_prune_removes_layers_no_image_lists(store, shared):
    store.ok("import", shared["a"], "--name", "a")
    stray = os.path.join(store.images, "layers", "sha256", "0" * 64)
    os.makedirs(os.path.join(stray, "diff"))
    p = store.ok("prune")
    assert "1 unused layers" in p.stdout, p.stdout
    assert not os.path.exists(stray) and len(store.stored_layers()) == 2


def test_entry_under_a_lower_layer_symlink_gets_a_real_directory(store, tmp_path):
    """A lower layer's symlink is not in the upper layer's directory: the entry's parent is
    made there as a directory, which hides the symlink in the merged view (as
    containers/storage's overlay driver does). Nothing is written through the link."""
    outside = tmp_path / "outside"
    outside.mkdir()
    layout = str(tmp_path / "img")
    oci.malicious("symlink-cross-layer", layout, str(outside))
    store.ok("import", layout, "--name", "x")
    assert os.listdir(outside) == []
    upper, lower = store.layers("x:latest")
    assert os.path.islink(os.path.join(lower, "link"))
    assert os.path.isdir(os.path.join(upper, "link")) and \
        not os.path.islink(os.path.join(upper, "link"))
    assert os.listdir(os.path.join(upper, "link")) == ["pwned"]


def test_whiteouts_and_opaque_dirs_are_kept_in_overlay_form(store, images_small):
    store.ok("import", images_small, "--name", "bb")
    top, middle, _ = store.layers("bb:latest")
    st = os.lstat(os.path.join(middle, "etc", "hostname"))
    assert (oct(st.st_mode >> 12), os.major(st.st_rdev), os.minor(st.st_rdev)) == \
        (oct(0o2), 0, 0), "a whiteout is a 0/0 character device"
    assert os.getxattr(os.path.join(top, "opt", "a"), "user.overlay.opaque") == b"y"
    assert os.lstat(os.path.join(top, "var", "cache")).st_rdev == 0
    check_busybox_tree(store.rootfs("bb:latest"))


@pytest.fixture(scope="module")
def images_small(tmp_path_factory):
    work = str(tmp_path_factory.mktemp("small"))
    path = os.path.join(work, "layout")
    oci.write_layout(path, oci.busybox_layers(work, PROBE))
    return path


def test_an_omitted_parent_takes_the_lower_layers_mode(store, tmp_path):
    layout = str(tmp_path / "img")
    oci.write_layout(layout, [oci.Layer([oci.directory("srv", 0o750, uid=7, gid=8),
                                         oci.file("srv/a", "a\n")]),
                              oci.Layer([oci.file("srv/b", "b\n")])])
    store.ok("import", layout, "--name", "x")
    upper = store.layers("x:latest")[0]
    assert os.lstat(os.path.join(upper, "srv")).st_mode & 0o7777 == 0o750
    with open(os.path.join(os.path.dirname(upper), "metadata")) as f:
        assert "40750 7 8 srv\n" in f.read()


def low_nofile():
    resource.setrlimit(resource.RLIMIT_NOFILE, (512, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))


def test_image_with_256_layers_imports_and_launches_under_512_fds(store, tmp_path):
    """The default --max-layers under a low soft limit of open files (each layer is a
    directory held open while it is stored, and an fd of the launch)."""
    work = str(tmp_path)
    layers = [oci.busybox_layers(work, PROBE)[0]]
    for i in range(1, 256):
        layers.append(oci.Layer([oci.directory("many"), oci.file(f"many/f{i}", f"{i}\n")],
                                "none"))
    layers[-1].entries.append(oci.whiteout("many/f1"))
    layout = os.path.join(work, "layout")
    oci.write_layout(layout, layers)
    p = subprocess.run([CSANDBOX, "image", "import", layout, "--name", "many"],
                       capture_output=True, text=True, env=store.env(), timeout=TIMEOUT,
                       stdin=subprocess.DEVNULL, preexec_fn=low_nofile)
    assert p.returncode == 0, p.stderr
    p = subprocess.run([CSANDBOX, "exec", "--image", "many", "--net", "host", "--", "/bin/sh",
                        "-c", "ls /many | wc -l; cat /many/f255"], capture_output=True,
                       text=True, env=store.env(), timeout=TIMEOUT, stdin=subprocess.DEVNULL,
                       preexec_fn=low_nofile)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["254", "255"], p.stdout
    plan = json.loads(subprocess.run([CSANDBOX, "exec", "--plan", "--image", "many", "--",
                                      "/bin/true"], capture_output=True, text=True,
                                     env=store.env(), timeout=TIMEOUT).stdout)
    assert len(plan["root"]["layers"]) == 256
    assert plan["root"]["layers"][0].endswith(store.diff_ids("many:latest")[-1][7:] + "/diff")


def test_max_layers_beyond_the_overlay_limit_is_refused(store, shared):
    p = store.run("import", shared["a"], "--max-layers", "501")
    assert p.returncode == 125 and "--max-layers" in p.stderr and "500" in p.stderr, p.stderr
    assert store.ls() == []


def test_sigkill_during_imports_sharing_layers_leaves_nothing_usable(store, shared, tmp_path):
    """Killed at any point, an import leaves complete layers or none, and an image only
    with all of them; a rerun finishes the job."""
    store.ok("import", shared["a"], "--name", "a")
    store.ok("rm", "a")
    for delay in (0.0, 0.02, 0.05, 0.1, 0.2):
        proc = store.popen("import", shared["a"], "--name", "a")
        time.sleep(delay)
        proc.kill()
        proc.wait(timeout=TIMEOUT)
        for layer in store.stored_layers():
            d = os.path.join(store.images, "layers", "sha256", layer)
            assert sorted(os.listdir(d)) == ["diff", "info.json", "metadata"], layer
        if store.ls():
            assert all(os.path.isdir(os.path.dirname(d)) for d in store.layers("a:latest"))
            store.ok("rm", "a")
    store.ok("import", shared["a"], "--name", "a")
    p = exec_image(store, "a", "/bin/cat", "/own/a")
    assert p.returncode == 0 and p.stdout == "a\n", p.stderr
    store.ok("prune")
    assert store.state()["tmp"] == []


def test_an_old_layout_image_still_launches_lists_and_goes(store, shared):
    """sha256/HEX/rootfs, a whole unpacked tree, from before the layer store."""
    store.ok("import", shared["a"], "--name", "a")
    view = store.rootfs("a:latest")
    old = os.path.join(store.images, "sha256", "e" * 64)
    os.makedirs(old)
    shutil.copytree(view, os.path.join(old, "rootfs"), symlinks=True)
    shutil.copy(os.path.join(store.image_dir("a:latest"), "config.json"), old)
    with open(os.path.join(old, "info.json"), "w") as f:
        json.dump({"digest": "sha256:" + "e" * 64, "size": 1, "files": 1, "created": 0}, f)
    with open(os.path.join(store.images, "names.json")) as f:
        names = json.load(f)
    names["old:latest"] = "sha256:" + "e" * 64
    with open(os.path.join(store.images, "names.json"), "w") as f:
        json.dump(names, f)
    store.ok("rm", "a")  # the old image lists no layer of the store: they all go
    assert store.stored_layers() == []
    assert [i["name"] for i in store.ls()] == ["old:latest"]
    p = exec_image(store, "old", "/bin/cat", "/own/a")
    assert p.returncode == 0 and p.stdout == "a\n", p.stderr
    assert tree(store.rootfs("old:latest")) == tree(view)
    store.ok("rm", "old")
    assert store.ls() == [] and not os.path.exists(old)


def test_user_resolves_through_the_topmost_passwd_of_the_layers(store, tmp_path):
    """User is read from /etc/passwd as the overlay shows it: an upper layer's file replaces
    the base's, and a whiteout of it leaves no passwd at all."""
    work = str(tmp_path)
    base = oci.busybox_layers(work, PROBE)[0]
    upper = oci.Layer([oci.directory("etc"), oci.file("etc/passwd", "app:x:4242:4343::/:/bin/sh\n")])
    for name, layers, user in (("replaced", [base, upper], "app"),
                               ("gone", [base, oci.Layer([oci.whiteout("etc/passwd")])], "nobody")):
        layout = os.path.join(work, name)
        oci.write_layout(layout, layers, config={"User": user, "Entrypoint": ["/probe"],
                                                 "Cmd": ["report"]})
        store.ok("import", layout, "--name", name)
    p = subprocess.run([CSANDBOX, "exec", "--image", "replaced", "--net", "host"],
                       capture_output=True, text=True, env=store.env(), timeout=TIMEOUT,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    assert (json.loads(p.stdout)["uid"], json.loads(p.stdout)["gid"]) == (4242, 4343)
    p = subprocess.run([CSANDBOX, "exec", "--image", "gone", "--net", "host"],
                       capture_output=True, text=True, env=store.env(), timeout=TIMEOUT,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 125 and "no user `nobody`" in p.stderr, p.stderr
