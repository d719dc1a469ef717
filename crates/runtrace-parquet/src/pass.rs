//! The export as an analysis [`Pass`]: events in timestamp order become
//! rows of the tables, written through one [`TableWriter`] per table and
//! recording. Polls are paired, and wake->poll delays measured, exactly as
//! `runtrace analyze` does (the same open-poll stack per thread, the same
//! "first wake or the spawn not yet followed by a poll"), so that SQL over
//! the dataset gives the analysis's counts and totals.
//!
//! State is bounded like the analysis's: live tasks, open polls per
//! thread, parked workers, and one row batch per table and recording.
//!
//! ```
//! use runtrace_model::synth::TraceBuilder;
//! use runtrace_parquet::pass::{Exporter, Target};
//! let mut b = TraceBuilder::new();
//! b.poll_start(7, 0, 2_000, 1, 0, 0);
//! b.poll_end(7, 0, 5_000, 1, true);
//! let dir = tempfile::tempdir().unwrap();
//! let trace = dir.path().join("trace.0.bin");
//! std::fs::write(&trace, b.finish()).unwrap();
//! std::fs::create_dir(dir.path().join("ds")).unwrap(); // the CLI makes it
//! let target = Target {
//!     root: dir.path().join("ds"),
//!     service: None,
//!     host: "h".into(),
//!     existing: Default::default(),
//!     replace: false,
//! };
//! let mut ex = Exporter::new(target);
//! runtrace_model::input::read(&[trace], &mut ex, None);
//! assert_eq!(ex.error, None);
//! let files = ex.take_written(); // under temporary names, to rename
//! assert_eq!(files.iter().find(|f| f.table.name() == "polls").unwrap().rows, 1);
//! assert!(files.iter().all(|f| f.tmp.exists() && !f.path.exists()));
//! ```

use crate::layout;
use crate::samples::Samples;
use crate::schema::Table;
use crate::writer::TableWriter;

// The samples writer takes cpu_samples then alloc_samples (split_at_mut).
const _: () = assert!(Table::AllocSamples.index() > Table::CpuSamples.index());
use runtrace_model::event::{kind, Ev};
use runtrace_model::lifecycle::{Life, Poll, Task};
use runtrace_model::model::Model;
use runtrace_model::pass::{Pass, Wants};
use runtrace_model::spans::{Labels, Span};
use runtrace_model::waits::{FinishedWait, WaitTracker};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::path::{Path, PathBuf};

/// A multiply-rotate hasher for the integer keys of the per-event maps
/// (task ids, thread and worker indexes): SipHash's DoS resistance buys
/// nothing on a trace file, and it was the largest cost of those maps.
#[derive(Default, Clone, Copy)]
struct IntHasher(u64);

impl Hasher for IntHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    #[inline]
    fn write_u32(&mut self, v: u32) {
        self.write_u64(v as u64);
    }
    #[inline]
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

type IntMap<K, V> = HashMap<K, V, BuildHasherDefault<IntHasher>>;

/// A recording's ticks to epoch ns: a multiply when a tick is a whole
/// number of ns (the recorder's clocks), else the model's exact division.
#[derive(Clone, Copy)]
struct WallClock {
    anchor_ticks: u64,
    anchor_wall: i64,
    /// ns per tick when whole, else 0.
    whole: u64,
}

impl WallClock {
    fn new(p: &runtrace_model::model::Process) -> WallClock {
        let tps = p.ticks_per_sec.max(1);
        WallClock {
            anchor_ticks: p.anchor_ticks,
            anchor_wall: p.anchor_wall_ns as i64,
            whole: if 1_000_000_000 % tps == 0 {
                1_000_000_000 / tps
            } else {
                0
            },
        }
    }

    #[inline(always)]
    fn wall(&self, p: &runtrace_model::model::Process, ticks: u64) -> i64 {
        if self.whole != 0 && ticks >= self.anchor_ticks {
            let d = (ticks - self.anchor_ticks).saturating_mul(self.whole);
            self.anchor_wall
                .saturating_add(d.min(i64::MAX as u64) as i64)
        } else {
            p.wall_ns(ticks) as i64
        }
    }
}

