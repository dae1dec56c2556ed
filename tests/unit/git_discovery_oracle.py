#!/usr/bin/env python3
"""The judge's idea of which git dir git uses, held to git's own discovery.

git_discovery_oracle.py PROBE [TREES]: PROBE is tests/unit/trust_judge_probe (trust_judge
on a work root). TREES generated work trees (a fixed seed; CSANDBOX_ORACLE_SEED picks
another) hold nested repositories, bare ones, gitfiles (relative, absolute, CRLF),
links to git dirs and to directories, linked-worktree git dirs with a commondir (to a common
dir with or without a HEAD), directories that only look like git dirs, git dirs inside the
work tree's own .git, and, without a repository of its own, a root made a git dir. For every
directory, `git -C DIR rev-parse --absolute-git-dir --git-common-dir` (no system or global
config, a ceiling above the root) names the git dir git would use there; when that is one
the session could have written (below the root, not the repository's own), the judge must
report a change to the config git reads for it (armed with a pager) and to its HEAD. And
what a session ordinarily changes in a repository is reported by nothing.
"""
import os
import random
import shutil
import subprocess
import sys
import tempfile

NAMES = ["a", "b", "sub", "x.git", "deep", "c"]
ARMED = "[core]\n\tpager = armed\n"


def git(env, *args, cwd=None, check=True):
    return subprocess.run(["git"] + list(args), env=env, cwd=cwd, check=check,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def rand_dir(rng, root, dirs):
    """A directory below root: an existing one, or a new one below an existing one."""
    base = rng.choice(dirs)
    if rng.random() < 0.6:
        d = os.path.join(base, *[rng.choice(NAMES) for _ in range(rng.randrange(1, 3))])
    else:
        d = base
    if os.path.lexists(d) and not os.path.isdir(d):
        return None
    try:
        os.makedirs(d, exist_ok=True)
    except OSError:
        return None
    dirs.append(d)
    return d


def make_tree(rng, env, root, main):
    os.makedirs(root)
    if main:
        git(env, "init", "-q", root)
    dirs = [root]
    gitdirs = []
    if not main and rng.random() < 0.5:
        # The root itself made a git dir.
        git(env, "init", "-q", "--bare", root)
        gitdirs.append(root)
    if main and rng.random() < 0.3:
        g = os.path.join(root, ".git", rng.choice(["x", "modules/m", "worktrees/w"]))
        git(env, "init", "-q", "--bare", g)
        gitdirs.append(g)
    for _ in range(rng.randrange(3, 9)):
        kind = rng.randrange(9)
        d = rand_dir(rng, root, dirs)
        if d is None:
            continue
        try:
            if kind == 0:
                git(env, "init", "-q", d)
                gitdirs.append(os.path.join(d, ".git"))
            elif kind == 1:
                git(env, "init", "-q", "--bare", d)
                gitdirs.append(d)
            elif kind in (2, 3) and gitdirs and not os.path.lexists(os.path.join(d, ".git")):
                target = rng.choice(gitdirs)
                path = target if rng.random() < 0.3 else os.path.relpath(target, d)
                if kind == 2:
                    end = rng.choice(["\n", "", "\r\n", "\n\n", " \n"])
                    with open(os.path.join(d, ".git"), "w") as f:
                        f.write("gitdir: " + path + end)
                else:
                    os.symlink(path, os.path.join(d, ".git"))
            elif kind == 4:
                link = os.path.join(d, rng.choice(NAMES) + "-link")
                if not os.path.lexists(link):
                    os.symlink(os.path.relpath(rng.choice(dirs + gitdirs), d), link)
            elif kind == 5:
                # A linked worktree's git dir: HEAD and a commondir naming a common dir.
                common = os.path.join(root, rng.choice(NAMES) + "-common")
                if not os.path.exists(common):
                    git(env, "init", "-q", "--bare", common)
                    if rng.random() < 0.5:
                        os.unlink(os.path.join(common, "HEAD"))
                g = os.path.join(d, "wt-gitdir")
                os.makedirs(g, exist_ok=True)
                with open(os.path.join(g, "HEAD"), "w") as f:
                    f.write("ref: refs/heads/main\n")
                with open(os.path.join(g, "commondir"), "w") as f:
                    f.write(os.path.relpath(common, g) + rng.choice(["\n", ""]))
                gitdirs.append(g)
                w = os.path.join(d, "wt")
                os.makedirs(w, exist_ok=True)
                if not os.path.lexists(os.path.join(w, ".git")):
                    with open(os.path.join(w, ".git"), "w") as f:
                        f.write("gitdir: ../wt-gitdir\n")
            elif kind == 6:
                # What only looks like a git dir: git refuses a HEAD that names no ref.
                with open(os.path.join(d, "HEAD"), "w") as f:
                    f.write(rng.choice(["garbage\n", "ref: refs/heads/main\n"]))
                os.makedirs(os.path.join(d, "objects"), exist_ok=True)
                if rng.random() < 0.7:
                    os.makedirs(os.path.join(d, "refs"), exist_ok=True)
            elif kind == 7 and gitdirs:
                # A directory linked to a git dir: git takes the link's target as one.
                link = os.path.join(d, rng.choice(NAMES) + ".lnk")
                if not os.path.lexists(link):
                    os.symlink(os.path.relpath(rng.choice(gitdirs), d), link)
            elif kind == 8:
                git(env, "init", "-q", "--separate-git-dir",
                    os.path.join(root, rng.choice(NAMES) + "-sep.git"), d, check=False)
        except (OSError, subprocess.CalledProcessError):
            pass


def all_dirs(root):
    out = []
    for d, subdirs, _ in os.walk(root):
        out.append(d)
    return out


def check_tree(probe, env, root, main):
    """The failures for one tree: the git dirs git uses that the judge does not report."""
    real_root = os.path.realpath(root)
    main_git = os.path.join(real_root, ".git") if main else None
    used = {}
    for d in all_dirs(root):
        r = git(env, "-C", d, "rev-parse", "--absolute-git-dir", "--git-common-dir",
                check=False)
        if r.returncode != 0:
            continue
        gitdir, common = r.stdout.decode().splitlines()[:2]
        if not os.path.isabs(common):
            common = os.path.join(d, common)
        gitdir, common = os.path.realpath(gitdir), os.path.realpath(common)
        if main_git and common == main_git:
            continue  # the repository's own, whose config the session cannot write
        if os.path.commonpath([gitdir, real_root]) != real_root:
            continue
        used.setdefault((gitdir, common), d)
    rels = []
    for (gitdir, common), d in used.items():
        with open(os.path.join(common, "config"), "a") as f:
            f.write(ARMED)
        for p in (os.path.join(common, "config"), os.path.join(gitdir, "HEAD")):
            if os.path.commonpath([p, real_root]) == real_root:
                rels.append((os.path.relpath(p, real_root), d, gitdir))
    if not rels:
        return [], 0
    out = subprocess.run([probe, real_root, main_git or "-"] + [r for r, _, _ in rels],
                         check=True, stdout=subprocess.PIPE).stdout.decode()
    failures = []
    for line, (rel, d, gitdir) in zip(out.splitlines(), rels):
        fields = line.split("\t")
        if fields[0] != rel or int(fields[1]) == 0:
            failures.append("from %s git uses %s; the judge reports nothing for %s"
                            % (d, gitdir, rel))
    return failures, len(rels)


def ordinary_changes_report_nothing(probe, env, work):
    """What git does in the repository's own git dir, a nested repository's objects and a
    plain file: no finding (the judge walks every level, the main git dir is not one)."""
    root = os.path.join(work, "ordinary")
    git(env, "init", "-q", root)
    git(env, "init", "-q", os.path.join(root, "vendor"))
    with open(os.path.join(root, "f.txt"), "w") as f:
        f.write("x\n")
    for d in (root, os.path.join(root, "vendor")):
        git(env, "-C", d, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
            "--allow-empty", "-m", "m")
    git(env, "-C", root, "add", "f.txt")
    real = os.path.realpath(root)
    rels = [".git/HEAD", ".git/index", ".git/refs/heads/main", ".git/logs/HEAD", "f.txt",
            "vendor/.git/HEAD", "vendor/.git/index", "vendor/.git/refs/heads/main"]
    out = subprocess.run([probe, real, os.path.join(real, ".git")] + rels, check=True,
                         stdout=subprocess.PIPE).stdout.decode()
    return ["an ordinary change reported: " + line for line in out.splitlines()
            if line.split("\t")[1] != "0"]


def main():
    probe = sys.argv[1]
    trees = int(sys.argv[2]) if len(sys.argv) > 2 else 60
    rng = random.Random(int(os.environ.get("CSANDBOX_ORACLE_SEED", "20261207")))
    work = tempfile.mkdtemp(prefix="csandbox-gitdisc.")
    home = os.path.join(work, "home")
    os.makedirs(home)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home,
           "XDG_CONFIG_HOME": home, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
           "GIT_CEILING_DIRECTORIES": work, "LC_ALL": "C",
           "GIT_CONFIG_COUNT": "2", "GIT_CONFIG_KEY_0": "init.defaultBranch",
           "GIT_CONFIG_VALUE_0": "main", "GIT_CONFIG_KEY_1": "safe.directory",
           "GIT_CONFIG_VALUE_1": "*"}
    failures = []
    checked = 0
    for t in range(trees):
        root = os.path.join(work, "t%03d" % t, "root")
        main = rng.random() < 0.7
        make_tree(rng, env, root, main)
        f, n = check_tree(probe, env, root, main)
        failures += f
        checked += n
    failures += ordinary_changes_report_nothing(probe, env, work)
    for f in failures[:30]:
        print("FAIL " + f)
    print("%d trees, %d changes to git dirs git uses, %d missed" % (trees, checked, len(failures)))
    shutil.rmtree(work)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
