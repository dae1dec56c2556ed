"""Capabilities, no_new_privs, seccomp mode, pid 1, namespaces, inherited fds."""
import os

import pytest

from conftest import ZERO_CAPS, host_ns

MODES = ["host", "rootfs"]


def _report(csb, rootfs, mode, **kw):
    return csb.probe(rootfs=rootfs if mode == "rootfs" else None, **kw)


@pytest.mark.parametrize("mode", MODES)
def test_payload_has_no_capabilities_and_no_new_privs(csb, rootfs, mode):
    r = _report(csb, rootfs, mode)
    assert r["caps"] == ZERO_CAPS
    assert r["no_new_privs"] == 1
    assert r["prctl_no_new_privs"] == 1


@pytest.mark.parametrize("mode", MODES)
def test_payload_runs_under_seccomp_filter_by_default(csb, rootfs, mode):
    assert _report(csb, rootfs, mode)["seccomp"] == 2


def test_uid_zero_inside_still_has_no_capabilities(csb, rootfs):
    r = csb.probe(rootfs=rootfs, opts=["--uid", "0", "--gid", "0"])
    assert (r["uid"], r["euid"], r["gid"]) == (0, 0, 0)
    assert r["caps"] == ZERO_CAPS


@pytest.mark.parametrize("mode", MODES)
def test_payload_is_pid_2_under_csandbox_reaper(csb, rootfs, mode):
    r = _report(csb, rootfs, mode)
    assert r["pid"] == 2
    assert r["ppid"] == 1
    assert r["pid1_comm"] is not None, "pid 1 not visible in the sandbox's /proc"
    assert r["pid1_comm"].strip() != "probe"
    assert r["pid1_cmdline"][:1] != r["argv"][:1], "pid 1 is the payload itself"


@pytest.mark.parametrize("mode", MODES)
def test_proc_shows_only_the_sandbox_processes(csb, rootfs, mode):
    assert _report(csb, rootfs, mode)["procs"] == [1, 2]


def test_payload_gets_own_namespaces(csb):
    r = csb.probe()
    for ns in ("user", "mnt", "pid", "ipc", "uts", "net"):
        assert r["ns"][ns] != host_ns(ns), f"{ns} namespace shared with the host"


def test_net_host_shares_only_the_network_namespace(csb):
    r = csb.probe(opts=["--net", "host"])
    assert r["ns"]["net"] == host_ns("net")
    for ns in ("user", "mnt", "pid", "ipc", "uts"):
        assert r["ns"][ns] != host_ns(ns)


@pytest.mark.parametrize("mode", MODES)
def test_payload_inherits_only_stdio_fds(csb, rootfs, mode):
    """No sync pipe, bind-source O_PATH fd or seccomp fd may leak into the payload: an fd
    on a host directory is a way out of the root."""
    r = _report(csb, rootfs, mode)
    assert sorted(fd["fd"] for fd in r["fds"]) == [0, 1, 2], r["fds"]


def test_payload_starts_with_clean_signal_mask(csb):
    r = csb.probe()
    assert int(r["sigblk"], 16) == 0, f"SigBlk {r['sigblk']}"
    assert int(r["sigign"], 16) == 0, f"SigIgn {r['sigign']}"


def test_default_single_id_map_and_setgroups_deny(csb):
    r = csb.probe()
    uid, gid = os.getuid(), os.getgid()
    assert r["uid_map"].split() == [str(uid), str(uid), "1"]
    assert r["gid_map"].split() == [str(gid), str(gid), "1"]
    assert (r["uid"], r["gid"]) == (uid, gid)
    assert r["setgroups"].strip() == "deny"
