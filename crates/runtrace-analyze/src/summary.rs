//! `runtrace summary`: what a trace holds and which analyses apply to it.
//! The [`crate::counts::Counts`] pass counts events by kind; [`summary`] joins those
//! counts with the model, the read statistics and the runtime report
//! into one JSON object (keys in docs/mcp.md); [`text`] renders it.
//!
//! ```
//! use runtrace_analyze::reports::{OneRead, Reports};
//! use runtrace_analyze::{registry, summary::summary};
//! use runtrace_model::synth::TraceBuilder;
//! let mut b = TraceBuilder::new();
//! b.spawn(7, 1_000, 1, 0, 0, 0);
//! b.poll_start(7, 0, 2_000, 1, 0, 0);
//! b.poll_end(7, 0, 5_000, 1, true);
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("trace.0.bin");
//! std::fs::write(&path, b.finish()).unwrap();
//! let r = OneRead::read(&[path], None);
//! let s = summary(&r, registry::analyzers(r.counts()));
//! assert_eq!(s["event_counts"]["task_poll_start"], 1);
//! let backlog = &s["capabilities"]["analyzers"].as_array().unwrap()
//!     .iter().find(|a| a["name"] == "backlog").unwrap().clone();
//! assert_eq!(backlog["applicable"], false);
//! ```

use crate::reports::Reports;
use runtrace_model::fmt_ns;
use runtrace_model::kinds;
use runtrace_model::profile::{Profile, SampleKind};
use serde_json::{json, Value};
use std::fmt::Write;

/// The summary of a trace as one JSON object: files, recordings, duration,
/// event counts, and `capabilities` (`available_events`, and `analyzers`:
/// the registry's analyses and whether each applies, as
/// [`crate::registry::analyzers`] gives them; the registry is above this
/// module, so its caller passes them).
pub fn summary(r: &dyn Reports, analyzers: Vec<Value>) -> Value {
    let (model, stats, counts, report) = (r.model(), r.stats(), r.counts(), r.runtime());
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
    let mut out = json!({
        "files": stats.files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>(),
        "bytes": stats.bytes,
        "recordings": recordings,
        "duration_ns": report.duration_ns,
        "events": stats.events,
        "event_counts": event_counts,
        "other_events": stats.events.saturating_sub(counts.total()),
        "dropped_events": stats.dropped,
        "dropped_profiler_samples": stats.profiler_dropped,
        "tasks_spawned": report.tasks_spawned,
        "tasks_terminated": report.tasks_terminated,
        "tasks_terminated_unseen": report.tasks_terminated_unseen,
        "workers": report.workers.len(),
        "spawn_locations": report.spawn_locations.len(),
        "threads": model.threads.len(),
        "damaged": stats.damaged,
        "errors": stats.errors,
        "unsealed_files": stats.unsealed.iter().map(|f| f.display().to_string()).collect::<Vec<_>>(),
        "notes": if report.wakes_missing() { vec![crate::runtime::WAKES_HINT] } else { vec![] },
        "capabilities": {
            "available_events": available,
            "analyzers": analyzers,
        },
    });
    if let Some(cost) = runtrace_cost(r.profile()) {
        out["runtrace_cost"] = cost;
    }
    out
}

/// What runtrace's own threads (named `runtrace-...`: the writer, the
/// queue sampler) cost in the CPU profile: their on-CPU samples, the CPU
/// time those stand for (samples times the sampling period) and the
/// threads. None without on-CPU samples. These samples are left out of
/// flame graphs and findings (`--include-runtrace` shows them).
///
/// ```
/// use runtrace_analyze::summary::runtrace_cost;
/// use runtrace_model::profile::Profile;
/// assert!(runtrace_cost(&Profile::default()).is_none());
/// ```
pub fn runtrace_cost(profile: &Profile) -> Option<Value> {
    let on: Vec<&runtrace_model::profile::Sample> = profile
        .samples
        .iter()
        .filter(|s| s.kind == SampleKind::OnCpu)
        .collect();
    if on.is_empty() {
        return None;
    }
    let hz = profile
        .info
        .iter()
        .map(|(_, i)| i.hz)
        .find(|&h| h > 0)
        .unwrap_or(99);
    let own: Vec<&&runtrace_model::profile::Sample> =
        on.iter().filter(|s| s.is_runtrace()).collect();
    let mut threads: Vec<&str> = own.iter().map(|s| s.thread.as_str()).collect();
    threads.sort_unstable();
    threads.dedup();
    Some(json!({
        "on_cpu_samples": own.len(),
        "on_cpu_ns": own.len() as u64 * (1_000_000_000 / hz.max(1)),
        "share_of_on_cpu_samples": own.len() as f64 / on.len() as f64,
        "threads": threads,
    }))
}

/// The text form of a [`summary`] (`runtrace summary` without `--json`).
///
/// ```
/// let t = runtrace_analyze::summary::text(&serde_json::json!({"events": 3}));
/// assert!(t.contains("events:       3"));
/// ```
pub fn text(s: &Value) -> String {
    let mut t = String::new();
    let files: Vec<&str> = s["files"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let _ = writeln!(t, "files:        {}", files.join(" "));
    for r in s["recordings"].as_array().into_iter().flatten() {
        let _ = writeln!(
            t,
            "recording:    pid {} ({}), {} events, {}",
            r["pid"],
            r["process_name"].as_str().unwrap_or(""),
            r["events"],
            fmt_ns(r["duration_ns"].as_u64().unwrap_or(0))
        );
    }
    let _ = writeln!(
        t,
        "duration:     {}",
        fmt_ns(s["duration_ns"].as_u64().unwrap_or(0))
    );
    let samples = match s["dropped_profiler_samples"].as_u64().unwrap_or(0) {
        0 => String::new(),
        n => format!(", {n} of them profiler samples"),
    };
    let _ = writeln!(
        t,
        "events:       {} ({} of other types, {} dropped{samples})",
        s["events"], s["other_events"], s["dropped_events"]
    );
    let _ = writeln!(
        t,
        "tasks:        {}; {} workers, {} spawn locations",
        crate::runtime::tasks_text(
            s["tasks_spawned"].as_u64().unwrap_or(0),
            s["tasks_terminated"].as_u64().unwrap_or(0),
            s["tasks_terminated_unseen"].as_u64().unwrap_or(0)
        ),
        s["workers"],
        s["spawn_locations"]
    );
    for n in s["notes"].as_array().into_iter().flatten() {
        let _ = writeln!(t, "note:         {}", n.as_str().unwrap_or(""));
    }
    if let Some(c) = s.get("runtrace_cost") {
        let _ = writeln!(
            t,
            "runtrace cost: {} on-CPU samples in its own threads (~{} of CPU, {:.1}% of all on-CPU samples; left out of flame graphs and findings)",
            c["on_cpu_samples"],
            fmt_ns(c["on_cpu_ns"].as_u64().unwrap_or(0)),
            100.0 * c["share_of_on_cpu_samples"].as_f64().unwrap_or(0.0)
        );
    }
    let _ = writeln!(t, "\n=== Events");
    if let Some(m) = s["event_counts"].as_object() {
        for (name, n) in m {
            let _ = writeln!(t, "  {name:<18} {n}");
        }
    }
    let _ = writeln!(t, "\n=== Analyzers");
    for a in s["capabilities"]["analyzers"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let name = a["name"].as_str().unwrap_or("");
        if a["applicable"] == true {
            let _ = writeln!(t, "  {name:<24} applies");
        } else {
            let _ = writeln!(
                t,
                "  {name:<24} does not apply: {}",
                a["reason"].as_str().unwrap_or("")
            );
        }
    }
    t
}
