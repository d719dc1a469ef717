//! `runtrace blocked`: every period a task waited more than a threshold
//! from its wake to its poll, and what the worker that finally polled it
//! ran meanwhile: its on-CPU samples, blamed on the spawn locations whose
//! polls they were taken in, as top functions (self and inclusive)
//! (`runtrace_analyze::blocked`), as text or JSON, and optionally as
//! folded stacks.
//!
//! ```no_run
//! use clap::Parser;
//! let cli = runtrace_cli::Cli::parse_from(["runtrace", "blocked", "traces/", "--threshold-ms", "20"]);
//! let code = runtrace_cli::run(cli);
//! # let _ = code;
//! ```

use crate::output::{fail, print_report, Traces};
use runtrace_analyze::blocked::{analyze_files, BlockedOptions};
use runtrace_format::output::{refuse_input, write_atomic};
use runtrace_symbolize::SymbolizeOptions;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `runtrace blocked`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// The trace files.
    #[command(flatten)]
    pub traces: Traces,
    /// A task that waited longer than this many milliseconds from its wake
    /// to its poll is blocked.
    #[arg(long, value_name = "MS", default_value = "10", value_parser = parse_ms, allow_hyphen_values = true)]
    pub threshold_ms: f64,
    /// Print one JSON object instead of the text report.
    #[arg(long)]
    pub json: bool,
    /// Also write the folded stacks of the blamed samples here (root
    /// frame: the culprit spawn location), for a flame graph.
    #[arg(long, value_name = "FILE")]
    pub folded_out: Option<PathBuf>,
    /// A directory to look for the recorded binaries in (by file name or
    /// build id) when they are not at their recorded paths; repeatable.
    #[arg(long = "binary-dir", value_name = "DIR")]
    pub binary_dirs: Vec<PathBuf>,
}

/// Parses `--threshold-ms`: a positive, finite number of milliseconds.
pub fn parse_ms(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("\"{s}\" is not a positive number of milliseconds")),
    }
}

/// `runtrace blocked DIR|FILE... [--threshold-ms 10] [--json]
/// [--folded-out FILE]`: exit 0, or 1 when the input is damaged (the
/// report covers what was readable) or FILE cannot be written.
pub fn run(args: &Args) -> ExitCode {
    let files = args.traces.expand();
    let opts = BlockedOptions {
        threshold_ns: (args.threshold_ms * 1e6) as u64,
        ..BlockedOptions::default()
    };
    let sym = SymbolizeOptions {
        search_dirs: args.binary_dirs.clone(),
    };
    let (r, profile, mut names) = analyze_files(&files, &opts, sym);
    if let Some(out) = &args.folded_out {
        let text = r.folded(&profile, &mut names);
        if let Err(e) = refuse_input(out, &files).and_then(|()| write_atomic(out, text.as_bytes()))
        {
            return fail(&e);
        }
    }
    let text = if args.json {
        r.to_json().to_string()
    } else {
        r.to_string()
    };
    print_report(&text, &r.errors, r.damaged)
}
