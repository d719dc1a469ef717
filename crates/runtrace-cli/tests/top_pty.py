"""Drives `runtrace top` in a pseudo-terminal (pexpect) and reads its
screen through a terminal emulator (pyte). Run by tests/top.rs:

    top_pty.py live   RUNTRACE DIR TEST_BINARY HANDLE_LINE PLANTED_LINE
    top_pty.py replay RUNTRACE DIR TEST_BINARY HANDLE_LINE PLANTED_LINE

live: starts the demo service (through the test binary) recording into
DIR, runs `runtrace top DIR`, checks that the screen shows the service's
spawn locations, that the long_poll finding naming the planted blocking
call shows within 3 s of the service saying it started blocking, then
kills the service and checks the screen says the data stopped.

replay: DIR holds a finished recording of the demo (blocking from 4 s
on); pause, step back, seek, next finding, sort, filter, details and the
span table's key must change the screen as they should.

Exits non-zero with the last screen on any failure.
"""

import os
import re
import signal
import subprocess
import sys
import time

import pexpect
import pyte

COLS, ROWS = 160, 45


class Term:
    def __init__(self, argv):
        self.screen = pyte.Screen(COLS, ROWS)
        self.stream = pyte.ByteStream(self.screen)
        self.child = pexpect.spawn(
            argv[0], argv[1:], dimensions=(ROWS, COLS), env=dict(os.environ, TERM="xterm-256color")
        )

    def pump(self, secs=0.2):
        end = time.time() + secs
        while True:
            left = end - time.time()
            if left <= 0:
                return
            try:
                data = self.child.read_nonblocking(65536, timeout=min(left, 0.05))
                self.stream.feed(data)
            except pexpect.TIMEOUT:
                pass
            except pexpect.EOF:
                return

    def text(self):
        return "\n".join(self.screen.display)

    def wait_for(self, what, secs, why):
        """Waits until `what` (a regex or a predicate of the screen text)
        holds; returns the time it took."""
        t0 = time.time()
        while time.time() - t0 < secs:
            self.pump(0.1)
            s = self.text()
            ok = what(s) if callable(what) else re.search(what, s)
            if ok:
                return time.time() - t0
        self.fail(f"{why}: not on screen after {secs} s")

    def key(self, k, settle=0.6):
        self.child.send(k)
        self.pump(settle)

    def fail(self, msg):
        print(self.text())
        print(f"FAIL: {msg}", file=sys.stderr)
        try:
            self.child.terminate(force=True)
        except Exception:
            pass
        raise SystemExit(1)

    def quit(self):
        self.child.send("q")
        self.child.expect(pexpect.EOF, timeout=5)
        self.child.close()
        if self.child.exitstatus != 0:
            self.fail(f"top exited with {self.child.exitstatus}")


def at_seconds(text):
    m = re.search(r"at (\d+\.\d) s of", text)
    return float(m.group(1)) if m else None