/// `Ev::worker` of an event outside any worker.
const NO_WORKER: u32 = u32::MAX;

/// Where and how the files of one export go.
#[derive(Debug, Clone)]
pub struct Target {
    /// The dataset's root directory.
    pub root: PathBuf,
    /// `service` partition (None: each recording's process name).
    pub service: Option<String>,
    /// `host` partition.
    pub host: String,
    /// Recording ids already in the dataset, with their files.
    pub existing: HashMap<u64, Vec<PathBuf>>,
    /// Replace recordings already in the dataset instead of refusing.
    pub replace: bool,
}

/// A recording's files and state.
struct Rec {
    writers: Vec<TableWriter>,
    finals: Vec<PathBuf>,
    clock: WallClock,
}

/// A file the export wrote, under its temporary name until committed.
#[derive(Debug)]
pub struct Written {
    /// The table.
    pub table: Table,
    /// Its temporary path.
    pub tmp: PathBuf,
    /// Its final path.
    pub path: PathBuf,
    /// Rows in it.
    pub rows: u64,
    /// The recording.
    pub recording_id: u64,
}

/// The exporting pass.
pub struct Exporter {
    target: Target,
    /// By model process index (None: not started, or failed).
    recs: Vec<Option<Rec>>,
    /// Parked workers: (thread, worker) -> (park ticks, local_q).
    parked: IntMap<(u32, u32), (u64, u32)>,
    /// The first write error (the export stops writing).
    pub error: Option<String>,
    written: Vec<Written>,
    /// File sets started per recording id.
    started: IntMap<u64, u32>,
    /// The CPU-profile samples of the recording being written.
    pub samples: Samples,
    /// The runtime of each worker thread (from its WorkerStart), by
    /// thread index.
    thread_runtime: Vec<Option<u32>>,
    /// Runtime names (name index) by (process, runtime).
    runtime_names: IntMap<(u32, u32), u32>,
    /// Span labels.
    labels: Labels,
    /// The finished waits on tokio resources (`resource_waits`).
    waits: WaitTracker,
}

impl Exporter {
    /// An exporter writing to `target`.
    pub fn new(target: Target) -> Exporter {
        Exporter {
            target,
            recs: Vec::new(),
            parked: IntMap::default(),
            error: None,
            written: Vec::new(),
            started: IntMap::default(),
            samples: Samples::default(),
            thread_runtime: Vec::new(),
            runtime_names: IntMap::default(),
            labels: Labels::default(),
            waits: WaitTracker::default(),
        }
    }

