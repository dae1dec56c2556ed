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
API_KEY = "sk-ant-api03-csandbox-test-key-never-checked-0123456789"


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


def move_to_trust(pane, first):
    """Down until the selection moves (claude takes keys only some time after its first
    paint, so the first one is repeated until it does)."""
    for _ in range(20):
        pane.keys("Down")
        try:
            moved = pane.wait_for(lambda s: selected(s) and first not in selected(s),
                                  deadline=1)
            assert TRUST in selected(moved), moved
            return
        except AssertionError:
            pass
    raise AssertionError(pane.screen())


def trust_folder(pane, after):
    """Choose "Yes, I trust this folder" until the prompt is gone and `after` holds; the
    screen then. claude may paint its prompt anew while it starts and forget a choice made
    on the first one, so the choice is made again while the prompt shows."""
    for _ in range(5):
        screen = pane.wait_for(lambda s: TRUST in s or after(s))
        if TRUST not in screen:
            return screen
        if TRUST not in selected(screen):
            move_to_trust(pane, selected(screen))
        pane.keys("Enter")
        try:
            return pane.wait_for(lambda s: TRUST not in s and after(s), deadline=5)
        except AssertionError:
            pass
    raise AssertionError(f"the trust prompt stays:\n{pane.screen()}")


@pytest.fixture
def pane(tmp_path, profiles):
    d = profiles.add()
    # Past onboarding, the key approved and bypass mode accepted: the folder trust prompt
    # is the only one left before the session.
    (d / ".claude.json").write_text(json.dumps({
        "hasCompletedOnboarding": True, "theme": "dark", "bypassPermissionsModeAccepted": True,
        "customApiKeyResponses": {"approved": [API_KEY[-20:]], "rejected": []}}))
    env = profiles.env(ANTHROPIC_API_KEY=API_KEY,
                       CLAUDE_PROFILE_SANDBOX_FORWARD_ENV="ANTHROPIC_API_KEY",
                       CLAUDE_PROFILE_CLAUDE_BIN=CLAUDE, TMUX=None)
    before, after = tmp_path / "stty-before", tmp_path / "stty-after"
    command = (f"stty -a > {before}; {CSANDBOX} run work; echo csandbox-exit=$?; "
               f"stty -a > {after}; sleep 600")
    p = Pane(tmp_path, command, str(profiles.project), env)
    p.stty = (before, after)
    yield p
    p.kill()


def exit_on_ctrl_c(pane, first_wait=0, ended="csandbox-exit="):
    """Ctrl-C through the relay until the session has ended (at its prompt claude ends on a
    second Ctrl-C that follows the first closely); the screen then."""
    for _ in range(10):
        try:
            return pane.wait_for(lambda s: ended in s, deadline=first_wait or 2)
        except AssertionError:
            first_wait = 0
            pane.keys("C-c", "C-c")
    return pane.wait_for(lambda s: ended in s)


def stty_unchanged(pane, but_size=False):
    """`stty -a` after the session as before it (but_size: "speed; rows; columns;" aside)."""
    before, after = pane.stty
    deadline = time.monotonic() + 30
    while not after.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    strip = (lambda t: t.split(";", 3)[3]) if but_size else (lambda t: t)
    return strip(after.read_text()) == strip(before.read_text())


def test_real_claude_renders_reacts_redraws_and_leaves_the_terminal_sane(pane):
    screen = pane.wait_for(lambda s: TRUST in s)
    assert "❯" in screen
    first = selected(screen)
    # Arrow keys reach it unchanged: the selection moves and comes back.
    move_to_trust(pane, first)
    pane.keys("Up")
    pane.wait_for(lambda s: selected(s) == first)
    # A narrower window: claude gets the new size and redraws wrapped to it. At 100 columns
    # "... or one you trust? (Like" is one line; cut at 60 by the terminal it would read
    # "one yo" / "u trust?" (or lose the end); wrapped by claude, the words stay whole.
    pane.tmux("resize-window", "-t", "0", "-x", "60", "-y", "25")
    pane.wait_for(lambda s: TRUST in s and {"one", "you", "trust?"} <= set(s.split()))
    # "No, exit" is the first choice: Enter ends the session. (Should a late key have moved
    # the selection after all, the session that starts ends on Ctrl-C.)
    # claude may repaint the prompt and drop a key meanwhile: Enter again while it shows.
    for _ in range(10):
        pane.keys("Enter")
        try:
            pane.wait_for(lambda s: TRUST not in s or "csandbox-exit=" in s, deadline=3)
            break
        except AssertionError:
            pass
    exit_on_ctrl_c(pane, first_wait=5)
    # The same terminal modes, with the size it has now.
    assert stty_unchanged(pane, but_size=True)


def test_real_claude_session_exits_on_ctrl_c_and_leaves_the_terminal_sane(pane):
    trust_folder(pane, lambda s: "bypass permissions on" in s.lower() or "csandbox-exit=" in s)
    screen = exit_on_ctrl_c(pane)
    assert "csandbox-exit=0" in screen
    assert stty_unchanged(pane)


BYPASS_DIALOG = "Bypass Permissions mode"


@pytest.fixture
def fresh_pane(tmp_path, profiles):
    """A profile that never accepted bypass mode, launched twice in a row."""
    d = profiles.add(settings='{"theme": "dark"}\n')
    (d / ".claude.json").write_text(json.dumps({
        "hasCompletedOnboarding": True, "theme": "dark",
        "customApiKeyResponses": {"approved": [API_KEY[-20:]], "rejected": []}}))
    env = profiles.env(ANTHROPIC_API_KEY=API_KEY,
                       CLAUDE_PROFILE_SANDBOX_FORWARD_ENV="ANTHROPIC_API_KEY",
                       CLAUDE_PROFILE_CLAUDE_BIN=CLAUDE, TMUX=None)
    command = (f"for i in 1 2; do {CSANDBOX} run work; echo csandbox-exit-$i=$?; done; "
               "sleep 600")
    p = Pane(tmp_path, command, str(profiles.project), env)
    p.profile = d
    yield p
    p.kill()


