//! The main job: a service-like workload, recorded and diagnosed.
//!
//! ```text
//! cargo run --release --example quickstart -- --out DIR [--seconds S]
//! ```
//!
//! An instrumented tokio multi-thread runtime (2 workers) serves "requests"
//! (short polls around timer waits), next to a runtrace executor on its own
//! thread with a `latency` (FIFO, share 8) and a `batch` (LAS, share 1)
//! queue. Four problems are built in, at known spawn locations:
//! - `cpu_heavy_report`: CPU-bound polls of ~2-12 ms;
//! - `blocking_audit_log`: a `std::thread::sleep` inside a poll, which
//!   stalls a tokio worker for 60 ms;
//! - `fan_out_refresh`: one task spawning 300 children at once, which pile
//!   up in its worker's local queue;
//! - `refresh_config`: holds the config's `tokio::sync::Mutex` across a
//!   30 ms "backend call" every 100 ms, while one request in ten needs
//!   the lock (a waiting problem: every poll is short, no worker is
//!   busy, yet those requests wait up to 30 ms).
//!
//! Everything is recorded to `DIR/trace.N.bin`; then the program prints
//! what `runtrace check` says and the `runtrace analyze` report, whose
//! findings should name those four locations, and writes
//! `DIR/trace.pftrace` (a Perfetto timeline) and `DIR/report.html` (the
//! HTML report) and prints their paths. Every event also goes
//! through `runtrace::probe!`, so the same binary built with `--features
//! usdt,perf-probe,lttng` feeds perf, bpftrace and LTTng.

use runtrace_executor::{Executor, QueueConfig};
use runtrace_recorder::Recorder;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `println!` that ignores a reader gone early (`| head`): the recording
/// and its files are what matter, and `println!` would panic there.
macro_rules! say {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($t)*);
    }};
}