    /// The runtime of thread `t` and its name, if its WorkerStart said.
    fn runtime_of<'m>(&self, t: u32, m: &'m Model) -> (Option<u32>, Option<&'m str>) {
        let Some(rt) = self.thread_runtime.get(t as usize).copied().flatten() else {
            return (None, None);
        };
        let proc = m.threads[t as usize].proc;
        let name = self
            .runtime_names
            .get(&(proc, rt))
            .map(|&n| m.name(n))
            .filter(|n| !n.is_empty());
        (Some(rt), name)
    }

    /// The files written (temporary names until committed).
    pub fn written(&self) -> &[Written] {
        &self.written
    }

    /// Takes the files written.
    pub fn take_written(&mut self) -> Vec<Written> {
        std::mem::take(&mut self.written)
    }

    /// Opens the writers of process `p` (cold: once per recording).
    #[cold]
    fn start(&mut self, p: usize, m: &Model) -> Result<(), String> {
        let proc = &m.procs[p];
        let rid = proc.recording_id;
        if let Some(files) = self.target.existing.get(&rid) {
            if !self.target.replace {
                return Err(format!(
                    "recording {rid:016x} (pid {}) is already in the dataset ({}); pass --replace to replace it",
                    proc.pid,
                    files.first().map_or_else(String::new, |f| f.display().to_string())
                ));
            }
        }
        let service = match &self.target.service {
            Some(s) => s.clone(),
            None => layout::sanitize(&proc.process_name),
        };
        let date = layout::date_of(proc.anchor_wall_ns);
        // The recording's n-th file set in this export (a second process
        // with the same recording id, or the recording coming back).
        let n = {
            let c = self.started.entry(rid).or_insert(0);
            *c += 1;
            *c - 1
        };
        let mut writers = Vec::new();
        let mut finals = Vec::new();
        for t in Table::ALL {
            let path = layout::file_path(
                &self.target.root,
                t,
                &service,
                &self.target.host,
                &date,
                rid,
                n,
            );
            if let Some(dir) = path.parent() {
                layout::create_dir_in(&self.target.root, dir)?;
            }
            writers.push(TableWriter::create(t, &path, rid)?);
            finals.push(path);
        }
        while self.recs.len() <= p {
            self.recs.push(None);
        }
        self.recs[p] = Some(Rec {
            writers,
            finals,
            clock: WallClock::new(proc),
        });
        Ok(())
    }

    fn rec_ready(&mut self, p: usize, m: &Model) -> bool {
        if self.error.is_some() {
            return false;
        }
        if self.recs.get(p).is_some_and(|r| r.is_some()) {
            return true;
        }
        match self.start(p, m) {
            Ok(()) => true,
            Err(e) => {
                self.error = Some(e);
                false
            }
        }
    }

    fn step(&mut self, ev: &Ev, m: &Model) -> Result<(), String> {
        match ev.kind {
            kind::WORKER_START => {
                let t = ev.thread as usize;
                if t >= self.thread_runtime.len() {
                    self.thread_runtime.resize(t + 1, None);
                }
                self.thread_runtime[t] = Some(ev.a);
            }
            kind::RUNTIME_NAME => {
                let proc = m.threads[ev.thread as usize].proc;
                self.runtime_names.insert((proc, ev.x as u32), ev.worker);
            }
            _ => {}
        }
        let (runtime, runtime_name) = self.runtime_of(ev.thread, m);
        let th = &m.threads[ev.thread as usize];
        let p = th.proc as usize;
        let proc = &m.procs[p];
        let (pid, rid, tid) = (proc.pid, proc.recording_id, th.tid);
        let worker = (ev.worker != NO_WORKER).then_some(ev.worker);
        let Some(rec) = self.recs[p].as_mut() else {
            return Ok(());
        };
        let clock = rec.clock;
        let wall = |ticks: u64| clock.wall(proc, ticks);
        let ts = wall(ev.ticks);
        let w = &mut rec.writers;
        match ev.kind {
            kind::PARK => {
                self.parked
                    .entry((ev.thread, ev.worker))
                    .or_insert((ev.ticks, ev.a));
            }
            kind::UNPARK => {
                if let Some((at, q)) = self.parked.remove(&(ev.thread, ev.worker)) {
                    let ns = proc.scale.ns(ev.ticks.saturating_sub(at)) as i64;
                    w[2].u64(pid)
                        .u64(rid)
                        .u64(tid)
                        .opt_u32(worker)
                        .i64(wall(at))
                        .opt_i64(Some(ts))
                        .opt_i64(Some(ns))
                        .u32(q)
                        .opt_u32(runtime)
                        .str(runtime_name);
                    w[2].end_row()?;
                }
            }
            kind::QUEUE_SAMPLE => {
                let q = m.queues.get(ev.worker as usize).map(String::as_str);
                w[3].u64(pid).u64(rid).u64(tid).i64(ts);
                w[3].str(q).u32(ev.a).u32(ev.x as u32);
                w[3].end_row()?;
            }
            kind::LOCK_WAIT | kind::LOCK_HOLD => {
                let wait = ev.kind == kind::LOCK_WAIT;
                w[4].u64(pid).u64(rid).u64(tid).i64(ts);
                w[4].str(Some(m.name(ev.worker)))
                    .opt_i64(wait.then_some(ev.x as i64))
                    .opt_i64((!wait).then_some(ev.x as i64))
                    .bool(ev.flag != 0);
                w[4].end_row()?;
            }
            kind::IO => {
                let bytes = if ev.flag != 0 {
                    m.side.get(ev.a as usize).copied().unwrap_or(0)
                } else {
                    ev.a as u64
                };
                w[5].u64(pid).u64(rid).u64(tid).i64(ts);
                w[5].str(Some(m.name(ev.worker)))
                    .i64(ev.x as i64)
                    .u64(bytes);
                w[5].end_row()?;
            }
            kind::BACKLOG_TRIGGER => {
                let side = |k: usize| m.side.get(ev.x as usize + k).copied().unwrap_or(0);
                w[6].u64(pid).u64(rid).u64(tid).i64(ts);
                w[6].str(Some(m.name(ev.worker)))
                    .u32(ev.a)
                    .i64(side(0) as i64)
                    .str(Some(m.name(side(1) as u32)));
                w[6].end_row()?;
            }
            kind::QUEUE_SNAPSHOT => {
                w[7].u64(pid).u64(rid).u64(tid).i64(ts);
                w[7].str(Some(m.name(ev.worker))).u32(ev.a).u64(ev.x);
                w[7].end_row()?;
            }
            _ => {}
        }
        Ok(())
    }

    /// Writes the rows still open at the end of the recordings being
    /// written (live tasks, parked workers) and closes their files under
    /// their temporary names.
    fn close(&mut self, m: &Model) -> Result<(), String> {
        for ((thread, worker), (at, q)) in std::mem::take(&mut self.parked) {
            let (runtime, runtime_name) = self.runtime_of(thread, m);
            let th = &m.threads[thread as usize];
            let proc = &m.procs[th.proc as usize];
            if let Some(Some(rec)) = self.recs.get_mut(th.proc as usize) {
                let at = rec.clock.wall(proc, at);
                let w = &mut rec.writers[Table::Workers.index()];
                w.u64(proc.pid)
                    .u64(proc.recording_id)
                    .u64(th.tid)
                    .opt_u32((worker != NO_WORKER).then_some(worker))
                    .i64(at)
                    .opt_i64(None)
                    .opt_i64(None)
                    .u32(q)
                    .opt_u32(runtime)
                    .str(runtime_name);
                w.end_row()?;
            }
        }
        for (p, rec) in self.recs.iter_mut().enumerate() {
            let Some(mut rec) = rec.take() else { continue };
            let proc = &m.procs[p];
            // cpu_samples and alloc_samples, written together.
            let (c, a) = (Table::CpuSamples.index(), Table::AllocSamples.index());
            let (cpu, rest) = rec.writers.split_at_mut(c + 1);
            self.samples
                .write(&mut cpu[c], &mut rest[a - c - 1], m, p)?;
            for (w, path) in rec.writers.into_iter().zip(rec.finals) {
                let (table, rows) = (w.table(), w.rows());
                let tmp = w.finish()?;
                self.written.push(Written {
                    table,
                    tmp,
                    path,
                    rows,
                    recording_id: proc.recording_id,
                });
            }
        }
        Ok(())
    }
}

