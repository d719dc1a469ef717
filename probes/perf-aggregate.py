#!/usr/bin/env python3
"""Aggregates runtrace perf probe events into a per-task / per-worker report.

Inside perf (its embedded Python 3):

    perf record -e 'runtrace:*' -- ./app ...          # setup_probes.sh BINARY
    perf record -e 'sdt_runtrace:*' -- ./app ...      # setup_probes.sh --sdt BINARY
    perf script -s probes/perf-aggregate.py [-- OPTIONS]

Standalone, on `perf script` text output (when perf lacks Python support),
or on a perf.data file (runs `perf script` itself):

    perf script --ns -i perf.data | python3 probes/perf-aggregate.py - [OPTIONS]
    python3 probes/perf-aggregate.py perf.data [OPTIONS]

OPTIONS:
    --catalog FILE   event catalog (default: events.toml next to this script,
                     or $RUNTRACE_CATALOG); repeat it to combine catalogs
                     (an application's own and the built-in one)
    --top N          list the N slowest / busiest tasks (default 10; 0: none)

Events are recognised by name in any group: `runtrace:task_spawn` (function
probes, named arguments), `sdt_runtrace:task_spawn` (SDT probes, arguments
arg1.. mapped to the catalog's fields in order), a custom `--group`, and the
`_1`, `_2` duplicates `perf probe -f` makes. Each group gets its own report
(recording both the function and the SDT probes of one run would otherwise
count every event twice).

Per task (key: process, task id): spawn -> terminate time, number of polls,
time in polls, wake -> poll delays (p50 / p99 / max); per worker: polls,
time polling, parks, time parked, wakes issued, CPU time and scheduler wait
(from the park/unpark fields); plus event counts and queue samples.
"""

import os
import re
import struct
import sys

NO_WORKER = 0xFFFFFFFF

# ---------------------------------------------------------------- catalog


def _mini_toml(text):
    """The subset of TOML the event catalog uses, for Pythons without
    tomllib (< 3.11): `provider = "x"`, `[[event]]` tables with
    `key = "str"` / `key = int` and a `fields = [ { ... }, ... ]` array of
    one-line inline tables."""
    cat = {"event": []}
    cur = cat
    in_fields = False
    kv = re.compile(r'(\w+)\s*=\s*("(?:[^"\\]|\\.)*"|-?\d+)')
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip() if '"' not in raw else raw.strip()
        if line.startswith("#") or not line:
            continue
        if line == "[[event]]":
            cur = {"fields": []}
            cat["event"].append(cur)
            in_fields = False
            continue
        if in_fields:
            if line.startswith("]"):
                in_fields = False
                continue
            if line.startswith("{"):
                d = {}
                for k, v in kv.findall(line):
                    d[k] = v[1:-1] if v.startswith('"') else int(v)
                cur["fields"].append(d)
            continue
        m = re.match(r"fields\s*=\s*\[(.*)$", line)
        if m:
            rest = m.group(1).strip()
            in_fields = not rest.endswith("]")
            for part in re.findall(r"\{[^}]*\}", rest):
                d = {}
                for k, v in kv.findall(part):
                    d[k] = v[1:-1] if v.startswith('"') else int(v)
                cur["fields"].append(d)
            continue
        m = kv.match(line)
        if m:
            k, v = m.groups()
            cur[k] = v[1:-1] if v.startswith('"') else int(v)
    return cat


