//! Cost per wake of a plain `tokio::spawn` task (issue 12): the task wakes
//! itself with `wake_by_ref` in a loop (an atomic flag update in tokio),
//! on a current-thread runtime:
//! - `tokio_wake/plain`: before any `runtrace_tokio::instrument` (no
//!   tracing subscriber: tokio's waker callsite is disabled);
//! - `tokio_wake/idle`: after `instrument` and
//!   `runtrace_tokio::wakes::install_global()` (runtrace's `TaskWakes` as
//!   the global subscriber, the path `instrument` took by itself before
//!   issue 34), nothing recording;
//! - `tokio_wake/recording`: recording, one WakeEvent per wake.
//!
//! Run: `cargo bench --bench tokio_wake`.

use criterion::{criterion_group, criterion_main, Criterion};
use std::future::poll_fn;
use std::task::Poll;
use std::time::{Duration, Instant};

/// ns of `iters` self-wakes inside one poll of a fresh plain task.
fn wakes(rt: &tokio::runtime::Runtime, iters: u64) -> Duration {
    rt.block_on(async move {
        tokio::spawn(poll_fn(move |cx| {
            let t = Instant::now();
            for _ in 0..iters {
                cx.waker().wake_by_ref();
            }
            Poll::Ready(t.elapsed())
        }))
        .await
        .unwrap()
    })
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("tokio_wake");
    g.measurement_time(Duration::from_secs(3));
    // First: no subscriber was ever installed in this process.
    let plain = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    g.bench_function("plain", |b| b.iter_custom(|n| wakes(&plain, n)));
    assert!(runtrace_tokio::wakes::install_global());
    let rt = runtrace_tokio::instrument(&mut tokio::runtime::Builder::new_current_thread())
        .build()
        .unwrap();
    g.bench_function("idle", |b| b.iter_custom(|n| wakes(&rt, n)));
    let dir = std::env::temp_dir().join(format!("runtrace-bench-wake-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let rec = runtrace_recorder::Recorder::builder()
        .path(dir.join("trace"))
        .start()
        .unwrap();
    g.bench_function("recording", |b| b.iter_custom(|n| wakes(&rt, n)));
    g.finish();
    let st = rec.finish().unwrap();
    println!("recorded {} events, {} dropped", st.events, st.dropped);
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, bench);
criterion_main!(benches);
