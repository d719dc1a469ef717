//! Analysis throughput: `runtrace analyze` on a generated trace of at
//! least 10M events (a healthy runtime mix: spawn, poll start/end, wake,
//! terminate on 4 workers, ROUND frames every ms of trace time),
//! written to a temporary file with `runtrace_format`'s frame API
//! (`runtrace_model::synth::workload`). Reports events per second on
//! one core (the analysis is single-threaded) and writes the figures to
//! `target/bench-results/analyze.json`. Target: >= 20M events/s.
//!
//! Then `runtrace analyze --all` on the same trace: every applicable
//! analysis of the registry (summary, the runtime report, outliers, ...)
//! over one read of the file, and its JSON answer; median wall seconds
//! (`all` in the JSON). Target: under 2 s for 10M events on the 2-core
//! reference machine.
//!
//! Then the same for `runtrace backlog` on a generated application trace
//! of about as many events (queue, lock and processing events; figures in
//! the JSON's `backlog`).
//!
//! Run: `cargo bench --bench analyze` (`-- --events N` for another size,
//! `-- --only analyze|all|backlog` for one part, as when profiling it; the
//! JSON is written only when every part ran).

use runtrace_analyze::{analyze_files, Options};
use runtrace_model::synth::{workload, Workload};
use std::time::Instant;

