//! `runtrace outliers`: statistical outliers of wake->poll delay, poll
//! duration and CPU share per spawn location and per task
//! (`runtrace_analyze::outliers`), as text or JSON.

use crate::output::{print_report, with_progress, Traces};
use runtrace_analyze::outliers::{text, Category, Method, Outliers};
use runtrace_model::input;
use std::process::ExitCode;

/// Arguments of `runtrace outliers`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// The trace files.
    #[command(flatten)]
    pub traces: Traces,
    /// iqr (beyond Q1-1.5 IQR / Q3+1.5 IQR), mad (modified z-score > 3.5),
    /// stddev (beyond 3 sigma) or percentile (above p99).
    #[arg(long, value_name = "METHOD", default_value = "iqr", value_parser = Method::parse)]
    pub method: Method,
    /// latency (wake->poll delay), poll (poll duration), cpu (CPU share per
    /// 10 ms window) or all.
    #[arg(long, value_name = "CATEGORY", default_value = "all", value_parser = Category::parse)]
    pub category: Category,
    /// Print at most this many outliers per category (the strongest; the
    /// report says how many there are).
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub limit: usize,
    /// Print one JSON object instead of the text report.
    #[arg(long)]
    pub json: bool,
}

/// `runtrace outliers FILE... [--method M] [--category C] [--limit N] [--json]`.
pub fn run(args: &Args) -> ExitCode {
    let files = input::sorted(&args.traces.expand());
    let (r, stats) = with_progress("reading", &files, |progress| {
        let mut o = Outliers::default();
        let (model, stats) = input::read(&files, &mut o, progress);
        (
            o.report(&model, args.method, args.category, args.limit),
            stats,
        )
    });
    let out = if args.json { r.to_string() } else { text(&r) };
    print_report(&out, &stats.errors, stats.damaged)
}
