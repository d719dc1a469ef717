//! The text and JSON forms of a [`Report`] (`runtrace analyze` and
//! `runtrace analyze --json`; the JSON keys are in docs/analysis.md).

use super::report::{fmt_at, CpuFunctions, Finding, FindingKind, QueueReport, Report};
use runtrace_model::fmt_ns;
use runtrace_model::hist::Summary;
use serde_json::{json, Value};
use std::fmt;

/// `N spawned, M terminated`, saying which terminated tasks were never
/// spawned or polled in the trace (`unseen`, [`Report::tasks_terminated_unseen`])
/// when there are any: without it, a trace of tokio's multi-thread runtime
/// counts more tasks terminated than spawned, unexplained.
///
/// ```
/// use runtrace_analyze::runtime::tasks_text;
/// assert_eq!(tasks_text(5, 5, 0), "5 spawned, 5 terminated");
/// assert!(tasks_text(5, 7, 2).starts_with("5 spawned, 7 terminated (2 with no spawn or poll"));
/// ```
pub fn tasks_text(spawned: u64, terminated: u64, unseen: u64) -> String {
    let mut s = format!("{spawned} spawned, {terminated} terminated");
    if unseen > 0 {
        s += &format!(
            " ({unseen} with no spawn or poll in the trace: tokio's blocking tasks, such as its worker launches, or tasks from before the recording)"
        );
    }
    s
}

impl Report {
    /// True when a file was damaged or cut short (`runtrace analyze` then
    /// exits with 1).
    pub fn is_damaged(&self) -> bool {
        self.damaged
    }

