//! `runtrace summary`: what a trace holds and which analyses apply to it.
//! The [`Counts`] pass counts events by kind; [`summary`] joins those
//! counts with the [`Model`], the read statistics and the runtime report
//! into one JSON object (keys in docs/mcp.md).
//!
//! ```
//! use runtrace_analyze::summary::{summary, Counts};
//! use runtrace_analyze::runtime::Engine;
//! use runtrace_model::{input, synth::TraceBuilder};
//! let mut b = TraceBuilder::new();
//! b.spawn(7, 1_000, 1, 0, 0, 0);
//! b.poll_start(7, 0, 2_000, 1, 0, 0);
//! b.poll_end(7, 0, 5_000, 1, true);
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("trace.0.bin");
//! std::fs::write(&path, b.finish()).unwrap();
//! let mut passes = (Engine::new(Default::default()), Counts::default());
//! let (model, stats) = input::read(&[path], &mut passes, None);
//! let report = passes.0.report(&model, stats.clone());
//! let s = summary(&model, &stats, &passes.1, &report);
//! assert_eq!(s["event_counts"]["task_poll_start"], 1);
//! let backlog = &s["capabilities"]["analyzers"].as_array().unwrap()
//!     .iter().find(|a| a["name"] == "backlog").unwrap().clone();
//! assert_eq!(backlog["applicable"], false);
//! ```

use crate::runtime::Report;
use runtrace_model::event::{kind, Ev};
use runtrace_model::input::ReadStats;
use runtrace_model::kinds;
use runtrace_model::model::Model;
use runtrace_model::pass::{Pass, Wants};
use runtrace_model::profile::{Profile, SampleKind};
use serde_json::{json, Value};

/// Events by kind (the pass of `runtrace summary`).
#[derive(Debug, Clone)]
pub struct Counts {
    /// Events of each kind, by kind.
    pub by_kind: [u64; 256],
}

impl Default for Counts {
    fn default() -> Self {
        Counts { by_kind: [0; 256] }
    }
}

impl Counts {
    /// Events of kind `k`.
    pub fn of(&self, k: u8) -> u64 {
        self.by_kind[k as usize]
    }

    /// Counts the samples of `profile` (one per `cpu_sample` or `off_cpu`
    /// event), for a read whose CPU samples went to the profile pass
    /// instead of this one.
    ///
    /// ```
    /// use runtrace_analyze::summary::Counts;
    /// use runtrace_model::profile::Profile;
    /// use runtrace_model::event::kind;
    /// let mut c = Counts::default();
    /// c.add_samples(&Profile::default());
    /// assert_eq!(c.of(kind::CPU_SAMPLE), 0);
    /// ```
    pub fn add_samples(&mut self, profile: &Profile) {
        for s in &profile.samples {
            let k = match s.kind {
                SampleKind::OnCpu => kind::CPU_SAMPLE,
                SampleKind::OffCpu { .. } => kind::OFF_CPU,
            };
            self.by_kind[k as usize] += 1;
        }
    }

    /// Events of all built-in kinds.
    pub fn total(&self) -> u64 {
        self.by_kind.iter().sum()
    }
}

impl Pass for Counts {
    fn wants(&self) -> Wants {
        Wants::RUNTIME.or(Wants::APP).or(Wants::PROFILE)
    }

    #[inline(always)]
    fn event(&mut self, ev: &Ev, _model: &Model) {
        self.by_kind[ev.kind as usize] += 1;
    }
}

/// One analysis and whether it applies to this trace (and why not).
fn analyzer(name: &str, needs: &[u8], c: &Counts, why_not: &str) -> Value {
    let missing: Vec<&str> = needs
        .iter()
        .filter(|&&k| c.of(k) == 0)
        .filter_map(|&k| kinds::name(k))
        .collect();
    if missing.is_empty() {
        json!({"name": name, "applicable": true, "needs": names(needs)})
    } else {
        json!({
            "name": name,
            "applicable": false,
            "needs": names(needs),
            "reason": format!("{why_not} (no {} events)", missing.join(", no ")),
        })
    }
}

fn names(ks: &[u8]) -> Vec<&'static str> {
    ks.iter().filter_map(|&k| kinds::name(k)).collect()
}

