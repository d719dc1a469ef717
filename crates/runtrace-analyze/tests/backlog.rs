//! `runtrace backlog` on purpose-built synthetic traces: one scenario per
//! root cause (each must be the top verdict, and the others must not
//! appear), a steady queue (no verdict), exact counts, and bad input.
//!
//! Every scenario is the same pipeline: a producer (tid 1) enqueues one
//! item per millisecond into "jobs" from 1 ms to 6 s; one consumer (tid 2)
//! takes each item as soon as it is free and processes it in 0.5 ms. From
//! 3.0 s to 3.6 s something goes wrong (the scenario), the queue grows,
//! and a `backlog_trigger` fires at 3.5 s, while the problem is still on:
//! the events that explain it (a lock wait, the holder's hold and I/O) are
//! recorded when they end, after the trigger.

use runtrace_analyze::backlog::{
    analyze_bytes, analyze_files, BacklogOptions, BacklogReport, Cause,
};
use runtrace_model::synth::TraceBuilder;

const MS: u64 = 1_000_000;
const US: u64 = 1_000;
const PRODUCER: u64 = 1;
const CONSUMER: u64 = 2;
const LOGGER: u64 = 3;
const STATS: u64 = 4;
// String ids.
const JOBS: u64 = 1;
const SIZE_THRESHOLD: u64 = 2;
const LOG_LOCK: u64 = 3;
const FILE_WRITE: u64 = 4;
const STATS_LOCK: u64 = 5;
const FULL: u64 = 6;
const ROTATE: u64 = 7;
const MANUAL: u64 = 8;
const ROLE: u64 = 9;
const CONSUMER_ROLE: u64 = 10;

const PROBLEM_START: u64 = 3_000 * MS;
const PROBLEM_END: u64 = 3_600 * MS;
const TRIGGER: u64 = 3_500 * MS;
const END: u64 = 6_000 * MS;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Scenario {
    Steady,
    ConsumerStall,
    LockContention,
    /// LockContention, with the holder preempted for 40 ms between
    /// releasing the lock and stamping its hold (runtrace-sync releases
    /// first): the hold ends after the consumer's wait.
    LateHold,
    IoUnderLock,
    ProcessingSlowdown,
    OwnIo,
}

#[derive(Debug, Clone, Copy)]
enum E {
    Enq(u64, u32),
    Deq(u64, u64, u32),
    Proc(u64, u64),
    Wait(u64, u64),
    Hold(u64, u64),
    Io(u64, u64, u64),
    Trigger(u32, u64),
    Drop(u64, u32),
    Beat(u64),
    ConsumerBeat(u64),
    Snapshot(u32, u64),
}

/// Counts of what a scenario generated, for exact assertions.
#[derive(Debug, Default)]
struct Counts {
    enq: u64,
    deq: u64,
    drops: u64,
    waits: Vec<(u64, u64)>,
    holds: u64,
    ios: u64,
    max_size: u32,
}

