//! The waiting findings (`task_leak`, `stuck_task`, `lock_convoy`,
//! `lock_held_across_await`, `resource_wait`) on small purpose-built
//! traces: each names its cause first, its victims under it, and a
//! healthy trace has none of them.

use runtrace_analyze::{analyze_bytes, Finding, Options, Report, Severity};
use runtrace_format::schema::catalog;
use runtrace_model::synth::{self, TraceBuilder};

const US: u64 = 1_000;
const MS: u64 = 1_000_000;
const NEW: u32 = catalog::resource_new::ID;
const POLL: u32 = catalog::resource_poll::ID;
const RELEASE: u32 = catalog::resource_release::ID;

fn kinds(r: &Report) -> Vec<&'static str> {
    r.findings.iter().map(|f| f.kind.as_str()).collect()
}

fn first(r: &Report) -> &Finding {
    r.findings
        .first()
        .unwrap_or_else(|| panic!("no findings: {r}"))
}

fn waiting_kind(k: &str) -> bool {
    matches!(
        k,
        "task_leak" | "stuck_task" | "lock_convoy" | "lock_held_across_await" | "resource_wait"
    )
}

/// Every finding and effect kind of `r`.
fn all_kinds(r: &Report) -> Vec<&'static str> {
    r.findings
        .iter()
        .flat_map(|f| std::iter::once(f).chain(&f.effects))
        .map(|f| f.kind.as_str())
        .collect()
}

/// A short task that completes: spawn, a poll that waits, a wake, a
/// Ready poll (with its terminate inside it, as tokio's hooks order them),
/// on thread `tid`, worker 0.
fn quick(b: &mut TraceBuilder, tid: u64, task: u64, loc: u64, at: u64) {
    b.spawn(tid, at, task, 0, loc, 0);
    b.poll_start(tid, 0, at + 10 * US, task, 0, 0);
    b.poll_end(tid, 0, at + 20 * US, task, false);
    b.wake(tid, 0, at + 100 * US, task, 0);
    b.poll_start(tid, 0, at + 110 * US, task, 0, 0);
    b.terminate(tid, at + 115 * US, task);
    b.poll_end(tid, 0, at + 120 * US, task, true);
}

#[test]
fn leaked_tasks_are_a_task_leak_at_their_location() {
    let r = analyze_bytes(&leak_trace(0), Options::default());
    let f = first(&r);
    assert_eq!(f.kind.as_str(), "task_leak", "{r}");
    assert_eq!(f.spawn_loc.as_deref(), Some("src/handler.rs:20:9"));
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(f.evidence["stranded_tasks"], 200);
    assert_eq!(f.evidence["cancelled_unwoken"], 200);
    assert_eq!(f.evidence["oldest"][0]["task"], 1001);
    assert!(
        !kinds(&r).contains(&"stuck_task"),
        "a leak is not also stuck tasks: {r}"
    );
}

/// Each request (location 1) completes and leaves a watcher (location 2)
/// pending forever; the runtime's shutdown cancels the watchers. With
/// `dropped`, the recorder reports that many events lost (0: none).
fn leak_trace(dropped: u64) -> Vec<u8> {
    leak_trace_lost_by(dropped, 1)
}

/// The recorder's writer thread, which reports the profiler's lost samples.
const WRITER: u64 = 99;

/// [`leak_trace`], its losses reported by thread `tid` ([`WRITER`]: the
/// profiler's).
fn leak_trace_lost_by(dropped: u64, tid: u64) -> Vec<u8> {
    let mut b = TraceBuilder::new();
    b.thread_name(WRITER, "runtrace-writer");
    b.location(1, "src/handler.rs", 10, 5);
    b.location(2, "src/handler.rs", 20, 9);
    let mut task = 1000;
    for i in 0..200u64 {
        let at = i * 5 * MS;
        quick(&mut b, 1, task, 1, at);
        b.spawn(1, at + 200 * US, task + 1, task, 2, 0);
        b.poll_start(1, 0, at + 300 * US, task + 1, 0, 0);
        b.poll_end(1, 0, at + 310 * US, task + 1, false);
        task += 2;
        if i % 20 == 19 {
            // A chunk per 20 requests: a damaged one loses those only.
            b.flush();
        }
    }
    for t in (1001..task).step_by(2) {
        b.terminate(1, 1_000 * MS + 1, t);
    }
    if dropped > 0 {
        b.dropped(tid, dropped, 400 * MS, 401 * MS);
    }
    b.finish()
}

