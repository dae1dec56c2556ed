"""The root, the base mounts and every mount option, in host-root and rootfs mode."""
import os
import pwd
import socket
import subprocess
import uuid

import pytest

import rootfs as rootfs_builder
from conftest import HOST_PROBE, mount_at, parse_json

DEV_REQUIRED = {"null", "zero", "full", "random", "urandom", "tty", "ptmx", "pts", "shm", "fd",
                "stdin", "stdout", "stderr"}


def _json(csb, *probe_args, opts=(), rootfs=None, **kw):
    return csb.probe(*probe_args, opts=opts, rootfs=rootfs, **kw)


# --- host-root mode -------------------------------------------------------------------------

def test_host_root_is_read_only(csb):
    assert _json(csb, "write", "/usr/csb-should-not-exist")["errno"] == "EROFS"
    assert not os.path.exists("/usr/csb-should-not-exist")


@pytest.mark.parametrize("path", ["/root", "/tmp", "/var/tmp"])
def test_host_private_dirs_are_empty_tmpfs(csb, path):
    r = _json(csb, "ls", path)
    assert r["errno"] == "ok"
    assert r["entries"] == []
    report = csb.probe()
    m = mount_at(report, path)
    assert m is not None and m["fstype"] == "tmpfs", f"{path}: {m}"


def test_host_run_holds_only_what_was_bound_there(csb):
    assert _json(csb, "ls", "/run")["entries"] == [os.path.basename(HOST_PROBE)]


def test_host_home_is_invisible_by_default(csb):
    home = pwd.getpwuid(os.getuid()).pw_dir
    name = f"csb-home-marker-{uuid.uuid4().hex[:8]}"
    with open(os.path.join(home, name), "w") as f:
        f.write("secret\n")
    try:
        env = dict(os.environ, HOME=home)
        assert _json(csb, "read", os.path.join(home, name), env=env)["errno"] == "ENOENT"
        listing = _json(csb, "ls", home, env=env)
        assert listing["errno"] == "ok", f"$HOME {home} should be an empty tmpfs: {listing}"
        assert listing["entries"] == []
        homes = _json(csb, "ls", "/home", env=env)["entries"]
        assert set(homes) <= {os.path.relpath(home, "/home")}, homes
    finally:
        os.unlink(os.path.join(home, name))


@pytest.mark.parametrize("mode", ["host", "rootfs"])
def test_dev_is_minimal(csb, rootfs, mode):
    r = _json(csb, "ls", "/dev", rootfs=rootfs if mode == "rootfs" else None)
    entries = set(r["entries"])
    assert DEV_REQUIRED <= entries, f"missing: {DEV_REQUIRED - entries}"
    assert entries <= DEV_REQUIRED | {"console", "core", "mqueue"}, f"extra: {entries - DEV_REQUIRED}"


def test_dev_null_is_writable_and_ptmx_works(csb):
    assert _json(csb, "write", "/dev/null")["errno"] == "ok"
    st = _json(csb, "stat", "/dev/null")
    assert st["type"] == "char"
    assert _json(csb, "stat", "/dev/fd")["target"] == "/proc/self/fd"
    assert _json(csb, "stat", "/dev/stdin")["target"] == "/proc/self/fd/0"
    report = csb.probe()
    m = mount_at(report, "/dev/pts")
    assert m is not None and m["fstype"] == "devpts"
    # The TIOCSTI probe opens a pty from /dev/ptmx: anything but an open error means it worked.
    assert report["blocked"]["tiocsti"] not in ("ENOENT", "EACCES", "ENXIO")


@pytest.mark.parametrize("mode", ["host", "rootfs"])
def test_proc_is_a_fresh_proc_and_tmp_a_tmpfs(csb, rootfs, mode):
    r = csb.probe(rootfs=rootfs if mode == "rootfs" else None)
    assert mount_at(r, "/proc")["fstype"] == "proc"
    assert mount_at(r, "/tmp")["fstype"] == "tmpfs"


# --- binds ----------------------------------------------------------------------------------

