//! A window as rows: the header, workers, spawn locations and live
//! findings with their age, as the screen shows them and as `runtrace top
//! --once` prints them (text, or JSON with `--json`).
//!
//! ```
//! use runtrace_top::snapshot::{Ages, Key};
//! let mut ages = Ages::default();
//! let k = Key { kind: "long_poll", location: "src/a.rs:1:1".into(), worker: None };
//! ages.update([k.clone()].into_iter(), 1_000, true);
//! ages.update([k.clone()].into_iter(), 13_000, true);
//! assert_eq!(ages.age(&k, 13_000), 12_000); // "since 12 µs"
//! ```

use crate::window::{Analysed, RecentPoll};
use runtrace_analyze::runtime::FunctionShare;
use runtrace_analyze::{fmt_ns, Finding};
use runtrace_model::fxhash::FxHashMap;
use runtrace_model::model::Model;
use serde_json::{json, Value};
use std::fmt::Write as _;

/// Where the window's events come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A recording being written, followed.
    Live,
    /// A finished recording, played back.
    Replay,
}

/// The header line's facts.
#[derive(Debug, Clone, Default)]
pub struct Header {
    /// The directory or files shown.
    pub source: String,
    /// Process name and pid of the recording shown.
    pub process: String,
    /// Events per second (every kind) over the window.
    pub events_per_s: f64,
    /// Events the recorder reported dropped, in all.
    pub dropped: u64,
    /// ... of which since the window began (the header is red).
    pub dropped_recent: u64,
    /// Trace files read.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
    /// How the recording is doing: `recording`, `no new data for 4 s`,
    /// `finished`, `replay 1x`, `paused`.
    pub state: String,
    /// What happened to files (evicted, damaged), the directory.
    pub notes: Vec<String>,
}

/// A worker's row.
#[derive(Debug, Clone)]
pub struct WorkerRow {
    /// `tokio worker 0 (tid 123)`.
    pub name: String,
    /// Busy share of the window (0..1).
    pub busy: f64,
    /// Polls per second.
    pub polls_per_s: f64,
    /// Parks in the window.
    pub parks: u64,
    /// Time it waited for a CPU while runnable (host starvation).
    pub sched_wait_ns: u64,
    /// Local queue depth, last seen.
    pub local_q: u32,
    /// What it polls at the window's end: location and for how long.
    pub polling: Option<(String, u64)>,
}

/// A spawn location's row.
#[derive(Debug, Clone)]
pub struct LocRow {
    /// `file:line:col`.
    pub location: String,
    /// Tasks alive at the window's end.
    pub tasks: u64,
    /// Polls per second.
    pub polls_per_s: f64,
    /// Share of all poll time in the window (0..1).
    pub time_share: f64,
    /// Mean poll.
    pub mean_poll_ns: u64,
    /// Longest poll.
    pub max_poll_ns: u64,
    /// Wake -> poll p50.
    pub wake_p50_ns: u64,
    /// Wake -> poll p99.
    pub wake_p99_ns: u64,
    /// Polls over the long-poll threshold.
    pub long_polls: u64,
    /// Its last polls (details pane): (task, worker, start s, length ns,
    /// delay ns).
    pub recent: Vec<(u64, u32, f64, u64, Option<u64>)>,
    /// The spans its polls served, most poll time first, as findings
    /// name them (`GET /item (p99 120 ms)`; empty without spans).
    pub spans: Vec<String>,
    /// The functions its polls ran in (on-CPU samples) or blocked in
    /// (off-CPU), the verdict's kind first (empty without a CPU profile).
    pub functions: Vec<FunctionShare>,
}

