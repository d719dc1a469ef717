//! `runtrace analyze`: the report of `runtrace_analyze` as text or JSON,
//! or with `--all` every applicable analysis of the registry over one
//! read, with a progress bar on standard error for large inputs when it
//! is a terminal.

use crate::output::{print_notes, print_report, with_progress, Traces};
use runtrace_analyze::functions::StackNames;
use runtrace_analyze::registry;
use runtrace_analyze::reports::{OneRead, Reports};
use runtrace_analyze::runtime::analyze_files_profiled;
use runtrace_analyze::Options;
use std::process::ExitCode;

/// Arguments of `runtrace analyze`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// The trace files.
    #[command(flatten)]
    pub traces: Traces,
    /// Print one JSON object instead of the text report.
    #[arg(long)]
    pub json: bool,
    /// Run every applicable analysis (summary, analyze, backlog, blocked,
    /// outliers) over one read and print one JSON object.
    #[arg(long)]
    pub all: bool,
}

/// `runtrace analyze FILE... [--json] [--all]`: prints the report to
/// standard output and damage to standard error. With CPU samples in the
/// trace, findings name the functions of the blamed locations' polls
/// (symbolization problems are printed once on standard error). Exit code
/// 0, or 1 when a file was damaged or cut short (the report still covers
/// what was readable).
pub fn run(args: &Args) -> ExitCode {
    let files = args.traces.expand();
    if args.all {
        let r = with_progress("analyzing", &files, |p| OneRead::read(&files, p));
        let text = registry::run_all(&r).to_string();
        return print_report(&text, &r.stats().errors, r.stats().damaged);
    }
    let (mut r, profile) = with_progress("analyzing", &files, |progress| {
        analyze_files_profiled(
            &files,
            Options {
                progress,
                ..Options::default()
            },
        )
    });
    if profile.has_samples() {
        let mut names = StackNames::recorded(&profile);
        r.add_functions(&profile, &mut names);
        print_notes(&names.problems());
    }
    let text = if args.json {
        r.to_json().to_string()
    } else {
        r.to_string()
    };
    print_report(&text, &r.errors, r.is_damaged())
}
