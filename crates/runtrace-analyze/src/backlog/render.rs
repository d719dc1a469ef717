//! The text and JSON forms of a [`BacklogReport`].

use super::options::*;
use super::report::*;
use super::text::*;
use runtrace_model::fmt_ns;
use serde_json::{json, Value};
use std::fmt::{self, Write as _};

impl BacklogReport {
    /// The top verdicts of all triggers, grouped and counted, most common
    /// first: what to fix first when a long trace has many triggers.
    pub fn top_causes(&self) -> Vec<CauseCount> {
        let mut v: Vec<CauseCount> = Vec::new();
        for t in &self.triggers {
            let top = t.verdicts.first();
            let (cause, lock, thread) = (
                top.map(|x| x.cause),
                top.and_then(|x| x.lock.clone()),
                top.and_then(|x| x.thread.clone()),
            );
            match v
                .iter_mut()
                .find(|c| c.cause == cause && c.lock == lock && c.thread == thread)
            {
                Some(c) => c.triggers += 1,
                None => v.push(CauseCount {
                    cause,
                    lock,
                    thread,
                    triggers: 1,
                }),
            }
        }
        v.sort_by_key(|c| std::cmp::Reverse(c.triggers));
        v
    }

    /// A file was damaged or cut short (the CLI exits with 1).
    pub fn is_damaged(&self) -> bool {
        self.damaged
    }

    /// The report as one JSON object (keys in docs/analysis.md).
    pub fn to_json(&self) -> Value {
        let paths = |v: &[std::path::PathBuf]| {
            v.iter()
                .map(|f| f.display().to_string())
                .collect::<Vec<_>>()
        };
        json!({
            "queues": self.queues.iter().map(queue_json).collect::<Vec<_>>(),
            "locks": self.locks.iter().map(lock_json).collect::<Vec<_>>(),
            "io": self.io.iter().map(io_json).collect::<Vec<_>>(),
            "heartbeats": self.heartbeats.iter().map(heartbeat_json).collect::<Vec<_>>(),
            "triggers": self.triggers.iter().map(trigger_json).collect::<Vec<_>>(),
            "top_causes": self.top_causes().iter().map(|c| json!({
                "cause": c.cause.map(|c| c.as_str()),
                "lock": c.lock,
                "thread": c.thread,
                "triggers": c.triggers,
            })).collect::<Vec<_>>(),
            "files": paths(&self.files),
            "bytes": self.bytes,
            "events": self.events,
            "app_events": self.app_events,
            "duration_ns": self.duration_ns,
            "damaged": self.damaged,
            "errors": self.errors,
            "unsealed_files": paths(&self.unsealed_files),
            "notes": self.notes,
            "options": {
                "window_ns": self.options.window_ns,
                "lookback_ns": self.options.lookback_ns,
                "lookahead_ns": self.options.lookahead_ns,
                "bucket_ns": self.options.bucket_ns,
                "floor": self.options.floor,
                "min_lost_share": self.options.min_lost_share,
                "slowdown_ratio": self.options.slowdown_ratio,
            },
        })
    }
}

/// The JSON of one entry of each list in the report.
fn queue_json(q: &QueueReport) -> Value {
    json!({
        "name": q.name,
        "enqueued": q.enqueued,
        "dequeued": q.dequeued,
        "dropped": q.dropped,
        "max_size": q.max_size,
        "dropped_by_cause": q.dropped_by_cause.iter()
            .map(|(c, n)| (c.clone(), json!(n)))
            .collect::<serde_json::Map<String, Value>>(),
        "processed_ok": q.processed_ok,
        "processed_failed": q.processed_failed,
        "queue_delay_ns": q.queue_delay_ns.to_json(),
        "processing_ns": q.processing_ns.to_json(),
        "consumers": q.consumers,
        "peak_growth_per_sec": q.peak_growth_per_sec,
        "peak_growth_at_ns": q.peak_growth_at_ns,
        "snapshots": q.snapshots,
        "windows": q.windows.iter().map(|w| json!({
            "start_ns": w.start_ns,
            "enqueued": w.enqueued,
            "dequeued": w.dequeued,
            "dropped": w.dropped,
            "enqueue_per_sec": w.enqueue_per_sec,
            "dequeue_per_sec": w.dequeue_per_sec,
            "size_end": w.size_end,
            "max_size": w.max_size,
            "growth_per_sec": w.growth_per_sec,
            "peak_growth_per_sec": w.peak_growth_per_sec,
        })).collect::<Vec<_>>(),
    })
}

