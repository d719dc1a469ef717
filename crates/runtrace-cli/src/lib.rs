//! The `runtrace` command-line tool: argument parsing ([`Cli`]) and one
//! module per command, each with its arguments (`Args`) and its `run`;
//! `output` holds what they share on the way in and out (the trace files
//! a command line names, progress bars, reports and errors). The work
//! itself lives in the libraries, which examples, tests and other tools
//! call directly (runtrace-format, -model, -analyze, -export, -parquet,
//! -mcp, -doctor).
//!
//! A recording's directory stands for its `trace.N.bin` files everywhere.
//!
//! ```no_run
//! use clap::Parser;
//! let cli = runtrace_cli::Cli::parse_from(["runtrace", "check", "--json", "trace.0.bin"]);
//! let code = runtrace_cli::run(cli);
//! # let _ = code;
//! ```

#![warn(missing_docs)]

use clap::{Parser, Subcommand};
use std::process::ExitCode;

pub mod analyze;
pub mod backlog;
pub mod blocked;
pub mod check;
pub mod doctor;
#[cfg(feature = "parquet")]
pub mod export;
#[cfg(feature = "object-store")]
pub mod fetch;
pub mod flamegraph;
pub mod jsonl;
pub mod mcp;
pub mod outliers;
pub mod output;
pub mod perfetto;
pub mod report;
pub mod summary;
pub mod top;

/// Command-line arguments of `runtrace`.
#[derive(Debug, Parser)]
#[command(
    name = "runtrace",
    version,
    about = "Inspect runtrace trace files (trace.N.bin) and instrumented binaries."
)]
pub struct Cli {
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The `runtrace` commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Validate trace files and print a summary (exit 1 if any is damaged).
    Check(check::Args),
    /// Convert trace files to JSON Lines: one object per event, in timestamp
    /// order across threads and files.
    Jsonl(jsonl::Args),
    /// Report the runtrace probes a binary carries (USDT/SDT, perf-probe
    /// functions, LTTng-UST) and whether tracers can attach to them, with the
    /// exact fix when not (exit 1 on any problem).
    /// Also reports CPU-profile readiness (frame pointers, symbols, debug
    /// info), advisory: it does not change the exit code.
    Doctor(doctor::Args),
    /// Analyse trace files: workers, spawn locations, wake->poll delays and
    /// poll durations, and findings naming the spawn locations responsible
    /// (exit 1 if a file is damaged; the report covers what was readable).
    Analyze(analyze::Args),
    /// Queues, locks, I/O and heartbeats from runtrace-sync's events, and
    /// the ranked root causes (consumer stall, lock contention, I/O
    /// blocking, processing slowdown) of every backlog trigger (exit 1 if a
    /// file is damaged).
    Backlog(backlog::Args),
    /// Convert trace files to a Perfetto timeline (open it in
    /// ui.perfetto.dev): a slice per poll, parks, wake->poll flows, queue
    /// counters, application events (exit 1 if a file is damaged; what was
    /// readable is converted).
    Perfetto(perfetto::Args),
    /// Write a self-contained HTML report: findings, per-worker utilisation,
    /// wake->poll and poll-duration histograms, top spawn locations, the
    /// backlog timeline (exit 1 if a file is damaged; the page covers what
    /// was readable).
    Report(report::Args),
    /// Recordings, duration, event counts, and which analyses apply to the
    /// trace and why not (exit 1 if a file is damaged).
    Summary(summary::Args),
    /// Statistical outliers of wake->poll delay, poll duration and CPU
    /// share, per spawn location and per task (exit 1 if a file is damaged).
    Outliers(outliers::Args),
    /// Serve MCP (JSON-RPC 2.0) on standard input and output: load traces
    /// and query them from AI agents and tools (docs/mcp.md).
    Mcp,
    /// The CPU profile as folded stacks (--folded, inferno's `a;b;c N`,
    /// root first) and/or an SVG flame graph (-o), filtered by spawn
    /// location, worker and time (exit 1 when no sample is selected).
    Flamegraph(flamegraph::Args),
    /// Every period a task waited more than a threshold from wake to poll,
    /// and what the worker that finally polled it ran meanwhile: its CPU
    /// samples as top functions per culprit spawn location.
    Blocked(blocked::Args),
    /// Watch a recording live as it is written, or replay a finished one
    /// (pause, step back, seek): workers, spawn locations and findings over
    /// a sliding window. Without a terminal, or with --once, prints one
    /// window (text or --json).
    Top(top::Args),
    /// Export recordings for other tools (`runtrace export parquet`).
    #[cfg(feature = "parquet")]
    #[command(subcommand)]
    Export(export::Format),
    /// Pull sealed segments that the recorder's object-store sink shipped
    /// (service=/host=/date=/trace-TS-N.bin) from URL (file:///dir,
    /// s3://bucket/prefix) into DIR, where every command reads them
    /// (exit 1 on an error or when nothing matched).
    #[cfg(feature = "object-store")]
    Fetch(fetch::Args),
}

/// Runs a parsed command line and returns the process exit code: 0 for
/// success, 1 when a trace is damaged, a binary's probes are unsound, or a
/// file cannot be read or written.
/// (Usage errors never get here: clap exits with 2 while parsing.)
pub fn run(cli: Cli) -> ExitCode {
    let reads = match &cli.command {
        Command::Analyze(analyze::Args { traces, .. })
        | Command::Backlog(backlog::Args { traces, .. })
        | Command::Perfetto(perfetto::Args { traces, .. })
        | Command::Report(report::Args { traces, .. })
        | Command::Summary(summary::Args { traces, .. })
        | Command::Outliers(outliers::Args { traces, .. })
        | Command::Flamegraph(flamegraph::Args { traces, .. })
        | Command::Blocked(blocked::Args { traces, .. }) => Some(traces),
        #[cfg(feature = "parquet")]
        Command::Export(export::Format::Parquet(a)) => Some(&a.traces),
        _ => None,
    };
    if let Some(Err(code)) = reads.map(output::Traces::readable) {
        return code;
    }
    match cli.command {
        Command::Check(a) => check::run(&a),
        Command::Jsonl(a) => jsonl::run(&a),
        Command::Analyze(a) => analyze::run(&a),
        Command::Doctor(a) => doctor::run(&a),
        Command::Backlog(a) => backlog::run(&a),
        Command::Perfetto(a) => perfetto::run(&a),
        Command::Report(a) => report::run(&a),
        Command::Summary(a) => summary::run(&a),
        Command::Outliers(a) => outliers::run(&a),
        Command::Mcp => mcp::run(),
        Command::Flamegraph(a) => flamegraph::run(&a),
        Command::Blocked(a) => blocked::run(&a),
        Command::Top(a) => top::run(&a),
        #[cfg(feature = "parquet")]
        Command::Export(f) => export::run(&f),
        #[cfg(feature = "object-store")]
        Command::Fetch(a) => fetch::run(&a),
    }
}
