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
use runtrace_analyze::functions::StackNames;
use runtrace_analyze::index::TraceIndex;
use runtrace_analyze::runtime::analyze_files_profiled;
use runtrace_analyze::{Options, Report};
use runtrace_model::profile::Profile;
use std::path::PathBuf;
use std::process::ExitCode;

/// Analyses `files` with a progress bar when standard error is a terminal
/// and the input is large; with the CPU profile read in the same pass.
pub fn report_profiled(files: &[PathBuf]) -> (Report, Profile) {
    with_progress("analyzing", files, |progress| {
        analyze_files_profiled(
            files,
            Options {
                progress,
                ..Options::default()
            },
        )
    })
}

/// The report of [`report_profiled`], without the profile.
pub fn report(files: &[PathBuf]) -> Report {
    report_profiled(files).0
}

/// Prints the report of `files` (text, or JSON with `json`) to standard
/// output and damage to standard error. With CPU samples in the trace,
/// findings name the functions of the blamed locations' polls
/// (`Report::add_functions`; symbolization problems are printed once on
/// standard error). Exit code 0, or 1 when a file was damaged or cut short
/// (the report still covers what was readable).
pub fn analyze(files: &[PathBuf], json: bool) -> ExitCode {
    let (mut r, profile) = report_profiled(files);
    if !profile.samples.is_empty() {
        let mut names = StackNames::recorded(&profile);
        r.add_functions(&profile, &mut names);
        crate::flamegraph::print_notes(&names.problems());
    }
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