    /// Findings of one kind.
    pub fn findings_of(&self, kind: FindingKind) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(move |f| f.kind == kind)
    }

    /// The single JSON object `runtrace analyze --json` prints (keys in
    /// docs/analysis.md).
    pub fn to_json(&self) -> Value {
        let workers: Vec<Value> = self
            .workers
            .iter()
            .map(|w| {
                let mut v = json!({
                    "worker": w.id.worker,
                    "polls": w.polls,
                    "busy_ratio": w.busy_ratio,
                    "mean_poll_ns": w.mean_poll_ns,
                    "max_local_q": w.max_local_q,
                    "pid": w.id.pid,
                    "tid": w.id.tid,
                    "thread": w.thread,
                    "kind": w.id.kind,
                    "runtime": w.runtime,
                    "busy_ns": w.busy_ns,
                    "parked_ns": w.parked_ns,
                    "parks": w.parks,
                    "sched_wait_ns": w.sched_wait_ns,
                });
                // Only for named runtimes: unnamed ones keep their JSON.
                if let Some(n) = &w.runtime_name {
                    v["runtime_name"] = json!(n);
                }
                v
            })
            .collect();
        let locs: Vec<Value> = self
            .spawn_locations
            .iter()
            .map(|l| {
                json!({
                    "spawn_loc_id": l.spawn_loc_id,
                    "location": l.location,
                    "tasks": l.tasks,
                    "polls": l.polls,
                    "poll_ns_total": l.poll_ns_total,
                    "poll_ns_mean": l.poll_ns_mean,
                    "wake_to_poll_p99_ns": l.wake_to_poll_ns.p99,
                    "poll_ns": l.poll_ns.to_json(),
                    "wake_to_poll_ns": l.wake_to_poll_ns.to_json(),
                    "long_polls": l.long_polls,
                    "uncovered_polls": l.uncovered_polls,
                })
            })
            .collect();
        let findings: Vec<Value> = self.findings.iter().map(finding_json).collect();
        let q = |q: &QueueReport| json!({"name": q.name, "samples": q.samples, "max": q.max, "mean": q.mean});
        let mut out = json!({
            "events": self.events,
            "duration_ns": self.duration_ns,
            "dropped_events": self.dropped_events,
            "dropped_profiler_samples": self.dropped_profiler_samples,
            "workers": workers,
            "wake_to_poll_ns": self.wake_to_poll_ns.to_json(),
            "poll_ns": self.poll_ns.to_json(),
            "spawn_locations": locs,
            "findings": findings,
            "files": self.files.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
            "bytes": self.bytes,
            "damaged": self.damaged,
            "errors": self.errors,
            "unsealed_files": self.unsealed_files.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
            "processes": self.processes.iter().map(|p| json!({
                "pid": p.pid, "name": p.name, "recording_id": p.recording_id,
                "events": p.events, "duration_ns": p.duration_ns, "live_tasks": p.live_tasks,
            })).collect::<Vec<_>>(),
            "tasks": {
                "spawned": self.tasks_spawned,
                "terminated": self.tasks_terminated,
                "terminated_unseen": self.tasks_terminated_unseen,
            },
            "poll_ns_mean": self.poll_ns_mean,
            "global_queue": q(&self.global_queue),
            "queues": self.queues.iter().map(q).collect::<Vec<_>>(),
            "notes": self.notes,
            "waiting": self.waiting,
        });
        // Only for traces with spans: the JSON of others is unchanged.
        if !self.spans.spans.is_empty() {
            out["spans"] = self.spans.to_json();
        }
        if !self.memory.is_empty() {
            out["memory"] = serde_json::Value::Array(
                self.memory
                    .iter()
                    .map(|m| {
                        json!({
                            "location": m.location,
                            "alloc_bytes": m.alloc_bytes,
                            "alloc_bytes_per_sec": m.alloc_bytes_per_sec,
                            "samples": m.samples,
                            "live_end_bytes": m.live_end_bytes,
                        })
                    })
                    .collect(),
            );
        }
        self.memory_spans_json(&mut out);
        // Only for recordings with snapshot triggers (flight recorder).
        if !self.snapshots.is_empty() {
            out["snapshots"] = self
                .snapshots
                .iter()
                .map(|s| {
                    json!({
                        "pid": s.pid,
                        "at_ns": s.at_ns,
                        "wall_ns": s.wall_ns.clamp(i64::MIN as i128, i64::MAX as i128) as i64,
                        "reason": s.reason,
                        "kind": if s.request { "request" } else { "trigger" },
                        "answered": s.request.then_some(s.answered),
                    })
                })
                .collect();
        }
        out
    }

    /// JSON `memory_spans` (only for traces whose allocation samples were
    /// made in spans: the JSON of others is unchanged).
    fn memory_spans_json(&self, out: &mut Value) {
        if self.memory_spans.is_empty() {
            return;
        }
        out["memory_spans"] = self
            .memory_spans
            .iter()
            .map(|m| {
                json!({
                    "span": m.span,
                    "alloc_bytes": m.alloc_bytes,
                    "alloc_bytes_per_sec": m.alloc_bytes_per_sec,
                    "samples": m.samples,
                    "live_end_bytes": m.live_end_bytes,
                })
            })
            .collect();
    }

    /// The text table of [`Report::memory_spans`] (nothing without it).
    fn memory_spans_text(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.memory_spans.is_empty() {
            return Ok(());
        }
        memory_table(
            f,
            "=== Memory per span (sampled allocations, by the span current on the allocating thread)",
            "span",
            self.memory_spans.iter().map(|m| {
                (
                    m.alloc_bytes,
                    m.alloc_bytes_per_sec,
                    m.live_end_bytes,
                    m.span.as_str(),
                )
            }),
        )
    }
}

/// A memory table of the text report: a title, then per row the bytes
/// allocated, per second, live at the end (`-`: no live set), and what
/// (`what` names the column); a blank line after.
fn memory_table<'a>(
    f: &mut fmt::Formatter<'_>,
    title: &str,
    what: &str,
    rows: impl Iterator<Item = (u64, f64, Option<u64>, &'a str)>,
) -> fmt::Result {
    use crate::memory::bytes;
    writeln!(f, "{title}")?;
    writeln!(
        f,
        "{:>12} {:>12} {:>12}  {what}",
        "allocated", "per second", "live at end"
    )?;
    for (alloc, per_sec, live, name) in rows {
        let live = live.map_or("-".to_string(), bytes);
        writeln!(
            f,
            "{:>12} {:>12} {:>12}  {name}",
            bytes(alloc),
            bytes(per_sec as u64),
            live
        )?;
    }
    writeln!(f)
}