fn build(s: Scenario) -> (Vec<u8>, Counts) {
    let mut evs: Vec<(u64, u64, E)> = Vec::new(); // (tid, ticks, event)
    let mut c = Counts::default();
    // Producer arrivals, one per ms; in the stall scenario, items beyond a
    // queue of 400 are dropped (try_send on a full queue).
    let arrivals: Vec<u64> = (1..END / MS).map(|i| i * MS).collect();
    // Consumer timeline.
    let mut deq_times: Vec<u64> = Vec::new();
    let mut free = 0u64;
    let mut last_beat = 0u64;
    let mut consumer: Vec<(u64, E)> = Vec::new();
    let capacity = if s == Scenario::ConsumerStall {
        400
    } else {
        u32::MAX
    };
    let mut accepted: Vec<(u64, u64)> = Vec::new(); // (seqno, t)
    let mut seq = 0u64;
    let mut producer: Vec<(u64, E)> = Vec::new();
    // First pass: which arrivals are accepted needs queue sizes, which
    // need the consumer; the consumer never takes an item before it
    // arrives, so simulate both in one sweep.
    let mut qi = 0usize; // next accepted item the consumer takes
    let mut ai = 0usize;
    let mut done = false;
    while !done {
        // Next consumer start, if an item is available.
        let next_start = if qi < accepted.len() {
            let mut st = free.max(accepted[qi].1) + 10 * US;
            if s == Scenario::ConsumerStall && (PROBLEM_START..PROBLEM_END).contains(&st) {
                st = PROBLEM_END;
            }
            Some(st)
        } else {
            None
        };
        let next_arrival = arrivals.get(ai).copied();
        match (next_arrival, next_start) {
            (Some(a), ns) if ns.is_none_or(|st| a <= st) => {
                ai += 1;
                seq += 1;
                let size = (accepted.len() - qi) as u32;
                if size >= capacity {
                    producer.push((a, E::Drop(seq, size)));
                    c.drops += 1;
                } else {
                    accepted.push((seq, a));
                    producer.push((a, E::Enq(seq, size + 1)));
                    c.enq += 1;
                    c.max_size = c.max_size.max(size + 1);
                }
            }
            (_, Some(st)) => {
                let (sq, at) = accepted[qi];
                qi += 1;
                let size = (accepted.len() - qi) as u32;
                deq_times.push(st);
                consumer.push((st, E::Deq(sq, st - at, size)));
                c.deq += 1;
                let in_problem = (PROBLEM_START..PROBLEM_END).contains(&st);
                let mut t = st;
                let first_in_problem = in_problem
                    && !consumer
                        .iter()
                        .any(|(x, e)| matches!(e, E::Wait(..) | E::Io(..)) && *x >= PROBLEM_START);
                match s {
                    Scenario::LockContention | Scenario::LateHold | Scenario::IoUnderLock
                        if first_in_problem =>
                    {
                        // Blocked on the lock until its holder lets go.
                        let lock = if s != Scenario::IoUnderLock {
                            STATS_LOCK
                        } else {
                            LOG_LOCK
                        };
                        let got = PROBLEM_END + 5 * US;
                        consumer.push((got, E::Wait(lock, got - t)));
                        c.waits.push((lock, got - t));
                        t = got + 10 * US;
                        consumer.push((t, E::Hold(lock, 10 * US)));
                        c.holds += 1;
                    }
                    Scenario::OwnIo if first_in_problem => {
                        let end = PROBLEM_END;
                        consumer.push((end, E::Io(FILE_WRITE, 4096, end - t)));
                        c.ios += 1;
                        t = end;
                    }
                    _ => {}
                }
                let work = if s == Scenario::ProcessingSlowdown && in_problem {
                    2 * MS
                } else {
                    500 * US
                };
                t += work;
                consumer.push((t, E::Proc(sq, t - st)));
                if s == Scenario::ConsumerStall {
                    // The consumer beats after each item.
                    consumer.push((t + 1, E::ConsumerBeat(t + 1 - last_beat)));
                    last_beat = t + 1;
                }
                free = t;
            }
            (None, None) => done = true,
            _ => unreachable!(),
        }
    }
    let _ = deq_times;
    // The holders.
    match s {
        Scenario::LockContention | Scenario::LateHold => {
            // A stats thread holds the lock for 600 ms computing (no I/O);
            // it also takes it briefly every 100 ms before.
            for k in 1..30u64 {
                evs.push((STATS, k * 100 * MS, E::Hold(STATS_LOCK, 50 * US)));
                c.holds += 1;
            }
            let late = if s == Scenario::LateHold { 40 * MS } else { 0 };
            evs.push((
                STATS,
                PROBLEM_END + late,
                E::Hold(STATS_LOCK, PROBLEM_END + late - PROBLEM_START + MS),
            ));
            c.holds += 1;
        }
        Scenario::IoUnderLock => {
            // A logger writes under the log lock every 10 ms (40 us of
            // I/O), and at 3.0 s rotates the file for 598 ms under it.
            let mut t = 5 * MS;
            while t < END {
                if t + MS >= PROBLEM_START - MS && t < PROBLEM_END + MS {
                    t += 10 * MS;
                    continue;
                }
                evs.push((LOGGER, t - 5 * US, E::Io(FILE_WRITE, 128, 40 * US)));
                evs.push((LOGGER, t, E::Hold(LOG_LOCK, 50 * US)));
                c.ios += 1;
                c.holds += 1;
                t += 10 * MS;
            }
            evs.push((LOGGER, PROBLEM_END - MS, E::Io(ROTATE, 1 << 20, 598 * MS)));
            evs.push((
                LOGGER,
                PROBLEM_END,
                E::Hold(LOG_LOCK, PROBLEM_END - PROBLEM_START + MS),
            ));
            c.ios += 1;
            c.holds += 1;
        }
        _ => {}
    }
    for (t, e) in producer {
        evs.push((PRODUCER, t, e));
    }
    for (t, e) in consumer {
        evs.push((CONSUMER, t, e));
    }
    // The trigger, from the producer's detector, and heartbeats.
    let size_at = |t: u64| {
        let enq = evs
            .iter()
            .filter(|(tid, x, e)| *tid == PRODUCER && *x <= t && matches!(e, E::Enq(..)))
            .count();
        let deq = evs
            .iter()
            .filter(|(tid, x, e)| *tid == CONSUMER && *x <= t && matches!(e, E::Deq(..)))
            .count();
        (enq - deq) as u32
    };
    let reason = if s == Scenario::Steady {
        MANUAL
    } else {
        SIZE_THRESHOLD
    };
    let mut extra = vec![(PRODUCER, TRIGGER + 1, E::Trigger(size_at(TRIGGER), reason))];
    for k in 1..6u64 {
        extra.push((
            PRODUCER,
            k * 1_000 * MS + 2,
            E::Beat(if k == 1 { 0 } else { 1_000 * MS }),
        ));
        extra.push((
            PRODUCER,
            k * 1_000 * MS + 3,
            E::Snapshot(size_at(k * 1_000 * MS), k),
        ));
    }
    evs.extend(extra);
    (write(evs), c)
}

