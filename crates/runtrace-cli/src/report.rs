//! `runtrace report`: [`runtrace_export::report::write`] on the command
//! line's files, with damage reported as `analyze` does.
//!
//! ```no_run
//! let args = runtrace_cli::ReportArgs { files: vec!["trace.0.bin".into()], output: "report.html".into() };
//! let code = runtrace_cli::report::run(&args);
//! # let _ = code;
//! ```

use crate::output::wrote_file;
use crate::ReportArgs;
use std::process::ExitCode;

/// `runtrace report FILE... -o report.html`: exit 0, or 1 when the page
/// cannot be written or the input is damaged (the page covers what was
/// readable; the damage is on standard error).
pub fn run(args: &ReportArgs) -> ExitCode {
    wrote_file(
        runtrace_export::report::write(&args.files, &args.output).map(|w| {
            let line = format!(
                "{}: {} events, {} findings, {} bytes",
                args.output.display(),
                w.events,
                w.findings,
                w.bytes
            );
            (line, w.errors)
        }),
    )
}