fn summary_line(s: &Summary) -> String {
    format!(
        "n={}  p50 {}  p90 {}  p99 {}  p99.9 {}  max {}",
        s.count,
        fmt_ns(s.p50),
        fmt_ns(s.p90),
        fmt_ns(s.p99),
        fmt_ns(s.p999),
        fmt_ns(s.max)
    )
}

impl fmt::Display for Report {
    /// The text report `runtrace analyze` prints.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // What the person on call reads first: one line per finding, the
        // evidence under `=== Findings`.
        let first = self.fix_first();
        if !first.is_empty() {
            writeln!(f, "=== What to fix first (evidence under === Findings)")?;
            for l in &first {
                writeln!(f, "{l}")?;
            }
            writeln!(f)?;
        }
        writeln!(f, "=== Summary")?;
        let files: Vec<String> = self.files.iter().map(|p| p.display().to_string()).collect();
        writeln!(f, "files:          {}", files.join(" "))?;
        writeln!(f, "duration:       {}", fmt_ns(self.duration_ns))?;
        let samples = match self.dropped_profiler_samples {
            0 => String::new(),
            n => format!("; {n} of them profiler samples, no task's event"),
        };
        writeln!(
            f,
            "events:         {} ({} dropped by the recorder{samples})",
            self.events, self.dropped_events
        )?;
        let (s, t, u) = (
            self.tasks_spawned,
            self.tasks_terminated,
            self.tasks_terminated_unseen,
        );
        writeln!(f, "tasks:          {}", tasks_text(s, t, u))?;
        for p in &self.processes {
            writeln!(
                f,
                "process:        {} (pid {}), {} events over {}, {} task{} alive at the end",
                p.name,
                p.pid,
                p.events,
                fmt_ns(p.duration_ns),
                p.live_tasks,
                if p.live_tasks == 1 { "" } else { "s" }
            )?;
        }
        writeln!(f)?;
        writeln!(f, "=== Wake→Poll delays (spawn→first poll included)")?;
        writeln!(f, "{}", summary_line(&self.wake_to_poll_ns))?;
        writeln!(f)?;
        writeln!(f, "=== Poll durations")?;
        writeln!(
            f,
            "{}  mean {}",
            summary_line(&self.poll_ns),
            fmt_ns(self.poll_ns_mean)
        )?;
        writeln!(f)?;
        writeln!(f, "=== Workers")?;
        if self.workers.is_empty() {
            writeln!(f, "(no worker events)")?;
        } else {
            writeln!(
                f,
                "{:>7} {:>8} {:>6} {:<9} {:>10} {:>11} {:>6} {:>11} {:>9} {:>6} {:>11}  thread",
                "pid",
                "tid",
                "worker",
                "kind",
                "polls",
                "busy",
                "busy%",
                "mean poll",
                "max lq",
                "parks",
                "sched wait"
            )?;
            for w in &self.workers {
                writeln!(
                    f,
                    "{:>7} {:>8} {:>6} {:<9} {:>10} {:>11} {:>5.1}% {:>11} {:>9} {:>6} {:>11}  {}",
                    w.id.pid,
                    w.id.tid,
                    w.id.worker.map_or("-".into(), |x| x.to_string()),
                    w.id.kind,
                    w.polls,
                    fmt_ns(w.busy_ns),
                    100.0 * w.busy_ratio,
                    fmt_ns(w.mean_poll_ns),
                    w.max_local_q,
                    w.parks,
                    fmt_ns(w.sched_wait_ns),
                    match (&w.runtime_name, w.thread.as_deref()) {
                        (Some(rt), t) => format!("{} [runtime {rt}]", t.unwrap_or("")),
                        (None, t) => t.unwrap_or("").to_string(),
                    }
                )?;
            }
        }
        writeln!(f)?;
        writeln!(f, "=== Spawn Locations (by total poll time)")?;
        if self.spawn_locations.is_empty() {
            writeln!(f, "(no tasks)")?;
        } else {
            writeln!(
                f,
                "{:>4} {:>6} {:>8} {:>10} {:>11} {:>10} {:>10} {:>13}  location",
                "#", "id", "tasks", "polls", "poll time", "mean poll", "max poll", "wake→poll p99"
            )?;
            for (i, l) in self.spawn_locations.iter().enumerate() {
                writeln!(
                    f,
                    "{:>4} {:>6} {:>8} {:>10} {:>11} {:>10} {:>10} {:>13}  {}",
                    i + 1,
                    l.spawn_loc_id,
                    l.tasks,
                    l.polls,
                    fmt_ns(l.poll_ns_total),
                    fmt_ns(l.poll_ns_mean),
                    fmt_ns(l.poll_ns.max),
                    fmt_ns(l.wake_to_poll_ns.p99),
                    l.location
                )?;
            }
        }
        writeln!(f)?;
        writeln!(f, "=== Queues")?;
        let g = &self.global_queue;
        if g.samples == 0 {
            writeln!(f, "global queue:   no QueueSample events")?;
        } else {
            writeln!(
                f,
                "global queue:   max {}, mean {:.2} over {} samples",
                g.max, g.mean, g.samples
            )?;
        }
        for q in &self.queues {
            writeln!(
                f,
                "queue {:<9} max {}, mean {:.2} over {} samples",
                format!("{:?}:", q.name),
                q.max,
                q.mean,
                q.samples
            )?;
        }
        writeln!(f)?;
        // The application's spans, when recorded (nothing otherwise).
        write!(f, "{}", self.spans)?;
        if !self.memory.is_empty() {
            memory_table(
                f,
                "=== Memory (sampled allocations, per spawn location)",
                "location",
                self.memory.iter().map(|m| {
                    (
                        m.alloc_bytes,
                        m.alloc_bytes_per_sec,
                        m.live_end_bytes,
                        m.location.as_str(),
                    )
                }),
            )?;
        }
        self.memory_spans_text(f)?;
        if !self.snapshots.is_empty() {
            let requests = self.snapshots.iter().filter(|s| s.request).count();
            write!(
                f,
                "=== Snapshot triggers ({})",
                self.snapshots.len() - requests
            )?;
            if requests > 0 {
                write!(f, " and requests ({requests})")?;
            }
            writeln!(f)?;
            for s in &self.snapshots {
                write!(
                    f,
                    "at {} (pid {}): {}{}",
                    fmt_at(s.at_ns),
                    s.pid,
                    if s.request { "requested: " } else { "" },
                    s.reason.escape_debug()
                )?;
                if s.request && !s.answered {
                    write!(f, " (no snapshot: no rule lists this reason; RUNTRACE_SNAPSHOT_EVENTS or snapshot_on_event)")?;
                }
                writeln!(f)?;
            }
            writeln!(f)?;
        }
        writeln!(f, "=== Findings ({})", self.findings.len())?;
        if self.findings.is_empty() {
            writeln!(f, "none: no long or slow polls, wake delays, queue buildup, imbalance, idle workers, host starvation, lock or resource waits, leaked or stuck tasks over the thresholds")?;
        }
        for x in &self.findings {
            writeln!(f, "{}", x.headline())?;
            writeln!(f, "           evidence: {}", x.detail)?;
            if let Some(w) = x.window_ns {
                writeln!(f, "           window {}", fmt_window(w))?;
            }
            if let Some(line) = x.functions_line() {
                writeln!(f, "           functions: {line}")?;
            }
            if let Some(line) = x.functions.as_ref().and_then(location_line) {
                writeln!(f, "           all its polls: {line}")?;
            }
            if !x.spans.is_empty() {
                writeln!(f, "           spans: {}", x.spans.join(", "))?;
            }
            if let Some(line) = x.victims_line() {
                writeln!(f, "           victims: {line}")?;
            }
            for e in &x.effects {
                writeln!(f, "           effect {}: {}", e.kind.as_str(), e.detail)?;
            }
        }
        if !self.notes.is_empty() || !self.unsealed_files.is_empty() {
            writeln!(f)?;
            writeln!(f, "=== Notes")?;
            for p in &self.unsealed_files {
                writeln!(
                    f,
                    "{}: no END frame: the recording was cut short (or is still being written)",
                    p.display()
                )?;
            }
            for n in &self.notes {
                writeln!(f, "{n}")?;
            }
        }
        crate::text::errors_section(f, &self.errors)
    }
}

