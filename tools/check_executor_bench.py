#!/usr/bin/env python3
"""Compare a fresh `overhead_profile` run with the ratios docs/executor.md
documents, and print a REGRESSION line for each ratio more than 20% worse.

Usage:
  tools/check_executor_bench.py [--rounds N] [--limit 0.20]
      runs `cargo bench --bench overhead_profile -- --rounds N` (default 9)
      in the repository, then compares its JSON summary;
  tools/check_executor_bench.py --json target/bench-results/overhead_profile.json
      compares an existing summary without running anything;
  tools/check_executor_bench.py --self-test
      checks this script's parsing and comparison on made-up figures.

The reference is the table that follows the line
`<!-- check_executor_bench: reference -->` in docs/executor.md: one row per
ratio, with its wall-clock and its CPU-time figure. Every ratio is "lower is
better" (an executor against tokio, or recording against not recording), so
a fresh ratio is a regression when it exceeds its reference by more than
the limit (default 20%). Both the wall-clock and the CPU-time ratios are
checked: on a shared machine the wall-clock ones also carry the time the
thread waited for a CPU, so the script prints how busy the machine was.

Exit status: 0 when nothing regressed, 1 when something did, 2 on bad input
(a missing file, no reference table, a ratio missing from the run).

This is a measuring tool, not a test: run it on a quiet machine, and rerun
before believing a single REGRESSION line.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "executor.md")
JSON = os.path.join(ROOT, "target", "bench-results", "overhead_profile.json")
MARKER = "<!-- check_executor_bench: reference -->"

# Row label in the reference table -> (wall key, CPU key) in the bench's
# JSON summary, each a (section, name) pair.
RATIOS = {
    "fifo x tokio": (("ratios", "fifo"), ("cpu_ratios", "fifo")),
    "las x tokio": (("ratios", "las"), ("cpu_ratios", "las")),
    "fifo_recording x tokio": (("ratios", "fifo_recording"), ("cpu_ratios", "fifo_recording")),
    "las_recording x tokio": (("ratios", "las_recording"), ("cpu_ratios", "las_recording")),
    "fifo_recording x fifo": (
        ("recording_overhead", "fifo"),
        ("cpu_recording_overhead", "fifo"),
    ),
    "las_recording x las": (
        ("recording_overhead", "las"),
        ("cpu_recording_overhead", "las"),
    ),
}


class BadInput(Exception):
    pass


def parse_reference(text, where=DOC):
    """The reference table after MARKER: {label: (wall, cpu)}."""
    lines = text.splitlines()
    try:
        start = next(i for i, l in enumerate(lines) if l.strip() == MARKER)
    except StopIteration:
        raise BadInput(f"{where}: no line '{MARKER}' (the reference table's marker)")
    ref = {}
    row = re.compile(r"^\|\s*([^|]+?)\s*\|\s*([0-9.]+)\s*\|\s*([0-9.]+)\s*\|\s*$")
    for n, l in enumerate(lines[start + 1 :], start + 2):
        s = l.strip()
        if not s:
            if ref:
                break
            continue
        if not s.startswith("|"):
            break
        m = row.match(s)
        if not m:
            continue  # the header and its separator
        label = m.group(1).replace("`", "").strip()
        if label not in RATIOS:
            raise BadInput(f"{where}:{n}: unknown ratio '{label}' (known: {', '.join(RATIOS)})")
        ref[label] = (float(m.group(2)), float(m.group(3)))
    missing = [k for k in RATIOS if k not in ref]
    if missing:
        raise BadInput(f"{where}: reference table lacks {', '.join(missing)}")
    return ref


def fresh_ratios(summary, where):
    """{label: (wall, cpu)} from the bench's JSON summary."""
    out = {}
    for label, keys in RATIOS.items():
        vals = []
        for section, name in keys:
            try:
                vals.append(float(summary[section][name]))
            except (KeyError, TypeError, ValueError):
                raise BadInput(f"{where}: no {section}.{name} (an older bench? rebuild it)")
        out[label] = tuple(vals)
    return out


def compare(ref, fresh, limit):
    """Lines to print and whether anything regressed."""
    lines, bad = [], False
    lines.append(f"{'ratio':<24} {'kind':<5} {'documented':>10} {'fresh':>8} {'change':>8}")
    for label in RATIOS:
        for k, kind in enumerate(("wall", "cpu")):
            d, f = ref[label][k], fresh[label][k]
            change = f / d - 1.0
            verdict = ""
            if change > limit:
                bad = True
                verdict = (
                    f"REGRESSION: {label} ({kind}) {f:.3f} against the documented "
                    f"{d:.3f}: {change * 100:+.0f}%, limit +{limit * 100:.0f}%"
                )
            lines.append(
                f"{label:<24} {kind:<5} {d:>10.3f} {f:>8.3f} {change * 100:>+7.0f}%"
                + (f"   {verdict}" if verdict else "")
            )
    return lines, bad