/// A `tasks` row.
fn task_row(
    w: &mut TableWriter,
    t: &Task,
    m: &Model,
    wall: impl Fn(u64) -> i64,
) -> Result<(), String> {
    let proc = &m.procs[t.proc as usize];
    w.u64(proc.pid)
        .u64(proc.recording_id)
        .opt_u64(t.spawn.map(|_| m.threads[t.spawn_thread as usize].tid))
        .u64(t.task)
        .str(Some(&m.locs[t.loc as usize].text))
        .opt_u64((t.parent != 0).then_some(t.parent))
        .opt_i64(t.spawn.map(&wall))
        .opt_i64(t.end.map(&wall));
    w.end_row()
}

/// A `polls` row.
fn poll_row(
    w: &mut TableWriter,
    p: &Poll,
    m: &Model,
    wall: impl Fn(u64) -> i64,
    runtime: (Option<u32>, Option<&str>),
) -> Result<(), String> {
    let th = &m.threads[p.thread as usize];
    let proc = &m.procs[th.proc as usize];
    let dur = proc.scale.ns(p.ticks()) as i64;
    // The executor polls a task from the queue it was spawned on; a poll
    // from a named queue names it.
    let queue = if p.executor { p.queue } else { 0 };
    w.u64(proc.pid)
        .u64(proc.recording_id)
        .u64(th.tid)
        .u64(p.task)
        .str(Some(&m.locs[p.loc as usize].text))
        .opt_u32((p.worker != NO_WORKER).then_some(p.worker))
        .str((queue != 0).then(|| m.name(queue)))
        .i64(wall(p.start))
        .i64(dur)
        .opt_i64(p.delay_ticks().map(|d| proc.scale.ns(d) as i64))
        .u32(p.local_q)
        .opt_u32(runtime.0)
        .str(runtime.1);
    w.end_row()
}

