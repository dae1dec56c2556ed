"""An srt settings file as egress entries (exec --egress-file, run's
CLAUDE_PROFILE_SANDBOX_EGRESS_FILE): network.allowedDomains and network.deniedDomains as
they are, and never a file the session can write."""
import json
import os
import shutil
import subprocess
import time

from conftest import base_env, parse_json
from test_run import Profiles


def test_an_srt_file_gives_entries_and_must_be_out_of_the_sessions_reach(csb, tmp_path):
    srt = tmp_path / "srt-settings.json"
    srt.write_text(json.dumps({"network": {"allowedDomains": ["*.csandbox.test", "github.com"],
                                           "deniedDomains": ["b.csandbox.test"]},
                               "filesystem": {"denyRead": ["~/.ssh"]}}))
    eg = parse_json(csb.run(["--plan", "--egress", "allowlist", "--egress-file", str(srt),
                             "--", "true"]))["egress"]
    assert [h["host"] for h in eg["allow"] if not h.get("builtin")] == \
        ["*.csandbox.test", "github.com"]
    assert [h["host"] for h in eg["deny"]] == ["b.csandbox.test"]
    rw = tmp_path / "rw"
    rw.mkdir()
    shutil.copy(srt, rw / "srt.json")
    r = csb.run(["--plan", "--egress", "allowlist", "--bind", str(rw), "/mnt/rw",
                 "--egress-file", str(rw / "srt.json"), "--", "true"])
    assert r.returncode == 125 and "the session can write it" in r.stderr, r.stderr
    r = csb.run(["--plan", "--egress", "allowlist", "--ro-bind", str(rw), "/mnt/rw",
                 "--egress-file", str(rw / "srt.json"), "--", "true"])
    assert r.returncode == 0, r.stderr
    for bad in ({"network": {"allowedDomains": "x.com"}}, {"network": {"allowedDomains": [1]}},
                {"sandbox": {}}, {"network": {"allowedDomains": ["bad domain"]}}):
        srt.write_text(json.dumps(bad))
        r = csb.run(["--plan", "--egress", "allowlist", "--egress-file", str(srt), "--", "true"])
        assert r.returncode == 125 and "--egress-file" in r.stderr, r.stderr


def test_run_takes_an_srt_file_outside_the_work_tree_and_refuses_one_inside(tmp_path):
    profiles = Profiles(tmp_path)
    profiles.add()
    policy = {"network": {"allowedDomains": ["a.csandbox.test"], "deniedDomains": []}}
    outside = tmp_path / "srt.json"
    outside.write_text(json.dumps(policy))
    plan = profiles.plan(env=profiles.env(CLAUDE_PROFILE_SANDBOX_EGRESS="allowlist",
                                          CLAUDE_PROFILE_SANDBOX_EGRESS_FILE=str(outside)))
    sandbox = plan.get("sandbox", plan)
    assert "a.csandbox.test" in [h["host"] for h in sandbox["egress"]["allow"]]
    inside = profiles.project / ".srt-settings.json"
    inside.write_text(json.dumps(policy))
    r = profiles.run(cmd="plan", env=profiles.env(CLAUDE_PROFILE_SANDBOX_EGRESS="allowlist",
                                                  CLAUDE_PROFILE_SANDBOX_EGRESS_FILE=str(inside)))
    assert r.returncode == 125 and "the session can write it" in r.stderr, r.stderr
    r = profiles.run(cmd="plan", env=profiles.env(CLAUDE_PROFILE_SANDBOX_EGRESS_FILE=str(outside)))
    assert r.returncode == 125 and "CLAUDE_PROFILE_SANDBOX_EGRESS" in r.stderr, r.stderr


# What a session writes to widen the next launch's list, and what it must never reach.
WIDER = json.dumps({"network": {"allowedDomains": ["exfil.csandbox.test"]}})
OURS = json.dumps({"network": {"allowedDomains": ["a.csandbox.test"]}})


