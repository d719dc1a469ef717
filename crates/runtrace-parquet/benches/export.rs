//! Export throughput: events per second of `runtrace_parquet::export` on
//! a synthetic healthy runtime (runtrace_model::synth::workload), beside
//! a read of the same file that does nothing with the events (the
//! decoding alone), medians of 5 runs each. Both per wall-clock second and
//! per second on the CPU (this thread's run time from
//! /proc/thread-self/schedstat): on a shared machine the wall clock also
//! counts the time other processes had the CPU. The export is one thread.
//!
//! `cargo bench -p runtrace-parquet --bench export` (EVENTS=N to change
//! the size, default 4,000,000).

use runtrace_model::event::Ev;
use runtrace_model::model::Model;
use runtrace_model::pass::{Pass, Wants};
use runtrace_model::synth::{workload, Workload};
use runtrace_parquet::{export, ExportOptions};
use std::time::Instant;

/// Reads every event and does nothing: the cost of decoding and ordering.
struct Nothing(u64);

impl Pass for Nothing {
    fn wants(&self) -> Wants {
        Wants::RUNTIME.or(Wants::APP)
    }
    fn event(&mut self, ev: &Ev, _m: &Model) {
        self.0 = self.0.wrapping_add(ev.ticks);
    }
}

/// This thread's time on a CPU so far, in ns (0 if unknown).
fn cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Events per second of wall clock and per second on the CPU.
fn timed(n: u64, f: impl FnOnce()) -> (f64, f64) {
    let (t, c) = (Instant::now(), cpu_ns());
    f();
    let cpu = (cpu_ns() - c).max(1) as f64 / 1e9;
    (n as f64 / t.elapsed().as_secs_f64(), n as f64 / cpu)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let events: u64 = std::env::var("EVENTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4_000_000);
    let dir = tempfile::tempdir().unwrap();
    let (bytes, n) = workload(&Workload {
        events,
        ..Workload::default()
    });
    let trace = dir.path().join("trace.0.bin");
    std::fs::write(&trace, &bytes).unwrap();
    let paths = vec![trace];
    let (mut exp, mut read, mut exp_cpu, mut read_cpu) = (vec![], vec![], vec![], vec![]);
    let mut out_bytes = 0;
    for i in 0..5 {
        let (w, c) = timed(n, || {
            let mut p = Nothing(0);
            let _ = runtrace_model::input::read(&paths, &mut p, None);
            std::hint::black_box(p.0);
        });
        read.push(w);
        read_cpu.push(c);

        let ds = dir.path().join(format!("ds{i}"));
        let mut s = None;
        let (w, c) = timed(n, || {
            let opts = ExportOptions {
                host: Some("bench".into()),
                ..Default::default()
            };
            s = Some(export(&paths, &ds, &opts).unwrap());
        });
        exp.push(w);
        exp_cpu.push(c);
        out_bytes = s
            .unwrap()
            .files
            .iter()
            .map(|f| std::fs::metadata(&f.1).map_or(0, |m| m.len()))
            .sum::<u64>();
        std::fs::remove_dir_all(&ds).unwrap();
    }
    let (e, r) = (median(exp), median(read));
    let (ec, rc) = (median(exp_cpu), median(read_cpu));
    println!(
        "{n} events ({:.1} MB trace -> {:.1} MB parquet), medians of 5:\n\
         export    {:.2} M events/s wall, {:.2} M events/CPU-s\n\
         read only {:.2} M events/s wall, {:.2} M events/CPU-s (export/read on CPU = {:.2})",
        bytes.len() as f64 / 1e6,
        out_bytes as f64 / 1e6,
        e / 1e6,
        ec / 1e6,
        r / 1e6,
        rc / 1e6,
        ec / rc
    );
}
