"""`csandbox podman|docker pull|build|images|rmi|inspect|tag`: podman's image commands on
csandbox's own store, and the read-only stores of CSANDBOX_READONLY_STORE.

The contract tested:
  pull REF [--tls-verify=false] [-q] [--policy always|missing]: stdout the image ID (the
      store digest's 64 hex), as podman prints it;
  build [-t NAME]... [-f FILE] [--build-arg K=V] [--target S] [--no-cache] [--pull]
      [--network none|host] [-q] [CONTEXT]: stdout ends with the image ID;
  images [-q] [-a] [-n] [--no-trunc] [--format TEMPLATE|json]: podman's columns REPOSITORY TAG
      IMAGE ID CREATED SIZE, plus R/O (true/false) when a read-only store is in use;
  rmi [-f] [-i] NAME...: "Untagged: NAME" / "Deleted: ID"; by ID with several names only -f;
  inspect [-f TEMPLATE] NAME...: a JSON array (Id, RepoTags, Config, Created, Size,
      Architecture, Os, ...);
  tag SRC NEW...;
  an unknown option: exit 125, "Error: unknown flag: OPT"; an unknown image: exit 125,
      "Error: NAME: image not known".
CSANDBOX_READONLY_STORE (colon-separated store directories, each like
${XDG_DATA_HOME}/csandbox/images): looked in after the writable store by exec --image, build
FROM, inspect, pull --missing; listed R/O; rmi/tag refused; never written (its checksum
listing stays the same); a symlink, a non-store or a directory of another owner is skipped
with one warning line naming it."""
import hashlib
import json
import os
import re
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "fixtures"))

import test_build  # noqa: E402
import oci  # noqa: E402
from conftest import CSANDBOX, wait_until  # noqa: E402
from test_build import bb_layout, registry, write_context  # noqa: E402,F401

TIMEOUT = 180
HEX64 = re.compile(r"^[0-9a-f]{64}$")
HEADER = ["REPOSITORY", "TAG", "IMAGE ID", "CREATED", "SIZE"]


class Store(test_build.Store):
    def pod(self, *args, prog="podman", env=None, timeout=TIMEOUT):
        return self.run(prog, *args, env=env, timeout=timeout)

    def pod_ok(self, *args, **kw):
        p = self.pod(*args, **kw)
        assert p.returncode == 0, f"exit {p.returncode}\nstderr:\n{p.stderr}\nstdout:\n{p.stdout}"
        return p


@pytest.fixture
def store(tmp_path, bb_layout):  # noqa: F811
    """A store of its own holding the busybox image as `bb`."""
    s = Store(str(tmp_path / "store"))
    s.ok("image", "import", bb_layout, "--name", "bb", "--quiet")
    return s


def table(stdout):
    """podman's table: the header's columns and each row split on runs of 2+ spaces (the
    CREATED column has single spaces)."""
    lines = stdout.rstrip("\n").splitlines()
    return (re.split(r"\s{2,}", lines[0].strip()),
            [re.split(r"\s{2,}", l.strip()) for l in lines[1:]])


def listing(root):
    """Every entry under root: path, type and mode, owner, size, mtime, content digest."""
    out = []
    for dirpath, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(dirs + files) + ([] if dirpath != root else ["."]):
            p = os.path.join(dirpath, name) if name != "." else root
            st = os.lstat(p)
            digest = None
            if os.path.isfile(p) and not os.path.islink(p):
                try:
                    with open(p, "rb") as f:
                        digest = hashlib.sha256(f.read()).hexdigest()
                except PermissionError:
                    digest = "unreadable"
            out.append((os.path.relpath(p, root), st.st_mode, st.st_uid, st.st_size,
                        st.st_mtime_ns, digest))
    return out


# --- the image commands ------------------------------------------------------------------

def test_pull_prints_the_id_and_images_lists_it(store, registry):  # noqa: F811
    ref = f"{registry.host}/test/bb:v1"
    p = store.pod_ok("pull", "--tls-verify=false", "-q", ref)
    digest = store.names()[ref]
    assert p.stdout == digest[7:] + "\n"
    cols, rows = table(store.pod_ok("images").stdout)
    assert cols == HEADER, cols
    row = [r for r in rows if r[0] == f"{registry.host}/test/bb"]
    assert len(row) == 1 and row[0][1] == "v1" and row[0][2] == digest[7:19], rows
    assert row[0][4].endswith("B"), row  # a size with its unit
    # without -q the helper's line goes to stderr, the ID still alone on stdout
    p = store.pod_ok("pull", "--tls-verify=false", ref, prog="docker")
    assert p.stdout == digest[7:] + "\n" and "already stored" in p.stderr, p.stderr


