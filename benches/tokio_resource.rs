//! Cost per operation on a tokio `sync` resource (issue 36 item 1): what
//! recording tokio's async resources through `runtrace::tokio::layer()`
//! adds to an uncontended `Mutex::lock().await` + unlock and a
//! `Semaphore::acquire().await` + release, in a plain `tokio::spawn` task
//! on a current-thread runtime:
//! - `plain`: no tracing subscriber was ever installed (tokio's resource
//!   and async-op callsites are disabled);
//! - `layer_idle`: the application's registry with runtrace's layer
//!   installed, nothing recording;
//! - `layer_recording`: recording (a `resource_poll` per operation's poll,
//!   a `resource_release` per unlock).
//!
//! Each resource is created under the mode it is measured in (tokio
//! makes its resource span at `new`). Run: `cargo bench --bench
//! tokio_resource`; docs/analysis.md quotes it.

use criterion::{criterion_group, criterion_main, Criterion};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing_subscriber::prelude::*;

/// Time of `iters` lock + unlock of a fresh Mutex in one task.
fn mutex_ops(rt: &tokio::runtime::Runtime, iters: u64) -> Duration {
    rt.block_on(async move {
        tokio::spawn(async move {
            let m = Arc::new(tokio::sync::Mutex::new(0u64));
            let t = Instant::now();
            for _ in 0..iters {
                let mut g = m.lock().await;
                *g += 1;
            }
            t.elapsed()
        })
        .await
        .unwrap()
    })
}

/// Time of `iters` acquire + release of a fresh 4-permit Semaphore.
fn semaphore_ops(rt: &tokio::runtime::Runtime, iters: u64) -> Duration {
    rt.block_on(async move {
        tokio::spawn(async move {
            let s = tokio::sync::Semaphore::new(4);
            let t = Instant::now();
            for _ in 0..iters {
                let p = s.acquire().await.unwrap();
                std::hint::black_box(&p);
            }
            t.elapsed()
        })
        .await
        .unwrap()
    })
}

fn modes(c: &mut Criterion, mode: &str, rt: &tokio::runtime::Runtime) {
    let mut g = c.benchmark_group("tokio_resource");
    g.measurement_time(Duration::from_secs(3));
    g.bench_function(format!("mutex/{mode}"), |b| {
        b.iter_custom(|n| mutex_ops(rt, n))
    });
    g.bench_function(format!("semaphore/{mode}"), |b| {
        b.iter_custom(|n| semaphore_ops(rt, n))
    });
    g.finish();
}

fn bench(c: &mut Criterion) {
    // First: no subscriber was ever installed in this process.
    let plain = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    modes(c, "plain", &plain);
    tracing_subscriber::registry()
        .with(runtrace_tokio::layer())
        .init();
    let rt = runtrace_tokio::instrument(&mut tokio::runtime::Builder::new_current_thread())
        .build()
        .unwrap();
    modes(c, "layer_idle", &rt);
    let dir = std::env::temp_dir().join(format!("runtrace-bench-res-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let rec = runtrace_recorder::Recorder::builder()
        .path(dir.join("trace"))
        .start()
        .unwrap();
    modes(c, "layer_recording", &rt);
    let st = rec.finish().unwrap();
    println!("recorded {} events, {} dropped", st.events, st.dropped);
    let files: Vec<_> = std::fs::read_dir(&dir)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    // The recording really holds the resource events it is charged for.
    let report = runtrace_format::check::check_files(&files);
    for kind in ["ResourceNew", "ResourcePoll", "ResourceRelease"] {
        let n = report.event_counts.get(kind).copied().unwrap_or(0);
        println!("{kind}: {n}");
        assert!(
            n > 0,
            "no {kind} recorded: the layer did not see the resources"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, bench);
criterion_main!(benches);
