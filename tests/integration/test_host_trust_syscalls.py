"""Host trust in the session's seccomp filter: a session writes the work tree and the
profile dir, which the host's git and claude read afterwards. A file there never gets a
second name (link and linkat fail with EXDEV, on which tools fall back to a rename or a
copy), and never a setuid or setgid bit (every call that sets a mode refuses one with EPERM;
openat2, whose mode the filter cannot read, is ENOSYS). Each attack runs as a program inside
`csandbox run` or `csandbox exec`; the host checks the files afterwards."""
import json
import os
import stat
import subprocess

import pytest

from conftest import CSANDBOX, TIMEOUT, base_env
from test_run import CFG_IN, Profiles, git, profiles, shell_claude  # noqa: F401

# Every way to a setuid or setgid file, then every way to a second name, each as the
# program inside makes it; prints {attack: errno name or "ok"} as JSON.
ATTACKS = r'''
import ctypes, errno, json, os, stat, sys
libc = ctypes.CDLL(None, use_errno=True)
out = {}

def attempt(name, fn):
    try:
        fn()
        out[name] = "ok"
    except OSError as e:
        out[name] = errno.errorcode.get(e.errno, str(e.errno))

def raw(nr, *args):
    def call():
        if libc.syscall(nr, *args) < 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
    return call

AT_FDCWD = -100
for d in sys.argv[1:]:
    os.chdir(d)
    pre = os.path.basename(d) + ":"
    for f in ("plain", "u", "g", "at2u", "at2g"):
        with open(f, "w") as fh:
            fh.write("x\n")
    attempt(pre + "chmod u+s", lambda: os.chmod("u", 0o4755))
    attempt(pre + "chmod g+s", lambda: os.chmod("g", 0o2755))
    attempt(pre + "fchmod u+s", lambda: os.fchmod(os.open("plain", os.O_RDONLY), 0o4755))
    attempt(pre + "fchmodat2 u+s", raw(452, AT_FDCWD, b"at2u", 0o4755, 0))
    attempt(pre + "fchmodat2 g+s", raw(452, AT_FDCWD, b"at2g", 0o2755, 0))
    attempt(pre + "open O_CREAT 04755", lambda: os.open("created", os.O_CREAT | os.O_WRONLY, 0o4755))
    attempt(pre + "open O_CREAT 02755", lambda: os.open("created2", os.O_CREAT | os.O_WRONLY, 0o2755))
    attempt(pre + "mkdir 02775", lambda: os.mkdir("shared", 0o2775))
    attempt(pre + "mknod S_IFREG|04755", lambda: os.mknod("node", stat.S_IFREG | 0o4755))
    # struct open_how {flags, mode, resolve}: O_CREAT|O_WRONLY, 04755
    how = (ctypes.c_uint64 * 3)(os.O_CREAT | os.O_WRONLY, 0o4755, 0)
    attempt(pre + "openat2 O_CREAT 04755", raw(437, AT_FDCWD, b"created3", ctypes.byref(how), 24))
    # what still works: a plain mode, and the sticky bit
    attempt(pre + "chmod 0755", lambda: os.chmod("plain", 0o755))
    attempt(pre + "mkdir 0775", lambda: os.mkdir("plaindir", 0o775))
    attempt(pre + "link", lambda: os.link("plain", "second-name"))
    attempt(pre + "linkat", lambda: os.link("plain", "third-name",
                                            src_dir_fd=os.open(".", os.O_RDONLY)))
print(json.dumps(out))
'''

SET_ID_ATTACKS = ["chmod u+s", "chmod g+s", "fchmod u+s", "fchmodat2 u+s", "fchmodat2 g+s",
                  "open O_CREAT 04755", "open O_CREAT 02755", "mkdir 02775",
                  "mknod S_IFREG|04755"]


def set_id_files(*roots):
    """Every path below roots with a setuid or setgid bit, and every non-directory with a
    second name."""
    found = []
    for root in roots:
        for d, dirs, files in os.walk(root):
            for name in dirs + files:
                p = os.path.join(d, name)
                st = os.lstat(p)
                if st.st_mode & (stat.S_ISUID | stat.S_ISGID):
                    found.append((p, oct(st.st_mode)))
                if not stat.S_ISDIR(st.st_mode) and st.st_nlink != 1:
                    found.append((p, "nlink %d" % st.st_nlink))
    return found


def check_attacks(got, dirs):
    for d in dirs:
        pre = os.path.basename(d) + ":"
        for name in SET_ID_ATTACKS:
            assert got[pre + name] == "EPERM", (pre + name, got)
        assert got[pre + "openat2 O_CREAT 04755"] == "ENOSYS", got
        assert got[pre + "link"] == "EXDEV", got
        assert got[pre + "linkat"] == "EXDEV", got
        assert got[pre + "chmod 0755"] == "ok", got
        assert got[pre + "mkdir 0775"] == "ok", got