/// A `resource_waits` row.
fn wait_row(
    w: &mut TableWriter,
    f: &FinishedWait,
    m: &Model,
    wall: impl Fn(u64) -> i64,
) -> Result<(), String> {
    let proc = &m.procs[f.proc as usize];
    let loc = |l: u32| m.locs.get(l as usize).map(|l| &*l.text);
    let by = f.released_by;
    w.u64(proc.pid)
        .u64(proc.recording_id)
        .u64(m.threads[f.thread as usize].tid)
        .u64(f.task)
        .str(loc(f.loc))
        .u32(f.resource.id)
        .str(Some(f.resource.kind(m)))
        .str(f.resource.created_at(m))
        .bool(f.resource.internal)
        .i64(wall(f.start))
        .i64(wall(f.end))
        .i64(f.ns(m) as i64)
        .str(by.map(|b| if b.release { "release" } else { "wake" }))
        .opt_u64(by.map(|b| b.task))
        .str(by.and_then(|b| loc(b.loc)));
    w.end_row()
}

/// A `spans` row.
fn span_row(
    w: &mut TableWriter,
    s: &Span,
    label: &str,
    m: &Model,
    wall: impl Fn(u64) -> i64,
    runtime: (Option<u32>, Option<&str>),
) -> Result<(), String> {
    let proc = &m.procs[s.proc as usize];
    let ns = |t: u64| proc.scale.ns(t) as i64;
    let fields = m.name(s.fields);
    w.u64(proc.pid)
        .u64(proc.recording_id)
        .u64(m.threads[s.thread as usize].tid)
        .u64(s.id)
        .opt_u64((s.parent != 0).then_some(s.parent))
        .str(Some(m.name(s.name)))
        .str(Some(label))
        .str((!fields.is_empty()).then_some(fields))
        .opt_u64((s.task != 0).then_some(s.task))
        .opt_u32((s.worker != NO_WORKER).then_some(s.worker))
        .opt_u32(runtime.0)
        .str(runtime.1)
        .i64(wall(s.new))
        .opt_i64(s.first_enter.map(&wall))
        .opt_i64(s.close.map(&wall))
        .opt_i64(s.wall_ticks().map(ns))
        .i64(ns(s.busy_ticks))
        .i64(ns(s.delay_ticks))
        .u32(s.enters);
    w.end_row()
}

impl Exporter {
    /// Writes a finished wait's row.
    fn wait_step(&mut self, f: &FinishedWait, m: &Model) -> Result<(), String> {
        let Some(Some(r)) = self.recs.get_mut(f.proc as usize) else {
            return Ok(());
        };
        let (clock, pr) = (r.clock, &m.procs[f.proc as usize]);
        wait_row(&mut r.writers[Table::ResourceWaits.index()], f, m, |t| {
            clock.wall(pr, t)
        })
    }

