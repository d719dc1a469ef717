//! The runtime analysis (`runtrace analyze`): the [`Engine`] pass (the
//! state machine), one function per finding kind, the [`Report`] and its
//! text and JSON forms.
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

mod blame;
mod build;
mod cpu;
mod ctx;
mod engine;
mod findings;
mod headline;
mod memfind;
mod render;
mod report;
mod resource_waits;
mod state;
mod thresholds;
mod waiting;
mod waits;

pub(crate) use cpu::in_syscall;
pub use cpu::{analyze_files_profiled, location_functions, WhenProfiled};
pub use engine::Engine;
pub use headline::FIX_FIRST;
pub use render::tasks_text;
pub use report::{
    CpuFunctions, Finding, FindingKind, FunctionShare, LocationCpu, LocationReport, ProcessReport,
    QueueReport, Report, Severity, SnapshotTrigger, Victim, WorkerId, WorkerReport, WAKES_HINT,
};
pub use resource_waits::{LongestWait, ResourceSite, SiteHolder, SiteReleaser, SiteWaiter};
pub use thresholds::Thresholds;
pub use waits::Wait;

use runtrace_model::input::{self, ReadStats};
use runtrace_model::model::Model;
use std::path::{Path, PathBuf};

/// Analysis options.
#[derive(Default)]
pub struct Options<'a> {
    /// Finding thresholds.
    pub thresholds: Thresholds,
    /// Called now and then with (bytes read, total bytes of all files).
    pub progress: Option<&'a mut dyn FnMut(u64, u64)>,
}

impl Engine {
    /// The report of a finished engine (after [`input::read`]) over the
    /// model and read statistics of the same read.
    pub fn report(&self, model: &Model, stats: ReadStats) -> Report {
        build::build(self, model, stats)
    }
}

/// Analyses the files of one or more recordings (sorted as `trace.0.bin`,
/// `trace.1.bin`, ... first). Never panics on bad input: damage is listed
/// in [`Report::errors`] (file and byte offset) and the report covers what
/// was readable.
pub fn analyze_files<P: AsRef<Path>>(paths: &[P], opts: Options<'_>) -> Report {
    let paths = input::sorted(paths);
    let mut e = Engine::new(opts.thresholds);
    let (model, stats) = input::read(&paths, &mut e, opts.progress);
    e.report(&model, stats)
}

/// Analyses a trace held in memory (through a temporary file, as the
/// reader reads files). For tests and small traces.
pub fn analyze_bytes(bytes: &[u8], opts: Options<'_>) -> Report {
    input::via_temp_file(bytes, "analyze", |file| match file {
        Ok(path) => analyze_files(&[path], opts),
        Err(err) => {
            let mut r = analyze_files::<PathBuf>(&[], opts);
            r.errors.push(err);
            r.damaged = true;
            r
        }
    })
}
