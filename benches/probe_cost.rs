//! Cost of a probe site per backend when nothing is attached, and of the
//! record backend while recording (issue 3 targets on the 2-core reference
//! machine: usdt <= 1 ns, perf-probe <= 2 ns, lttng without a session
//! <= 2 ns).
//!
//! Run: `cargo bench --bench probe_cost --features usdt,perf-probe,lttng`
//! (lttng is optional: without it that line is left out).
//!
//! Attached costs (a uprobe hit, an LTTng event with a session) are
//! measured with `examples/probe_loop.rs` under the tool; see
//! docs/probes.md.

mod common;
use common::Recording;
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use runtrace::__probes::task_poll_end as ev;
use std::time::Duration;

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("probe_site");
    g.measurement_time(Duration::from_secs(3));
    let args = |t: u64| ev::Args {
        task_id: t,
        worker: 1,
        ready: false,
    };

    g.bench_function("empty_loop", |b| b.iter(|| black_box(7u64)));
    g.bench_function("usdt", |b| {
        let mut t = 0u64;
        b.iter(|| {
            t += 1;
            if ev::usdt_on() {
                ev::fire(args(black_box(t)))
            }
        })
    });
    g.bench_function("perf_probe", |b| {
        let mut t = 0u64;
        b.iter(|| {
            t += 1;
            if ev::perf_on() {
                ev::fire(args(black_box(t)))
            }
        })
    });
    #[cfg(feature = "lttng")]
    g.bench_function("lttng", |b| {
        let mut t = 0u64;
        b.iter(|| {
            t += 1;
            if ev::lttng_on() {
                ev::fire(args(black_box(t)))
            }
        })
    });
    // Every compiled backend's check at once, none attached, not recording.
    g.bench_function("all_backends_idle", |b| {
        let mut t = 0u64;
        b.iter(|| {
            t += 1;
            runtrace::probe!(task_poll_end {
                task_id: black_box(t),
                worker: 1,
                ready: false
            })
        })
    });

    let rec = Recording::start("probe", |b| {
        b.buffer_size(32 << 20)
            .max_file_size(256 << 20)
            .max_total_size(512 << 20)
            .flush_interval(Duration::from_millis(5))
    });
    g.bench_function("record_while_recording", |b| {
        let mut t = 0u64;
        b.iter(|| {
            t += 1;
            runtrace::probe!(task_poll_end {
                task_id: black_box(t & 1023),
                worker: 1,
                ready: false
            })
        })
    });
    g.finish();
    let st = rec.finish();
    println!(
        "record_while_recording: {} recorded, {} dropped",
        st.events, st.dropped
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
