//! What every analysis answers from: one trace's reports ([`Reports`]),
//! computed from ONE read of its files ([`OneRead`]: `runtrace analyze
//! --all`, `runtrace summary`) or replayed from a trace held in memory
//! (`index::TraceIndex`: the MCP server). The registry of analyses
//! ([`crate::registry`]) reads them through this trait only, so both give
//! the same answers.
//!
//! ```
//! use runtrace_analyze::reports::{OneRead, Reports};
//! use runtrace_model::synth::TraceBuilder;
//! let mut b = TraceBuilder::new();
//! b.spawn(7, 1_000, 1, 0, 0, 0);
//! b.poll_start(7, 0, 2_000, 1, 0, 0);
//! b.poll_end(7, 0, 5_000, 1, true);
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("trace.0.bin");
//! std::fs::write(&path, b.finish()).unwrap();
//! let r = OneRead::read(&[path], None);
//! assert_eq!(r.runtime().poll_ns.max, 3_000);
//! assert_eq!(r.outliers().poll.len(), 1);
//! assert_eq!(r.counts().of(runtrace_model::event::kind::POLL_START), 1);
//! ```

use crate::backlog::{Backlog, BacklogOptions, BacklogReport};
use crate::blocked::{self, BlockedOptions, BlockedReport, MAX_WAITS};
use crate::counts::Counts;
use crate::functions::StackNames;
use crate::outliers::Outliers;
use crate::runtime::{Engine, Report, Thresholds, Wait, WhenProfiled};
use runtrace_model::input::{self, Progress, ReadStats};
use runtrace_model::model::Model;
use runtrace_model::profile::Profile;
use std::path::{Path, PathBuf};

/// One trace's reports, however they were computed.
pub trait Reports {
    /// Processes, threads, locations and names.
    fn model(&self) -> &Model;
    /// What the read found (files, bytes, damage).
    fn stats(&self) -> &ReadStats;
    /// Events by kind, CPU samples included.
    fn counts(&self) -> &Counts;
    /// The CPU profile (empty for recordings made without one).
    fn profile(&self) -> &Profile;
    /// `runtrace analyze`'s report, its findings naming their functions
    /// when the trace has a CPU profile.
    fn runtime(&self) -> &Report;
    /// `runtrace backlog`'s report (default options).
    fn backlog(&self) -> &BacklogReport;
    /// `runtrace blocked`'s report with `threshold_ns`.
    fn blocked(&self, threshold_ns: u64) -> BlockedReport;
    /// The samples of `runtrace outliers` (judge them with
    /// [`Outliers::report`]).
    fn outliers(&self) -> &Outliers;
}

/// Every report of a trace from one read of its files: the runtime
/// analysis, the CPU profile, the backlog, the outliers' samples and the
/// event counts run as passes over the same events.
pub struct OneRead {
    paths: Vec<PathBuf>,
    model: Model,
    stats: ReadStats,
    counts: Counts,
    profile: Profile,
    runtime: Report,
    backlog: BacklogReport,
    outliers: Outliers,
    /// The waits longer than the runtime thresholds' wake delay, kept when
    /// the trace has a CPU profile (what `blocked` attributes).
    waits: (Vec<Wait>, u64),
    wake_delay_ns: u64,
}

impl OneRead {
    /// Reads `paths` (trace files in any order) once, with `progress`
    /// called now and then with (bytes read, bytes in all files).
    pub fn read<P: AsRef<Path>>(paths: &[P], progress: Progress<'_>) -> OneRead {
        let paths = input::sorted(paths);
        let th = Thresholds::default();
        let profiled = WhenProfiled::new(&paths);
        let mut engine = Engine::new(th);
        if profiled.on {
            engine.keep_waits(MAX_WAITS);
        }
        let mut passes = (
            (engine, profiled),
            (
                (
                    Backlog::new(&BacklogOptions::default()),
                    Outliers::default(),
                ),
                Counts::default(),
            ),
        );
        let (model, stats) = input::read(&paths, &mut passes, progress);
        let ((engine, profiled), ((backlog, outliers), counts)) = passes;
        let profile = profiled.pass.profile(&model, stats.clone());
        let mut runtime = engine.report(&model, stats.clone());
        if profile.has_samples() {
            runtime.add_functions(&profile, &mut StackNames::recorded(&profile));
        }
        let waits = engine.waits(&model);
        OneRead {
            backlog: backlog.report(&model, stats.clone()),
            paths,
            model,
            stats,
            counts,
            profile,
            runtime,
            outliers,
            waits,
            wake_delay_ns: th.wake_delay_ns,
        }
    }
}

impl Reports for OneRead {
    fn model(&self) -> &Model {
        &self.model
    }
    fn stats(&self) -> &ReadStats {
        &self.stats
    }
    fn counts(&self) -> &Counts {
        &self.counts
    }
    fn profile(&self) -> &Profile {
        &self.profile
    }
    fn runtime(&self) -> &Report {
        &self.runtime
    }
    fn backlog(&self) -> &BacklogReport {
        &self.backlog
    }

    /// From the waits the read kept when `threshold_ns` is at least the
    /// runtime analysis's wake delay (they are a superset); a lower one
    /// reads the files again.
    fn blocked(&self, threshold_ns: u64) -> BlockedReport {
        let opts = BlockedOptions {
            threshold_ns,
            ..BlockedOptions::default()
        };
        if threshold_ns < self.wake_delay_ns {
            return blocked::analyze_files(&self.paths, &opts, Default::default()).0;
        }
        let waits: Vec<Wait> = self
            .waits
            .0
            .iter()
            .filter(|w| w.delay_ns > threshold_ns)
            .cloned()
            .collect();
        let mut names = StackNames::recorded(&self.profile);
        blocked::report(&waits, self.waits.1, &self.profile, &mut names, &opts)
    }

    fn outliers(&self) -> &Outliers {
        &self.outliers
    }
}
