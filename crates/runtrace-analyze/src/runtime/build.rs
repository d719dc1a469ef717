//! The [`Report`] from a finished [`Engine`] and the [`Model`].

use super::engine::Engine;
use super::findings;
use super::report::{LocationReport, ProcessReport, QueueReport, Report, WorkerReport};
use runtrace_format::NO_WORKER;
use runtrace_model::input::ReadStats;
use runtrace_model::model::Model;

/// Builds the report from the finished engine.
pub(crate) fn build(e: &Engine, m: &Model, rs: ReadStats) -> Report {
    let c = e.ctx(m);
    let th = e.th;
    // Duration: wall clock of the first and last event over recordings.
    let mut first = i128::MAX;
    let mut last = i128::MIN;
    let mut processes = Vec::new();
    for (p, ps) in m.procs.iter().zip(&e.procs) {
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
            live_tasks: ps.live_tasks(),
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
    // A bounded report: the busiest workers when a trace holds more than
    // anyone reads (a crafted file of 600k one-poll threads).
    let workers_omitted = order.len().saturating_sub(MAX_REPORTED_WORKERS) as u64;
    if workers_omitted > 0 {
        order.sort_by_key(|&wi| std::cmp::Reverse(e.workers[wi as usize].busy_ns));
        order.truncate(MAX_REPORTED_WORKERS);
    }
    order.sort_by_key(|&wi| {
        let id = c.worker_id(wi);
        (id.pid, id.kind, id.worker.unwrap_or(u32::MAX), id.tid)
    });
    for &wi in &order {
        let w = &e.workers[wi as usize];
        let p = &m.procs[w.proc as usize];
        let pdur = p.scale.ns(p.last_ticks.saturating_sub(p.first_ticks));
        let busy_ratio = if w.parks > 0 {
            w.busy_ns as f64 / (w.busy_ns + w.parked_ns).max(1) as f64
        } else {
            (w.busy_ns as f64 / pdur.max(1) as f64).min(1.0)
        };
        workers.push(WorkerReport {
            id: c.worker_id(wi),
            thread: m.threads[w.thread as usize].name.clone(),
            runtime: w.runtime,
            runtime_name: w
                .runtime
                .and_then(|rt| e.runtime_names.get(&(w.proc, rt)))
                .map(|&n| m.name(n).to_string())
                .filter(|n| !n.is_empty()),
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
                    spawn_loc_id: m.locs[i].trace_id,
                    location: m.locs[i].text.to_string(),
                    tasks: l.tasks,
                    polls: l.poll.count(),
                    poll_ns_total: l.poll.sum(),
                    poll_ns_mean: l.poll.mean(),
                    poll_ns: l.poll.summary(),
                    wake_to_poll_ns: l.wake.summary(),
                    long_polls: l.long_polls,
                    uncovered_polls: l.uncovered_polls,
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
    let lost = findings::Lost {
        // Lost profiler samples cannot hide a wake or a terminate.
        dropped: rs.dropped.saturating_sub(rs.profiler_dropped),
        damaged: rs.damaged,
    };
    let mut findings = findings::all(&c, e, &th, duration_ns, lost);
    let spans = e.spans.report(m);
    name_spans(&mut findings, &spans);
    let mut notes = Vec::new();
    if workers_omitted > 0 {
        notes.push(format!(
            "{workers_omitted} more workers (threads that polled) are not listed: a report lists the {MAX_REPORTED_WORKERS} busiest"
        ));
    }
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
    // Locations mostly without wakes: their delays are not measured.
    let blind: Vec<String> = spawn_locations
        .iter()
        .filter(|(_, l)| l.polls >= 10 && l.uncovered_polls * 2 > l.polls)
        .map(|(_, l)| {
            format!(
                "{} ({} of {} polls)",
                l.location, l.uncovered_polls, l.polls
            )
        })
        .collect();
    let (uncovered, polls) = spawn_locations.iter().fold((0, 0), |(u, p), (_, l)| {
        (u + l.uncovered_polls, p + l.polls)
    });
    if super::report::wakes_missing(uncovered, polls) {
        notes.push(super::report::WAKES_HINT.to_string());
    }
    if !blind.is_empty() {
        notes.push(format!(
            "polls with no wake recorded before them (their wake delay is not measured; spawn with runtrace::tokio::spawn, or add runtrace::tokio::layer() to the tracing subscriber): {}",
            blind.join(", ")
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
        dropped_profiler_samples: rs.profiler_dropped,
        errors: rs.errors,
        damaged: rs.damaged,
        unsealed_files: rs.unsealed,
        processes,
        tasks_spawned: e.spawns,
        tasks_terminated: e.terminated,
        tasks_terminated_unseen: e.terminated_unseen,
        workers,
        workers_omitted,
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
        queues: m
            .queues
            .iter()
            .zip(&e.queues)
            .map(|(n, q)| QueueReport {
                name: n.clone(),
                samples: q.samples,
                max: q.max,
                mean: q.sum as f64 / q.samples.max(1) as f64,
            })
            .collect(),
        findings,
        spans,
        notes,
        thresholds: th,
        waiting: super::waiting::report_json(&c, &e.waiting),
        resource_waits: super::waiting::resource_sites(&c, &e.waiting),
        memory: Vec::new(),
        memory_spans: Vec::new(),
        snapshots: snapshots(m),
    }
}

/// The snapshot triggers and requests read, by recording and time.
fn snapshots(m: &Model) -> Vec<crate::runtime::SnapshotTrigger> {
    let mut marks: Vec<_> = m.snapshots.iter().collect();
    marks.sort_by_key(|s| (s.proc, s.ticks, s.request));
    marks
        .iter()
        .map(|s| {
            let p = &m.procs[s.proc as usize];
            // A request is answered by a trigger of its reason at or
            // after it (the writer acts on it a round later).
            let answered = s.request
                && marks.iter().any(|t| {
                    !t.request && t.proc == s.proc && t.ticks >= s.ticks && t.reason == s.reason
                });
            crate::runtime::SnapshotTrigger {
                pid: p.pid,
                at_ns: p.ns(s.ticks),
                wall_ns: p.wall_ns(s.ticks),
                reason: s.reason.to_string(),
                request: s.request,
                answered,
            }
        })
        .collect()
}

/// Names in each finding (and its effects) the spans its blamed
/// location's polls were serving.
fn name_spans(findings: &mut [crate::runtime::Finding], spans: &crate::spans::SpanReport) {
    if spans.served.is_empty() {
        return;
    }
    for f in findings {
        if let Some(loc) = &f.spawn_loc {
            f.spans = spans.serving(loc);
        }
        name_spans(&mut f.effects, spans);
    }
}

/// Workers listed in a report at most (the busiest; the report says how
/// many more there were).
pub const MAX_REPORTED_WORKERS: usize = 10_000;
