//! The trace model: what a recording *is*, as opposed to what an analysis
//! concludes from it. Processes (pid, clock, anchor, name), threads (tid,
//! name), spawn locations, named queues and the interned names of the
//! application events, all by dense index. `input/` fills it while reading;
//! passes read it ([`crate::pass::Pass`]) and keep their own state.
//!
//! ```
//! use runtrace_model::model::{Model, TickScale};
//! let m = Model::new();
//! assert_eq!(&*m.locs[0].text, "<unknown>"); // index 0: unknown location
//! assert_eq!(&*m.names[0], ""); // index 0: the empty name
//! assert_eq!(TickScale::new(125_000_000).ns(3), 24); // 8 ns ticks
//! ```

use crate::fxhash::FxHashMap;
use runtrace_format::frame::{Mapping, ProfileInfo};
use std::path::PathBuf;
use std::sync::Arc;

/// Location index of "unknown location" (id 0, or a task never spawned in
/// the trace).
pub const UNKNOWN_LOC: u32 = 0;

/// Converts tick deltas to nanoseconds with one multiply: by a whole
/// number when a tick is a whole number of ns (the recorder's ticks are
/// 2^k TSC cycles, e.g. 8 ns), else in 32.32 fixed point.
#[derive(Debug, Clone, Copy)]
pub struct TickScale {
    /// ns per tick when whole (0: use `mult`).
    whole: u64,
    mult: u64,
}

impl TickScale {
    /// The scale of a clock of `ticks_per_sec`.
    pub fn new(ticks_per_sec: u64) -> TickScale {
        let tps = ticks_per_sec.max(1);
        let m = (1_000_000_000u128 << 32) / tps as u128;
        TickScale {
            whole: if 1_000_000_000 % tps == 0 {
                1_000_000_000 / tps
            } else {
                0
            },
            mult: m.min(u64::MAX as u128) as u64,
        }
    }

    /// `ticks` in nanoseconds (saturating).
    #[inline(always)]
    pub fn ns(&self, ticks: u64) -> u64 {
        if self.whole != 0 {
            ticks.saturating_mul(self.whole)
        } else {
            ((ticks as u128 * self.mult as u128) >> 32).min(u64::MAX as u128) as u64
        }
    }
}

/// A recording (one process): its identity from the file header, and the
/// extent of its events.
#[derive(Debug, Clone)]
pub struct Process {
    /// Recording id (header).
    pub recording_id: u64,
    /// Process id.
    pub pid: u64,
    /// Process name.
    pub process_name: String,
    /// Tick of the recording's anchor (its start).
    pub anchor_ticks: u64,
    /// Wall clock at the anchor (ns since the Unix epoch).
    pub anchor_wall_ns: u64,
    /// Clock rate.
    pub ticks_per_sec: u64,
    /// Tick-to-ns conversion of this clock.
    pub scale: TickScale,
    /// Ticks of the first event read (`u64::MAX`: none).
    pub first_ticks: u64,
    /// Ticks of the last event read.
    pub last_ticks: u64,
    /// Events read (all types, not only those a pass uses).
    pub events: u64,
}

impl Process {
    /// The process a file header describes, with no events yet.
    pub fn new(h: &runtrace_format::frame::Header) -> Process {
        Process {
            recording_id: h.recording_id,
            pid: h.pid,
            process_name: h.process_name.clone(),
            anchor_ticks: h.anchor_ticks,
            anchor_wall_ns: h.anchor_wall_ns,
            ticks_per_sec: h.ticks_per_sec,
            scale: TickScale::new(h.ticks_per_sec),
            first_ticks: u64::MAX,
            last_ticks: 0,
            events: 0,
        }
    }

    /// Nanoseconds since the recording started (format.md section 4).
    #[inline]
    pub fn ns(&self, ticks: u64) -> i64 {
        // A whole number of ns per tick (the recorder's clocks): one
        // multiply, the same value as the exact division below.
        if self.scale.whole != 0 && ticks >= self.anchor_ticks {
            if let Some(v) = (ticks - self.anchor_ticks).checked_mul(self.scale.whole) {
                if v <= i64::MAX as u64 {
                    return v as i64;
                }
            }
        }
        let d = ticks as i128 - self.anchor_ticks as i128;
        (d * 1_000_000_000).div_euclid(self.ticks_per_sec.max(1) as i128) as i64
    }

