//! What runtrace-sync's primitives cost over what they wrap, side by side.
//!
//! Per round, each variant runs `ITERS` uncontended operations on one
//! thread; variants alternate (A B C ... A B C ...) so drift and neighbours
//! hit them alike; the report is the median ns per operation over rounds
//! and the difference to the wrapped primitive.
//!
//! - `parking_lot` vs `runtrace` Mutex lock+unlock, no recording running
//!   (the probes compiled in, as with `--features record`): target: within
//!   2 ns (issue 6);
//! - the same with a recording running (two clock reads and a `lock_hold`
//!   event per lock), for scale;
//! - RwLock read and write, crossbeam vs runtrace queue send+recv (not
//!   recording), std Mutex for scale.
//!
//! Run: `cargo bench --bench sync_lock` (`SYNC_ROUNDS`, default 15).
//! Results: `target/bench-results/sync_lock.json`.

mod common;
use common::{median, Recording};
use std::hint::black_box;
use std::time::{Duration, Instant};

const ITERS: u64 = 2_000_000;

fn per_op(iters: u64, f: impl FnOnce(u64)) -> f64 {
    let t = Instant::now();
    f(iters);
    t.elapsed().as_nanos() as f64 / iters as f64
}

fn main() {
    let rounds: usize = common::env_num("SYNC_ROUNDS", 15);
    let pl = parking_lot::Mutex::new(0u64);
    let rt = runtrace_sync::Mutex::new("bench", 0u64);
    let stdm = std::sync::Mutex::new(0u64);
    let plrw = parking_lot::RwLock::new(0u64);
    let rtrw = runtrace_sync::RwLock::new("bench-rw", 0u64);
    let (ctx, crx) = crossbeam_channel::bounded::<u64>(1024);
    let (rtx, rrx) = runtrace_sync::queue::builder("bench-q", 1024)
        .no_size_threshold()
        .build::<u64>()
        .unwrap();

    type Variant<'a> = (&'static str, Box<dyn Fn(u64) + 'a>);
    let variants: Vec<Variant> = vec![
        (
            "parking_lot_mutex",
            Box::new(|n| {
                for _ in 0..n {
                    *black_box(&pl).lock() += 1;
                }
            }),
        ),
        (
            "runtrace_mutex",
            Box::new(|n| {
                for _ in 0..n {
                    *black_box(&rt).lock() += 1;
                }
            }),
        ),
        (
            "std_mutex",
            Box::new(|n| {
                for _ in 0..n {
                    *black_box(&stdm).lock().unwrap() += 1;
                }
            }),
        ),
        (
            "parking_lot_rwlock_read",
            Box::new(|n| {
                for _ in 0..n {
                    black_box(*black_box(&plrw).read());
                }
            }),
        ),
        (
            "runtrace_rwlock_read",
            Box::new(|n| {
                for _ in 0..n {
                    black_box(*black_box(&rtrw).read());
                }
            }),
        ),
        (
            "parking_lot_rwlock_write",
            Box::new(|n| {
                for _ in 0..n {
                    *black_box(&plrw).write() += 1;
                }
            }),
        ),
        (
            "runtrace_rwlock_write",
            Box::new(|n| {
                for _ in 0..n {
                    *black_box(&rtrw).write() += 1;
                }
            }),
        ),
        (
            "crossbeam_send_recv",
            Box::new(|n| {
                for i in 0..n {
                    ctx.send(i).unwrap();
                    black_box(crx.recv().unwrap());
                }
            }),
        ),
        (
            "runtrace_send_recv",
            Box::new(|n| {
                for i in 0..n {
                    rtx.send(i).unwrap();
                    black_box(*rrx.recv().unwrap());
                }
            }),
        ),
    ];
    // Queue variants run a quarter of the iterations (each is two ops and
    // slower); they are reported per send+recv pair.
    let iters_of = |name: &str| {
        if name.ends_with("send_recv") {
            ITERS / 4
        } else {
            ITERS
        }
    };
    let mut samples = vec![Vec::new(); variants.len()];
    for (name, f) in &variants {
        f(iters_of(name) / 10); // warm-up
    }
    for _ in 0..rounds {
        for (i, (name, f)) in variants.iter().enumerate() {
            let n = iters_of(name);
            samples[i].push(per_op(n, f));
        }
    }
    // While recording (holds are timed and recorded: 2 TSC reads + event).
    let rec = Recording::start("sync", |b| {
        b.buffer_size(32 << 20)
            .flush_interval(Duration::from_millis(5))
    });
    let mut recording = Vec::new();
    let mut pl_beside = Vec::new();
    for _ in 0..rounds.min(7) {
        pl_beside.push(per_op(ITERS / 4, |n| {
            for _ in 0..n {
                *black_box(&pl).lock() += 1;
            }
        }));
        recording.push(per_op(ITERS / 4, |n| {
            for _ in 0..n {
                *black_box(&rt).lock() += 1;
            }
        }));
    }
    let stats = rec.finish();

    let mut med = Vec::new();
    println!("sync_lock: {rounds} rounds of {ITERS} ops, median ns per op");
    for (i, (name, _)) in variants.iter().enumerate() {
        let m = median(&samples[i]);
        println!("  {name:<26} {m:>7.2} ns");
        med.push((*name, m));
    }
    let get = |n: &str| med.iter().find(|(k, _)| *k == n).unwrap().1;
    let diff = |a: &str, b: &str| get(a) - get(b);
    let mutex_diff = diff("runtrace_mutex", "parking_lot_mutex");
    let rec = median(&recording);
    let pl_rec = median(&pl_beside);
    println!(
        "  runtrace mutex - parking_lot: {mutex_diff:+.2} ns (target <= 2 ns: {})",
        if mutex_diff <= 2.0 { "met" } else { "MISSED" }
    );
    println!(
        "  rwlock read {:+.2} ns, write {:+.2} ns; queue send+recv {:+.2} ns per pair",
        diff("runtrace_rwlock_read", "parking_lot_rwlock_read"),
        diff("runtrace_rwlock_write", "parking_lot_rwlock_write"),
        diff("runtrace_send_recv", "crossbeam_send_recv"),
    );
    println!(
        "  recording: runtrace mutex {rec:.2} ns vs parking_lot {pl_rec:.2} ns ({} events, {} dropped)",
        stats.events, stats.dropped
    );
    let json = serde_json::json!({
        "rounds": rounds,
        "median_ns_per_op": med.iter().map(|(k, v)| (k.to_string(), serde_json::json!(v))).collect::<serde_json::Map<_, _>>(),
        "mutex_overhead_ns": mutex_diff,
        "recording": {"runtrace_mutex": rec, "parking_lot_mutex": pl_rec, "events": stats.events, "dropped": stats.dropped},
    });
    common::write_result(
        "sync_lock.json",
        &serde_json::to_string_pretty(&json).unwrap(),
    );
}
