"""The payload's environment is built from scratch, then changed in command-line order."""
import os
import pwd

from conftest import base_env

HOME = pwd.getpwuid(os.getuid()).pw_dir

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
ENV_FILE = "# a comment\n\nA=from-file\nB=two words\nC=x=y\n\n#D=commented\n"


def test_env_is_built_from_scratch(csb, rootfs):
    for rf in (None, rootfs):
        env = csb.probe(rootfs=rf, env=base_env(TERM="xterm-csb"))["env"]
        assert env == {"PATH": DEFAULT_PATH, "TERM": "xterm-csb", "HOME": HOME}
        assert "CSB_LEAK_MARKER" not in env


def test_term_defaults_to_dumb_when_unset(csb):
    assert csb.probe(env=base_env(TERM=None))["env"]["TERM"] == "dumb"


def test_setenv_and_unsetenv(csb):
    env = csb.probe(opts=["--setenv", "FOO", "bar baz", "--setenv", "EMPTY", "",
                          "--unsetenv", "TERM", "--setenv", "PATH", "/bin"])["env"]
    assert env == {"FOO": "bar baz", "EMPTY": "", "PATH": "/bin", "HOME": HOME}


def test_env_file_skips_comments_and_blank_lines(csb, tmp_path):
    f = tmp_path / "env"
    f.write_text(ENV_FILE)
    env = csb.probe(opts=["--env-file", str(f)])["env"]
    assert env["A"] == "from-file"
    assert env["B"] == "two words"
    assert env["C"] == "x=y"
    assert "D" not in env and "#D" not in env
    assert set(env) == {"PATH", "TERM", "HOME", "A", "B", "C"}


def test_env_file_skips_whitespace_only_lines(csb, tmp_path):
    f = tmp_path / "env"
    f.write_text("A=1\n   \n\t\nB=2\n")
    env = csb.probe(opts=["--env-file", str(f)])["env"]
    assert (env["A"], env["B"]) == ("1", "2")


def test_env_options_apply_in_command_line_order(csb, tmp_path):
    f = tmp_path / "env"
    f.write_text(ENV_FILE)
    env = csb.probe(opts=["--setenv", "A", "first", "--env-file", str(f)])["env"]
    assert env["A"] == "from-file"
    env = csb.probe(opts=["--env-file", str(f), "--setenv", "A", "last"])["env"]
    assert env["A"] == "last"
    env = csb.probe(opts=["--env-file", str(f), "--unsetenv", "B"])["env"]
    assert "B" not in env
    env = csb.probe(opts=["--unsetenv", "B", "--env-file", str(f)])["env"]
    assert env["B"] == "two words"


def test_env_fd_reads_variables_from_descriptor(csb):
    r, w = os.pipe()
    try:
        os.write(w, b"# from fd\nSECRET=s3cret\nOTHER=o\n")
        os.close(w)
        w = -1
        env = csb.probe(opts=["--env-fd", str(r), "--setenv", "OTHER", "over"],
                        pass_fds=(r,))["env"]
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)
    assert env["SECRET"] == "s3cret"
    assert env["OTHER"] == "over"


def test_env_fd_is_not_inherited_by_payload(csb):
    r, w = os.pipe()
    os.write(w, b"X=1\n")
    os.close(w)
    try:
        report = csb.probe(opts=["--env-fd", str(r)], pass_fds=(r,))
    finally:
        os.close(r)
    assert report["env"]["X"] == "1"
    assert sorted(fd["fd"] for fd in report["fds"]) == [0, 1, 2], report["fds"]


def test_plan_redacts_env_file_and_env_fd_values(csb, tmp_path):
    f = tmp_path / "env"
    f.write_text("TOKEN=very-secret\n")
    r, w = os.pipe()
    os.write(w, b"FDTOKEN=also-secret\n")
    os.close(w)
    try:
        plan = csb.plan(["--env-file", str(f), "--env-fd", str(r), "--setenv", "VISIBLE", "v",
                         "--", "/bin/true"], pass_fds=(r,))
    finally:
        os.close(r)
    env = {e["name"]: e["value"] for e in plan["env"]}
    assert env["TOKEN"] == "<redacted>"
    assert env["FDTOKEN"] == "<redacted>"
    assert env["VISIBLE"] == "v"
    assert "very-secret" not in str(plan) and "also-secret" not in str(plan)