    /// Wall clock (ns since the Unix epoch).
    pub fn wall_ns(&self, ticks: u64) -> i128 {
        self.anchor_wall_ns as i128 + self.ns(ticks) as i128
    }
}

/// A thread that recorded events.
#[derive(Debug, Clone)]
pub struct Thread {
    /// Its process ([`Model::procs`] index).
    pub proc: u32,
    /// OS thread id.
    pub tid: u64,
    /// Name from a THREAD frame, if any.
    pub name: Option<String>,
}

/// A spawn location, interned across files by text.
#[derive(Debug, Clone)]
pub struct Location {
    /// `file:line:col`.
    pub text: Arc<str>,
    /// Its id in the first file that defined it (0: unknown).
    pub trace_id: u64,
}

/// Everything known about the recordings read, by dense index (what the
/// indexes in [`crate::event::Ev`] point into).
#[derive(Debug, Clone)]
pub struct Model {
    /// Recordings, one per (recording id, pid).
    pub procs: Vec<Process>,
    /// Threads, one per (process, tid).
    pub threads: Vec<Thread>,
    /// Spawn locations; index [`UNKNOWN_LOC`] is `<unknown>`.
    pub locs: Vec<Location>,
    /// Named queues of `queue_sample` events.
    pub queues: Vec<String>,
    /// Names of the application events (queues, locks, I/O ops, roles,
    /// reasons, causes); index 0 is the empty name.
    pub names: Vec<Arc<str>>,
    /// Values too wide for an [`crate::event::Ev`] (rare), by index.
    pub side: Vec<u64>,
    /// Call stacks of CPU samples (addresses leaf first), interned across
    /// files by content; index 0 is the empty stack ("no stack").
    pub stacks: Vec<Arc<[u64]>>,
    /// Executable mappings of the recorded processes (`MAPPINGS` frames;
    /// one with the same `start` as an earlier one replaced it). Known once
    /// the file that defines them is read: passes read it in `finish`.
    pub mappings: Vec<Mapping>,
    /// What CPU profiling did, per file that says (`PROFILE` frames), in
    /// reading order; like `mappings`, complete once the read is over.
    pub profiles: Vec<(PathBuf, ProfileInfo)>,
    /// Flight-recorder snapshot triggers (`snapshot_trigger` events) and
    /// the application's requests (`snapshot_request`), in reading order (sort by `ticks` for time order); read whatever the
    /// passes want, since they are rare and every tool shows them. At most
    /// [`MAX_SNAPSHOT_MARKS`]; the rest are counted in `snapshots_omitted`.
    pub snapshots: Vec<SnapshotMark>,
    /// `snapshot_trigger` events beyond [`MAX_SNAPSHOT_MARKS`] (a crafted
    /// file: the recorder rate-limits its triggers).
    pub snapshots_omitted: u64,
    /// Thread index by (process, tid).
    thread_ids: FxHashMap<(u32, u64), u32>,
}

/// Most snapshot triggers a [`Model`] keeps (a recorder writes at most one
/// per cooldown, seconds apart: this bounds memory on crafted input only).
pub const MAX_SNAPSHOT_MARKS: usize = 4096;

/// One flight-recorder snapshot trigger, or the application's request
/// for one: when, and why (docs/format.md section 13).
///
/// ```
/// use runtrace_model::synth::TraceBuilder;
/// let mut b = TraceBuilder::new();
/// b.snapshot_trigger(9, 5_000, "slow-poll");
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("trace.0.bin");
/// std::fs::write(&path, b.finish()).unwrap();
/// // Any pass: snapshot triggers are read whatever it wants.
/// struct Nothing;
/// impl runtrace_model::pass::Pass for Nothing {
///     fn wants(&self) -> runtrace_model::pass::Wants {
///         runtrace_model::pass::Wants::RUNTIME
///     }
///     fn event(&mut self, _: &runtrace_model::event::Ev, _: &runtrace_model::model::Model) {}
/// }
/// let (model, _) = runtrace_model::input::read(&[path], &mut Nothing, None);
/// assert_eq!(&*model.snapshots[0].reason, "slow-poll");
/// assert_eq!(model.snapshots[0].ticks, 5_000);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotMark {
    /// The recording ([`Model::procs`] index).
    pub proc: u32,
    /// When it fired, in the recording's trace ticks.
    pub ticks: u64,
    /// Why (the reason given to `snapshot()`, `signal`, or a rule's name;
    /// a request's: the reason given to `snapshot!`).
    pub reason: Arc<str>,
    /// A `snapshot_request` (the application asked; a trigger follows only
    /// when a rule lists its reason), not a `snapshot_trigger`.
    pub request: bool,
}