/// The trace of `evs` ((tid, ticks, event), any order; each thread's
/// events are written in time order, as a recorder would).
fn write(mut evs: Vec<(u64, u64, E)>) -> Vec<u8> {
    evs.sort_by_key(|&(tid, t, _)| (tid, t));
    let mut b = TraceBuilder::new();
    for (id, s) in [
        (JOBS, "jobs"),
        (SIZE_THRESHOLD, "size_threshold"),
        (LOG_LOCK, "log"),
        (FILE_WRITE, "file_write"),
        (STATS_LOCK, "stats"),
        (FULL, "full"),
        (ROTATE, "rotate"),
        (MANUAL, "manual"),
        (ROLE, "producer"),
        (CONSUMER_ROLE, "consumer"),
    ] {
        b.string(id, s);
    }
    b.thread_name(PRODUCER, "producer");
    b.thread_name(CONSUMER, "consumer");
    b.thread_name(LOGGER, "logger");
    b.thread_name(STATS, "stats");
    for (tid, t, e) in evs {
        match e {
            E::Enq(seq, size) => b.enqueue(tid, t, JOBS, seq, size),
            E::Deq(seq, delay, size) => b.dequeue(tid, t, JOBS, seq, delay, size),
            E::Proc(seq, ns) => b.processing_end(tid, t, JOBS, seq, ns, true),
            E::Wait(lock, ns) => b.lock_wait(tid, t, lock, ns, true),
            E::Hold(lock, ns) => b.lock_hold(tid, t, lock, ns, true),
            E::Io(op, bytes, ns) => b.io(tid, t, op, bytes, ns),
            E::Trigger(size, reason) => b.backlog_trigger(tid, t, JOBS, size, 500, reason),
            E::Drop(seq, size) => b.item_dropped(tid, t, JOBS, seq, size, FULL),
            E::Beat(gap) => b.heartbeat(tid, t, ROLE, gap),
            E::ConsumerBeat(gap) => b.heartbeat(tid, t, CONSUMER_ROLE, gap),
            E::Snapshot(size, k) => b.queue_snapshot(tid, t, JOBS, size, k, k, 0),
        }
    }
    b.finish()
}

fn run(s: Scenario) -> (BacklogReport, Counts) {
    let (bytes, c) = build(s);
    let r = analyze_bytes(&bytes, &BacklogOptions::default());
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    (r, c)
}

fn causes(r: &BacklogReport) -> Vec<Cause> {
    r.triggers[0].verdicts.iter().map(|v| v.cause).collect()
}

#[test]
fn consumer_stall() {
    let (r, c) = run(Scenario::ConsumerStall);
    println!("{r}");
    assert_eq!(r.triggers.len(), 1);
    let t = &r.triggers[0];
    assert_eq!(causes(&r), vec![Cause::ConsumerStall], "{t:#?}");
    let v = &t.verdicts[0];
    assert_eq!(v.thread.as_deref(), Some("consumer (tid 2)"));
    assert_eq!(v.lock, None);
    assert!(v.score > 0.9, "{v:?}");
    assert!(v.evidence.contains("idle for"), "{}", v.evidence);
    assert!(t.dequeue_rate_during < t.dequeue_rate_before.unwrap());
    // Exact counts, drops included.
    let q = &r.queues[0];
    assert_eq!((q.enqueued, q.dequeued, q.dropped), (c.enq, c.deq, c.drops));
    assert!(c.drops > 0);
    assert_eq!(q.dropped_by_cause, vec![("full".to_string(), c.drops)]);
    assert_eq!(q.max_size, c.max_size);
    assert_eq!(q.processed_ok, c.deq);
    assert_eq!(q.snapshots, 5);
    assert_eq!(t.reason, "size_threshold");
    assert_eq!(t.timestamp_ns, TRIGGER + 1);
    assert_eq!(t.growth_rate_per_sec, 500);
    assert!(r.locks.is_empty() && r.io.is_empty());
    // Heartbeats: 5 beats, gap 1 s.
    assert_eq!(r.heartbeats.len(), 2);
    assert_eq!(r.heartbeats[0].beats, 5);
    assert_eq!(r.heartbeats[0].max_gap_ns, 1_000 * MS);
    assert_eq!(r.heartbeats[0].role, "producer");
    // The consumer's: one per item, silent through the stall.
    let hb = &r.heartbeats[1];
    assert_eq!((hb.role.as_str(), hb.beats), ("consumer", c.deq));
    assert!(hb.max_gap_ns > 590 * MS, "{hb:?}");
    assert!(
        v.evidence.contains("\"consumer\" heartbeat was silent for"),
        "{}",
        v.evidence
    );
}

#[test]
fn lock_contention_with_cpu_busy_holder() {
    let (r, c) = run(Scenario::LockContention);
    println!("{r}");
    let t = &r.triggers[0];
    assert_eq!(causes(&r), vec![Cause::LockContention], "{t:#?}");
    let v = &t.verdicts[0];
    assert_eq!(v.lock.as_deref(), Some("stats"));
    assert_eq!(v.thread.as_deref(), Some("stats (tid 4)"));
    assert!(
        v.evidence.contains("without recorded I/O"),
        "{}",
        v.evidence
    );
    let l = &r.locks[0];
    assert_eq!(l.name, "stats");
    assert_eq!(l.waits, c.waits.len() as u64);
    assert_eq!(l.wait_ns_total, c.waits.iter().map(|w| w.1).sum::<u64>());
    assert_eq!(l.holds, c.holds);
    assert_eq!(l.hold_ns_max, PROBLEM_END - PROBLEM_START + MS);
    assert_eq!(l.longest_holds[0].thread, "stats (tid 4)");
}

