//! Every finding kind is triggered by a small purpose-built trace, names
//! the spawn locations responsible, and is not triggered by a healthy
//! trace. The traces come from a tiny simulator: each worker runs its jobs
//! in order (a job starts when it has been woken and the worker is free),
//! parks when it has nothing to do, and wakes and spawns come from a
//! non-worker thread.

mod common;

use common::*;
use runtrace_analyze::{analyze_files, Finding, FindingKind, Options, Report, Severity};
use runtrace_format::NO_WORKER;
use runtrace_model::synth::{workload, TraceBuilder, Workload};

const US: u64 = 1_000;
const MS: u64 = 1_000_000;

/// One poll to run.
#[derive(Clone, Copy)]
struct Job {
    task: u64,
    loc: u64,
    /// When the task became runnable (its spawn for the first poll).
    ready: u64,
    dur: u64,
    local_q: u32,
}

struct Sim {
    b: TraceBuilder,
    /// Events of the waker thread (tid 1): (ticks, task, spawn loc or 0).
    wakes: Vec<(u64, u64, u64)>,
    samples: Vec<(u64, u32)>,
    next_task: u64,
    end: u64,
}

impl Sim {
    fn new() -> Sim {
        let mut b = TraceBuilder::new();
        for l in 1..=9 {
            b.location(l, &format!("src/loc{l}.rs"), 10 * l as u32, 5);
        }
        b.thread_name(1, "waker");
        Sim {
            b,
            wakes: Vec::new(),
            samples: Vec::new(),
            next_task: 1,
            end: 0,
        }
    }

    fn task(&mut self) -> u64 {
        self.next_task += 1;
        self.next_task
    }

    /// A job for a new task (spawned at `ready`, one poll, terminated).
    fn job(&mut self, loc: u64, ready: u64, dur: u64, local_q: u32) -> Job {
        Job {
            task: self.task(),
            loc,
            ready,
            dur,
            local_q,
        }
    }

    /// Runs `jobs` in order on worker `w` (tid 100 + w); parks when idle
    /// for more than 50 us. Each job is one task: spawned at its `ready`
    /// time, polled once, terminated.
    fn run(&mut self, w: u32, jobs: &[Job]) {
        let tid = 100 + w as u64;
        let mut now = 0u64;
        for j in jobs {
            self.wakes.push((j.ready, j.task, j.loc));
            if j.ready > now + 50 * US {
                // Idle: park until the job is ready.
                self.b.park(tid, w, now, 0, 0);
                self.b.unpark(tid, w, j.ready, 0, j.ready / 100);
                now = j.ready;
            }
            let start = now.max(j.ready);
            self.b.poll_start(tid, w, start, j.task, 0, j.local_q);
            let end = start + j.dur;
            self.b.poll_end(tid, w, end, j.task, true);
            self.b.terminate(tid, end, j.task);
            now = end + US;
        }
        self.end = self.end.max(now);
    }

    /// Worker `w` parked from `from` to `to` (nothing else).
    fn idle(&mut self, w: u32, from: u64, to: u64) {
        let tid = 100 + w as u64;
        self.b.park(tid, w, from, 0, 0);
        self.b.unpark(tid, w, to, 0, 0);
    }

    fn sample(&mut self, at: u64, global_q: u32) {
        self.samples.push((at, global_q));
    }

    fn finish(mut self) -> Report {
        self.wakes.sort_by_key(|w| w.0);
        for (t, task, loc) in std::mem::take(&mut self.wakes) {
            self.b.spawn(1, t, task, 0, loc, 0);
        }
        self.samples.sort_by_key(|s| s.0);
        for (t, g) in std::mem::take(&mut self.samples) {
            self.b.queue_sample(2, t, g, 0, 0);
        }
        let bytes = self.b.finish();
        // One file per simulation: tests run in parallel and two of them
        // may build the same number of tasks.
        static RUN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let run = RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = write_trace(&format!("findings-{run}"), &bytes);
        let rep = analyze_files(&[&path], Options::default());
        assert!(!rep.damaged, "{:?}", rep.errors);
        rep
    }
}

/// Short jobs arriving every 300 us on both workers: balanced, parked
/// between jobs with empty queues.
fn healthy(sim: &mut Sim, n: u64) -> (Vec<Job>, Vec<Job>) {
    let mut a = Vec::new();
    let mut b = Vec::new();
    for i in 0..n {
        let t = MS + i * 300 * US;
        a.push(sim.job(1 + i % 3, t, 20 * US + (i % 7) * 20 * US, 1));
        b.push(sim.job(1 + (i + 1) % 3, t + 7 * US, 30 * US + (i % 5) * 25 * US, 0));
    }
    (a, b)
}

