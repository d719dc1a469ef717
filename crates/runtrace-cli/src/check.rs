//! `runtrace check`: the report of [`runtrace_format::check::check_files`]
//! as text (its `Display`) or as one JSON object.
//!
//! ```no_run
//! let report = runtrace_format::check::check_files(&["trace.0.bin"]);
//! println!("{}", runtrace_cli::check::to_json(&report));
//! ```

use crate::output::Traces;
use runtrace_format::check::{check_files, CheckReport};
use serde_json::json;
use std::process::ExitCode;

/// Arguments of `runtrace check`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// The trace files.
    #[command(flatten)]
    pub traces: Traces,
    /// Print one JSON object instead of the text summary.
    #[arg(long)]
    pub json: bool,
}

/// The report as the single JSON object `runtrace check --json` prints.
///
/// Keys: `files`, `events`, `bytes`, `bytes_per_event` (null without
/// events), `dropped_events`, `truncated`, `sealed` (files with an `END`
/// frame), `unsealed_files` (paths of intact files without one: they
/// make `truncated` true but are not errors), `event_counts`
/// (name -> count), `errors` (messages), `incomplete` (why a recording
/// is not complete: it did not finish, files are missing, events were
/// dropped) and `result` (`OK`, `INCOMPLETE`: intact but some file has no
/// `END` frame or `incomplete` is not empty, or `DAMAGED`).
///
/// ```
/// let empty = runtrace_format::check::CheckReport::default();
/// let j = runtrace_cli::check::to_json(&empty);
/// assert_eq!(j["files"], 0);
/// assert!(j["bytes_per_event"].is_null());
/// ```
pub fn to_json(report: &CheckReport) -> serde_json::Value {
    json!({
        "files": report.files.len(),
        "events": report.events,
        "bytes": report.bytes,
        "bytes_per_event": report.bytes_per_event(),
        "dropped_events": report.dropped_events,
        "truncated": report.truncated(),
        "sealed": report.sealed(),
        "unsealed_files": report.unsealed().map(|p| p.display().to_string()).collect::<Vec<_>>(),
        "event_counts": report.event_counts,
        "errors": report.errors,
        "incomplete": report.incomplete,
        "result": report.verdict(),
    })
}

/// `runtrace check`: prints the report (text or JSON) to standard output.
/// Exit code 0 when every file is clean, 1 otherwise.
pub fn run(args: &Args) -> ExitCode {
    let report = check_files(&args.traces.expand());
    let text = if args.json {
        to_json(&report).to_string()
    } else {
        report.to_string()
    };
    crate::output::print_report(&text, &[], !report.is_clean())
}
