//! `runtrace analyze`: the report of `runtrace_analyze` as text or JSON,
//! with a progress bar on standard error for large inputs when it is a
//! terminal.
//!
//! ```no_run
//! let code = runtrace_cli::analyze::analyze(&["trace.0.bin".into()], false);
//! # let _ = code;
//! ```

use crate::AnalyzeArgs;
use runtrace_analyze::{analyze_files, Options, Report};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Inputs smaller than this get no progress bar (they take well under a
/// second).
const PROGRESS_MIN_BYTES: u64 = 64 << 20;

/// Draws `[#####.....] 42% 120/300 MB` on standard error, at most ten
/// times a second.
struct ProgressBar {
    last: Option<Instant>,
    drawn: bool,
}

impl ProgressBar {
    fn draw(&mut self, done: u64, total: u64) {
        if self
            .last
            .is_some_and(|t| t.elapsed() < Duration::from_millis(100))
            && done < total
        {
            return;
        }
        self.last = Some(Instant::now());
        let frac = done as f64 / total.max(1) as f64;
        let width = 30;
        let full = ((frac * width as f64) as usize).min(width);
        let bar: String = "#".repeat(full) + &".".repeat(width - full);
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\ranalyzing [{bar}] {:>3.0}% {}/{} MB",
            frac * 100.0,
            done >> 20,
            total >> 20
        );
        let _ = err.flush();
        self.drawn = true;
    }

    fn clear(&self) {
        if self.drawn {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r{:70}\r", "");
            let _ = err.flush();
        }
    }
}

/// Analyses `files` with a progress bar when standard error is a terminal
/// and the input is large.
pub fn report(files: &[PathBuf]) -> Report {
    let total: u64 = files
        .iter()
        .map(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
        .sum();
    if total >= PROGRESS_MIN_BYTES && std::io::stderr().is_terminal() {
        let mut bar = ProgressBar {
            last: None,
            drawn: false,
        };
        let mut cb = |done: u64, total: u64| bar.draw(done, total);
        let r = analyze_files(
            files,
            Options {
                progress: Some(&mut cb),
                ..Options::default()
            },
        );
        bar.clear();
        r
    } else {
        analyze_files(files, Options::default())
    }
}

/// Prints the report of `files` (text, or JSON with `json`) to standard
/// output and damage to standard error. Exit code 0, or 1 when a file was
/// damaged or cut short (the report still covers what was readable).
pub fn analyze(files: &[PathBuf], json: bool) -> ExitCode {
    let r = report(files);
    let text = if json {
        r.to_json().to_string()
    } else {
        r.to_string()
    };
    // A closed stdout (`| head`) must not turn into a panic.
    let _ = writeln!(std::io::stdout().lock(), "{}", text.trim_end());
    if r.is_damaged() {
        let mut err = std::io::stderr().lock();
        for e in &r.errors {
            let _ = writeln!(err, "error: {e}");
        }
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// `runtrace analyze FILE... [--json]`.
pub fn run(args: &AnalyzeArgs) -> ExitCode {
    analyze(&args.files, args.json)
}