/// Every finding, the symptoms attached to a cause (`effects`) included.
fn every(r: &Report) -> Vec<&Finding> {
    r.findings
        .iter()
        .flat_map(|f| std::iter::once(f).chain(f.effects.iter()))
        .collect()
}

fn kinds(r: &Report) -> Vec<FindingKind> {
    every(r).iter().map(|f| f.kind).collect()
}

fn only(r: &Report, k: FindingKind) -> Vec<&Finding> {
    every(r).into_iter().filter(|f| f.kind == k).collect()
}

fn loc(l: u64) -> String {
    format!("src/loc{l}.rs:{}:5", 10 * l)
}

#[test]
fn healthy_traces_have_no_findings() {
    let mut sim = Sim::new();
    let (a, b) = healthy(&mut sim, 400);
    sim.run(0, &a);
    sim.run(1, &b);
    for i in 0..100 {
        sim.sample(i * MS, 0);
    }
    let r = sim.finish();
    assert!(r.findings.is_empty(), "{:#?}", r.findings);
    assert_eq!(r.workers.len(), 2);
    assert!(r.workers.iter().all(|w| w.parks > 0 && w.busy_ratio < 0.5));
    // And the generated runtime mix.
    let (bytes, _) = workload(&Workload {
        events: 200_000,
        ..Workload::default()
    });
    let p = write_trace("healthy-workload", &bytes);
    let r = analyze_files(&[&p], Options::default());
    assert!(r.findings.is_empty(), "{:#?}", r.findings);
}

#[test]
fn long_poll_names_the_location_and_the_worst_poll() {
    for (dur, sev) in [(60 * MS, Severity::Critical), (20 * MS, Severity::Warning)] {
        let mut sim = Sim::new();
        let (mut a, b) = healthy(&mut sim, 400);
        let slow = sim.job(9, 50 * MS, dur, 0);
        a.push(slow);
        a.sort_by_key(|j| j.ready);
        sim.run(0, &a);
        sim.run(1, &b);
        let r = sim.finish();
        let f = only(&r, FindingKind::LongPoll);
        assert_eq!(f.len(), 1, "{:#?}", r.findings);
        let f = f[0];
        assert_eq!(f.severity, sev);
        assert_eq!(f.spawn_loc.as_deref(), Some(loc(9).as_str()));
        assert_eq!(f.spawn_loc_id, Some(9));
        let w = f.window_ns.unwrap();
        assert!(w.0 >= 50 * MS as i64 && w.1 - w.0 == dur as i64, "{w:?}");
        assert!(
            f.detail.contains(&runtrace_analyze::fmt_ns(dur)),
            "{}",
            f.detail
        );
        assert_eq!(f.evidence["worst_poll_ns"], dur);
        assert!(
            !kinds(&r).contains(&FindingKind::SlowPoll),
            "one poll is not CPU-bound"
        );
    }
}

/// Worker 0 gets 150 jobs of location 2 (400 us each) and, a moment
/// later, 20 jobs of location 5 that wait behind them for ~60 ms.
fn blocked(local_q: u32) -> Report {
    let mut sim = Sim::new();
    let (_, b) = healthy(&mut sim, 400);
    let t = 10 * MS;
    let mut a: Vec<Job> = (0..150).map(|_| sim.job(2, t, 400 * US, local_q)).collect();
    a.extend((0..20).map(|_| sim.job(5, t + 10 * US, 30 * US, local_q)));
    sim.run(0, &a);
    sim.run(1, &b);
    sim.finish()
}