def load_catalog(path):
    """{event name: [(field name, type), ...]} in catalog order."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        import tomllib

        cat = tomllib.loads(data.decode("utf-8"))
    except ImportError:
        cat = _mini_toml(data.decode("utf-8"))
    events = {}
    for ev in cat.get("event", []):
        events[ev["name"]] = [(f["name"], f["type"]) for f in ev.get("fields", [])]
    return cat.get("provider", "runtrace"), events


def default_catalog():
    env = os.environ.get("RUNTRACE_CATALOG")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(globals().get("__file__") or sys.argv[0]))
    return os.path.join(here, "events.toml")


# ---------------------------------------------------------------- helpers


def pct(sorted_vals, p):
    """Nearest-rank percentile of an ascending list."""
    if not sorted_vals:
        return None
    k = max(0, min(len(sorted_vals) - 1, int(-(-p * len(sorted_vals) // 100)) - 1))
    return sorted_vals[k]


def dur(ns):
    if ns is None:
        return "-"
    ns = float(ns)
    if ns < 1e3:
        return "%.0f ns" % ns
    if ns < 1e6:
        return "%.1f us" % (ns / 1e3)
    if ns < 1e9:
        return "%.2f ms" % (ns / 1e6)
    return "%.3f s" % (ns / 1e9)


def dist(vals):
    """'p50 X  p99 Y  max Z (n N)' of a list of durations (ns)."""
    if not vals:
        return "-"
    s = sorted(vals)
    return "p50 %-9s p99 %-9s max %-9s (n %d)" % (dur(pct(s, 50)), dur(pct(s, 99)), dur(s[-1]), len(s))


def summary(vals, sdt):
    """One line about a field's values: numbers min/p50/max, text top 3."""
    nums = sorted(v for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool))
    bools = [v for v in vals if isinstance(v, bool)]
    texts = [v for v in vals if isinstance(v, str)]
    if bools:
        t = sum(1 for v in bools if v)
        return "true %d, false %d" % (t, len(bools) - t)
    if texts:
        c = {}
        for v in texts:
            c[v] = c.get(v, 0) + 1
        top = sorted(c.items(), key=lambda x: -x[1])[:3]
        return ", ".join("%r %d" % kv for kv in top) + (" (+%d more values)" % (len(c) - 3) if len(c) > 3 else "")
    if nums:
        mean = sum(nums) / len(nums)
        fmt = (lambda x: "%g" % x) if any(isinstance(v, float) for v in nums) else str
        return "min %s  p50 %s  max %s  mean %.4g (n %d)" % (
            fmt(nums[0]), fmt(pct(nums, 50)), fmt(nums[-1]), mean, len(nums))
    return "-"


# ---------------------------------------------------------------- aggregation


class Task:
    __slots__ = ("spawn", "parent", "loc", "term", "polls", "poll_ns", "poll_start",
                 "wake_pending", "wake_delays", "wakes", "ready")

    def __init__(self):
        self.spawn = None
        self.parent = None
        self.loc = None
        self.term = None
        self.polls = 0
        self.poll_ns = 0
        self.poll_start = None
        self.wake_pending = None
        self.wake_delays = []
        self.wakes = 0
        self.ready = False


class Worker:
    __slots__ = ("polls", "poll_ns", "parks", "unparks", "park_at", "parked_ns", "wakes",
                 "cpu_first", "cpu_last", "wait_first", "wait_last", "started", "stopped", "tids")

    def __init__(self):
        self.polls = 0
        self.poll_ns = 0
        self.parks = 0
        self.unparks = 0
        self.park_at = None
        self.parked_ns = 0
        self.wakes = 0
        self.cpu_first = self.cpu_last = None
        self.wait_first = self.wait_last = None
        self.started = self.stopped = None
        self.tids = set()


