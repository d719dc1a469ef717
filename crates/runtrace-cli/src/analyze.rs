//! `runtrace analyze`: the report of `runtrace_analyze` as text or JSON,
//! with a progress bar on standard error for large inputs when it is a
//! terminal.
//!
//! ```no_run
//! let code = runtrace_cli::analyze::analyze(&["trace.0.bin".into()], false);
//! # let _ = code;
//! ```

use crate::output::{print_report, with_progress};
use crate::AnalyzeArgs;
use runtrace_analyze::index::TraceIndex;
use runtrace_analyze::{analyze_files, Options, Report};
use std::path::PathBuf;
use std::process::ExitCode;

/// Analyses `files` with a progress bar when standard error is a terminal
/// and the input is large.
pub fn report(files: &[PathBuf]) -> Report {
    with_progress("analyzing", files, |progress| {
        analyze_files(
            files,
            Options {
                progress,
                ..Options::default()
            },
        )
    })
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
    print_report(&text, &r.errors, r.is_damaged())
}

/// Every applicable analysis of `files` over one read, as one JSON object
/// (`runtrace_analyze::index::TraceIndex::run_all`). Exit code as
/// [`analyze`].
pub fn analyze_all(files: &[PathBuf]) -> ExitCode {
    let ix = TraceIndex::load(files);
    print_report(
        &ix.run_all().to_string(),
        &ix.stats.errors,
        ix.stats.damaged,
    )
}

/// `runtrace analyze FILE... [--json] [--all]`.
pub fn run(args: &AnalyzeArgs) -> ExitCode {
    if args.all {
        return analyze_all(&args.files);
    }
    analyze(&args.files, args.json)
}