def run_bench(rounds):
    cmd = ["cargo", "bench", "--bench", "overhead_profile", "--", "--rounds", str(rounds)]
    print("running:", " ".join(cmd), flush=True)
    r = subprocess.run(cmd, cwd=ROOT)
    if r.returncode != 0:
        raise BadInput(f"the bench failed (exit {r.returncode})")


def self_test():
    doc = f"""text
{MARKER}
| ratio | wall | cpu |
|---|---|---|
| `fifo` x tokio | 0.50 | 0.40 |
| `las` x tokio | 0.60 | 0.50 |
| `fifo_recording` x tokio | 0.80 | 0.70 |
| `las_recording` x tokio | 0.90 | 0.80 |
| `fifo_recording` x `fifo` | 1.50 | 1.40 |
| `las_recording` x `las` | 1.40 | 1.30 |

after
"""
    ref = parse_reference(doc, "self-test")
    assert ref["fifo x tokio"] == (0.5, 0.4), ref
    summary = {
        "ratios": {"fifo": 0.59, "las": 0.73, "fifo_recording": 0.8, "las_recording": 0.9},
        "cpu_ratios": {"fifo": 0.4, "las": 0.5, "fifo_recording": 0.7, "las_recording": 0.8},
        "recording_overhead": {"fifo": 1.5, "las": 1.4},
        "cpu_recording_overhead": {"fifo": 1.4, "las": 1.3},
    }
    lines, bad = compare(ref, fresh_ratios(summary, "self-test"), 0.20)
    text = "\n".join(lines)
    # fifo: +18% is within the limit; las: +22% is not.
    assert bad, text
    assert "REGRESSION: las x tokio (wall)" in text, text
    assert "REGRESSION: fifo x tokio" not in text, text
    assert text.count("REGRESSION") == 1, text
    lines, bad = compare(ref, fresh_ratios(summary, "self-test"), 0.25)
    assert not bad
    for broken, what in [
        (doc.replace(MARKER, ""), "no line"),
        (doc.replace("| `las` x tokio | 0.60 | 0.50 |\n", ""), "lacks las x tokio"),
        (doc.replace("`las` x tokio", "`lass` x tokio"), "unknown ratio 'lass x tokio'"),
    ]:
        try:
            parse_reference(broken, "self-test")
            raise AssertionError(f"accepted a table with {what}")
        except BadInput as e:
            assert what in str(e), e
    try:
        fresh_ratios({"ratios": {}}, "self-test")
        raise AssertionError("accepted a summary without ratios")
    except BadInput as e:
        assert "ratios.fifo" in str(e), e
    print("self-test ok")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="compare this summary instead of running the bench")
    ap.add_argument("--rounds", type=int, default=9, help="rounds for the bench run (default 9)")
    ap.add_argument("--limit", type=float, default=0.20, help="allowed worsening (default 0.20)")
    ap.add_argument("--doc", default=DOC, help="the document holding the reference table")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        self_test()
        return 0
    try:
        with open(a.doc) as f:
            ref = parse_reference(f.read(), a.doc)
        path = a.json
        if path is None:
            started = time.time()
            run_bench(a.rounds)
            path = JSON
            # A summary older than this run is a previous run's (the bench
            # writes it only for the full set of variants at 50,000 tasks).
            if not os.path.exists(path) or os.path.getmtime(path) < started - 1:
                raise BadInput(f"{path}: the bench run did not write a fresh summary")
        try:
            with open(path) as f:
                summary = json.load(f)
        except (OSError, ValueError) as e:
            raise BadInput(f"{path}: {e}")
        fresh = fresh_ratios(summary, path)
    except BadInput as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(
        f"{path}: {summary.get('rounds', '?')} rounds, other processes used "
        f"{summary.get('others_cores_median', float('nan')):.2f} cores (median)"
    )
    if summary.get("others_cores_median", 0) > 0.5:
        print("note: a busy machine; wall-clock ratios carry the time the thread waited for a CPU")
    lines, bad = compare(ref, fresh, a.limit)
    print("\n".join(lines))
    print("REGRESSION found" if bad else f"no ratio more than {a.limit * 100:.0f}% worse than documented")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
