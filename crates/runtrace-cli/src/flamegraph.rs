//! `runtrace flamegraph`: the CPU profile of a recording as folded stacks
//! (inferno's `a;b;c N`, root first) on standard output and/or an SVG
//! flame graph, filtered by spawn location, worker and time
//! (`runtrace_export::flamegraph`, symbolized with `runtrace_symbolize`).
//!
//! ```no_run
//! use clap::Parser;
//! let cli = runtrace_cli::Cli::parse_from(["runtrace", "flamegraph", "traces/", "--folded", "--location", "handler.rs"]);
//! let code = runtrace_cli::run(cli);
//! # let _ = code;
//! ```

use crate::output::{fail, print_notes, Traces};
use clap::ArgGroup;
use runtrace_analyze::functions::StackNames;
use runtrace_export::flamegraph::{fold, stacks, svg, why_empty, Selection};
use runtrace_format::output::{refuse_input, write_atomic};
use runtrace_symbolize::SymbolizeOptions;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `runtrace flamegraph`.
#[derive(Debug, Clone, clap::Args)]
#[command(group(ArgGroup::new("out").required(true).multiple(true).args(["folded", "output"])))]
pub struct Args {
    /// The trace files.
    #[command(flatten)]
    pub traces: Traces,
    /// Print folded stacks (`root;...;leaf COUNT`, one line per stack) on
    /// standard output.
    #[arg(long)]
    pub folded: bool,
    /// Write an SVG flame graph here.
    #[arg(short = 'o', long = "output", value_name = "OUT.svg")]
    pub output: Option<PathBuf>,
    /// Off-CPU stacks (where threads blocked or were preempted), each weighted by its time
    /// off-CPU in microseconds, instead of on-CPU samples (each counting
    /// 1).
    #[arg(long)]
    pub off_cpu: bool,
    /// Only samples taken inside polls of tasks whose spawn location
    /// (file:line:col) contains SUBSTR.
    #[arg(long, value_name = "SUBSTR")]
    pub location: Option<String>,
    /// Only samples taken inside polls run by worker N.
    #[arg(long, value_name = "N")]
    pub worker: Option<u32>,
    /// Only samples from S seconds after the recording started on.
    #[arg(long, value_name = "S", value_parser = parse_seconds, allow_hyphen_values = true)]
    pub from: Option<f64>,
    /// Only samples up to S seconds after the recording started.
    #[arg(long, value_name = "S", value_parser = parse_seconds, allow_hyphen_values = true)]
    pub to: Option<f64>,
    /// A directory to look for the recorded binaries in (by file name or
    /// build id) when they are not at their recorded paths; repeatable.
    #[arg(long = "binary-dir", value_name = "DIR")]
    pub binary_dirs: Vec<PathBuf>,
    /// Also show runtrace's own threads (the writer, the queue sampler),
    /// left out by default.
    #[arg(long)]
    pub include_runtrace: bool,
}

/// Parses seconds since the recording started (`--from`, `--to`): a
/// finite number, zero or more.
pub fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!(
            "\"{s}\" is not a number of seconds since the recording started (like 1.5)"
        )),
    }
}

impl Args {
    /// The samples these arguments select.
    pub fn selection(&self) -> Selection {
        Selection {
            off_cpu: self.off_cpu,
            location: self.location.clone(),
            worker: self.worker,
            from_ns: self.from.map(|s| (s * 1e9) as i64),
            to_ns: self.to.map(|s| (s * 1e9) as i64),
            include_runtrace: self.include_runtrace,
        }
    }
}

/// `runtrace flamegraph DIR|FILE... [--folded] [-o OUT.svg] [--off-cpu]
/// [--location SUBSTR] [--worker N] [--from S --to S]`: exit 0, or 1 when
/// no sample is selected (the reason on standard error), the SVG cannot
/// be written, or the input is damaged (what was readable is drawn).
pub fn run(args: &Args) -> ExitCode {
    if let (Some(a), Some(b)) = (args.from, args.to) {
        if a > b {
            return fail(&format!("--from {a} is after --to {b}"));
        }
    }
    let files = args.traces.expand();
    let profile = match runtrace_model::profile::load(&files) {
        Ok(p) => p,
        Err(e) => return fail(&e.to_string()),
    };
    let sel = args.selection();
    let mut names = StackNames::for_mappings(
        &profile.mappings,
        SymbolizeOptions {
            search_dirs: args.binary_dirs.clone(),
        },
    );
    let folded = fold(stacks(&profile, &sel, &mut names));
    print_notes(&profile.notes);
    print_notes(&names.problems());
    // Damage (file and byte offset): what was readable is still drawn,
    // and the exit code says the input was damaged.
    for e in &profile.stats.errors {
        let _ = writeln!(std::io::stderr().lock(), "error: {e}");
    }
    let done = if profile.stats.damaged {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    };
    if folded.is_empty() {
        return fail(&why_empty(&profile, &sel));
    }
    if args.folded {
        // A closed stdout (`| head`) is not an error worth a panic.
        let _ = std::io::stdout().lock().write_all(folded.as_bytes());
    }
    if let Some(out) = &args.output {
        let title = match (&sel.location, sel.off_cpu) {
            (Some(l), false) => format!("on-CPU samples in polls of {l}"),
            (Some(l), true) => format!("off-CPU time in polls of {l}"),
            (None, false) => "on-CPU samples".to_string(),
            (None, true) => "off-CPU time".to_string(),
        };
        let mut bytes = Vec::new();
        let written = svg(&folded, &title, sel.count_name(), &mut bytes)
            .map_err(|e| format!("{}: {e}", out.display()))
            .and_then(|()| refuse_input(out, &files))
            .and_then(|()| write_atomic(out, &bytes));
        if let Err(e) = written {
            return fail(&e);
        }
    }
    done
}
