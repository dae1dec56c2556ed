"""The session's terminal and process group: the sandbox runs in a session of its own, and
when csandbox's stdin, stdout or stderr is a terminal the payload gets a pty of the
sandbox's devpts, relayed to the caller's terminal.

The harness plays terminal emulator and job-control shell: it opens a pty, starts csandbox
on its slave side as the session leader with that slave as controlling terminal, and talks
to it through the master. The caller's terminal is that slave; its termios and line
discipline are compared before and after every session."""
import ctypes
import fcntl
import json
import os
import re
import select
import signal
import struct
import subprocess
import termios
import time

import pytest

import test_run
from conftest import CSANDBOX, HOST_PROBE, PROBE, TIMEOUT, base_env, procs_with, wait_until

PROBE_OPTS = ["--ro-bind", PROBE, HOST_PROBE]


def _controlling_tty():
    fcntl.ioctl(2, termios.TIOCSCTTY, 0)  # stderr: the terminal in every test


def set_size(fd, rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


class Term:
    """csandbox on a terminal of the test's own."""

    def __init__(self, argv, rows=33, cols=101, env=None, stdin=None, stdout=None, cwd="/",
                 typeahead=b"", echoctl=True):
        self.master, self.slave = os.openpty()
        set_size(self.slave, rows, cols)
        if not echoctl:  # control characters echoed as they are, not as ^X
            attrs = termios.tcgetattr(self.slave)
            attrs[3] &= ~termios.ECHOCTL
            termios.tcsetattr(self.slave, termios.TCSANOW, attrs)
        # Typed before csandbox starts, so its terminal holds it in canonical mode.
        os.write(self.master, typeahead)
        self.before = self.modes()
        self.out = b""
        self.status = None
        self.proc = subprocess.Popen(
            argv, stdin=self.slave if stdin is None else stdin,
            stdout=self.slave if stdout is None else stdout, stderr=self.slave,
            start_new_session=True, preexec_fn=_controlling_tty, env=env or base_env(), cwd=cwd)

    def modes(self):
        """The whole termios and the line discipline of the caller's terminal."""
        ldisc = struct.unpack("i", fcntl.ioctl(self.slave, termios.TIOCGETD, b"\0" * 4))[0]
        return termios.tcgetattr(self.slave), ldisc

    def send(self, data):
        os.write(self.master, data)

    def read_some(self, timeout):
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return False
        try:
            chunk = os.read(self.master, 65536)
        except OSError:
            return False
        self.out += chunk
        return bool(chunk)

    def expect(self, needle, deadline=TIMEOUT):
        """Read until needle has arrived; returns everything after it (and keeps it)."""
        end = time.monotonic() + deadline
        while needle not in self.out:
            left = end - time.monotonic()
            if left <= 0 or not self.read_some(left) and self.proc.poll() is not None:
                break
        assert needle in self.out, f"no {needle!r} in {self.out!r}"
        return self.out[self.out.index(needle) + len(needle):]

    def drain_until_exit(self, deadline=TIMEOUT):
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            self.read_some(0.05)
            if self.proc.poll() is not None:
                while self.read_some(0.05):
                    pass
                return self.proc.returncode
        self.proc.kill()
        raise AssertionError(f"csandbox did not exit; output so far {self.out!r}")

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for fd in (self.master, self.slave):
            try:
                os.close(fd)
            except OSError:
                pass


@pytest.fixture
def term():
    made = []

    def start(args, cmd="exec", **kw):
        t = Term([CSANDBOX, cmd, *args], **kw)
        made.append(t)
        return t
    yield start
    for t in made:
        t.close()


def probe_in_pty(term, *probe_args, opts=(), **kw):
    return term([*PROBE_OPTS, *opts, "--", HOST_PROBE, *probe_args], **kw)


def payload_pids(marker):
    """The probe's own pids (csandbox and its pid 1 carry the marker in their argv too)."""
    pids = []
    for pid in procs_with(marker):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if f.read().split(b"\0")[0] == HOST_PROBE.encode():
                    pids.append(pid)
        except OSError:
            pass
    return pids


TITLE_PUSH = b"\x1b[22;0t"
TITLE_POP = b"\x1b[23;0t"
# csandbox's own sequences after the session's last byte, when the session changed the
# terminal's state: escape sequences, SI, a newline at the bottom after origin mode.
RESTORE = re.compile(rb"\x18?(?:\x1b\[9999;1H\n|\x1b\[[<?]?[0-9;]*[a-zA-Z]|\x1b[78=>]|\x1b[()]B|"
                     rb"\x0f)+\Z")


def session_bytes(out):
    """What the session wrote, without what csandbox restores after it."""
    return RESTORE.sub(b"", out, count=1)


def tty_info(t):
    line = t.expect(b"{")
    return json.loads(b"{" + line.split(b"}")[0] + b"}")


# --- what the payload sees ----------------------------------------------------------------

def test_payload_gets_a_pty_of_its_own_with_the_callers_size(term):
    t = probe_in_pty(term, "tty-info", rows=33, cols=101)
    info = tty_info(t)
    assert t.drain_until_exit() == 0
    assert info["isatty"] == [1, 1, 1]
    assert (info["rows"], info["cols"]) == (33, 101)
    # The foreground job of its pty, in a group of its own, not the session's leader.
    assert info["foreground"] == 1 and info["pgrp_leader"] == 1
    assert info["session_leader"] == 0
    assert t.modes() == t.before


def test_resize_is_passed_on_to_the_payload(term):
    t = probe_in_pty(term, "tty-winch", "2", rows=33, cols=101)
    t.expect(b"size 33 101")
    set_size(t.slave, 40, 120)  # the kernel sends csandbox SIGWINCH
    t.expect(b"size 40 120")
    set_size(t.slave, 50, 132)
    t.expect(b"size 50 132")
    assert t.drain_until_exit() == 0


SEQUENCES = [
    b"\x1b[97;5u",                      # kitty keyboard protocol: Ctrl-a
    b"\x1b[99;5u",                      # Ctrl-c, as a KKP report
    b"\x1b[200~pasted\ttext\r\n\x1b[201~",  # bracketed paste
    b"\x1b]52;c;aGVsbG8gY2xpcGJvYXJk\x07",  # OSC 52 clipboard write
    b"\x1b]9;notification\x1b\\",       # OSC 9 notification
    b"\x1b[<0;12;7M\x1b[<0;12;7m",      # SGR mouse report
    b"\x1bP+q544e\x1b\\",               # capability query (XTGETTCAP)
]


def test_every_byte_value_and_escape_sequence_round_trips_unchanged(term):
    data = bytes(range(256)) + b"".join(SEQUENCES) + bytes(range(255, -1, -1))
    t = probe_in_pty(term, "tty-echo", str(len(data)))
    t.expect(b"ready\n")
    t.out = b""
    for i in range(0, len(data), 64):
        t.send(data[i:i + 64])
    assert t.drain_until_exit() == 0
    assert session_bytes(t.out) == data
    assert t.modes() == t.before


def test_a_terminal_slower_than_the_payload_loses_nothing(term):
    t = term(["--", "sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' a; echo; echo end"])
    time.sleep(1.5)  # the terminal reads nothing: the relay's buffers fill, the payload waits
    assert t.drain_until_exit() == 0
    assert t.out.count(b"a") == 3000000
    assert t.out == b"a" * 3000000 + b"\r\nend\r\n"  # and nothing of csandbox's


@pytest.mark.parametrize("key,sig", [(b"\x03", signal.SIGINT), (b"\x1c", signal.SIGQUIT)],
                         ids=["ctrl-c", "ctrl-backslash"])
def test_terminal_keys_reach_the_payload_as_its_signals(term, key, sig):
    t = probe_in_pty(term, "wait-signal")
    t.expect(b"ready")
    t.send(key)
    t.expect(signal.Signals(sig).name[3:].encode())
    assert t.drain_until_exit() == 128 + sig
    assert t.modes() == t.before


def test_eof_passes_through_and_the_exit_status_is_the_payloads(term):
    t = term(["--", "sh", "-c", "cat; exit 7"])
    t.send(b"line\r")
    t.expect(b"line\r\nline\r\n")
    t.send(b"\x04")
    assert t.drain_until_exit() == 7
    assert t.modes() == t.before


def _wait_stopped(pid, deadline=TIMEOUT):
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        p, status = os.waitpid(pid, os.WUNTRACED | os.WNOHANG)
        if p == pid:
            return status
        time.sleep(0.02)
    raise AssertionError("csandbox did not stop")


def test_ctrl_z_stops_the_session_and_sigcont_resumes_it(term):
    t = term(["--", "sh", "-c", "echo ready; exec cat"])
    t.expect(b"ready")
    t.send(b"one\r")
    t.expect(b"one\r\none\r\n")
    t.send(b"\x1a")
    status = _wait_stopped(t.proc.pid)
    assert os.WIFSTOPPED(status), status
    # The shell gets its terminal back as it was.
    assert t.modes() == t.before
    # And the session is stopped: nothing typed now is answered.
    t.out = b""
    os.kill(t.proc.pid, signal.SIGCONT)
    t.send(b"two\r")
    t.expect(b"two\r\ntwo\r\n")
    t.send(b"\x04")
    assert t.drain_until_exit() == 0
    assert t.modes() == t.before


def test_resume_passes_the_size_the_terminal_got_while_stopped(term):
    t = probe_in_pty(term, "tty-winch", "1", rows=33, cols=101)
    t.expect(b"size 33 101")
    t.send(b"\x1a")
    assert os.WIFSTOPPED(_wait_stopped(t.proc.pid))
    set_size(t.slave, 44, 88)  # while the shell has the terminal
    os.kill(t.proc.pid, signal.SIGCONT)
    t.expect(b"size 44 88")
    assert t.drain_until_exit() == 0
    assert t.modes() == t.before


def test_sigcont_while_running_keeps_the_modes_to_restore(term):
    # `fg` of a running job sends SIGCONT too; the modes saved at the start stay the ones
    # put back (not the raw ones csandbox set itself).
    t = term(["--", "sh", "-c", "echo ready; exec cat"])
    t.expect(b"ready")
    os.kill(t.proc.pid, signal.SIGCONT)
    t.send(b"x\r")
    t.expect(b"x\r\nx\r\n")
    t.send(b"\x04")
    assert t.drain_until_exit() == 0
    assert t.modes() == t.before


def test_hangup_of_the_terminal_ends_the_session(term, marker):
    t = probe_in_pty(term, "sleep", "60", marker)
    assert wait_until(lambda: payload_pids(marker))
    os.close(t.master)
    t.proc.wait(timeout=TIMEOUT)
    assert wait_until(lambda: not procs_with(marker))


RESETS = [b"\x1b[<1u", b"\x1b[?2004l", b"\x1b[?1000l", b"\x1b[?1006l", b"\x1b[?25h",
          b"\x1b[?1049l"]


def test_modes_left_on_by_a_killed_payload_are_reset_and_the_terminal_restored(term, marker):
    t = probe_in_pty(term, "tty-modes", "60", marker)
    t.expect(b"ready\n")
    t.out = b""
    pids = payload_pids(marker)
    assert len(pids) == 1
    os.kill(pids[0], signal.SIGKILL)
    assert t.drain_until_exit() == 128 + signal.SIGKILL
    for seq in RESETS:
        assert seq in t.out, (seq, t.out)
    # Back to the primary screen last, after the cursor is shown again.
    assert t.out.index(b"\x1b[?25h") < t.out.index(b"\x1b[?1049l")
    assert t.modes() == t.before


def test_a_suspended_session_leaves_its_modes_and_gets_them_back(term, marker):
    t = probe_in_pty(term, "tty-modes", "60", marker)
    t.expect(b"ready\n")
    t.out = b""
    os.killpg(t.proc.pid, signal.SIGTSTP)  # its pty is raw: no Ctrl-Z byte would stop it
    assert os.WIFSTOPPED(_wait_stopped(t.proc.pid))
    while t.read_some(0.2):
        pass
    for seq in RESETS:
        assert seq in t.out, (seq, t.out)
    assert t.modes() == t.before
    t.out = b""
    os.kill(t.proc.pid, signal.SIGCONT)
    t.expect(b"\x1b[>1u")
    assert t.out.index(b"\x1b[?1049h") < t.out.index(b"\x1b[?25l")
    assert b"\x1b[?2004h" in t.out and b"\x1b[?1006h" in t.out
    t.out = b""
    os.kill(payload_pids(marker)[0], signal.SIGKILL)
    assert t.drain_until_exit() == 128 + signal.SIGKILL
    assert b"\x1b[?1049l" in t.out
    assert t.modes() == t.before


def test_an_alternate_screen_the_payload_left_is_not_left_again(term):
    # 1049l off the alternate screen would restore a stale cursor position.
    t = term(["--", "sh", "-c", r"printf '\033[?1049h\033[?25l\033[?25h\033[?1049l'; echo ready"])
    t.expect(b"ready")
    assert t.drain_until_exit() == 0
    assert t.out.count(b"\x1b[?1049l") == 1


# A session that leaves the terminal unreadable and says all is well: concealed black on
# black set before the alternate screen saves it, the DEC line-drawing set in G0 and G1 and
# shifted in, a scroll region with origin mode, insert mode, no autowrap, a hidden cursor,
# every mouse, paste and focus report, the application keypad, and a title.
HOSTILE = (b"before\n\x1b[8;30;40m\x1b(0\x1b)0\x0e\x1b[?1049h\x1b[5;6r\x1b[4h\x1b[?6h"
           b"\x1b[?7l\x1b[?25l\x1b[?1000h\x1b[?1002h\x1b[?1003h\x1b[?1006h\x1b[?2004h"
           b"\x1b[?1004h\x1b=\x1b[?1h\x1b]0;all good\x07\x1b]2;trusted\x07lqqk")
# What ends the session's effects, whatever the parser saw of them.
FULL_RESET = [b"\x1b[?1049l", b"\x1b[m", b"\x1b(B", b"\x1b)B", b"\x0f", b"\x1b[?6l",
              b"\x1b[r", b"\x1b[4l", b"\x1b[?7h", b"\x1b[?25h", b"\x1b[?1000l",
              b"\x1b[?1002l", b"\x1b[?1003l", b"\x1b[?1006l", b"\x1b[?2004l", b"\x1b[?1004l",
              b"\x1b>", b"\x1b[?1l", b"\x1b[23;0t"]
AFTER = b"csandbox: trust report: all quiet\r\n"  # what csandbox prints next


def _printf(data):
    """A shell command printing data exactly (octal escapes, no format directives)."""
    return "printf '" + "".join(
        chr(b) if 0x20 <= b < 0x7f and chr(b) not in "\\'%" else f"\\{b:03o}"
        for b in data) + "'"


def _hostile_session(term):
    t = term(["--tty=pty", "--", "sh", "-c", _printf(HOSTILE)], rows=24, cols=80)
    assert t.drain_until_exit() == 0
    assert HOSTILE[-20:] in t.out, t.out
    return t


def test_the_terminal_is_fully_reset_after_a_hostile_session(term):
    t = _hostile_session(term)
    # The caller's title saved just before the session's first title change, nothing else.
    title = HOSTILE.index(b"\x1b]0;")
    seen = (HOSTILE[:title] + TITLE_PUSH + HOSTILE[title:]).replace(b"\n", b"\r\n")
    assert t.out.startswith(seen), t.out
    after = t.out[len(seen):]
    for seq in FULL_RESET:
        assert seq in after, (seq, after)
    # Exactly what the session changed, undone: the modes (the primary screen last), the
    # attributes and charsets the primary screen had saved, insert mode, origin mode and
    # the scroll region (a new line at the bottom), the title popped last. The screen is
    # never cleared (scrollback stays).
    assert after == (b"\x1b>\x1b[?2004l\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1004l"
                     b"\x1b[?1006l\x1b[?25h\x1b[?1l\x1b[?7h\x1b[?1049l\x1b[m\x1b(B\x1b)B\x0f"
                     b"\x1b[4l\x1b[?6l\x1b[r\x1b[9999;1H\n\x1b[23;0t"), after
    assert t.modes() == t.before


def test_what_csandbox_prints_after_a_hostile_session_renders_plainly(term):
    """The whole output through a terminal emulator model (pyte): the line printed after
    the session is visible text, default colours and attributes, ASCII, on the screen."""
    pyte = pytest.importorskip("pyte")

    class Screen(pyte.Screen):
        def set_margins(self, top=None, bottom=None):
            # pyte 0.8 reads a bare CSI r as "top 1, bottom unchanged"; a VT100 (and every
            # terminal since) as the whole screen.
            super().set_margins(None if not top and bottom is None else top, bottom)

    t = _hostile_session(term)
    screen = Screen(80, 24)
    stream = pyte.ByteStream(screen)
    stream.use_utf8 = False  # pyte honours charsets (ESC ( 0, SO) only then; xterm always
    stream.feed(t.out + AFTER)
    text = AFTER.decode().rstrip()
    rows = [y for y, line in enumerate(screen.display) if line.startswith(text)]
    assert len(rows) == 1, screen.display
    for x, ch in enumerate(text):
        cell = screen.buffer[rows[0]][x]
        assert cell.data == ch, (x, cell)
        assert (cell.fg, cell.bg, cell.reverse, cell.bold) == ("default", "default", False,
                                                               False), (x, cell)
    # And the line after it too: the cursor shown, wrapping on, no insert or origin mode,
    # no scroll region, G0 shifted in and ASCII.
    assert not screen.cursor.hidden and screen.cursor.y == rows[0] + 1
    assert pyte.modes.DECAWM in screen.mode and pyte.modes.IRM not in screen.mode
    assert pyte.modes.DECOM not in screen.mode and screen.margins in (None, (0, 23))
    assert screen.charset == 0 and screen.g0_charset == pyte.charsets.LAT1_MAP
    # The session's own text was drawn as it asked (line drawing: pyte has no alternate
    # screen), and is still there: nothing was cleared.
    assert any("\u250c\u2500\u2500\u2510" in line for line in screen.display), screen.display


# --- only the session's bytes, and exactly its changes undone -------------------------------

def test_under_script_a_plain_session_records_exactly_its_output():
    """script(1) records what reaches the terminal: the session's bytes, nothing before its
    first (no title push) and nothing after its last (no reset block)."""
    p = subprocess.run(["script", "-qc", f"{CSANDBOX} exec -- echo X", "/dev/null"],
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=TIMEOUT,
                       env=base_env())
    assert p.returncode == 0, p
    assert p.stdout == b"X\r\n"


def test_a_session_that_changes_nothing_gets_no_bytes_of_csandboxs(term):
    # Attributes, charsets and an insert mode switched back, a screen cleared, OSC 52 and
    # a hyperlink: text and state that ends as it began.
    data = (b"plain \x1b[1;31mred\x1b[m \x1b(0q\x1b(B \x0eq\x0f \x1b[4hi\x1b[4l\x1b[2J\x1b[H"
            b"\x1b]52;c;eA==\x07\x1b]8;;http://x/\x1b\\link\x1b]8;;\x1b\\\n")
    t = term(["--", "sh", "-c", _printf(data)])
    assert t.drain_until_exit() == 0
    assert t.out == data.replace(b"\n", b"\r\n")
    assert t.modes() == t.before


# A title, attributes, the alternate screen, a mouse mode and bracketed paste.
CHANGES = b"\x1b]0;session title\x07\x1b[1;31m\x1b[?1049h\x1b[?1000h\x1b[?2004hon the alt screen"
CHANGES_UNDONE = b"\x1b[?2004l\x1b[?1000l\x1b[?1049l\x1b[m\x1b[23;0t"


def test_a_session_that_changes_the_terminal_gets_exactly_that_undone(term):
    pyte = pytest.importorskip("pyte")
    t = term(["--", "sh", "-c", _printf(CHANGES)], rows=24, cols=80)
    assert t.drain_until_exit() == 0
    # The push just before the title change (the first byte), the undo just after the last.
    assert t.out == TITLE_PUSH + CHANGES + CHANGES_UNDONE, t.out
    # Through a terminal model: every mode and attribute as on a fresh screen.
    fresh, screen = pyte.Screen(80, 24), pyte.Screen(80, 24)
    pyte.ByteStream(screen).feed(t.out)
    assert screen.mode == fresh.mode
    assert screen.cursor.attrs == fresh.cursor.attrs
    assert t.modes() == t.before


def test_a_sequence_split_across_writes_is_still_tracked(term):
    # Each piece a write of its own, with a pause between (the relay reads them apart): a
    # mode cut in its parameter, a title change cut after its ESC and after its number.
    parts = [b"a\x1b[?20", b"04hb\x1b", b"]2", b";split title\x07c"]
    script = "; sleep 0.3; ".join(_printf(x) for x in parts)
    t = term(["--", "sh", "-c", script])
    assert t.drain_until_exit() == 0
    assert t.out == (b"a\x1b[?2004hb" + TITLE_PUSH + b"\x1b]2;split title\x07c"
                     + b"\x1b[?2004l" + TITLE_POP), t.out


def test_stdin_a_terminal_stdout_a_pipe_keeps_the_terminals_output_processing(term):
    """Raw input only: the caller's terminal keeps OPOST and ONLCR while the session runs,
    so what others write to it does not staircase; the session's stderr reaches it with one
    CR per line, and the pipe gets the session's stdout alone."""
    r, w = os.pipe()
    t = term(["--", "sh", "-c", "echo out; echo err >&2; read x; echo \"got $x\" >&2"],
             stdout=w)
    os.close(w)
    t.expect(b"err\r\n")
    attrs = termios.tcgetattr(t.slave)
    assert attrs[3] & termios.ICANON == 0  # raw input: csandbox holds the terminal
    assert attrs[1] & termios.OPOST and attrs[1] & termios.ONLCR, attrs
    os.write(t.slave, b"from outside\n")  # another writer to the terminal
    t.expect(b"from outside\r\n")
    t.send(b"go\r")
    assert t.drain_until_exit() == 0
    assert t.out == b"err\r\nfrom outside\r\ngo\r\ngot go\r\n", t.out
    assert os.read(r, 65536) == b"out\n"
    os.close(r)
    assert t.modes() == t.before


def test_an_eof_typed_ahead_never_reaches_the_screen_as_a_nul(term):
    """script(1) sends ^D when its own input ends, often before csandbox takes the terminal
    raw; in canonical mode the kernel keeps it as a NUL byte, which raw mode used to hand
    the session as typed, for its pty to echo onto the caller's screen."""
    bad = []
    for i in range(50):
        t = term(["--tty=pty", "--", "printf", "hello"], typeahead=b"\x04", echoctl=False)
        assert t.drain_until_exit() == 0
        if t.out != b"hello":
            bad.append((i, t.out))
        t.close()
    assert not bad, f"{len(bad)} of 50 launches: {bad[:3]}"


def test_input_typed_ahead_reaches_the_session_eof_included(term):
    t = term(["--tty=pty", "--", "sh", "-c", "cat; echo cat ended"], typeahead=b"one\ntwo\x04\x04",
             echoctl=False)
    assert t.drain_until_exit() == 0
    assert b"\0" not in t.out
    assert b"one\r\n" in t.out and b"two" in t.out and b"cat ended" in t.out


def test_terminal_restored_when_csandbox_gets_sigterm(term, marker):
    t = probe_in_pty(term, "sleep", "60", marker)
    assert wait_until(lambda: payload_pids(marker))
    t.proc.send_signal(signal.SIGTERM)
    assert t.drain_until_exit() == 128 + signal.SIGTERM
    assert t.modes() == t.before


def test_terminal_restored_after_a_setup_error(term):
    t = term(["--", "/no/such/command"])
    assert t.drain_until_exit() == 127
    assert b"not found" in t.out
    assert t.modes() == t.before


def _stat(pid):
    """comm, state, ppid, pgrp and session of pid."""
    with open(f"/proc/{pid}/stat") as f:
        head, rest = f.read().rsplit(")", 1)
    fields = rest.split()
    return head.split("(", 1)[1], fields[0], int(fields[1]), int(fields[2]), int(fields[3])


def _children(pid):
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if _stat(int(name))[2] == pid:
                    out.append(int(name))
            except (OSError, IndexError):
                pass
    return out


def test_ctrl_z_at_the_callers_terminal_stops_the_session_but_not_pasta(term, marker):
    """Without a relay of its input (stdin a pipe), the terminal's own Ctrl-Z sends SIGTSTP
    to csandbox's job: the session stops with it, pasta (in a session of its own) does
    not, and SIGCONT resumes both."""
    r, w = os.pipe()
    t = probe_in_pty(term, "sleep", "60", marker, opts=["--net", "pasta"], stdin=r)
    assert wait_until(lambda: payload_pids(marker))
    pasta = [pid for pid in _children(t.proc.pid) if _stat(pid)[0].startswith(("pasta", "passt"))]
    assert len(pasta) == 1, [_stat(pid) for pid in _children(t.proc.pid)]
    assert _stat(pasta[0])[4] != t.proc.pid
    os.killpg(t.proc.pid, signal.SIGTSTP)  # what the terminal sends its foreground job
    assert os.WIFSTOPPED(_wait_stopped(t.proc.pid))
    assert _stat(payload_pids(marker)[0])[1] == "T"
    assert _stat(pasta[0])[1] != "T"
    os.kill(t.proc.pid, signal.SIGCONT)
    assert wait_until(lambda: _stat(payload_pids(marker)[0])[1] == "S")
    t.proc.send_signal(signal.SIGTERM)
    assert t.drain_until_exit() == 128 + signal.SIGTERM
    os.close(r)
    os.close(w)
    assert t.modes() == t.before


def test_csandbox_inside_csandbox_on_a_terminal(csb, term):
    """The inner csandbox sees the outer one's pty as its terminal and relays its own."""
    argv = csb.argv(["--ro-bind", PROBE, HOST_PROBE, "--", HOST_PROBE, "tty-info"],
                    tier="csandbox")
    t = term(argv[2:], rows=27, cols=91)
    info = tty_info(t)
    assert t.drain_until_exit() == 0
    assert info["isatty"] == [1, 1, 1] and (info["rows"], info["cols"]) == (27, 91)
    assert info["foreground"] == 1
    assert t.modes() == t.before


# --- the mixed cases and the flag --------------------------------------------------------

def test_stdin_a_pipe_stdout_a_terminal(term):
    r, w = os.pipe()
    os.write(w, b"from the pipe\n")
    os.close(w)
    t = term([*PROBE_OPTS, "--", "sh", "-c", f"{HOST_PROBE} tty-info; cat"], stdin=r)
    os.close(r)
    info = tty_info(t)
    t.expect(b"from the pipe")
    assert t.drain_until_exit() == 0
    assert info["isatty"] == [0, 1, 1]
    # The terminal is not raw, so it does the output processing: once, not on the pty too.
    assert t.out.endswith(b"}\r\nfrom the pipe\r\n"), t.out
    assert t.modes() == t.before


def test_stdout_a_pipe_stdin_a_terminal(term):
    r, w = os.pipe()
    t = probe_in_pty(term, "tty-info", stdout=w)
    os.close(w)
    assert t.drain_until_exit() == 0
    out = os.read(r, 65536)
    os.close(r)
    info = json.loads(out)
    assert info["isatty"] == [1, 0, 1]
    assert t.modes() == t.before


def test_tty_pty_gives_a_pty_with_no_terminal_around(csb):
    p = csb.run(["--tty=pty", *PROBE_OPTS, "--", HOST_PROBE, "tty-info"])
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout.strip().splitlines()[-1])["isatty"] == [1, 1, 1]
    p = csb.run(["--tty", "pty", "--", "sh", "-c", "read line; echo got:$line"],
                input="typed\n")
    assert "got:typed" in p.stdout


