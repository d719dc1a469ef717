//! `runtrace flamegraph`: the CPU profile of a recording as folded stacks
//! (inferno's `a;b;c N`, root first) on standard output and/or an SVG
//! flame graph, filtered by spawn location, worker and time
//! (`runtrace_export::flamegraph`, symbolized with `runtrace_symbolize`).
//!
//! ```no_run
//! use clap::Parser;
//! let cli = runtrace_cli::Cli::parse_from(["runtrace", "flamegraph", "traces/", "--folded", "--location", "handler.rs"]);
//! let _code = runtrace_cli::run(cli);
//! ```

use crate::output::{fail, print_errors, print_notes, Traces};
use clap::ArgGroup;
use runtrace_analyze::functions::StackNames;
use runtrace_export::flamegraph::{fold, stacks, svg_file, why_empty, MemoryView, Selection};
use runtrace_model::parse_seconds;
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
    /// Off-CPU stacks (where threads blocked or were preempted), each weighted by its time off-CPU in µs, instead of on-CPU samples (each counting 1).
    #[arg(long)]
    pub off_cpu: bool,
    /// Bytes allocated (the memory profile's samples, each by the bytes it stands for).
    #[arg(long, conflicts_with_all = ["off_cpu", "live"])]
    pub alloc: bool,
    /// Bytes still live at --at (default: the end); needs a recording with the live set.
    #[arg(long, conflicts_with = "off_cpu")]
    pub live: bool,
    /// With --live: the instant, S seconds after the recording started.
    #[arg(long, value_name = "S", requires = "live", value_parser = parse_seconds)]
    pub at: Option<f64>,
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
    /// A directory to look for the recorded binaries in (by file name or build id) when they are not at their recorded paths; repeatable.
    #[arg(long = "binary-dir", value_name = "DIR")]
    pub binary_dirs: Vec<PathBuf>,
    /// Also show runtrace's own threads (the writer, the queue sampler), left out by default.
    #[arg(long)]
    pub include_runtrace: bool,
}

impl Args {
    /// The samples these arguments select.
    pub fn selection(&self) -> Selection {
        Selection {
            off_cpu: self.off_cpu,
            memory: MemoryView::from_flags(self.alloc, self.live, self.at),
            location: self.location.clone(),
            worker: self.worker,
            from_ns: self.from.map(|s| (s * 1e9) as i64),
            to_ns: self.to.map(|s| (s * 1e9) as i64),
            include_runtrace: self.include_runtrace,
        }
    }
}

/// `runtrace flamegraph DIR|FILE... [--folded] [-o OUT.svg] [--off-cpu | --alloc | --live
/// [--at S]] [--location SUBSTR] [--worker N] [--from S --to S]`: exit 0, or 1 when no sample
/// is selected (the reason on standard error), the SVG cannot be written, or the input is damaged.
pub fn run(args: &Args) -> ExitCode {
    if let Some((a, b)) = args.from.zip(args.to).filter(|(a, b)| a > b) {
        return fail(&format!("--from {a} is after --to {b}"));
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
    let done = print_errors(&profile.stats.errors, profile.stats.damaged);
    if folded.is_empty() {
        return fail(&why_empty(&profile, &sel));
    }
    if args.folded {
        // A closed stdout (`| head`) is not an error worth a panic.
        let _ = std::io::stdout().lock().write_all(folded.as_bytes());
    }
    let drawn = args
        .output
        .as_ref()
        .map(|o| svg_file(&folded, &sel, o, &files));
    if let Some(Err(e)) = drawn {
        return fail(&e);
    }
    done
}
