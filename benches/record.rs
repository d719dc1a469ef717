//! Recorder costs (issue 2 targets on the 2-core reference machine):
//! - `record/event`: ns per recorded event in a tight loop (target <= 25 ns;
//!   one TSC read alone is ~20 ns there);
//! - `record/site_not_recording`: ns per probe site when no recording runs
//!   (target <= 1 ns), beside an empty loop for scale;
//! - `record/event_at`: the same event with a time the caller read already
//!   (`events::at`), i.e. what an event costs when one clock read serves
//!   several (issue 11: TSC read + at most 3 ns);
//! - `tokio_poll/{plain,idle_hooks,recording}`: ns per poll of a task that
//!   yields in a loop on a current-thread tokio runtime, stock, with
//!   `runtrace_tokio::instrument`'s hooks and nothing recording, and
//!   recording (the per-poll cost of the hooks; docs/recorder.md);
//! - `record/event_over_tsc`: what an event costs beyond its TSC read
//!   (issue 11 goal: at most 3 ns), measured side by side: rounds
//!   alternate a batch of the recorder's clock reads and a batch of
//!   events, and the median of the per-round differences is printed
//!   (criterion's `event` and `tsc_read` above run one after the other, a
//!   few seconds apart, so their difference carries the machine's drift);
//! - bytes per event on the runtime event mix (target <= 6), printed and
//!   written, with the paired figure, to `target/bench-results/record.json`;
//! - `spans/enter_exit_{plain,idle,recording}`: ns per enter+exit of a
//!   `tracing` span through a `tracing_subscriber` registry alone, with
//!   `runtrace_tokio::layer()` recording the span's target but no
//!   recording running, and recording (issue 34: aim well under 100 ns
//!   for runtrace's share); `spans/enter_exit_over_registry` prints the
//!   median of paired rounds of recording minus plain, side by side.
//!
//! - `alloc/*` (with `--features alloc`): what `runtrace::alloc::Sampled`
//!   adds over the allocator it wraps (`System`), per 64-byte
//!   allocation and free, side by side in paired rounds (the median of
//!   the per-round differences): no recording sampling (disabled), a
//!   recording sampling at 512 KiB (the unsampled path), the same with the
//!   live set on (each free looked up), every allocation sampled (mean 1
//!   byte: the sampled path, stack walk and queue push, the writer
//!   draining it), and every allocation sampled with the live set (a
//!   sampled allocation and the recorded free of it). Issue 39's targets:
//!   unsampled <= 5 ns, disabled <= 1 ns, sampled <= 2 µs, free with the
//!   live set <= 50 ns.
//!
//! Run: `cargo bench --bench record` (`--features alloc -- alloc` for the
//! allocation paths alone; the paired rounds print whatever the filter).

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use runtrace_recorder::{self as rt, Istr, Loc, Recorder};
use std::time::Duration;

/// Events per timed batch of `record/event`: 1/4 of its 32 MiB buffer
/// (32-byte slots).
const EVENT_BATCH: u64 = 256 * 1024;

/// Times `f` in batches the recording's buffer holds, with a pause after
/// each (not timed) for the writer to drain it: a tight loop outruns any
/// writer (it would write ~500 MB/s), and the drops would then be timed
/// instead of recorded events. `record/event` prints how many dropped.
fn in_batches(b: &mut criterion::Bencher, mut f: impl FnMut()) {
    b.iter_custom(|iters| {
        let mut timed = Duration::ZERO;
        let mut left = iters;
        while left > 0 {
            let n = left.min(EVENT_BATCH);
            let t0 = std::time::Instant::now();
            for _ in 0..n {
                f();
            }
            timed += t0.elapsed();
            left -= n;
            std::thread::sleep(Duration::from_millis(15));
        }
        timed
    })
}