def test_images_quiet_format_and_json(store):
    names = store.names()
    bb = names["bb:latest"]
    assert store.pod_ok("images", "-q").stdout == bb[7:19] + "\n"
    assert store.pod_ok("images", "-a", "--no-trunc", "-q").stdout == bb + "\n"
    p = store.pod_ok("images", "--format", "{{.Repository}}:{{.Tag}}")
    assert p.stdout == "bb:latest\n"
    p = store.pod_ok("images", "--format", "table {{.Repository}}\\t{{.ID}}")
    assert p.stdout == f"REPOSITORY\tIMAGE ID\nbb\t{bb[7:19]}\n"
    j = json.loads(store.pod_ok("images", "--format", "json").stdout)
    assert [(i["Names"], i["Id"], i["ReadOnly"]) for i in j] == [(["bb:latest"], bb[7:], False)]
    cols, rows = table(store.pod_ok("images").stdout)
    assert cols == HEADER and rows[0][:3] == ["bb", "latest", bb[7:19]], (cols, rows)
    p = store.pod("images", "--format", "{{.Nope}}")
    assert p.returncode == 125 and "Nope" in p.stderr


def test_tag_then_exec_image_runs_the_new_name(store):
    store.pod_ok("tag", "bb", "mine:v2", "localhost/other")
    names = store.names()
    assert names["mine:v2"] == names["bb:latest"] == names["localhost/other:latest"]
    for name in ("mine:v2", "localhost/other"):
        p = store.ok("exec", "--image", name, "--net", "none", "--", "/bin/sh", "-c",
                     "echo $FIXTURE")
        assert p.stdout == "bb\n"
    # by short ID too
    store.pod_ok("tag", names["bb:latest"][7:19], "byid")
    assert store.names()["byid:latest"] == names["bb:latest"]
    p = store.pod("tag", "nope", "x")
    assert p.returncode == 125 and "Error: nope: image not known" in p.stderr
    assert "x:latest" not in store.names()


def test_rmi_untags_deletes_and_refuses_what_podman_refuses(store):
    digest = store.names()["bb:latest"]
    store.pod_ok("tag", "bb", "extra")
    p = store.pod_ok("rmi", "extra")
    assert p.stdout == "Untagged: extra:latest\n"
    assert store.names() == {"bb:latest": digest}
    p = store.pod("rmi", "nope")
    assert p.returncode == 125 and "Error: nope: image not known" in p.stderr
    assert store.pod_ok("rmi", "-i", "nope").stdout == ""
    # by ID with two names: only forced
    store.pod_ok("tag", "bb", "extra")
    p = store.pod("rmi", digest[7:19])
    assert p.returncode == 125 and "force" in p.stderr
    assert len(store.names()) == 2
    p = store.pod_ok("rmi", "-f", digest[7:19])
    assert f"Deleted: {digest[7:]}" in p.stdout
    assert store.names() == {}
    assert os.listdir(os.path.join(store.images, "sha256")) == []


def test_inspect_is_a_json_array_with_podmans_fields(store):
    digest = store.names()["bb:latest"]
    p = store.pod_ok("inspect", "bb")
    j = json.loads(p.stdout)
    assert isinstance(j, list) and len(j) == 1
    i = j[0]
    assert i["Id"] == digest[7:] and i["RepoTags"] == ["bb:latest"]
    assert "FIXTURE=bb" in i["Config"]["Env"] and i["Config"]["Cmd"] == ["/bin/sh"]
    assert re.match(r"^\d{4}-\d\d-\d\dT", i["Created"]), i["Created"]
    assert i["Size"] > 0 and i["Os"] == "linux" and i["Architecture"]
    assert i["RootFS"]["diff_ids"] == store.inspect("bb")["rootfs"]["diff_ids"]
    p = store.pod_ok("inspect", "-f", "{{.Id}} {{.Config.Cmd}} {{json .RepoTags}}", "bb")
    assert p.stdout == f'{digest[7:]} [/bin/sh] ["bb:latest"]\n'
    p = store.pod("inspect", "bb", "nope")
    assert p.returncode == 125 and "Error: nope: image not known" in p.stderr
    assert [x["Id"] for x in json.loads(p.stdout)] == [digest[7:]]


