//! `runtrace jsonl`: [`runtrace_export::jsonl::convert`] on the command
//! line's files.

use crate::output::Traces;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `runtrace jsonl`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// The trace files of one recording (sorted by N in trace.N.bin).
    #[command(flatten)]
    pub traces: Traces,
    /// Write to OUT instead of standard output ("-" is standard output).
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    pub output: Option<PathBuf>,
}

/// `runtrace jsonl FILE... [-o OUT]`.
pub fn run(args: &Args) -> ExitCode {
    runtrace_export::jsonl::convert(&args.traces.expand(), args.output.as_deref())
}
