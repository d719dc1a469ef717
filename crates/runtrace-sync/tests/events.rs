//! What the primitives record, counted exactly from real recordings, and
//! the backlog detector's behaviour.
//!
//! Recording is process-wide: tests that record take `RECORDING`, and
//! every count filters on names unique to its test (other tests may run
//! meanwhile).

use runtrace_format::merge::EventStream;
use runtrace_format::{Event, Value};
use runtrace_recorder::Recorder;
use runtrace_sync::{backlog, heartbeat, io, queue, LockOptions, Mutex, RwLock};
use std::path::PathBuf;
use std::sync::{mpsc, Arc, Barrier};
use std::time::{Duration, Instant};

static RECORDING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Records `work` into a fresh directory and returns the merged events.
fn record(name: &str, work: impl FnOnce()) -> Vec<Event> {
    let _one_at_a_time = RECORDING.lock().unwrap_or_else(|e| e.into_inner());
    let dir: PathBuf =
        std::env::temp_dir().join(format!("runtrace-sync-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let guard = Recorder::builder().path(dir.join("trace")).start().unwrap();
    work();
    let stats = guard.finish().unwrap();
    assert_eq!(stats.dropped, 0, "events lost");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    runtrace_format::merge::sort_trace_paths(&mut files);
    let mut s = EventStream::open(&files).unwrap();
    let mut events = Vec::new();
    while let Some(e) = s.next_event() {
        events.push(e);
    }
    assert!(s.errors().is_empty(), "{:?}", s.errors());
    let _ = std::fs::remove_dir_all(&dir);
    events
}

fn text<'a>(e: &'a Event, f: &str) -> &'a str {
    e.get(f).and_then(Value::as_str).unwrap_or("")
}

/// Events of type `event` whose `field` is `name`.
fn named<'a>(events: &'a [Event], event: &str, field: &str, name: &str) -> Vec<&'a Event> {
    events
        .iter()
        .filter(|e| e.schema.name == event && text(e, field) == name)
        .collect()
}

fn u(e: &Event, f: &str) -> u64 {
    e.u64(f).unwrap_or_else(|| panic!("no {f} in {e:?}"))
}

fn b(e: &Event, f: &str) -> bool {
    matches!(e.get(f), Some(Value::Bool(true)))
}

/// Holds `m` on this thread while another thread blocks on it, `times`
/// times: each round the other thread says it is about to lock, then this
/// one keeps the lock 100 ms more, so its first attempt fails (unless the
/// machine keeps that thread off a CPU for all of 100 ms).
fn contend(m: &Arc<Mutex<u64>>, times: usize) {
    for _ in 0..times {
        let g = m.lock();
        let (tx, rx) = mpsc::channel();
        let m2 = m.clone();
        let t = std::thread::spawn(move || {
            tx.send(()).unwrap();
            *m2.lock() += 1;
        });
        rx.recv().unwrap();
        std::thread::sleep(Duration::from_millis(100));
        drop(g);
        t.join().unwrap();
    }
}

