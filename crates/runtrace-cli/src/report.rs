//! `runtrace report`: [`runtrace_export::report::write`] on the command
//! line's files, with damage reported as `analyze` does.
//!
//! ```no_run
//! let args = runtrace_cli::ReportArgs { files: vec!["trace.0.bin".into()], output: "report.html".into() };
//! let code = runtrace_cli::report::run(&args);
//! # let _ = code;
//! ```

use crate::ReportArgs;
use std::io::Write;
use std::process::ExitCode;

/// `runtrace report FILE... -o report.html`: exit 0, or 1 when the page
/// cannot be written or the input is damaged (the page covers what was
/// readable; the damage is on standard error).
pub fn run(args: &ReportArgs) -> ExitCode {
    let mut err = std::io::stderr().lock();
    match runtrace_export::report::write(&args.files, &args.output) {
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            ExitCode::FAILURE
        }
        Ok(w) => {
            let _ = writeln!(
                err,
                "{}: {} events, {} findings, {} bytes",
                args.output.display(),
                w.events,
                w.findings,
                w.bytes
            );
            for e in &w.errors {
                let _ = writeln!(err, "error: {e}");
            }
            if w.errors.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