#[test]
fn a_hold_stamped_after_the_wait_still_names_the_holder() {
    let (r, _) = run(Scenario::LateHold);
    let t = &r.triggers[0];
    assert_eq!(causes(&r), vec![Cause::LockContention], "{t:#?}");
    assert_eq!(t.verdicts[0].thread.as_deref(), Some("stats (tid 4)"));
    assert!(t.verdicts[0].score > 0.9, "{t:#?}");
}

#[test]
fn io_under_a_lock_the_consumer_needs() {
    let (r, c) = run(Scenario::IoUnderLock);
    println!("{r}");
    let t = &r.triggers[0];
    assert_eq!(causes(&r), vec![Cause::IoBlocking], "{t:#?}");
    let v = &t.verdicts[0];
    assert_eq!(v.lock.as_deref(), Some("log"));
    assert_eq!(v.thread.as_deref(), Some("logger (tid 3)"));
    assert!(v.score > 0.9, "{v:?}");
    assert!(v.evidence.contains("rotate"), "{}", v.evidence);
    // I/O section: exact counts, the rotate is the slowest.
    let io_count: u64 = r.io.iter().map(|x| x.count).sum();
    assert_eq!(io_count, c.ios);
    let rot = r.io.iter().find(|x| x.op == "rotate").unwrap();
    assert_eq!(
        (rot.count, rot.io_ns.max, rot.bytes),
        (1, 598 * MS, 1 << 20)
    );
    assert_eq!(rot.slowest[0].thread, "logger (tid 3)");
    let fw = r.io.iter().find(|x| x.op == "file_write").unwrap();
    assert_eq!(fw.io_ns.p50, 40 * US);
    let l = r.locks.iter().find(|l| l.name == "log").unwrap();
    assert_eq!((l.waits, l.holds), (1, c.holds));
}

#[test]
fn processing_slowdown() {
    let (r, _) = run(Scenario::ProcessingSlowdown);
    println!("{r}");
    let t = &r.triggers[0];
    assert_eq!(causes(&r), vec![Cause::ProcessingSlowdown], "{t:#?}");
    let v = &t.verdicts[0];
    assert_eq!(v.thread.as_deref(), Some("consumer (tid 2)"));
    assert!(v.evidence.contains("on average"), "{}", v.evidence);
}

#[test]
fn consumers_own_slow_io() {
    let (r, _) = run(Scenario::OwnIo);
    println!("{r}");
    let t = &r.triggers[0];
    assert_eq!(causes(&r), vec![Cause::IoBlocking], "{t:#?}");
    let v = &t.verdicts[0];
    assert_eq!(v.thread.as_deref(), Some("consumer (tid 2)"));
    assert_eq!(v.lock, None);
    assert!(v.evidence.contains("own I/O"), "{}", v.evidence);
}

#[test]
fn steady_queue_has_no_verdict() {
    let (r, c) = run(Scenario::Steady);
    println!("{r}");
    let t = &r.triggers[0];
    assert!(t.verdicts.is_empty(), "{t:#?}");
    assert_eq!(t.reason, "manual");
    let q = &r.queues[0];
    assert_eq!((q.enqueued, q.dequeued, q.dropped), (c.enq, c.deq, 0));
    assert_eq!(q.max_size, 1);
    // 1000 items per second in and out.
    let w = &q.windows[2];
    assert_eq!((w.enqueued, w.dequeued), (1_000, 1_000));
    assert_eq!(w.growth_per_sec, 0.0);
    assert_eq!(q.processing_ns.max, 500 * US);
}

#[test]
fn no_application_events_is_an_empty_report_with_a_note() {
    let mut b = TraceBuilder::new();
    b.location(1, "src/main.rs", 1, 1);
    b.spawn(7, 1_000, 1, 0, 1, 0);
    let r = analyze_bytes(&b.finish(), &BacklogOptions::default());
    assert!(r.errors.is_empty() && !r.damaged);
    assert!(r.queues.is_empty() && r.triggers.is_empty());
    assert_eq!(r.events, 1);
    assert!(
        r.notes.iter().any(|n| n.contains("no application")),
        "{:?}",
        r.notes
    );
    assert!(r.to_string().contains("no application"));
}