/// One finding as JSON (its effects nested the same way); `functions`
/// and `cpu_profile` only when the trace has CPU samples.
fn finding_json(f: &Finding) -> Value {
    let mut v = json!({
        "kind": f.kind.as_str(),
        "severity": f.severity.as_str(),
        "spawn_loc": f.spawn_loc,
        "detail": f.detail,
        "headline": f.headline(),
        "spawn_loc_id": f.spawn_loc_id,
        "spawn_locs": f.spawn_locs,
        "worker": f.worker.as_ref().map(|w| json!({"pid": w.pid, "tid": w.tid, "worker": w.worker, "kind": w.kind})),
        "window_ns": f.window_ns.map(|w| [w.0, w.1]),
        "evidence": f.evidence,
        "victims": f.victims.iter().map(|v| json!({
            "location": v.location,
            "delayed_polls": v.delayed_polls,
            "worst_delay_ns": v.worst_delay_ns,
        })).collect::<Vec<_>>(),
        "effects": f.effects.iter().map(finding_json).collect::<Vec<_>>(),
    });
    if !f.spans.is_empty() {
        v["spans"] = json!(f.spans);
    }
    if let Some(c) = &f.functions {
        v["functions"] = c
            .functions
            .iter()
            .map(|x| {
                let mut e = json!({
                    "function": x.function,
                    "file": x.file,
                    "line": x.line,
                    "samples": x.samples,
                    "share": x.share,
                    "off_cpu": x.off_cpu,
                });
                if x.off_cpu {
                    e["off_ns"] = json!(x.off_ns);
                }
                if let Some(v) = &x.via {
                    e["via"] = json!(v);
                }
                e
            })
            .collect();
        v["cpu_profile"] = json!({
            "on_cpu_samples": c.on_cpu_samples,
            "on_cpu_ns": c.on_cpu_ns,
            "off_cpu_ns": c.off_cpu_ns,
            "off_cpu_switches": c.off_cpu_switches,
            "preempted_ns": c.preempted_ns,
            "preempted_switches": c.preempted_switches,
            "mostly_off_cpu": c.mostly_off_cpu,
            "polls_over_ns": c.polls_over_ns,
            "truncated_stacks": c.truncated_stacks,
        });
        if let Some(l) = &c.location {
            v["cpu_profile"]["location"] = json!({
                "on_cpu_samples": l.on_cpu_samples,
                "on_cpu_ns": l.on_cpu_ns,
                "off_cpu_ns": l.off_cpu_ns,
                "mostly_off_cpu": l.mostly_off_cpu,
                "top": l.top.as_ref().map(|t| json!({
                    "function": t.function,
                    "file": t.file,
                    "line": t.line,
                    "share": t.share,
                    "off_cpu": t.off_cpu,
                })),
            });
        }
    }
    v
}