def test_real_claude_never_asks_to_accept_bypass_mode_the_sandbox_chose(fresh_pane):
    """csandbox adds --dangerously-skip-permissions; claude would ask on every launch (its
    answer lands in the settings copy, made anew each time) with "No, exit" as the default.
    The copy records the acceptance, so neither launch shows the dialog."""
    pane = fresh_pane
    settings_before = (pane.profile / "settings.json").read_text()
    for i in (1, 2):
        # What the screen shows below the line the previous launch ended with.
        def now(s, i=i):
            return s.split(f"csandbox-exit-{i - 1}=")[-1]
        screen = now(trust_folder(pane, lambda s: "bypass permissions on" in now(s).lower()
                                  or BYPASS_DIALOG in now(s)))
        assert BYPASS_DIALOG not in screen, screen
        assert "bypass permissions on" in screen.lower(), screen
        exit_on_ctrl_c(pane, ended=f"csandbox-exit-{i}=")
    # The profile's own settings are the user's: the acceptance lives in the copy only.
    assert (pane.profile / "settings.json").read_text() == settings_before


ACCEPT_PROMPT = "[y/N]"


def test_real_claude_under_tmux_three_launches_one_accept_prompt(tmp_path, profiles):
    """A new profile launched at a terminal, then `claude mcp add` run in the sandbox with
    no terminal (the user asking claude to add an MCP server: a finding), then two more
    launches at a terminal. The second shows the report naming the server with the accept
    prompt; "y" launches claude. Neither the first launch (claude's own state only) nor the
    third (the report accepted) asks: one accept prompt in three launches."""
    d = profiles.add()
    (d / ".claude.json").write_text(json.dumps({
        "hasCompletedOnboarding": True, "theme": "dark", "bypassPermissionsModeAccepted": True,
        "customApiKeyResponses": {"approved": [API_KEY[-20:]], "rejected": []}}))
    env = profiles.env(ANTHROPIC_API_KEY=API_KEY,
                       CLAUDE_PROFILE_SANDBOX_FORWARD_ENV="ANTHROPIC_API_KEY",
                       CLAUDE_PROFILE_CLAUDE_BIN=CLAUDE, TMUX=None)
    session = lambda s: "bypass permissions on" in s.lower() or "csandbox-exit=" in s  # noqa
    prompts = 0

    def launch():
        # A tmux server of its own per launch (a socket the last one's server is still
        # leaving is not reused).
        where = tmp_path / f"launch-{len(list(tmp_path.glob('launch-*'))) + 1}"
        where.mkdir()
        pane = Pane(where, f"{CSANDBOX} run work; echo csandbox-exit=$?; sleep 600",
                    str(profiles.project), env)
        pane.history = lambda: pane.tmux("capture-pane", "-p", "-S", "-", "-t", "0")
        return pane

    def seen(pane, screens):
        """Every screen polled so far, and the whole history now."""
        return "\n".join(screens + [pane.history()])

    def to_claude(pane, screens):
        """Watch the screen until claude's session shows, recording each screen."""
        def watch(s):
            screens.append(s)
            return session(s) or TRUST in s
        pane.wait_for(watch, deadline=90)
        screen = trust_folder(pane, session)
        screens.append(screen)
        assert "csandbox-exit=" not in screen, seen(pane, screens)
        assert "bypass permissions on" in screen.lower(), screen
        return screen

    # Launch 1: a brand-new profile reaches claude without a report to accept.
    pane, screens = launch(), []
    try:
        to_claude(pane, screens)
        end = exit_on_ctrl_c(pane)
        assert "csandbox-exit=0" in end, end
        everything = seen(pane, screens)
        assert ACCEPT_PROMPT not in everything, everything
        assert "Refusing to start" not in everything, everything
    finally:
        pane.kill()

    # claude's own `mcp add`, in the sandbox, with no terminal: it succeeds and the report
    # after the session names the server.
    r = profiles.run(args=["mcp", "add", "srv", "-s", "user", "--", "/bin/echo", "hi"],
                     env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    finding = [line for line in r.stderr.splitlines()
               if "MCP server (user) in" in line and ": srv (" in line]
    assert finding, r.stderr

    # Launch 2: the report names srv and asks once; "y" accepts and launches claude.
    pane, screens = launch(), []
    try:
        screen = pane.wait_for(lambda s: ACCEPT_PROMPT in s or session(s), deadline=90)
        assert ACCEPT_PROMPT in screen, screen
        assert screen.count(ACCEPT_PROMPT) == 1, screen
        flat = "".join(screen.splitlines())  # the report's long lines, unwrapped
        assert "MCP server (user) in" in flat and ".claude.json: srv (" in flat, screen
        prompts += 1
        pane.keys("y")
        to_claude(pane, screens)
        end = exit_on_ctrl_c(pane)
        assert "csandbox-exit=0" in end, end
        everything = seen(pane, screens)
        assert "Refusing to start" not in everything, everything
        assert pane.history().count(ACCEPT_PROMPT) <= 1, pane.history()
    finally:
        pane.kill()

    # Launch 3: accepted, so claude starts without asking.
    pane, screens = launch(), []
    try:
        to_claude(pane, screens)
        end = exit_on_ctrl_c(pane)
        assert "csandbox-exit=0" in end, end
        everything = seen(pane, screens)
        assert ACCEPT_PROMPT not in everything, everything
        assert "Refusing to start" not in everything, everything
    finally:
        pane.kill()
    assert prompts == 1