    /// Writes the rows of the lifecycle's records: a poll at its end, a
    /// task at its end (or alive at its recording's end, when spawned in
    /// it).
    fn life_step(&mut self, rec: &Life<'_>, m: &Model) -> Result<(), String> {
        let proc = match *rec {
            Life::PollEnd(p) => m.threads[p.thread as usize].proc,
            Life::SpanClose(s) | Life::SpanAlive(s) => s.proc,
            // Tasks only ever polled, alive at the end (spawned before the
            // recording and never terminated in it), have no task event to
            // report.
            Life::End(t) | Life::Alive(t) if t.end.is_some() || t.spawn.is_some() => t.proc,
            _ => return Ok(()),
        };
        if !self.rec_ready(proc as usize, m) {
            return Ok(());
        }
        let Some(r) = self.recs[proc as usize].as_mut() else {
            return Ok(());
        };
        let (clock, pr) = (r.clock, &m.procs[proc as usize]);
        let wall = |ticks: u64| clock.wall(pr, ticks);
        match *rec {
            Life::PollEnd(p) => {
                let rt = self.runtime_of(p.thread, m);
                let Some(r) = self.recs[proc as usize].as_mut() else {
                    return Ok(());
                };
                poll_row(&mut r.writers[Table::Polls.index()], p, m, wall, rt)
            }
            Life::SpanClose(s) | Life::SpanAlive(s) => {
                // The runtime of the thread that first entered it (else
                // of the one that created it).
                let rt = self.runtime_of(s.enter_thread, m);
                let l = self.labels.of(m, s.name, s.fields);
                let Some(r) = self.recs[proc as usize].as_mut() else {
                    return Ok(());
                };
                let label = &self.labels.labels[l as usize];
                span_row(&mut r.writers[Table::Spans.index()], s, label, m, wall, rt)
            }
            Life::End(t) | Life::Alive(t) => {
                task_row(&mut r.writers[Table::Tasks.index()], t, m, wall)
            }
            _ => Ok(()),
        }
    }
}

impl Pass for Exporter {
    #[inline]
    fn wants(&self) -> Wants {
        Wants::LIFECYCLE
            .or(Wants::APP)
            .or(Wants::SPANS)
            .or(Samples::wants())
    }

    fn life(&mut self, rec: &Life<'_>, model: &Model) {
        if self.error.is_some() {
            return;
        }
        self.waits.life(rec, model);
        if let Err(e) = self.life_step(rec, model) {
            self.error = Some(e);
        }
        self.samples.life(rec, model);
    }

    #[inline]
    fn event(&mut self, ev: &Ev, model: &Model) {
        let p = model.threads[ev.thread as usize].proc as usize;
        if !self.rec_ready(p, model) {
            return;
        }
        if let Err(e) = self.step(ev, model) {
            self.error = Some(e);
        }
        if let Some(f) = self.waits.event(ev, model) {
            if let Err(e) = self.wait_step(&f, model) {
                self.error = Some(e);
            }
        }
        self.samples.event(ev, model);
    }

    /// A recording is over: its files are completed (under their
    /// temporary names), so an export of many recordings holds the
    /// buffers of one at a time.
    fn end_recording(&mut self, model: &Model) {
        self.finish(model);
    }

    fn finish(&mut self, model: &Model) {
        if self.error.is_some() {
            // Dropping the writers removes their temporary files.
            self.recs.clear();
            return;
        }
        if let Err(e) = self.close(model) {
            self.error = Some(e);
            self.recs.clear();
        }
    }
}

/// The recordings of `root` that already have files, by recording id.
pub fn existing_recordings(root: &Path) -> HashMap<u64, Vec<PathBuf>> {
    let mut out: HashMap<u64, Vec<PathBuf>> = HashMap::new();
    for t in Table::ALL {
        for f in layout::data_files(root, t) {
            if let Some(id) = layout::recording_of(&f) {
                out.entry(id).or_default().push(f);
            }
        }
    }
    out
}