def test_a_run_session_leaves_no_setuid_file_and_no_second_name_on_the_host(profiles):
    prof = profiles.add()
    work = profiles.project / "w"
    work.mkdir()
    # the script is read from the work tree: the host's bin dir is not in the session
    (work / "attacks.py").write_text(ATTACKS)
    shell_claude(profiles, f'mkdir -p "{CFG_IN}/p"\n'
                           f'exec python3 "$PWD/w/attacks.py" "$PWD/w" "{CFG_IN}/p"\n')
    r = profiles.run()
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    check_attacks(got, ["w", "p"])
    assert (prof / "p" / "plain").exists(), "the profile dir seen inside is not the host's"
    assert (work / "plain").stat().st_mode & 0o777 == 0o755
    assert set_id_files(work, prof) == []


def test_exec_with_the_default_profile_refuses_them_too_and_none_does_not(tmp_path):
    work = tmp_path / "w"
    work.mkdir()
    (tmp_path / "attacks.py").write_text(ATTACKS)
    argv = [CSANDBOX, "exec", "--bind", str(tmp_path), str(tmp_path), "--",
            "python3", str(tmp_path / "attacks.py"), str(work)]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT, env=base_env(),
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    check_attacks(json.loads(r.stdout), ["w"])
    assert set_id_files(work) == []

    # The control: unfiltered, the same program makes them (so the probe is not at fault).
    other = tmp_path / "other"
    other.mkdir()
    argv = [CSANDBOX, "exec", "--seccomp", "none", "--bind", str(tmp_path), str(tmp_path),
            "--", "python3", str(tmp_path / "attacks.py"), str(other)]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT, env=base_env(),
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["other:chmod u+s"] == "ok" and got["other:link"] == "ok", got
    assert os.stat(other / "u").st_mode & stat.S_ISUID
    assert got["other:linkat"] == "ok", got
    assert os.stat(other / "plain").st_nlink == 3


def test_git_commits_and_cp_fails_cleanly_without_hard_links(profiles):
    profiles.add()
    repo = profiles.project
    git("init", "-q", cwd=repo)
    (repo / "a").write_text("one\n")
    shell_claude(profiles, "set -u\n"
                           "ln a b; echo \"ln=$?\"\n"
                           "cp -al a c 2>/dev/null; echo \"cpal=$?\"\n"
                           "cp a d; echo \"cp=$?\"\n"
                           "git add a d && git -c user.name=T -c user.email=t@example.invalid "
                           "commit -qm inside; echo \"commit=$?\"\n"
                           "git gc -q; echo \"gc=$?\"\n")
    r = profiles.run()
    assert r.returncode == 0, r.stderr
    out = dict(line.split("=", 1) for line in r.stdout.split())
    assert out["ln"] != "0" and out["cpal"] != "0", out
    assert out["cp"] == "0" and out["commit"] == "0" and out["gc"] == "0", (out, r.stderr)
    assert not (repo / "b").exists() and not (repo / "c").exists()
    log = subprocess.run(["git", "-C", str(repo), "log", "--format=%s"], capture_output=True,
                         text=True, env={"PATH": os.environ["PATH"], "HOME": str(repo),
                                         "GIT_CONFIG_NOSYSTEM": "1"})
    assert log.stdout.split() == ["inside"], (log.stdout, log.stderr)
    assert set_id_files(repo) == []


def test_csandbox_inside_unpacks_an_image_with_hard_links_and_setuid_files(tmp_path):
    """The nested engine's store is under the session's writable dirs too: a hard link of
    the image becomes a copy and a setuid file loses the bit on disk (no_new_privs made it
    inert); the import succeeds."""
    r = tmp_path / "r"
    (r / "bin").mkdir(parents=True)
    (r / "bin" / "f").write_text("same\n")
    os.link(r / "bin" / "f", r / "bin" / "g")
    (r / "bin" / "s").write_text("suid\n")
    os.chmod(r / "bin" / "s", 0o4755)
    (r / "shared").mkdir()
    os.chmod(r / "shared", 0o2775)
    subprocess.run(["tar", "-C", str(r), "-cf", str(tmp_path / "img.tar"), "."], check=True)
    store = tmp_path / "data"
    build = os.path.dirname(CSANDBOX)
    p = subprocess.run([CSANDBOX, "exec", "--bind", str(tmp_path), str(tmp_path),
                        "--ro-bind", build, build, "--setenv", "XDG_DATA_HOME", str(store),
                        "--", CSANDBOX, "image", "import", str(tmp_path / "img.tar"), "--name", "t:1",
                        "--quiet"],
                       capture_output=True, text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL,
                       env=base_env(XDG_DATA_HOME=str(store)))
    assert p.returncode == 0, p.stderr
    found = set_id_files(store)
    assert found == [], found
    # the store itself on the host (the inner csandbox did not write elsewhere)
    copies = [os.path.join(d, n) for d, _, files in os.walk(store) for n in files
              if n == "g" and os.path.basename(d) == "bin"]
    assert copies and all(open(c).read() == "same\n" for c in copies), copies
