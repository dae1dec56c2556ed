"""`csandbox exec --plan`: the spec as JSON, printed before anything is created."""
import os
import pwd

import rootfs as rootfs_builder

ALL_NS = {"user", "mount", "pid", "ipc", "uts", "net"}


def _depth(path):
    return len([c for c in path.split("/") if c])


def _find(plan, kind, dest):
    found = [m for m in plan["mounts"] if m["kind"] == kind and m["dest"] == dest]
    assert len(found) == 1, f"{kind} {dest}: {found}\nmounts: {plan['mounts']}"
    return found[0]


def test_plan_for_host_root_defaults(csb):
    home = pwd.getpwuid(os.getuid()).pw_dir
    plan = csb.plan(["--", "/bin/echo", "hi"], env=dict(os.environ, HOME=home, TERM="xterm"))
    assert plan["root"] == {"kind": "host", "path": None, "writable": False}
    assert set(plan["namespaces"]) == ALL_NS
    assert plan["net"] == "none"
    assert plan["hostname"] == "csandbox"
    assert plan["argv"] == ["/bin/echo", "hi"]
    assert plan["seccomp"] == {"profile": "default", "path": None}
    ids = plan["ids"]
    assert ids["uid"] == ids["host_uid"] == os.getuid()
    assert ids["gid"] == ids["host_gid"] == os.getgid()
    assert ids["map_range"] is False
    assert plan["env"] == [{"name": "PATH", "value":
                            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
                           {"name": "TERM", "value": "xterm"},
                           {"name": "HOME", "value": home}]
    assert _find(plan, "proc", "/proc")
    assert _find(plan, "dev", "/dev")
    for hidden in ("/home", "/root", "/tmp", "/var/tmp", "/run", home):
        assert any(m["kind"] == "tmpfs" and m["dest"] == hidden for m in plan["mounts"]), hidden


def test_plan_describes_every_option(csb, rootfs, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    f = tmp_path / "file"
    f.write_text("12345")
    args = ["--rootfs", rootfs, "--writable", "--uid", "0", "--gid", "10",
            "--hostname", "planned", "--net", "host", "--chdir", "/etc",
            "--ro-bind", str(src), "/mnt/a/b", "--bind", str(src), "/mnt/rw",
            "--ro-bind-try", str(src), "/mnt/try", "--tmpfs", "/mnt/a", "--dir", "/newdir",
            "--symlink", "/target", "/link", "--file", str(f), "/etc/copied",
            "--setenv", "K", "V", "--seccomp", "strict", "--", "/probe", "report", "x"]
    plan = csb.plan(args)
    assert plan["root"]["kind"] == "dir"
    assert plan["root"]["path"] in (rootfs, os.path.realpath(rootfs))
    assert plan["root"]["writable"] is True
    assert set(plan["namespaces"]) == ALL_NS - {"net"}
    assert plan["net"] == "host"
    assert plan["hostname"] == "planned"
    assert plan["cwd"] == "/etc"
    assert plan["argv"] == ["/probe", "report", "x"]
    assert plan["seccomp"]["profile"] == "strict"
    assert (plan["ids"]["uid"], plan["ids"]["gid"]) == (0, 10)
    assert (plan["ids"]["host_uid"], plan["ids"]["host_gid"]) == (os.getuid(), os.getgid())
    assert {"name": "K", "value": "V"} in plan["env"]

    ro = _find(plan, "bind", "/mnt/a/b")
    assert ro["source"] == str(src) and ro["readonly"] is True and ro["optional"] is False
    rw = _find(plan, "bind", "/mnt/rw")
    assert rw["readonly"] is False
    assert _find(plan, "bind", "/mnt/try")["optional"] is True
    assert _find(plan, "tmpfs", "/mnt/a")
    d = _find(plan, "dir", "/newdir")
    assert d["mode"] == "0755"
    assert _find(plan, "symlink", "/link")["source"] == "/target"
    copied = _find(plan, "file", "/etc/copied")
    assert copied["size"] == 5 and copied["source"] == str(f)
    assert copied["readonly"] is True

    dests = [m["dest"] for m in plan["mounts"]]
    depths = [_depth(d) for d in dests]
    assert depths == sorted(depths), f"parents not before children: {dests}"
    # Command-line order among equal depths.
    assert dests.index("/mnt/rw") < dests.index("/mnt/try") < dests.index("/mnt/a")


def test_plan_with_seccomp_file_names_it(csb):
    plan = csb.plan(["--seccomp", "/usr/share/containers/seccomp.json", "--", "/bin/true"])
    assert plan["seccomp"] == {"profile": "file", "path": "/usr/share/containers/seccomp.json"}
    plan = csb.plan(["--seccomp", "none", "--", "/bin/true"])
    assert plan["seccomp"]["profile"] == "none"


def test_plan_creates_nothing(csb, make_rootfs, tmp_path):
    bare = make_rootfs("bare")
    src = tmp_path / "src"
    src.mkdir()
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    before = rootfs_builder.snapshot(bare)
    p = csb.run(["--plan", "--rootfs", bare, "--writable", "--dir", "/made", "--bind", str(src),
                 "/mnt/x", "--tmpfs", "/opt/t", "--", "/probe", "write", "/made/x"], cwd=cwd)
    assert p.returncode == 0, p.stderr
    assert rootfs_builder.snapshot(bare) == before
    assert os.listdir(src) == [] and os.listdir(cwd) == []
    assert p.stdout.lstrip().startswith("{")


def test_plan_names_the_network_helper_that_will_run(csb, tmp_path):
    """pasta when installed; slirp4netns where only it is (the switch is in the plan, not a
    surprise at launch); null when neither is, and the launch then fails saying so."""
    plan = csb.plan(["--net", "pasta", "--", "/bin/true"])
    assert os.path.basename(plan["net_helper"]) == "pasta", plan["net_helper"]
    only_slirp = tmp_path / "bin"
    only_slirp.mkdir()
    (only_slirp / "slirp4netns").symlink_to("/usr/bin/slirp4netns")
    env = dict(os.environ, PATH=str(only_slirp))
    plan = csb.plan(["--net", "pasta", "--", "/bin/true"], env=env)
    assert plan["net_helper"] == str(only_slirp / "slirp4netns")
    plan = csb.plan(["--net", "pasta", "--", "/bin/true"], env=dict(os.environ, PATH=str(tmp_path)))
    assert plan["net_helper"] is None
    r = csb.run(["--net", "pasta", "--", "/bin/true"], env=dict(os.environ, PATH=str(tmp_path)))
    assert r.returncode == 125 and "neither pasta nor slirp4netns" in r.stderr
    assert "net_helper" not in csb.plan(["--", "/bin/true"])


def test_exec_gives_home_unless_unset(csb):
    """HOME as bubblewrap and podman give it: the caller's path (an empty tmpfs inside on the
    embedded default); --unsetenv HOME removes it."""
    home = pwd.getpwuid(os.getuid()).pw_dir
    env = dict(os.environ, HOME=home)
    r = csb.run(["--", "/bin/sh", "-c", 'echo "$HOME"; ls -A "$HOME" | wc -l'], env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [home, "0"]
    r = csb.run(["--unsetenv", "HOME", "--", "/bin/sh", "-c", 'echo "${HOME-unset}"'], env=env)
    assert r.stdout.strip() == "unset"