class Aggregate:
    """Everything one event group (runtrace, sdt_runtrace, ...) delivered."""

    def __init__(self, group, sdt):
        self.group = group
        self.sdt = sdt
        self.counts = {}
        self.tasks = {}
        self.workers = {}
        self.pids = set()
        self.first = None
        self.last = None
        self.queue_samples = []
        self.wake_delays = []
        self.spawn_first_poll = []
        self.orphans = {"poll": 0, "terminate": 0}
        self.fields = {}  # events without a handler: field -> values

    def task(self, pid, tid):
        t = self.tasks.get((pid, tid))
        if t is None:
            t = self.tasks[(pid, tid)] = Task()
        return t

    def worker(self, pid, w):
        if w is None or w == NO_WORKER:
            return None
        k = (pid, w)
        x = self.workers.get(k)
        if x is None:
            x = self.workers[k] = Worker()
        return x

    def add(self, ev, f, ts, pid, tid):
        self.counts[ev] = self.counts.get(ev, 0) + 1
        self.pids.add(pid)
        if self.first is None or ts < self.first:
            self.first = ts
        if self.last is None or ts > self.last:
            self.last = ts
        h = getattr(self, "on_" + ev, None)
        if h is not None:
            h(f, ts, pid, tid)
        else:
            fs = self.fields.setdefault(ev, {})
            for k, v in f.items():
                fs.setdefault(k, []).append(v)

    def on_task_spawn(self, f, ts, pid, tid):
        t = self.task(pid, f.get("task_id"))
        t.spawn = ts
        t.parent = f.get("parent_task_id")
        t.loc = f.get("spawn_loc")

    def on_task_wake(self, f, ts, pid, tid):
        t = self.task(pid, f.get("woken_task_id"))
        t.wakes += 1
        if t.wake_pending is None:
            t.wake_pending = ts  # later wakes before the poll add no delay
        w = self.worker(pid, f.get("worker"))
        if w is not None:
            w.wakes += 1

    def on_task_poll_start(self, f, ts, pid, tid):
        key = (pid, f.get("task_id"))
        if key not in self.tasks:
            self.orphans["poll"] += 1
        t = self.task(*key)
        if t.polls == 0 and t.spawn is not None:
            self.spawn_first_poll.append(ts - t.spawn)
        t.polls += 1
        t.poll_start = ts
        if t.wake_pending is not None:
            d = ts - t.wake_pending
            t.wake_delays.append(d)
            self.wake_delays.append(d)
            t.wake_pending = None
        w = self.worker(pid, f.get("worker"))
        if w is not None:
            w.polls += 1
            w.tids.add(tid)

    def on_task_poll_end(self, f, ts, pid, tid):
        t = self.task(pid, f.get("task_id"))
        if t.poll_start is not None:
            d = ts - t.poll_start
            t.poll_ns += d
            w = self.worker(pid, f.get("worker"))
            if w is not None:
                w.poll_ns += d
            t.poll_start = None
        if f.get("ready"):
            t.ready = True

    def on_task_terminate(self, f, ts, pid, tid):
        key = (pid, f.get("task_id"))
        if key not in self.tasks:
            self.orphans["terminate"] += 1
        self.task(*key).term = ts

    def _cpu(self, w, f):
        cpu = f.get("cpu_ns")
        if cpu is not None:
            if w.cpu_first is None:
                w.cpu_first = cpu
            w.cpu_last = cpu
        wait = f.get("sched_wait_ns")
        if wait is not None:
            if w.wait_first is None:
                w.wait_first = wait
            w.wait_last = wait

    def on_worker_park(self, f, ts, pid, tid):
        w = self.worker(pid, f.get("worker"))
        if w is not None:
            w.parks += 1
            w.park_at = ts
            w.tids.add(tid)
            self._cpu(w, f)

    def on_worker_unpark(self, f, ts, pid, tid):
        w = self.worker(pid, f.get("worker"))
        if w is not None:
            w.unparks += 1
            if w.park_at is not None:
                w.parked_ns += ts - w.park_at
                w.park_at = None
            self._cpu(w, f)

    def on_worker_start(self, f, ts, pid, tid):
        w = self.worker(pid, f.get("worker"))
        if w is not None:
            w.started = ts
            w.tids.add(tid)

    def on_worker_stop(self, f, ts, pid, tid):
        w = self.worker(pid, f.get("worker"))
        if w is not None:
            w.stopped = ts

    def on_queue_sample(self, f, ts, pid, tid):
        g = f.get("global_q")
        if g is not None:
            self.queue_samples.append(g)

    # ------------------------------------------------------------ report

    def report(self, top, out):
        p = lambda *a: print(*a, file=out)  # noqa: E731
        multi = len(self.pids) > 1
        tname = (lambda k: "%d/%d" % k) if multi else (lambda k: "%d" % k[1])
        span = (self.last - self.first) if self.first is not None else 0
        total = sum(self.counts.values())
        p("=" * 78)
        p("runtrace perf probe report: group %s (%s)" % (
            self.group, "SDT probes, args mapped by catalog order" if self.sdt else "function probes"))
        p("=" * 78)
        p("%d events in %s, %d process(es)" % (total, dur(span), len(self.pids)))
        p("")
        p("event counts:")
        for ev, n in sorted(self.counts.items(), key=lambda x: (-x[1], x[0])):
            p("  %-24s %9d" % (ev, n))

        if self.fields:
            p("")
            p("fields of the other events:")
            for ev in sorted(self.fields):
                for k, vals in self.fields[ev].items():
                    p("  %-34s %s" % ("%s.%s" % (ev, k), summary(vals, self.sdt)))
        if not self.tasks and not self.workers:
            p("")
            p("(no task or worker events)")
            p("")
            return

        tasks = self.tasks
        spawned = [k for k, t in tasks.items() if t.spawn is not None]
        terminated = [k for k, t in tasks.items() if t.term is not None]
        alive = [k for k in spawned if tasks[k].term is None]
        lifetimes = [t.term - t.spawn for t in tasks.values() if t.spawn is not None and t.term is not None]
        polls = sorted(t.polls for k, t in tasks.items() if t.spawn is not None)
        p("")
        p("tasks: %d spawned, %d terminated, %d still alive at the end, %d seen in total" % (
            len(spawned), len(terminated), len(alive), len(tasks)))
        if self.orphans["poll"] or self.orphans["terminate"]:
            p("  (spawned before the recording started: %d polled, %d terminated without a spawn event)" % (
                self.orphans["poll"], self.orphans["terminate"]))
        p("  spawn -> terminate:   %s" % dist(lifetimes))
        if polls:
            p("  polls per task:       p50 %-9d p99 %-9d max %-9d (total %d)" % (
                pct(polls, 50), pct(polls, 99), polls[-1], sum(t.polls for t in tasks.values())))
        p("  mean poll per task:   %s" % dist(
            [t.poll_ns / t.polls for t in tasks.values() if t.polls and t.poll_ns]))
        p("  wake -> poll delay:   %s" % dist(self.wake_delays))
        p("  spawn -> first poll:  %s" % dist(self.spawn_first_poll))

        locs = {}
        for k, t in tasks.items():
            if t.spawn is None:
                continue
            loc = t.loc
            if self.sdt and loc:
                loc = "%s (address)" % loc
            locs.setdefault(loc if loc not in (None, "") else "?", []).append(t)
        if len(locs) > 0:
            p("")
            p("tasks by spawn location:")
            p("  %-40s %7s %9s %11s %11s" % ("location", "tasks", "polls/task", "life p50", "wake p99"))
            for loc, ts in sorted(locs.items(), key=lambda x: -len(x[1]))[:20]:
                life = sorted(t.term - t.spawn for t in ts if t.term is not None)
                wd = sorted(d for t in ts for d in t.wake_delays)
                p("  %-40s %7d %9.1f %11s %11s" % (
                    loc[-40:], len(ts), sum(t.polls for t in ts) / len(ts), dur(pct(life, 50)), dur(pct(wd, 99))))

        if top and tasks:
            def table(title, rows):
                p("")
                p(title)
                p("  %-10s %-10s %11s %6s %11s %11s %11s %11s" % (
                    "task", "parent", "lifetime", "polls", "in polls", "wake p50", "wake p99", "wake max"))
                for k, t in rows:
                    wd = sorted(t.wake_delays)
                    life = (t.term - t.spawn) if t.spawn is not None and t.term is not None else None
                    p("  %-10s %-10s %11s %6d %11s %11s %11s %11s" % (
                        tname(k), "-" if t.parent is None else t.parent,
                        dur(life) if life is not None else ("alive" if t.term is None else "-"),
                        t.polls, dur(t.poll_ns), dur(pct(wd, 50)), dur(pct(wd, 99)),
                        dur(wd[-1] if wd else None)))

            items = list(tasks.items())
            longest = sorted((x for x in items if x[1].spawn is not None and x[1].term is not None),
                             key=lambda x: -(x[1].term - x[1].spawn))[:top]
            if longest:
                table("longest-lived tasks (spawn -> terminate), top %d:" % top, longest)
            busiest = sorted(items, key=lambda x: (-x[1].poll_ns, -x[1].polls))[:top]
            table("busiest tasks (time in polls), top %d:" % top, busiest)
            waited = sorted((x for x in items if x[1].wake_delays), key=lambda x: -max(x[1].wake_delays))[:top]
            if waited:
                table("longest wake -> poll delays, top %d:" % top, waited)

        p("")
        if self.workers:
            p("workers: %d" % len(self.workers))
            p("  %-8s %8s %11s %7s %11s %7s %11s %11s %8s" % (
                "worker", "polls", "polling", "parks", "parked", "wakes", "cpu", "sched wait", "threads"))
            wname = (lambda k: "%d/%d" % k) if multi else (lambda k: "%d" % k[1])
            for k in sorted(self.workers):
                w = self.workers[k]
                cpu = (w.cpu_last - w.cpu_first) if w.cpu_first is not None else None
                wait = (w.wait_last - w.wait_first) if w.wait_first is not None else None
                p("  %-8s %8d %11s %7d %11s %7d %11s %11s %8d" % (
                    wname(k), w.polls, dur(w.poll_ns), w.parks, dur(w.parked_ns), w.wakes,
                    dur(cpu), dur(wait), len(w.tids)))
            tot = sum(w.polls for w in self.workers.values())
            if tot and len(self.workers) > 1:
                shares = ", ".join("%s %.0f%%" % (wname(k), 100.0 * self.workers[k].polls / tot)
                                   for k in sorted(self.workers))
                p("  poll share: %s" % shares)
        else:
            p("workers: none seen")
        if self.queue_samples:
            q = sorted(self.queue_samples)
            p("")
            p("global queue depth (%d samples): p50 %d  p99 %d  max %d  mean %.1f" % (
                len(q), pct(q, 50), pct(q, 99), q[-1], sum(q) / len(q)))
        p("")


