//! A service under `#[runtrace::main]`: the one-line way to record a tokio
//! application (docs/recorder.md, "Instrumenting an existing application").
//!
//! ```text
//! RUNTRACE_PATH=traces/service cargo run --example service --features tokio,record
//! # ... Ctrl-C, or `kill PID` (SIGTERM) ...
//! runtrace check traces/service
//! ```
//!
//! It records only while `RUNTRACE_PATH` is set (the same binary runs
//! unrecorded otherwise), logs through its own `tracing_subscriber`
//! registry with runtrace's layer beside the `fmt` layer (its log lines
//! still reach stdout, and runtrace records the wakes of its plain
//! `tokio::spawn` tasks), and serves until it is stopped: SIGTERM or
//! SIGINT seal the recording before the process ends, as a return from
//! `main` does. With an argument N it stops by itself after N ms.

use std::time::Duration;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::prelude::*;

#[runtrace::main(worker_threads = 2)]
async fn main() {
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_filter(LevelFilter::INFO),
        )
        .with(runtrace::tokio::layer())
        .init();
    let stop_after = std::env::args().nth(1).and_then(|a| a.parse().ok());
    tracing::info!("serving");
    let started = std::time::Instant::now();
    loop {
        // "Requests": a handler task per tick, woken by a timer and by
        // the task that feeds it.
        let (tx, rx) = tokio::sync::oneshot::channel::<u64>();
        let handler = tokio::spawn(async move {
            let n = rx.await.unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(1)).await;
            n * 2
        });
        tokio::spawn(async move {
            let _ = tx.send(21);
        });
        let _ = handler.await;
        tokio::time::sleep(Duration::from_millis(5)).await;
        if stop_after.is_some_and(|ms: u64| started.elapsed() >= Duration::from_millis(ms)) {
            tracing::info!("done");
            return;
        }
    }
}
