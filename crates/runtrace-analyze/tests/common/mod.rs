//! Test helpers: temporary trace files, and a brute-force reference
//! analysis written independently of the crate (it reads with the slow,
//! `Event`-building `merge::EventStream`, keeps every sample and sorts).

#![allow(dead_code)]

use runtrace_format::merge::EventStream;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// A fresh temporary directory for one test, removed when dropped.
pub fn tempdir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("runtrace-analyze-test-{name}-"))
        .tempdir()
        .unwrap()
}

/// A trace file in its own temporary directory, removed when dropped.
pub struct TraceFile {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl std::ops::Deref for TraceFile {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<Path> for TraceFile {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

/// Writes `bytes` as `DIR/trace.0.bin` in a fresh directory.
pub fn write_trace(name: &str, bytes: &[u8]) -> TraceFile {
    let dir = tempdir(name);
    let path = dir.path().join("trace.0.bin");
    std::fs::write(&path, bytes).unwrap();
    TraceFile { _dir: dir, path }
}

/// The nearest-rank quantile of sorted `v` for permille / 1000.
pub fn exact_quantile(sorted: &[u64], permille: u64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let n = sorted.len() as u128;
    let rank = ((n * permille as u128).div_ceil(1000) as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Asserts `got` is within 1% of `want` (exact below 128).
pub fn assert_close(what: &str, got: u64, want: u64) {
    if want < 128 {
        assert_eq!(got, want, "{what}");
    } else {
        let err = (got as f64 - want as f64).abs() / want as f64;
        assert!(
            err < 0.01,
            "{what}: got {got}, want {want} ({:.3}%)",
            err * 100.0
        );
    }
}

/// Exact samples by spawn location text (`<unknown>` for none).
#[derive(Debug, Default)]
pub struct Reference {
    pub events: u64,
    pub polls: HashMap<String, Vec<u64>>,
    pub wakes: HashMap<String, Vec<u64>>,
    pub tasks: HashMap<String, u64>,
    /// Polls per (tid, worker).
    pub worker_polls: HashMap<(u64, Option<u32>), u64>,
}

impl Reference {
    pub fn all_polls(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.polls.values().flatten().copied().collect();
        v.sort_unstable();
        v
    }

    pub fn all_wakes(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.wakes.values().flatten().copied().collect();
        v.sort_unstable();
        v
    }
}

/// The documented semantics, applied naively to the merged event stream:
/// poll duration = PollEnd - PollStart of the same task on the same thread
/// and worker; wake->poll = first wake (or the spawn) since the task's last
/// poll start -> its next poll start.
pub fn reference(paths: &[&Path]) -> Reference {
    let mut s = EventStream::open(paths).unwrap();
    let mut r = Reference::default();
    let mut loc_of: HashMap<u64, String> = HashMap::new();
    let mut pending: HashMap<u64, u64> = HashMap::new();
    let mut open: HashMap<(u64, Option<u32>, u64), u64> = HashMap::new();
    let mut tps = 1_000_000_000u64;
    while let Some(ev) = s.next_event() {
        if let Some(h) = s.headers().last() {
            tps = h.ticks_per_sec;
        }
        let ns = |d: u64| (d as u128 * 1_000_000_000 / tps as u128) as u64;
        r.events += 1;
        let worker = ev.get("worker").and_then(|v| v.as_u64()).map(|w| w as u32);
        match ev.schema.name.as_str() {
            "task_spawn" => {
                let t = ev.u64("task_id").unwrap();
                let loc = ev
                    .get("spawn_loc")
                    .and_then(|v| v.as_str())
                    .unwrap_or("<unknown>")
                    .to_string();
                *r.tasks.entry(loc.clone()).or_default() += 1;
                loc_of.insert(t, loc);
                pending.insert(t, ev.ticks);
            }
            "task_wake" => {
                let t = ev.u64("woken_task_id").unwrap();
                pending.entry(t).or_insert(ev.ticks);
            }
            "task_poll_start" => {
                let t = ev.u64("task_id").unwrap();
                let loc = loc_of
                    .entry(t)
                    .or_insert_with(|| "<unknown>".to_string())
                    .clone();
                if let Some(w) = pending.remove(&t) {
                    r.wakes
                        .entry(loc)
                        .or_default()
                        .push(ns(ev.ticks.saturating_sub(w)));
                }
                open.insert((ev.tid, worker, t), ev.ticks);
            }
            "task_poll_end" => {
                let t = ev.u64("task_id").unwrap();
                if let Some(start) = open.remove(&(ev.tid, worker, t)) {
                    let loc = loc_of
                        .get(&t)
                        .cloned()
                        .unwrap_or_else(|| "<unknown>".into());
                    r.polls.entry(loc).or_default().push(ns(ev.ticks - start));
                    *r.worker_polls.entry((ev.tid, worker)).or_default() += 1;
                }
            }
            "task_terminate" => {
                let t = ev.u64("task_id").unwrap();
                loc_of.remove(&t);
                pending.remove(&t);
            }
            _ => {}
        }
    }
    r
}

/// Compares a report with the reference: counts and totals exactly,
/// percentiles within 1%, overall and per location.
pub fn check_against_reference(rep: &runtrace_analyze::Report, r: &Reference) {
    assert_eq!(rep.events, r.events, "events");
    let polls = r.all_polls();
    let wakes = r.all_wakes();
    for (what, got, want) in [
        ("poll", &rep.poll_ns, &polls),
        ("wake", &rep.wake_to_poll_ns, &wakes),
    ] {
        assert_eq!(got.count, want.len() as u64, "{what} count");
        if want.is_empty() {
            continue;
        }
        assert_close(&format!("{what} p50"), got.p50, exact_quantile(want, 500));
        assert_close(&format!("{what} p90"), got.p90, exact_quantile(want, 900));
        assert_close(&format!("{what} p99"), got.p99, exact_quantile(want, 990));
        assert_close(&format!("{what} p999"), got.p999, exact_quantile(want, 999));
        assert_eq!(got.max, *want.last().unwrap(), "{what} max");
    }
    for l in &rep.spawn_locations {
        let mut p = r.polls.get(&l.location).cloned().unwrap_or_default();
        p.sort_unstable();
        assert_eq!(l.polls, p.len() as u64, "{} polls", l.location);
        assert_eq!(
            l.poll_ns_total,
            p.iter().sum::<u64>(),
            "{} poll total",
            l.location
        );
        let mut w = r.wakes.get(&l.location).cloned().unwrap_or_default();
        w.sort_unstable();
        assert_eq!(
            l.wake_to_poll_ns.count,
            w.len() as u64,
            "{} wakes",
            l.location
        );
        assert_close(
            &format!("{} wake p99", l.location),
            l.wake_to_poll_ns.p99,
            exact_quantile(&w, 990),
        );
        assert_close(
            &format!("{} poll p99", l.location),
            l.poll_ns.p99,
            exact_quantile(&p, 990),
        );
        if l.location != "<unknown>" {
            assert_eq!(
                l.tasks,
                r.tasks.get(&l.location).copied().unwrap_or(0),
                "{} tasks",
                l.location
            );
        }
    }
    let mut total = 0;
    for w in &rep.workers {
        let want = r
            .worker_polls
            .get(&(w.id.tid, w.id.worker))
            .copied()
            .unwrap_or(0);
        assert_eq!(w.polls, want, "polls of {}", w.id);
        total += w.polls;
    }
    assert_eq!(total, polls.len() as u64, "every poll belongs to a worker");
}