def test_build_then_exec_image_runs_the_built_name(store, tmp_path):
    ctx = write_context(tmp_path / "ctx", {
        "Containerfile": "FROM bb\nCOPY hello.txt /srv/hello.txt\nRUN echo built > /built\n",
        "hello.txt": "hello from the context\n"})
    p = store.pod_ok("build", "-t", "built:v1", "--network", "none", "-q", str(ctx))
    assert HEX64.match(p.stdout.strip()) and p.stdout.count("\n") == 1, p.stdout
    assert store.names()["built:v1"] == "sha256:" + p.stdout.strip()
    p = store.ok("exec", "--image", "built:v1", "--net", "none", "--", "/bin/sh", "-c",
                 "cat /built /srv/hello.txt")
    assert p.stdout == "built\nhello from the context\n"
    # not quiet: the steps on stderr, the ID alone on stdout; the step cached now
    p = store.pod_ok("build", "--tag=again", "--network=none", str(ctx), prog="docker")
    assert p.stdout == store.names()["again:latest"][7:] + "\n"
    assert "STEP 3/3: RUN echo built > /built" in p.stderr and "Using cache" in p.stderr


@pytest.mark.parametrize("args,flag", [
    (["images", "--filter", "dangling=true"], "--filter"),
    (["build", "--squash", "."], "--squash"),
    (["pull", "--creds", "a:b", "x"], "--creds"),
    (["rmi", "--all"], "--all"),
    (["inspect", "--size", "bb"], "--size"),
    (["tag", "-x", "bb", "y"], "-x"),
])
def test_an_unsupported_option_is_named_and_exits_125(store, args, flag):
    before = store.names()
    p = store.pod(*args)
    assert p.returncode == 125, p
    assert f"Error: unknown flag: {flag}" in p.stderr, p.stderr
    assert store.names() == before


# --- read-only stores --------------------------------------------------------------------

@pytest.fixture
def host_store(tmp_path, bb_layout):  # noqa: F811
    """The "host's" store (bb, and a tagged name), and an empty session store whose
    environment names the host's as read-only."""
    host = Store(str(tmp_path / "host"))
    host.ok("image", "import", bb_layout, "--name", "bb", "--quiet")
    host.ok("podman", "tag", "bb", "hosttag:v1")
    sess = Store(str(tmp_path / "session"))
    sess.ro_env = sess.env(CSANDBOX_READONLY_STORE=host.images)
    return host, sess


def test_a_read_only_store_is_looked_in_listed_and_never_changed(host_store, tmp_path):
    host, sess = host_store
    env = sess.ro_env
    before = listing(host.images)
    digest = host.names()["bb:latest"]
    # lookups: exec --image, inspect, images
    p = sess.run("exec", "--image", "hosttag:v1", "--net", "none", "--", "/bin/sh", "-c",
                 "echo $FIXTURE", env=env)
    assert p.returncode == 0 and p.stdout == "bb\n", p.stderr
    assert p.stderr == ""
    i = json.loads(sess.pod_ok("inspect", "bb", env=env).stdout)[0]
    assert i["Id"] == digest[7:] and i["ReadOnly"] is True and i["Store"] == host.images
    cols, rows = table(sess.pod_ok("images", env=env).stdout)
    assert cols == HEADER + ["R/O"], cols
    assert sorted((r[0], r[1], r[-1]) for r in rows) == [("bb", "latest", "true"),
                                                         ("hosttag", "v1", "true")]
    ls = json.loads(sess.ok("image", "ls", "--json", env=env).stdout)
    assert {(x["name"], x["read_only"], x["store"]) for x in ls} == {
        ("bb:latest", True, host.images), ("hosttag:v1", True, host.images)}
    assert "R/O" in sess.ok("image", "ls", env=env).stdout
    # what would change it is refused, and nothing changes
    for args in (("podman", "rmi", "bb"), ("image", "rm", "bb"), ("podman", "rmi", "-f", "bb"),
                 ("podman", "tag", "bb", "new")):
        p = sess.run(*args, env=env)
        assert p.returncode == 125, (args, p)
        assert "read-only store" in p.stderr and host.images in p.stderr, p.stderr
    sess.ok("image", "prune", env=env)
    # a build FROM the read-only store's image: its layers stay there, the new ones come here
    ctx = write_context(tmp_path / "ctx", {"Containerfile": "FROM bb\nRUN echo on-top > /x\n"})
    sess.pod_ok("build", "-t", "ontop", "--network", "none", "-q", str(ctx), env=env)
    p = sess.run("exec", "--image", "ontop", "--net", "none", "--", "/bin/sh", "-c",
                 "cat /x; echo $FIXTURE", env=env)
    assert p.returncode == 0 and p.stdout == "on-top\nbb\n", p.stderr
    # the session's store holds the built image and its one new layer only
    assert set(sess.names()) == {"ontop:latest"}
    base = host.inspect("bb")["rootfs"]["diff_ids"]
    assert not set(os.listdir(os.path.join(sess.images, "layers", "sha256"))) & \
        {d[7:] for d in base}
    # the session's own name shadows the host's; rmi of it leaves the host's
    sess.pod_ok("tag", "ontop", "bb", env=env)
    assert sess.run("exec", "--image", "bb", "--net", "none", "--", "/bin/cat", "/x",
                    env=env).stdout == "on-top\n"
    sess.pod_ok("rmi", "bb", env=env)
    i = json.loads(sess.pod_ok("inspect", "bb", env=env).stdout)[0]
    assert i["ReadOnly"] is True
    assert listing(host.images) == before


