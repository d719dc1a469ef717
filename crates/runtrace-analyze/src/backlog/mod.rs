//! `runtrace backlog`: queues, locks, I/O and heartbeats from the
//! application-instrumentation events (runtrace-sync's `lock_wait`,
//! `lock_hold`, `enqueue`, `dequeue`, `processing_end`, `item_dropped`,
//! `queue_snapshot`, `backlog_trigger`, `io`, `thread_heartbeat`), and for
//! every `backlog_trigger` a ranked root-cause verdict judged from the
//! seconds before it: `consumer_stall`, `lock_contention`, `io_blocking` or
//! `processing_slowdown`, each with the lock and thread responsible and a
//! sentence of evidence. This is the correlation seed 001 did by hand with
//! babeltrace and awk.
//!
//! A [`Backlog`] pass over the same read as `runtrace analyze`
//! ([`runtrace_model::input`]; the two can share one read), in memory bounded by
//! the lookback window (plus a cap on remembered intervals), not by the
//! trace: totals and percentiles are kept per queue, lock, I/O op and
//! heartbeat; the lock waits, lock holds and I/O intervals of the last `lookback + lookahead`
//! seconds are kept as intervals; processing and stall time as per-thread
//! counters in 10 ms buckets over the same span. docs/analysis.md
//! (`runtrace backlog`) describes the attribution model and every JSON key.
//!
//! Layout: `options` (settings and constants), `ingest` (events into the
//! `state`, over the `window` building blocks), `verdict` (judging a
//! trigger), `build` (the [`BacklogReport`]), `render` (its text and JSON).
//!
//! ```
//! use runtrace_analyze::backlog::{analyze_bytes, BacklogOptions, Cause};
//! use runtrace_model::synth::TraceBuilder;
//! let mut b = TraceBuilder::new();
//! b.string(1, "jobs");
//! b.string(2, "size_threshold");
//! b.thread_name(2, "consumer");
//! // A consumer keeping up for a second (1 ms per item), then idle for a
//! // second while the producer goes on: a consumer stall.
//! let mut seq = 0;
//! for i in 0..2_000u64 {
//!     let t = 1_000_000 + i * 1_000_000;
//!     seq += 1;
//!     b.enqueue(1, t, 1, seq, 1);
//!     if i < 1_000 {
//!         b.dequeue(2, t + 10_000, 1, seq, 10_000, 0);
//!         b.processing_end(2, t + 500_000, 1, seq, 490_000, true);
//!     }
//! }
//! b.backlog_trigger(1, 2_000_500_000, 1, 1_000, 1_000, 2);
//! let r = analyze_bytes(&b.finish(), &BacklogOptions::default());
//! assert_eq!(r.queues[0].enqueued, 2_000);
//! let v = &r.triggers[0].verdicts[0];
//! assert_eq!(v.cause, Cause::ConsumerStall);
//! assert_eq!(v.thread.as_deref(), Some("consumer (tid 2)"));
//! ```

mod build;
mod ingest;
mod options;
mod render;
mod report;
mod state;
mod text;
mod verdict;
mod window;

pub use options::BacklogOptions;
pub use report::{
    BacklogReport, Cause, CauseCount, HeartbeatReport, HoldRef, IoRef, IoReport, LockReport,
    QueueReport, RateWindow, TriggerReport, Verdict,
};
pub use state::Backlog;

use runtrace_model::input;
use std::path::{Path, PathBuf};

/// Analyses the files of one or more recordings (sorted as `trace.0.bin`,
/// `trace.1.bin`, ... first). Never panics on bad input: damage is listed
/// in [`BacklogReport::errors`] (file and byte offset) and the report
/// covers what was readable. A trace without application events gives an
/// empty report with a note.
pub fn analyze_files<P: AsRef<Path>>(paths: &[P], opts: &BacklogOptions) -> BacklogReport {
    analyze_files_with_progress(paths, opts, None)
}

/// [`analyze_files`], calling `progress` now and then with (bytes read,
/// total bytes).
pub fn analyze_files_with_progress<P: AsRef<Path>>(
    paths: &[P],
    opts: &BacklogOptions,
    progress: Option<&mut dyn FnMut(u64, u64)>,
) -> BacklogReport {
    let paths = input::sorted(paths);
    let mut s = Backlog::new(opts);
    let (model, stats) = input::read(&paths, &mut s, progress);
    s.report(&model, stats)
}

/// Analyses a trace held in memory (through a temporary file, as the reader
/// reads files). For tests and small traces.
pub fn analyze_bytes(bytes: &[u8], opts: &BacklogOptions) -> BacklogReport {
    input::via_temp_file(bytes, "backlog", |file| match file {
        Ok(path) => analyze_files(&[path], opts),
        Err(err) => {
            let mut r = analyze_files::<PathBuf>(&[], opts);
            r.errors.push(err);
            r.damaged = true;
            r
        }
    })
}
