//! A trace loaded into memory for many questions (`runtrace mcp`): one
//! read counts the events and keeps every built-in event as a 32-byte
//! [`Ev`] (in timestamp order within each recording), so that later
//! questions (queries, timelines, outliers) replay memory instead of the
//! files. The runtime and backlog reports are computed from memory at
//! their first use and kept: loading is the read alone.
//!
//! ```
//! use runtrace_analyze::index::TraceIndex;
//! use runtrace_model::synth::TraceBuilder;
//! let mut b = TraceBuilder::new();
//! b.spawn(7, 1_000, 1, 0, 0, 0);
//! b.poll_start(7, 0, 2_000, 1, 0, 0);
//! b.poll_end(7, 0, 5_000, 1, true);
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("trace.0.bin");
//! std::fs::write(&path, b.finish()).unwrap();
//! let ix = TraceIndex::load(&[path]);
//! assert_eq!(ix.events.len(), 3);
//! assert_eq!(ix.summary()["events"], 3);
//! assert_eq!(ix.runtime().poll_ns.max, 3_000);
//! ```

use crate::backlog::{Backlog, BacklogOptions, BacklogReport};
use crate::blocked::{self, BlockedOptions, BlockedReport};
use crate::counts::Counts;
use crate::functions::StackNames;
use crate::outliers::{Category, Method, Outliers};
use crate::registry;
use crate::reports::Reports;
use crate::runtime::{Engine, Report, Thresholds, WhenProfiled};
use runtrace_model::event::{kind, Ev};
use runtrace_model::fxhash::FxHashMap;
use runtrace_model::input::{self, ReadStats};
use runtrace_model::lifecycle::Tracked;
use runtrace_model::model::{Model, UNKNOWN_LOC};
use runtrace_model::pass::{Pass, Wants};
use runtrace_model::profile::Profile;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Keeps every event it is given, and counts them by kind (the CPU
/// samples, which live in the `Profile`, are counted from it).
#[derive(Default)]
struct Store(Vec<Ev>, Counts);

impl Pass for Store {
    #[inline]
    fn wants(&self) -> Wants {
        Wants::RUNTIME.or(Wants::APP)
    }

    #[inline(always)]
    fn event(&mut self, ev: &Ev, _model: &Model) {
        self.1.by_kind[ev.kind as usize] += 1;
        self.0.push(*ev);
    }
}

/// Trace bytes per kept event below which the first guess of the event
/// count falls short (the recorder's files hold about 4-8).
const BYTES_PER_EVENT_GUESS: u64 = 4;

/// A loaded trace: its model, read statistics, reports and events.
pub struct TraceIndex {
    /// Processes, threads, locations and names.
    pub model: Model,
    /// What the read found (files, bytes, damage).
    pub stats: ReadStats,
    /// Every built-in event, in timestamp order within each recording.
    pub events: Vec<Ev>,
    /// Events by kind.
    pub counts: Counts,
    /// The CPU profile (empty for recordings made without one).
    pub profile: Profile,
    runtime: OnceLock<Report>,
    backlog: OnceLock<BacklogReport>,
    outliers: OnceLock<Outliers>,
    task_locs: OnceLock<FxHashMap<(u32, u64), u32>>,
}

impl TraceIndex {
    /// Reads `paths` (trace files, sorted as `trace.0.bin`, `trace.1.bin`,
    /// ...) once. Never panics on bad input: what is readable is loaded
    /// and the damage (file and byte offset) is in `stats.errors`.
    pub fn load<P: AsRef<Path>>(paths: &[P]) -> TraceIndex {
        let paths: Vec<PathBuf> = input::sorted(paths);
        let bytes: u64 = paths
            .iter()
            .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
            .sum();
        let guess = (bytes / BYTES_PER_EVENT_GUESS).min(1 << 30) as usize;
        let mut passes = (
            Store(Vec::with_capacity(guess), Counts::default()),
            WhenProfiled::new(&paths),
        );
        let (model, stats) = input::read(&paths, &mut passes, None);
        let (Store(mut events, mut counts), profiled) = passes;
        events.shrink_to_fit();
        let profile = profiled.pass.profile(&model, stats.clone());
        counts.add_samples(&profile);
        TraceIndex {
            model,
            stats,
            events,
            counts,
            profile,
            runtime: OnceLock::new(),
            backlog: OnceLock::new(),
            outliers: OnceLock::new(),
            task_locs: OnceLock::new(),
        }
    }

    /// The report of `runtrace analyze` (computed at the first call), its
    /// findings naming their functions when the trace has a CPU profile
    /// ([`Report::add_functions`]).
    pub fn runtime(&self) -> &Report {
        Reports::runtime(self)
    }

    /// The report of `runtrace backlog` (computed at the first call).
    pub fn backlog(&self) -> &BacklogReport {
        Reports::backlog(self)
    }

    /// The report of `runtrace blocked --json` with `threshold_ns` (a
    /// replay of the kept events at each call; no culprits, with a note,
    /// when the trace has no CPU samples).
    pub fn blocked(&self, threshold_ns: u64) -> BlockedReport {
        Reports::blocked(self, threshold_ns)
    }

    /// Feeds the kept events to `pass` as [`input::read`] would (with the
    /// lifecycle's records when it wants them), and finishes it.
    pub fn replay<P: Pass>(&self, pass: &mut P) {
        if pass.wants().lifecycle {
            self.replay_events(&mut Tracked::new(pass));
        } else {
            self.replay_events(pass);
        }
    }

    fn replay_events<P: Pass>(&self, pass: &mut P) {
        let wants = pass.wants();
        let mut proc = None;
        for ev in &self.events {
            let p = self.model.threads[ev.thread as usize].proc;
            if proc.is_some_and(|q| q != p) {
                pass.end_recording(&self.model);
            }
            proc = Some(p);
            if wants.has(ev.kind) {
                pass.event(ev, &self.model);
            }
        }
        pass.finish(&self.model);
    }

    /// First to last event, on the wall clock across recordings (0: no
    /// events), as [`Report::duration_ns`].
    pub fn duration_ns(&self) -> u64 {
        let seen = self
            .model
            .procs
            .iter()
            .filter(|p| p.first_ticks != u64::MAX);
        let first = seen.clone().map(|p| p.wall_ns(p.first_ticks)).min();
        let last = seen.map(|p| p.wall_ns(p.last_ticks)).max();
        match (first, last) {
            (Some(f), Some(l)) => (l - f).max(0) as u64,
            _ => 0,
        }
    }

    /// The process index of event `ev`.
    pub fn proc_of(&self, ev: &Ev) -> u32 {
        self.model.threads[ev.thread as usize].proc
    }

    /// The spawn location index of task `task` of process `proc`
    /// ([`UNKNOWN_LOC`] when its spawn is not in the trace).
    pub fn task_loc(&self, proc: u32, task: u64) -> u32 {
        let m = self.task_locs.get_or_init(|| {
            let mut m = FxHashMap::default();
            for ev in self.events.iter().filter(|e| e.kind == kind::SPAWN) {
                m.insert((self.proc_of(ev), ev.x), ev.a);
            }
            m
        });
        m.get(&(proc, task)).copied().unwrap_or(UNKNOWN_LOC)
    }

    /// `runtrace summary --json` (keys in docs/mcp.md).
    pub fn summary(&self) -> Value {
        registry::summary(self)
    }

    /// `runtrace outliers --json`.
    pub fn outliers(&self, method: Method, category: Category, limit: usize) -> Value {
        Reports::outliers(self).report(&self.model, method, category, limit)
    }

    /// Every applicable analysis as one JSON object
    /// ([`registry::run_all`]).
    pub fn run_all(&self) -> Value {
        registry::run_all(self)
    }
}

impl Reports for TraceIndex {
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
        self.runtime.get_or_init(|| {
            let mut e = Engine::new(Thresholds::default());
            self.replay(&mut e);
            let mut r = e.report(&self.model, self.stats.clone());
            if self.profile.has_samples() {
                r.add_functions(&self.profile, &mut StackNames::recorded(&self.profile));
            }
            r
        })
    }

    fn backlog(&self) -> &BacklogReport {
        self.backlog.get_or_init(|| {
            let mut b = Backlog::new(&BacklogOptions::default());
            self.replay(&mut b);
            b.report(&self.model, self.stats.clone())
        })
    }

    /// A replay of the kept events at each call.
    fn blocked(&self, threshold_ns: u64) -> BlockedReport {
        let opts = BlockedOptions {
            threshold_ns,
            ..BlockedOptions::default()
        };
        let mut e = Engine::new(Thresholds {
            wake_delay_ns: threshold_ns,
            ..Thresholds::default()
        });
        e.keep_waits(blocked::MAX_WAITS);
        self.replay(&mut e);
        let (waits, lost) = e.waits(&self.model);
        let mut names = StackNames::recorded(&self.profile);
        blocked::report(&waits, lost, &self.profile, &mut names, &opts)
    }

    fn outliers(&self) -> &Outliers {
        self.outliers.get_or_init(|| {
            let mut o = Outliers::default();
            self.replay(&mut o);
            o
        })
    }
}
