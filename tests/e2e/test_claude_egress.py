"""The real Claude Code under CLAUDE_PROFILE_SANDBOX_EGRESS=allowlist with no entries of
the user's: the built-in list is enough for claude to start and paint its first screen
(the folder trust prompt) in a tmux pane, and the session ends cleanly."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from conftest import CSANDBOX  # noqa: E402
from test_claude import CLAUDE, profiles  # noqa: E402,F401 (the fixture)
from test_claude_tty import API_KEY, TRUST, Pane, exit_on_ctrl_c  # noqa: E402


def test_real_claude_reaches_its_prompt_under_an_empty_allowlist(tmp_path, profiles):
    d = profiles.add()
    (d / ".claude.json").write_text(json.dumps({
        "hasCompletedOnboarding": True, "theme": "dark", "bypassPermissionsModeAccepted": True,
        "customApiKeyResponses": {"approved": [API_KEY[-20:]], "rejected": []}}))
    env = profiles.env(ANTHROPIC_API_KEY=API_KEY,
                       CLAUDE_PROFILE_SANDBOX_FORWARD_ENV="ANTHROPIC_API_KEY",
                       CLAUDE_PROFILE_CLAUDE_BIN=CLAUDE, TMUX=None,
                       CLAUDE_PROFILE_SANDBOX_EGRESS="allowlist")
    pane = Pane(tmp_path, f"{CSANDBOX} run work; echo csandbox-exit=$?; sleep 600",
                str(profiles.project), env)
    try:
        screen = pane.wait_for(lambda s: TRUST in s, deadline=90)
        assert "❯" in screen
        screen = exit_on_ctrl_c(pane, first_wait=2)
        assert "csandbox-exit=" in screen and "csandbox: egress allowlist" not in screen
    finally:
        pane.kill()