@pytest.mark.parametrize("mode", ["auto", "inherit"])
def test_without_a_terminal_nothing_is_a_tty(csb, mode):
    info = csb.probe("tty-info", opts=[f"--tty={mode}"])
    assert info["isatty"] == [0, 0, 0]
    assert info["pgrp_leader"] == 1 and info["session_leader"] == 0


def test_tty_inherit_passes_the_terminal_itself_in_a_session_of_its_own(term):
    t = probe_in_pty(term, "tty-info", opts=["--tty=inherit"])
    info = tty_info(t)
    assert t.drain_until_exit() == 0
    assert info["isatty"] == [1, 1, 1]
    # Not the sandbox's controlling terminal: its job control stays the caller's.
    assert info["foreground"] == 0 and info["pgrp_leader"] == 1


def test_tty_inherit_keeps_ctrl_c_and_ctrl_z_working(term):
    """The terminal's own signals go to csandbox's job only (the sandbox has a session of
    its own); csandbox passes them on."""
    t = term(["--tty=inherit", "--", "sh", "-c", "echo ready; exec cat"])
    t.expect(b"ready")
    t.send(b"\x1a")
    assert os.WIFSTOPPED(_wait_stopped(t.proc.pid))
    os.kill(t.proc.pid, signal.SIGCONT)
    t.send(b"after\r")
    t.expect(b"after\r\nafter\r\n")  # the terminal's echo, then cat's
    t.send(b"\x03")
    assert t.drain_until_exit() == 128 + signal.SIGINT