/// An application span's row (one per span label: name and the fields
/// that tell requests apart, `GET /item`).
#[derive(Debug, Clone)]
pub struct SpanRow {
    /// Its label.
    pub label: String,
    /// Spans of it open at the window's end.
    pub open: u64,
    /// Spans of it closed per second.
    pub closed_per_s: f64,
    /// Share of all poll time in the window spent in polls serving it
    /// (0..1).
    pub time_share: f64,
    /// Time entered per span, p50 and p99 (closed spans).
    pub busy_p50_ns: u64,
    /// See `busy_p50_ns`.
    pub busy_p99_ns: u64,
    /// First enter to close, p50 and p99 (closed spans).
    pub wall_p50_ns: u64,
    /// See `wall_p50_ns`.
    pub wall_p99_ns: u64,
    /// Wake-to-poll delay its spans suffered, in all.
    pub delay_total_ns: u64,
    /// The spawn locations whose polls served it, most poll time first.
    pub locations: Vec<String>,
}

/// A live finding's row.
#[derive(Debug, Clone)]
pub struct FindingRow {
    /// `long_poll`, ...
    pub kind: &'static str,
    /// `warning` or `critical`.
    pub severity: &'static str,
    /// The cause: the spawn location blamed (or the worker).
    pub cause: String,
    /// The sentence with the numbers, from `runtrace analyze`.
    pub detail: String,
    /// How long it has been a finding, ns.
    pub age_ns: u64,
    /// The locations that suffered from it.
    pub victims: Vec<String>,
    /// Every location it names.
    pub locations: Vec<String>,
    /// The spans the blamed location's polls served (`GET /item (p99
    /// 120 ms)`).
    pub spans: Vec<String>,
}

/// One window of the recording, ready to show.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Live or replay.
    pub mode: Mode,
    /// The window's end, ns since the recording started.
    pub at_ns: i64,
    /// The recording's length so far, ns.
    pub length_ns: i64,
    /// The window's length, ns.
    pub window_ns: u64,
    /// Header facts.
    pub header: Header,
    /// Workers.
    pub workers: Vec<WorkerRow>,
    /// Spawn locations, most poll time first.
    pub locations: Vec<LocRow>,
    /// The application's spans, the slowest (wall p99) first (empty when
    /// the trace has none).
    pub spans: Vec<SpanRow>,
    /// Findings, critical first, cause first.
    pub findings: Vec<FindingRow>,
    /// The memory profile over the window (None: the trace has no
    /// allocation samples). Set by the source after [`build`].
    pub heap: Option<crate::heap::HeapWindow>,
}

/// What makes a finding the same one from window to window.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key {
    /// Its kind.
    pub kind: &'static str,
    /// The location blamed ("" if none).
    pub location: String,
    /// The worker's thread id, if the finding is about one.
    pub worker: Option<u64>,
}

impl Key {
    /// The key of `f`.
    pub fn of(f: &Finding) -> Key {
        Key {
            kind: f.kind.as_str(),
            location: f.spawn_loc.clone().unwrap_or_default(),
            worker: f.worker.as_ref().map(|w| w.tid),
        }
    }
}

/// Since when each finding has been seen, window after window.
#[derive(Debug, Default, Clone)]
pub struct Ages {
    since: FxHashMap<Key, i64>,
    last_at: Option<i64>,
}

impl Ages {
    /// The findings of the window ending at `at_ns`; `contiguous` is false
    /// after a seek (ages start again).
    pub fn update(&mut self, keys: impl Iterator<Item = Key>, at_ns: i64, contiguous: bool) {
        let backwards = self.last_at.is_some_and(|l| at_ns < l);
        if !contiguous || backwards {
            self.since.clear();
        }
        self.last_at = Some(at_ns);
        let mut now: FxHashMap<Key, i64> = FxHashMap::default();
        for k in keys {
            let s = self.since.get(&k).copied().unwrap_or(at_ns);
            now.insert(k, s);
        }
        self.since = now;
    }

    /// How long finding `k` has been seen at `at_ns`.
    pub fn age(&self, k: &Key, at_ns: i64) -> u64 {
        self.since.get(k).map_or(0, |&s| (at_ns - s).max(0) as u64)
    }
}