def refused(r, path, started, why, fix="e.g. ~/.config"):
    """A launch refused before anything ran: exit 125, the file, the reason and the fix
    named."""
    assert r.returncode == 125, (r.returncode, r.stderr)
    assert str(path) in r.stderr and why in r.stderr and fix in r.stderr, r.stderr
    assert not started.exists(), "the payload ran"


def launch(srt, out, *opts):
    """exec with the file and a payload that leaves a mark on the host if it ever starts."""
    return ["--egress", "allowlist", *opts, "--bind", str(out), "/mnt/out", "--egress-file",
            str(srt), "--", "touch", "/mnt/out/started"]


def test_a_hard_link_anywhere_refuses_the_file(csb, tmp_path):
    """The user's file outside the work tree, with a second link inside a read-write bind:
    a session rewrites the list through the link, and the next launch refuses the file."""
    cfg, rw, out = tmp_path / "cfg", tmp_path / "rw", tmp_path / "out"
    for d in (cfg, rw, out):
        d.mkdir()
    srt = cfg / "srt.json"
    srt.write_text(OURS)
    (rw / "srt.json").hardlink_to(srt)
    r = csb.run(["--bind", str(rw), "/mnt/rw", "--", "sh", "-c",
                 f"printf '%s' '{WIDER}' > /mnt/rw/srt.json"])
    assert r.returncode == 0 and srt.read_text() == WIDER, r.stderr
    r = csb.run(launch(srt, out, "--bind", str(rw), "/mnt/rw"))
    refused(r, srt, out / "started", "has 2 links")
    # refused without the bind too: the other link may be in any session's reach
    r = csb.run(launch(srt, out))
    refused(r, srt, out / "started", "has 2 links")


def test_a_link_on_the_path_is_followed_and_what_it_reaches_is_judged(csb, tmp_path):
    """A dotfile manager's link (a linked file, a linked directory, a `..`) leads to the
    file, which is judged by what it is: a safe file launches; a link that leads into a
    read-write bind is refused, whatever its own name."""
    cfg, rw, out = tmp_path / "cfg", tmp_path / "rw", tmp_path / "out"
    for d in (cfg, rw, out):
        d.mkdir()
    srt = cfg / "srt.json"
    srt.write_text(OURS)
    (tmp_path / "dirlink").symlink_to(cfg)
    (tmp_path / "filelink.json").symlink_to(srt)
    for path in (tmp_path / "dirlink" / "srt.json", tmp_path / "filelink.json",
                 f"{cfg}/../cfg/srt.json"):
        (out / "started").unlink(missing_ok=True)
        r = csb.run(launch(path, out))
        assert r.returncode == 0 and (out / "started").exists(), (path, r.stderr)
    (out / "started").unlink()
    (rw / "srt.json").write_text(WIDER)
    (tmp_path / "into-rw.json").symlink_to(rw / "srt.json")
    r = csb.run(launch(tmp_path / "into-rw.json", out, "--bind", str(rw), "/mnt/rw"))
    assert r.returncode == 125 and str(tmp_path / "into-rw.json") in r.stderr, r.stderr
    assert not (out / "started").exists()


# Run inside `unshare -Urm`: binds of the session's writable directory made on the host
# side, then csandbox (nested in that namespace) given the file through each.
NESTED = r"""
set -u
csb=$1 t=$2
mount --bind "$t/rw/sub" "$t/other"
mount --bind "$t/rw" "$t/same"
mount --bind "$t/rw/one.json" "$t/cfg/one.json"
# the attack: a session with the read-write bind rewrites the files under it
"$csb" exec --bind "$t/rw" /mnt/rw -- sh -c \
  'for f in /mnt/rw/sub/srt.json /mnt/rw/two.json /mnt/rw/one.json; do cat /mnt/rw/wider > $f; done' \
  || exit 99
for f in "$t/other/srt.json" "$t/same/two.json" "$t/same/sub/srt.json" "$t/cfg/one.json"; do
  "$csb" exec --egress allowlist --bind "$t/rw" /mnt/rw --bind "$t/out" /mnt/out \
    --egress-file "$f" -- touch /mnt/out/started
  echo "rc $?"
done
"$csb" exec --egress allowlist --ro-bind "$t/rw" /mnt/rw --bind "$t/out" /mnt/out \
  --egress-file "$t/other/srt.json" -- touch /mnt/out/control
echo "rc $?"
"""


