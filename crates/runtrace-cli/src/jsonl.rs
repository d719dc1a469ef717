//! `runtrace jsonl`: [`runtrace_export::jsonl::convert`] on the command
//! line's files.

use crate::JsonlArgs;
use std::process::ExitCode;

/// `runtrace jsonl FILE... [-o OUT]`.
pub fn run(args: &JsonlArgs) -> ExitCode {
    runtrace_export::jsonl::convert(&args.files, args.output.as_deref())
}
