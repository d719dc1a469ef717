//! The `runtrace` command-line tool, as a library.
//!
//! The binary (`src/main.rs`) only parses arguments and calls [`run`]; the
//! commands live here so that other front ends (the repository's
//! `examples/trace_to_jsonl.rs`, tests, other tools) reuse exactly the same
//! logic:
//!
//! - [`check`]: validate trace files and summarise them (`runtrace check`);
//! - [`jsonl`]: convert traces to JSON Lines in timestamp order
//!   (`runtrace jsonl`);
//! - [`analyze`]: per-worker and per-spawn-location statistics and
//!   findings (long polls, wake delays, queue buildup, ...) in one streaming
//!   pass (`runtrace analyze`);
//! - [`backlog`]: queues, locks, I/O, heartbeats and the ranked root
//!   causes of each backlog trigger, from runtrace-sync's events
//!   (`runtrace backlog`);
//! - [`doctor`]: list the runtrace probes a binary carries (USDT, perf-probe
//!   functions, LTTng-UST) and check that tracers can attach to them
//!   (`runtrace doctor`).
//! - [`export`]: recordings into a Hive-partitioned Parquet dataset for
//!   DuckDB, Spark, Trino/Athena (`runtrace export parquet`; cargo
//!   feature `parquet`, on by default).
//!
//! ```no_run
//! use clap::Parser;
//! let cli = runtrace_cli::Cli::parse_from(["runtrace", "check", "--json", "trace.0.bin"]);
//! let code = runtrace_cli::run(cli);
//! # let _ = code;
//! ```

#![warn(missing_docs)]

use clap::{Args, Parser, Subcommand};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub mod analyze;
pub mod backlog;
pub mod check;
pub mod doctor;
#[cfg(feature = "parquet")]
pub mod export;
pub mod jsonl;
mod output;
mod per_schema;

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
    Check(CheckArgs),
    /// Convert trace files to JSON Lines: one object per event, in timestamp
    /// order across threads and files.
    Jsonl(JsonlArgs),
    /// Report the runtrace probes a binary carries (USDT/SDT, perf-probe
    /// functions, LTTng-UST) and whether tracers can attach to them, with the
    /// exact fix when not (exit 1 on any problem).
    Doctor(DoctorArgs),
    /// Analyse trace files: workers, spawn locations, wake->poll delays and
    /// poll durations, and findings naming the spawn locations responsible
    /// (exit 1 if a file is damaged; the report covers what was readable).
    Analyze(AnalyzeArgs),
    /// Queues, locks, I/O and heartbeats from runtrace-sync's events, and
    /// the ranked root causes (consumer stall, lock contention, I/O
    /// blocking, processing slowdown) of every backlog trigger (exit 1 if a
    /// file is damaged).
    Backlog(BacklogArgs),
    /// Export recordings for other tools (`runtrace export parquet`).
    #[cfg(feature = "parquet")]
    #[command(subcommand)]
    Export(ExportFormat),
}

/// The formats of `runtrace export`.
#[cfg(feature = "parquet")]
#[derive(Debug, Subcommand)]
pub enum ExportFormat {
    /// Hive-partitioned Parquet tables (polls, tasks, workers, queues,
    /// lock_events, io_events, backlog_triggers, queue_snapshots) under
    /// DATASET/<table>/service=S/host=H/date=D/, for DuckDB, Spark,
    /// Trino/Athena (docs/parquet.md). Exit 1 if a file is damaged (what
    /// was readable is exported) or the export fails (nothing written).
    Parquet(ParquetArgs),
}

/// Arguments of `runtrace export parquet`.
#[cfg(feature = "parquet")]
#[derive(Debug, Clone, Args)]
pub struct ParquetArgs {
    /// Trace files (trace.0.bin ...) in any order, or directories holding
    /// them; several recordings may be given.
    #[arg(required = true, value_name = "DIR|FILE")]
    pub files: Vec<PathBuf>,
    /// The dataset's root directory (created if missing; other exports
    /// there are kept).
    #[arg(short = 'o', long = "output", value_name = "DATASET", required = true)]
    pub output: PathBuf,
    /// The `service` partition (default: each recording's process name).
    #[arg(long, value_name = "NAME")]
    pub service: Option<String>,
    /// The `host` partition (default: this machine's host name).
    #[arg(long, value_name = "NAME")]
    pub host: Option<String>,
    /// Replace recordings already in the dataset instead of refusing them.
    #[arg(long)]
    pub replace: bool,
}