/// A leak or stuck tasks are judged from wakes that never came: on a read
/// that lost events (dropped by the recorder, or in a damaged frame) the
/// finding stays, capped at warning, saying so in its detail, headline
/// and evidence; on a read that lost nothing it is unchanged.
#[test]
fn a_leak_judged_on_a_read_that_lost_events_says_so() {
    let clean = analyze_bytes(&leak_trace(0), Options::default());
    let f = first(&clean);
    assert_eq!(
        (f.kind.as_str(), f.severity),
        ("task_leak", Severity::Critical),
        "{clean}"
    );
    assert!(f.evidence.get("lost_events").is_none(), "{:#}", f.evidence);
    assert!(!f.headline().contains("unconfirmed"), "{}", f.headline());

    let r = analyze_bytes(&leak_trace(7), Options::default());
    assert_eq!(r.dropped_events, 7);
    let f = first(&r);
    assert_eq!(
        (f.kind.as_str(), f.severity),
        ("task_leak", Severity::Warning),
        "{r}"
    );
    assert_eq!(f.evidence["lost_events"]["dropped"], 7, "{:#}", f.evidence);
    assert_eq!(f.evidence["lost_events"]["damaged"], false);
    assert!(
        f.detail.contains("the recorder dropped 7 events"),
        "{}",
        f.detail
    );
    assert!(
        f.headline()
            .ends_with("; unconfirmed: the read lost events"),
        "{}",
        f.headline()
    );

    // Lost profiler samples (told by the writer thread) hide no wake:
    // the leak stands as on a read that lost nothing.
    let r = analyze_bytes(&leak_trace_lost_by(7, WRITER), Options::default());
    assert_eq!((r.dropped_events, r.dropped_profiler_samples), (7, 7));
    let f = first(&r);
    assert_eq!(
        (f.kind.as_str(), f.severity),
        ("task_leak", Severity::Critical),
        "{r}"
    );
    assert!(f.evidence.get("lost_events").is_none(), "{:#}", f.evidence);
    assert!(
        r.to_string()
            .contains("(7 dropped by the recorder; 7 of them profiler samples, no task's event)"),
        "{r}"
    );
    assert_eq!(r.to_json()["dropped_profiler_samples"], 7);

    // A damaged frame in the middle of the file: the same caveat.
    let mut bytes = leak_trace(0);
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x5a;
    let r = analyze_bytes(&bytes, Options::default());
    assert!(r.damaged, "{r}");
    let leak = r
        .findings
        .iter()
        .find(|f| f.kind.as_str() == "task_leak")
        .unwrap_or_else(|| panic!("no task_leak: {r}"));
    assert_eq!(leak.severity, Severity::Warning, "{r}");
    assert_eq!(leak.evidence["lost_events"]["damaged"], true);
    assert!(
        leak.detail.contains("damaged or cut short"),
        "{}",
        leak.detail
    );
}