/// The analyses and whether each applies: `{name, applicable, needs,
/// reason}` (`reason` only when it does not apply).
pub fn analyzers(c: &Counts) -> Vec<Value> {
    let app = [
        kind::LOCK_WAIT,
        kind::LOCK_HOLD,
        kind::ENQUEUE,
        kind::DEQUEUE,
        kind::PROCESSING_END,
        kind::ITEM_DROPPED,
        kind::QUEUE_SNAPSHOT,
        kind::BACKLOG_TRIGGER,
        kind::IO,
        kind::HEARTBEAT,
    ];
    let polls = [kind::POLL_START, kind::POLL_END];
    let mut v = vec![
        analyzer("poll_times", &polls, c, "needs polls"),
        analyzer(
            "wakeup_latency",
            &[kind::WAKE, kind::POLL_START],
            c,
            "needs wakes and polls",
        ),
        analyzer("workers", &polls, c, "needs polls by workers"),
        analyzer(
            "spawn_locations",
            &[kind::SPAWN, kind::POLL_START, kind::POLL_END],
            c,
            "needs spawns and polls",
        ),
        analyzer(
            "scheduling_bottlenecks",
            &polls,
            c,
            "the findings of `runtrace analyze` need polls",
        ),
        analyzer("outliers", &polls, c, "needs polls"),
    ];
    let has_app = app.iter().any(|&k| c.of(k) > 0);
    v.push(if has_app {
        json!({"name": "backlog", "applicable": true, "needs": "runtrace-sync events"})
    } else {
        json!({
            "name": "backlog",
            "applicable": false,
            "needs": "runtrace-sync events",
            "reason": "needs runtrace-sync events (queues, locks, I/O, heartbeats); the trace has none",
        })
    });
    // A wait is from a task's wake, or its spawn, to its poll.
    v.push(analyzer(
        "blocked",
        &[kind::CPU_SAMPLE, kind::POLL_START],
        c,
        &format!("needs polls and CPU samples ({RECORD_SAMPLES})"),
    ));
    // Either kind of sample draws a flame graph (`--off-cpu` the second).
    let profile = [kind::CPU_SAMPLE, kind::OFF_CPU];
    v.push(if profile.iter().any(|&k| c.of(k) > 0) {
        json!({"name": "flamegraph", "applicable": true, "needs": names(&profile)})
    } else {
        json!({
            "name": "flamegraph",
            "applicable": false,
            "needs": names(&profile),
            "reason": format!("needs CPU samples ({RECORD_SAMPLES}) (no cpu_sample, no off_cpu events)"),
        })
    });
    v
}

/// How to get CPU samples, for the profile analyses' reasons.
const RECORD_SAMPLES: &str =
    "record with RUNTRACE_CPU_HZ=99 or Recorder::builder().cpu_profile(99)";

/// The summary of a trace as one JSON object: files, recordings, duration,
/// event counts, and `capabilities` (`available_events`, `analyzers`).
pub fn summary(model: &Model, stats: &ReadStats, counts: &Counts, report: &Report) -> Value {
    let mut event_counts = serde_json::Map::new();
    let mut available = Vec::new();
    for (k, name) in kinds::ALL {
        let n = counts.of(k);
        if n > 0 {
            event_counts.insert(name.to_string(), json!(n));
            available.push(name);
        }
    }
    // Counted, but not kept as events (`query_trace_events` does not
    // return them): not among `available_events`.
    for (k, name) in kinds::PROFILE {
        let n = counts.of(k);
        if n > 0 {
            event_counts.insert(name.to_string(), json!(n));
        }
    }
    let recordings: Vec<Value> = model
        .procs
        .iter()
        .map(|p| {
            let (first, last) = if p.first_ticks == u64::MAX {
                (None, None)
            } else {
                (Some(p.ns(p.first_ticks)), Some(p.ns(p.last_ticks)))
            };
            json!({
                "pid": p.pid,
                "process_name": p.process_name,
                "recording_id": p.recording_id,
                "events": p.events,
                "start_wall_ns": p.anchor_wall_ns,
                "first_event_ns": first,
                "last_event_ns": last,
                "duration_ns": match (first, last) {
                    (Some(f), Some(l)) => (l - f).max(0) as u64,
                    _ => 0,
                },
            })
        })
        .collect();
    json!({
        "files": stats.files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>(),
        "bytes": stats.bytes,
        "recordings": recordings,
        "duration_ns": report.duration_ns,
        "events": stats.events,
        "event_counts": event_counts,
        "other_events": stats.events.saturating_sub(counts.total()),
        "dropped_events": stats.dropped,
        "tasks_spawned": report.tasks_spawned,
        "tasks_terminated": report.tasks_terminated,
        "workers": report.workers.len(),
        "spawn_locations": report.spawn_locations.len(),
        "threads": model.threads.len(),
        "damaged": stats.damaged,
        "errors": stats.errors,
        "unsealed_files": stats.unsealed.iter().map(|f| f.display().to_string()).collect::<Vec<_>>(),
        "capabilities": {
            "available_events": available,
            "analyzers": analyzers(counts),
        },
    })
}