#[test]
fn cut_and_corrupt_files_are_errors_not_panics() {
    let (bytes, _) = build(Scenario::IoUnderLock);
    // Cut at many places: never a panic; damage reported with the file and
    // a byte offset.
    for cut in (0..bytes.len()).step_by(bytes.len() / 97 + 1) {
        let r = analyze_bytes(&bytes[..cut], &BacklogOptions::default());
        if cut < bytes.len() {
            assert!(
                r.damaged || !r.unsealed_files.is_empty(),
                "cut at {cut}: {:?}",
                r.errors
            );
        }
        for e in &r.errors {
            assert!(e.contains(".bin"), "{e}");
        }
    }
    // Flipped bytes.
    for k in 0..200usize {
        let mut b = bytes.clone();
        let i = 40 + (k * 7919) % (b.len() - 40);
        b[i] ^= 0x5a;
        let _ = analyze_bytes(&b, &BacklogOptions::default());
    }
    // A missing file.
    let r = analyze_files(&["/nonexistent/trace.0.bin"], &BacklogOptions::default());
    assert!(r.damaged);
    assert!(
        r.errors[0].contains("/nonexistent/trace.0.bin"),
        "{:?}",
        r.errors
    );
    // A cut in the middle of a chunk says where.
    let r = analyze_bytes(&bytes[..bytes.len() / 2], &BacklogOptions::default());
    assert!(r.damaged);
    assert!(
        r.errors.iter().any(|e| e.contains("byte")),
        "{:?}",
        r.errors
    );
}

#[test]
fn json_has_the_required_keys() {
    let (r, _) = run(Scenario::IoUnderLock);
    let j = r.to_json();
    for k in ["name", "enqueued", "dequeued", "dropped", "max_size"] {
        assert!(j["queues"][0].get(k).is_some(), "queues.{k}");
    }
    for k in [
        "name",
        "waits",
        "wait_ns_total",
        "wait_ns_p99",
        "hold_ns_max",
    ] {
        assert!(j["locks"][0].get(k).is_some(), "locks.{k}");
    }
    for k in ["op", "count", "io_ns_p50", "io_ns_p99", "io_ns_max"] {
        assert!(j["io"][0].get(k).is_some(), "io.{k}");
    }
    for k in ["timestamp_ns", "queue", "queue_size", "reason", "verdicts"] {
        assert!(j["triggers"][0].get(k).is_some(), "triggers.{k}");
    }
    let v = &j["triggers"][0]["verdicts"][0];
    assert_eq!(v["cause"], "io_blocking");
    assert_eq!(v["lock"], "log");
    assert_eq!(v["thread"], "logger (tid 3)");
    assert!(v["score"].as_f64().unwrap() > 0.9);
    assert!(v["evidence"].is_string());
}

/// A producer alone (nobody dequeues), or a consumer that stops for good
/// before the trigger (the trace ends without it resuming): both are
/// consumer stalls, judged at the end of the trace.
#[test]
fn no_consumer_and_a_consumer_gone_for_good() {
    for with_consumer in [false, true] {
        let mut b = TraceBuilder::new();
        b.string(JOBS, "jobs");
        b.string(SIZE_THRESHOLD, "size_threshold");
        b.thread_name(CONSUMER, "consumer");
        let mut size = 0u32;
        for i in 1..=3_000u64 {
            let t = i * MS;
            size += 1;
            b.enqueue(PRODUCER, t, JOBS, i, size);
            if with_consumer && i <= 1_000 {
                b.dequeue(CONSUMER, t + 10 * US, JOBS, i, 10 * US, 0);
                b.processing_end(CONSUMER, t + 500 * US, JOBS, i, 490 * US, true);
                size -= 1;
            }
        }
        b.backlog_trigger(PRODUCER, 3_000 * MS + 1, JOBS, size, 1_000, SIZE_THRESHOLD);
        let r = analyze_bytes(&b.finish(), &BacklogOptions::default());
        let t = &r.triggers[0];
        assert_eq!(causes(&r), vec![Cause::ConsumerStall], "{t:#?}");
        let v = &t.verdicts[0];
        if with_consumer {
            assert_eq!(v.thread.as_deref(), Some("consumer (tid 2)"));
            // Idle from 1.0005 s to the trigger; the window is [1 s, 3 s].
            assert!(v.lost_ns > 1_990 * MS, "{v:?}");
        } else {
            assert_eq!(v.thread, None);
            assert!(v.evidence.contains("no thread dequeued"), "{}", v.evidence);
            assert!(t.consumers.is_empty());
        }
    }
}

/// Only the triggering queue's consumers are judged: a stall on another
/// queue's consumer is not a cause.
#[test]
fn other_queues_consumers_are_not_blamed() {
    // A steady queue "jobs", and a second queue "other" whose consumer
    // (tid 5, unnamed) stops at 2 s.
    let mut b = TraceBuilder::new();
    b.string(1, "jobs");
    b.string(2, "other");
    b.string(3, "size_threshold");
    for i in 1..=3_000u64 {
        let t = i * MS;
        b.enqueue(PRODUCER, t, 1, i, 1);
        b.dequeue(CONSUMER, t + 10 * US, 1, i, 10 * US, 0);
        b.processing_end(CONSUMER, t + 500 * US, 1, i, 490 * US, true);
        b.enqueue(PRODUCER, t + 1, 2, i, 1);
        if i < 2_000 {
            b.dequeue(5, t + 20 * US, 2, i, 20 * US, 0);
            b.processing_end(5, t + 300 * US, 2, i, 280 * US, true);
        }
    }
    b.backlog_trigger(PRODUCER, 3_000 * MS + 2, 1, 1, 0, 3);
    b.backlog_trigger(PRODUCER, 3_000 * MS + 3, 2, 1_000, 1_000, 3);
    let r = analyze_bytes(&b.finish(), &BacklogOptions::default());
    assert_eq!(r.triggers.len(), 2);
    assert_eq!(&*r.triggers[0].queue, "jobs");
    assert!(r.triggers[0].verdicts.is_empty(), "{:#?}", r.triggers[0]);
    assert_eq!(&*r.triggers[1].queue, "other");
    assert_eq!(r.triggers[1].verdicts[0].cause, Cause::ConsumerStall);
    assert_eq!(r.triggers[1].verdicts[0].thread.as_deref(), Some("tid 5"));
}

