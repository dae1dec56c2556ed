"""The real Claude Code on a real terminal: `csandbox run` in a tmux pane (Debian's tmux),
through the sandbox's pty relay. No credentials exist; an API key that is never checked and
a profile past onboarding bring claude to its first interactive screen, the folder trust
prompt, which needs no network."""
import json
import os
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from conftest import CSANDBOX  # noqa: E402
from test_claude import CLAUDE, profiles  # noqa: E402,F401 (the fixture)

TRUST = "Yes, I trust this folder"


class Pane:
    def __init__(self, tmp_path, command, cwd, env):
        self.sock = str(tmp_path / "tmux.sock")
        self.env = env
        self.tmux("-f", "/dev/null", "new-session", "-d", "-x", "100", "-y", "30", "-c", cwd,
                  command)

    def tmux(self, *args):
        return subprocess.run(["tmux", "-S", self.sock, *args], env=self.env, check=True,
                              capture_output=True, text=True, timeout=30).stdout

    def screen(self):
        return self.tmux("capture-pane", "-p", "-t", "0")

    def wait_for(self, predicate, deadline=60):
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            text = self.screen()
            if predicate(text):
                return text
            time.sleep(0.2)
        raise AssertionError(f"not on the screen in time:\n{self.screen()}")

    def keys(self, *keys):
        self.tmux("send-keys", "-t", "0", *keys)

    def kill(self):
        subprocess.run(["tmux", "-S", self.sock, "kill-server"], env=self.env,
                       capture_output=True, timeout=30)


def selected(screen):
    return next((line for line in screen.splitlines() if "❯" in line), "")


@pytest.fixture
def pane(tmp_path, profiles):
    d = profiles.add()
    (d / ".claude.json").write_text(json.dumps({"hasCompletedOnboarding": True,
                                                "theme": "dark"}))
    env = profiles.env(ANTHROPIC_API_KEY="sk-ant-api03-csandbox-test",
                       CLAUDE_PROFILE_SANDBOX_FORWARD_ENV="ANTHROPIC_API_KEY",
                       CLAUDE_PROFILE_CLAUDE_BIN=CLAUDE, TMUX=None)
    before, after = tmp_path / "stty-before", tmp_path / "stty-after"
    command = (f"stty -a > {before}; {CSANDBOX} run work; echo csandbox-exit=$?; "
               f"stty -a > {after}; sleep 600")
    p = Pane(tmp_path, command, str(profiles.project), env)
    p.stty = (before, after)
    yield p
    p.kill()


def test_real_claude_renders_reacts_redraws_and_leaves_the_terminal_sane(pane):
    screen = pane.wait_for(lambda s: TRUST in s)
    assert "❯" in screen
    first = selected(screen)
    # Arrow keys reach it unchanged: the selection moves and comes back. (claude takes keys
    # only some time after its first paint, so the first one is repeated until it does.)
    moved = None
    for _ in range(20):
        pane.keys("Down")
        try:
            moved = pane.wait_for(lambda s: selected(s) and selected(s) != first, deadline=1)
            break
        except AssertionError:
            pass
    assert moved and TRUST in selected(moved), pane.screen()
    pane.keys("Up")
    pane.wait_for(lambda s: selected(s) == first)
    # A narrower window: claude gets the new size and redraws wrapped to it. At 100 columns
    # "... or one you trust? (Like" is one line; cut at 60 by the terminal it would read
    # "one yo" / "u trust?" (or lose the end); wrapped by claude, the words stay whole.
    pane.tmux("resize-window", "-t", "0", "-x", "60", "-y", "25")
    pane.wait_for(lambda s: TRUST in s and {"one", "you", "trust?"} <= set(s.split()))
    # "No, exit" is the first choice: Enter ends the session.
    pane.keys("Enter")
    pane.wait_for(lambda s: "csandbox-exit=" in s)
    before, after = pane.stty
    deadline = time.monotonic() + 30
    while not after.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    # The same terminal modes, with the size it has now.
    strip = lambda t: t.split(";", 3)[3]  # noqa: E731 (speed; rows; columns; ...)
    assert strip(after.read_text()) == strip(before.read_text())
