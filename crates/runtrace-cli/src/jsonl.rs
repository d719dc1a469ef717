//! `runtrace jsonl`: [`runtrace_export::jsonl::convert`] on the command
//! line's files.

use crate::JsonlArgs;
use std::process::ExitCode;

/// `runtrace jsonl FILE... [-o OUT]`.
///
/// ```no_run
/// let code = runtrace_cli::jsonl::run(&runtrace_cli::JsonlArgs { files: vec!["trace.0.bin".into()], output: None });
/// # let _ = code;
/// ```
pub fn run(args: &JsonlArgs) -> ExitCode {
    runtrace_export::jsonl::convert(&args.files, args.output.as_deref())
}
