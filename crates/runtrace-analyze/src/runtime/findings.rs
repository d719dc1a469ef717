//! The findings of `runtrace analyze`, one function per kind, from the
//! finished engine (docs/analysis.md defines them).

use super::blame;
use super::ctx::{finding, Ctx};
use super::engine::Engine;
use super::report::{fmt_at, times, Finding, FindingKind, Severity, Victim};
use super::state::LocStats;
use super::thresholds::Thresholds;
use runtrace_format::NO_WORKER;
use runtrace_model::fmt_ns;
use serde_json::{json, Value};
use std::fmt::Write as _;

const MAX_PER_KIND: usize = 8;

/// The end of a `long_poll` / `slow_poll` detail without CPU samples
/// ([`super::cpu`] replaces it when the trace has some).
pub(crate) const NO_CPU_TIME: &str =
    "; CPU work or a blocking call: the trace has no per-poll CPU time to tell them apart";

/// Every finding, causes first, symptoms attached to the cause that
/// explains them ([`blame::arrange`], docs/analysis.md has the rules).
pub(crate) fn all(
    c: &Ctx<'_>,
    e: &Engine,
    th: &Thresholds,
    duration_ns: u64,
    lost: Lost,
) -> Vec<Finding> {
    let mut out = Vec::new();
    slow_locations(c, e, th, &mut out);
    wake_delay(c, e, th, &mut out);
    local_queue_buildup(c, e, th, &mut out);
    worker_imbalance(c, e, th, &mut out);
    idle_while_queued(c, e, th, duration_ns, &mut out);
    host_starvation(c, e, th, &mut out);
    super::waiting::findings(c, &e.waiting, th, &mut out);
    caveat_lost(&mut out, lost);
    blame::arrange(out)
}

/// What a read lost: events the recorder reported dropped, and whether a
/// file was damaged or cut short (its unreadable frames' events missing).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Lost {
    pub dropped: u64,
    pub damaged: bool,
}

/// `task_leak` and `stuck_task` say that no wake came: a wake, poll or
/// terminate lost with a dropped event or a damaged frame makes a task
/// look exactly like that (a file with a dozen damaged frames showed a
/// critical leak of thousands of tasks that had completed). When the read
/// lost events, they are kept but capped at warning, say why in their
/// detail and headline, and carry `lost_events` in their evidence.
fn caveat_lost(out: &mut [Finding], lost: Lost) {
    if lost.dropped == 0 && !lost.damaged {
        return;
    }
    let what = match (lost.dropped, lost.damaged) {
        (0, _) => "a file was damaged or cut short (see the errors)".to_string(),
        (n, false) => format!("the recorder dropped {n} events"),
        (n, true) => format!(
            "the recorder dropped {n} events and a file was damaged or cut short (see the errors)"
        ),
    };
    for f in out
        .iter_mut()
        .filter(|f| matches!(f.kind, FindingKind::TaskLeak | FindingKind::StuckTask))
    {
        f.severity = Severity::Warning;
        f.detail.push_str(&format!(
            "; but this read lost events ({what}), and a lost wake or terminate leaves a task looking never woken: confirm it with a recording that lost none"
        ));
        if let Some(o) = f.evidence.as_object_mut() {
            o.insert(
                "lost_events".into(),
                json!({"dropped": lost.dropped, "damaged": lost.damaged}),
            );
        }
    }
}

/// The victims of location `l` as a cause: the locations whose delayed
/// polls had `l` occupying their worker longest in the delayed window.
fn victims_of(c: &Ctx<'_>, l: u32) -> Vec<Victim> {
    let mut v: Vec<Victim> = c
        .locs
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            let &(n, worst) = s.delayed.by_culprit.get(l as usize)?;
            (n > 0).then(|| Victim {
                location: c.loc(i as u32),
                delayed_polls: n,
                worst_delay_ns: worst,
            })
        })
        .collect();
    blame::sort_victims(&mut v);
    v
}