#[test]
fn wake_delay_names_the_victims_and_what_the_worker_ran() {
    let r = blocked(5);
    let f = only(&r, FindingKind::WakeDelay);
    // The victim is loc5, the cause (spawn_loc) loc2.
    let v = f
        .iter()
        .find(|f| f.victims.iter().any(|v| v.location == loc(5)))
        .unwrap_or_else(|| panic!("no wake_delay for loc5: {:#?}", r.findings));
    assert_eq!(v.spawn_loc.as_deref(), Some(loc(2).as_str()));
    assert!(v.spawn_locs.contains(&loc(5)), "{:?}", v.spawn_locs);
    let v5 = v.victims.iter().find(|v| v.location == loc(5)).unwrap();
    assert_eq!(v5.delayed_polls, 20);
    assert!(v5.worst_delay_ns > 59 * MS, "{v5:?}");
    assert_eq!(v.severity, Severity::Critical, "p99 ~60 ms");
    assert!(v.spawn_locs.contains(&loc(2)), "{:?}", v.spawn_locs);
    assert!(v.detail.contains(&loc(2)), "{}", v.detail);
    assert_eq!(v.evidence["blockers"][0]["spawn_loc"], loc(2));
    let p99 = v.evidence["wake_to_poll_p99_ns"].as_u64().unwrap();
    assert!(p99 > 59 * MS && p99 < 62 * MS, "{p99}");
    let w = v.window_ns.unwrap();
    assert!(w.0 >= 10 * MS as i64 && w.1 > w.0 + 59 * MS as i64, "{w:?}");
    assert_eq!(v.worker.as_ref().and_then(|w| w.worker), Some(0));
    // Local queues stayed short: no buildup.
    assert!(
        only(&r, FindingKind::LocalQueueBuildup).is_empty(),
        "{:#?}",
        r.findings
    );
}

#[test]
fn local_queue_buildup_names_the_worker_window_and_locations() {
    let r = blocked(40);
    let f = only(&r, FindingKind::LocalQueueBuildup);
    assert_eq!(f.len(), 1, "{:#?}", r.findings);
    let f = f[0];
    let w = f.worker.as_ref().unwrap();
    assert_eq!((w.worker, w.tid), (Some(0), 100));
    assert_eq!(f.evidence["max_local_q"], 40);
    assert_eq!(
        f.spawn_loc.as_deref(),
        Some(loc(2).as_str()),
        "the worker ran loc2"
    );
    assert!(
        f.spawn_locs.contains(&loc(5)),
        "victims named: {:?}",
        f.spawn_locs
    );
    let win = f.window_ns.unwrap();
    assert!(
        win.0 >= 10 * MS as i64 && win.1 - win.0 > 30 * MS as i64,
        "{win:?}"
    );
    assert!(f.detail.contains("local queue reached 40"), "{}", f.detail);
}

#[test]
fn worker_imbalance_by_poll_counts() {
    for (n0, n1, sev) in [
        (900, 290, Severity::Critical),
        (900, 780, Severity::Warning),
    ] {
        let mut sim = Sim::new();
        let a: Vec<Job> = (0..n0)
            .map(|i| sim.job(3, MS + i * 100 * US, 10 * US, 0))
            .collect();
        let b: Vec<Job> = (0..n1)
            .map(|i| sim.job(4, MS + i * 100 * US + 3 * US, 10 * US, 0))
            .collect();
        sim.run(0, &a);
        sim.run(1, &b);
        let r = sim.finish();
        let f = only(&r, FindingKind::WorkerImbalance);
        assert_eq!(f.len(), 1, "{n0}/{n1}: {:#?}", r.findings);
        assert_eq!(f[0].severity, sev);
        assert_eq!(f[0].spawn_loc.as_deref(), Some(loc(3).as_str()));
        assert_eq!(f[0].evidence["max_polls"], n0);
        assert_eq!(f[0].evidence["min_polls"], n1);
    }
    // Within 10%: nothing.
    let mut sim = Sim::new();
    let a: Vec<Job> = (0..900)
        .map(|i| sim.job(3, MS + i * 100 * US, 10 * US, 0))
        .collect();
    let b: Vec<Job> = (0..850)
        .map(|i| sim.job(4, MS + i * 100 * US, 10 * US, 0))
        .collect();
    sim.run(0, &a);
    sim.run(1, &b);
    assert!(sim.finish().findings.is_empty());
}

#[test]
fn idle_worker_while_another_has_a_deep_local_queue() {
    let mut sim = Sim::new();
    // Worker 0 runs 100 jobs of loc 6 with 30 tasks queued locally, from
    // 10 ms on; worker 1 is parked from 5 ms to 40 ms meanwhile.
    let a: Vec<Job> = (0..100)
        .map(|_| sim.job(6, 10 * MS, 200 * US, 30))
        .collect();
    sim.run(0, &a);
    sim.idle(1, 5 * MS, 40 * MS);
    let r = sim.finish();
    let f = only(&r, FindingKind::IdleWhileQueued);
    assert_eq!(f.len(), 1, "{:#?}", r.findings);
    let f = f[0];
    assert_eq!(f.worker.as_ref().unwrap().worker, Some(1), "the parked one");
    assert_eq!(f.spawn_loc.as_deref(), Some(loc(6).as_str()));
    assert_eq!(f.evidence["queued_worker"]["worker"], 0);
    assert_eq!(f.evidence["max_local_q"], 30);
    let w = f.window_ns.unwrap();
    // From the first deep-queue poll (10 ms) to the unpark (40 ms).
    assert_eq!(w, (10 * MS as i64, 40 * MS as i64));
    assert_eq!(
        f.severity,
        Severity::Warning,
        "30 ms: under the 50 ms of critical"
    );
}