def test_ro_bind_write_fails_with_erofs(csb, tmp_path):
    (tmp_path / "existing").write_text("x")
    opts = ["--ro-bind", str(tmp_path), "/run/ro"]
    assert _json(csb, "write", "/run/ro/new", opts=opts)["errno"] == "EROFS"
    assert _json(csb, "write", "/run/ro/existing", opts=opts)["errno"] == "EROFS"
    assert sorted(os.listdir(tmp_path)) == ["existing"]
    assert (tmp_path / "existing").read_text() == "x"


@pytest.mark.parametrize("mode", ["host", "rootfs"])
def test_rw_bind_write_lands_on_host(csb, rootfs, tmp_path, mode):
    dest = "/run/rw" if mode == "host" else "/mnt/rw"
    r = _json(csb, "write", f"{dest}/new", "from inside\n", opts=["--bind", str(tmp_path), dest],
              rootfs=rootfs if mode == "rootfs" else None)
    assert r["errno"] == "ok"
    assert (tmp_path / "new").read_text() == "from inside\n"
    assert (tmp_path / "new").stat().st_uid == os.getuid()


def test_binds_are_nosuid_nodev(csb, tmp_path):
    r = csb.probe(opts=["--bind", str(tmp_path), "/run/rw", "--ro-bind", str(tmp_path), "/run/ro"])
    for dest in ("/run/rw", "/run/ro"):
        m = mount_at(r, dest)
        assert m is not None, f"no mount at {dest}"
        assert "nosuid" in m["opts"] and "nodev" in m["opts"], f"{dest}: {m['opts']}"
    assert "ro" in mount_at(r, "/run/ro")["opts"]
    assert "rw" in mount_at(r, "/run/rw")["opts"]


def test_ro_bind_covers_submounts(csb):
    # The host's /dev/shm is a writable tmpfs mounted below /dev.
    assert os.path.ismount("/dev/shm") and os.access("/dev/shm", os.W_OK)
    name = f"csb-ro-sub-{uuid.uuid4().hex[:8]}"
    try:
        opts = ["--ro-bind", "/dev", "/run/hostdev"]
        assert _json(csb, "ls", "/run/hostdev/shm", opts=opts)["errno"] == "ok"
        assert _json(csb, "write", f"/run/hostdev/shm/{name}", opts=opts)["errno"] == "EROFS"
        assert not os.path.exists(f"/dev/shm/{name}")
    finally:
        if os.path.exists(f"/dev/shm/{name}"):
            os.unlink(f"/dev/shm/{name}")


def test_bind_try_with_missing_source_is_skipped(csb, tmp_path):
    missing = str(tmp_path / "no-such-source")
    for flag in ("--bind-try", "--ro-bind-try"):
        r = _json(csb, "stat", "/run/try", opts=[flag, missing, "/run/try"])
        assert r["errno"] == "ENOENT"
    assert not os.path.exists(missing)


def test_bind_try_with_present_source_binds(csb, tmp_path):
    (tmp_path / "f").write_text("present\n")
    r = _json(csb, "read", "/run/try/f", opts=["--ro-bind-try", str(tmp_path), "/run/try"])
    assert r["content"] == "present\n"
    r = _json(csb, "write", "/run/try/g", opts=["--bind-try", str(tmp_path), "/run/try"])
    assert r["errno"] == "ok" and (tmp_path / "g").exists()


def test_file_bind_onto_missing_destination_in_rootfs(csb, rootfs, tmp_path):
    src = tmp_path / "single"
    src.write_text("one file\n")
    r = _json(csb, "read", "/opt/deep/single", opts=["--ro-bind", str(src), "/opt/deep/single"],
              rootfs=rootfs)
    assert r["content"] == "one file\n"


@pytest.mark.parametrize("dest", ["/run/a/missing", "/run/a/sub/missing"])
def test_missing_destination_inside_host_bind_is_an_error_and_creates_nothing(csb, tmp_path,
                                                                              dest):
    """A writable host bind is the host's own directory: no cover, nothing created."""
    hostdir = tmp_path / "hostdir"
    hostdir.mkdir()
    (tmp_path / "f").write_text("f")
    p = csb.run(["--bind", str(hostdir), "/run/a", "--ro-bind", str(tmp_path / "f"),
                 dest, "--", HOST_PROBE, "exit", "0"])
    assert p.returncode == 125, p.stderr
    assert p.stderr.startswith("csandbox: "), p.stderr
    assert dest in p.stderr and "writable host directory" in p.stderr, p.stderr
    assert os.listdir(hostdir) == []