/// 60 watchers spawned over 600 ms, each polled once and never woken;
/// with `dump`, a task dump at 650 ms: tokio wakes and re-polls every
/// watcher it traced (Pending again), then the await points follow.
fn watchers(dump: bool) -> Report {
    let mut b = TraceBuilder::new();
    b.location(1, "src/watch.rs", 9, 5);
    for i in 0..60u64 {
        let t = 100 + i;
        b.spawn(1, i * 10 * MS, t, 0, 1, 0);
        b.poll_start(1, 0, i * 10 * MS + US, t, 0, 0);
        b.poll_end(1, 0, i * 10 * MS + 2 * US, t, false);
    }
    if dump {
        let at = 650 * MS;
        b.task_dump_start(2, at, 1, "end");
        for i in 0..60u64 {
            let t = 100 + i;
            b.wake(1, 0, at + (10 + 2 * i) * US, t, 0);
            b.poll_start(1, 0, at + (11 + 2 * i) * US, t, 0, 0);
            b.poll_end(1, 0, at + (12 + 2 * i) * US, t, false);
        }
        for i in 0..60u64 {
            let point = if i < 58 {
                "src/watch.rs:12 watch -> oneshot::Receiver"
            } else {
                ""
            };
            // A task's record may come before tokio's wake of it (seen on
            // real runs: some wakes are delivered after the dump returned)
            // or after its poll.
            let rec = if i % 2 == 0 {
                at + (9 + 2 * i) * US
            } else {
                at + 100 * MS + i
            };
            b.task_dump(2, rec, 100 + i, 1, point);
        }
    }
    b.poll_start(1, 0, 800 * MS, 1, 0, 0);
    b.poll_end(1, 0, 800 * MS + 1_000, 1, true);
    analyze_bytes(&b.finish(), Options::default())
}

#[test]
fn a_task_dump_names_where_leaked_tasks_sit_and_its_wakes_hide_nothing() {
    let r = watchers(true);
    let f = first(&r);
    assert_eq!(f.kind.as_str(), "task_leak", "{r}");
    // tokio's tracing wake and poll are the dump's, not a real wake-up.
    assert_eq!(f.evidence["stranded_tasks"], 60, "{:#}", f.evidence);
    assert!(
        f.detail.contains(
            "task dump: 58 sit at src/watch.rs:12 watch -> oneshot::Receiver, 2 in no tokio future"
        ),
        "{}",
        f.detail
    );
    assert_eq!(
        f.evidence["await_points"][0]["await_point"],
        "src/watch.rs:12 watch -> oneshot::Receiver"
    );
    assert_eq!(f.evidence["await_points"][0]["tasks"], 58);
    assert_eq!(f.evidence["await_points"][1]["tasks"], 2);
}

#[test]
fn without_task_dumps_the_finding_says_how_to_get_them() {
    let r = watchers(false);
    let f = first(&r);
    assert_eq!(f.kind.as_str(), "task_leak", "{r}");
    assert_eq!(f.evidence["stranded_tasks"], 60);
    assert!(f.detail.contains("feature `taskdump`"), "{}", f.detail);
    assert!(f.evidence["await_points"].is_null());
}

#[test]
fn a_few_tasks_never_woken_among_completing_siblings_are_stuck() {
    let mut b = TraceBuilder::new();
    b.location(1, "src/fetch.rs", 3, 1);
    // 300 tasks of the same code complete in ~130 us; 20 of them (one in
    // 15) are never woken after their first poll.
    for i in 0..300u64 {
        let task = i + 1;
        let at = i * 2 * MS;
        if i % 15 == 0 {
            b.spawn(1, at, task, 0, 1, 0);
            b.poll_start(1, 0, at + 10 * US, task, 0, 0);
            b.poll_end(1, 0, at + 20 * US, task, false);
        } else {
            quick(&mut b, 1, task, 1, at);
        }
    }
    b.poll_start(1, 0, 2_000 * MS, 9_999, 0, 0);
    b.poll_end(1, 0, 2_000 * MS + 1, 9_999, true);
    let r = analyze_bytes(&b.finish(), Options::default());
    let f = first(&r);
    assert_eq!(f.kind.as_str(), "stuck_task", "{r}");
    assert_eq!(f.spawn_loc.as_deref(), Some("src/fetch.rs:3:1"));
    // The stuck threshold is 1 s (half of the 2 s recording): every one
    // stranded by 0.6 s.
    assert_eq!(f.evidence["stuck_tasks"], 20, "{:#}", f.evidence);
    assert_eq!(f.severity, Severity::Critical);
}