# ---------------------------------------------------------------- events in


class Collector:
    def __init__(self, catalog_paths):
        self.catalog_paths = catalog_paths
        # [(provider, {event: [(field, type)]})], first match wins.
        self.catalogs = []
        for p in catalog_paths:
            try:
                self.catalogs.append(load_catalog(p))
            except (OSError, ValueError, KeyError) as e:
                sys.exit("perf-aggregate.py: cannot read catalog %s: %s (use --catalog FILE)" % (p, e))
        self.groups = {}
        self.other = {}
        self._names = {}

    def resolve(self, group, name):
        """(event, fields spec) of a perf event name, or None. The catalog
        whose provider names the group (`P`, `sdt_P`) first, then any;
        drops the `_N` suffix of `perf probe -f` duplicates."""
        key = (group, name)
        r = self._names.get(key, 0)
        if r != 0:
            return r
        m = re.match(r"^(.*)_\d+$", name)
        cands = [name] + ([m.group(1)] if m else [])
        own = [c for c in self.catalogs if group in (c[0], "sdt_" + c[0])]
        r = None
        for cats in (own, self.catalogs):
            for _, events in cats:
                for n in cands:
                    if n in events:
                        r = (n, events[n])
                        break
                if r:
                    break
            if r:
                break
        self._names[key] = r
        return r

    def convert(self, spec, fields):
        """Named, typed values: maps SDT arg1.. by catalog order, decodes
        f64 bits and signed values."""
        sdt = False
        if spec and spec[0][0] not in fields and "arg1" in fields:
            sdt = True
            fields = {name: fields.get("arg%d" % (i + 1)) for i, (name, _) in enumerate(spec)}
        out = {}
        for name, ty in spec:
            v = fields.get(name)
            if isinstance(v, int):
                if ty in ("i64", "i32") and v >= 1 << 63:
                    v -= 1 << 64
                elif ty in ("u32", "worker"):
                    v &= 0xFFFFFFFF
                elif ty == "u16":
                    v &= 0xFFFF
                elif ty in ("u8", "bool"):
                    v &= 0xFF
                elif ty == "f64":
                    v = struct.unpack("<d", struct.pack("<Q", v & (1 << 64) - 1))[0]
                if ty == "bool":
                    v = bool(v)
                elif sdt and ty in ("str", "istr", "loc"):
                    v = "0x%x" % v  # SDT passes the pointer; perf cannot follow it
            out[name] = v
        return out, sdt

    def add(self, group, name, fields, ts, pid, tid):
        r = self.resolve(group, name)
        if r is None:
            k = "%s:%s" % (group, name)
            self.other[k] = self.other.get(k, 0) + 1
            return
        ev, spec = r
        f, sdt = self.convert(spec, fields)
        agg = self.groups.get(group)
        if agg is None:
            agg = self.groups[group] = Aggregate(group, sdt)
        agg.add(ev, f, ts, pid, tid)

    def report(self, top, out=sys.stdout):
        if not self.groups:
            for path, (prov, events) in zip(self.catalog_paths, self.catalogs):
                print("no events of provider %s found (catalog %s: %s)" % (
                    prov, path, ", ".join(sorted(events))), file=out)
            prov = self.catalogs[0][0]
            print("record with: perf record -e '%s:*' (setup_probes.sh BINARY) or -e 'sdt_%s:*' "
                  "(setup_probes.sh --sdt BINARY)" % (prov, prov), file=out)
        for g in sorted(self.groups):
            self.groups[g].report(top, out)
        gs = sorted(self.groups)
        same = sorted(set("%s and %s" % (a, b) for i, a in enumerate(gs) for b in gs[i + 1:]
                          if set(self.groups[a].counts) & set(self.groups[b].counts)))
        if same:
            print("note: %s delivered the same events (function and SDT probes recorded together?); "
                  "each group is reported on its own" % ", ".join(same), file=out)
        if self.other:
            print("other events (not in the catalog): " + ", ".join(
                "%s %d" % kv for kv in sorted(self.other.items())), file=out)