/// The `all its polls:` line: the location-wide profile, when a finding's
/// own covers only its long or slow polls.
fn location_line(c: &CpuFunctions) -> Option<String> {
    let l = c.location.as_ref()?;
    let top = l.top.as_ref().map_or(String::new(), |t| {
        format!(", top {} ({:.0}%)", t.function, 100.0 * t.share)
    });
    Some(format!(
        "{} ({} on-CPU samples, {} blocked){top}",
        if l.mostly_off_cpu {
            "mostly blocked"
        } else {
            "mostly on CPU"
        },
        l.on_cpu_samples,
        fmt_ns(l.off_cpu_ns)
    ))
}

impl Finding {
    /// The `functions:` line of `runtrace analyze`'s text: "burning CPU
    /// in" or "blocked in", then the functions with their shares, the top
    /// first (None without CPU samples).
    ///
    /// ```
    /// # use runtrace_analyze::analyze_bytes;
    /// # use runtrace_model::synth::TraceBuilder;
    /// let mut b = TraceBuilder::new();
    /// b.location(1, "src/main.rs", 10, 5);
    /// b.spawn(7, 1_000, 1, 0, 1, 0);
    /// b.poll_start(7, 0, 2_000, 1, 0, 0);
    /// b.poll_end(7, 0, 60_000_000, 1, true);
    /// let r = analyze_bytes(&b.finish(), Default::default());
    /// assert_eq!(r.findings[0].functions_line(), None); // no samples
    /// ```
    pub fn functions_line(&self) -> Option<String> {
        self.functions.as_ref().map(functions_line)
    }

