//! Analyses a recording: per-worker statistics, spawn locations ranked by
//! poll time, wake->poll delays and poll durations, and findings that name
//! the spawn locations responsible (docs/analysis.md).
//!
//! ```text
//! cargo run --release --example analyze_trace -- trace.0.bin
//! cargo run --release --example analyze_trace -- --json trace.0.bin trace.1.bin
//! ```
//!
//! This is `runtrace analyze FILE... [--json]` (without its progress bar),
//! on the `runtrace_analyze` library: [`runtrace_analyze::analyze_files`]
//! and the report's text (`Display`) or JSON (`to_json`) form.

use runtrace_analyze::{analyze_files, Options};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut json = false;
    let mut files = Vec::new();
    for a in std::env::args_os().skip(1) {
        if a == "--json" {
            json = true;
        } else {
            files.push(PathBuf::from(a));
        }
    }
    if files.is_empty() {
        eprintln!("usage: analyze_trace [--json] TRACE_FILE...");
        return ExitCode::from(2);
    }
    let report = analyze_files(&files, Options::default());
    let text = if json {
        report.to_json().to_string()
    } else {
        report.to_string()
    };
    // A closed stdout (`| head`) must not turn into a panic.
    let _ = writeln!(std::io::stdout().lock(), "{}", text.trim_end());
    if report.is_damaged() {
        for e in &report.errors {
            eprintln!("error: {e}");
        }
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