def parse_args(argv):
    catalogs, top, inputs = [], 10, []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-h", "--help"):
            print(__doc__)
            sys.exit(0)
        elif a == "--catalog" and i + 1 < len(argv):
            catalogs.append(argv[i + 1])
            i += 1
        elif a.startswith("--catalog="):
            catalogs.append(a.split("=", 1)[1])
        elif a == "--top" and i + 1 < len(argv):
            top = int(argv[i + 1])
            i += 1
        elif a.startswith("--top="):
            top = int(a.split("=", 1)[1])
        elif a == "--":
            pass
        elif a == "-" or not a.startswith("-"):
            inputs.append(a)
        else:
            sys.exit("perf-aggregate.py: unknown option %s (see --help)" % a)
        i += 1
    return catalogs or [default_catalog()], top, inputs


# ---------------------------------------------------------------- perf mode

try:
    import perf_trace_context  # noqa: F401  (only exists inside perf)

    IN_PERF = True
except ImportError:
    IN_PERF = False

if IN_PERF:
    _catalog, _top, _ = parse_args(sys.argv[1:])
    _c = Collector(_catalog)

    def _split(event_name):
        # perf names handlers group__event; pick the split whose right part
        # is a catalog event.
        parts = event_name.split("__")
        for i in range(1, len(parts)):
            g, n = "__".join(parts[:i]), "__".join(parts[i:])
            if _c.resolve(g, n):
                return g, n
        return parts[0], "__".join(parts[1:])

    def trace_begin():
        pass

    def trace_unhandled(event_name, context, event_fields_dict, perf_sample_dict=None):
        d = event_fields_dict
        g, n = _split(event_name)
        ts = d["common_s"] * 1000000000 + d["common_ns"]
        s = (perf_sample_dict or {}).get("sample") or {}
        tid = s.get("tid", d.get("common_pid"))
        pid = s.get("pid", tid)
        _c.add(g, n, d, ts, pid, tid)

    def trace_end():
        try:
            _c.report(_top)
        except BrokenPipeError:
            pass

