//! Each root cause `runtrace backlog` knows, produced for real: a small
//! pipeline built from `runtrace_sync` is recorded while one purpose-built
//! problem makes its queue back up, and the analysis must rank that cause
//! first and not report the causes that were not planted.
//!
//! Every scenario: a producer enqueues ~2,000 items/s on queue `q-<name>`
//! (size trigger at 200: 100 ms of input); the consumer dequeues, does ~50 us of CPU work
//! and, in some scenarios, takes a lock or does I/O. After a quiet baseline
//! of 400 ms the problem is planted once, for ~250 ms, then the pipeline
//! runs 300 ms more. A 20x processing slowdown still grows the queue by
//! one item per ms, so the plant crosses the threshold after ~200 ms, while
//! a scheduling hiccup in the baseline would need to stop the consumer for
//! 100 ms to fire a trigger of its own.

mod common;
use common::{scratch_dir, trace_files};
use runtrace_analyze::backlog::{analyze_files, BacklogOptions, Cause, TriggerReport};
use runtrace_recorder::Recorder;
use runtrace_sync::{io, queue, Mutex};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One recording per process at a time.
static RECORDING: std::sync::Mutex<()> = std::sync::Mutex::new(());

const STALL: Duration = Duration::from_millis(250);

fn spin(d: Duration) {
    let until = Instant::now() + d;
    while Instant::now() < until {
        std::hint::spin_loop();
    }
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Plant {
    /// The consumer stops taking items (an uninstrumented sleep).
    ConsumerStall,
    /// Another thread holds lock "cache" doing CPU work; the consumer
    /// needs it for every item.
    LockContention,
    /// The consumer's own write blocks (slow I/O, no lock).
    IoBlocking,
    /// Processing gets 20x slower for a while (no lock, no I/O).
    ProcessingSlowdown,
}

/// Runs the pipeline with `plant` and returns the triggers of its queue.
fn scenario(plant: Plant) -> Vec<TriggerReport> {
    let _one = RECORDING.lock().unwrap_or_else(|e| e.into_inner());
    let name = format!("{plant:?}").to_lowercase();
    let dir = scratch_dir(&format!("scenario-{name}"));
    let guard = Recorder::builder()
        .path(dir.path().join("trace"))
        .start()
        .unwrap();

    let qname = format!("q-{name}");
    let (tx, rx) = queue::builder(&qname, 100_000)
        .size_threshold(200)
        .trigger_interval(Duration::from_secs(10))
        .build::<u64>()
        .unwrap();
    let cache = Arc::new(Mutex::new("cache", 0u64));
    let stop = Arc::new(AtomicBool::new(false));
    let planted = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let plant_at = Duration::from_millis(400);

    let producer = {
        let stop = stop.clone();
        std::thread::Builder::new()
            .name("producer".into())
            .spawn(move || {
                let mut sent = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let due = (start.elapsed().as_secs_f64() * 2_000.0) as u64;
                    while sent < due {
                        tx.send(sent).unwrap();
                        sent += 1;
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
            })
            .unwrap()
    };
    let consumer = {
        let cache = cache.clone();
        let planted = planted.clone();
        std::thread::Builder::new()
            .name("consumer".into())
            .spawn(move || {
                let mut sink = Vec::new();
                for item in rx.iter() {
                    let now = start.elapsed();
                    let in_plant = now >= plant_at && now < plant_at + STALL;
                    if in_plant
                        && plant == Plant::IoBlocking
                        && !planted.swap(true, Ordering::Relaxed)
                    {
                        io::timed(io::FILE_WRITE, 4096, || std::thread::sleep(STALL));
                    }
                    let work = if in_plant && plant == Plant::ProcessingSlowdown {
                        Duration::from_millis(1)
                    } else {
                        Duration::from_micros(50)
                    };
                    spin(work);
                    if plant == Plant::LockContention {
                        *cache.lock() += *item;
                    }
                    if plant == Plant::IoBlocking {
                        io::timed(io::FILE_WRITE, 64, || sink.extend_from_slice(&[0u8; 64]));
                    }
                    drop(item);
                    // Between items, not while processing one.
                    if in_plant
                        && plant == Plant::ConsumerStall
                        && !planted.swap(true, Ordering::Relaxed)
                    {
                        std::thread::sleep(STALL);
                    }
                }
            })
            .unwrap()
    };
    let hog = (plant == Plant::LockContention).then(|| {
        let cache = cache.clone();
        std::thread::Builder::new()
            .name("hog".into())
            .spawn(move || {
                std::thread::sleep(plant_at);
                let mut g = cache.lock();
                spin(STALL);
                *g += 1;
            })
            .unwrap()
    });
    std::thread::sleep(plant_at + STALL + Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    producer.join().unwrap();
    consumer.join().unwrap();
    if let Some(h) = hog {
        h.join().unwrap();
    }
    let stats = guard.finish().unwrap();
    assert_eq!(stats.dropped, 0);

    let r = analyze_files(&trace_files(dir.path()), &BacklogOptions::default());
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    r.triggers
        .into_iter()
        .filter(|t| *t.queue == *qname)
        .collect()
}

/// The scenario's one trigger ranks `cause` first and reports none of
/// `absent`.
fn expect(plant: Plant, cause: Cause, absent: &[Cause]) -> TriggerReport {
    let triggers = scenario(plant);
    assert_eq!(triggers.len(), 1, "{plant:?}: {triggers:#?}");
    let t = triggers.into_iter().next().unwrap();
    let top = t
        .verdicts
        .first()
        .unwrap_or_else(|| panic!("{plant:?}: no verdict {t:#?}"));
    assert_eq!(top.cause, cause, "{plant:?}: {t:#?}");
    for a in absent {
        assert!(
            t.verdicts.iter().all(|v| v.cause != *a),
            "{plant:?} produced {a:?}: {t:#?}"
        );
    }
    t
}

#[test]
fn consumer_stall_scenario() {
    let t = expect(
        Plant::ConsumerStall,
        Cause::ConsumerStall,
        &[
            Cause::LockContention,
            Cause::IoBlocking,
            Cause::ProcessingSlowdown,
        ],
    );
    assert!(
        t.verdicts[0]
            .thread
            .as_deref()
            .unwrap_or("")
            .starts_with("consumer"),
        "{t:#?}"
    );
}

#[test]
fn lock_contention_scenario() {
    let t = expect(
        Plant::LockContention,
        Cause::LockContention,
        &[Cause::IoBlocking, Cause::ProcessingSlowdown],
    );
    assert_eq!(t.verdicts[0].lock.as_deref(), Some("cache"), "{t:#?}");
    assert!(
        t.verdicts[0]
            .thread
            .as_deref()
            .unwrap_or("")
            .starts_with("hog"),
        "{t:#?}"
    );
}

#[test]
fn io_blocking_scenario() {
    let t = expect(
        Plant::IoBlocking,
        Cause::IoBlocking,
        &[Cause::LockContention, Cause::ProcessingSlowdown],
    );
    assert_eq!(t.verdicts[0].lock, None, "{t:#?}");
    assert!(
        t.verdicts[0]
            .thread
            .as_deref()
            .unwrap_or("")
            .starts_with("consumer"),
        "{t:#?}"
    );
}

#[test]
fn processing_slowdown_scenario() {
    expect(
        Plant::ProcessingSlowdown,
        Cause::ProcessingSlowdown,
        &[Cause::LockContention, Cause::IoBlocking],
    );
}