fn usage() -> ExitCode {
    eprintln!("usage: quickstart --out DIR [--seconds S]   (S: 0.1 to 60, default 3)");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut out: Option<PathBuf> = None;
    let mut seconds = 3.0f64;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--out" => match args.next() {
                Some(v) => out = Some(v.into()),
                None => return usage(),
            },
            "--seconds" => match args.next().and_then(|v| v.parse().ok()) {
                Some(s) if (0.1..=60.0).contains(&s) => seconds = s,
                _ => {
                    eprintln!("--seconds: expected a number from 0.1 to 60");
                    return usage();
                }
            },
            "-h" | "--help" => return usage(),
            other => {
                eprintln!("unknown argument {other:?}");
                return usage();
            }
        }
    }
    let Some(out) = out else { return usage() };
    if let Err(e) = std::fs::create_dir_all(&out) {
        eprintln!("cannot create {}: {e}", out.display());
        return ExitCode::FAILURE;
    }
    // Leftovers from an earlier run would be mixed into the analysis.
    for f in trace_files(&out) {
        let _ = std::fs::remove_file(f);
    }

    let guard = match recorder().path(out.join("trace")).start() {
        Ok(g) => g,
        Err(e) => {
            eprintln!("cannot start recording: {e}");
            return ExitCode::FAILURE;
        }
    };
    let started = Instant::now();
    let run_for = Duration::from_secs_f64(seconds);

    // The runtrace executor, thread-per-core style, on its own thread.
    let stop = Arc::new(AtomicBool::new(false));
    let ex_stop = stop.clone();
    let ex_thread = std::thread::Builder::new()
        .name("quickstart-executor".into())
        .spawn(move || executor_workload(ex_stop))
        .expect("spawn executor thread");

    // Who woke whom, for plain `tokio::spawn` tasks too: runtrace's layer
    // in the program's tracing subscriber (an application with logging
    // adds it beside its `fmt` layer; docs/recorder.md).
    {
        use tracing_subscriber::prelude::*;
        tracing_subscriber::registry()
            .with(runtrace_tokio::layer())
            .init();
    }
    let rt = runtrace_tokio::instrument(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all(),
    )
    .build()
    .expect("tokio runtime");
    rt.block_on(tokio_workload(run_for));
    // With `--features taskdump` and QUICKSTART_TASK_DUMP set: where the
    // tasks still pending sit (the await points `runtrace analyze` names
    // for stuck and leaked tasks). Off by default: tokio 1.54's dump of a
    // multi-thread runtime can hang it (docs/analysis.md, "Where a task
    // waits").
    #[cfg(feature = "taskdump")]
    if std::env::var_os("QUICKSTART_TASK_DUMP").is_some() {
        if let Err(e) = rt.block_on(runtrace_tokio::dump()) {
            eprintln!("task dump: {e}");
        }
    }
    drop(rt);
    stop.store(true, Ordering::Relaxed);
    ex_thread.join().expect("executor thread");

    let stats = match guard.finish() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("recording failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    let files = trace_files(&out);
    say!(
        "recorded {} events ({} dropped) in {:.2} s into {} file(s) under {}\n",
        stats.events,
        stats.dropped,
        started.elapsed().as_secs_f64(),
        stats.files,
        out.display()
    );
    let report = runtrace::format::check::check_files(&files);
    say!("$ runtrace check {}/trace.*.bin\n{report}\n", out.display());
    say!("$ runtrace analyze {}/trace.*.bin", out.display());
    let analysis = analyze_with_functions(&files);
    say!("{}", analysis.to_string().trim_end());
    let mut analyzed = !analysis.is_damaged();
    // The same trace to look at: a Perfetto timeline and the HTML report.
    let pftrace = out.join("trace.pftrace");
    match runtrace_export::perfetto::convert(&files, &pftrace) {
        Ok(c) => analyzed &= c.errors.is_empty(),
        Err(e) => {
            eprintln!("{e}");
            analyzed = false;
        }
    }
    let html = out.join("report.html");
    if let Err(e) = runtrace_export::report::write(&files, &html) {
        eprintln!("{e}");
        analyzed = false;
    }
    say!(
        "\ntimeline (open in https://ui.perfetto.dev): {}\nreport (open in a browser):        {}",
        pftrace.display(),
        html.display()
    );
    if report.is_clean() && analyzed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn trace_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.retain(|p| {
        let n = p.file_name().unwrap_or_default().to_string_lossy();
        n.starts_with("trace.") && (n.ends_with(".bin") || n.ends_with(".bin.active"))
    });
    runtrace::format::merge::sort_trace_paths(&mut v);
    v
}