/// Builds the rows of window `w` of recording `proc` over `[t0, t1]`
/// ticks, updating `ages`.
#[allow(clippy::too_many_arguments)]
pub fn build(
    w: &Analysed,
    model: &Model,
    proc: u32,
    t0: u64,
    t1: u64,
    mode: Mode,
    header: Header,
    ages: &mut Ages,
    contiguous: bool,
) -> Snapshot {
    let p = &model.procs[proc as usize];
    let secs = (p.scale.ns(t1.saturating_sub(t0)) as f64 / 1e9).max(1e-9);
    let r = &w.report;
    let at_ns = p.ns(t1);
    let mut workers = Vec::new();
    for wr in &r.workers {
        // The worker's thread index: by tid in this recording.
        let now = model
            .threads
            .iter()
            .enumerate()
            .filter(|(_, t)| t.proc == proc && t.tid == wr.id.tid)
            .find_map(|(i, _)| {
                w.now
                    .worker(i as u32, wr.id.worker.unwrap_or(runtrace_format::NO_WORKER))
            });
        let polling = now
            .and_then(|n| n.polling)
            .map(|(_, loc, start)| (loc_text(model, loc), p.scale.ns(t1.saturating_sub(start))));
        workers.push(WorkerRow {
            name: wr.id.to_string(),
            busy: wr.busy_ratio,
            polls_per_s: wr.polls as f64 / secs,
            parks: wr.parks,
            sched_wait_ns: wr.sched_wait_ns,
            local_q: now.map_or(0, |n| n.local_q),
            polling,
        });
    }
    let total_ns: u64 = r.spawn_locations.iter().map(|l| l.poll_ns_total).sum();
    let mut locations = Vec::new();
    for l in &r.spawn_locations {
        let li = model
            .locs
            .iter()
            .position(|m| *m.text == *l.location)
            .unwrap_or(0) as u32;
        let tasks = w.alive.get(&li).copied().unwrap_or(0);
        if l.polls == 0 && tasks == 0 {
            continue;
        }
        let recent = w
            .now
            .recent(li)
            .rev()
            .map(|rp| recent_row(rp, model, proc))
            .collect();
        locations.push(LocRow {
            location: l.location.clone(),
            tasks,
            polls_per_s: l.polls as f64 / secs,
            time_share: l.poll_ns_total as f64 / total_ns.max(1) as f64,
            mean_poll_ns: l.poll_ns_mean,
            max_poll_ns: l.poll_ns.max,
            wake_p50_ns: l.wake_to_poll_ns.p50,
            wake_p99_ns: l.wake_to_poll_ns.p99,
            long_polls: l.long_polls,
            recent,
            spans: r.spans.serving(&l.location),
            functions: w.functions.get(&l.location).cloned().unwrap_or_default(),
        });
    }
    let spans = span_rows(r, total_ns, secs);
    ages.update(r.findings.iter().map(Key::of), at_ns, contiguous);
    let findings = r
        .findings
        .iter()
        .map(|f| FindingRow {
            kind: f.kind.as_str(),
            severity: f.severity.as_str(),
            cause: f
                .spawn_loc
                .clone()
                .or_else(|| f.worker.as_ref().map(|w| w.to_string()))
                .unwrap_or_else(|| "outside the process".into()),
            detail: f.detail.clone(),
            age_ns: ages.age(&Key::of(f), at_ns),
            victims: f.victims.iter().map(|v| v.location.clone()).collect(),
            locations: f.spawn_locs.clone(),
            spans: f.spans.clone(),
        })
        .collect();
    Snapshot {
        mode,
        at_ns,
        length_ns: p.ns(p.last_ticks).max(0),
        window_ns: p.scale.ns(t1.saturating_sub(t0)),
        header,
        workers,
        locations,
        spans,
        findings,
        heap: None,
    }
}

