//! Streaming analysis of runtrace traces (`runtrace analyze`).
//!
//! One pass over the files, in bounded memory: chunks are walked without
//! building `Event`s ([`runtrace_format::reader::FileReader::next_raw`]),
//! the events the analysis needs are kept as 32-byte records, put in
//! timestamp order one writer round behind (docs/format.md section 8), and
//! fed to a state machine that keeps per-task state only for live tasks and
//! percentiles in fixed-size [`hist::Histogram`]s. It reports, per worker and
//! per spawn location, polls, busy time, wake->poll delays and poll
//! durations, and *findings*: long polls, wake delays, local queue buildup,
//! worker imbalance, idle workers while work is queued, and CPU-bound spawn
//! locations, each naming the spawn locations responsible and the evidence.
//! docs/analysis.md defines every number and every JSON key.
//!
//! ```
//! use runtrace_analyze::{analyze_bytes, synth::TraceBuilder, Options};
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
mod engine;
mod fxhash;
pub mod hist;
mod read;
mod report;
pub mod synth;

pub use report::{
    fmt_ns, Finding, FindingKind, LocationReport, ProcessReport, QueueReport, Report, Severity,
    WorkerId, WorkerReport,
};

use std::path::{Path, PathBuf};

/// The thresholds of the findings (defaults in docs/analysis.md).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thresholds {
    /// A poll longer than this is a `long_poll` warning (10 ms).
    pub long_poll_ns: u64,
    /// ... and critical above this (50 ms).
    pub long_poll_critical_ns: u64,
    /// A wake->poll p99 above this is a `wake_delay` finding; a poll that
    /// waited longer is a "delayed window" (10 ms).
    pub wake_delay_ns: u64,
    /// ... critical above this (50 ms).
    pub wake_delay_critical_ns: u64,
    /// Local queue depth that counts as buildup during a delayed window (20).
    pub local_q: u32,
    /// Poll counts of one runtime's workers differing by more than this
    /// factor are a `worker_imbalance` warning (1.10).
    pub imbalance_ratio: f64,
    /// ... critical from this factor (3.0).
    pub imbalance_critical_ratio: f64,
    /// Imbalance is only judged when the busiest worker polled this often
    /// (200).
    pub imbalance_min_polls: u64,
    /// A worker's local queue deeper than this counts as queued work for
    /// `idle_while_queued` (20).
    pub idle_local_q: u32,
    /// Idle-while-queued stretches shorter than this are ignored (1 ms).
    pub idle_min_window_ns: u64,
    /// ... critical when one lasts this long (50 ms).
    pub idle_critical_window_ns: u64,
    /// A location whose mean poll exceeds this is `cpu_bound` (500 us).
    pub cpu_bound_mean_ns: u64,
    /// ... critical above this (5 ms).
    pub cpu_bound_critical_mean_ns: u64,
    /// ... judged from this many polls on (3).
    pub cpu_bound_min_polls: u64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            long_poll_ns: 10_000_000,
            long_poll_critical_ns: 50_000_000,
            wake_delay_ns: 10_000_000,
            wake_delay_critical_ns: 50_000_000,
            local_q: 20,
            imbalance_ratio: 1.10,
            imbalance_critical_ratio: 3.0,
            imbalance_min_polls: 200,
            idle_local_q: 20,
            idle_min_window_ns: 1_000_000,
            idle_critical_window_ns: 50_000_000,
            cpu_bound_mean_ns: 500_000,
            cpu_bound_critical_mean_ns: 5_000_000,
            cpu_bound_min_polls: 3,
        }
    }
}

/// Analysis options.
#[derive(Default)]
pub struct Options<'a> {
    /// Finding thresholds.
    pub thresholds: Thresholds,
    /// Called now and then with (bytes read, total bytes of all files).
    pub progress: Option<&'a mut dyn FnMut(u64, u64)>,
}

/// Analyses the files of one or more recordings (sorted as `trace.0.bin`,
/// `trace.1.bin`, ... first). Never panics on bad input: damage is listed
/// in [`Report::errors`] (file and byte offset) and the report covers what
/// was readable.
pub fn analyze_files<P: AsRef<Path>>(paths: &[P], opts: Options<'_>) -> Report {
    let paths = read::sorted(paths);
    let mut e = engine::Engine::new(opts.thresholds);
    let rs = read::read_files(&paths, &mut e, opts.progress);
    e.finish();
    report::build(&e, rs)
}

/// Analyses a trace held in memory (through a temporary file, as the
/// reader reads files). For tests and small traces.
pub fn analyze_bytes(bytes: &[u8], opts: Options<'_>) -> Report {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path: PathBuf =
        std::env::temp_dir().join(format!("runtrace-analyze-{}-{n}.0.bin", std::process::id()));
    if let Err(e) = std::fs::write(&path, bytes) {
        let mut r = analyze_files::<PathBuf>(&[], opts);
        r.errors
            .push(format!("{}: cannot write: {e}", path.display()));
        r.damaged = true;
        return r;
    }
    let r = analyze_files(std::slice::from_ref(&path), opts);
    let _ = std::fs::remove_file(&path);
    r
}