fn lock_json(l: &LockReport) -> Value {
    json!({
        "name": l.name,
        "waits": l.waits,
        "wait_ns_total": l.wait_ns_total,
        "wait_ns_p99": l.wait_ns.p99,
        "hold_ns_max": l.hold_ns_max,
        "wait_ns_mean": l.wait_ns_mean,
        "wait_ns": l.wait_ns.to_json(),
        "holds": l.holds,
        "hold_ns_total": l.hold_ns_total,
        "longest_holds": l.longest_holds.iter().map(|h| json!({
            "thread": h.thread, "hold_ns": h.hold_ns, "at_ns": h.at_ns,
        })).collect::<Vec<_>>(),
    })
}

fn io_json(x: &IoReport) -> Value {
    json!({
        "op": x.op,
        "count": x.count,
        "io_ns_p50": x.io_ns.p50,
        "io_ns_p99": x.io_ns.p99,
        "io_ns_max": x.io_ns.max,
        "bytes": x.bytes,
        "io_ns_total": x.io_ns_total,
        "io_ns": x.io_ns.to_json(),
        "slowest": x.slowest.iter().map(|s| json!({
            "thread": s.thread, "io_ns": s.io_ns, "bytes": s.bytes, "at_ns": s.at_ns,
        })).collect::<Vec<_>>(),
    })
}

fn heartbeat_json(h: &HeartbeatReport) -> Value {
    json!({
        "thread": h.thread,
        "role": h.role,
        "beats": h.beats,
        "max_gap_ns": h.max_gap_ns,
        "max_gap_at_ns": h.max_gap_at_ns,
    })
}

fn trigger_json(t: &TriggerReport) -> Value {
    json!({
        "timestamp_ns": t.timestamp_ns,
        "queue": t.queue,
        "queue_size": t.queue_size,
        "reason": t.reason,
        "verdicts": t.verdicts.iter().map(|v| json!({
            "cause": v.cause.as_str(),
            "score": v.score,
            "lock": v.lock,
            "thread": v.thread,
            "evidence": v.evidence,
            "lost_ns": v.lost_ns,
        })).collect::<Vec<_>>(),
        "growth_rate_per_sec": t.growth_rate_per_sec,
        "window_ns": t.window_ns,
        "consumers": t.consumers,
        "enqueue_rate_before": t.enqueue_rate_before,
        "enqueue_rate_during": t.enqueue_rate_during,
        "dequeue_rate_before": t.dequeue_rate_before,
        "dequeue_rate_during": t.dequeue_rate_during,
        "lost_ns": t.lost_ns,
        "dropped_in_window": t.dropped_in_window,
    })
}

impl fmt::Display for BacklogReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        let o = &mut out;
        self.summary_text(o);
        self.queues_text(o);
        for q in &self.queues {
            self.rates_text(q, o);
        }
        self.locks_text(o);
        self.io_text(o);
        self.heartbeats_text(o);
        self.root_causes_text(o);
        self.triggers_text(o);
        self.notes_text(o);
        f.write_str(&out)
    }
}

/// The text report's sections, in order.
impl BacklogReport {
    fn summary_text(&self, o: &mut String) {
        let _ = writeln!(o, "=== Summary");
        let _ = writeln!(
            o,
            "files: {}  bytes: {}  duration: {}  events: {} ({} application events)",
            self.files.len(),
            self.bytes,
            fmt_ns(self.duration_ns),
            self.events,
            self.app_events
        );
        let _ = writeln!(
            o,
            "rate window {}, lookback {}",
            fmt_ns(self.options.window_ns),
            fmt_ns(self.options.lookback_ns)
        );
    }

    fn queues_text(&self, o: &mut String) {
        if self.queues.is_empty() {
            return;
        }
        let _ = writeln!(o, "\n=== Queues");
        for q in &self.queues {
            let drops = if q.dropped_by_cause.is_empty() {
                String::new()
            } else {
                let v: Vec<String> = q
                    .dropped_by_cause
                    .iter()
                    .map(|(c, n)| format!("{c} {n}"))
                    .collect();
                format!(" ({})", v.join(", "))
            };
            let _ = writeln!(
                o,
                "\"{}\": enqueued {}, dequeued {}, dropped {}{drops}, processed {} ok / {} failed, max size {}, peak growth {} (at {})",
                q.name, q.enqueued, q.dequeued, q.dropped, q.processed_ok, q.processed_failed,
                q.max_size, fmt_rate(q.peak_growth_per_sec), fmt_at(q.peak_growth_at_ns)
            );
            let d = &q.queue_delay_ns;
            let p = &q.processing_ns;
            let _ = writeln!(
                o,
                "    queue delay  p50 {:>10}  p99 {:>10}  max {:>10}  ({} measured)",
                fmt_ns(d.p50),
                fmt_ns(d.p99),
                fmt_ns(d.max),
                d.count
            );
            let _ = writeln!(
                o,
                "    processing   p50 {:>10}  p99 {:>10}  max {:>10}  ({} items)",
                fmt_ns(p.p50),
                fmt_ns(p.p99),
                fmt_ns(p.max),
                p.count
            );
            let _ = writeln!(o, "    consumers: {}", list(&q.consumers));
        }
    }