#[test]
fn queue_events_counted_exactly() {
    let events = record("queue", || {
        let (tx, rx) = queue::builder("exact-q", 4)
            .snapshot_interval(Duration::from_secs(3600))
            .build::<u32>()
            .unwrap();
        for i in 0..4 {
            tx.send(i).unwrap(); // seqnos 1-4; size 3 triggers the detector
        }
        for i in 0..3 {
            assert!(tx.try_send(10 + i).is_err()); // seqnos 5-7 dropped: full
        }
        for i in 0..4 {
            let mut item = rx.recv().unwrap();
            assert_eq!(*item, i);
            if i == 2 {
                item.fail();
            }
        }
        tx.send(8).unwrap(); // seqno 8
        tx.send(9).unwrap(); // seqno 9
        let (v, done) = rx.recv().unwrap().into_parts();
        assert_eq!(v, 8);
        std::thread::sleep(Duration::from_millis(5));
        done.finish(true);
        drop(rx.recv().unwrap());
        drop(rx);
        assert!(tx.send(10).is_err()); // seqno 10 dropped: disconnected
        tx.snapshot();
        assert_eq!((tx.produced(), tx.consumed(), tx.dropped()), (6, 6, 4));
    });
    let seq = |ev: &str| -> Vec<u64> {
        named(&events, ev, "queue", "exact-q")
            .iter()
            .map(|e| u(e, "seqno"))
            .collect()
    };
    let size = |ev: &str| -> Vec<u64> {
        named(&events, ev, "queue", "exact-q")
            .iter()
            .map(|e| u(e, "queue_size"))
            .collect()
    };
    assert_eq!(seq("enqueue"), [1, 2, 3, 4, 8, 9]);
    assert_eq!(size("enqueue"), [1, 2, 3, 4, 1, 2]);
    assert_eq!(seq("dequeue"), [1, 2, 3, 4, 8, 9]);
    assert_eq!(size("dequeue"), [3, 2, 1, 0, 1, 0]);
    assert_eq!(seq("processing_end"), [1, 2, 3, 4, 8, 9]);
    let ok: Vec<bool> = named(&events, "processing_end", "queue", "exact-q")
        .iter()
        .map(|e| b(e, "success"))
        .collect();
    assert_eq!(ok, [true, true, false, true, true, true]);
    // The guard finished after a 5 ms sleep measures at least that.
    let p8 = named(&events, "processing_end", "queue", "exact-q")[4];
    assert!(u(p8, "processing_ns") >= 5_000_000, "{p8:?}");
    let drops = named(&events, "item_dropped", "queue", "exact-q");
    let causes: Vec<(u64, &str)> = drops
        .iter()
        .map(|e| (u(e, "seqno"), text(e, "cause")))
        .collect();
    assert_eq!(
        causes,
        [(5, "full"), (6, "full"), (7, "full"), (10, "disconnected")]
    );
    assert!(drops[..3].iter().all(|e| u(e, "queue_size") == 4));
    let triggers = named(&events, "backlog_trigger", "queue", "exact-q");
    assert_eq!(triggers.len(), 1, "{triggers:?}");
    assert_eq!(text(triggers[0], "reason"), "size_threshold");
    assert_eq!(u(triggers[0], "queue_size"), 3);
    // The first enqueue's snapshot (interval 1 h) and the manual one.
    let snaps = named(&events, "queue_snapshot", "queue", "exact-q");
    let totals: Vec<[u64; 4]> = snaps
        .iter()
        .map(|e| {
            [
                u(e, "queue_size"),
                u(e, "produced_total"),
                u(e, "consumed_total"),
                u(e, "dropped_total"),
            ]
        })
        .collect();
    assert_eq!(totals, [[1, 1, 0, 0], [0, 6, 6, 4]]);
    // Queueing delay is measured: every dequeue has one, in order of time.
    for d in named(&events, "dequeue", "queue", "exact-q") {
        assert!(u(d, "queue_delay_ns") > 0, "{d:?}");
    }
}

#[test]
fn lock_events_counted_exactly() {
    const K: usize = 3;
    let events = record("locks", || {
        let m = Arc::new(Mutex::new("exact-lock", 0u64));
        contend(&m, K);
        for _ in 0..5 {
            *m.lock() += 1; // uncontended: holds, no waits
        }
        assert_eq!(*m.lock(), K as u64 + 5);
        let rw = RwLock::new("exact-rw", 1u32);
        drop(rw.read());
        drop(rw.write());
        assert!(rw.try_write().is_some());
    });
    let waits = named(&events, "lock_wait", "lock_name", "exact-lock");
    assert_eq!(waits.len(), K, "{waits:?}");
    for w in &waits {
        assert!(u(w, "wait_ns") >= 1_000_000, "{w:?}");
        assert!(b(w, "write"));
    }
    // K holds by the contending thread + K by the waiters + 5 + the check.
    let holds = named(&events, "lock_hold", "lock_name", "exact-lock");
    assert_eq!(holds.len(), 2 * K + 6);
    // The holder kept it >= 100 ms each round; its release is a hold event
    // on this test's thread, before the waiter's wait event.
    let long = holds
        .iter()
        .filter(|e| u(e, "hold_ns") >= 100_000_000)
        .count();
    assert_eq!(long, K);
    let rw: Vec<bool> = named(&events, "lock_hold", "lock_name", "exact-rw")
        .iter()
        .map(|e| b(e, "write"))
        .collect();
    assert_eq!(rw, [false, true, true]);
    assert!(named(&events, "lock_wait", "lock_name", "exact-rw").is_empty());
}