#[test]
fn idle_worker_while_the_global_queue_is_not_empty() {
    let mut sim = Sim::new();
    let (a, _) = healthy(&mut sim, 100);
    sim.run(0, &a);
    // Worker 1 is parked from 5 ms to 25 ms; the global queue holds 3
    // tasks in the samples from 10 ms to 14 ms (every ms), so from the
    // second of them (11 ms) on it is a backlog, not a task in transit. A
    // lone non-empty sample (at 20 ms) is not.
    sim.idle(1, 5 * MS, 25 * MS);
    for i in 0..40 {
        let q = if (10..15).contains(&i) || i == 20 {
            3
        } else {
            0
        };
        sim.sample(i * MS, q);
    }
    let r = sim.finish();
    let f = only(&r, FindingKind::IdleWhileQueued);
    assert_eq!(f.len(), 1, "{:#?}", r.findings);
    assert_eq!(f[0].evidence["max_global_q"], 3);
    assert!(f[0].evidence["queued_worker"].is_null());
    assert!(
        f[0].detail.contains("global queue held 3"),
        "{}",
        f[0].detail
    );
    assert_eq!(f[0].window_ns, Some((11 * MS as i64, 15 * MS as i64)));
    assert_eq!(f[0].evidence["windows"], 1);
    assert_eq!(f[0].worker.as_ref().unwrap().worker, Some(1));
}

#[test]
fn cpu_bound_location() {
    let mut sim = Sim::new();
    let (mut a, b) = healthy(&mut sim, 200);
    for i in 0..10 {
        a.push(sim.job(7, 70 * MS + i * 3 * MS, 800 * US, 0));
    }
    a.sort_by_key(|j| j.ready);
    sim.run(0, &a);
    sim.run(1, &b);
    let r = sim.finish();
    let f = only(&r, FindingKind::SlowPoll);
    assert_eq!(f.len(), 1, "{:#?}", r.findings);
    assert_eq!(f[0].spawn_loc.as_deref(), Some(loc(7).as_str()));
    assert_eq!(f[0].severity, Severity::Warning);
    assert_eq!(f[0].evidence["mean_poll_ns"], 800 * US);
    assert!(only(&r, FindingKind::LongPoll).is_empty());
}

/// A tokio worker and an executor worker with the same index 0 on other
/// threads are two workers.
#[test]
fn executor_and_tokio_workers_sharing_an_index() {
    let mut b = TraceBuilder::new();
    b.location(1, "src/a.rs", 1, 1);
    b.string(1, "latency");
    b.spawn(100, 1_000, 1, 0, 1, 0);
    b.spawn(200, 1_000, 2, 0, 1, 1);
    b.poll_start(100, 0, 2_000, 1, 0, 0);
    b.poll_start(200, 0, 2_000, 2, 1, 0);
    b.poll_end(100, 0, 3_000, 1, true);
    b.poll_end(200, 0, 5_000, 2, true);
    b.wake(100, 0, 6_000, 2, 1);
    b.poll_start(200, 0, 9_000, 2, 1, 0);
    b.poll_end(200, 0, 9_500, 2, true);
    let p = write_trace("mixed", &b.finish());
    let r = analyze_files(&[&p], Options::default());
    let ws: Vec<(u64, Option<u32>, &str, u64)> = r
        .workers
        .iter()
        .map(|w| (w.id.tid, w.id.worker, w.id.kind, w.polls))
        .collect();
    assert_eq!(
        ws,
        vec![(200, Some(0), "executor", 2), (100, Some(0), "tokio", 1)]
    );
    // The cross-thread wake (tokio worker wakes an executor task).
    assert_eq!(r.wake_to_poll_ns.count, 3);
    assert_eq!(r.wake_to_poll_ns.max, 3_000);
    let _ = NO_WORKER;
}

