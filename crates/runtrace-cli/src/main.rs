//! `runtrace`: the command line over runtrace's libraries: check, convert
//! (jsonl, perfetto, report, flamegraph, export parquet), analyze
//! (summary, analyze, outliers, backlog, blocked), serve MCP (mcp) and
//! inspect binaries (doctor). Each command lives in its own module of the
//! `runtrace_cli` library; `runtrace --help` lists them.

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    runtrace_cli::run(runtrace_cli::Cli::parse())
}