/// A stalled pipeline (nothing enqueued or dequeued for 400 ms, items
/// waiting) keeps reporting its status only with `periodic_snapshots`:
/// the background thread takes the snapshots that traffic does not.
#[test]
fn periodic_snapshots_continue_while_the_queue_is_stalled() {
    let build = |name: &str, periodic: bool| {
        let b = queue::builder(name, 8).snapshot_interval(Duration::from_millis(50));
        let b = if periodic { b.periodic_snapshots() } else { b };
        b.build::<u32>().unwrap()
    };
    let events = record("periodic", || {
        let (tx, rx) = build("stalled-periodic", true);
        let (tx2, rx2) = build("stalled-plain", false);
        for i in 0..5 {
            tx.send(i).unwrap();
            tx2.send(i).unwrap();
        }
        drop(rx.recv().unwrap());
        drop(rx2.recv().unwrap());
        std::thread::sleep(Duration::from_millis(400)); // the stall
        drop((tx, rx, tx2, rx2));
    });
    // The snapshots after the queue's last dequeue, when the stall began.
    let stalled = |q: &str| -> Vec<[u64; 4]> {
        let from = named(&events, "dequeue", "queue", q)[0].ns;
        named(&events, "queue_snapshot", "queue", q)
            .iter()
            .filter(|e| e.ns > from)
            .map(|e| {
                [
                    u(e, "queue_size"),
                    u(e, "produced_total"),
                    u(e, "consumed_total"),
                    u(e, "dropped_total"),
                ]
            })
            .collect()
    };
    // Every 50 ms through 400 ms, at most 75 ms apart: at least 5 even on
    // a loaded machine, each with the stalled state (4 waiting).
    let p = stalled("stalled-periodic");
    assert!(p.len() >= 5, "{p:?}");
    assert!(p.iter().all(|s| *s == [4, 5, 1, 0]), "{p:?}");
    // Without the thread, a stalled queue reports nothing.
    assert_eq!(stalled("stalled-plain"), Vec::<[u64; 4]>::new());
}

#[test]
fn thresholds_suppress_short_waits_and_holds() {
    let events = record("thresholds", || {
        let quiet = Arc::new(Mutex::with_options(
            "threshold-quiet",
            LockOptions::new()
                .wait_threshold(Duration::from_secs(5))
                .hold_threshold(Duration::from_secs(5)),
            0u64,
        ));
        contend(&quiet, 2);
        let holds = Mutex::with_options(
            "threshold-holds",
            // Far above an instant hold, even one preempted on a loaded
            // machine.
            LockOptions::new().hold_threshold(Duration::from_millis(50)),
            (),
        );
        for i in 0..6 {
            let g = holds.lock();
            if i % 2 == 0 {
                std::thread::sleep(Duration::from_millis(60));
            }
            drop(g);
        }
    });
    assert!(named(&events, "lock_wait", "lock_name", "threshold-quiet").is_empty());
    assert!(named(&events, "lock_hold", "lock_name", "threshold-quiet").is_empty());
    let holds = named(&events, "lock_hold", "lock_name", "threshold-holds");
    assert_eq!(holds.len(), 3, "{holds:?}");
    assert!(holds.iter().all(|e| u(e, "hold_ns") >= 50_000_000));
}

#[test]
fn io_and_heartbeats_recorded() {
    let events = record("io", || {
        for n in [10u64, 20, 30] {
            let r = io::timed("exact-io", n, || {
                std::thread::sleep(Duration::from_millis(2));
                n * 2
            });
            assert_eq!(r, n * 2);
        }
        let t = io::start("exact-io-late");
        t.finish(4096);
        let _unrecorded = io::start("exact-io-dropped");
        for _ in 0..4 {
            heartbeat("exact-role");
            std::thread::sleep(Duration::from_millis(3));
        }
    });
    let ios = named(&events, "io", "op", "exact-io");
    let bytes: Vec<u64> = ios.iter().map(|e| u(e, "bytes")).collect();
    assert_eq!(bytes, [10, 20, 30]);
    assert!(ios.iter().all(|e| u(e, "io_ns") >= 2_000_000));
    assert_eq!(named(&events, "io", "op", "exact-io-late").len(), 1);
    assert!(named(&events, "io", "op", "exact-io-dropped").is_empty());
    let gaps: Vec<u64> = named(&events, "thread_heartbeat", "role", "exact-role")
        .iter()
        .map(|e| u(e, "gap_ns"))
        .collect();
    assert_eq!(gaps.len(), 4);
    assert_eq!(gaps[0], 0);
    assert!(gaps[1..].iter().all(|&g| g >= 3_000_000), "{gaps:?}");
}