    /// The `victims:` line of `runtrace analyze`'s text: the first five
    /// locations whose polls it delayed, with their counts and worst
    /// delays (None when none).
    ///
    /// ```
    /// # use runtrace_analyze::analyze_bytes;
    /// # use runtrace_model::synth::TraceBuilder;
    /// let r = analyze_bytes(&TraceBuilder::new().finish(), Default::default());
    /// assert!(r.findings.iter().all(|f| f.victims_line().is_none() == f.victims.is_empty()));
    /// ```
    pub fn victims_line(&self) -> Option<String> {
        if self.victims.is_empty() {
            return None;
        }
        let v: Vec<String> = self
            .victims
            .iter()
            .take(5)
            .map(|v| {
                format!(
                    "{} ({} delayed, worst {})",
                    v.location,
                    v.delayed_polls,
                    fmt_ns(v.worst_delay_ns)
                )
            })
            .collect();
        let more = self.victims.len().saturating_sub(5);
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        Some(format!("{}{more}", v.join(", ")))
    }
}

/// The `functions:` line of a finding with CPU samples: "burning CPU in"
/// or "blocked in", then the functions with their shares, the top first.
fn functions_line(c: &CpuFunctions) -> String {
    let scope = if c.polls_over_ns > 0 {
        format!("its polls over {}", fmt_ns(c.polls_over_ns))
    } else {
        "its polls".to_string()
    };
    let Some(top) = c.functions.first() else {
        return format!("no CPU samples in {scope}");
    };
    let list: Vec<String> = c
        .functions
        .iter()
        .map(|x| {
            let at = match (&x.file, x.line) {
                (Some(f), Some(l)) => format!(" {}:{l}", f.rsplit('/').next().unwrap_or(f)),
                _ => String::new(),
            };
            let what = if x.off_cpu {
                format!("off-CPU {}", fmt_ns(x.off_ns))
            } else {
                format!("{} samples", x.samples)
            };
            let via = x
                .via
                .as_ref()
                .map_or(String::new(), |v| format!(" via {v}"));
            format!("{}{at}{via} ({:.0}%, {what})", x.function, 100.0 * x.share)
        })
        .collect();
    let truncated = if c.truncated_stacks > 0 {
        format!("; {} truncated stacks", c.truncated_stacks)
    } else {
        String::new()
    };
    format!(
        "{} {} [from {scope}{truncated}]",
        if top.off_cpu {
            "blocked in"
        } else {
            "burning CPU in"
        },
        list.join(", ")
    )
}

fn fmt_window(w: (i64, i64)) -> String {
    format!("{}..{}", fmt_at(w.0), fmt_at(w.1))
}