/// Arguments of `runtrace backlog`.
#[derive(Debug, Clone, Args)]
pub struct BacklogArgs {
    /// Trace files (trace.0.bin trace.1.bin ...) in any order, or
    /// directories holding them.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Print one JSON object instead of the text report.
    #[arg(long)]
    pub json: bool,
    /// Width of the producer/consumer rate windows (e.g. 1s, 500ms).
    #[arg(long, value_name = "DUR", default_value = "1s", value_parser = backlog::parse_duration)]
    pub window: u64,
    /// How far before each trigger to look for its causes (e.g. 2s).
    #[arg(long, value_name = "DUR", default_value = "2s", value_parser = backlog::parse_duration)]
    pub lookback: u64,
}

/// Arguments of `runtrace analyze`.
#[derive(Debug, Clone, Args)]
pub struct AnalyzeArgs {
    /// Trace files (trace.0.bin trace.1.bin ...) in any order, or
    /// directories holding them.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Print one JSON object instead of the text report.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `runtrace check`.
#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    /// Trace files (trace.0.bin trace.1.bin ...), or directories holding
    /// them.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Print one JSON object instead of the text summary.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `runtrace jsonl`.
#[derive(Debug, Clone, Args)]
pub struct JsonlArgs {
    /// Trace files of one recording, in any order (sorted by N in
    /// trace.N.bin), or its directory.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Write to OUT instead of standard output ("-" is standard output).
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    pub output: Option<PathBuf>,
}

/// Arguments of `runtrace doctor`.
#[derive(Debug, Clone, Args)]
pub struct DoctorArgs {
    /// The executable or shared library to inspect.
    #[arg(value_name = "BINARY")]
    pub binary: PathBuf,
    /// Print one JSON object instead of the text report.
    #[arg(long)]
    pub json: bool,
}

/// Runs a parsed command line and returns the process exit code: 0 for
/// success, 1 when a trace is damaged, a binary's probes are unsound, or a
/// file cannot be read or written.
/// (Usage errors never get here: clap exits with 2 while parsing.)
pub fn run(cli: Cli) -> ExitCode {
    // A recording's directory stands for its trace.N.bin files everywhere.
    let mut command = cli.command;
    if let Command::Check(CheckArgs { files, .. })
    | Command::Jsonl(JsonlArgs { files, .. })
    | Command::Analyze(AnalyzeArgs { files, .. }) = &mut command
    {
        // A directory without any stays, for the command to report as a
        // path that is not a trace file, beside the other paths' results.
        *files = std::mem::take(files)
            .into_iter()
            .flat_map(|p| backlog::expand(std::slice::from_ref(&p)).unwrap_or_else(|_| vec![p]))
            .collect();
    }
    match command {
        Command::Check(a) => check::run(&a),
        Command::Jsonl(a) => jsonl::run(&a),
        Command::Analyze(a) => analyze::run(&a),
        Command::Doctor(a) => doctor::run(&a),
        Command::Backlog(a) => backlog::run(&a),
        #[cfg(feature = "parquet")]
        Command::Export(ExportFormat::Parquet(mut a)) => {
            a.files = a
                .files
                .into_iter()
                .flat_map(|p| backlog::expand(std::slice::from_ref(&p)).unwrap_or_else(|_| vec![p]))
                .collect();
            export::run(&ExportFormat::Parquet(a))
        }
    }
}

/// Why `path` cannot be read as a trace file, as a message naming it, or
/// `None` if it looks readable. Checked up front so that a typo in one path
/// gives a clear message instead of a low-level read error.
pub(crate) fn unreadable(path: &Path) -> Option<String> {
    match std::fs::metadata(path) {
        Err(e) => Some(format!("{}: cannot open: {e}", path.display())),
        Ok(m) if m.is_dir() => Some(format!(
            "{}: is a directory, not a trace file",
            path.display()
        )),
        Ok(_) => None,
    }
}