/// "spread over 3 of 40 tasks; the worst: task 7 (5 long polls, 300 ms), ..."
fn spread(loc: &LocStats) -> (String, Value) {
    let mut t: Vec<(u64, (u64, u64))> = loc.bad_tasks.iter().map(|(&k, &v)| (k, v)).collect();
    t.sort_by(|a, b| b.1 .1.cmp(&a.1 .1).then(a.0.cmp(&b.0)));
    let n = t.len() as u64 + (loc.bad_tasks_overflow > 0) as u64;
    let worst: Vec<String> = t
        .iter()
        .take(3)
        .map(|(task, (p, ns))| format!("task {task} ({p} long polls, {})", fmt_ns(*ns)))
        .collect();
    let text = format!(
        "long polls spread over {}{} of {} tasks ({}); the worst: {}",
        if loc.bad_tasks_overflow > 0 {
            "over "
        } else {
            ""
        },
        n,
        loc.tasks.max(n),
        if n <= 1 {
            "one task"
        } else if n * 2 >= loc.tasks.max(n) {
            "most tasks"
        } else {
            "a few tasks"
        },
        worst.join(", ")
    );
    let json = json!({
        "tasks_with_long_polls": n,
        "tasks": loc.tasks.max(n),
        "worst_tasks": t.iter().take(3).map(|(task, (p, ns))| json!({"task": task, "long_polls": p, "long_poll_ns": ns})).collect::<Vec<_>>(),
    });
    (text, json)
}

/// `long_poll` / `slow_poll`: one finding per location whose polls hold
/// their worker: `long_poll` when some polls exceed `long_poll_ns`, else
/// `slow_poll` when the mean poll exceeds `cpu_bound_mean_ns`. The trace
/// has no per-poll CPU time, so neither says CPU-bound or blocked.
fn slow_locations(c: &Ctx<'_>, e: &Engine, th: &Thresholds, out: &mut Vec<Finding>) {
    let slow_mean = |l: &LocStats| {
        l.poll.count() >= th.cpu_bound_min_polls && l.poll.mean() > th.cpu_bound_mean_ns
    };
    let mut ls: Vec<u32> = (0..e.locs.len() as u32)
        .filter(|&l| {
            let s = &e.locs[l as usize];
            s.long_polls > 0 || slow_mean(s)
        })
        .collect();
    ls.sort_by_key(|&l| std::cmp::Reverse(e.locs[l as usize].poll.sum()));
    for &l in ls.iter().take(2 * MAX_PER_KIND) {
        let loc = &e.locs[l as usize];
        let Some(wp) = loc.worst_poll else { continue };
        let h = &loc.poll;
        let long = loc.long_polls > 0;
        let preempted = long && loc.preempted_polls * 2 >= loc.long_polls;
        // Long polls under 1% of a location's polls are outliers, not its
        // behaviour (on a busy host mostly preemption that the sampled
        // scheduler wait cannot prove): a warning.
        let outliers = long && loc.long_polls * 100 < h.count();
        let sev = if preempted || outliers {
            Severity::Warning
        } else if loc.critical_polls > 0
            || (slow_mean(loc) && h.mean() > th.cpu_bound_critical_mean_ns)
        {
            Severity::Critical
        } else {
            Severity::Warning
        };
        let win = c.window(wp.worker, wp.start, wp.start);
        let win = (win.0, win.0 + wp.ns as i64);
        let mut detail = if long {
            format!(
                "{} of {} polls at {} took over {} ({} over {}); the worst took {} at {} on {} (task {}); mean poll {}",
                loc.long_polls,
                h.count(),
                c.loc(l),
                fmt_ns(th.long_poll_ns),
                loc.critical_polls,
                fmt_ns(th.long_poll_critical_ns),
                fmt_ns(wp.ns),
                fmt_at(win.0),
                c.worker_id(wp.worker),
                wp.task,
                fmt_ns(h.mean()),
            )
        } else {
            format!(
                "tasks spawned at {} poll for {} on average (over {}) across {} polls, {} in all ({:.1}% of all poll time); p99 {}",
                c.loc(l),
                fmt_ns(h.mean()),
                fmt_ns(th.cpu_bound_mean_ns),
                h.count(),
                fmt_ns(h.sum()),
                100.0 * h.sum() as f64 / e.poll.sum().max(1) as f64,
                fmt_ns(h.quantile_permille(990))
            )
        };
        let (spread_text, spread_json) = spread(loc);
        if long {
            let _ = write!(detail, "; {spread_text}");
        }
        if preempted {
            let _ = write!(
                detail,
                "; {} of them preempted: the worker mostly waited for a CPU meanwhile (see host_starvation), not the task's fault",
                loc.preempted_polls
            );
        } else {
            detail.push_str(NO_CPU_TIME);
        }
        let mut f = finding(
            if long {
                FindingKind::LongPoll
            } else {
                FindingKind::SlowPoll
            },
            sev,
            c,
            &[l],
            Some(wp.worker),
            Some(win),
            detail,
            json!({
                "long_polls": loc.long_polls,
                "critical_polls": loc.critical_polls,
                "preempted_polls": loc.preempted_polls,
                "polls": h.count(),
                "mean_poll_ns": h.mean(),
                "poll_ns_total": h.sum(),
                "poll_p99_ns": h.quantile_permille(990),
                "worst_poll_ns": wp.ns,
                "worst_poll_at_ns": win.0,
                "task": wp.task,
                "worker": c.worker_json(wp.worker),
                "cpu_evidence": "none",
                "spread": if long { spread_json } else { Value::Null },
            }),
        );
        f.victims = victims_of(c, l);
        out.push(f);
    }
}