# --- tmpfs, dir, symlink, file --------------------------------------------------------------

@pytest.mark.parametrize("mode", ["host", "rootfs"])
def test_tmpfs_option_mounts_writable_tmpfs(csb, rootfs, mode):
    dest = "/run/t" if mode == "host" else "/mnt/t"
    rf = rootfs if mode == "rootfs" else None
    r = csb.probe(opts=["--tmpfs", dest], rootfs=rf)
    m = mount_at(r, dest)
    assert m is not None and m["fstype"] == "tmpfs"
    assert _json(csb, "write", f"{dest}/x", opts=["--tmpfs", dest], rootfs=rf)["errno"] == "ok"


@pytest.mark.parametrize("mode", ["host", "rootfs"])
def test_dir_option_creates_directory(csb, rootfs, mode):
    dest = "/run/d/e" if mode == "host" else "/newdir/e"
    r = _json(csb, "stat", dest, opts=["--dir", dest], rootfs=rootfs if mode == "rootfs" else None)
    assert r["errno"] == "ok" and r["type"] == "dir"
    assert r["mode"] == "0755"


@pytest.mark.parametrize("mode", ["host", "rootfs"])
def test_symlink_option_creates_symlink(csb, rootfs, mode):
    dest = "/run/link" if mode == "host" else "/link"
    r = _json(csb, "stat", dest, opts=["--symlink", "/etc/passwd", dest],
              rootfs=rootfs if mode == "rootfs" else None)
    assert r["type"] == "symlink" and r["target"] == "/etc/passwd"


@pytest.mark.parametrize("mode", ["host", "rootfs"])
def test_file_option_places_read_only_copy(csb, rootfs, tmp_path, mode):
    src = tmp_path / "config"
    src.write_text("copied content\n")
    dest = "/run/cfg/config" if mode == "host" else "/etc/config"
    rf = rootfs if mode == "rootfs" else None
    opts = ["--file", str(src), dest]
    assert _json(csb, "read", dest, opts=opts, rootfs=rf)["content"] == "copied content\n"
    w = _json(csb, "write", dest, "changed\n", opts=opts, rootfs=rf)
    assert w["errno"] in ("EROFS", "EACCES", "EPERM"), w
    assert src.read_text() == "copied content\n"


def test_parents_are_mounted_before_children(csb, rootfs, tmp_path):
    (tmp_path / "marker").write_text("child\n")
    # --bind given first, but /a (its parent) must still be mounted first or it would hide it.
    for rf, parent in ((None, "/run/a"), (rootfs, "/a")):
        r = _json(csb, "read", f"{parent}/b/marker",
                  opts=["--ro-bind", str(tmp_path), f"{parent}/b", "--tmpfs", parent], rootfs=rf)
        assert r["content"] == "child\n", f"{parent}: {r}"


