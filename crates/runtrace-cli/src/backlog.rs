//! `runtrace backlog`: queues, locks, I/O, heartbeats and the ranked root
//! causes of every backlog trigger, from the application-instrumentation
//! events (`runtrace_analyze::backlog`), as text or JSON.

use crate::output::{print_report, with_progress, Traces};
use runtrace_analyze::backlog::{analyze_files_with_progress, BacklogOptions};
use runtrace_model::parse_duration;
use std::process::ExitCode;

/// Arguments of `runtrace backlog`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// The trace files.
    #[command(flatten)]
    pub traces: Traces,
    /// Print one JSON object instead of the text report.
    #[arg(long)]
    pub json: bool,
    /// Width of the producer/consumer rate windows (e.g. 1s, 500ms).
    #[arg(long, value_name = "DUR", default_value = "1s", value_parser = parse_duration)]
    pub window: u64,
    /// How far before each trigger to look for its causes (e.g. 2s).
    #[arg(long, value_name = "DUR", default_value = "2s", value_parser = parse_duration)]
    pub lookback: u64,
}

/// `runtrace backlog FILE... [--json] [--window DUR] [--lookback DUR]`:
/// prints the report to standard output, damage to standard error. Exit
/// code 0, or 1 when a file was damaged, cut short or missing (the report
/// still covers what was readable).
pub fn run(args: &Args) -> ExitCode {
    let opts = BacklogOptions {
        window_ns: args.window,
        lookback_ns: args.lookback,
        ..BacklogOptions::default()
    };
    let files = args.traces.expand();
    let r = with_progress("backlog", &files, |progress| {
        analyze_files_with_progress(&files, &opts, progress)
    });
    let text = if args.json {
        r.to_json().to_string()
    } else {
        r.to_string()
    };
    print_report(&text, &r.errors, r.is_damaged())
}