/// `wake_delay`: locations whose wake->poll p99 is over the threshold,
/// with what their worker ran meanwhile.
fn wake_delay(c: &Ctx<'_>, e: &Engine, th: &Thresholds, out: &mut Vec<Finding>) {
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
            c.m.locs[l as usize].text,
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
        // Blame: the location that held the worker longest in most of
        // the delayed windows (the victim itself when it delayed itself).
        let culprit = d
            .by_culprit
            .iter()
            .enumerate()
            .max_by(|a, b| a.1 .0.cmp(&b.1 .0).then(b.0.cmp(&a.0)))
            .filter(|x| x.1 .0 > 0)
            .map(|x| x.0 as u32);
        if let Some(cl) = culprit {
            let _ = write!(
                detail,
                "; {} of those delayed polls waited mostly behind {}",
                d.by_culprit[cl as usize].0,
                c.loc(cl)
            );
        }
        if d.unexplained > 0 {
            let _ = write!(
                detail,
                "; {} waited while their worker ran nothing traced (queued elsewhere or parked)",
                d.unexplained
            );
        }
        let mut locs: Vec<u32> = culprit.into_iter().collect();
        if !locs.contains(&l) {
            locs.push(l);
        }
        for &(b, _) in &blockers {
            if !locs.contains(&b) {
                locs.push(b);
            }
        }
        let victim = Victim {
            location: c.loc(l),
            delayed_polls: d.count,
            worst_delay_ns: d.worst.map_or(0, |w| w.delay_ns),
        };
        let mut f = finding(
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
                "unexplained_polls": d.unexplained,
            }),
        );
        f.victims = vec![victim];
        out.push(f);
    }
}

/// `local_queue_buildup`: workers whose local queue was deep while polls
/// waited.
fn local_queue_buildup(c: &Ctx<'_>, e: &Engine, th: &Thresholds, out: &mut Vec<Finding>) {
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
        let mut f = finding(
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
        );
        f.victims = c
            .top(&b.victims, usize::MAX)
            .iter()
            .map(|&(v, n)| Victim {
                location: c.loc(v),
                delayed_polls: n,
                worst_delay_ns: b.victims_worst.get(v as usize).copied().unwrap_or(0),
            })
            .collect();
        out.push(f);
    }
}

