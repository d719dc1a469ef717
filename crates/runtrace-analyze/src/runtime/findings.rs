//! The six findings of `runtrace analyze`, one function each, from the
//! finished engine (docs/analysis.md defines them).

use super::ctx::{finding, Ctx};
use super::report::{fmt_at, times, Finding, FindingKind, Severity};
use super::thresholds::Thresholds;
use crate::text::fmt_ns;
use runtrace_format::NO_WORKER;
use serde_json::json;
use std::fmt::Write as _;

const MAX_PER_KIND: usize = 8;

/// Every finding, critical first.
pub(crate) fn all(c: &Ctx<'_>, th: &Thresholds, duration_ns: u64) -> Vec<Finding> {
    let mut out = Vec::new();
    long_poll(c, th, &mut out);
    wake_delay(c, th, &mut out);
    local_queue_buildup(c, th, &mut out);
    worker_imbalance(c, th, &mut out);
    idle_while_queued(c, th, duration_ns, &mut out);
    cpu_bound(c, th, &mut out);
    out.sort_by(|a, b| b.severity.cmp(&a.severity).then(a.kind.cmp(&b.kind)));
    out
}

/// `long_poll`: locations with polls over the threshold, by worst poll.
fn long_poll(c: &Ctx<'_>, th: &Thresholds, out: &mut Vec<Finding>) {
    let e = c.e;
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
            c.m.locs[l as usize].text,
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
}

/// `wake_delay`: locations whose wake->poll p99 is over the threshold,
/// with what their worker ran meanwhile.
fn wake_delay(c: &Ctx<'_>, th: &Thresholds, out: &mut Vec<Finding>) {
    let e = c.e;
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
}

/// `local_queue_buildup`: workers whose local queue was deep while polls
/// waited.
fn local_queue_buildup(c: &Ctx<'_>, th: &Thresholds, out: &mut Vec<Finding>) {
    let e = c.e;
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
}

/// `worker_imbalance`: per (process, kind) group of workers, poll counts
/// differing by more than the ratio.
fn worker_imbalance(c: &Ctx<'_>, th: &Thresholds, out: &mut Vec<Finding>) {
    let e = c.e;
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
        let p = &c.m.procs[busiest.proc as usize];
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
}

/// `idle_while_queued`: per process, workers parked while work was queued.
fn idle_while_queued(c: &Ctx<'_>, th: &Thresholds, duration_ns: u64, out: &mut Vec<Finding>) {
    let e = c.e;
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

/// `cpu_bound`: locations whose mean poll is over the threshold.
fn cpu_bound(c: &Ctx<'_>, th: &Thresholds, out: &mut Vec<Finding>) {
    let e = c.e;
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
            c.m.locs[l as usize].text,
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
}
