//! The analysis result: statistics, findings, and their text and JSON
//! forms (the JSON keys are documented in docs/analysis.md).

use crate::engine::{Engine, Window};
use crate::hist::Summary;
use crate::read::ReadStats;
use crate::Thresholds;
use runtrace_format::NO_WORKER;
use serde_json::{json, Value};
use std::fmt::{self, Write as _};
use std::path::PathBuf;

/// How serious a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Worth a look.
    Warning,
    /// Likely hurting latency or throughput now.
    Critical,
}

impl Severity {
    /// `warning` or `critical`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }
}

/// The kinds of finding (docs/analysis.md says what triggers each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FindingKind {
    /// A poll longer than `long_poll_ns`.
    LongPoll,
    /// Wake -> poll p99 above `wake_delay_ns`.
    WakeDelay,
    /// A deep local queue while polls waited long.
    LocalQueueBuildup,
    /// Poll counts of one runtime's workers differ too much.
    WorkerImbalance,
    /// A worker parked while another had queued work.
    IdleWhileQueued,
    /// A location whose mean poll is long.
    CpuBound,
}

impl FindingKind {
    /// The `kind` string in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            FindingKind::LongPoll => "long_poll",
            FindingKind::WakeDelay => "wake_delay",
            FindingKind::LocalQueueBuildup => "local_queue_buildup",
            FindingKind::WorkerImbalance => "worker_imbalance",
            FindingKind::IdleWhileQueued => "idle_while_queued",
            FindingKind::CpuBound => "cpu_bound",
        }
    }
}

/// Names a worker: keyed by process, OS thread and worker index, since
/// executor and tokio workers may share small indices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerId {
    /// Process id.
    pub pid: u64,
    /// OS thread id.
    pub tid: u64,
    /// Worker index (None: polls on a thread that is not a worker).
    pub worker: Option<u32>,
    /// `tokio`, `executor` or `unknown` (never polled).
    pub kind: &'static str,
}

impl fmt::Display for WorkerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.worker {
            Some(w) => write!(f, "{} worker {w} (tid {})", self.kind, self.tid),
            None => write!(f, "non-worker thread {}", self.tid),
        }
    }
}

/// One finding.
#[derive(Debug, Clone)]
pub struct Finding {
    /// What kind.
    pub kind: FindingKind,
    /// How bad.
    pub severity: Severity,
    /// The spawn location most responsible (`file:line:col`).
    pub spawn_loc: Option<String>,
    /// Its id in the trace (0: unknown location).
    pub spawn_loc_id: Option<u64>,
    /// Every spawn location the finding names, most responsible first.
    pub spawn_locs: Vec<String>,
    /// The worker concerned, if one.
    pub worker: Option<WorkerId>,
    /// The time window of the evidence, ns since the recording started.
    pub window_ns: Option<(i64, i64)>,
    /// A sentence for a person, with the numbers.
    pub detail: String,
    /// The numbers, as JSON.
    pub evidence: Value,
}

/// One worker's statistics.
#[derive(Debug, Clone)]
pub struct WorkerReport {
    /// Which worker.
    pub id: WorkerId,
    /// Thread name, if the trace has one.
    pub thread: Option<String>,
    /// Runtime id (from WorkerStart / WorkerStop).
    pub runtime: Option<u32>,
    /// Completed polls.
    pub polls: u64,
    /// Sum of poll durations.
    pub busy_ns: u64,
    /// Time parked (WorkerPark -> WorkerUnpark; a park open at the end
    /// counts to the end of the trace).
    pub parked_ns: u64,
    /// Parks.
    pub parks: u64,
    /// busy / (busy + parked), or busy / trace duration without parks.
    pub busy_ratio: f64,
    /// busy / polls.
    pub mean_poll_ns: u64,
    /// Deepest local queue seen at a poll start or park.
    pub max_local_q: u32,
    /// Scheduler wait: growth of `sched_wait_ns` between the worker's
    /// first and last unpark.
    pub sched_wait_ns: u64,
}