/// CPU time of the calling thread, in seconds: the machine may be shared,
/// and events per CPU-second is what "on one core" means.
fn thread_cpu_secs() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the
    // call; CLOCK_THREAD_CPUTIME_ID is supported on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return f64::NAN;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn main() {
    let mut events = 10_000_000u64;
    let mut runs = 3;
    let mut only: Option<String> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--events" => events = args.next().and_then(|v| v.parse().ok()).unwrap_or(events),
            "--runs" => runs = args.next().and_then(|v| v.parse().ok()).unwrap_or(runs),
            "--only" => only = args.next(),
            _ => {} // `cargo bench` passes --bench
        }
    }
    let t = Instant::now();
    let (bytes, n) = workload(&Workload {
        events,
        ..Workload::default()
    });
    let dir = std::env::temp_dir().join(format!("runtrace-bench-analyze-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("trace.0.bin");
    std::fs::write(&path, &bytes).expect("write trace");
    println!(
        "analyze: generated {n} events, {} bytes ({:.2} bytes/event) in {:.2} s",
        bytes.len(),
        bytes.len() as f64 / n as f64,
        t.elapsed().as_secs_f64()
    );
    drop(bytes);
    let part = |name: &str| only.as_deref().is_none_or(|o| o == name);
    let (mut best, mut best_cpu) = (f64::MAX, f64::MAX);
    for run in (0..runs).filter(|_| part("analyze")) {
        let t = Instant::now();
        let c = thread_cpu_secs();
        let report = analyze_files(std::slice::from_ref(&path), Options::default());
        let cpu = thread_cpu_secs() - c;
        let s = t.elapsed().as_secs_f64();
        assert_eq!(report.events, n, "every event analysed");
        assert!(!report.damaged, "{:?}", report.errors);
        assert!(report.findings.is_empty(), "healthy: {:?}", report.findings);
        println!(
            "analyze: run {run}: {n} events in {s:.3} s wall ({:.1} M events/s), {cpu:.3} s CPU ({:.1} M events per CPU-second)",
            n as f64 / s / 1e6,
            n as f64 / cpu / 1e6
        );
        best = best.min(s);
        best_cpu = best_cpu.min(cpu);
    }
    let rate = n as f64 / best;
    let cpu_rate = n as f64 / best_cpu;
    if part("analyze") {
        println!(
            "analyze: best {:.1} M events/s wall, {:.1} M events per CPU-second (target >= 20)",
            rate / 1e6,
            cpu_rate / 1e6
        );
    }
    let (all, all_cpu) = if part("all") {
        analyze_all(&path, n, runs)
    } else {
        (f64::NAN, f64::NAN)
    };
    let _ = std::fs::remove_file(&path);
    if !part("backlog") {
        let _ = std::fs::remove_dir_all(&dir);
        return;
    }
    let (bl_n, bl_best, bl_cpu) = backlog(&path, events, runs);
    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-results");
    if only.is_none() && std::fs::create_dir_all(&out).is_ok() {
        let _ = std::fs::write(
            out.join("analyze.json"),
            format!(
                "{{\"events\": {n}, \"best_seconds\": {best:.4}, \"events_per_sec\": {rate:.0}, \"best_cpu_seconds\": {best_cpu:.4}, \"events_per_cpu_sec\": {cpu_rate:.0}, \"all\": {{\"median_seconds\": {all:.4}, \"median_cpu_seconds\": {all_cpu:.4}}}, \"backlog\": {{\"events\": {bl_n}, \"best_seconds\": {bl_best:.4}, \"events_per_sec\": {:.0}, \"events_per_cpu_sec\": {:.0}}}}}\n",
                bl_n as f64 / bl_best,
                bl_n as f64 / bl_cpu
            ),
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `runtrace analyze --all` on `path` (`n` events): one read, every
/// applicable analysis, the JSON answer. Returns the median wall and CPU
/// seconds (CPU: the analysis is one thread, so on a shared machine its
/// CPU time is what a quiet one would take in wall time).
fn analyze_all(path: &std::path::Path, n: u64, runs: usize) -> (f64, f64) {
    use runtrace_analyze::registry::run_all;
    use runtrace_analyze::reports::{OneRead, Reports};
    let (mut times, mut cpus) = (Vec::new(), Vec::new());
    for run in 0..runs {
        let t = Instant::now();
        let c = thread_cpu_secs();
        let r = OneRead::read(&[path], None);
        let text = run_all(&r).to_string();
        let cpu = thread_cpu_secs() - c;
        let s = t.elapsed().as_secs_f64();
        assert_eq!(r.stats().events, n, "every event read");
        assert!(text.contains("\"outliers\":{"), "outliers ran");
        println!(
            "analyze --all: run {run}: {n} events in {s:.3} s wall, {cpu:.3} s CPU, {} bytes of JSON",
            text.len()
        );
        times.push(s);
        cpus.push(cpu);
    }
    times.sort_by(f64::total_cmp);
    cpus.sort_by(f64::total_cmp);
    let (median, cpu) = (times[times.len() / 2], cpus[cpus.len() / 2]);
    println!(
        "analyze --all: median {median:.3} s wall, {cpu:.3} s CPU (target < 2 s for 10M events)"
    );
    (median, cpu)
}

/// `runtrace backlog` on a generated application trace of about `events`
/// events: an item every 2 us (enqueue, dequeue, a hold of lock "log",
/// processing end), ROUND frames every ms, a trigger every 1M items.
/// Returns (events, best wall seconds, best CPU seconds).
fn backlog(path: &std::path::Path, events: u64, runs: usize) -> (u64, f64, f64) {
    use runtrace_analyze::backlog::{analyze_files, BacklogOptions};
    use runtrace_model::synth::TraceBuilder;
    const US: u64 = 1_000; // TraceBuilder's ticks are ns
    const MS: u64 = 1_000 * US;
    const PRODUCER: u64 = 1;
    const CONSUMER: u64 = 2;
    // String ids.
    const JOBS: u64 = 1;
    const LOG: u64 = 2;
    const SIZE: u64 = 3;
    let items = events / 4;
    let mut b = TraceBuilder::new();
    b.string(JOBS, "jobs");
    b.string(LOG, "log");
    b.string(SIZE, "size_threshold");
    let mut next_round = MS;
    for i in 1..=items {
        let t = i * 2 * US;
        while next_round <= t {
            b.round(next_round);
            next_round += MS;
        }
        b.enqueue(PRODUCER, t, JOBS, i, 1);
        b.dequeue(CONSUMER, t + 100, JOBS, i, 100, 0);
        b.lock_hold(CONSUMER, t + 600, LOG, 200, true);
        b.processing_end(CONSUMER, t + 1_000, JOBS, i, 900, true);
        if i % 1_000_000 == 0 {
            b.backlog_trigger(PRODUCER, t + 1, JOBS, 1, 0, SIZE);
        }
    }
    let n = b.events();
    std::fs::write(path, b.finish()).expect("write trace");
    let (mut best, mut best_cpu) = (f64::MAX, f64::MAX);
    for run in 0..runs {
        let t = Instant::now();
        let c = thread_cpu_secs();
        let r = analyze_files(std::slice::from_ref(&path), &BacklogOptions::default());
        let cpu = thread_cpu_secs() - c;
        let s = t.elapsed().as_secs_f64();
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        assert_eq!(r.queues[0].enqueued, items, "every item analysed");
        assert_eq!(r.triggers.len() as u64, items / 1_000_000);
        println!(
            "backlog: run {run}: {n} events in {s:.3} s wall ({:.1} M events/s), {cpu:.3} s CPU ({:.1} M events per CPU-second)",
            n as f64 / s / 1e6,
            n as f64 / cpu / 1e6
        );
        best = best.min(s);
        best_cpu = best_cpu.min(cpu);
    }
    println!(
        "backlog: best {:.1} M events/s wall, {:.1} M events per CPU-second",
        n as f64 / best / 1e6,
        n as f64 / best_cpu / 1e6
    );
    (n, best, best_cpu)
}