def test_plan_shows_whether_a_pty_is_allocated(csb, term):
    assert csb.plan(["--", "true"])["tty"] == {"mode": "auto", "pty": False}
    assert csb.plan(["--tty=pty", "--", "true"])["tty"] == {"mode": "pty", "pty": True}
    t = term(["--plan", "--", "true"])
    assert t.drain_until_exit() == 0
    plan = json.loads(t.out[t.out.index(b"{"):])
    assert plan["tty"] == {"mode": "auto", "pty": True}


def test_bad_tty_value_exits_125(csb):
    p = csb.run(["--tty=maybe", "--", "true"])
    assert p.returncode == 125
    assert "--tty" in p.stderr


def test_run_gives_claude_the_pty(tmp_path):
    profiles = test_run.Profiles(tmp_path)
    profiles.add()
    env = profiles.env(CSB_FAKE_CLAUDE_TTY="1")
    t = Term([CSANDBOX, "run", "work"], env=env, cwd=str(profiles.project))
    try:
        info = tty_info(t)
        assert t.drain_until_exit() == 0
        assert info["isatty"] == [1, 1, 1] and info["foreground"] == 1
        assert t.modes() == t.before
    finally:
        t.close()
    p = subprocess.run([CSANDBOX, "plan", "--tty=inherit", "work"], env=env,
                       cwd=str(profiles.project), capture_output=True, text=True,
                       timeout=TIMEOUT, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["tty"] == {"mode": "inherit", "pty": False}


# --- attacks from inside ------------------------------------------------------------------

@pytest.mark.parametrize("seccomp", ["none", "default"])
def test_terminal_attacks_from_inside_leave_the_callers_terminal_unchanged(term, seccomp):
    """TIOCSETD N_NULL, echo off / intr undefined / eof remapped, and tcsetpgrp, on every
    terminal the payload can reach: they land on the sandbox's own pty."""
    r, w = os.pipe()
    # The result on a pipe: after TIOCSETD N_NULL the sandbox's pty swallows output.
    t = probe_in_pty(term, "tty-attack", opts=["--seccomp", seccomp], stdout=w)
    os.close(w)
    assert t.drain_until_exit() == 0
    result = json.loads(os.read(r, 65536))
    os.close(r)
    assert result["fd0"] == "ok" and result["dev_tty"] == "ok"
    # Unfiltered, the kernel answers (EINVAL where N_NULL is not built in).
    assert result["tiocsetd"] == "EPERM" if seccomp == "default" else \
        result["tiocsetd"] in ("ok", "EINVAL")
    assert t.modes() == t.before


@pytest.mark.parametrize("profile", ["default", "strict"])
def test_tiocsetd_is_refused_by_the_filter(csb, profile):
    assert csb.probe(opts=["--seccomp", profile])["blocked"]["tiocsetd_high"] == "EPERM"


def test_tiocsetd_reaches_the_kernel_without_a_filter(csb):
    assert csb.probe(opts=["--seccomp", "none"])["blocked"]["tiocsetd_high"] == "ok"


libc = ctypes.CDLL(None, use_errno=True)
SYS_ioprio_get = 252  # x86_64


def _ioprio(pid):
    return libc.syscall(SYS_ioprio_get, 1, pid)  # IOPRIO_WHO_PROCESS


def _nice(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[16])


@pytest.mark.parametrize("mode", ["auto", "inherit"])
def test_process_group_calls_from_inside_reach_no_sibling(mode, marker):
    """A script (as cron, CI or make run it): a sibling started before csandbox shares the
    script's process group; kill(0), PRIO_PGRP and IOPRIO_WHO_PGRP from inside miss it."""
    script = (f"{PROBE} sleep 60 {marker} >/dev/null 2>&1 & echo sibling $!; "
              f"{CSANDBOX} exec --tty={mode} --seccomp strict {' '.join(PROBE_OPTS)} -- "
              f"{HOST_PROBE} pgrp-attack; echo status $?; echo script alive")
    p = subprocess.Popen(["sh", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, start_new_session=True, env=base_env())
    try:
        out, err = p.communicate(timeout=TIMEOUT)
        lines = out.decode().splitlines()
        sibling = int(next(x for x in lines if x.startswith("sibling ")).split()[1])
        attack = json.loads(next(x for x in lines if x.startswith("{")))
        # The calls themselves worked, on the sandbox's own group.
        assert attack == {"setpriority": "ok", "ioprio_set": "ok", "kill_term": "ok",
                          "kill_hup": "ok"}
        assert "status 0" in lines and "script alive" in lines, (out, err)
        assert p.returncode == 0
        assert _nice(sibling) == 0
        assert _ioprio(sibling) == _ioprio(os.getpid())
        os.kill(sibling, 0)
        with open(f"/proc/{sibling}/stat") as f:
            assert f.read().rsplit(")", 1)[1].split()[0] in ("S", "R")
    finally:
        if p.poll() is None:
            p.kill()
        for pid in procs_with(marker):
            os.kill(pid, signal.SIGKILL)
