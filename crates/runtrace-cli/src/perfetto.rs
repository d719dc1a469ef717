//! `runtrace perfetto`: [`runtrace_export::perfetto::convert`] on the
//! command line's files, with damage reported as `analyze` does.

use crate::output::{print_notes, wrote_file, Traces};
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `runtrace perfetto`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// The trace files.
    #[command(flatten)]
    pub traces: Traces,
    /// The Perfetto trace to write (e.g. trace.pftrace).
    #[arg(short = 'o', long = "output", value_name = "OUT", required = true)]
    pub output: PathBuf,
}

/// `runtrace perfetto FILE... -o OUT.pftrace`: exit 0, or 1 when the output
/// cannot be written or the input is damaged (what was readable is
/// converted; the damage is on standard error).
pub fn run(args: &Args) -> ExitCode {
    let converted = runtrace_export::perfetto::convert(&args.traces.expand(), &args.output);
    if let Ok(c) = &converted {
        print_notes(&c.notes);
    }
    wrote_file(converted.map(|c| {
        let s = &c.stats;
        let line = format!(
            "{}: {} events -> {} packets ({} polls, {} parks, {} flows, {} counter values)",
            args.output.display(),
            c.events,
            s.packets,
            s.polls,
            s.parks,
            s.flows_joined,
            s.counter_values
        );
        (line, c.errors)
    }))
}
