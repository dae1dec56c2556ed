"""What the sandbox sees of the host's kernel objects: its own sysfs (its own network
interfaces, not the host's and their MAC addresses) and its own cgroup namespace."""
import os

from conftest import host_ns, parse_json

# Inside: the interfaces sysfs lists (with the index it gives each) against the ones the
# sandbox's own network namespace has, plus what the two net directories hold.
SYSFS_VIEW = r"""
import json, os, socket
def ls(p):
    try:
        return sorted(os.listdir(p))
    except OSError:
        return None
sysfs = {}
for name in ls("/sys/class/net") or []:
    with open(f"/sys/class/net/{name}/ifindex") as f:
        index = int(f.read())
    with open(f"/sys/class/net/{name}/address") as f:
        sysfs[name] = [index, f.read().strip()]
print(json.dumps({"sysfs": sysfs, "own": {n: i for i, n in socket.if_nameindex()},
                  "class_net": ls("/sys/class/net"),
                  "virtual_net": ls("/sys/devices/virtual/net")}))
"""


def sysfs_view(csb, *opts, tier="direct"):
    return parse_json(csb.run([*opts, "--", "/usr/bin/python3", "-c", SYSFS_VIEW], tier=tier))


def host_interfaces():
    out = {}
    for name in os.listdir("/sys/class/net"):
        with open(f"/sys/class/net/{name}/address") as f:
            out[name] = f.read().strip()
    return out


def test_sysfs_net_none_shows_loopback_only(csb, tier):
    host = host_interfaces()
    assert set(host) - {"lo"}, f"the test host namespace has interfaces besides lo: {host}"
    r = sysfs_view(csb, "--net", "none", tier=tier)
    assert r["class_net"] == ["lo"], r
    assert r["virtual_net"] == ["lo"], r
    assert {n: v[0] for n, v in r["sysfs"].items()} == r["own"]


def test_sysfs_net_pasta_shows_the_sandboxs_interface_not_the_hosts(csb):
    host = host_interfaces()
    r = sysfs_view(csb, "--net", "pasta")
    # The same names as the host (pasta copies them), but the sandbox's own devices: the
    # indexes of its namespace and not one host MAC address.
    assert {n: v[0] for n, v in r["sysfs"].items()} == r["own"], r
    assert len(r["own"]) >= 2, r
    macs = {v[1] for n, v in r["sysfs"].items() if n != "lo"}
    assert not macs & {m for n, m in host.items() if n != "lo"}, (r, host)


def test_sysfs_hides_host_interfaces_where_a_fresh_sysfs_is_refused(csb):
    # The host's network namespace is not the sandbox's to mount a sysfs for: the kernel
    # refuses, and the host's network directories are covered instead.
    r = sysfs_view(csb, "--net", "host")
    assert r["class_net"] == [] and r["virtual_net"] == [] and r["sysfs"] == {}, r


def test_own_cgroup_namespace(csb):
    r = csb.probe()
    assert r["ns"]["cgroup"] != host_ns("cgroup")
    with open("/proc/self/cgroup") as f:
        host_lines = f.read().splitlines()
    assert any(not l.endswith(":/") for l in host_lines), (
        f"the test runs in a non-root cgroup of the host, else this proves nothing: {host_lines}")
    inside = csb.probe("read", "/proc/self/cgroup")["content"].splitlines()
    assert inside and all(l.endswith(":/") for l in inside), inside
