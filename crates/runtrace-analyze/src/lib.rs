//! Streaming analysis of runtrace traces (`runtrace analyze`,
//! `runtrace backlog`).
//!
//! The trace model (reading, ordering, the `Model`, the `Pass` trait, event
//! kinds, histograms, the synthetic trace builder) is `runtrace_model`;
//! the analyses here are passes over it. Data flow first:
//! - [`runtime`] is the pass of `runtrace analyze`: per worker and per spawn
//!   location, polls, busy time, wake->poll delays and poll durations in
//!   fixed-size `Histogram`s, and *findings* (long polls, wake
//!   delays, local queue buildup, worker imbalance, idle workers while work
//!   is queued, CPU-bound spawn locations), each naming the spawn locations
//!   responsible and the evidence.
//! - [`spans`] is the span table of `runtrace analyze` (the application's
//!   `tracing` spans by label: wall, busy and delay suffered; which spans
//!   each spawn location served, named in findings), fed by [`runtime`]'s
//!   pass.
//! - [`backlog`] is the pass of `runtrace backlog`: queues, locks, I/O and
//!   a root-cause verdict for every backlog trigger.
//! - [`counts`] (events by kind, beside every read) and [`outliers`]
//!   (IQR, MAD, stddev, percentile over wake->poll delays, poll durations
//!   and CPU shares) are passes too; [`summary`] joins the counts with the
//!   model (`runtrace summary`).
//! - [`reports`] holds one trace's reports from one read; [`params`] and
//!   [`views`] are the MCP tools' parameters and answers over them, and
//!   [`registry`], above them all, lists every analysis once.
//! - [`folded`] selects CPU-profile samples and folds their stacks
//!   (`runtrace flamegraph`, the MCP `get_flamegraph`).
//! - [`functions`] names CPU-profile stacks (runtrace-symbolize) and tallies top functions, which
//!   the findings of [`runtime`] carry (`Report::add_functions`) and
//!   [`blocked`] (`runtrace blocked`: what workers ran while tasks waited)
//!   reports per culprit location.
//! - [`index`] keeps a whole trace in memory for many questions
//!   (`runtrace mcp`): every pass can replay it, and [`query`] answers
//!   event queries and task timelines over it.
//!
//! `runtime` and `backlog` do not know each other; [`analyze_with_backlog`]
//! runs both over one read. docs/analysis.md defines every number and
//! every JSON key.
//!
//! ```
//! use runtrace_analyze::{analyze_bytes, Options};
//! use runtrace_model::synth::TraceBuilder;
//! let mut b = TraceBuilder::new();
//! b.location(1, "src/main.rs", 10, 5);
//! b.spawn(7, 1_000, 1, 0, 1, 0);
//! b.poll_start(7, 0, 2_000, 1, 0, 0);
//! b.poll_end(7, 0, 60_000_000, 1, true); // a 60 ms poll
//! b.terminate(7, 60_000_000, 1);
//! let report = analyze_bytes(&b.finish(), Options::default());
//! assert_eq!(report.poll_ns.max, 59_998_000);
//! assert!(report.findings.iter().any(|f| f.kind.as_str() == "long_poll"));
//! ```

#![warn(missing_docs)]

pub mod backlog;
pub mod blocked;
pub mod counts;
pub mod folded;
pub mod functions;
pub mod index;
pub mod memory;
pub mod outliers;
pub mod params;
pub mod query;
pub mod registry;
pub mod reports;
pub mod runtime;
pub mod spans;
pub mod summary;
mod text;
pub mod views;

pub use runtime::{
    analyze_bytes, analyze_files, Finding, FindingKind, LocationReport, Options, ProcessReport,
    QueueReport, Report, Severity, Thresholds, WorkerId, WorkerReport, FIX_FIRST,
};

pub use runtrace_model::fmt_ns;

/// A read that found no trace at all (see `runtrace_model::profile::load`).
pub use runtrace_model::profile::Error;

use std::path::Path;

/// `runtrace analyze` and `runtrace backlog` over ONE read of the files:
/// the same reports as [`analyze_files`] and [`backlog::analyze_files`].
///
/// ```
/// use runtrace_analyze::{analyze_with_backlog, backlog::BacklogOptions};
/// use runtrace_model::synth::TraceBuilder;
/// let mut b = TraceBuilder::new();
/// b.string(1, "jobs");
/// b.enqueue(1, 1_000, 1, 1, 1);
/// b.poll_start(1, 0, 2_000, 7, 0, 0);
/// b.poll_end(1, 0, 5_000, 7, true);
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("trace.0.bin");
/// std::fs::write(&path, b.finish()).unwrap();
/// let (r, b) = analyze_with_backlog(&[path], Options::default(), &BacklogOptions::default());
/// assert_eq!(r.poll_ns.max, 3_000);
/// assert_eq!(b.queues[0].enqueued, 1);
/// # use runtrace_analyze::Options;
/// ```
pub fn analyze_with_backlog<P: AsRef<Path>>(
    paths: &[P],
    opts: Options<'_>,
    backlog_opts: &backlog::BacklogOptions,
) -> (Report, backlog::BacklogReport) {
    let paths = runtrace_model::input::sorted(paths);
    let mut passes = (
        runtime::Engine::new(opts.thresholds),
        backlog::Backlog::new(backlog_opts),
    );
    let (model, stats) = runtrace_model::input::read(&paths, &mut passes, opts.progress);
    (
        passes.0.report(&model, stats.clone()),
        passes.1.report(&model, stats),
    )
}