/// Triggers of one queue seen by a subscription so far (drains it).
fn triggers_of(sub: &backlog::Subscription, queue: &str) -> Vec<backlog::Backlog> {
    sub.try_iter().filter(|b| b.queue == queue).collect()
}

#[test]
fn detector_fires_on_size_once_per_crossing() {
    let sub = backlog::subscribe();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    let (tx, rx) = queue::builder("detect-size", 100)
        .size_threshold(10)
        .trigger_interval(Duration::ZERO)
        .on_backlog(move |b| seen2.lock().unwrap().push(b.queue_size))
        .build::<u32>()
        .unwrap();
    for i in 0..20 {
        tx.send(i).unwrap();
    }
    // Draining to 8 is not below 3/4 of the threshold: still disarmed.
    for _ in 0..12 {
        drop(rx.recv().unwrap());
    }
    tx.send(0).unwrap();
    tx.send(0).unwrap();
    tx.send(0).unwrap(); // size 11: no new trigger
    for _ in 0..5 {
        drop(rx.recv().unwrap()); // down to 6: re-armed
    }
    for _ in 0..4 {
        tx.send(0).unwrap(); // size 10: triggers again
    }
    let t = triggers_of(&sub, "detect-size");
    let sizes: Vec<usize> = t.iter().map(|b| b.queue_size).collect();
    assert_eq!(sizes, [10, 10]);
    assert!(t.iter().all(|b| b.reason == backlog::Reason::SizeThreshold));
    assert_eq!(*seen.lock().unwrap(), [10, 10]);
}

#[test]
fn detector_rate_limits_triggers() {
    let sub = backlog::subscribe();
    let (tx, rx) = queue::builder("detect-limit", 100)
        .size_threshold(2)
        .trigger_interval(Duration::from_secs(3600))
        .build::<u32>()
        .unwrap();
    for _ in 0..3 {
        tx.send(0).unwrap();
        tx.send(0).unwrap();
        drop(rx.recv().unwrap());
        drop(rx.recv().unwrap());
    }
    assert_eq!(triggers_of(&sub, "detect-limit").len(), 1);
}