    /// Queue `q`'s rate windows (none: no section).
    fn rates_text(&self, q: &QueueReport, o: &mut String) {
        if q.windows.is_empty() {
            return;
        }
        let _ = writeln!(
            o,
            "\n=== Rates: \"{}\" per {} window",
            q.name,
            fmt_ns(self.options.window_ns)
        );
        let _ = writeln!(
            o,
            "{:>10} {:>10} {:>10} {:>8} {:>8} {:>8} {:>10} {:>12}",
            "start", "enq/s", "deq/s", "drops", "size", "max", "growth/s", "peak grow/s"
        );
        let shown = shown_windows(q);
        for w in &shown {
            let _ = writeln!(
                o,
                "{:>10} {:>10.0} {:>10.0} {:>8} {:>8} {:>8} {:>+10.0} {:>+12.0}",
                fmt_at(w.start_ns),
                w.enqueue_per_sec,
                w.dequeue_per_sec,
                w.dropped,
                w.size_end,
                w.max_size,
                w.growth_per_sec,
                w.peak_growth_per_sec
            );
        }
        if shown.len() < q.windows.len() {
            let _ = writeln!(
                o,
                "({} windows with slower growth not shown; --json has all)",
                q.windows.len() - shown.len()
            );
        }
    }

    fn locks_text(&self, o: &mut String) {
        if self.locks.is_empty() {
            return;
        }
        let _ = writeln!(o, "\n=== Locks (by total wait)");
        let _ = writeln!(
            o,
            "{:<20} {:>8} {:>11} {:>10} {:>10} {:>8} {:>10}  longest holds",
            "lock", "waits", "total wait", "mean", "p99", "holds", "max hold"
        );
        for l in &self.locks {
            let holds: Vec<String> = l
                .longest_holds
                .iter()
                .take(3)
                .map(|h| format!("{} {} at {}", h.thread, fmt_ns(h.hold_ns), fmt_at(h.at_ns)))
                .collect();
            let _ = writeln!(
                o,
                "{:<20} {:>8} {:>11} {:>10} {:>10} {:>8} {:>10}  {}",
                l.name,
                l.waits,
                fmt_ns(l.wait_ns_total),
                fmt_ns(l.wait_ns_mean),
                fmt_ns(l.wait_ns.p99),
                l.holds,
                fmt_ns(l.hold_ns_max),
                holds.join("; ")
            );
        }
    }

    fn io_text(&self, o: &mut String) {
        if self.io.is_empty() {
            return;
        }
        let _ = writeln!(o, "\n=== I/O (by total time)");
        let _ = writeln!(
            o,
            "{:<14} {:>8} {:>12} {:>10} {:>10} {:>10}  slowest",
            "op", "count", "bytes", "p50", "p99", "max"
        );
        for x in &self.io {
            let slow = x
                .slowest
                .first()
                .map(|s| format!("{} at {} ({} bytes)", s.thread, fmt_at(s.at_ns), s.bytes))
                .unwrap_or_default();
            let _ = writeln!(
                o,
                "{:<14} {:>8} {:>12} {:>10} {:>10} {:>10}  {}",
                x.op,
                x.count,
                x.bytes,
                fmt_ns(x.io_ns.p50),
                fmt_ns(x.io_ns.p99),
                fmt_ns(x.io_ns.max),
                slow
            );
        }
    }

    fn heartbeats_text(&self, o: &mut String) {
        if self.heartbeats.is_empty() {
            return;
        }
        let _ = writeln!(o, "\n=== Heartbeats (by longest gap)");
        for h in &self.heartbeats {
            let _ = writeln!(
                o,
                "{} as \"{}\": {} beats, longest gap {} ending at {}",
                h.thread,
                h.role,
                h.beats,
                fmt_ns(h.max_gap_ns),
                fmt_at(h.max_gap_at_ns)
            );
        }
    }

    /// The top verdicts counted (only with more than one trigger).
    fn root_causes_text(&self, o: &mut String) {
        if self.triggers.len() <= 1 {
            return;
        }
        let _ = writeln!(o, "\n=== Root causes (top verdict of each trigger)");
        for c in &self.top_causes() {
            let who = who(c.lock.as_deref(), c.thread.as_deref());
            let what = c.cause.map_or("no cause above the floor", |c| c.as_str());
            let _ = writeln!(
                o,
                "{:>6} of {}: {what}{who}",
                c.triggers,
                self.triggers.len()
            );
        }
    }

