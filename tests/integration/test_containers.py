"""Where csandbox itself runs confined — under a container engine's seccomp profile, in a
container without /dev/net/tun, inside another csandbox — emulated here: each refusal is
either worked around or named with the fix that applies there."""
import json
import os

from conftest import base_env


def outer_seccomp(csb, name, refused):
    """An OCI profile that allows everything but the given calls (EPERM), as a container
    engine's default profile refuses them."""
    path = os.path.join(csb.basetemp, f"{name}.json")
    with open(path, "w") as f:
        json.dump({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [
            {"names": refused, "action": "SCMP_ACT_ERRNO", "errnoRet": 1}]}, f)
    return path


def nested(csb, inner, outer=()):
    """csandbox exec INNER inside an outer csandbox (host network, the binary bound in)."""
    return csb.run(["--net", "host", *outer, "--ro-bind", csb.binary, "/run/csandbox", "--",
                    "/run/csandbox", "exec", *inner])


def test_refused_sethostname_keeps_the_outer_hostname_and_says_so_once(csb):
    profile = outer_seccomp(csb, "no-sethostname", ["sethostname"])
    r = nested(csb, ["--hostname", "boxy", "--", "/bin/cat", "/proc/sys/kernel/hostname"],
               outer=["--hostname", "outer", "--seccomp", profile])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "outer\n"
    assert r.stderr.count("setting the hostname was refused") == 1, r.stderr
    assert "seccomp profile" in r.stderr and "keeps the outer hostname" in r.stderr
    # Without the refusal the name is set as asked.
    r = nested(csb, ["--hostname", "boxy", "--", "/bin/cat", "/proc/sys/kernel/hostname"])
    assert (r.returncode, r.stdout, r.stderr) == (0, "boxy\n", "")