/// One spawn location's statistics.
#[derive(Debug, Clone)]
pub struct LocationReport {
    /// Location id in the trace (0: unknown).
    pub spawn_loc_id: u64,
    /// `file:line:col`, or `<unknown>`.
    pub location: String,
    /// Tasks spawned there (tasks first seen without a spawn count under
    /// `<unknown>`).
    pub tasks: u64,
    /// Completed polls.
    pub polls: u64,
    /// Sum of poll durations.
    pub poll_ns_total: u64,
    /// Mean poll duration.
    pub poll_ns_mean: u64,
    /// Poll duration percentiles.
    pub poll_ns: Summary,
    /// Wake -> poll delay percentiles.
    pub wake_to_poll_ns: Summary,
    /// Polls over the long-poll threshold.
    pub long_polls: u64,
}

/// Global (injection) queue depth from QueueSample events.
#[derive(Debug, Clone, Default)]
pub struct QueueReport {
    /// Queue name (empty: the runtime's global queue).
    pub name: String,
    /// Samples.
    pub samples: u64,
    /// Deepest.
    pub max: u64,
    /// Mean over samples.
    pub mean: f64,
}

/// A recording (process) in the input.
#[derive(Debug, Clone)]
pub struct ProcessReport {
    /// Process id.
    pub pid: u64,
    /// Process name.
    pub name: String,
    /// Recording id.
    pub recording_id: u64,
    /// Events.
    pub events: u64,
    /// First to last event.
    pub duration_ns: u64,
    /// Tasks still alive at the end.
    pub live_tasks: u64,
}

/// Everything `runtrace analyze` reports.
#[derive(Debug, Clone)]
pub struct Report {
    /// Files read, in order.
    pub files: Vec<PathBuf>,
    /// Bytes read.
    pub bytes: u64,
    /// Events decoded (every type).
    pub events: u64,
    /// First to last event (wall clock, across recordings).
    pub duration_ns: u64,
    /// Events the recorder reported lost (DROPPED frames).
    pub dropped_events: u64,
    /// Damage found (file and byte offset in each).
    pub errors: Vec<String>,
    /// True when some file was damaged or cut short (exit code 1).
    pub damaged: bool,
    /// Intact files without an END frame.
    pub unsealed_files: Vec<PathBuf>,
    /// Recordings.
    pub processes: Vec<ProcessReport>,
    /// TaskSpawn events.
    pub tasks_spawned: u64,
    /// TaskTerminate events.
    pub tasks_terminated: u64,
    /// Workers, by process, kind and index.
    pub workers: Vec<WorkerReport>,
    /// Poll durations.
    pub poll_ns: Summary,
    /// Mean poll duration.
    pub poll_ns_mean: u64,
    /// Wake -> poll delays (spawn -> first poll included).
    pub wake_to_poll_ns: Summary,
    /// Spawn locations by total poll time, descending.
    pub spawn_locations: Vec<LocationReport>,
    /// Global queue depth.
    pub global_queue: QueueReport,
    /// Named (executor) queues.
    pub queues: Vec<QueueReport>,
    /// Findings, critical first.
    pub findings: Vec<Finding>,
    /// Things about the input worth knowing (unmatched events, ...).
    pub notes: Vec<String>,
    /// The thresholds used.
    pub thresholds: Thresholds,
}

/// Human-readable duration.
pub fn fmt_ns(ns: u64) -> String {
    let f = ns as f64;
    if ns < 1_000 {
        format!("{ns} ns")
    } else if ns < 1_000_000 {
        format!("{:.1} µs", f / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.2} ms", f / 1e6)
    } else {
        format!("{:.3} s", f / 1e9)
    }
}

/// "once", "twice", "N times".
fn times(n: u64) -> String {
    match n {
        1 => "once".into(),
        2 => "twice".into(),
        n => format!("{n} times"),
    }
}

/// A point in the trace, as seconds since the recording started.
fn fmt_at(ns: i64) -> String {
    format!("{:.6} s", ns as f64 / 1e9)
}

fn fmt_window(w: (i64, i64)) -> String {
    format!("{}..{}", fmt_at(w.0), fmt_at(w.1))
}

struct Ctx<'a> {
    e: &'a Engine,
}