def test_a_second_mount_of_a_writable_directory_refuses_the_file(csb, tmp_path):
    """The same directory at a second place (the file's directory, or one above it), a
    subdirectory bound elsewhere, a file bound elsewhere: each is the session's to write
    and is refused; with the directory bound read-only it is taken."""
    rw, out = tmp_path / "rw", tmp_path / "out"
    for d in (rw / "sub", out, tmp_path / "other", tmp_path / "same", tmp_path / "cfg"):
        d.mkdir(parents=True)
    for f in (rw / "sub" / "srt.json", rw / "two.json", rw / "one.json",
              tmp_path / "cfg" / "one.json"):
        f.write_text(OURS)
    (rw / "wider").write_text(WIDER)
    r = subprocess.run(["unshare", "-Urm", "--propagation", "private", "sh", "-c", NESTED,
                        "sh", csb.binary, str(tmp_path)], capture_output=True, text=True,
                       timeout=120, env=base_env(), stdin=subprocess.DEVNULL)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert (rw / "sub" / "srt.json").read_text() == WIDER, "the attack did not run"
    assert r.stdout.split("\n")[:5] == ["rc 125"] * 4 + ["rc 0"], (r.stdout, r.stderr)
    assert not (out / "started").exists(), "a payload ran"
    assert (out / "control").exists(), "the launch with the directory read-only did not run"
    errs = [l for l in r.stderr.splitlines() if "--egress-file" in l]
    assert len(errs) == 4, r.stderr
    for path, err in zip(("other/srt.json", "same/two.json", "same/sub/srt.json",
                          "cfg/one.json"), errs):
        assert f"{tmp_path}/{path}" in err and f"it lies in {rw}" in err, err
        assert "e.g. ~/.config" in err, err
    assert f"{tmp_path}/other shows a directory inside it" in errs[0], errs[0]
    assert f"{tmp_path}/cfg/one.json shows a directory inside it" in errs[3], errs[3]


def test_run_refuses_a_file_with_a_link_in_the_work_tree(tmp_path):
    profiles = Profiles(tmp_path)
    profiles.add()
    outside = tmp_path / "srt.json"
    outside.write_text(OURS)
    (profiles.project / ".srt-settings.json").hardlink_to(outside)
    r = profiles.run(cmd="plan", env=profiles.env(CLAUDE_PROFILE_SANDBOX_EGRESS="allowlist",
                                                  CLAUDE_PROFILE_SANDBOX_EGRESS_FILE=str(outside)))
    assert r.returncode == 125, r.stderr
    assert str(outside) in r.stderr and "has 2 links" in r.stderr, r.stderr


def open_files(pid):
    names = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            names.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass  # closed meanwhile
    return names


def test_the_list_is_the_opened_files_whatever_is_put_at_its_path_later(csb, tmp_path):
    """csandbox holds the file open from the read to the judgement: one swapped in at the
    same path meanwhile (held up here by --env-fd, read after the file) is neither read nor
    judged."""
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    srt = cfg / "srt.json"
    srt.write_text(OURS)
    rfd, wfd = os.pipe()
    proc = subprocess.Popen([csb.binary, "exec", "--plan", "--egress", "allowlist",
                             "--egress-file", str(srt), "--env-fd", str(rfd), "--", "true"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, env=base_env(), pass_fds=(rfd,))
    os.close(rfd)
    try:
        # once csandbox holds the file, another takes its name
        for _ in range(2000):
            if str(srt) in open_files(proc.pid):
                break
            assert proc.poll() is None, proc.stderr.read().decode()
            time.sleep(0.005)
        else:
            raise AssertionError("csandbox never opened the file")
        (cfg / "new.json").write_text(WIDER)
        os.rename(cfg / "new.json", srt)
    finally:
        os.close(wfd)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()
    eg = json.loads(out)["egress"]
    assert [h["host"] for h in eg["allow"] if not h.get("builtin")] == ["a.csandbox.test"]