# ---------------------------------------------------------------- text mode

LINE = re.compile(
    r"^\s*(?P<comm>.*?)\s+(?:(?P<pid>\d+)/)?(?P<tid>\d+)\s+(?:\[(?P<cpu>\d+)\]\s+)?"
    r"(?P<secs>\d+)\.(?P<frac>\d+):\s+(?:\d+\s+)?(?P<group>[\w.-]+):(?P<name>\w+):\s*(?P<rest>.*)$")
FIELD = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S*)')


def parse_text(lines, c):
    bad = 0
    for line in lines:
        m = LINE.match(line)
        if not m:
            if line.strip():
                bad += 1
            continue
        frac = m.group("frac")
        ts = int(m.group("secs")) * 1000000000 + int(frac.ljust(9, "0")[:9])
        rest = re.sub(r"^\(\s*[0-9a-fA-F]+\)\s*", "", m.group("rest"))
        fields = {}
        for k, v in FIELD.findall(rest):
            if v.startswith('"'):
                fields[k] = v[1:-1]
            else:
                try:
                    fields[k] = int(v, 0)
                except ValueError:
                    try:
                        fields[k] = int(v, 16)
                    except ValueError:
                        fields[k] = v
        tid = int(m.group("tid"))
        pid = int(m.group("pid")) if m.group("pid") else 0
        c.add(m.group("group"), m.group("name"), fields, ts, pid, tid)
    return bad


def main_standalone(argv):
    catalog, top, inputs = parse_args(argv)
    c = Collector(catalog)
    if not inputs:
        inputs = ["-"]
    bad = 0
    for inp in inputs:
        if inp == "-":
            bad += parse_text(sys.stdin, c)
            continue
        try:
            with open(inp, "rb") as f:
                magic = f.read(8)
        except OSError as e:
            sys.exit("perf-aggregate.py: %s" % e)
        if magic.startswith(b"PERFILE"):
            import subprocess

            # --ns: nanosecond timestamps; pid/tid: task ids are per process.
            proc = subprocess.Popen(["perf", "script", "--ns", "-F", "trace:comm,pid,tid,cpu,time,event,trace",
                                     "-i", inp], stdout=subprocess.PIPE, universal_newlines=True)
            bad += parse_text(proc.stdout, c)
            if proc.wait() != 0:
                sys.exit("perf-aggregate.py: perf script -i %s failed" % inp)
        else:
            with open(inp, "r", errors="replace") as f:
                bad += parse_text(f, c)
    try:
        c.report(top)
    except BrokenPipeError:
        sys.exit(0)
    if bad:
        print("(%d input lines were not perf script event lines and were ignored)" % bad)


if __name__ == "__main__" and not IN_PERF:
    main_standalone(sys.argv[1:])