fn tempdir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("runtrace-bench-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// A recording with a large buffer and a fast writer, so the writer keeps
/// up: a full buffer drops (and counts) instead of recording, which would
/// flatter the figures.
fn large_recording(dir: &std::path::Path) -> runtrace_recorder::RecordingGuard {
    Recorder::builder()
        .path(dir.join("trace"))
        .buffer_size(32 << 20)
        .max_file_size(256 << 20)
        .max_total_size(512 << 20)
        .flush_interval(Duration::from_millis(5))
        .start()
        .expect("start recording")
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("record");
    g.measurement_time(Duration::from_secs(3));

    g.bench_function("empty_loop", |b| b.iter(|| black_box(7u64)));
    // The floor under `event`: one clock read, as the recorder does it.
    let clock = quanta::Clock::new();
    g.bench_function("tsc_read", |b| b.iter(|| clock.raw()));
    g.bench_function("site_not_recording", |b| {
        let mut t = 0u64;
        b.iter(|| {
            t += 1;
            rt::task_poll_end(black_box(t), 1, false)
        })
    });

    let dir = tempdir("event");
    let guard = large_recording(&dir);
    g.bench_function("event", |b| {
        let mut t = 0u64;
        let q = Istr::EMPTY;
        in_batches(b, || {
            t += 1;
            rt::task_poll_start(black_box(t & 1023), 1, q, black_box(3))
        })
    });
    g.bench_function("event_at", |b| {
        let mut t = 0u64;
        let q = Istr::EMPTY;
        let ticks = runtrace_core::clock::TraceClock::get().now();
        in_batches(b, || {
            t += 1;
            rt::events::at::task_poll_start(
                black_box(ticks),
                black_box(t & 1023),
                1,
                q,
                black_box(3),
            )
        })
    });
    g.finish();
    let st = guard.finish().expect("finish");
    println!(
        "record/event: {} events recorded, {} dropped ({:.3}%)",
        st.events,
        st.dropped,
        100.0 * st.dropped as f64 / (st.events + st.dropped).max(1) as f64
    );
    let _ = std::fs::remove_dir_all(&dir);
    tokio_polls(c);
    span_costs(c);
    let paired = event_over_tsc();
    bytes_per_event(&paired);
}

/// Rounds of `event_over_tsc`, and events (or clock reads) per batch.
const PAIRED_ROUNDS: usize = 31;

/// The median per-round difference (ns) between an event and a clock read,
/// timed in alternating batches; returns the JSON fields it reports.
fn event_over_tsc() -> String {
    let dir = tempdir("paired");
    let guard = large_recording(&dir);
    // The recorder's own clock read, the floor under every event.
    let clock = runtrace_core::clock::TraceClock::get();
    let per = |t: std::time::Instant| t.elapsed().as_nanos() as f64 / EVENT_BATCH as f64;
    let tsc = || {
        let t0 = std::time::Instant::now();
        for _ in 0..EVENT_BATCH {
            black_box(clock.now());
        }
        per(t0)
    };
    let events = || {
        let t0 = std::time::Instant::now();
        for i in 0..EVENT_BATCH {
            rt::task_poll_start(black_box(i & 1023), 1, Istr::EMPTY, black_box(3));
        }
        per(t0)
    };
    let (mut diffs, mut ev, mut ts) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..PAIRED_ROUNDS {
        // Flip the order each round, so neither side is always first.
        let (e, t) = if round % 2 == 0 {
            let t = tsc();
            (events(), t)
        } else {
            let e = events();
            (e, tsc())
        };
        diffs.push(e - t);
        ev.push(e);
        ts.push(t);
        // Let the writer drain the batch (not timed).
        std::thread::sleep(Duration::from_millis(15));
    }
    let st = guard.finish().expect("finish");
    let _ = std::fs::remove_dir_all(&dir);
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (d, e, t) = (median(&mut diffs), median(&mut ev), median(&mut ts));
    let (lo, hi) = (diffs[PAIRED_ROUNDS / 4], diffs[3 * PAIRED_ROUNDS / 4]);
    println!(
        "record/event_over_tsc: {d:.2} ns median over {PAIRED_ROUNDS} paired rounds (quartiles {lo:.2} .. {hi:.2}; event {e:.2} ns, clock read {t:.2} ns; goal <= 3 ns); {} events recorded, {} dropped",
        st.events, st.dropped
    );
    format!(
        "\"event_over_tsc_ns\": {d:.3}, \"event_ns\": {e:.3}, \"tsc_read_ns\": {t:.3}, \"paired_dropped\": {}",
        st.dropped
    )
}

/// ns per poll of a task that yields in a loop, on a current-thread
/// runtime: stock, instrumented, and instrumented while recording (a
/// recording of its own, so no backlog of the other benches' events keeps
/// the writer busy meanwhile).
fn tokio_polls(c: &mut Criterion) {
    let mut g = c.benchmark_group("tokio_poll");
    g.measurement_time(Duration::from_secs(3));
    for (name, hooks, record) in [
        ("plain", false, false),
        ("idle_hooks", true, false),
        ("recording", true, true),
    ] {
        let mut b = tokio::runtime::Builder::new_current_thread();
        b.enable_all();
        if hooks {
            // tokio's wakes through runtrace's minimal global subscriber,
            // the path `instrument` took by itself before issue 34 (this
            // bench sets no subscriber of its own).
            runtrace_tokio::wakes::install_global();
            runtrace_tokio::instrument(&mut b);
        }
        let rt = b.build().expect("runtime");
        let dir = tempdir("tokio_poll");
        let guard = record.then(|| {
            Recorder::builder()
                .path(dir.join("trace"))
                .buffer_size(32 << 20)
                .max_file_size(256 << 20)
                .max_total_size(512 << 20)
                .start()
                .expect("start recording")
        });
        let mut polls = 0u64;
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                polls += iters;
                rt.block_on(async move {
                    tokio::spawn(async move {
                        let t = std::time::Instant::now();
                        for _ in 0..iters {
                            tokio::task::yield_now().await;
                        }
                        t.elapsed()
                    })
                    .await
                    .expect("the yielding task")
                })
            })
        });
        if let Some(guard) = guard {
            let st = guard.finish().expect("finish");
            println!(
                "tokio_poll/recording: {} events recorded, {} dropped, {:.2} events per poll",
                st.events,
                st.dropped,
                st.events as f64 / polls.max(1) as f64
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    g.finish();
}

/// Span enter+exit costs (see the module docs): a span of this bench's
/// crate (recorded by the layer: `app_spans!`), entered and exited in a
/// loop under each subscriber.
fn span_costs(c: &mut Criterion) {
    use tracing_subscriber::prelude::*;
    let _ = runtrace_tokio::spans::record(runtrace_tokio::app_spans!());
    let plain = tracing::Dispatch::new(tracing_subscriber::registry());
    let traced =
        tracing::Dispatch::new(tracing_subscriber::registry().with(runtrace_tokio::layer()));
    // `n` enters and exits of one span under `d`; ns per pair.
    let run = |d: &tracing::Dispatch, n: u64| -> Duration {
        tracing::dispatcher::with_default(d, || {
            let span = tracing::info_span!("bench_request", route = "/item");
            let t0 = std::time::Instant::now();
            for _ in 0..n {
                let g = span.enter();
                black_box(&g);
                drop(g);
            }
            t0.elapsed()
        })
    };
    let mut g = c.benchmark_group("spans");
    g.measurement_time(Duration::from_secs(3));
    g.bench_function("enter_exit_plain", |b| b.iter_custom(|n| run(&plain, n)));
    g.bench_function("enter_exit_idle", |b| b.iter_custom(|n| run(&traced, n)));
    let dir = tempdir("spans");
    let guard = large_recording(&dir);
    // Two events per iteration: half a batch per timed stretch.
    g.bench_function("enter_exit_recording", |b| {
        b.iter_custom(|iters| {
            let mut timed = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let n = left.min(EVENT_BATCH / 2);
                timed += run(&traced, n);
                left -= n;
                std::thread::sleep(Duration::from_millis(15));
            }
            timed
        })
    });
    g.finish();
    // Side by side: rounds alternate the plain registry and the recording
    // one (order flipped each round); the median of the differences is
    // runtrace's share of an enter+exit.
    let n = EVENT_BATCH / 2;
    let per = |d: Duration| d.as_nanos() as f64 / n as f64;
    let (mut diffs, mut rec, mut pl) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..PAIRED_ROUNDS {
        let (r, p) = if round % 2 == 0 {
            let p = per(run(&plain, n));
            (per(run(&traced, n)), p)
        } else {
            let r = per(run(&traced, n));
            (r, per(run(&plain, n)))
        };
        diffs.push(r - p);
        rec.push(r);
        pl.push(p);
        std::thread::sleep(Duration::from_millis(15));
    }
    let st = guard.finish().expect("finish");
    let _ = std::fs::remove_dir_all(&dir);
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (d, r, p) = (median(&mut diffs), median(&mut rec), median(&mut pl));
    let (lo, hi) = (diffs[PAIRED_ROUNDS / 4], diffs[3 * PAIRED_ROUNDS / 4]);
    println!(
        "spans/enter_exit_over_registry: {d:.1} ns median over {PAIRED_ROUNDS} paired rounds (quartiles {lo:.1} .. {hi:.1}; recording {r:.1} ns, registry alone {p:.1} ns per enter+exit); {} events recorded, {} dropped",
        st.events, st.dropped
    );
}