/// Random application events with extreme values (durations up to
/// `u64::MAX`, timestamps jumping by up to 2^62 ticks, sizes up to
/// `u32::MAX`, bytes over 4 GiB, triggers anywhere): the analysis never
/// panics (overflow checks are on in tests) and counts every event.
#[test]
fn random_extreme_events_never_panic() {
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut rand = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for round in 0..25 {
        let mut b = TraceBuilder::new();
        for id in 1..=4u64 {
            b.string(id, ["q", "l", "op", "r"][id as usize - 1]);
        }
        let mut clock = [0u64; 4];
        let n = 2_000;
        let mut enq = 0u64;
        for _ in 0..n {
            let tid = rand() % 4;
            let c = &mut clock[tid as usize];
            let step = match rand() % 8 {
                0 => rand() >> 2,
                1 | 2 => rand() % 10_000_000_000,
                _ => rand() % 100_000,
            };
            *c = c.saturating_add(step);
            let t = *c;
            let big = |r: u64| match r % 4 {
                0 => u64::MAX - r % 7,
                1 => r >> (r % 64),
                _ => r % 1_000_000_000,
            };
            let name = 1 + rand() % 4;
            match rand() % 10 {
                0 => b.lock_wait(tid, t, name, big(rand()), rand() % 2 == 0),
                1 => b.lock_hold(tid, t, name, big(rand()), true),
                2 => {
                    enq += 1;
                    b.enqueue(tid, t, name, rand(), rand() as u32)
                }
                3 => b.dequeue(tid, t, name, rand(), big(rand()), rand() as u32),
                4 => b.processing_end(tid, t, name, rand(), big(rand()), rand() % 2 == 0),
                5 => b.item_dropped(tid, t, name, rand(), rand() as u32, 1 + rand() % 4),
                6 => b.queue_snapshot(tid, t, name, rand() as u32, rand(), rand(), rand()),
                7 => b.backlog_trigger(tid, t, name, rand() as u32, rand() as i64, 1 + rand() % 4),
                8 => b.io(tid, t, name, big(rand()), big(rand())),
                _ => b.heartbeat(tid, t, name, big(rand())),
            }
        }
        let opts = BacklogOptions {
            window_ns: 1 + rand() % 2_000_000_000,
            lookback_ns: 1 + rand() % 5_000_000_000,
            ..BacklogOptions::default()
        };
        let r = analyze_bytes(&b.finish(), &opts);
        assert!(r.errors.is_empty(), "round {round}: {:?}", r.errors);
        assert_eq!(r.app_events, n, "round {round}");
        assert_eq!(r.queues.iter().map(|q| q.enqueued).sum::<u64>(), enq);
        let _ = r.to_string();
        let _ = r.to_json().to_string();
    }
}

/// Many windows and many triggers: the text shows the fastest-growing
/// windows and the triggers with the most lost time, and a summary of the
/// top causes; JSON keeps everything.
#[test]
fn long_traces_keep_the_text_short() {
    let (bytes, _) = build(Scenario::IoUnderLock);
    let opts = BacklogOptions {
        window_ns: 10 * MS,
        ..BacklogOptions::default()
    };
    let r = analyze_bytes(&bytes, &opts);
    assert_eq!(r.queues[0].windows.len(), 600);
    let text = r.to_string();
    assert!(
        text.contains("(540 windows with slower growth not shown; --json has all)"),
        "{text}"
    );
    assert_eq!(
        r.to_json()["queues"][0]["windows"]
            .as_array()
            .unwrap()
            .len(),
        600
    );

    let mut b = TraceBuilder::new();
    b.string(JOBS, "jobs");
    b.string(MANUAL, "manual");
    for i in 1..=3_000u64 {
        b.enqueue(PRODUCER, i * MS, JOBS, i, i as u32);
        if i % 50 == 0 {
            b.backlog_trigger(PRODUCER, i * MS + 1, JOBS, i as u32, 1_000, MANUAL);
        }
    }
    let r = analyze_bytes(&b.finish(), &BacklogOptions::default());
    assert_eq!(r.triggers.len(), 60);
    let top = r.top_causes();
    assert_eq!(top.len(), 1);
    assert_eq!(
        (top[0].cause, top[0].triggers),
        (Some(Cause::ConsumerStall), 60)
    );
    let text = r.to_string();
    assert!(text.contains("60 of 60: consumer_stall"), "{text}");
    assert!(
        text.contains("(the 50 with the most lost time; --json has all)"),
        "{text}"
    );
    assert_eq!(r.to_json()["top_causes"][0]["triggers"], 60);
}