#[test]
fn long_lived_idle_tasks_are_not_stuck() {
    // An accept loop and a ticker, idle most of the time, alive at the
    // end: their normal life, not a finding.
    let mut b = TraceBuilder::new();
    b.location(1, "src/main.rs", 5, 5);
    b.location(2, "src/main.rs", 9, 5);
    b.spawn(1, 0, 1, 0, 1, 0);
    b.spawn(1, 10, 2, 0, 2, 0);
    for i in 0..3u64 {
        b.poll_start(1, 0, i * 900 * MS + 100, 1, 0, 0);
        b.poll_end(1, 0, i * 900 * MS + 200, 1, false);
        b.poll_start(1, 0, i * 900 * MS + 300, 2, 0, 0);
        b.poll_end(1, 0, i * 900 * MS + 400, 2, false);
    }
    let r = analyze_bytes(&b.finish(), Options::default());
    assert!(
        r.findings.iter().all(|f| !waiting_kind(f.kind.as_str())),
        "{r}"
    );
}

/// A `runtrace::sync` lock "db" held 25 ms by tasks of `src/flush.rs` on
/// worker 0 (a long poll), waited on by tasks of `src/req.rs` on worker 1,
/// whose polls then block their worker (`synth::named_lock_convoy`).
#[test]
fn a_named_lock_convoy_blames_the_holder_and_names_the_lock() {
    let r = analyze_bytes(&synth::named_lock_convoy(), Options::default());
    let f = first(&r);
    assert_eq!(f.kind.as_str(), "lock_convoy", "{r}");
    assert_eq!(f.spawn_loc.as_deref(), Some("src/flush.rs:7:9"));
    assert_eq!(f.evidence["lock"], "db");
    assert_eq!(f.evidence["blocked_worker_waits"], 20);
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(f.victims[0].location, "src/req.rs:30:13");
    assert!(
        f.effects.iter().any(|e| e.kind.as_str() == "long_poll"),
        "the holder's long polls are the convoy's effect: {r}"
    );
    assert!(f.detail.contains("blocked a worker thread"), "{}", f.detail);
}

/// tokio's Mutex (resource 1, created at src/state.rs:4:17) held across a
/// 40 ms await every 50 ms by a task of `src/sync.rs`; eight request
/// tasks of `src/req.rs` need it meanwhile.
fn mutex_trace() -> Vec<u8> {
    let mut b = TraceBuilder::new();
    b.location(1, "src/sync.rs", 12, 5);
    b.location(2, "src/req.rs", 40, 9);
    b.location(3, "src/state.rs", 4, 17);
    b.string(7, "Mutex");
    b.record(1, Some(0), 0, NEW, &[1, 7, 3, 0]);
    let holder = 1;
    b.spawn(1, 10, holder, 0, 1, 0);
    let mut task = 100;
    for i in 0..20u64 {
        let at = i * 50 * MS + MS;
        // The holder locks, then awaits 40 ms holding the guard.
        b.poll_start(1, 0, at, holder, 0, 0);
        b.record(1, Some(0), at + US, POLL, &[holder, 1, 1]);
        b.poll_end(1, 0, at + 2 * US, holder, false);
        // Requests try the lock meanwhile (worker 1).
        let ws: Vec<u64> = (0..8).map(|k| task + k).collect();
        for (k, &w) in ws.iter().enumerate() {
            let t = at + 5 * MS + k as u64 * 100 * US;
            b.spawn(2, t, w, 0, 2, 0);
            b.poll_start(2, 1, t + 10 * US, w, 0, 0);
            b.record(2, Some(1), t + 11 * US, POLL, &[w, 1, 0]);
            b.poll_end(2, 1, t + 12 * US, w, false);
        }
        // 40 ms later the holder wakes, unlocks (waking the first waiter).
        b.wake(1, 0, at + 40 * MS, holder, 0);
        b.poll_start(1, 0, at + 40 * MS + 10 * US, holder, 0, 0);
        b.record(1, Some(0), at + 40 * MS + 20 * US, RELEASE, &[holder, 1]);
        b.wake(1, 0, at + 40 * MS + 21 * US, ws[0], holder);
        b.poll_end(1, 0, at + 40 * MS + 30 * US, holder, false);
        // The waiters get it in turn, each for 50 us.
        let mut t = at + 40 * MS + 100 * US;
        for (k, &w) in ws.iter().enumerate() {
            b.poll_start(2, 1, t, w, 0, 0);
            b.record(2, Some(1), t + US, POLL, &[w, 1, 1]);
            b.record(2, Some(1), t + 50 * US, RELEASE, &[w, 1]);
            if let Some(&next) = ws.get(k + 1) {
                b.wake(2, 1, t + 51 * US, next, w);
            }
            b.poll_end(2, 1, t + 60 * US, w, true);
            b.terminate(2, t + 61 * US, w);
            t += 100 * US;
        }
        task += 8;
    }
    b.finish()
}