    fn triggers_text(&self, o: &mut String) {
        let _ = writeln!(o, "\n=== Backlog triggers ({})", self.triggers.len());
        if self.triggers.len() > TEXT_MAX_TRIGGERS {
            let _ = writeln!(
                o,
                "(the {TEXT_MAX_TRIGGERS} with the most lost time; --json has all)"
            );
        }
        for i in self.shown_triggers() {
            trigger_text(i + 1, &self.triggers[i], o);
        }
    }

    /// Indexes of the triggers the text shows: all, or with many the ones
    /// with the most lost time, in time order.
    fn shown_triggers(&self) -> Vec<usize> {
        let mut shown: Vec<usize> = (0..self.triggers.len()).collect();
        if shown.len() > TEXT_MAX_TRIGGERS {
            shown.sort_by(|&a, &b| {
                self.triggers[b]
                    .lost_ns
                    .cmp(&self.triggers[a].lost_ns)
                    .then(a.cmp(&b))
            });
            shown.truncate(TEXT_MAX_TRIGGERS);
            shown.sort_unstable();
        }
        shown
    }

    /// Notes, files without an END frame, and errors.
    fn notes_text(&self, o: &mut String) {
        if !self.notes.is_empty() {
            let _ = writeln!(o, "\n=== Notes");
            for n in &self.notes {
                let _ = writeln!(o, "{n}");
            }
        }
        for u in &self.unsealed_files {
            let _ = writeln!(
                o,
                "note: {}: no END frame (cut short or still being written)",
                u.display()
            );
        }
        if !self.errors.is_empty() {
            let _ = writeln!(o, "\n=== Errors");
            for e in &self.errors {
                let _ = writeln!(o, "{e}");
            }
        }
    }
}

/// The rate windows of `q` the text shows: all, or on a long trace the
/// ones with the fastest growth (and drops), in time order; JSON has every
/// window.
fn shown_windows(q: &QueueReport) -> Vec<&RateWindow> {
    if q.windows.len() <= TEXT_MAX_WINDOWS {
        return q.windows.iter().collect();
    }
    let mut idx: Vec<usize> = (0..q.windows.len()).collect();
    idx.sort_by(|&a, &b| {
        let (x, y) = (&q.windows[a], &q.windows[b]);
        y.peak_growth_per_sec
            .total_cmp(&x.peak_growth_per_sec)
            .then(y.dropped.cmp(&x.dropped))
            .then(a.cmp(&b))
    });
    idx.truncate(TEXT_MAX_WINDOWS);
    idx.sort_unstable();
    idx.iter().map(|&i| &q.windows[i]).collect()
}

/// Trigger number `n` (from 1) and its verdicts.
fn trigger_text(n: usize, t: &TriggerReport, o: &mut String) {
    let _ = writeln!(
        o,
        "[{}] at {}: \"{}\" size {} ({}, growth {}/s); judged {} .. {}: enqueue {} (before {}), dequeue {} (before {}){}, consumers lost {}",
        n,
        fmt_at(t.timestamp_ns),
        t.queue,
        t.queue_size,
        t.reason,
        t.growth_rate_per_sec,
        fmt_at(t.window_ns[0]),
        fmt_at(t.window_ns[1]),
        fmt_rate(t.enqueue_rate_during),
        fmt_before(t.enqueue_rate_before),
        fmt_rate(t.dequeue_rate_during),
        fmt_before(t.dequeue_rate_before),
        if t.dropped_in_window > 0 {
            format!(", {} dropped", t.dropped_in_window)
        } else {
            String::new()
        },
        fmt_ns(t.lost_ns)
    );
    if t.verdicts.is_empty() {
        let _ = writeln!(o, "    no cause above the floor");
    }
    for (k, v) in t.verdicts.iter().enumerate() {
        let who = who(v.lock.as_deref(), v.thread.as_deref());
        let _ = writeln!(
            o,
            "    {}. {} {:.2}{who}\n       {}",
            k + 1,
            v.cause,
            v.score,
            v.evidence
        );
    }
}

/// ` lock "NAME" thread NAME`, each part only when known.
fn who(lock: Option<&str>, thread: Option<&str>) -> String {
    let mut who = String::new();
    if let Some(l) = lock {
        let _ = write!(who, " lock \"{l}\"");
    }
    if let Some(th) = thread {
        let _ = write!(who, " thread {th}");
    }
    who
}