/// Two consumers share the queue; one of them (tid 6) stops from 3.0 s to
/// 3.6 s while the other keeps going: the stalled one is named.
#[test]
fn one_of_two_consumers_stalls() {
    let mut b = TraceBuilder::new();
    b.string(JOBS, "jobs");
    b.string(SIZE_THRESHOLD, "size_threshold");
    b.thread_name(CONSUMER, "worker-a");
    b.thread_name(6, "worker-b");
    // Each consumer takes 1.5 ms per item: together they keep up with one
    // item per ms, worker-a alone does not.
    let mut free = [0u64; 2];
    let tids = [CONSUMER, 6];
    // (time, 0: enqueue / 1: dequeue, seqno, consumer, delay, end)
    let mut timeline: Vec<(u64, u8, u64, usize, u64, u64)> = Vec::new();
    let mut pending: std::collections::VecDeque<(u64, u64)> = Default::default();
    for i in 1..=6_000u64 {
        let t = i * MS;
        pending.push_back((i, t));
        timeline.push((t, 0, i, 0, 0, 0));
        // Hand out items to whichever consumer is free before the next
        // arrival.
        while let Some(&(seq, at)) = pending.front() {
            let k = if free[0] <= free[1] { 0 } else { 1 };
            let start = free[k].max(at) + 10 * US;
            if k == 1 && (PROBLEM_START..PROBLEM_END).contains(&start) {
                free[1] = PROBLEM_END;
                continue;
            }
            if start >= t + MS {
                break;
            }
            pending.pop_front();
            free[k] = start + 1_500 * US;
            timeline.push((start, 1, seq, k, start - at, free[k]));
        }
    }
    timeline.sort_by_key(|e| (e.0, e.1));
    let mut size = 0u32;
    let mut per_thread = [Vec::new(), Vec::new()];
    for &(t, what, seq, k, delay, end) in &timeline {
        if what == 0 {
            size += 1;
            b.enqueue(PRODUCER, t, JOBS, seq, size);
        } else {
            size -= 1;
            per_thread[k].push((t, seq, delay, size, end));
        }
    }
    for (k, evs) in per_thread.iter().enumerate() {
        for &(start, seq, delay, size, end) in evs {
            b.dequeue(tids[k], start, JOBS, seq, delay, size);
            b.processing_end(tids[k], end, JOBS, seq, end - start, true);
        }
    }
    b.backlog_trigger(PRODUCER, TRIGGER + 1, JOBS, 300, 500, SIZE_THRESHOLD);
    let r = analyze_bytes(&b.finish(), &BacklogOptions::default());
    let t = &r.triggers[0];
    assert_eq!(t.consumers.len(), 2);
    assert_eq!(causes(&r), vec![Cause::ConsumerStall], "{t:#?}");
    assert_eq!(t.verdicts[0].thread.as_deref(), Some("worker-b (tid 6)"));
    assert!(t.verdicts[0].lost_ns > 450 * MS, "{t:#?}");
}