/// `worker_imbalance`: per (process, kind) group of workers, poll counts
/// differing by more than the ratio.
fn worker_imbalance(c: &Ctx<'_>, e: &Engine, th: &Thresholds, out: &mut Vec<Finding>) {
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
        let busy = |wi: &u32| e.workers[*wi as usize].busy_ns;
        // Judged on busy time: poll counts differ whenever one worker runs
        // long polls, which is that location's doing, not the short ones'.
        let (Some(&max_w), Some(&min_w)) = (
            ws.iter().max_by_key(|w| (busy(w), polls(w))),
            ws.iter().min_by_key(|w| (busy(w), polls(w))),
        ) else {
            continue;
        };
        let total_polls: u64 = ws.iter().map(polls).sum();
        let (max, min) = (busy(&max_w), busy(&min_w));
        if total_polls < th.imbalance_min_polls || (max as f64) <= min as f64 * th.imbalance_ratio {
            continue;
        }
        // Imbalance among nearly idle workers delays nobody: judged only
        // when the busiest worker was busy at least `imbalance_min_busy`
        // of its time (busy / (busy + parked), or of the recording when
        // it never parked).
        let bw = &e.workers[max_w as usize];
        let p = &c.m.procs[bw.proc as usize];
        let span = if bw.parks > 0 {
            bw.busy_ns + bw.parked_ns
        } else {
            p.scale.ns(p.last_ticks.saturating_sub(p.first_ticks))
        };
        if (max as f64) < th.imbalance_min_busy * span.max(1) as f64 {
            continue;
        }
        let ratio = max as f64 / min.max(1) as f64;
        let sev = if min == 0 || ratio >= th.imbalance_critical_ratio {
            Severity::Critical
        } else {
            Severity::Warning
        };
        let busiest = &e.workers[max_w as usize];
        let by_time: Vec<u64> = busiest.loc_polls.iter().map(|x| x.1).collect();
        let top = c.top(&by_time, 3);
        let counts: Vec<String> = ws
            .iter()
            .map(|&w| {
                let id = c.worker_id(w);
                format!(
                    "{}: {} in {} polls",
                    id.worker.map_or("-".into(), |x| x.to_string()),
                    fmt_ns(busy(&w)),
                    polls(&w)
                )
            })
            .collect();
        let p = &c.m.procs[busiest.proc as usize];
        let win = (p.ns(p.first_ticks), p.ns(p.last_ticks));
        let detail = format!(
            "{kind} workers' busy times differ by {:.1}x: {} was busy {}, {} only {} (busy time per worker: {}); the busiest by time ran mostly {}",
            ratio,
            c.worker_id(max_w),
            fmt_ns(max),
            c.worker_id(min_w),
            fmt_ns(min),
            counts.join(", "),
            top.iter()
                .map(|&(l, ns)| format!("{} ({})", c.loc(l), fmt_ns(ns)))
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
                "max_busy_ns": max,
                "min_busy_ns": min,
                "max_polls": polls(&max_w),
                "min_polls": polls(&min_w),
                "workers": ws.iter().map(|&w| json!({"worker": c.worker_json(w), "polls": polls(&w), "busy_ns": busy(&w)})).collect::<Vec<_>>(),
                "busiest_locations": top.iter().map(|&(l, ns)| json!({"spawn_loc": c.loc(l), "poll_ns": ns, "polls": busiest.loc_polls[l as usize].0})).collect::<Vec<_>>(),
            }),
        ));
    }
}

