//! Throughput and size of `runtrace perfetto` and `runtrace report` on a
//! synthetic healthy runtime (`runtrace_model::synth::workload`: 4
//! workers, spawns, polls, wakes, queue samples).
//!
//! ```text
//! cargo run --release -p runtrace-export --example visual_bench -- [EVENTS] [RUNS]
//! ```
//!
//! Prints, for a read that does nothing with the events (the baseline) and
//! per exporter, the median of RUNS (default 3) runs of wall time and of
//! this thread's CPU time (from /proc/thread-self/schedstat: on a shared
//! machine the CPU time is the stable figure), events per second of each,
//! the peak resident memory, and the output's size. EVENTS defaults to 10 million.

use runtrace_model::event::Ev;
use runtrace_model::model::Model;
use runtrace_model::pass::{Pass, Wants};
use std::time::Instant;

/// Reads every event and does nothing: the cost of the read alone.
struct Nothing;

impl Pass for Nothing {
    fn wants(&self) -> Wants {
        Wants::RUNTIME.or(Wants::APP)
    }
    fn event(&mut self, _ev: &Ev, _model: &Model) {}
}

/// This thread's CPU time (s), or 0 when unknown.
fn cpu_s() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0.0, |ns| ns as f64 / 1e9)
}

/// Peak resident memory (VmHWM, KiB) since the last [`reset_peak`].
fn peak_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let l = s.lines().find(|l| l.starts_with("VmHWM:"))?;
            l.split_whitespace().nth(1)?.parse().ok()
        })
        .unwrap_or(0)
}

/// Resets the peak resident memory to the current one (Linux: "5" to
/// /proc/self/clear_refs).
fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// Runs `f` `runs` times; prints the medians of wall and CPU time and the
/// peak resident memory while it ran.
fn measure(what: &str, n: u64, runs: usize, mut f: impl FnMut() -> String) {
    let (mut wall, mut cpu) = (Vec::new(), Vec::new());
    let mut note = String::new();
    reset_peak();
    for _ in 0..runs {
        let (t, c) = (Instant::now(), cpu_s());
        note = f();
        wall.push(t.elapsed().as_secs_f64());
        cpu.push(cpu_s() - c);
    }
    let (w, c) = (median(wall), median(cpu));
    println!(
        "{what}: median of {runs}: wall {w:.3} s ({:.2} M events/s), cpu {c:.3} s ({:.2} M events/s), peak RSS {} MiB{note}",
        n as f64 / w / 1e6,
        n as f64 / c / 1e6,
        peak_kib() / 1024
    );
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let events: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000_000);
    let runs: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(3).max(1);
    let dir = tempfile::tempdir().expect("temporary directory");
    let input = dir.path().join("trace.0.bin");
    let (bytes, n) = runtrace_model::synth::workload(&runtrace_model::synth::Workload {
        events,
        ..Default::default()
    });
    std::fs::write(&input, &bytes).expect("write the trace");
    println!("input: {n} events, {} bytes", bytes.len());
    drop(bytes);
    let inputs = [input];

    measure("read only", n, runs, || {
        runtrace_model::input::read(&inputs, &mut Nothing, None);
        String::new()
    });
    let out = dir.path().join("trace.pftrace");
    measure("perfetto", n, runs, || {
        let c = runtrace_export::perfetto::convert(&inputs, &out).expect("convert");
        assert!(c.errors.is_empty(), "{:?}", c.errors);
        let size = std::fs::metadata(&out).map(|m| m.len()).unwrap_or(0);
        format!(", {size} bytes ({:.1} bytes/event)", size as f64 / n as f64)
    });
    let _ = std::fs::remove_file(&out);
    let out = dir.path().join("report.html");
    measure("report", n, runs, || {
        let w = runtrace_export::report::write(&inputs, &out).expect("report");
        format!(", {} bytes", w.bytes)
    });
}