def live(runtrace, d, test_bin, handle_line, planted_line):
    demo = subprocess.Popen(
        [test_bin, "--exact", "demo_service", "--nocapture", "--test-threads", "1"],
        env=dict(
            os.environ,
            RUNTRACE_TOP_DEMO=f"--out {d} --seconds 60 --block-after 6 --max-file-size 262144",
        ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.time() + 20
        while not any(n.endswith(".active") for n in os.listdir(d)):
            if time.time() > deadline or demo.poll() is not None:
                raise SystemExit("the demo service did not start recording")
            time.sleep(0.05)
        t = Term([runtrace, "top", d])
        t.wait_for(r"LIVE .*recording", 10, "the live header")
        t.wait_for(rf"top_demo\.rs:{handle_line}:", 10, "the request handler's spawn location")
        if re.search(rf"long_poll +\S*top_demo\.rs:{planted_line}:", t.text()):
            t.fail("the blocking call's finding before it was planted")
        # The service says when the planted call starts.
        line = demo.stderr.readline()
        while "blocking from now" not in line:
            if not line:
                t.fail("the demo service ended before blocking")
            line = demo.stderr.readline()
        took = t.wait_for(
            rf"long_poll +\S*top_demo\.rs:{planted_line}:", 3, "the long_poll finding naming the planted call"
        )
        print(f"live: finding shown {took:.2f} s after the blocking call started")
        # Rotations happened (256 KiB files): the header counts files.
        t.wait_for(r"\| [2-9]\d* files", 15, "more than one file (rotation)")
        # The service crashes: the screen says the data stopped.
        demo.send_signal(signal.SIGKILL)
        demo.wait()
        t.wait_for(r"no new data for", 8, "the stall after the service died")
        t.quit()
        print("live: ok")
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()


def replay(runtrace, d, test_bin, handle_line, planted_line):
    t = Term([runtrace, "top", d])
    t.wait_for(r"REPLAY .*replay 1x", 10, "the replay header")
    t.key(" ")
    t.wait_for(r"paused", 3, "paused")
    a = at_seconds(t.text())
    t.pump(1.5)
    if at_seconds(t.text()) != a:
        t.fail("the position moved while paused")
    # Step back one second.
    t.key("\x1b[D")
    t.wait_for(lambda s: at_seconds(s) is not None and abs(at_seconds(s) - (a - 1.0)) < 0.05, 3, "one second back")
    # Seek to 3 s: before the blocking call (from 4 s), no long_poll.
    t.key("g")
    t.key("3\r")
    t.wait_for(r"at 3\.0 s of", 3, "seek to 3 s")
    if re.search(rf"long_poll +\S*top_demo\.rs:{planted_line}:", t.text()):
        t.fail("a long_poll before the blocking call started")
    # Next finding: each press moves forward to the next window holding a
    # finding the current one does not. Another finding may come first (an
    # idle_while_queued warning between 3 and 4 s on a loaded host), so a
    # few presses, each moving forward, reach the planted call's long polls.
    planted = rf"long_poll +\S*top_demo\.rs:{planted_line}:"
    last = 3.0
    for press in range(4):
        t.key("n", settle=0.2)
        t.wait_for(
            lambda s: (at_seconds(s) or 0) > last,
            10,
            f"next finding (press {press + 1}) moving forward from {last} s",
        )
        last = at_seconds(t.text())
        if re.search(planted, t.text()):
            break
    else:
        t.fail(f"next finding: the planted call not reached in 4 presses (at {last} s)")
    # Sort by polls/s (key 3): the request handler first; again: last.
    def first_row(s):
        # The row under the location table's heading.
        lines = s.splitlines()
        for i, l in enumerate(lines[:-1]):
            if "1location" in l:
                return lines[i + 1]
        return ""

    t.key("3")
    t.wait_for(lambda s: "3polls/s▼" in s and f"top_demo.rs:{handle_line}:" in first_row(s), 3, "sort by polls/s, descending")
    t.key("3")
    t.wait_for(lambda s: "3polls/s▲" in s and f"top_demo.rs:{handle_line}:" not in first_row(s), 3, "sort by polls/s, ascending")
    # Filter, then details of the planted call's location.
    t.key("/")
    t.key(f"rs:{planted_line}:\r")
    t.wait_for(r"spawn locations \(1 of", 3, "the filter")
    t.key("\r")
    t.wait_for(r"recent polls", 3, "the details pane")
    t.wait_for(r"cause of long_poll", 3, "the details: the location is the cause")
    # `t`: the span table (the demo records no spans: it says so), and back.
    t.key("t")
    t.wait_for(r"spans: none in this window", 3, "the span table")
    t.key("t")
    t.wait_for(r"spawn locations \(1 of", 3, "back to the locations, filter kept")
    t.quit()
    print("replay: ok")


def main():
    mode, runtrace, d, test_bin, handle_line, planted_line = sys.argv[1:7]
    {"live": live, "replay": replay}[mode](runtrace, d, test_bin, handle_line, planted_line)


if __name__ == "__main__":
    main()
