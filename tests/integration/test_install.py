"""What `meson install` puts on a machine, as a packager runs it: the binary and its
helpers, csandbox(1) built from the --help texts, and the bash and zsh completions, which
offer the commands, every flag `exec --help` lists, profile names and image names."""
import os
import re
import shutil
import subprocess

import pytest

from conftest import CSANDBOX, TIMEOUT

BUILD = os.path.dirname(CSANDBOX)
SRC = os.path.join(os.path.dirname(__file__), "..", "..")


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    dest = tmp_path_factory.mktemp("destdir")
    r = subprocess.run(["meson", "install", "--no-rebuild", "--quiet", "-C", BUILD,
                        "--destdir", str(dest)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    prefix = subprocess.run(["meson", "introspect", "--buildoptions", BUILD],
                            capture_output=True, text=True, check=True).stdout
    prefix = re.search(r'"name": "prefix", "value": "([^"]+)"', prefix).group(1)
    return str(dest) + prefix


def test_install_puts_binaries_man_page_and_completions_in_place(installed):
    for rel in ("bin/csandbox", "bin/csandbox-import", "bin/csandbox-wl-paste",
                "share/man/man1/csandbox.1", "share/bash-completion/completions/csandbox",
                "share/zsh/site-functions/_csandbox"):
        assert os.path.isfile(os.path.join(installed, rel)), rel
    # The installed binary runs and finds its helper beside it.
    r = subprocess.run([os.path.join(installed, "bin/csandbox"), "image", "ls"],
                       capture_output=True, text=True, timeout=TIMEOUT,
                       env=dict(os.environ, XDG_DATA_HOME=os.path.join(installed, "data")))
    assert r.returncode == 0, r.stderr


def exec_flags():
    text = subprocess.run([CSANDBOX, "exec", "--help"], capture_output=True, text=True).stdout
    return sorted(set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", text)))


def test_man_page_renders_cleanly_and_carries_every_commands_help(installed):
    page = os.path.join(installed, "share/man/man1/csandbox.1")
    r = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", page], capture_output=True,
                       text=True)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    shown = subprocess.run(["groff", "-man", "-Tutf8", "-P", "-c", page], capture_output=True,
                           text=True).stdout
    shown = re.sub(r".\x08", "", shown)
    for cmd in ("run", "exec", "image", "list", "sandbox", "doctor"):
        assert f"csandbox {cmd}" in shown
    for flag in exec_flags() + ["--accept-changes", "CLAUDE_PROFILE_SANDBOX_GPG"]:
        assert flag in shown, flag


def complete(line, env):
    """What bash's completion offers for line (the cursor at its end)."""
    script = (f'source "{SRC}/contrib/completion/csandbox.bash"\n'
              f'COMP_LINE={line!r}; read -ra COMP_WORDS <<< "$COMP_LINE"\n'
              '[[ $COMP_LINE == *" " ]] && COMP_WORDS+=("")\n'
              'COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMP_WORDS[0]=' + CSANDBOX + '\n'
              '_csandbox; printf "%s\\n" "${COMPREPLY[@]}"\n')
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env,
                       timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


def test_bash_completion_offers_commands_flags_profiles_and_images(tmp_path):
    base = tmp_path / "profiles"
    for name in ("work", "home"):
        (base / name).mkdir(parents=True)
    env = dict(os.environ, CLAUDE_PROFILE_PROFILES_BASE=str(base),
               XDG_DATA_HOME=str(tmp_path / "data"))
    assert "exec" in complete("csandbox ", env) and "run" in complete("csandbox ", env)
    assert complete("csandbox run ", env) == ["home", "work"]
    assert complete("csandbox sandbox w", env) == ["work"]
    offered = {w.split("=")[0] for w in complete("csandbox exec --", env)}
    assert set(exec_flags()) <= offered, set(exec_flags()) - offered
    assert complete("csandbox exec --net ", env) == ["none", "pasta", "host"]
    # An imported image is offered by name.
    rootfs = tmp_path / "root.tar"
    subprocess.run(["tar", "-cf", str(rootfs), "-C", str(tmp_path), "profiles"], check=True)
    r = subprocess.run([CSANDBOX, "image", "import", str(rootfs), "--name", "myimg",
                        "--quiet"], env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    assert "myimg:latest" in " ".join(complete("csandbox run --image ", env))


def help_words(*args):
    """The command words a --help text lists: `  word ...` or `  a|b ...` or `  a, b, c  ...`
    lines under its first heading, each word a completion should offer."""
    r = subprocess.run([CSANDBOX, *args, "--help"], capture_output=True, text=True,
                       timeout=TIMEOUT)
    words = set()
    for line in (r.stdout + r.stderr).splitlines():
        m = re.match(r"^  ([a-z][a-z-]*(?:(?:\||, )[a-z][a-z-]*)*)(?: |$)", line)
        if m:
            words.update(re.split(r"\||, ", m.group(1)))
    assert words, (r.stdout, r.stderr)
    return words - {"help"}


def test_completions_offer_every_command_and_subcommand_the_help_lists(tmp_path):
    """Commands, image subcommands and podman subcommands: what --help lists, the bash
    completion offers, and the zsh one names."""
    env = dict(os.environ, CLAUDE_PROFILE_PROFILES_BASE=str(tmp_path),
               XDG_DATA_HOME=str(tmp_path / "data"))
    zsh = open(f"{SRC}/contrib/completion/_csandbox").read()
    for line, args in (("csandbox ", ()), ("csandbox image ", ("image",)),
                       ("csandbox podman ", ("podman",)), ("csandbox docker ", ("podman",))):
        listed = help_words(*args)
        offered = set(complete(line, env))
        assert listed <= offered, (line, listed - offered)
        missing = [w for w in listed if not re.search(rf"(^|[ '(|]){re.escape(w)}[\s:|)]", zsh)]
        assert not missing, (line, missing)


def test_zsh_completion_parses_and_lists_every_exec_flag():
    r = subprocess.run(["zsh", "-n", f"{SRC}/contrib/completion/_csandbox"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    text = open(f"{SRC}/contrib/completion/_csandbox").read()
    for flag in exec_flags():
        assert flag in text, flag