impl Ctx<'_> {
    fn worker_id(&self, wi: u32) -> WorkerId {
        let w = &self.e.workers[wi as usize];
        WorkerId {
            pid: self.e.procs[w.proc as usize].pid,
            tid: self.e.threads[w.thread as usize].tid,
            worker: (w.worker != NO_WORKER).then_some(w.worker),
            kind: if w.saw_executor && w.saw_tokio {
                "mixed"
            } else if w.saw_executor {
                "executor"
            } else if w.saw_tokio {
                "tokio"
            } else {
                "unknown"
            },
        }
    }

    fn loc(&self, l: u32) -> String {
        self.e.locs[l as usize].text.to_string()
    }

    fn ns_at(&self, proc: u32, ticks: u64) -> i64 {
        self.e.procs[proc as usize].ns(ticks)
    }

    fn window(&self, wi: u32, a: u64, b: u64) -> (i64, i64) {
        let p = self.e.workers[wi as usize].proc;
        (self.ns_at(p, a), self.ns_at(p, b))
    }

    /// The top `n` locations of a per-location vector, largest first.
    fn top(&self, v: &[u64], n: usize) -> Vec<(u32, u64)> {
        let mut t: Vec<(u32, u64)> = v
            .iter()
            .enumerate()
            .filter(|(_, &x)| x > 0)
            .map(|(i, &x)| (i as u32, x))
            .collect();
        t.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        t.truncate(n);
        t
    }

    /// "a.rs:1:2 (62%), b.rs:3:4 (20%)" for a top list of ns.
    fn share_list(&self, top: &[(u32, u64)], total: u64) -> String {
        top.iter()
            .map(|&(l, v)| {
                format!(
                    "{} ({:.0}% of that time, {})",
                    self.loc(l),
                    100.0 * v as f64 / total.max(1) as f64,
                    fmt_ns(v)
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn window_json(&self, w: &Window) -> Value {
        let (a, b) = self.window(w.worker, w.wake, w.poll);
        json!({
            "delay_ns": w.delay_ns,
            "wake_at_ns": a,
            "poll_at_ns": b,
            "task": w.task,
            "spawn_loc": self.loc(w.victim),
            "worker": self.worker_json(w.worker),
            "max_local_q": w.max_local_q,
        })
    }

    fn worker_json(&self, wi: u32) -> Value {
        let id = self.worker_id(wi);
        json!({"pid": id.pid, "tid": id.tid, "worker": id.worker, "kind": id.kind})
    }
}

#[allow(clippy::too_many_arguments)]
fn finding(
    kind: FindingKind,
    severity: Severity,
    c: &Ctx<'_>,
    locs: &[u32],
    worker: Option<u32>,
    window_ns: Option<(i64, i64)>,
    detail: String,
    evidence: Value,
) -> Finding {
    Finding {
        kind,
        severity,
        spawn_loc: locs.first().map(|&l| c.loc(l)),
        spawn_loc_id: locs.first().map(|&l| c.e.locs[l as usize].trace_id),
        spawn_locs: locs.iter().map(|&l| c.loc(l)).collect(),
        worker: worker.map(|w| c.worker_id(w)),
        window_ns,
        detail,
        evidence,
    }
}

/// Builds the report from the finished engine.
pub(crate) fn build(e: &Engine, rs: ReadStats) -> Report {
    let c = Ctx { e };
    let th = e.th;
    // Duration: wall clock of the first and last event over recordings.
    let mut first = i128::MAX;
    let mut last = i128::MIN;
    let mut processes = Vec::new();
    for p in &e.procs {
        if p.events == 0 {
            continue;
        }
        first = first.min(p.wall_ns(p.first_ticks));
        last = last.max(p.wall_ns(p.last_ticks));
        processes.push(ProcessReport {
            pid: p.pid,
            name: p.process_name.clone(),
            recording_id: p.recording_id,
            events: p.events,
            duration_ns: (p.ns(p.last_ticks) - p.ns(p.first_ticks)).max(0) as u64,
            live_tasks: p.live_tasks() as u64,
        });
    }
    let duration_ns = if last >= first {
        (last - first).min(u64::MAX as i128) as u64
    } else {
        0
    };
    // Workers.
    let mut workers = Vec::new();
    let mut order: Vec<u32> = (0..e.workers.len() as u32).collect();
    order.retain(|&wi| {
        let w = &e.workers[wi as usize];
        w.worker != NO_WORKER || w.polls > 0
    });
    order.sort_by_key(|&wi| {
        let id = c.worker_id(wi);
        (id.pid, id.kind, id.worker.unwrap_or(u32::MAX), id.tid)
    });
    for &wi in &order {
        let w = &e.workers[wi as usize];
        let p = &e.procs[w.proc as usize];
        let pdur = p.scale.ns(p.last_ticks.saturating_sub(p.first_ticks));
        let busy_ratio = if w.parks > 0 {
            w.busy_ns as f64 / (w.busy_ns + w.parked_ns).max(1) as f64
        } else {
            (w.busy_ns as f64 / pdur.max(1) as f64).min(1.0)
        };
        workers.push(WorkerReport {
            id: c.worker_id(wi),
            thread: e.threads[w.thread as usize].name.clone(),
            runtime: w.runtime,
            polls: w.polls,
            busy_ns: w.busy_ns,
            parked_ns: w.parked_ns,
            parks: w.parks,
            busy_ratio,
            mean_poll_ns: w.busy_ns.checked_div(w.polls).unwrap_or(0),
            max_local_q: w.max_local_q,
            sched_wait_ns: w.sched_wait_ns,
        });
    }
    // Spawn locations.
    let mut spawn_locations: Vec<(u32, LocationReport)> = e
        .locs
        .iter()
        .enumerate()
        .filter(|(_, l)| l.tasks > 0 || l.poll.count() > 0 || l.wake.count() > 0)
        .map(|(i, l)| {
            (
                i as u32,
                LocationReport {
                    spawn_loc_id: l.trace_id,
                    location: l.text.to_string(),
                    tasks: l.tasks,
                    polls: l.poll.count(),
                    poll_ns_total: l.poll.sum(),
                    poll_ns_mean: l.poll.mean(),
                    poll_ns: l.poll.summary(),
                    wake_to_poll_ns: l.wake.summary(),
                    long_polls: l.long_polls,
                },
            )
        })
        .collect();
    spawn_locations.sort_by(|a, b| {
        b.1.poll_ns_total
            .cmp(&a.1.poll_ns_total)
            .then(b.1.polls.cmp(&a.1.polls))
            .then(a.1.location.cmp(&b.1.location))
    });
    let findings = findings(&c, &th, duration_ns);
    let mut notes = Vec::new();
    if e.late_events > 0 {
        notes.push(format!(
            "{} events arrived more than one writer round late and were analysed out of order",
            e.late_events
        ));
    }
    if rs.forced_releases > 0 {
        notes.push(format!(
            "{} times the pending events exceeded the memory bound before a ROUND frame; ordering across threads may be approximate there",
            rs.forced_releases
        ));
    }
    if e.unmatched_poll_ends + e.unmatched_poll_starts > 0 {
        notes.push(format!(
            "{} PollEnd without a PollStart and {} PollStart without a PollEnd (lost events, or polls cut by the trace's start or end)",
            e.unmatched_poll_ends, e.unmatched_poll_starts
        ));
    }
    if rs.unrecognised_schemas > 0 {
        notes.push(format!(
            "{} built-in event schemas had unexpected fields and were skipped",
            rs.unrecognised_schemas
        ));
    }
    if e.dropped_orphan_wakes > 0 {
        notes.push(format!(
            "{} wakes of tasks never polled afterwards were forgotten (memory bound)",
            e.dropped_orphan_wakes
        ));
    }
    let gq = &e.global_q;
    Report {
        files: rs.files,
        bytes: rs.bytes,
        events: rs.events,
        duration_ns,
        dropped_events: rs.dropped,
        errors: rs.errors,
        damaged: rs.damaged,
        unsealed_files: rs.unsealed,
        processes,
        tasks_spawned: e.spawns,
        tasks_terminated: e.terminated,
        workers,
        poll_ns: e.poll.summary(),
        poll_ns_mean: e.poll.mean(),
        wake_to_poll_ns: e.wake.summary(),
        spawn_locations: spawn_locations.into_iter().map(|x| x.1).collect(),
        global_queue: QueueReport {
            name: String::new(),
            samples: gq.samples,
            max: gq.max,
            mean: gq.sum as f64 / gq.samples.max(1) as f64,
        },
        queues: e
            .queues
            .iter()
            .map(|(n, q)| QueueReport {
                name: n.clone(),
                samples: q.samples,
                max: q.max,
                mean: q.sum as f64 / q.samples.max(1) as f64,
            })
            .collect(),
        findings,
        notes,
        thresholds: th,
    }
}

/// Most findings of one kind listed (the worst ones).
const MAX_PER_KIND: usize = 8;

fn findings(c: &Ctx<'_>, th: &Thresholds, duration_ns: u64) -> Vec<Finding> {
    let e = c.e;
    let mut out = Vec::new();

    // Long polls, per location.
    let mut long: Vec<u32> = (0..e.locs.len() as u32)
        .filter(|&l| e.locs[l as usize].long_polls > 0)
        .collect();
    long.sort_by_key(|&l| std::cmp::Reverse(e.locs[l as usize].worst_poll.map_or(0, |p| p.ns)));
    for &l in long.iter().take(MAX_PER_KIND) {
        let loc = &e.locs[l as usize];
        let Some(wp) = loc.worst_poll else { continue };
        let sev = if loc.critical_polls > 0 {
            Severity::Critical
        } else {
            Severity::Warning
        };
        let win = c.window(wp.worker, wp.start, wp.start);
        let win = (win.0, win.0 + wp.ns as i64);
        let detail = format!(
            "{} of {} polls at {} took over {} ({} over {}); the worst took {} at {} on {} (task {})",
            loc.long_polls,
            loc.poll.count(),
            loc.text,
            fmt_ns(th.long_poll_ns),
            loc.critical_polls,
            fmt_ns(th.long_poll_critical_ns),
            fmt_ns(wp.ns),
            fmt_at(win.0),
            c.worker_id(wp.worker),
            wp.task
        );
        out.push(finding(
            FindingKind::LongPoll,
            sev,
            c,
            &[l],
            Some(wp.worker),
            Some(win),
            detail,
            json!({
                "long_polls": loc.long_polls,
                "critical_polls": loc.critical_polls,
                "polls": loc.poll.count(),
                "worst_poll_ns": wp.ns,
                "worst_poll_at_ns": win.0,
                "task": wp.task,
                "worker": c.worker_json(wp.worker),
            }),
        ));
    }

    // Wake -> poll delays.
    let global_p99 = e.wake.quantile_permille(990);
    let mut victims: Vec<(u32, u64)> = (0..e.locs.len() as u32)
        .map(|l| (l, e.locs[l as usize].wake.quantile_permille(990)))
        .filter(|&(_, p99)| p99 > th.wake_delay_ns)
        .collect();
    if victims.is_empty() && global_p99 > th.wake_delay_ns {
        // No single location is over, together they are: name the worst.
        victims = (0..e.locs.len() as u32)
            .filter(|&l| e.locs[l as usize].delayed.count > 0)
            .map(|l| (l, e.locs[l as usize].wake.quantile_permille(990)))
            .collect();
    }
    victims.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    for &(l, p99) in victims.iter().take(MAX_PER_KIND) {
        let loc = &e.locs[l as usize];
        let d = &loc.delayed;
        let blockers = c.top(&d.blockers, 3);
        let blocked_total: u64 = d.blockers.iter().sum();
        let sev = if p99 > th.wake_delay_critical_ns {
            Severity::Critical
        } else {
            Severity::Warning
        };
        let mut detail = format!(
            "wake->poll p99 at {} is {} over {} wakes (overall p99 {}); {} polls started more than {} after their wake",
            loc.text,
            fmt_ns(p99),
            loc.wake.count(),
            fmt_ns(global_p99),
            d.count,
            fmt_ns(th.wake_delay_ns)
        );
        let mut window = None;
        let mut worker = None;
        if let Some(w) = d.worst {
            let win = c.window(w.worker, w.wake, w.poll);
            let _ = write!(
                detail,
                "; the worst waited {} (task {}, {} to {}) on {}",
                fmt_ns(w.delay_ns),
                w.task,
                fmt_at(win.0),
                fmt_at(win.1),
                c.worker_id(w.worker)
            );
            window = Some(win);
            worker = Some(w.worker);
        }
        if !blockers.is_empty() {
            let _ = write!(
                detail,
                "; meanwhile that worker was polling {}",
                c.share_list(&blockers, blocked_total)
            );
        }
        let mut locs = vec![l];
        locs.extend(blockers.iter().map(|b| b.0).filter(|&b| b != l));
        out.push(finding(
            FindingKind::WakeDelay,
            sev,
            c,
            &locs,
            worker,
            window,
            detail,
            json!({
                "wake_to_poll_p99_ns": p99,
                "overall_wake_to_poll_p99_ns": global_p99,
                "wakes": loc.wake.count(),
                "delayed_polls": d.count,
                "worst": d.worst.map(|w| c.window_json(&w)),
                "blockers": blockers.iter().map(|&(b, ns)| json!({
                    "spawn_loc": c.loc(b),
                    "poll_ns": ns,
                    "share": ns as f64 / blocked_total.max(1) as f64,
                })).collect::<Vec<_>>(),
            }),
        ));
    }

    // Local queue buildup, per worker.
    let mut bu: Vec<u32> = (0..e.workers.len() as u32)
        .filter(|&w| e.workers[w as usize].buildup.count > 0)
        .collect();
    bu.sort_by_key(|&w| std::cmp::Reverse(e.workers[w as usize].buildup.max_local_q));
    for &wi in bu.iter().take(MAX_PER_KIND) {
        let b = &e.workers[wi as usize].buildup;
        let Some(worst) = b.worst else { continue };
        let blockers = c.top(&b.blockers, 3);
        let total: u64 = b.blockers.iter().sum();
        let victims = c.top(&b.victims, 3);
        let sev = if worst.delay_ns > th.wake_delay_critical_ns {
            Severity::Critical
        } else {
            Severity::Warning
        };
        let win = c.window(wi, worst.wake, worst.poll);
        let mut detail = format!(
            "{}'s local queue reached {} (over {}) while {} polls waited more than {} after their wake; the worst waited {} ({} to {}, a task of {})",
            c.worker_id(wi),
            b.max_local_q,
            th.local_q,
            b.count,
            fmt_ns(th.wake_delay_ns),
            fmt_ns(worst.delay_ns),
            fmt_at(win.0),
            fmt_at(win.1),
            c.loc(worst.victim),
        );
        if !blockers.is_empty() {
            let _ = write!(
                detail,
                "; in those windows the worker was polling {}",
                c.share_list(&blockers, total)
            );
        }
        let mut locs: Vec<u32> = blockers.iter().map(|x| x.0).collect();
        for v in &victims {
            if !locs.contains(&v.0) {
                locs.push(v.0);
            }
        }
        out.push(finding(
            FindingKind::LocalQueueBuildup,
            sev,
            c,
            &locs,
            Some(wi),
            Some(win),
            detail,
            json!({
                "max_local_q": b.max_local_q,
                "delayed_polls": b.count,
                "worst": c.window_json(&worst),
                "victims": victims.iter().map(|&(v, n)| json!({"spawn_loc": c.loc(v), "delayed_polls": n})).collect::<Vec<_>>(),
                "blockers": blockers.iter().map(|&(l, ns)| json!({"spawn_loc": c.loc(l), "poll_ns": ns})).collect::<Vec<_>>(),
            }),
        ));
    }

    // Worker imbalance, per (process, kind) group.
    let mut groups: std::collections::BTreeMap<(u32, &'static str), Vec<u32>> = Default::default();
    for (wi, w) in e.workers.iter().enumerate() {
        if w.worker == NO_WORKER {
            continue;
        }
        let k = c.worker_id(wi as u32).kind;
        groups.entry((w.proc, k)).or_default().push(wi as u32);
    }
    // Workers that never polled join the process's only group, or tokio's.
    let unknown: Vec<((u32, &str), Vec<u32>)> = groups
        .iter()
        .filter(|(k, _)| k.1 == "unknown")
        .map(|(k, v)| (*k, v.clone()))
        .collect();
    for (k, v) in unknown {
        let others: Vec<(u32, &'static str)> = groups
            .keys()
            .filter(|g| g.0 == k.0 && g.1 != "unknown")
            .copied()
            .collect();
        let target = if others.len() == 1 {
            Some(others[0])
        } else {
            others.iter().find(|g| g.1 == "tokio").copied()
        };
        if let Some(t) = target {
            groups.remove(&k);
            groups.entry(t).or_default().extend(v);
        }
    }
    for ((_, kind), ws) in &groups {
        if ws.len() < 2 {
            continue;
        }
        let polls = |wi: &u32| e.workers[*wi as usize].polls;
        let (Some(&max_w), Some(&min_w)) = (
            ws.iter().max_by_key(|w| polls(w)),
            ws.iter().min_by_key(|w| polls(w)),
        ) else {
            continue;
        };
        let (max, min) = (polls(&max_w), polls(&min_w));
        if max < th.imbalance_min_polls || (max as f64) <= min as f64 * th.imbalance_ratio {
            continue;
        }
        let ratio = max as f64 / min.max(1) as f64;
        let sev = if min == 0 || ratio >= th.imbalance_critical_ratio {
            Severity::Critical
        } else {
            Severity::Warning
        };
        let busiest = &e.workers[max_w as usize];
        let by_polls: Vec<u64> = busiest.loc_polls.iter().map(|x| x.0).collect();
        let top = c.top(&by_polls, 3);
        let counts: Vec<String> = ws
            .iter()
            .map(|&w| {
                let id = c.worker_id(w);
                format!(
                    "{}: {}",
                    id.worker.map_or("-".into(), |x| x.to_string()),
                    polls(&w)
                )
            })
            .collect();
        let p = &e.procs[busiest.proc as usize];
        let win = (p.ns(p.first_ticks), p.ns(p.last_ticks));
        let detail = format!(
            "{kind} workers' poll counts differ by {:.1}x: {} polled {} times, {} only {} (polls per worker: {}); the busiest ran mostly {}",
            ratio,
            c.worker_id(max_w),
            max,
            c.worker_id(min_w),
            min,
            counts.join(", "),
            top.iter()
                .map(|&(l, n)| format!("{} ({} polls)", c.loc(l), n))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let locs: Vec<u32> = top.iter().map(|x| x.0).collect();
        out.push(finding(
            FindingKind::WorkerImbalance,
            sev,
            c,
            &locs,
            Some(max_w),
            Some(win),
            detail,
            json!({
                "ratio": ratio,
                "max_polls": max,
                "min_polls": min,
                "workers": ws.iter().map(|&w| json!({"worker": c.worker_json(w), "polls": polls(&w)})).collect::<Vec<_>>(),
                "busiest_locations": top.iter().map(|&(l, n)| json!({"spawn_loc": c.loc(l), "polls": n})).collect::<Vec<_>>(),
            }),
        ));
    }

    // Idle workers while work is queued, per process.
    for (pi, p) in e.procs.iter().enumerate() {
        let idle = &p.idle;
        let Some(lw) = idle.longest else { continue };
        let sev = if lw.ns >= th.idle_critical_window_ns {
            Severity::Critical
        } else {
            Severity::Warning
        };
        let top = c.top(&idle.locs, 3);
        let total: u64 = idle.locs.iter().sum();
        let win = (p.ns(lw.start), p.ns(lw.end));
        let queued = if lw.queued != u32::MAX {
            format!(
                "{} had {} tasks in its local queue",
                c.worker_id(lw.queued),
                lw.max_local_q
            )
        } else {
            format!("the global queue held {} tasks", lw.max_global_q)
        };
        let mut detail = format!(
            "{} (for {} in all, {:.1}% of the trace) a worker was parked while work was queued; the longest lasted {} ({} to {}): {} was parked while {}",
            times(idle.windows),
            fmt_ns(idle.total_ns),
            100.0 * idle.total_ns as f64 / duration_ns.max(1) as f64,
            fmt_ns(lw.ns),
            fmt_at(win.0),
            fmt_at(win.1),
            c.worker_id(lw.parked),
            queued
        );
        if !top.is_empty() {
            let _ = write!(
                detail,
                "; the busy workers were polling {}",
                c.share_list(&top, total)
            );
        }
        let locs: Vec<u32> = top.iter().map(|x| x.0).collect();
        out.push(finding(
            FindingKind::IdleWhileQueued,
            sev,
            c,
            &locs,
            Some(lw.parked),
            Some(win),
            detail,
            json!({
                "pid": e.procs[pi].pid,
                "windows": idle.windows,
                "total_ns": idle.total_ns,
                "longest_ns": lw.ns,
                "parked_worker": c.worker_json(lw.parked),
                "queued_worker": (lw.queued != u32::MAX).then(|| c.worker_json(lw.queued)),
                "max_local_q": lw.max_local_q,
                "max_global_q": lw.max_global_q,
                "busy_locations": top.iter().map(|&(l, ns)| json!({"spawn_loc": c.loc(l), "poll_ns": ns})).collect::<Vec<_>>(),
            }),
        ));
    }

    // CPU-bound locations.
    let mut cpu: Vec<u32> = (0..e.locs.len() as u32)
        .filter(|&l| {
            let h = &e.locs[l as usize].poll;
            h.count() >= th.cpu_bound_min_polls && h.mean() > th.cpu_bound_mean_ns
        })
        .collect();
    cpu.sort_by_key(|&l| std::cmp::Reverse(e.locs[l as usize].poll.sum()));
    for &l in cpu.iter().take(MAX_PER_KIND) {
        let loc = &e.locs[l as usize];
        let h = &loc.poll;
        let sev = if h.mean() > th.cpu_bound_critical_mean_ns {
            Severity::Critical
        } else {
            Severity::Warning
        };
        let detail = format!(
            "tasks spawned at {} poll for {} on average (over {}) across {} polls, {} in all ({:.1}% of all poll time); p99 {}",
            loc.text,
            fmt_ns(h.mean()),
            fmt_ns(th.cpu_bound_mean_ns),
            h.count(),
            fmt_ns(h.sum()),
            100.0 * h.sum() as f64 / e.poll.sum().max(1) as f64,
            fmt_ns(h.quantile_permille(990))
        );
        let window = loc.worst_poll.map(|wp| {
            let a = c.window(wp.worker, wp.start, wp.start).0;
            (a, a + wp.ns as i64)
        });
        out.push(finding(
            FindingKind::CpuBound,
            sev,
            c,
            &[l],
            loc.worst_poll.map(|p| p.worker),
            window,
            detail,
            json!({
                "mean_poll_ns": h.mean(),
                "polls": h.count(),
                "poll_ns_total": h.sum(),
                "poll_p99_ns": h.quantile_permille(990),
            }),
        ));
    }
    out.sort_by(|a, b| b.severity.cmp(&a.severity).then(a.kind.cmp(&b.kind)));
    out
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
                json!({
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
                })
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
                })
            })
            .collect();
        let findings: Vec<Value> = self
            .findings
            .iter()
            .map(|f| {
                json!({
                    "kind": f.kind.as_str(),
                    "severity": f.severity.as_str(),
                    "spawn_loc": f.spawn_loc,
                    "detail": f.detail,
                    "spawn_loc_id": f.spawn_loc_id,
                    "spawn_locs": f.spawn_locs,
                    "worker": f.worker.as_ref().map(|w| json!({"pid": w.pid, "tid": w.tid, "worker": w.worker, "kind": w.kind})),
                    "window_ns": f.window_ns.map(|w| [w.0, w.1]),
                    "evidence": f.evidence,
                })
            })
            .collect();
        let q = |q: &QueueReport| json!({"name": q.name, "samples": q.samples, "max": q.max, "mean": q.mean});
        json!({
            "events": self.events,
            "duration_ns": self.duration_ns,
            "dropped_events": self.dropped_events,
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
            "tasks": {"spawned": self.tasks_spawned, "terminated": self.tasks_terminated},
            "poll_ns_mean": self.poll_ns_mean,
            "global_queue": q(&self.global_queue),
            "queues": self.queues.iter().map(q).collect::<Vec<_>>(),
            "notes": self.notes,
        })
    }
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
        writeln!(f, "=== Summary")?;
        let files: Vec<String> = self.files.iter().map(|p| p.display().to_string()).collect();
        writeln!(f, "files:          {}", files.join(" "))?;
        writeln!(f, "duration:       {}", fmt_ns(self.duration_ns))?;
        writeln!(
            f,
            "events:         {} ({} dropped by the recorder)",
            self.events, self.dropped_events
        )?;
        writeln!(
            f,
            "tasks:          {} spawned, {} terminated",
            self.tasks_spawned, self.tasks_terminated
        )?;
        for p in &self.processes {
            writeln!(
                f,
                "process:        {} (pid {}), {} events over {}, {} tasks alive at the end",
                p.name,
                p.pid,
                p.events,
                fmt_ns(p.duration_ns),
                p.live_tasks
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
                    w.thread.as_deref().unwrap_or("")
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
        writeln!(f, "=== Findings ({})", self.findings.len())?;
        if self.findings.is_empty() {
            writeln!(f, "none: no long polls, wake delays, queue buildup, imbalance, idle workers or CPU-bound locations over the thresholds")?;
        }
        for x in &self.findings {
            let sev = match x.severity {
                Severity::Critical => "CRITICAL",
                Severity::Warning => "WARNING",
            };
            writeln!(f, "[{sev}] {}: {}", x.kind.as_str(), x.detail)?;
            if let Some(w) = x.window_ns {
                writeln!(f, "           window {}", fmt_window(w))?;
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
        if !self.errors.is_empty() {
            writeln!(f)?;
            writeln!(
                f,
                "=== Errors ({}): the report covers what was readable",
                self.errors.len()
            )?;
            for e in &self.errors {
                writeln!(f, "{e}")?;
            }
        }
        Ok(())
    }
}
