//! Converts a recording to JSON Lines, one object per event in timestamp
//! order, for custom analysis (the user guide's Python snippets read it).
//!
//! ```text
//! cargo run --example trace_to_jsonl -- trace.0.bin trace.jsonl
//! cargo run --example trace_to_jsonl -- trace.0.bin trace.1.bin trace.jsonl
//! ```
//!
//! The last argument is the output file (`-` for standard output). This is
//! `runtrace jsonl FILE... -o OUT`: both call `runtrace_export::jsonl::convert`.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    if args.len() < 2 {
        eprintln!("usage: trace_to_jsonl TRACE_FILE... OUTPUT.jsonl");
        return ExitCode::from(2);
    }
    let output = args.pop().expect("at least two arguments");
    runtrace_export::jsonl::convert(&args, Some(&output))
}
