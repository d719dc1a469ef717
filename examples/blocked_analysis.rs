//! Seed 000's blocked analysis: which code ran while tasks waited.
//!
//! ```text
//! cargo run --example blocked_analysis -- DIR/trace.0.bin [THRESHOLD_MS]
//! ```
//!
//! Finds every period where a task waited more than THRESHOLD_MS (10) from
//! its wake to its poll, takes the CPU samples of the worker that finally
//! polled it during that period, and prints the spawn locations whose
//! polls held the worker meanwhile with their top functions, self and
//! inclusive (`runtrace_analyze::blocked`; `runtrace blocked` is the same
//! with `--json` and `--folded-out`).

use runtrace_analyze::blocked::{analyze_files, BlockedOptions};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: blocked_analysis TRACE.bin|DIR [THRESHOLD_MS]");
        return ExitCode::from(2);
    };
    let mut opts = BlockedOptions::default();
    if let Some(ms) = args.next() {
        match ms.to_str().and_then(|s| s.parse::<f64>().ok()) {
            Some(ms) if ms > 0.0 && ms.is_finite() => opts.threshold_ns = (ms * 1e6) as u64,
            _ => {
                eprintln!("error: THRESHOLD_MS {ms:?} is not a positive number");
                return ExitCode::from(2);
            }
        }
    }
    let files = runtrace_format::files::expand_lenient(vec![PathBuf::from(path)]);
    let (report, _profile, _names) = analyze_files(&files, &opts, Default::default());
    // A reader that closed the pipe early (`| head`) is not an error:
    // `print!` would panic on it.
    let _ = write!(std::io::stdout().lock(), "{report}");
    if report.damaged {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