#[test]
fn detector_fires_on_growth_rate_not_on_steady_queue() {
    let sub = backlog::subscribe();
    let window = Duration::from_millis(200);
    // Grows at ~10,000 items/s for 150 ms; the limit is 1,000/s.
    let (tx, _rx) = queue::builder("detect-growth", 1_000_000)
        .no_size_threshold()
        .growth_rate(1_000, window)
        .build::<u32>()
        .unwrap();
    // Paced by the clock, catching up after any sleep that ran long, so the
    // queue's growth stays ~10,000/s however the thread is scheduled.
    let start = Instant::now();
    let mut sent = 0u64;
    while start.elapsed() < Duration::from_millis(150) {
        let due = start.elapsed().as_micros() as u64 / 100;
        while sent < due {
            tx.send(0).unwrap();
            sent += 1;
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    let t = triggers_of(&sub, "detect-growth");
    assert_eq!(t.len(), 1, "{t:?}"); // rate-limited to one per second
    assert_eq!(t[0].reason, backlog::Reason::GrowthRate);
    assert!(t[0].growth_rate_per_sec >= 1_000, "{t:?}");

    // Same arrival rate, drained as fast: the queue never grows.
    let (tx, rx) = queue::builder("detect-steady", 1_000_000)
        .size_threshold(50)
        .growth_rate(1_000, window)
        .build::<u32>()
        .unwrap();
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(500) {
        tx.send(0).unwrap();
        drop(rx.recv().unwrap());
        std::thread::sleep(Duration::from_micros(100));
    }
    assert!(triggers_of(&sub, "detect-steady").is_empty());
}

#[test]
fn manual_triggers_reach_subscribers_and_the_trace() {
    let sub = backlog::subscribe();
    let events = record("manual", || {
        let (tx, _rx) = queue::bounded::<u8>("manual-q", 8);
        tx.send(1).unwrap();
        tx.trigger_backlog();
        backlog::trigger("manual-free", 42);
    });
    let q = named(&events, "backlog_trigger", "queue", "manual-q");
    assert_eq!(q.len(), 1);
    assert_eq!(text(q[0], "reason"), "manual");
    assert_eq!(u(q[0], "queue_size"), 1);
    let f = named(&events, "backlog_trigger", "queue", "manual-free");
    assert_eq!(u(f[0], "queue_size"), 42);
    // Subscriptions are process-wide: other tests in this binary fire their
    // own triggers concurrently, so only this test's queues are looked at.
    let seen: Vec<backlog::Backlog> = sub
        .try_iter()
        .filter(|b| b.queue == "manual-q" || b.queue == "manual-free")
        .collect();
    let of = |q: &str| seen.iter().filter(|b| b.queue == q).count();
    assert_eq!((of("manual-q"), of("manual-free")), (1, 1));
    assert!(seen.iter().all(|b| b.reason == backlog::Reason::Manual));
}

#[test]
fn bad_queue_configuration_is_an_error() {
    use queue::QueueConfigError as E;
    let err = |b: queue::QueueBuilder| b.build::<()>().err();
    assert_eq!(err(queue::builder("", 4)), Some(E::EmptyName));
    assert_eq!(err(queue::builder("q", 0)), Some(E::ZeroCapacity));
    assert_eq!(
        err(queue::builder("q", 4).size_threshold(5)),
        Some(E::SizeThreshold {
            threshold: 5,
            capacity: 4
        })
    );
    assert_eq!(
        err(queue::builder("q", 4).growth_rate(0, Duration::from_secs(1))),
        Some(E::GrowthRate)
    );
    assert_eq!(
        E::SizeThreshold {
            threshold: 5,
            capacity: 4
        }
        .to_string(),
        "size threshold 5 must be between 1 and the capacity (4)"
    );
}

#[test]
fn many_producers_and_consumers_keep_exact_totals() {
    let events = record("mpmc", || {
        let (tx, rx) = queue::builder("mpmc-q", 64)
            .no_size_threshold()
            .build::<u64>()
            .unwrap();
        let barrier = Arc::new(Barrier::new(6));
        let mut threads = Vec::new();
        for p in 0..3u64 {
            let tx = tx.clone();
            let barrier = barrier.clone();
            threads.push(std::thread::spawn(move || {
                barrier.wait();
                for i in 0..1_000 {
                    if tx.try_send(p * 10_000 + i).is_err() {
                        tx.send(p * 10_000 + i).unwrap(); // full: retried blocking
                    }
                }
            }));
        }
        drop(tx);
        for _ in 0..3 {
            let rx = rx.clone();
            let barrier = barrier.clone();
            threads.push(std::thread::spawn(move || {
                barrier.wait();
                rx.iter().for_each(drop);
            }));
        }
        for t in threads {
            t.join().unwrap();
        }
    });
    let enq = named(&events, "enqueue", "queue", "mpmc-q");
    let deq = named(&events, "dequeue", "queue", "mpmc-q");
    let drops = named(&events, "item_dropped", "queue", "mpmc-q").len();
    assert_eq!(enq.len(), 3_000);
    assert_eq!(deq.len(), 3_000);
    assert_eq!(
        named(&events, "processing_end", "queue", "mpmc-q").len(),
        3_000
    );
    // Every seqno is used exactly once, by an enqueue or a drop.
    let mut seqnos: Vec<u64> = enq.iter().map(|e| u(e, "seqno")).collect();
    seqnos.extend(
        named(&events, "item_dropped", "queue", "mpmc-q")
            .iter()
            .map(|e| u(e, "seqno")),
    );
    seqnos.sort_unstable();
    assert_eq!(seqnos, (1..=3_000 + drops as u64).collect::<Vec<_>>());
}
