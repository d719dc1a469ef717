//! Seed 000's step 3: what code was running, as folded stacks.
//!
//! ```text
//! cargo run --example cpu_flamegraph -- DIR/trace.0.bin > flamegraph.txt
//! ```
//!
//! Prints the recording's on-CPU samples as folded stacks (inferno's
//! `root;...;leaf COUNT`, one line per stack), symbolized with the
//! binaries recorded in the trace; draw them with `inferno-flamegraph
//! flamegraph.txt > flamegraph.svg`, or use `runtrace flamegraph DIR -o
//! flamegraph.svg` (which also filters by spawn location, worker, time).
//! The library calls are `runtrace_model::profile::load` and
//! `runtrace_export::flamegraph::{stacks, fold}`.

use runtrace_analyze::functions::StackNames;
use runtrace_export::flamegraph::{fold, stacks, why_empty, Selection};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let paths: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    if paths.is_empty() {
        eprintln!("usage: cpu_flamegraph TRACE.bin|DIR... > flamegraph.txt");
        return ExitCode::from(2);
    }
    let files = runtrace_format::files::expand_lenient(paths);
    let profile = match runtrace_model::profile::load(&files) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut names = StackNames::recorded(&profile);
    let sel = Selection::default();
    let folded = fold(stacks(&profile, &sel, &mut names));
    for p in profile.notes.iter().chain(&names.problems()) {
        eprintln!("note: {p}");
    }
    // Damage (file and byte offset): what was readable is still printed.
    for e in &profile.stats.errors {
        eprintln!("error: {e}");
    }
    if folded.is_empty() {
        eprintln!("error: {}", why_empty(&profile, &sel));
        return ExitCode::FAILURE;
    }
    // A reader that closed the pipe early (`| head`) is not an error:
    // `print!` would panic on it.
    let _ = std::io::stdout().lock().write_all(folded.as_bytes());
    if profile.stats.damaged {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