#[test]
fn an_async_lock_held_across_an_await_blames_the_holder() {
    let r = analyze_bytes(&mutex_trace(), Options::default());
    let f = first(&r);
    assert_eq!(f.kind.as_str(), "lock_held_across_await", "{r}");
    assert_eq!(f.spawn_loc.as_deref(), Some("src/sync.rs:12:5"));
    assert_eq!(f.evidence["resource"]["type"], "Mutex");
    assert_eq!(f.evidence["resource"]["created_at"], "src/state.rs:4:17");
    assert_eq!(f.evidence["waits"], 160);
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(f.victims[0].location, "src/req.rs:40:9");
    assert!(f.detail.contains("across an await"), "{}", f.detail);
    // The requests' lives went to waiting on the resource.
    let life = r.waiting["task_life"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["spawn_loc"] == "src/req.rs:40:9")
        .unwrap();
    let res = life["resource_ns"].as_u64().unwrap();
    assert!(res * 2 > life["life_ns"].as_u64().unwrap(), "{life:#}");
}

/// A bounded channel (tokio's internal semaphore, no creation site):
/// producers of `src/produce.rs` wait in `send`, the consumer of
/// `src/consume.rs` frees a slot every 20 ms.
#[test]
fn a_slow_consumer_behind_a_bounded_channel_is_blamed() {
    let mut b = TraceBuilder::new();
    b.location(1, "src/consume.rs", 8, 5);
    b.location(2, "src/produce.rs", 15, 9);
    b.string(7, "Semaphore");
    let consumer = 1;
    b.spawn(1, 0, consumer, 0, 1, 0);
    // Created by the consumer's task (its poll open).
    b.poll_start(1, 0, 10, consumer, 0, 0);
    b.record(1, Some(0), 11, NEW, &[3, 7, 0, 1]);
    b.poll_end(1, 0, 12, consumer, false);
    let mut t = MS;
    for i in 0..50u64 {
        let p = 100 + i;
        b.spawn(2, t, p, 0, 2, 0);
        b.poll_start(2, 1, t + 10 * US, p, 0, 0);
        b.record(2, Some(1), t + 11 * US, POLL, &[p, 3, 0]);
        b.poll_end(2, 1, t + 12 * US, p, false);
        // The consumer takes an item 20 ms later, freeing the slot.
        b.wake(1, 0, t + 19 * MS, consumer, 0);
        b.poll_start(1, 0, t + 20 * MS, consumer, 0, 0);
        b.wake(1, 0, t + 20 * MS + US, p, consumer);
        b.poll_end(1, 0, t + 20 * MS + 2 * US, consumer, false);
        b.poll_start(2, 1, t + 20 * MS + 50 * US, p, 0, 0);
        b.record(2, Some(1), t + 20 * MS + 51 * US, POLL, &[p, 3, 1]);
        b.poll_end(2, 1, t + 20 * MS + 52 * US, p, true);
        b.terminate(2, t + 20 * MS + 53 * US, p);
        t += 21 * MS;
    }
    let r = analyze_bytes(&b.finish(), Options::default());
    let f = first(&r);
    assert_eq!(f.kind.as_str(), "resource_wait", "{r}");
    assert_eq!(f.spawn_loc.as_deref(), Some("src/consume.rs:8:5"));
    assert_eq!(f.evidence["resource"]["internal"], true);
    assert_eq!(f.evidence["resource"]["created_by"], "src/consume.rs:8:5");
    assert_eq!(f.evidence["blamed"]["by"], "releasing");
    assert_eq!(f.victims[0].location, "src/produce.rs:15:9");
}

