"""User/group ids and id maps; network modes (loopback only, never another address)."""
import os
import pwd
import socket

import pytest

from conftest import host_ns


def _map_lines(text):
    return [tuple(int(x) for x in line.split()) for line in text.splitlines() if line.strip()]


def _subid_range(path):
    user = pwd.getpwuid(os.getuid()).pw_name
    with open(path) as f:
        for line in f:
            parts = line.strip().split(":")
            if len(parts) == 3 and parts[0] in (user, str(os.getuid())):
                return int(parts[1]), int(parts[2])
    raise AssertionError(f"{user} has no range in {path} (tests/run sets one up)")


@pytest.mark.parametrize("uid,gid", [(0, 0), (4242, 4343)])
def test_uid_and_gid_options_map_caller_onto_them(csb, rootfs, uid, gid):
    r = csb.probe(rootfs=rootfs, opts=["--uid", str(uid), "--gid", str(gid)])
    assert (r["uid"], r["euid"], r["gid"], r["egid"]) == (uid, uid, gid, gid)
    assert _map_lines(r["uid_map"]) == [(uid, os.getuid(), 1)]
    assert _map_lines(r["gid_map"]) == [(gid, os.getgid(), 1)]


def test_files_written_as_mapped_uid_belong_to_caller_on_host(csb, rootfs, tmp_path):
    r = csb.probe("write", "/mnt/w/f", rootfs=rootfs,
                  opts=["--uid", "0", "--gid", "0", "--bind", str(tmp_path), "/mnt/w"])
    assert r["errno"] == "ok"
    st = (tmp_path / "f").stat()
    assert (st.st_uid, st.st_gid) == (os.getuid(), os.getgid())


@pytest.mark.parametrize("kind", ["uid", "gid"])
def test_map_range_maps_65536_ids_from_subid_range(csb, rootfs, kind):
    inside = 1000
    start, count = _subid_range(f"/etc/sub{kind}")
    host_id = os.getuid() if kind == "uid" else os.getgid()
    r = csb.probe(rootfs=rootfs, opts=["--map-range", "--uid", str(inside), "--gid", str(inside)])
    lines = _map_lines(r[f"{kind}_map"])
    assert r[kind] == inside

    def host_of(i):
        for first, outside, n in lines:
            if first <= i < first + n:
                return outside + (i - first)
        return None

    assert host_of(inside) == host_id, lines
    total = sum(n for _, _, n in lines)
    assert 65536 <= total <= 65537, lines
    for first, outside, n in lines:
        if outside != host_id:
            assert start <= outside and outside + n <= start + count, (lines, start, count)
    assert host_of(0) is not None and host_of(65535) is not None, lines


def test_map_range_default_ids_stay_callers(csb, rootfs):
    r = csb.probe(rootfs=rootfs, opts=["--map-range"])
    assert (r["uid"], r["gid"]) == (os.getuid(), os.getgid())
    for first, outside, n in _map_lines(r["uid_map"]):
        if first <= os.getuid() < first + n:
            assert outside + os.getuid() - first == os.getuid()


def test_net_none_has_only_loopback_up(csb, rootfs):
    for rf in (None, rootfs):
        r = csb.probe(rootfs=rf)
        assert r["interfaces"] == [{"name": "lo", "up": True}]
        assert r["ns"]["net"] != host_ns("net")
        r = csb.probe(rootfs=rf, opts=["--net", "none"])
        assert r["interfaces"] == [{"name": "lo", "up": True}]


def test_net_host_shares_host_network_namespace(csb):
    r = csb.probe(opts=["--net", "host"])
    assert r["ns"]["net"] == host_ns("net")
    with open("/proc/net/dev") as f:
        host_ifaces = {line.split(":")[0].strip() for line in f.readlines()[2:]}
    assert {i["name"] for i in r["interfaces"]} == host_ifaces


def test_host_loopback_reachable_only_with_net_host(csb):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(8)
        port = str(srv.getsockname()[1])
        assert csb.probe("connect", "127.0.0.1", port, opts=["--net", "host"])["errno"] == "ok"
        assert csb.probe("connect", "127.0.0.1", port)["errno"] == "ECONNREFUSED"
        assert csb.probe("connect", "127.0.0.1", port,
                         opts=["--net", "none"])["errno"] == "ECONNREFUSED"