def test_pull_missing_counts_a_read_only_stores_image(host_store, registry):  # noqa: F811
    host, sess = host_store
    ref = f"{registry.host}/test/bb:v1"
    host.ok("image", "pull", "--tls-verify=false", "--quiet", ref)
    before = listing(host.images)
    # the registry is not asked: a name the registry does not have is "stored" all the same
    p = sess.run("image", "pull", "--missing", "--tls-verify=false", ref, env=sess.ro_env)
    assert p.returncode == 0 and "read-only store" in p.stdout, p
    p = sess.pod_ok("pull", "--policy=missing", "--tls-verify=false", ref, env=sess.ro_env)
    assert p.stdout.strip() == host.names()[ref][7:]
    assert sess.names() == {}
    # without --missing the session pulls into its own store
    sess.pod_ok("pull", "--tls-verify=false", "-q", ref, env=sess.ro_env)
    assert list(sess.names()) == [ref]
    assert listing(host.images) == before


def test_entries_that_are_no_usable_store_are_skipped_with_one_warning_each(host_store,
                                                                             tmp_path):
    host, sess = host_store
    link = tmp_path / "link"
    os.symlink(host.images, link)
    plain = tmp_path / "plain"
    plain.mkdir()
    env = sess.env(CSANDBOX_READONLY_STORE=f"{link}:{plain}:/:relative")
    p = sess.pod("images", "-q", env=env)
    assert p.returncode == 0 and p.stdout == ""
    warnings = p.stderr.splitlines()
    assert len(warnings) == 4, p.stderr
    for w, name, why in zip(warnings, (link, plain, "/", "relative"),
                            ("symlink", "not a csandbox image store", "not owned by you",
                             "absolute")):
        assert "CSANDBOX_READONLY_STORE" in w and f"`{name}`" in w and why in w, w
    # a usable entry after them still counts
    env = sess.env(CSANDBOX_READONLY_STORE=f"{plain}:{host.images}")
    p = sess.pod_ok("images", "--format", "{{.Repository}} {{.ReadOnly}}", env=env)
    assert sorted(p.stdout.splitlines()) == ["bb true", "hosttag true"]


def test_inside_a_session_the_hosts_store_bound_read_only_serves_images(host_store, tmp_path):
    """The host's store bound read-only into a csandbox session (--ro-bind), the session's
    own store writable: exec --image, podman images and a build with a RUN step inside (no
    newuidmap there: the build's single-id fallback)."""
    host, sess = host_store
    before = listing(host.images)
    bindir = os.path.dirname(CSANDBOX)
    ctx = write_context(tmp_path / "ctx", {"Containerfile": "FROM hosttag:v1\n"
                                                            "RUN echo nested > /n\n"})
    inner = ("set -e\n"
             f"{CSANDBOX} exec --image hosttag:v1 --net none -- /bin/sh -c 'echo $FIXTURE'\n"
             f"{CSANDBOX} podman images --format '{{{{.Repository}}}}:{{{{.Tag}}}} "
             "{{.ReadOnly}}'\n"
             f"{CSANDBOX} podman build -q -t nested --network none {ctx} >/dev/null\n"
             f"{CSANDBOX} exec --image nested --net none -- /bin/cat /n\n"
             "touch /run/host-store/x 2>/dev/null && echo WRITABLE || true\n")
    argv = [CSANDBOX, "exec", "--ro-bind", bindir, bindir,
            "--ro-bind", host.images, "/run/host-store",
            "--bind", str(tmp_path), str(tmp_path),
            "--setenv", "CSANDBOX_READONLY_STORE", "/run/host-store",
            "--setenv", "XDG_DATA_HOME", sess.data,
            "--setenv", "HOME", sess.home,
            "--", "/bin/sh", "-c", inner]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT,
                       env=sess.env(), stdin=subprocess.DEVNULL)
    assert p.returncode == 0, f"exit {p.returncode}\nstderr:\n{p.stderr}\nstdout:\n{p.stdout}"
    assert p.stdout.splitlines() == ["bb", "bb:latest true", "hosttag:v1 true", "nested"], \
        p.stdout
    assert "WRITABLE" not in p.stdout
    assert "CSANDBOX_READONLY_STORE" not in p.stderr, p.stderr
    assert listing(host.images) == before
    assert set(sess.names()) == {"nested:latest"}


