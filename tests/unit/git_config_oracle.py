#!/usr/bin/env python3
"""The judge's git config reader held to git itself.

git_config_oracle.py DUMP [COUNT]: DUMP is tests/unit/git_config_dump (the judge's reader,
policy/trust_git_config.c). For hand-written configs and COUNT generated ones (a fixed
seed; CSANDBOX_ORACLE_SEED picks another), the keys and values the judge reads must be
exactly those `git config --file F --list -z --no-includes` prints (clean environment: no
system or global config, an empty HOME, a cwd in no repository). Where git refuses a file
("bad config line"), the judge must refuse it too, after reading the same keys before the
bad line. A file git reads differently with --includes must not be judged inert. Last, a
refused config makes `git status` fail before it runs the fsmonitor the file names.
"""
import os
import random
import subprocess
import sys
import tempfile

# Keys that decide something: some on the judge's inert list, most not.
KEYS = ["core.fsmonitor", "core.hooksPath", "core.pager", "core.editor", "core.sshCommand",
        "core.gitProxy", "core.worktree", "core.bare", "core.filemode",
        "core.repositoryformatversion", "include.path", "includeIf.gitdir:/.path",
        "remote.origin.url", "remote.origin.uploadpack", "alias.st", "diff.x.textconv",
        "filter.x.clean", "submodule.a.update", "submodule.a.url", "color.ui",
        "extensions.worktreeConfig", "extensions.partialClone", "user.name", "sequence.editor"]
VALUES = ["!touch /tmp/x", "true", "", "a b", "x;y", "x#y", "../../lib", "/tmp/inc"]


def section_header(section, sub, rng):
    """One of the header forms git reads for section (and subsection)."""
    sec = "".join(c.upper() if rng.random() < 0.3 else c for c in section)
    if sub is None:
        forms = ["[%s]", "[%s]\t", "[%s] "] if rng.random() < 0.95 else ["[ %s]", "[%s ]"]
        return rng.choice(forms) % sec
    form = rng.randrange(6)
    if form == 0:
        return '[%s "%s"]' % (sec, sub)
    if form == 1:
        return '[%s.%s]' % (sec, sub)
    if form == 2:
        return '[%s \t "%s"]' % (sec, sub.replace('"', '\\"'))
    if form == 3:
        return '[%s "%s"]' % (sec, "".join("\\" + c for c in sub))
    if form == 4:
        return '[%s "%s" ]' % (sec, sub)
    return '[%s"%s"]' % (sec, sub)