/// `idle_while_queued`: per process, workers parked while work was queued.
fn idle_while_queued(
    c: &Ctx<'_>,
    e: &Engine,
    th: &Thresholds,
    duration_ns: u64,
    out: &mut Vec<Finding>,
) {
    for (pi, ps) in e.procs.iter().enumerate() {
        let p = &c.m.procs[pi];
        let idle = &ps.idle;
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
                "pid": p.pid,
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
}

/// `host_starvation`: per process, workers that waited for a CPU (the
/// growth of their scheduler wait) for over 100 ms and over 10% of the
/// recording. Judged in proportion to what each worker wanted: its wait
/// against its run time (the CPU time of the same schedstat reads);
/// critical only when some worker got less than a third of the CPU it
/// wanted (waited at least twice as long as it ran). A load generator
/// sharing the host is a benchmark's normal situation: a warning.
fn host_starvation(c: &Ctx<'_>, e: &Engine, th: &Thresholds, out: &mut Vec<Finding>) {
    for (pi, p) in c.m.procs.iter().enumerate() {
        let dur = p.scale.ns(p.last_ticks.saturating_sub(p.first_ticks));
        let mut ws: Vec<u32> = (0..e.workers.len() as u32)
            .filter(|&w| {
                let w = &e.workers[w as usize];
                w.proc as usize == pi
                    && w.sched_wait_ns >= th.host_starvation_ns
                    && w.sched_wait_ns * 10 >= dur
            })
            .collect();
        if ws.is_empty() {
            continue;
        }
        ws.sort_by_key(|&w| std::cmp::Reverse(e.workers[w as usize].sched_wait_ns));
        let worst = &e.workers[ws[0] as usize];
        let run_ns = |w: u32| e.workers[w as usize].run_ms.saturating_mul(1_000_000);
        // The share of the CPU it wanted (run + wait) that it waited for.
        let lost = |w: u32| {
            let x = &e.workers[w as usize];
            x.sched_wait_ns as f64 / (x.sched_wait_ns + run_ns(w)).max(1) as f64
        };
        let sev = if ws
            .iter()
            .any(|&w| e.workers[w as usize].sched_wait_ns >= 2 * run_ns(w))
        {
            Severity::Critical
        } else {
            Severity::Warning
        };
        let list: Vec<String> = ws
            .iter()
            .map(|&w| {
                let x = &e.workers[w as usize];
                format!(
                    "{} waited {} and ran {} ({:.0}% of the CPU time it wanted; polls {})",
                    c.worker_id(w),
                    fmt_ns(x.sched_wait_ns),
                    fmt_ns(run_ns(w)),
                    100.0 * lost(w),
                    fmt_ns(x.busy_ns)
                )
            })
            .collect();
        let detail = format!(
            "workers were runnable but not running for long: {} over a {} recording; the cause is outside the process (other processes on the host, a CPU quota); schedstat is read at most every 10 ms per thread, at worker park and unpark",
            list.join(", "),
            fmt_ns(dur)
        );
        let mut f = finding(
            FindingKind::HostStarvation,
            sev,
            c,
            &[],
            Some(ws[0]),
            Some((p.ns(p.first_ticks), p.ns(p.last_ticks))),
            detail,
            json!({
                "pid": p.pid,
                "duration_ns": dur,
                "workers": ws.iter().map(|&w| {
                    let x = &e.workers[w as usize];
                    json!({"worker": c.worker_json(w), "sched_wait_ns": x.sched_wait_ns, "run_ns": run_ns(w), "wait_share": lost(w), "busy_ns": x.busy_ns})
                }).collect::<Vec<_>>(),
                "worst_sched_wait_ns": worst.sched_wait_ns,
            }),
        );
        // Long polls mostly preempted suffered from it.
        f.victims = e
            .locs
            .iter()
            .enumerate()
            .filter(|(_, l)| l.preempted_polls > 0)
            .map(|(i, l)| Victim {
                location: c.loc(i as u32),
                delayed_polls: l.preempted_polls,
                worst_delay_ns: l.worst_poll.map_or(0, |p| p.ns),
            })
            .collect();
        blame::sort_victims(&mut f.victims);
        out.push(f);
    }
}
