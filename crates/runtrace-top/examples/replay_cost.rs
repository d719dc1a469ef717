//! What replaying a recording costs in `runtrace top` (issue 38 item 2's
//! targets: the first screen of a 10M-event recording under 2 s, a seek
//! anywhere under 200 ms): the time to open it (one read building the
//! index) and take the first window, then the median and worst of 20
//! seeks to spread-out positions, each with its window computed.
//!
//! ```text
//! cargo run --release -p runtrace-top --example replay_cost -- DIR [--window S]
//! ```

use runtrace_top::source::{Options, Replay};
use std::time::Instant;

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(dir) = args.first() else {
        eprintln!("usage: replay_cost DIR [--window S]");
        return std::process::ExitCode::from(2);
    };
    let mut opts = Options::default();
    if let Some(w) = args.iter().position(|a| a == "--window") {
        match args.get(w + 1).and_then(|v| v.parse::<f64>().ok()) {
            Some(s) if s > 0.0 => opts.window_s = s,
            _ => {
                eprintln!("--window: a number of seconds over 0");
                return std::process::ExitCode::from(2);
            }
        }
    }
    let t = Instant::now();
    let mut r = match Replay::open(std::path::Path::new(dir), opts) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            return std::process::ExitCode::from(1);
        }
    };
    let first = r.snapshot();
    let open = t.elapsed();
    let (per_event, events) = r.index_size();
    println!(
        "opened {dir}: {events} events indexed ({per_event} bytes each), {:.1} s long; first screen in {:.0} ms ({} locations)",
        r.length_s(),
        open.as_secs_f64() * 1e3,
        first.locations.len()
    );
    let len = r.length_s();
    let mut ms: Vec<f64> = (0..20)
        .map(|i| {
            // Spread out, not in order: 0.05, 0.55, 0.10, 0.60, ... of the length.
            let f = (i / 2) as f64 * 0.05 + if i % 2 == 1 { 0.5 } else { 0.0 } + 0.05;
            let t = Instant::now();
            r.seek(len * f.min(1.0));
            let s = r.snapshot();
            std::hint::black_box(&s);
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    ms.sort_by(f64::total_cmp);
    println!(
        "seek + window ({} s): median {:.0} ms, max {:.0} ms over {} seeks",
        opts.window_s,
        ms[ms.len() / 2],
        ms[ms.len() - 1],
        ms.len()
    );
    std::process::ExitCode::SUCCESS
}