/// The runtime mix: per task a spawn, polls (start+end) with a wake
/// between them, and a terminate, on two worker threads with many tasks
/// live at once, at the pace of a busy runtime (~150 ns per poll).
fn bytes_per_event(paired: &str) {
    let dir = tempdir("mix");
    let guard = Recorder::builder()
        .path(dir.join("trace"))
        .buffer_size(16 << 20)
        .start()
        .expect("start");
    let hs: Vec<_> = (0..2u32)
        .map(|w| {
            std::thread::spawn(move || {
                let loc = Loc::caller();
                let base = (w as u64) << 40;
                let live = 64u64;
                for round in 0..20_000u64 {
                    let first = base + round * live;
                    for k in 0..live {
                        rt::task_spawn(first + k, 0, loc, Istr::EMPTY);
                    }
                    for poll in 0..5 {
                        for k in 0..live {
                            let id = first + (k * 7) % live;
                            rt::task_poll_start(id, w, Istr::EMPTY, (live - k) as u32);
                            let t = std::time::Instant::now();
                            while t.elapsed() < Duration::from_nanos(100) {}
                            rt::task_poll_end(id, w, poll == 4);
                            if poll < 4 {
                                rt::task_wake(id, id, w);
                            } else {
                                rt::task_terminate(id);
                            }
                        }
                    }
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    let st = guard.finish().expect("finish");
    let bpe = st.bytes as f64 / st.events as f64;
    println!(
        "record/bytes_per_event (runtime mix): {bpe:.2} bytes/event over {} events, {} bytes, {} dropped",
        st.events, st.bytes, st.dropped
    );
    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-results");
    let _ = std::fs::create_dir_all(&out);
    let json = format!(
        "{{\"bytes_per_event\": {bpe:.3}, \"events\": {}, \"bytes\": {}, \"dropped\": {}, {paired}}}\n",
        st.events, st.bytes, st.dropped
    );
    let _ = std::fs::write(out.join("record.json"), json);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A recording that samples allocations every `mean` bytes on average
/// (`live`: with the live set), writing little else.
#[cfg(feature = "alloc")]
fn alloc_recording(
    dir: &std::path::Path,
    mean: u64,
    live: bool,
) -> runtrace_recorder::RecordingGuard {
    Recorder::builder()
        .path(dir.join("trace"))
        .buffer_size(4 << 20)
        .flush_interval(Duration::from_millis(5))
        .memory_profile(mean)
        .memory_live(live)
        .start()
        .expect("start recording")
}

/// `n` allocations of `layout` through `a`, each freed at once.
#[cfg(feature = "alloc")]
#[inline(never)]
fn alloc_free_pairs<A: std::alloc::GlobalAlloc>(
    a: &A,
    n: u64,
    layout: std::alloc::Layout,
) -> Duration {
    let t0 = std::time::Instant::now();
    for _ in 0..n {
        // SAFETY: `layout` has a non-zero size; the pointer is freed once,
        // with the layout it was allocated with, and only when non-null.
        unsafe {
            let p = a.alloc(layout);
            black_box(p);
            if !p.is_null() {
                a.dealloc(p, layout);
            }
        }
    }
    t0.elapsed()
}

/// The `alloc/*` figures (module docs): per case, [`PAIRED_ROUNDS`]
/// rounds alternating `System` and the wrapper (order flipped each round),
/// the median and quartiles of the per-pair differences. A sampled batch
/// holds 256 pairs (the sample queue holds 1024 records) and the writer
/// gets 15 ms (untimed) to drain it before the next.
#[cfg(feature = "alloc")]
fn alloc_paths() {
    use std::alloc::{Layout, System};
    static WRAPPED: runtrace::alloc::Sampled<System> = runtrace::alloc::Sampled::new(System);
    let layout = Layout::from_size_align(64, 8).expect("layout");
    let dir = tempdir("alloc");
    // (name, recording: (mean bytes, live set), pairs per round)
    type Case = (&'static str, Option<(u64, bool)>, u64);
    let cases: [Case; 5] = [
        ("disabled (no recording samples)", None, 200_000),
        (
            "unsampled (sampling at 512 KiB)",
            Some((512 * 1024, false)),
            200_000,
        ),
        (
            "unsampled, live set on (each free looked up)",
            Some((512 * 1024, true)),
            200_000,
        ),
        ("sampled (every allocation)", Some((1, false)), 256),
        (
            "sampled, live set on (the sample and its free)",
            Some((1, true)),
            256,
        ),
    ];
    for (name, rec, n) in cases {
        let guard = rec.map(|(mean, live)| alloc_recording(&dir, mean, live));
        let sampled = rec.is_some_and(|r| r.0 == 1);
        let per = |d: Duration| d.as_nanos() as f64 / n as f64;
        // Warm up; when sampling every byte, first run out the countdown
        // this thread drew at the previous case's rate (docs/memory.md,
        // Limits) with one 64 MiB allocation (sampled itself).
        if sampled {
            let big = Layout::from_size_align(64 << 20, 8).expect("layout");
            alloc_free_pairs(&WRAPPED, 1, big);
        }
        for _ in 0..8 {
            alloc_free_pairs(&WRAPPED, n, layout);
            if sampled {
                std::thread::sleep(Duration::from_millis(15));
            }
        }
        let (mut diffs, mut wrapped, mut plain) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..PAIRED_ROUNDS {
            let (w, p) = if round % 2 == 0 {
                let p = per(alloc_free_pairs(&System, n, layout));
                (per(alloc_free_pairs(&WRAPPED, n, layout)), p)
            } else {
                let w = per(alloc_free_pairs(&WRAPPED, n, layout));
                (w, per(alloc_free_pairs(&System, n, layout)))
            };
            diffs.push(w - p);
            wrapped.push(w);
            plain.push(p);
            if sampled {
                std::thread::sleep(Duration::from_millis(15));
            }
        }
        let recorded = guard.map(|g| g.finish().expect("finish"));
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let (d, w, p) = (median(&mut diffs), median(&mut wrapped), median(&mut plain));
        let (lo, hi) = (diffs[PAIRED_ROUNDS / 4], diffs[3 * PAIRED_ROUNDS / 4]);
        let events = recorded.map_or(String::new(), |st| {
            format!("; {} events recorded, {} dropped", st.events, st.dropped)
        });
        println!(
            "alloc/{name}: +{d:.1} ns per 64 B allocation and free over System, median over {PAIRED_ROUNDS} paired rounds (quartiles {lo:.1} .. {hi:.1}; wrapped {w:.1} ns, System {p:.1} ns){events}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The allocation paths, and what the rest of the bench does.
fn bench_all(c: &mut Criterion) {
    // Not under `cargo test --benches` (no `--bench`: criterion's test
    // mode runs each benchmark once).
    #[cfg(feature = "alloc")]
    if std::env::args().any(|a| a == "--bench") {
        alloc_paths();
    }
    bench(c);
}

criterion_group!(benches, bench_all);
criterion_main!(benches);
