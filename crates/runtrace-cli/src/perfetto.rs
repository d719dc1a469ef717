//! `runtrace perfetto`: [`runtrace_export::perfetto::convert`] on the
//! command line's files, with damage reported as `analyze` does.
//!
//! ```no_run
//! let args = runtrace_cli::PerfettoArgs { files: vec!["trace.0.bin".into()], output: "t.pftrace".into() };
//! let code = runtrace_cli::perfetto::run(&args);
//! # let _ = code;
//! ```

use crate::output::wrote_file;
use crate::PerfettoArgs;
use std::process::ExitCode;

/// `runtrace perfetto FILE... -o OUT.pftrace`: exit 0, or 1 when the output
/// cannot be written or the input is damaged (what was readable is
/// converted; the damage is on standard error).
pub fn run(args: &PerfettoArgs) -> ExitCode {
    wrote_file(
        runtrace_export::perfetto::convert(&args.files, &args.output).map(|c| {
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
        }),
    )
}