/// A 20 ms poll during which the worker mostly waited for a CPU is
/// preempted (a warning, blaming the host), a 60 ms poll with no wait is
/// the task's own (critical), and a worker that waited 400 ms for a CPU
/// in a 1 s trace while busy 80 ms is critical host starvation, which
/// blames no location and lists the preempted one as its victim.
#[test]
fn preempted_polls_and_host_starvation() {
    let mut b = TraceBuilder::new();
    b.location(8, "src/loc8.rs", 80, 5);
    b.location(9, "src/loc9.rs", 90, 5);
    b.spawn(1, MS / 2, 10, 0, 8, 0);
    b.spawn(1, MS / 2, 11, 0, 9, 0);
    b.unpark(100, 0, MS, 0, 0);
    b.poll_start(100, 0, 2 * MS, 10, 0, 0);
    b.poll_end(100, 0, 42 * MS, 10, true);
    b.park(100, 0, 42 * MS + MS / 2, 0, 0);
    // 38 ms of the 42 ms since the last unpark were spent waiting: more
    // than the 2 ms outside the poll, the 10 ms a sampled read may be
    // stale and half the 40 ms poll.
    b.unpark(100, 0, 43 * MS, 0, 38 * MS);
    b.poll_start(100, 0, 44 * MS, 11, 0, 0);
    b.poll_end(100, 0, 104 * MS, 11, true);
    b.park(100, 0, 105 * MS, 0, 0);
    b.unpark(100, 0, 300 * MS, 0, 43 * MS);
    b.park(100, 0, 301 * MS, 0, 0);
    b.unpark(100, 0, 1000 * MS, 0, 400 * MS);
    b.terminate(1, 1001 * MS, 10);
    b.terminate(1, 1001 * MS, 11);
    let p = write_trace("preempted", &b.finish());
    let r = analyze_files(&[&p], Options::default());
    let long = only(&r, FindingKind::LongPoll);
    let of = |l: u64| {
        long.iter()
            .find(|f| f.spawn_loc.as_deref() == Some(loc(l).as_str()))
            .unwrap_or_else(|| panic!("no long_poll for loc{l}: {:#?}", r.findings))
    };
    let pre = of(8);
    assert_eq!(pre.severity, Severity::Warning);
    assert_eq!(pre.evidence["preempted_polls"], 1);
    assert!(pre.detail.contains("preempted"), "{}", pre.detail);
    assert_eq!(pre.evidence["spread"]["tasks_with_long_polls"], 1);
    let own = of(9);
    assert_eq!(own.severity, Severity::Critical);
    assert_eq!(own.evidence["preempted_polls"], 0);
    assert_eq!(own.evidence["cpu_evidence"], "none");
    let h = only(&r, FindingKind::HostStarvation);
    assert_eq!(h.len(), 1, "{:#?}", r.findings);
    assert_eq!(h[0].severity, Severity::Critical);
    assert!(h[0].spawn_loc.is_none());
    assert_eq!(h[0].evidence["worst_sched_wait_ns"], 400 * MS);
    assert_eq!(h[0].victims.len(), 1);
    assert_eq!(h[0].victims[0].location, loc(8));
    // The task's own long poll comes first.
    assert_eq!(r.findings[0].spawn_loc.as_deref(), Some(loc(9).as_str()));
}

/// `host_starvation` in proportion: a worker that waited 400 ms for a CPU
/// while it ran 600 ms (40% of the CPU time it wanted) is a warning; the
/// same wait beside 150 ms of running (73%) is critical.
#[test]
fn host_starvation_is_judged_against_the_run_time() {
    let verdict = |run_ms: u64| {
        let mut b = TraceBuilder::new();
        b.unpark(100, 0, MS, 0, 0);
        b.park(100, 0, 2 * MS, 0, 0);
        b.unpark(100, 0, 1000 * MS, run_ms * MS, 400 * MS);
        let p = write_trace(&format!("starved-{run_ms}"), &b.finish());
        let r = analyze_files(&[&p], Options::default());
        let h = only(&r, FindingKind::HostStarvation);
        assert_eq!(h.len(), 1, "{:#?}", r.findings);
        assert_eq!(h[0].evidence["workers"][0]["run_ns"], run_ms * MS);
        assert!(h[0].detail.contains("every 10 ms"), "{}", h[0].detail);
        h[0].severity
    };
    assert_eq!(verdict(600), Severity::Warning);
    assert_eq!(verdict(150), Severity::Critical);
}