/// Two recordings at once: each one's triggers are judged on its own
/// timeline, counts are summed by queue name, threads carry their pid.
#[test]
fn two_recordings() {
    let d = std::env::temp_dir().join(format!("runtrace-backlog-two-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let (a, ca) = build(Scenario::IoUnderLock);
    let (b, cb) = build(Scenario::ProcessingSlowdown);
    // The second recording: another recording id and pid.
    let mut b2 = b.clone();
    let hdr = TraceBuilder::with_header(1_000_000_000, 0x7777, 4343).finish_unsealed();
    // Magic and HEADER frame of the same size (same schemas and process
    // name, ids of the same varint length): swap them in.
    b2.splice(..hdr.len(), hdr.iter().copied());
    std::fs::write(d.join("a.0.bin"), &a).unwrap();
    std::fs::write(d.join("b.0.bin"), &b2).unwrap();
    let r = analyze_files(
        &[d.join("a.0.bin"), d.join("b.0.bin")],
        &BacklogOptions::default(),
    );
    let _ = std::fs::remove_dir_all(&d);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(r.queues.len(), 1);
    assert_eq!(r.queues[0].enqueued, ca.enq + cb.enq);
    assert_eq!(r.triggers.len(), 2);
    assert_eq!(r.triggers[0].verdicts[0].cause, Cause::IoBlocking);
    assert_eq!(
        r.triggers[0].verdicts[0].thread.as_deref(),
        Some("logger (pid 4242, tid 3)")
    );
    assert_eq!(r.triggers[1].verdicts[0].cause, Cause::ProcessingSlowdown);
    assert_eq!(
        r.triggers[1].verdicts[0].thread.as_deref(),
        Some("consumer (pid 4343, tid 2)")
    );
}

/// A queue whose consumer records no `processing_end` (no processing
/// guard): its stall shows as a dequeue rate that fell while items kept
/// coming; the same queue without the stall has no verdict.
#[test]
fn stall_without_processing_guards() {
    for stall in [true, false] {
        let mut b = TraceBuilder::new();
        b.string(JOBS, "jobs");
        b.string(SIZE_THRESHOLD, "size_threshold");
        b.thread_name(CONSUMER, "consumer");
        let mut events = Vec::new();
        let mut free = 0u64;
        for i in 1..=6_000u64 {
            let t = i * MS;
            events.push((t, 0, i, 0));
            let mut start = free.max(t) + 10 * US;
            if stall && (PROBLEM_START..PROBLEM_END).contains(&start) {
                start = PROBLEM_END;
            }
            events.push((start, 1, i, start - t));
            free = start + 500 * US;
        }
        events.sort();
        let mut size = 0u32;
        let mut deqs = Vec::new();
        for (t, what, seq, delay) in events {
            if what == 0 {
                size += 1;
                b.enqueue(PRODUCER, t, JOBS, seq, size);
            } else {
                size -= 1;
                deqs.push((t, seq, delay, size));
            }
        }
        for (t, seq, delay, size) in deqs {
            b.dequeue(CONSUMER, t, JOBS, seq, delay, size);
        }
        b.backlog_trigger(PRODUCER, TRIGGER + 1, JOBS, 500, 1_000, SIZE_THRESHOLD);
        let r = analyze_bytes(&b.finish(), &BacklogOptions::default());
        let t = &r.triggers[0];
        if stall {
            assert_eq!(causes(&r), vec![Cause::ConsumerStall], "{t:#?}");
            let v = &t.verdicts[0];
            assert_eq!(v.thread.as_deref(), Some("consumer (tid 2)"));
            assert!(v.evidence.contains("dequeue rate"), "{}", v.evidence);
            assert!(v.lost_ns > 400 * MS, "{v:?}");
        } else {
            assert!(t.verdicts.is_empty(), "{t:#?}");
        }
    }
}

/// A machine that gets busy: from 0.25 s on, the consumer misses 8 ms of
/// every 40 (descheduled, nothing recorded) but catches up each time, the
/// queue emptying again. At 0.9 s it blocks 150 ms on lock "log" while the
/// logger rotates under it, and the queue backs up to the trigger at
/// 1.0 s. The scattered pauses before the queue was last empty did not
/// build this backlog: the rotation did, and is ranked first.
#[test]
fn caught_up_pauses_do_not_outweigh_the_stall_that_built_the_backlog() {
    const ROT_START: u64 = 900 * MS;
    const ROT_END: u64 = 1_050 * MS;
    let mut evs: Vec<(u64, u64, E)> = Vec::new();
    let (mut free, mut size, mut taken) = (0u64, 0u32, 0u64);
    let mut arrivals: std::collections::VecDeque<(u64, u64)> = Default::default();
    let mut trigger = None;
    for i in 1..=1_500u64 {
        let at = i * MS;
        // The consumer takes what arrived before `at`.
        while let Some(&(seq, a)) = arrivals.front() {
            let mut st = free.max(a) + 10 * US;
            if (250 * MS..ROT_START).contains(&st) && st % (40 * MS) < 8 * MS {
                st += 8 * MS - st % (40 * MS); // descheduled
            }
            let mut wait = None;
            if (ROT_START..ROT_END).contains(&st) {
                wait = Some(ROT_END + 5 * US - st);
                st = ROT_END + 5 * US;
            }
            if st >= at {
                break;
            }
            arrivals.pop_front();
            size -= 1;
            taken += 1;
            if let Some(w) = wait {
                evs.push((CONSUMER, st, E::Wait(LOG_LOCK, w)));
                evs.push((CONSUMER, st + 20 * US, E::Hold(LOG_LOCK, 10 * US)));
            }
            evs.push((CONSUMER, st + 30 * US, E::Deq(seq, st - a, size)));
            free = st + 230 * US;
            evs.push((CONSUMER, free, E::Proc(seq, 200 * US)));
        }
        arrivals.push_back((i, at));
        size += 1;
        evs.push((PRODUCER, at, E::Enq(i, size)));
        if size == 100 && trigger.is_none() {
            trigger = Some(at + 1);
            evs.push((PRODUCER, at + 1, E::Trigger(size, SIZE_THRESHOLD)));
        }
    }
    assert!(taken > 1_000);
    let t_at = trigger.expect("the rotation backs the queue up to 100");
    assert!((ROT_START..ROT_END).contains(&t_at));
    evs.push((
        LOGGER,
        ROT_END - 5 * US,
        E::Io(ROTATE, 0, ROT_END - ROT_START),
    ));
    evs.push((
        LOGGER,
        ROT_END,
        E::Hold(LOG_LOCK, ROT_END - ROT_START + 10 * US),
    ));
    let r = analyze_bytes(&write(evs), &BacklogOptions::default());
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(r.triggers.len(), 1);
    let t = &r.triggers[0];
    // The window starts where the queue was last empty (at most 100 ms
    // before the trigger here), not at the start of the recording.
    assert!(t.window_ns[0] >= ROT_START - 10 * MS, "{t:#?}");
    let top = &t.verdicts[0];
    assert_eq!(top.cause, Cause::IoBlocking, "{t:#?}");
    assert_eq!(top.lock.as_deref(), Some("log"), "{t:#?}");
    assert!(top.evidence.contains("rotate"), "{t:#?}");
}