def test_later_mount_on_same_destination_wins(csb, tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    for d in (one, two):
        d.mkdir()
        (d / "who").write_text(d.name)
    r = _json(csb, "read", "/run/x/who", opts=["--ro-bind", str(one), "/run/x",
                                               "--ro-bind", str(two), "/run/x"])
    assert r["content"] == "two"


# --- rootfs ---------------------------------------------------------------------------------

def test_rootfs_is_read_only_by_default(csb, rootfs):
    before = rootfs_builder.snapshot(rootfs)
    assert _json(csb, "write", "/etc/new", rootfs=rootfs)["errno"] == "EROFS"
    assert _json(csb, "write", "/etc/marker", rootfs=rootfs)["errno"] == "EROFS"
    assert rootfs_builder.snapshot(rootfs) == before


def test_rootfs_shows_only_its_own_tree(csb, rootfs):
    top = csb.probe("ls", "/", rootfs=rootfs)["entries"]
    assert sorted(top) == sorted(os.listdir(rootfs))
    assert csb.probe("stat", "/usr/share", rootfs=rootfs)["errno"] == "ENOENT"


def test_rootfs_runs_busybox_shell(csb, rootfs):
    p = csb.run(["--rootfs", rootfs, "--", "/bin/sh", "-c", "cat /etc/marker; echo $((6*7))"])
    assert p.returncode == 0, p.stderr
    assert p.stdout == "rootfs etc\n42\n"


def test_writable_rootfs_writes_vanish_and_dir_is_unchanged(csb, rootfs):
    before = rootfs_builder.snapshot(rootfs)
    script = ("echo new > /etc/new && echo changed > /etc/marker && rm /not-executable && "
              "mkdir /made && cat /etc/new /etc/marker")
    p = csb.run(["--rootfs", rootfs, "--writable", "--", "/bin/sh", "-c", script])
    assert p.returncode == 0, p.stderr
    assert p.stdout == "new\nchanged\n"
    assert rootfs_builder.snapshot(rootfs) == before
    again = csb.run(["--rootfs", rootfs, "--writable", "--", "/bin/cat", "/etc/marker"])
    assert again.stdout == "rootfs etc\n"


def test_missing_mountpoints_are_not_created_in_rootfs(csb, make_rootfs, tmp_path):
    bare = make_rootfs("bare")
    (tmp_path / "f").write_text("f\n")
    before = rootfs_builder.snapshot(bare)
    opts = ["--dir", "/newdir", "--tmpfs", "/opt/x/y", "--ro-bind", str(tmp_path / "f"),
            "/etc/newfile", "--symlink", "/x", "/srv/link", "--file", str(tmp_path / "f"),
            "/var/lib/copied"]
    r = csb.probe(opts=opts, rootfs=bare)
    assert mount_at(r, "/proc")["fstype"] == "proc"
    assert mount_at(r, "/opt/x/y")["fstype"] == "tmpfs"
    for path in ("/dev/null", "/newdir", "/etc/newfile", "/srv/link", "/var/lib/copied", "/tmp"):
        assert _json(csb, "stat", path, opts=opts, rootfs=bare)["errno"] == "ok", path
    assert rootfs_builder.snapshot(bare) == before


def test_chdir_option_sets_cwd(csb, rootfs):
    assert csb.probe(opts=["--chdir", "/etc"])["cwd"] == "/etc"
    assert csb.probe(rootfs=rootfs, opts=["--chdir", "/usr/bin"])["cwd"] == "/usr/bin"


def test_default_cwd_is_callers_when_it_exists_inside(csb, rootfs):
    assert csb.probe(cwd="/usr/share")["cwd"] == "/usr/share"
    assert csb.probe(rootfs=rootfs, cwd="/usr/bin")["cwd"] == "/usr/bin"


def test_default_cwd_is_root_when_callers_is_missing_inside(csb, rootfs, tmp_path):
    assert csb.probe(cwd=str(tmp_path))["cwd"] == "/"  # under /tmp: an empty tmpfs inside
    assert csb.probe(rootfs=rootfs, cwd="/usr/share")["cwd"] == "/"


def test_hostname_default_and_option(csb):
    assert csb.probe()["hostname"] == "csandbox"
    assert csb.probe(opts=["--hostname", "box-1"])["hostname"] == "box-1"
    assert socket.gethostname() != "box-1"


def test_probe_runs_via_host_bind(csb):
    # Sanity for the helpers: host mode runs the probe bound at HOST_PROBE.
    p = csb.run_probe("exit", "0")
    assert p.returncode == 0, p.stderr
    parse_json(csb.run_probe())


# --- mountpoints missing from a host directory or a tree of unmapped ids --------------------

def _host_listing(path):
    return sorted(os.listdir(path)) if os.path.isdir(path) else None


@pytest.mark.parametrize("tier", ["direct", "userns", "csandbox"])
def test_missing_mountpoint_in_a_host_directory_is_made_in_memory(csb, tmp_path, tier):
    """A destination missing from a read-only host directory (what ~/.ssh/known_hosts at
    /etc/ssh/ssh_known_hosts is on a stock Debian) is created in an overlay of that one
    directory: the host's entries stay visible, the directory stays read-only, the host
    gains nothing; a missing parent directory goes the same way. Where /etc has mounts
    locked below it (the test network's resolv.conf, the userns tier's), overlayfs refuses
    it as a lower layer and the tmpfs mirror takes its place."""
    src = tmp_path / "kh"
    src.write_text("host.example ssh-ed25519 AAAA\n")
    name = f"csb-kh-{uuid.uuid4().hex[:8]}"
    parent = "/etc/ssh" if os.path.isdir("/etc/ssh") else "/etc"
    deep = f"/etc/csb-missing-{uuid.uuid4().hex[:8]}/deeper/kh"
    before = {p: _host_listing(p) for p in (parent, "/etc")}
    opts = ["--ro-bind", str(src), f"{parent}/{name}", "--ro-bind", str(src), deep]
    kw = {"tier": tier}
    assert _json(csb, "read", f"{parent}/{name}", opts=opts, **kw)["content"] == src.read_text()
    assert _json(csb, "read", deep, opts=opts, **kw)["content"] == src.read_text()
    inside = _json(csb, "ls", parent, opts=opts, **kw)
    assert sorted(inside["entries"]) == sorted(before[parent] + [name]), inside
    assert _json(csb, "write", f"{parent}/new", opts=opts, **kw)["errno"] == "EROFS"
    assert _json(csb, "write", os.path.dirname(deep) + "/new", opts=opts, **kw)["errno"] == "EROFS"
    after = {p: _host_listing(p) for p in (parent, "/etc")}
    assert after == before


def test_mounts_beneath_an_overlaid_directory_stay_visible(csb, tmp_path):
    """The overlay that holds a new mountpoint in /etc must not hide what is mounted below
    /etc: a bind on /etc/ssh made before it is attached again on the overlay."""
    d = tmp_path / "ssh"
    d.mkdir()
    (d / "only-in-the-bind").write_text("bound\n")
    (tmp_path / "f").write_text("f\n")
    target = "/etc/ssh" if os.path.isdir("/etc/ssh") else "/etc/default"
    opts = ["--ro-bind", str(d), target, "--ro-bind", str(tmp_path / "f"),
            f"/etc/csb-new-{uuid.uuid4().hex[:8]}"]
    r = _json(csb, "read", f"{target}/only-in-the-bind", opts=opts)
    assert r["content"] == "bound\n", r
    assert _json(csb, "write", f"{target}/x", opts=opts)["errno"] == "EROFS"


@pytest.fixture
def foreign_rootfs(make_rootfs):
    """A bare busybox rootfs without /etc/hostname whose every file belongs to ids the
    sandbox does not map (a subordinate range, standing in for a root-owned system tree),
    or only whose groups do: built as the test user, then chowned in a user namespace that
    maps /etc/subuid's range (newuidmap)."""
    made = []

    def make(owner):
        tree = make_rootfs("bare")
        os.unlink(os.path.join(tree, "etc", "hostname"))
        ids = "1:1" if owner == "unmapped" else "0:1"
        subprocess.run(["unshare", "--map-auto", "--map-root-user", "chown", "-R", "-h", ids,
                        tree], check=True, capture_output=True)
        made.append(tree)
        return tree
    yield make
    for tree in made:
        subprocess.run(["unshare", "--map-auto", "--map-root-user", "rm", "-rf", tree],
                       check=False)


@pytest.mark.parametrize("owner", ["unmapped", "group-unmapped"])
def test_rootfs_of_unmapped_ids_gets_its_mountpoints_in_memory(csb, foreign_rootfs, tmp_path,
                                                               owner):
    tree = foreign_rootfs(owner)
    st = os.lstat(os.path.join(tree, "etc"))
    assert st.st_gid != os.getgid() and (owner != "unmapped" or st.st_uid != os.getuid())
    before = rootfs_builder.snapshot(tree)
    (tmp_path / "kh").write_text("kh\n")
    opts = ["--ro-bind", str(tmp_path / "kh"), "/etc/ssh/ssh_known_hosts",
            "--symlink", "/x", "/srv/a/link", "--dir", "/opt/d"]
    assert _json(csb, "read", "/etc/hostname", opts=opts, rootfs=tree)["content"] == "csandbox\n"
    assert _json(csb, "read", "/etc/ssh/ssh_known_hosts", opts=opts,
                 rootfs=tree)["content"] == "kh\n"
    r = csb.probe(opts=opts, rootfs=tree)
    for path in ("/proc", "/dev", "/tmp"):
        assert mount_at(r, path) is not None, path
    assert _json(csb, "stat", "/srv/a/link", opts=opts, rootfs=tree)["type"] == "symlink"
    assert _json(csb, "write", "/etc/new", opts=opts, rootfs=tree)["errno"] == "EROFS"
    assert rootfs_builder.snapshot(tree) == before
