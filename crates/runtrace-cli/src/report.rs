//! `runtrace report`: [`runtrace_export::report::write`] on the command
//! line's files, with damage reported as `analyze` does.

use crate::output::{wrote_file, Traces};
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `runtrace report`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// The trace files.
    #[command(flatten)]
    pub traces: Traces,
    /// The HTML page to write (e.g. report.html).
    #[arg(short = 'o', long = "output", value_name = "OUT", required = true)]
    pub output: PathBuf,
}

/// `runtrace report FILE... -o report.html`: exit 0, or 1 when the page
/// cannot be written or the input is damaged (the page covers what was
/// readable; the damage is on standard error).
pub fn run(args: &Args) -> ExitCode {
    let written = runtrace_export::report::write(&args.traces.expand(), &args.output);
    wrote_file(written.map(|w| {
        let line = format!(
            "{}: {} events, {} findings, {} bytes",
            args.output.display(),
            w.events,
            w.findings,
            w.bytes
        );
        (line, w.errors)
    }))
}
