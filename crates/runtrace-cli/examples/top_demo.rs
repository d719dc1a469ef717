//! A small service recorded while `runtrace top` watches it (the live
//! tests and the CPU measurement of docs/top.md).
//!
//! ```text
//! cargo run --release -p runtrace-cli --example top_demo -- --out DIR \
//!     [--seconds S] [--block-after S] [--tasks-per-ms N] [--max-file-size BYTES]
//! ```
//!
//! A 2-worker instrumented tokio runtime spawns `--tasks-per-ms` short
//! requests every millisecond (`handle_request`: a few µs of work around a
//! 1 ms timer) and a periodic `refresh_cache` task. From `--block-after`
//! seconds on, it also spawns `blocking_audit_log` every 300 ms: a
//! `std::thread::sleep` of 150 ms inside a poll, the planted blocking
//! call (its spawn is the line marked PLANTED). Records to `DIR/trace.N.bin`
//! (rotating at `--max-file-size`, 4 MiB by default, keeping 64 MiB) until
//! `--seconds` pass (default: until killed).

use runtrace_recorder::Recorder;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

fn usage() -> ExitCode {
    eprintln!(
        "usage: top_demo --out DIR [--seconds S] [--block-after S] [--tasks-per-ms N] [--max-file-size BYTES]"
    );
    ExitCode::from(2)
}

fn spin(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

async fn handle_request(i: u64) -> u64 {
    spin(Duration::from_micros(2));
    tokio::time::sleep(Duration::from_millis(1)).await;
    spin(Duration::from_micros(2));
    i
}

async fn refresh_cache() {
    loop {
        spin(Duration::from_micros(200));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn blocking_audit_log() {
    // The planted problem: a blocking call inside a poll.
    std::thread::sleep(Duration::from_millis(150));
    tokio::task::yield_now().await;
}

fn main() -> ExitCode {
    run(std::env::args().skip(1).collect())
}

/// The service, with the command line's arguments (tests/top.rs runs it
/// from its own test binary).
pub fn run(argv: Vec<String>) -> ExitCode {
    let (mut out, mut seconds, mut block_after, mut per_ms, mut file_size) = (
        None::<PathBuf>,
        f64::INFINITY,
        f64::INFINITY,
        2u64,
        4u64 << 20,
    );
    let mut args = argv.into_iter();
    while let Some(a) = args.next() {
        let v = args.next();
        let num = || v.as_deref().and_then(|v| v.parse::<f64>().ok());
        match (a.as_str(), num()) {
            ("--out", _) if v.is_some() => out = v.map(PathBuf::from),
            ("--seconds", Some(s)) if s > 0.0 => seconds = s,
            ("--block-after", Some(s)) if s >= 0.0 => block_after = s,
            ("--tasks-per-ms", Some(n)) if n >= 0.0 => per_ms = n as u64,
            ("--max-file-size", Some(n)) if n >= 4096.0 => file_size = n as u64,
            _ => return usage(),
        }
    }
    let Some(out) = out else { return usage() };
    if let Err(e) = std::fs::create_dir_all(&out) {
        eprintln!("cannot create {}: {e}", out.display());
        return ExitCode::FAILURE;
    }
    let guard = match Recorder::builder()
        .path(out.join("trace"))
        .max_file_size(file_size)
        .max_total_size(64 << 20)
        .start()
    {
        Ok(g) => g,
        Err(e) => {
            eprintln!("cannot start recording: {e}");
            return ExitCode::FAILURE;
        }
    };
    let rt = runtrace_tokio::instrument(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all(),
    )
    .build()
    .expect("tokio runtime");
    rt.block_on(async move {
        let start = Instant::now();
        tokio::spawn(refresh_cache());
        let mut tick = tokio::time::interval(Duration::from_millis(1));
        let mut next_block = Duration::from_secs_f64(block_after.min(1e9));
        let mut i = 0u64;
        let mut announced = false;
        eprintln!("top_demo: recording to {}", out.display());
        while start.elapsed().as_secs_f64() < seconds {
            tick.tick().await;
            for _ in 0..per_ms {
                i += 1;
                tokio::spawn(handle_request(i));
            }
            if start.elapsed() >= next_block {
                if !announced {
                    announced = true;
                    eprintln!("top_demo: blocking from now");
                }
                tokio::spawn(blocking_audit_log()); // PLANTED
                next_block += Duration::from_millis(300);
            }
        }
    });
    drop(rt);
    match guard.finish() {
        Ok(s) => {
            eprintln!(
                "top_demo: {} events, {} dropped, {} files",
                s.events, s.dropped, s.files
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("recording failed: {e}");
            ExitCode::FAILURE
        }
    }
}