#[test]
fn imbalance_among_idle_workers_is_not_a_finding() {
    // Two workers, each busy under 1% of the time, one twice the other.
    let mut b = TraceBuilder::new();
    b.location(1, "src/req.rs", 1, 1);
    for i in 0..400u64 {
        let at = i * 2 * MS;
        let (tid, w, d) = if i % 3 == 0 {
            (2, 1, 10 * US)
        } else {
            (1, 0, 10 * US)
        };
        b.poll_start(tid, w, at, 10 + i, 0, 0);
        b.poll_end(tid, w, at + d, 10 + i, true);
    }
    let r = analyze_bytes(&b.finish(), Options::default());
    assert!(
        !all_kinds(&r).contains(&"worker_imbalance"),
        "imbalance of idle workers: {r}"
    );
}

/// One task of location `loc` polled `n` times on thread `tid` for 50 us
/// each; between polls it is woken by `wake` (what the thread does).
fn looping(b: &mut TraceBuilder, tid: u64, task: u64, loc: u64, n: u64, wake: &str) {
    b.spawn(tid, 0, task, 0, loc, 0);
    for i in 0..n {
        let at = 10 * US + i * 100 * US;
        b.poll_start(tid, 0, at, task, 0, 0);
        if wake == "inside" {
            b.wake(tid, 0, at + 10 * US, task, task);
        }
        b.poll_end(tid, 0, at + 50 * US, task, i + 1 == n);
        match wake {
            "after" => b.wake(tid, 0, at + 60 * US, task, 0),
            "after park" => {
                b.park(tid, 0, at + 55 * US, 0, 0);
                b.wake(tid, 0, at + 60 * US, task, 0);
                b.unpark(tid, 0, at + 70 * US, 0, 0);
            }
            "other thread" => b.wake(tid + 1, 0, at + 60 * US, task, 0),
            "after, another polled first" => {
                b.wake(tid, 0, at + 60 * US, task, 0);
                b.poll_start(tid, 0, at + 70 * US, task + 1_000_000, 0, 0);
                b.poll_end(tid, 0, at + 80 * US, task + 1_000_000, false);
            }
            _ => {}
        }
    }
    b.terminate(tid, n * 100 * US, task);
}

#[test]
fn tasks_that_wake_themselves_are_self_wakes() {
    for (wake, expect) in [
        ("inside", true),
        ("after", true),
        ("after park", false),
        ("other thread", false),
        ("after, another polled first", false),
    ] {
        let mut b = TraceBuilder::new();
        b.location(1, "src/spin.rs", 7, 5);
        looping(&mut b, 100, 1, 1, 2_000, wake);
        let r = analyze_bytes(&b.finish(), Options::default());
        let got: Vec<&Finding> = r
            .findings
            .iter()
            .flat_map(|f| std::iter::once(f).chain(&f.effects))
            .filter(|f| f.kind.as_str() == "self_wake")
            .collect();
        assert_eq!(!got.is_empty(), expect, "{wake}: {r}");
        if let Some(f) = got.first() {
            assert_eq!(f.spawn_loc.as_deref(), Some("src/spin.rs:7:5"));
            assert!(
                f.evidence["self_wakes"].as_u64().unwrap() >= 1_999,
                "{:#}",
                f.evidence
            );
            assert_eq!(f.evidence["polls"], 2_000);
        }
    }
    // Too few polls to judge.
    let mut b = TraceBuilder::new();
    b.location(1, "src/spin.rs", 7, 5);
    looping(&mut b, 100, 1, 1, 500, "inside");
    let r = analyze_bytes(&b.finish(), Options::default());
    assert!(!all_kinds(&r).contains(&"self_wake"), "{r}");
}