/// The span table's rows: `runtrace analyze`'s over the window, with the
/// poll time that served each label (of `total_ns`, over `secs`).
fn span_rows(r: &runtrace_analyze::Report, total_ns: u64, secs: f64) -> Vec<SpanRow> {
    r.spans
        .spans
        .iter()
        .map(|x| {
            let served = r.spans.served.iter().filter(|s| s.label == x.label);
            let mut locs: Vec<(&str, u64)> =
                served.map(|s| (s.location.as_str(), s.poll_ns)).collect();
            locs.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
            let ns: u64 = locs.iter().map(|l| l.1).sum();
            SpanRow {
                label: x.label.clone(),
                open: x.open,
                closed_per_s: x.count as f64 / secs,
                time_share: ns as f64 / total_ns.max(1) as f64,
                busy_p50_ns: x.busy_ns.p50,
                busy_p99_ns: x.busy_ns.p99,
                wall_p50_ns: x.wall_ns.p50,
                wall_p99_ns: x.wall_ns.p99,
                delay_total_ns: x.delay_ns_total,
                locations: locs.into_iter().map(|l| l.0.to_string()).collect(),
            }
        })
        .collect()
}

/// `parse 62%`, `blocked in read_file 80%`: a function of a location.
pub fn fmt_function(f: &FunctionShare) -> String {
    format!(
        "{}{} {:.0}%",
        if f.off_cpu { "blocked in " } else { "" },
        f.function,
        f.share * 100.0
    )
}

fn recent_row(rp: &RecentPoll, model: &Model, proc: u32) -> (u64, u32, f64, u64, Option<u64>) {
    let p = &model.procs[proc as usize];
    (
        rp.task,
        rp.worker,
        p.ns(rp.start) as f64 / 1e9,
        p.scale.ns(rp.ticks),
        rp.delay.map(|d| p.scale.ns(d)),
    )
}

fn loc_text(model: &Model, loc: u32) -> String {
    model
        .locs
        .get(loc as usize)
        .map_or_else(|| "<unknown>".into(), |l| l.text.to_string())
}

/// `12 s`, `1.5 min`: a finding's age.
pub fn fmt_age(ns: u64) -> String {
    let s = ns as f64 / 1e9;
    if s < 60.0 {
        format!("{s:.0} s")
    } else {
        format!("{:.1} min", s / 60.0)
    }
}

/// `5`, `0.7`: a window's length in seconds (tenths below 10 s).
fn fmt_secs(ns: u64) -> String {
    let tenths = (ns as f64 / 1e8).round();
    if tenths < 100.0 && tenths % 10.0 != 0.0 {
        format!("{:.1}", tenths / 10.0)
    } else {
        format!("{:.0}", tenths / 10.0)
    }
}

