"""csandbox egress-log PROFILE: the refusals of the profile's newest allowlist session, by
the profile's name."""
import subprocess

from conftest import CSANDBOX
from test_run import Profiles, shell_claude


def test_egress_log_prints_the_newest_sessions_refusals(tmp_path):
    profiles = Profiles(tmp_path)
    profiles.add()
    r = subprocess.run([CSANDBOX, "egress-log", "work"], env=profiles.env(),
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and "no egress log yet" in r.stderr and r.stdout == "", r.stderr
    shell_claude(profiles, "getent hosts denied.csandbox.test; exit 0\n")
    r = profiles.run(env=profiles.env(CLAUDE_PROFILE_SANDBOX_EGRESS="allowlist"))
    assert r.returncode == 0, r.stderr
    shown = subprocess.run([CSANDBOX, "egress-log", "work"], env=profiles.env(),
                           capture_output=True, text=True, timeout=30)
    assert shown.returncode == 0, shown.stderr
    assert shown.stderr.startswith(str(profiles.state()) + "/egress-"), shown.stderr
    assert "denied.csandbox.test" in shown.stdout, shown.stdout
    assert shown.stderr.strip() in r.stderr
    r = subprocess.run([CSANDBOX, "egress-log"], env=profiles.env(), capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 125 and "PROFILE" in r.stderr