impl Default for Model {
    fn default() -> Self {
        Model::new()
    }
}

impl Model {
    /// An empty model (only the unknown location and the empty name).
    pub fn new() -> Model {
        Model {
            procs: Vec::new(),
            threads: Vec::new(),
            locs: vec![Location {
                text: Arc::from("<unknown>"),
                trace_id: 0,
            }],
            queues: Vec::new(),
            names: vec![Arc::from("")],
            side: Vec::new(),
            stacks: vec![Arc::from(&[][..])],
            mappings: Vec::new(),
            profiles: Vec::new(),
            snapshots: Vec::new(),
            snapshots_omitted: 0,
            thread_ids: FxHashMap::default(),
        }
    }

    /// Adds a process; returns its index.
    pub fn add_proc(&mut self, p: Process) -> u32 {
        self.procs.push(p);
        (self.procs.len() - 1) as u32
    }

    /// Adds a thread of process `proc`; returns its index.
    pub fn add_thread(&mut self, proc: u32, tid: u64) -> u32 {
        self.threads.push(Thread {
            proc,
            tid,
            name: None,
        });
        let t = (self.threads.len() - 1) as u32;
        self.thread_ids.insert((proc, tid), t);
        t
    }

    /// The index of thread `tid` of process `proc`, added if new.
    ///
    /// ```
    /// let mut m = runtrace_model::model::Model::new();
    /// let t = m.thread(0, 77);
    /// assert_eq!(m.thread(0, 77), t);
    /// assert_ne!(m.thread(1, 77), t);
    /// ```
    pub fn thread(&mut self, proc: u32, tid: u64) -> u32 {
        match self.thread_ids.get(&(proc, tid)) {
            Some(&t) => t,
            None => self.add_thread(proc, tid),
        }
    }

    /// Whether thread `tid` of process `proc` is known and named as the
    /// recorder's writer ([`runtrace_format::frame::WRITER_THREAD`]).
    ///
    /// ```
    /// let mut m = runtrace_model::model::Model::new();
    /// let t = m.thread(0, 9);
    /// assert!(!m.is_writer_thread(0, 9));
    /// m.threads[t as usize].name = Some("runtrace-writer".into());
    /// assert!(m.is_writer_thread(0, 9) && !m.is_writer_thread(1, 9));
    /// ```
    pub fn is_writer_thread(&self, proc: u32, tid: u64) -> bool {
        self.thread_ids.get(&(proc, tid)).is_some_and(|&t| {
            self.threads[t as usize].name.as_deref() == Some(runtrace_format::frame::WRITER_THREAD)
        })
    }

    /// Records a file's `MAPPINGS` (a mapping with the same `start` as a
    /// known one replaces it).
    pub fn add_mappings(&mut self, list: &[Mapping]) {
        runtrace_format::frame::merge_mappings(&mut self.mappings, list.iter().cloned());
    }

    /// The process of thread `t`.
    #[inline(always)]
    pub fn proc_of(&self, t: u32) -> &Process {
        &self.procs[self.threads[t as usize].proc as usize]
    }

    /// Appends values to [`Model::side`]; returns the index of the first.
    pub fn side(&mut self, v: &[u64]) -> u64 {
        let i = self.side.len() as u64;
        self.side.extend_from_slice(v);
        i
    }

    /// Name `i` ("" when out of range).
    pub fn name(&self, i: u32) -> &str {
        self.names.get(i as usize).map_or("", |s| s)
    }

    /// Name `i` shared, not copied ("" when out of range): for reports
    /// that hold a name per row.
    pub fn name_shared(&self, i: u32) -> Arc<str> {
        self.names
            .get(i as usize)
            .cloned()
            .unwrap_or_else(|| Arc::from(""))
    }
}