/// `12.3k`: a rate.
pub fn fmt_rate(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

/// `4.5 MB`.
pub fn fmt_bytes(b: u64) -> String {
    if b >= 1 << 30 {
        format!("{:.1} GB", b as f64 / (1u64 << 30) as f64)
    } else if b >= 1 << 20 {
        format!("{:.1} MB", b as f64 / (1u64 << 20) as f64)
    } else if b >= 1 << 10 {
        format!("{:.1} kB", b as f64 / 1024.0)
    } else {
        format!("{b} B")
    }
}

impl Snapshot {
    /// The window as one JSON object (`runtrace top --once --json`; keys in
    /// docs/top.md).
    pub fn to_json(&self) -> Value {
        let h = &self.header;
        let mut out = json!({
            "mode": match self.mode { Mode::Live => "live", Mode::Replay => "replay" },
            "at_s": self.at_ns as f64 / 1e9,
            "length_s": self.length_ns as f64 / 1e9,
            "window_s": self.window_ns as f64 / 1e9,
            "header": {
                "source": h.source,
                "process": h.process,
                "events_per_s": h.events_per_s,
                "dropped": h.dropped,
                "dropped_in_window": h.dropped_recent,
                "files": h.files,
                "bytes": h.bytes,
                "state": h.state,
                "notes": h.notes,
            },
            "findings": self.findings.iter().map(|f| json!({
                "kind": f.kind,
                "severity": f.severity,
                "cause": f.cause,
                "age_s": f.age_ns as f64 / 1e9,
                "detail": f.detail,
                "victims": f.victims,
                "spawn_locations": f.locations,
                "spans": f.spans,
            })).collect::<Vec<_>>(),
            "workers": self.workers.iter().map(|w| json!({
                "worker": w.name,
                "busy": w.busy,
                "polls_per_s": w.polls_per_s,
                "parks": w.parks,
                "sched_wait_ns": w.sched_wait_ns,
                "local_q": w.local_q,
                "polling": w.polling.as_ref().map(|(l, ns)| json!({"location": l, "for_ns": ns})),
            })).collect::<Vec<_>>(),
            "spawn_locations": self.locations.iter().map(|l| json!({
                "location": l.location,
                "tasks_alive": l.tasks,
                "polls_per_s": l.polls_per_s,
                "poll_time_share": l.time_share,
                "mean_poll_ns": l.mean_poll_ns,
                "max_poll_ns": l.max_poll_ns,
                "wake_to_poll_p50_ns": l.wake_p50_ns,
                "wake_to_poll_p99_ns": l.wake_p99_ns,
                "long_polls": l.long_polls,
                "spans": l.spans,
                "functions": l.functions.iter().map(|f| json!({
                    "function": f.function,
                    "file": f.file,
                    "line": f.line,
                    "share": f.share,
                    "off_cpu": f.off_cpu,
                    "samples": f.samples,
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "spans": self.spans.iter().map(|x| json!({
                "span": x.label,
                "open": x.open,
                "closed_per_s": x.closed_per_s,
                "poll_time_share": x.time_share,
                "busy_p50_ns": x.busy_p50_ns,
                "busy_p99_ns": x.busy_p99_ns,
                "wall_p50_ns": x.wall_p50_ns,
                "wall_p99_ns": x.wall_p99_ns,
                "delay_total_ns": x.delay_total_ns,
                "spawn_locations": x.locations,
            })).collect::<Vec<_>>(),
        });
        self.heap_json(&mut out);
        out
    }

    /// The memory line, when the trace has allocation samples: sampled
    /// heap bytes live at the window's end and their change over the
    /// window, and the allocation rate in it.
    pub fn heap_line(&self) -> Option<String> {
        let m = self.heap?;
        let secs = (self.window_ns as f64 / 1e9).max(1e-9);
        let rate = fmt_bytes((m.allocated as f64 / secs) as u64);
        Some(if m.live_set {
            let change = m.live_end as i64 - m.live_start as i64;
            format!(
                "heap (sampled): {} live ({}{} over the window) | allocating {}/s",
                fmt_bytes(m.live_end),
                if change < 0 { "-" } else { "+" },
                fmt_bytes(change.unsigned_abs()),
                rate
            )
        } else {
            format!(
                "heap (sampled): allocating {rate}/s | live bytes unknown (record with RUNTRACE_ALLOC_LIVE=on)"
            )
        })
    }

    /// The window's memory as JSON (`heap`, when the trace has allocation
    /// samples).
    fn heap_json(&self, out: &mut Value) {
        let Some(m) = self.heap else {
            return;
        };
        let secs = (self.window_ns as f64 / 1e9).max(1e-9);
        out["heap"] = json!({
            "live_set": m.live_set,
            "live_bytes": m.live_set.then_some(m.live_end),
            "live_bytes_at_window_start": m.live_set.then_some(m.live_start),
            "allocated_bytes": m.allocated,
            "allocated_bytes_per_s": m.allocated as f64 / secs,
        });
    }

    /// The header line: source, state, position, rates, drops, files.
    pub fn header_line(&self) -> String {
        let h = &self.header;
        format!(
            "{} | {} | at {:.1} s of {:.1} s | window {} s | {} events/s | dropped {} | {} files, {}",
            h.process,
            h.state,
            self.at_ns as f64 / 1e9,
            self.length_ns as f64 / 1e9,
            fmt_secs(self.window_ns),
            fmt_rate(h.events_per_s),
            h.dropped,
            h.files,
            fmt_bytes(h.bytes),
        )
    }

    /// The window as text (`runtrace top --once`, and `top` without a
    /// terminal).
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "runtrace top {}", self.header.source);
        let _ = writeln!(s, "{}", self.header_line());
        if let Some(line) = self.heap_line() {
            let _ = writeln!(s, "{line}");
        }
        for n in &self.header.notes {
            let _ = writeln!(s, "note: {n}");
        }
        let _ = writeln!(s, "\nfindings ({}):", self.findings.len());
        for f in &self.findings {
            let _ = writeln!(
                s,
                "  {:8} {:20} {}{}  since {}\n           {}",
                f.severity,
                f.kind,
                f.cause,
                serving(&f.spans),
                fmt_age(f.age_ns),
                f.detail
            );
        }
        let _ = writeln!(
            s,
            "\nworkers:\n  {:40} {:>6} {:>9} {:>6} {:>10} {:>6}  polling",
            "worker", "busy", "polls/s", "parks", "sched wait", "localq"
        );
        for w in &self.workers {
            let _ = writeln!(
                s,
                "  {:40} {:>5.0}% {:>9} {:>6} {:>10} {:>6}  {}",
                w.name,
                w.busy * 100.0,
                fmt_rate(w.polls_per_s),
                w.parks,
                fmt_ns(w.sched_wait_ns),
                w.local_q,
                w.polling
                    .as_ref()
                    .map_or_else(|| "-".into(), |(l, ns)| format!("{l} for {}", fmt_ns(*ns)))
            );
        }
        let _ = writeln!(
            s,
            "\nspawn locations:\n  {:40} {:>6} {:>8} {:>6} {:>9} {:>9} {:>9} {:>9} {:>5}",
            "location",
            "tasks",
            "polls/s",
            "time",
            "mean poll",
            "max poll",
            "wake p50",
            "wake p99",
            "long"
        );
        for l in &self.locations {
            let _ = writeln!(
                s,
                "  {:40} {:>6} {:>8} {:>5.1}% {:>9} {:>9} {:>9} {:>9} {:>5}",
                l.location,
                l.tasks,
                fmt_rate(l.polls_per_s),
                l.time_share * 100.0,
                fmt_ns(l.mean_poll_ns),
                fmt_ns(l.max_poll_ns),
                fmt_ns(l.wake_p50_ns),
                fmt_ns(l.wake_p99_ns),
                l.long_polls
            );
            if !l.spans.is_empty() {
                let _ = writeln!(s, "    serving: {}", l.spans.join(", "));
            }
            if !l.functions.is_empty() {
                let f: Vec<String> = l.functions.iter().map(fmt_function).collect();
                let _ = writeln!(s, "    functions: {}", f.join(", "));
            }
        }
        if !self.spans.is_empty() {
            let _ = writeln!(
                s,
                "\nspans:\n  {:40} {:>6} {:>8} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9}",
                "span",
                "open",
                "closed/s",
                "time",
                "busy p50",
                "busy p99",
                "wall p50",
                "wall p99",
                "delay"
            );
            for x in &self.spans {
                let _ = writeln!(
                    s,
                    "  {:40} {:>6} {:>8} {:>5.1}% {:>9} {:>9} {:>9} {:>9} {:>9}",
                    x.label,
                    x.open,
                    fmt_rate(x.closed_per_s),
                    x.time_share * 100.0,
                    fmt_ns(x.busy_p50_ns),
                    fmt_ns(x.busy_p99_ns),
                    fmt_ns(x.wall_p50_ns),
                    fmt_ns(x.wall_p99_ns),
                    fmt_ns(x.delay_total_ns)
                );
            }
        }
        s
    }
}

/// ` (serving GET /item (p99 120 ms))`: what a finding's cause was
/// serving, or nothing without spans.
pub fn serving(spans: &[String]) -> String {
    match spans.first() {
        Some(first) => format!(" (serving {first})"),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::fmt_secs;

    #[test]
    fn window_lengths_in_tenths_below_ten_seconds() {
        assert_eq!(fmt_secs(4_999_999_999), "5");
        assert_eq!(fmt_secs(5_000_000_000), "5");
        assert_eq!(fmt_secs(300_000_000), "0.3");
        assert_eq!(fmt_secs(7_500_000_000), "7.5");
        assert_eq!(fmt_secs(12_340_000_000), "12");
    }
}
