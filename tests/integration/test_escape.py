"""Hostile rootfs symlinks must never redirect a mount or a created mountpoint outside the
root: destinations are resolved inside it (RESOLVE_IN_ROOT)."""
import os

import pytest

import rootfs as rootfs_builder
from conftest import HOST_PROBE, mountinfo_entries


def _escape_opts(tmp_path):
    src = tmp_path / "bindsrc"
    src.mkdir()
    (src / "payload").write_text("bound\n")
    (tmp_path / "file").write_text("file\n")
    return ["--ro-bind", str(src), "/etc/sub", "--tmpfs", "/etc/t", "--dir", "/etc/d",
            "--file", str(tmp_path / "file"), "/etc/f", "--symlink", "/x", "/etc/l"]


def _inside_target(outside, variant):
    return outside + ("/etc" if variant == "chain" else "")


@pytest.mark.parametrize("variant", ["etc-abs-link", "etc-dotdot", "chain"])
def test_bind_destination_symlink_cannot_escape_rootfs(csb, make_rootfs, outside, tmp_path,
                                                       variant):
    """The link's target exists both inside the root (mirrored) and on the host: the mounts
    must land on the one inside."""
    root = make_rootfs(variant, outside, mirror=True)
    host_before = rootfs_builder.snapshot(outside)
    root_before = rootfs_builder.snapshot(root)
    opts = _escape_opts(tmp_path)
    r = csb.probe("read", "/etc/sub/payload", opts=opts, rootfs=root)
    assert r["content"] == "bound\n"
    listing = csb.probe("ls", "/etc/", opts=opts, rootfs=root)
    assert listing["errno"] == "ok"
    # csandbox's own /etc/hostname, hosts and resolv.conf for the sandbox's network land
    # there too, inside the root.
    expected = ({"sub", "t", "d", "f", "l", "hostname", "hosts", "resolv.conf"}
                | ({"inside-file"} if variant != "chain" else set()))
    assert set(listing["entries"]) == expected, listing
    report = csb.probe(opts=opts, rootfs=root)
    tmpfs = [m for m in mountinfo_entries(report["mountinfo"]) if m["mountpoint"].endswith("/t")]
    assert [m["fstype"] for m in tmpfs] == ["tmpfs"], tmpfs
    # Its mountpoint is the link's target resolved inside the root.
    assert tmpfs[0]["mountpoint"] == _inside_target(outside, variant) + "/t", tmpfs
    assert rootfs_builder.snapshot(outside) == host_before
    assert rootfs_builder.snapshot(root) == root_before


@pytest.mark.parametrize("variant", ["etc-abs-link", "etc-dotdot", "chain"])
def test_symlinked_destination_missing_in_rootfs_never_touches_host(csb, make_rootfs, outside,
                                                                    tmp_path, variant):
    """The link's target exists only on the host: whatever csandbox does (create it in the
    tmpfs layer, or refuse), nothing is created or bound there."""
    root = make_rootfs(variant, outside)
    host_before = rootfs_builder.snapshot(outside)
    root_before = rootfs_builder.snapshot(root)
    p = csb.run(csb.probe_argv(_escape_opts(tmp_path), ("ls", "/etc/"), root))
    # The destination is created in the root's tmpfs-backed layer, never on the host.
    assert p.returncode == 0, p.stderr
    assert "host-file" not in p.stdout, p.stdout
    assert rootfs_builder.snapshot(outside) == host_before
    assert rootfs_builder.snapshot(root) == root_before


@pytest.mark.parametrize("variant", ["etc-abs-link", "etc-dotdot", "chain"])
def test_missing_destination_through_rootfs_symlink_is_created_inside(csb, make_rootfs, outside,
                                                                      tmp_path, variant):
    """Contract: a symlink in the rootfs is followed inside the root, and a destination that
    does not exist there is created in the tmpfs-backed layer."""
    root = make_rootfs(variant, outside)
    r = csb.probe("read", "/etc/sub/payload", opts=_escape_opts(tmp_path), rootfs=root)
    assert r["content"] == "bound\n"


def test_rootfs_tmp_symlink_cannot_redirect_tmp_mount_outside(csb, make_rootfs, outside):
    root = make_rootfs("tmp-link", outside)
    host_before = rootfs_builder.snapshot(outside)
    p = csb.run(["--rootfs", root, "--", "/probe", "write", "/tmp/escaped", "x"])
    # /tmp is mounted where the link points inside the root; the write lands there.
    assert p.returncode == 0, p.stderr
    assert '"ok"' in p.stdout, p.stdout
    assert rootfs_builder.snapshot(outside) == host_before
    assert not os.path.exists(os.path.join(outside, "escaped"))


def test_symlink_inside_host_bind_cannot_create_on_host(csb, tmp_path, outside):
    """A link inside a bound host dir pointing at another host dir: a mountpoint created
    through it lands in the sandbox's view (/var/tmp is a tmpfs there), not on the host."""
    d = tmp_path / "withlink"
    d.mkdir()
    os.symlink(outside, d / "l")
    host_before = rootfs_builder.snapshot(outside)
    p = csb.run(["--ro-bind", str(d), "/run/a", "--dir", "/run/a/l/made", "--ro-bind",
                 csb.probe_path, HOST_PROBE, "--", HOST_PROBE, "stat", "/run/a/l/made"])
    assert p.returncode == 0, p.stderr
    assert '"type":"dir"' in p.stdout, p.stdout
    assert rootfs_builder.snapshot(outside) == host_before
    assert sorted(os.listdir(d)) == ["l"]
