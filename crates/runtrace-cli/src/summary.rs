//! `runtrace summary`: recordings, duration, event counts, and which
//! analyses apply to the trace (and why not), as text or JSON
//! (`runtrace_analyze::summary`, with the registry's analyses).

use crate::output::{print_report, with_progress, Traces};
use runtrace_analyze::registry::summary;
use runtrace_analyze::reports::{OneRead, Reports};
use runtrace_analyze::summary::text;
use std::process::ExitCode;

/// Arguments of `runtrace summary`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// The trace files.
    #[command(flatten)]
    pub traces: Traces,
    /// Print one JSON object instead of the text summary.
    #[arg(long)]
    pub json: bool,
}

/// `runtrace summary FILE... [--json]`: exit code 1 when a file was
/// damaged (the summary covers what was readable).
pub fn run(args: &Args) -> ExitCode {
    let files = args.traces.expand();
    let r = with_progress("reading", &files, |p| OneRead::read(&files, p));
    let s = summary(&r);
    let out = if args.json { s.to_string() } else { text(&s) };
    print_report(&out, &r.stats().errors, r.stats().damaged)
}
