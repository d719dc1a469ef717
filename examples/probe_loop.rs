//! Fires `task_poll_end` in a tight loop and prints the median ns per probe
//! over 5 runs: run it under an attached tool to measure the attached cost
//! (docs/probes.md has the commands and the figures).
//!
//! ```text
//! cargo build --release --example probe_loop --features usdt,perf-probe,lttng
//! target/release/examples/probe_loop [N]
//! ```

use std::hint::black_box;
use std::time::Instant;

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let mut per = Vec::new();
    for _ in 0..5 {
        let t0 = Instant::now();
        for i in 0..n {
            runtrace::probe!(task_poll_end {
                task_id: black_box(i),
                worker: 1,
                ready: false
            });
        }
        per.push(t0.elapsed().as_nanos() as f64 / n as f64);
    }
    per.sort_by(|a, b| a.total_cmp(b));
    println!(
        "{n} probes per run; median {:.2} ns per probe (runs: {per:.2?})",
        per[2]
    );
}