# --- a session's locks --------------------------------------------------------------------

HOLD_EVERYTHING = r"""
import fcntl, os, sys, time
root, ready, stop = sys.argv[1:]
held, fds = [], []
for d, dirs, files in os.walk(root):
    for p in [d] + [os.path.join(d, f) for f in files]:
        try:
            fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue
        fds.append(fd)
        held.append(os.path.relpath(p, root))
with open(ready + ".tmp", "w") as f:
    f.write("\n".join(held))
os.rename(ready + ".tmp", ready)
while not os.path.exists(stop):
    time.sleep(0.05)
"""


def test_a_session_holding_every_lock_it_can_take_in_the_store_stalls_no_host_command(
        host_store, tmp_path, bb_layout):  # noqa: F811
    """A program in a session, with the host's store bound read-only as sessions get it,
    takes an exclusive flock on every file and directory it can open there (flock works on a
    read-only bind), including the lock files an earlier version kept inside the store. The
    host's import, tag, launch and rm of another image finish as without it: their locks are
    beside the store, where no session sees them. A launch of an image the session holds
    waits a bounded time and names the holding process, and works once it let go."""
    host, _ = host_store
    # the lock files of the earlier layout, as an older store has them
    open(os.path.join(host.images, ".lock"), "w").close()
    os.makedirs(os.path.join(host.images, "locks"), exist_ok=True)
    open(os.path.join(host.images, "locks", "layer-" + "0" * 64), "w").close()
    work = str(tmp_path / "attack")
    os.makedirs(work)
    script = os.path.join(work, "hold.py")
    with open(script, "w") as f:
        f.write(HOLD_EVERYTHING)
    ready, stop = os.path.join(work, "ready"), os.path.join(work, "stop")
    session = subprocess.Popen(
        [CSANDBOX, "exec", "--ro-bind", host.images, "/run/host-store",
         "--bind", work, work, "--", "python3", script, "/run/host-store", ready, stop],
        env=host.env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        assert wait_until(lambda: os.path.exists(ready) or session.poll() is not None, 60)
        assert session.poll() is None, session.communicate()
        with open(ready) as f:
            held = f.read().split("\n")
        assert {".", "names.json", ".lock", "sha256"} <= set(held), held
        assert any(h.startswith("layers/sha256/") for h in held), held
        # a second image, with layers of its own
        base = os.path.join(os.path.dirname(bb_layout), "busybox-rootfs")
        second = str(tmp_path / "second")
        oci.write_layout(second, [oci.Layer(oci.entries_from_dir(base) +
                                            [oci.file("marker", "second\n")])],
                         config={"Env": ["PATH=/bin"]})
        host.ok("image", "import", second, "--name", "second", "--quiet")
        host.ok("podman", "tag", "second", "second:v2")
        p = host.ok("exec", "--image", "second:v2", "--net", "none", "--", "/bin/cat",
                    "/marker")
        assert p.stdout == "second\n"
        host.ok("image", "rm", "second:v2")
        host.ok("image", "rm", "second")
        # the held image: refused, naming the holder, instead of a wait without end
        p = host.run("exec", "--image", "bb", "--net", "none", "--", "/bin/true")
        assert p.returncode == 125, p.stderr
        assert "locked exclusively by process" in p.stderr and "(python3)" in p.stderr, \
            p.stderr
    finally:
        open(stop, "w").close()
        out = session.communicate(timeout=TIMEOUT)
    assert session.returncode == 0, out
    p = host.ok("exec", "--image", "bb", "--net", "none", "--", "/bin/sh", "-c",
                "echo $FIXTURE")
    assert p.stdout == "bb\n"