def value_text(value, rng):
    form = rng.randrange(9 if rng.random() < 0.1 else 8)
    if form == 0:
        return value
    if form == 1:
        return '"%s"' % value
    if form == 2:
        return value + rng.choice([" ; comment", " # comment", "\t", "  ", '"', "\\"])
    if form == 3:
        return value[:len(value) // 2] + "\\\n" + value[len(value) // 2:]
    if form == 4:
        return value + rng.choice(["\\t", "\\n", "\\b", "\\\\", '\\"', "\\t\\n"] +
                                  (["\\x", "\\ "] if rng.random() < 0.1 else []))
    if form == 5:
        return '"' + value + "\\\n\\\n" + '"'
    if form == 6:
        return "  " + value + '"#"' + value
    if form == 7:
        return value.replace(" ", "\t \t")
    return '"%s' % value


def entry(key, value, rng):
    name = "".join(c.upper() if rng.random() < 0.3 else c for c in key)
    form = rng.randrange(7 if rng.random() < 0.1 else 4)
    if form == 0:
        return name
    if form == 1:
        return "%s = %s" % (name, value_text(value, rng))
    if form == 2:
        return "%s=%s" % (name, value_text(value, rng))
    if form == 3:
        return "\t%s\t=\t%s" % (name, value_text(value, rng))
    if form == 4:
        return "%s %s" % (name, value)
    if form == 5:
        return "%s = %s" % (name, value)
    return "%s\\\n= %s" % (name, value)


def config(rng):
    """A config: sections with keys, in git's forms and in broken ones, then mutated."""
    lines = []
    for _ in range(rng.randrange(1, 5)):
        key = rng.choice(KEYS)
        parts = key.split(".")
        sub = ".".join(parts[1:-1]) if len(parts) > 2 else None
        if sub is not None and rng.random() < 0.2:
            sub = rng.choice(["a.b", "A", 'q"uote', "x]y", "sp ace", "tab\t", "bs\\", "\x00z"])
        head = section_header(parts[0], sub, rng)
        if rng.random() < 0.15:
            head += " " + entry(parts[-1], rng.choice(VALUES), rng)
        lines.append(head)
        for _ in range(rng.randrange(1, 3)):
            lines.append(entry(parts[-1] if rng.random() < 0.7 else rng.choice(KEYS).split(".")[-1],
                               rng.choice(VALUES), rng))
        if rng.random() < 0.3:
            lines.append(rng.choice(["# c", "; c", "", "  ", "\t# [core]"]))
    text = "\n".join(lines) + rng.choice(["\n", "", "\n\n"])
    data = text.encode()
    if rng.random() < 0.3:
        data = data.replace(b"\n", rng.choice([b"\r\n", b"\r", b"\n\r"]))
    if rng.random() < 0.1:
        data = rng.choice([b"\xef\xbb\xbf", b"\xef\xbb", b" \xef\xbb\xbf"]) + data
    for _ in range(rng.choice([0, 0, 0, 0, 1, 1, 2, 3])):
        at = rng.randrange(len(data) + 1)
        op = rng.randrange(3)
        byte = rng.choice([b"\x00", b"\\", b'"', b"\n", b"\r", b"[", b"]", b"=", b";", b"#",
                           b" ", b"\t", b".", b"\x0b", b"\x0c", b"\xff", b"a"])
        if op == 0:
            data = data[:at] + byte + data[at:]
        elif op == 1:
            data = data[:at] + data[at + 1:]
        else:
            data = data[:at] + byte + data[at + 1:]
    if rng.random() < 0.01:
        data += b"[core]\nx = " + b"y" * 200000 + b"\n"
    return data


HAND = [
    b"",
    b"[core]\n\tfsmonitor = touch /tmp/x\n",
    b"[core]fsmonitor=x",
    b"[CORE]\n\tFsMonitor = x\n",
    b"[core.hooksPath]\n",
    b"[core \"\"]\nfsmonitor = x\n",
    b"[core]\nfsmonitor\n",
    b"[core]\nfsmonitor ; = x\n",
    b"[core]\nfsmonitor \\\n= x\n",
    b"[core]\n# fsmonitor = x\n; pager = y\n",
    b"[core]\nbare = false \\\nfsmonitor = x\n",
    b"[core]\nbare = \"false\nfsmonitor = x\"\n",
    b"[core]\nbare = false\\\r\nfsmonitor = x\n",
    b"[core]\r\nfsmonitor = x\r\n",
    b"[core]\rfsmonitor = x\r",
    b"\xef\xbb\xbf[core]\nfsmonitor = x\n",
    b"\xef\xbb[core]\nfsmonitor = x\n",
    b"[core]\nbare = x\x00y\nfsmonitor = z\n",
    b"[remote \"a\x00b\"]\nurl = x\n",
    b"[remote \"o\\\"\\\\\"]\nuploadpack = x\n",
    b"[remote \"o\"] uploadpack = x\n",
    b"[remote.O]\nuploadpack = x\n",
    b"[remote \"O\"]\nURL = x\n",
    b"[include]\npath = inc\n",
    b"[includeIf \"gitdir:/\"]\npath = inc\n",
    b"[inClude]\nPath = inc\n",
    b"[alias]\nst = !touch /tmp/x\n",
    b"key = x\n",
    b"[core\n",
    b"[core]\n=x\n",
    b"[core]\n1x = y\n",
    b"[core]\nx\x0b= y\n",
    b"[core]\nx = \"unterminated\n",
    b"[core]\nx = bad \\q escape\n",
    b"[ \"sub\"]\nx = y\n",
    b"[core]\n\x0bfsmonitor = x\n",
    b"[core]\nbare = a\x0c\x0bb\n",
    b"[core] ; comment\nfsmonitor = x\n",
    b"[core]\nbare = x\\",
    b"[core]\nfsmonitor = " + b"y" * 300000 + b"\n",
    b"[core]\nworktree = /home\n",
    b"[extensions]\npartialClone = origin\n",
    b"[remote \"o\"]\npromisor = true\n",
]


def git_list(path, env, cwd, includes):
    r = subprocess.run(["git", "config", "--file", path, "--list", "-z",
                        "--includes" if includes else "--no-includes"],
                       env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return r.returncode, r.stdout, r.stderr


def main():
    dump = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 3000
    rng = random.Random(int(os.environ.get("CSANDBOX_ORACLE_SEED", "20261207")))
    work = tempfile.mkdtemp(prefix="csandbox-gitoracle.")
    home = os.path.join(work, "home")
    cwd = os.path.join(work, "cwd")
    os.makedirs(home)
    os.makedirs(cwd)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home,
           "XDG_CONFIG_HOME": home, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
           "GIT_CEILING_DIRECTORIES": work, "LC_ALL": "C"}
    cases = HAND + [config(rng) for _ in range(count)]
    paths = []
    for i, data in enumerate(cases):
        d = os.path.join(work, "c%05d" % i)
        os.makedirs(d)
        # What an include reads, beside the config: git with --includes reads it.
        with open(os.path.join(d, "inc"), "wb") as f:
            f.write(b"[core]\n\tsshCommand = touch /tmp/x\n")
        p = os.path.join(d, "config")
        with open(p, "wb") as f:
            f.write(data)
        paths.append(p)
    for at in range(0, len(paths), 500):
        subprocess.run([dump] + paths[at:at + 500], check=True)
    failures = 0
    refused = 0
    for p, data in zip(paths, cases):
        with open(p + ".judge", "rb") as f:
            judge = f.read()
        with open(p + ".verdict", "rb") as f:
            verdict = f.read().decode(errors="replace").split("\n")
        rc, out, err = git_list(p, env, cwd, False)
        problem = None
        if rc == 0 and verdict[0] != "parsed":
            problem = "git reads it, the judge refuses it"
        elif rc != 0 and b"bad config line" not in err:
            problem = "git fails otherwise: %r" % err
        elif rc != 0 and verdict[0] != "refused":
            problem = "git refuses it, the judge reads it"
        elif rc != 0 and verdict[1] == "inert":
            problem = "git refuses it, the judge calls it inert"
        elif out != judge:
            problem = "git reads %r, the judge %r" % (out, judge)
        elif b"include" in data.lower() and verdict[1] == "inert":
            irc, iout, _ = git_list(p, env, cwd, True)
            if (irc, iout) != (rc, out):
                problem = "git reads more with --includes, the judge calls it inert"
        refused += rc != 0
        if problem:
            failures += 1
            if failures <= 20:
                print("FAIL %s: %r\n  %s" % (p, data[:300], problem))
    print("%d configs (%d hand-written), %d refused by git, %d disagreements"
          % (len(cases), len(HAND), refused, failures))
    failures += status_refuses_a_bad_config(work, env)
    subprocess.run(["rm", "-rf", work])
    return 1 if failures else 0


def status_refuses_a_bad_config(work, env):
    """git refuses a repository whose config it cannot read: what the config names after
    (or before) the bad line never runs."""
    repo = os.path.join(work, "repo")
    mark = os.path.join(work, "ran")
    subprocess.run(["git", "init", "-q", repo], env=env, check=True)
    with open(os.path.join(repo, ".git", "config"), "a") as f:
        f.write("[core]\n\tfsmonitor = touch %s\n\tbad = \"unterminated\n" % mark)
    r = subprocess.run(["git", "-C", repo, "status"], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    if r.returncode == 0 or os.path.exists(mark) or b"bad config line" not in r.stderr:
        print("FAIL git status in a repository with a bad config: rc %d, ran %s, %r"
              % (r.returncode, os.path.exists(mark), r.stderr))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