fn spin(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// A small xorshift, so the workload is the same on every run.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

async fn handle_request(i: u64, config: Arc<tokio::sync::Mutex<u64>>) -> u64 {
    // Parse, wait on a "backend" (a timer), answer: short polls.
    spin(Duration::from_micros(20));
    tokio::time::sleep(Duration::from_micros(300 + i % 700)).await;
    if i.is_multiple_of(10) {
        // One request in ten reads the config (a short critical section).
        let v = *config.lock().await;
        std::hint::black_box(v);
    }
    spin(Duration::from_micros(30));
    i
}

async fn refresh_config(config: Arc<tokio::sync::Mutex<u64>>, run_for: Duration) {
    // Problem 4: the lock held across an await. Every 100 ms the refresher
    // takes the config's lock, then awaits a 30 ms "backend call" with it
    // held; the requests that need the config wait meanwhile.
    let start = Instant::now();
    while start.elapsed() < run_for {
        {
            let mut c = config.lock().await;
            tokio::time::sleep(Duration::from_millis(30)).await;
            *c += 1;
        }
        tokio::time::sleep(Duration::from_millis(70)).await;
    }
}

async fn cpu_heavy_report(rng: u64) {
    // Problem 1: CPU-bound work in polls (2-12 ms each, 3 polls).
    for k in 0..3 {
        checksum_report(Duration::from_millis(2 + (rng >> (k * 4)) % 11));
        tokio::task::yield_now().await;
    }
}

async fn blocking_audit_log() {
    // Problem 2: blocking I/O inside a poll stalls the worker.
    let _ = write_audit_log_sync(Duration::from_millis(60));
}

async fn fan_out_refresh() {
    // Problem 3: a burst of children spawned from one worker stays in that
    // worker's local queue.
    let hs: Vec<_> = (0..300u64)
        .map(|i| {
            runtrace_tokio::spawn(async move {
                spin(Duration::from_micros(150));
                tokio::task::yield_now().await;
                i
            })
        })
        .collect();
    for h in hs {
        let _ = h.await;
    }
}

async fn tokio_workload(run_for: Duration) {
    let start = Instant::now();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut tick = tokio::time::interval(Duration::from_micros(500));
    let mut n = 0u64;
    let mut handlers = Vec::new();
    let config = Arc::new(tokio::sync::Mutex::new(0u64));
    let refresher = tokio::spawn(refresh_config(config.clone(), run_for));
    while start.elapsed() < run_for {
        tick.tick().await;
        n += 1;
        handlers.push(runtrace_tokio::spawn(handle_request(n, config.clone())));
        if n.is_multiple_of(40) {
            let r = rng.next();
            tokio::spawn(cpu_heavy_report(r));
        }
        if n.is_multiple_of(500) {
            tokio::spawn(blocking_audit_log());
        }
        if n % 700 == 350 {
            tokio::spawn(fan_out_refresh());
        }
        if handlers.len() >= 256 {
            for h in handlers.drain(..) {
                let _ = h.await;
            }
        }
    }
    for h in handlers {
        let _ = h.await;
    }
    let _ = refresher.await;
    // Let the last reports and refreshes finish.
    tokio::time::sleep(Duration::from_millis(100)).await;
}

fn executor_workload(stop: Arc<AtomicBool>) {
    let ex = Executor::builder()
        .queue("latency", QueueConfig::fifo().share(8))
        .queue("batch", QueueConfig::las().share(1))
        .build()
        .expect("executor configuration");
    let e = ex.clone();
    ex.block_on(async move {
        let mut n = 0u64;
        while !stop.load(Ordering::Relaxed) {
            n += 1;
            // Latency-sensitive requests and background batch jobs.
            e.spawn(async move {
                tokio::time::sleep(Duration::from_micros(200)).await;
                spin(Duration::from_micros(40));
                n
            });
            if n.is_multiple_of(10) {
                let _ = e.spawn_on("batch", async move {
                    for _ in 0..4 {
                        spin(Duration::from_micros(300));
                        tokio::task::yield_now().await;
                    }
                });
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        e.shutdown_drain().await;
    });
}

/// The recorder, with CPU profiling at 99 Hz (`RUNTRACE_CPU_HZ` overrides
/// it; 0 turns it off), so the report can name the functions of its
/// planted problems.
fn recorder() -> runtrace_recorder::RecorderBuilder {
    Recorder::builder().cpu_profile(99)
}

/// `runtrace analyze`'s report, with the findings' `functions` filled
/// from the recording's CPU samples.
fn analyze_with_functions(files: &[PathBuf]) -> runtrace_analyze::Report {
    let (mut report, profile) = runtrace_analyze::runtime::analyze_files_profiled(
        files,
        runtrace_analyze::Options::default(),
    );
    if !profile.samples.is_empty() {
        let mut names = runtrace_analyze::functions::StackNames::recorded(&profile);
        report.add_functions(&profile, &mut names);
        for p in names.problems() {
            eprintln!("symbols: {p}");
        }
    }
    report
}

/// Problem 1's work: a CPU-bound checksum over a report buffer (what a
/// serializer or a hash would cost), for about `d`.
#[inline(never)]
fn checksum_report(d: Duration) -> u64 {
    let t = Instant::now();
    let buf: Vec<u8> = (0..16 * 1024u32).map(|i| (i * 31) as u8).collect();
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    while t.elapsed() < d {
        for &b in &buf {
            h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
        h = std::hint::black_box(h);
    }
    h
}

/// Problem 2's work: a synchronous write that blocks the calling thread
/// (a sleep stands in for a slow disk). It returns the bytes "written",
/// so the sleep is not a tail call and this function stays on the stack
/// the profiler records at the switch-out.
#[inline(never)]
fn write_audit_log_sync(d: Duration) -> usize {
    std::thread::sleep(d);
    std::hint::black_box(512)
}
