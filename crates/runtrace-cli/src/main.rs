//! `runtrace`: check trace files and convert them to JSON Lines.
//! The commands live in the `runtrace_cli` library.

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    runtrace_cli::run(runtrace_cli::Cli::parse())
}
