//! Export throughput: events per second of `runtrace_parquet::export` on
//! a synthetic healthy runtime (runtrace_analyze::synth::workload), beside
//! a read of the same file that does nothing with the events (the
//! decoding alone), medians of 5 runs each.
//!
//! `cargo bench -p runtrace-parquet --bench export` (EVENTS=N to change
//! the size, default 4,000,000).

use runtrace_analyze::event::Ev;
use runtrace_analyze::model::Model;
use runtrace_analyze::pass::{Pass, Wants};
use runtrace_analyze::synth::{workload, Workload};
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
    let (mut exp, mut read) = (Vec::new(), Vec::new());
    let mut out_bytes = 0;
    for i in 0..5 {
        let t = Instant::now();
        let mut p = Nothing(0);
        let _ = runtrace_analyze::input::read(&paths, &mut p, None);
        read.push(n as f64 / t.elapsed().as_secs_f64());
        std::hint::black_box(p.0);

        let ds = dir.path().join(format!("ds{i}"));
        let t = Instant::now();
        let s = export(
            &paths,
            &ds,
            &ExportOptions {
                host: Some("bench".into()),
                ..Default::default()
            },
        )
        .unwrap();
        exp.push(n as f64 / t.elapsed().as_secs_f64());
        out_bytes = s
            .files
            .iter()
            .map(|f| std::fs::metadata(&f.1).map_or(0, |m| m.len()))
            .sum::<u64>();
        std::fs::remove_dir_all(&ds).unwrap();
    }
    let (e, r) = (median(exp), median(read));
    println!(
        "{n} events ({:.1} MB trace -> {:.1} MB parquet): export {:.2} M events/s, read alone {:.2} M events/s (export/read = {:.2})",
        bytes.len() as f64 / 1e6,
        out_bytes as f64 / 1e6,
        e / 1e6,
        r / 1e6,
        e / r
    );
}
