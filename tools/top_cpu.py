"""CPU cost of `runtrace top` following a busy recording (docs/top.md).

    python3 tools/top_cpu.py RUNTRACE TOP_DEMO [--tasks-per-ms N] [--seconds S] [--window W] [--skip K] [--wait D]
    python3 tools/top_cpu.py RUNTRACE PACED --paced SRC_DIR [--rate R] [--seconds S] [--window W] [--skip K] [--wait D]

Starts the demo service (crates/runtrace-cli/examples/top_demo.rs, built
with `cargo build --release -p runtrace-cli --example top_demo`) recording
into a scratch directory, lets it run D seconds (default 3; more than the
window: top attaches to a recording older than its window), runs `runtrace top DIR` in
a pseudo-terminal for S seconds (default 20), and prints the CPU time top
used (utime + stime from /proc) as a share of one core, from K seconds
after it started (default 2: after its first read of what was already
written, whose windows top opens then, see docs/top.md), the recording's
events per second (from the recorder's own total), and top's peak RSS.
Also prints the last screen (the capture in docs/top.md).

With `--paced SRC_DIR`, the recording is not made beside top: PACED (the
`paced` example of runtrace-top, `cargo build --release -p runtrace-top
--example paced`) writes the finished recording SRC_DIR out again as the
recorder would, its time compressed to R events per second (default
1,000,000), so top follows a recording of that rate that this machine
could not record beside it.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time

import pexpect
import pyte


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    tck = os.sysconf("SC_CLK_TCK")
    return (int(parts[11]) + int(parts[12])) / tck


def rss_peak_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def main():
    runtrace, demo = sys.argv[1], sys.argv[2]
    per_ms, secs, window, skip, wait = "50", 20.0, "5", 2.0, 3.0
    paced, rate = None, "1000000"
    args = sys.argv[3:]
    while args:
        k, v = args[0], args[1]
        args = args[2:]
        if k == "--tasks-per-ms":
            per_ms = v
        elif k == "--seconds":
            secs = float(v)
        elif k == "--window":
            window = v
        elif k == "--skip":
            skip = float(v)
        elif k == "--wait":
            wait = float(v)
        elif k == "--paced":
            paced = v
        elif k == "--rate":
            rate = v
        else:
            sys.exit(f"top_cpu.py: unknown option {k}")
    d = tempfile.mkdtemp(prefix="runtrace-top-cpu-")
    if paced:
        cmd = [demo, paced, os.path.join(d, "trace"), "--rate", rate]
    else:
        cmd = [demo, "--out", d, "--seconds", str(secs + wait + 3), "--tasks-per-ms", per_ms,
               "--max-file-size", str(16 << 20)]
    svc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(wait)
        screen = pyte.Screen(160, 45)
        stream = pyte.ByteStream(screen)
        top = pexpect.spawn(runtrace, ["top", d, "--window", window], dimensions=(45, 160))
        t0 = time.time()
        c0 = None
        while time.time() - t0 < secs:
            try:
                stream.feed(top.read_nonblocking(65536, timeout=0.2))
            except pexpect.TIMEOUT:
                pass
            if c0 is None and time.time() - t0 > skip:
                # After the first read of what was already written.
                c0, w0 = cpu_s(top.pid), time.time()
        c1, w1 = cpu_s(top.pid), time.time()
        rss = rss_peak_kb(top.pid)
        print("\n".join(line.rstrip() for line in screen.display))
        top.send("q")
        top.expect(pexpect.EOF, timeout=5)
        if paced and svc.poll() is None:
            # The copy runs as long as its source: top has been measured.
            svc.terminate()
        _, err = svc.communicate(timeout=60)
        print(err.strip())
        print(f"top CPU: {100 * (c1 - c0) / (w1 - w0):.2f}% of one core over {w1 - w0:.1f} s; peak RSS {rss / 1024:.1f} MiB")
    finally:
        if svc.poll() is None:
            svc.kill()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
