//! `runtrace export parquet DIR|FILE... -o DATASET [--service NAME]
//! [--host NAME] [--replace]`: recordings into a Hive-partitioned Parquet
//! dataset (runtrace-parquet; docs/parquet.md).
//!
use crate::output::{fail, print_errors, print_notes, Traces};
use clap::Subcommand;
use runtrace_parquet::{export, ExportOptions};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// The formats of `runtrace export`.
#[derive(Debug, Subcommand)]
pub enum Format {
    /// Hive-partitioned Parquet tables (polls, tasks, workers, queues,
    /// lock_events, io_events, backlog_triggers, queue_snapshots) under
    /// DATASET/TABLE/service=S/host=H/date=D/, for DuckDB, Spark,
    /// Trino/Athena (docs/parquet.md). Exit 1 if a file is damaged (what
    /// was readable is exported) or the export fails (nothing written).
    Parquet(ParquetArgs),
}

/// Arguments of `runtrace export parquet`.
#[derive(Debug, Clone, clap::Args)]
pub struct ParquetArgs {
    /// The trace files; several recordings may be given.
    #[command(flatten)]
    pub traces: Traces,
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

/// Runs `runtrace export FORMAT ...`.
pub fn run(format: &Format) -> ExitCode {
    match format {
        Format::Parquet(a) => parquet(a),
    }
}

/// `runtrace export parquet`: exit 0, or 1 when an input file was damaged
/// (what was readable is exported) or the export failed (nothing written).
fn parquet(a: &ParquetArgs) -> ExitCode {
    let opts = ExportOptions {
        service: a.service.clone(),
        host: a.host.clone(),
        replace: a.replace,
    };
    let files = a.traces.expand();
    if let Err(e) = runtrace_format::output::refuse_input(&a.output, &files) {
        return fail(&e);
    }
    match export(&files, &a.output, &opts) {
        // The message says what, if anything, was written.
        Err(e) => fail(&e),
        Ok(s) => {
            let _ = writeln!(std::io::stdout().lock(), "{}", s.line(&a.output));
            print_errors(&s.errors, true);
            print_notes(&s.notes);
            if s.damaged {
                fail("damaged input: the dataset holds what was readable")
            } else {
                ExitCode::SUCCESS
            }
        }
    }
}
