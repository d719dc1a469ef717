//! What a CPU sample costs (issue 13), measured side by side:
//!
//! - application side: the CPU time a busy thread needs for a fixed amount
//!   of work while sampled at 99 Hz and 999 Hz, against not sampled (the
//!   kernel's timer interrupt, callchain walk and ring write are charged
//!   to the sampled thread);
//! - context switches: the CPU time of a thread that blocks 20,000 times
//!   (1 µs sleeps), whose every switch-out is an off-CPU sample (the
//!   kernel walks its stack in the scheduler, with interrupts off, so a
//!   sampling profiler does not see this cost);
//! - writer side: the writer thread's CPU time per recorded sample (perf
//!   ring drain, sort, interning, encoding, writing), against the same
//!   recording without profiling.
//!
//! Each round runs every mode once in a rotating order; the figures are
//! medians over rounds of the paired differences. Run:
//! `cargo bench -p runtrace-recorder --bench cpu_profile`
//! (`CPU_BENCH_ROUNDS`, default 7). Needs perf_event_open (root or
//! `perf_event_paranoid` <= 1 for the off-CPU part); says so otherwise.

use runtrace_format::{FileReader, Record};
use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

fn thread_cpu_ns() -> u64 {
    runtrace_core::thread_time::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU ns of the thread named `name` in this process (schedstat's first
/// field), None if there is none.
fn named_thread_cpu_ns(name: &str) -> Option<u64> {
    for e in std::fs::read_dir("/proc/self/task").ok()? {
        let p = e.ok()?.path();
        let comm = std::fs::read_to_string(p.join("comm")).unwrap_or_default();
        if comm.trim_end() == name {
            let s = std::fs::read_to_string(p.join("schedstat")).ok()?;
            return s.split_whitespace().next()?.parse().ok();
        }
    }
    None
}

#[inline(never)]
fn work(iters: u64) -> u64 {
    let mut x = 1u64;
    for _ in 0..iters {
        x = black_box(
            x.wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407),
        );
    }
    x
}

struct Run {
    work_cpu_ns: u64,
    switch_cpu_ns: u64,
    writer_cpu_ns: u64,
    /// `cpu_sample` + `off_cpu` events.
    samples: u64,
    /// `cpu_sample` events.
    on_cpu: u64,
    mode: u64,
}

/// (samples, on-CPU samples, PROFILE mode).
fn count_samples(dir: &Path) -> (u64, u64, u64) {
    let (mut n, mut on, mut mode) = (0, 0, 0);
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let Ok(r) = FileReader::open(&p) else {
            continue;
        };
        let mut r = r;
        for rec in &mut r {
            if let Ok(Record::Events { events, .. }) = rec {
                n += events
                    .iter()
                    .filter(|e| matches!(e.schema.name.as_str(), "cpu_sample" | "off_cpu"))
                    .count() as u64;
                on += events
                    .iter()
                    .filter(|e| e.schema.name == "cpu_sample")
                    .count() as u64;
            }
        }
        if let Some(p) = r.tables().profile() {
            mode = p.mode;
        }
    }
    (n, on, mode)
}

const SWITCHES: u64 = 20_000;

fn run(hz: u32, iters: u64) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let guard = runtrace_recorder::Recorder::builder()
        .path(dir.path().join("trace"))
        .cpu_profile(hz)
        .start()
        .unwrap();
    let w0 = named_thread_cpu_ns("runtrace-writer").unwrap_or(0);
    let (work_cpu_ns, switch_cpu_ns) = std::thread::spawn(move || {
        runtrace_recorder::task_terminate(1);
        // Let the writer start sampling this thread.
        std::thread::sleep(Duration::from_millis(120));
        let t0 = thread_cpu_ns();
        black_box(work(iters));
        let t1 = thread_cpu_ns();
        for _ in 0..SWITCHES {
            std::thread::sleep(Duration::from_micros(1));
        }
        (t1 - t0, thread_cpu_ns() - t1)
    })
    .join()
    .unwrap();
    let w1 = named_thread_cpu_ns("runtrace-writer").unwrap_or(0);
    guard.finish().unwrap();
    let (samples, on_cpu, mode) = count_samples(dir.path());
    Run {
        work_cpu_ns,
        switch_cpu_ns,
        writer_cpu_ns: w1 - w0,
        samples,
        on_cpu,
        mode,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn main() {
    // `cargo bench` passes `--bench`; a plain `cargo test --benches` run
    // passes nothing and should not spend time measuring.
    if !std::env::args().any(|a| a == "--bench") {
        println!("cpu_profile bench: run with `cargo bench` to measure");
        return;
    }
    let rounds: usize = std::env::var("CPU_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7);
    // Calibrate: about 1 s of CPU time of work per run (CPU time, not
    // wall time: other processes may share the machine).
    let t = thread_cpu_ns();
    work(50_000_000);
    let per_iter = (thread_cpu_ns() - t) as f64 / 1e9 / 50_000_000.0;
    let iters = (1.0 / per_iter) as u64;
    let modes = [0u32, 99, 999];
    let mut runs: Vec<Vec<Run>> = modes.iter().map(|_| Vec::new()).collect();
    for round in 0..rounds {
        for k in 0..modes.len() {
            let m = (round + k) % modes.len();
            let r = run(modes[m], iters);
            println!(
                "round {round} hz {:>3}: work {:>6.1} ms CPU, switches {:>6.1} ms CPU, writer {:>5.2} ms CPU, {} samples (mode {})",
                modes[m],
                r.work_cpu_ns as f64 / 1e6,
                r.switch_cpu_ns as f64 / 1e6,
                r.writer_cpu_ns as f64 / 1e6,
                r.samples,
                r.mode
            );
            runs[m].push(r);
        }
    }
    if runs[1].iter().any(|r| r.mode != 1) {
        println!(
            "note: perf_event_open was not used in every run (mode != 1): figures mix backends"
        );
    }
    for m in 1..modes.len() {
        let pairs = runs[m].iter().zip(&runs[0]);
        let work_ratio = median(
            pairs
                .clone()
                .map(|(r, o)| r.work_cpu_ns as f64 / o.work_cpu_ns as f64)
                .collect(),
        );
        let app_per_sample = median(
            pairs
                .clone()
                .map(|(r, o)| {
                    (r.work_cpu_ns as f64 - o.work_cpu_ns as f64) / r.on_cpu.max(1) as f64
                })
                .collect(),
        );
        let per_switch = median(
            pairs
                .clone()
                .map(|(r, o)| (r.switch_cpu_ns as f64 - o.switch_cpu_ns as f64) / SWITCHES as f64)
                .collect(),
        );
        let writer_per_sample = median(
            pairs
                .map(|(r, o)| {
                    (r.writer_cpu_ns as f64 - o.writer_cpu_ns as f64) / r.samples.max(1) as f64
                })
                .collect(),
        );
        let samples = median(runs[m].iter().map(|r| r.samples as f64).collect());
        println!(
            "{:>3} Hz: busy thread CPU x{work_ratio:.4} vs not sampled ({app_per_sample:+.0} ns per on-CPU sample); \
             {per_switch:+.0} ns per context switch (off-CPU sample); \
             writer {writer_per_sample:+.0} ns CPU per sample; {samples:.0} samples per run (medians of {rounds} rounds)",
            modes[m]
        );
    }
}
