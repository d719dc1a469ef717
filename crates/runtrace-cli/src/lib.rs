//! The `runtrace` command-line tool: argument parsing ([`Cli`]), one module
//! per command, and shared output helpers. The work itself lives in the
//! libraries, which examples, tests and other tools call directly:
//!
//! - [`check`]: `runtrace check`, rendering `runtrace_format::check`'s
//!   report as text or JSON;
//! - [`jsonl`]: `runtrace jsonl`, `runtrace_export::jsonl::convert`;
//! - [`analyze`]: `runtrace analyze`, the `runtrace_analyze` report (per
//!   worker and spawn location, findings) with a progress bar;
//! - [`backlog`]: `runtrace backlog`, queues, locks, I/O, heartbeats and
//!   the ranked root causes of each backlog trigger;
//! - [`doctor`]: `runtrace doctor`, `runtrace_doctor`'s report on the
//!   probes a binary carries;
//! - [`perfetto`]: `runtrace perfetto`, `runtrace_export::perfetto::convert`
//!   (a timeline for ui.perfetto.dev);
//! - [`report`]: `runtrace report`, `runtrace_export::report::write` (one
//!   self-contained HTML page).
//! - [`summary`]: `runtrace summary`, recordings, event counts and which
//!   analyses apply (`runtrace_analyze::summary`);
//! - [`outliers`]: `runtrace outliers`, statistical outliers of wake->poll
//!   delay, poll duration and CPU share (`runtrace_analyze::outliers`);
//! - [`mcp`]: `runtrace mcp`, the MCP server over stdio (`runtrace_mcp`);
//! - [`flamegraph`]: `runtrace flamegraph`, folded stacks and SVG flame
//!   graphs of the CPU profile (`runtrace_export::flamegraph`);
//! - [`blocked`]: `runtrace blocked`, what the workers ran while tasks
//!   waited to be polled (`runtrace_analyze::blocked`);
//! - `export`: `runtrace export parquet`, recordings into a Hive-partitioned
//!   Parquet dataset for DuckDB, Spark, Trino/Athena (`runtrace_parquet`;
//!   cargo feature `parquet`, on by default).
//!
//! A recording's directory stands for its `trace.N.bin` files
//! (`runtrace_format::files`).
//!
//! ```no_run
//! use clap::Parser;
//! let cli = runtrace_cli::Cli::parse_from(["runtrace", "check", "--json", "trace.0.bin"]);
//! let code = runtrace_cli::run(cli);
//! # let _ = code;
//! ```

#![warn(missing_docs)]

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

pub mod analyze;
pub mod backlog;
pub mod blocked;
pub mod check;
pub mod doctor;
#[cfg(feature = "parquet")]
pub mod export;
pub mod flamegraph;
pub mod jsonl;
pub mod mcp;
pub mod outliers;
mod output;
pub mod perfetto;
pub mod report;
pub mod summary;

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
    /// Also reports CPU-profile readiness (frame pointers, symbols, debug
    /// info), advisory: it does not change the exit code.
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
    /// Convert trace files to a Perfetto timeline (open it in
    /// ui.perfetto.dev): a slice per poll, parks, wake->poll flows, queue
    /// counters, application events (exit 1 if a file is damaged; what was
    /// readable is converted).
    Perfetto(PerfettoArgs),
    /// Write a self-contained HTML report: findings, per-worker utilisation,
    /// wake->poll and poll-duration histograms, top spawn locations, the
    /// backlog timeline (exit 1 if a file is damaged; the page covers what
    /// was readable).
    Report(ReportArgs),
    /// Recordings, duration, event counts, and which analyses apply to the
    /// trace and why not (exit 1 if a file is damaged).
    Summary(SummaryArgs),
    /// Statistical outliers of wake->poll delay, poll duration and CPU
    /// share, per spawn location and per task (exit 1 if a file is damaged).
    Outliers(OutliersArgs),
    /// Serve MCP (JSON-RPC 2.0) on standard input and output: load traces
    /// and query them from AI agents and tools (docs/mcp.md).
    Mcp,
    /// The CPU profile as folded stacks (--folded, inferno's `a;b;c N`,
    /// root first) and/or an SVG flame graph (-o), filtered by spawn
    /// location, worker and time (exit 1 when no sample is selected).
    Flamegraph(flamegraph::FlamegraphArgs),
    /// Every period a task waited more than a threshold from wake to poll,
    /// and what the worker that finally polled it ran meanwhile: its CPU
    /// samples as top functions per culprit spawn location.
    Blocked(blocked::BlockedArgs),
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

/// Arguments of `runtrace perfetto`.
#[derive(Debug, Clone, Args)]
pub struct PerfettoArgs {
    /// Trace files (trace.0.bin trace.1.bin ...) in any order, or
    /// directories holding them.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// The Perfetto trace to write (e.g. trace.pftrace).
    #[arg(short = 'o', long = "output", value_name = "OUT", required = true)]
    pub output: PathBuf,
}

/// Arguments of `runtrace report`.
#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    /// Trace files (trace.0.bin trace.1.bin ...) in any order, or
    /// directories holding them.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// The HTML page to write (e.g. report.html).
    #[arg(short = 'o', long = "output", value_name = "OUT", required = true)]
    pub output: PathBuf,
}

/// Arguments of `runtrace summary`.
#[derive(Debug, Clone, Args)]
pub struct SummaryArgs {
    /// Trace files (trace.0.bin trace.1.bin ...) in any order, or
    /// directories holding them.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Print one JSON object instead of the text summary.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `runtrace outliers`.
#[derive(Debug, Clone, Args)]
pub struct OutliersArgs {
    /// Trace files (trace.0.bin trace.1.bin ...) in any order, or
    /// directories holding them.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// iqr (beyond Q1-1.5 IQR / Q3+1.5 IQR), mad (modified z-score > 3.5),
    /// stddev (beyond 3 sigma) or percentile (above p99).
    #[arg(long, value_name = "METHOD", default_value = "iqr", value_parser = runtrace_analyze::outliers::Method::parse)]
    pub method: runtrace_analyze::outliers::Method,
    /// latency (wake->poll delay), poll (poll duration), cpu (CPU share per
    /// 10 ms window) or all.
    #[arg(long, value_name = "CATEGORY", default_value = "all", value_parser = runtrace_analyze::outliers::Category::parse)]
    pub category: runtrace_analyze::outliers::Category,
    /// Print at most this many outliers per category (the strongest; the
    /// report says how many there are).
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub limit: usize,
    /// Print one JSON object instead of the text report.
    #[arg(long)]
    pub json: bool,
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
    /// Run every applicable analysis (summary, analyze, backlog, outliers)
    /// over one read and print one JSON object.
    #[arg(long)]
    pub all: bool,
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
    | Command::Analyze(AnalyzeArgs { files, .. })
    | Command::Perfetto(PerfettoArgs { files, .. })
    | Command::Report(ReportArgs { files, .. })
    | Command::Summary(SummaryArgs { files, .. })
    | Command::Outliers(OutliersArgs { files, .. }) = &mut command
    {
        *files = runtrace_format::files::expand_lenient(std::mem::take(files));
    }
    match command {
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
        #[cfg(feature = "parquet")]
        Command::Export(ExportFormat::Parquet(mut a)) => {
            a.files = runtrace_format::files::expand_lenient(std::mem::take(&mut a.files));
            export::run(&ExportFormat::Parquet(a))
        }
    }
}
