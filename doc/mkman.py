#!/usr/bin/env python3
"""csandbox(1), built from csandbox's own --help texts (so the page and the help cannot
disagree) and the few sections only a manual has. Usage: mkman.py CSANDBOX OUTPUT"""
import datetime
import os
import subprocess
import sys

COMMANDS = ["run", "exec", "image", "add", "list", "sandbox", "doctor", "podman"]


def esc(line):
    """A line of help text as roff shows it as it is."""
    line = line.replace("\\", "\\e")
    return "\\&" + line if line.startswith((".", "'")) else line


def text(binary, *args):
    return subprocess.run([binary, *args], capture_output=True, text=True, check=True,
                          env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"}).stdout


def main():
    binary, out = sys.argv[1], sys.argv[2]
    version = text(binary, "version").split()[-1]
    # The page's date is the source's, so rebuilding it gives the same bytes.
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "0")) or None
    date = (datetime.datetime.utcfromtimestamp(epoch) if epoch else datetime.datetime.utcnow())
    page = [f'.TH CSANDBOX 1 "{date:%Y-%m-%d}" "csandbox {version}" "User Commands"',
            ".SH NAME",
            "csandbox \\- Claude Code profiles and commands in an unprivileged Linux sandbox",
            ".SH SYNOPSIS"]
    for cmd in COMMANDS:
        page.append(f".B csandbox {cmd}")
        page.append(".I ...")
        page.append(".br")
    page += [".SH DESCRIPTION",
             "csandbox builds user, mount, pid, ipc, uts and network namespaces itself, "
             "pivots into a read-only view of the host root (or an imported OCI image), "
             "applies a seccomp filter, drops every capability and runs the command. It "
             "needs no setuid helper, no daemon and no container engine.",
             ".PP", ".nf"]
    page += [esc(l) for l in text(binary, "help").splitlines()]
    page.append(".fi")
    page.append(".SH COMMANDS")
    for cmd in COMMANDS:
        page += [f".SS csandbox {cmd}", ".nf"]
        page += [esc(l) for l in text(binary, "help", cmd).splitlines()]
        page.append(".fi")
    page += [".SH FILES",
             ".TP", ".I ~/.claude-profiles/NAME",
             "a profile (CLAUDE_PROFILE_PROFILES_BASE moves them)",
             ".TP", ".I ${XDG_DATA_HOME:-~/.local/share}/claude-profile/profiles/NAME",
             "the per-profile state: the copies a launch makes, the pending trust report",
             ".TP", ".I ${XDG_DATA_HOME:-~/.local/share}/csandbox/images",
             "the image store",
             ".SH EXIT STATUS",
             "The command's own; 128+N when it died of signal N; 125 when csandbox itself "
             "failed; 126 when the command cannot be executed; 127 when it was not found.",
             ".SH SEE ALSO",
             ".BR bwrap (1),", ".BR unshare (1),", ".BR pasta (1),",
             ".BR user_namespaces (7)"]
    with open(out, "w") as f:
        f.write("\n".join(page) + "\n")


if __name__ == "__main__":
    main()
