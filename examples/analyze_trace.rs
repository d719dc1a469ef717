//! Analyses a recording: per-worker statistics, spawn locations ranked by
//! poll time, wake->poll delays and poll durations, and findings that name
//! the spawn locations responsible (docs/analysis.md).
//!
//! ```text
//! cargo run --release --example analyze_trace -- trace.0.bin
//! cargo run --release --example analyze_trace -- --json trace.0.bin trace.1.bin
//! ```
//!
//! This is `runtrace analyze FILE... [--json]`: both call
//! `runtrace_cli::analyze::analyze`, which uses the `runtrace_analyze`
//! library.

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
    runtrace_cli::analyze::analyze(&files, json)
}
