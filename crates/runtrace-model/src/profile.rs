//! CPU profiles: the `cpu_sample` and `off_cpu` events of a trace (format
//! 1.1), each attributed to what its thread was doing.
//!
//! Attribution (docs/format.md, CPU profiles): a sample of thread T at
//! time t belongs to the poll running on T at t (T's `task_poll_start`
//! .. `task_poll_end` around t), hence to that poll's task, the task's
//! spawn location and the poll's worker; an `off_cpu` event belongs to the
//! poll running on T when it switched out (`ts - off_ns`). Samples outside
//! polls belong to the thread only (an idle or parked worker, another
//! thread). An allocation sample also names the span current on its
//! thread at its time (the innermost `tracing` span entered there, by its
//! label), when the trace has spans.
//!
//! [`ProfilePass`] does this in the same read as other passes; [`load`]
//! runs it alone.
//!
//! ```
//! use runtrace_model::profile::{self, SampleKind};
//! use runtrace_model::synth::TraceBuilder;
//! let mut b = TraceBuilder::new();
//! b.location(1, "src/main.rs", 10, 5);
//! b.stacks(&[(1, &[0x40_1234, 0x40_1000])]);
//! b.spawn(100, 1_000, 7, 0, 1, 0);
//! b.poll_start(100, 0, 2_000, 7, 0, 0);
//! b.cpu_sample(1, 3_000, 100, 1); // in the poll, on the writer's chunks
//! b.poll_end(100, 0, 4_000, 7, true);
//! b.cpu_sample(1, 5_000, 100, 1); // after it
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("trace.0.bin");
//! std::fs::write(&path, b.finish()).unwrap();
//! let p = profile::load(&[path]).unwrap();
//! assert_eq!(p.samples.len(), 2);
//! assert_eq!(p.samples[0].task, Some(7));
//! assert_eq!(p.samples[0].location.as_deref(), Some("src/main.rs:10:5"));
//! assert_eq!(&*p.samples[0].stack, &[0x40_1234, 0x40_1000]);
//! assert_eq!(p.samples[0].kind, SampleKind::OnCpu);
//! assert_eq!(p.samples[0].poll_ns(), Some(2_000)); // the whole poll
//! assert_eq!(p.samples[1].task, None);
//! ```

use crate::event::{kind, Ev};
use crate::input::{self, ReadStats};
use crate::lifecycle::Life;
use crate::model::{Model, UNKNOWN_LOC};
use crate::pass::{Pass, Wants};
use runtrace_format::frame::{Mapping, ProfileInfo};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// On-CPU or off-CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampleKind {
    /// The thread was running (`cpu_sample`).
    OnCpu,
    /// The thread was off-CPU for `off_ns` before the sample's time
    /// (`off_cpu`); the stack is where it switched out.
    OffCpu {
        /// Time off-CPU (ns).
        off_ns: u64,
    },
}

/// One sample, attributed.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// ns since the recording started (for `OffCpu`: the switch-in time).
    pub ts_ns: i64,
    /// The sampled thread's OS tid.
    pub tid: u64,
    /// Its name if known (a THREAD frame), else empty.
    pub thread: String,
    /// Addresses, leaf first (empty if the stack id was 0 or undefined).
    pub stack: Arc<[u64]>,
    /// On- or off-CPU.
    pub kind: SampleKind,
    /// The task of the poll it was taken in, if any.
    pub task: Option<u64>,
    /// That task's spawn location `file:line:col`, if known.
    pub location: Option<Arc<str>>,
    /// That poll's worker.
    pub worker: Option<u32>,
    /// Start of that poll (ns since the recording started).
    pub poll_start_ns: Option<i64>,
    /// End of that poll, when the trace has it (a poll still running when
    /// the recording stopped, or whose end was lost, has none).
    pub poll_end_ns: Option<i64>,
}

impl Sample {
    /// How long the poll this sample was taken in lasted, or at least
    /// lasted: its end minus its start, or (no end in the trace) the
    /// sample's time minus its start. None outside polls.
    ///
    /// ```
    /// # use runtrace_model::profile::{Sample, SampleKind};
    /// let s = Sample {
    ///     ts_ns: 5_000, tid: 1, thread: String::new(), stack: Vec::new().into(),
    ///     kind: SampleKind::OnCpu, task: Some(7), location: None, worker: Some(0),
    ///     poll_start_ns: Some(1_000), poll_end_ns: Some(31_000),
    /// };
    /// assert_eq!(s.poll_ns(), Some(30_000));
    /// ```
    pub fn poll_ns(&self) -> Option<u64> {
        let start = self.poll_start_ns?;
        let end = self.poll_end_ns.unwrap_or(self.ts_ns);
        Some(end.saturating_sub(start).max(0) as u64)
    }

    /// Whether this sample comes from one of runtrace's own threads
    /// ([`is_runtrace_thread`]).
    pub fn is_runtrace(&self) -> bool {
        is_runtrace_thread(&self.thread)
    }
}

/// Whether a thread of that name is one runtrace started (the recorder's
/// writer, runtrace-tokio's queue sampler, runtrace-sync's snapshot
/// thread): every such thread is named `runtrace-...`. Their samples are
/// runtrace's cost, not the application's: on/off-CPU views and findings
/// leave them out unless asked.
///
/// ```
/// use runtrace_model::profile::is_runtrace_thread;
/// assert!(is_runtrace_thread("runtrace-tokio-sampler-0"));
/// assert!(is_runtrace_thread("runtrace-writer"));
/// assert!(!is_runtrace_thread("tokio-runtime-worker"));
/// ```
pub fn is_runtrace_thread(name: &str) -> bool {
    name.starts_with(RUNTRACE_THREAD_PREFIX)
}

/// The name prefix of every thread runtrace starts.
pub const RUNTRACE_THREAD_PREFIX: &str = "runtrace-";

/// What the live set knows of an allocation sample (`alloc_sample`'s
/// `live` field, docs/memory.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Live {
    /// Recorded without the live set: whether it was freed is unknown.
    Off,
    /// Its free is recorded (if it was freed while recording).
    Tracked,
    /// The live set had no room for it: never count it as live.
    Untracked,
}

/// One sampled heap allocation (`alloc_sample`), attributed like a CPU
/// sample: to the poll running on its thread when it was made.
#[derive(Debug, Clone, PartialEq)]
pub struct AllocSample {
    /// ns since the recording started.
    pub ts_ns: i64,
    /// The allocating thread's OS tid.
    pub tid: u64,
    /// Its name if known, else empty.
    pub thread: String,
    /// Addresses, leaf first (empty if none).
    pub stack: Arc<[u64]>,
    /// Bytes asked for.
    pub size: u64,
    /// Bytes of allocation the sample stands for.
    pub weight: u64,
    /// The live set's knowledge of it.
    pub live: Live,
    /// When it was freed (ns since the start), if the trace says so
    /// (`Live::Tracked` only); a `realloc` that moved it is not a free.
    pub freed_ns: Option<i64>,
    /// The task of the poll it was made in, if any.
    pub task: Option<u64>,
    /// That task's spawn location, if known.
    pub location: Option<Arc<str>>,
    /// That poll's worker.
    pub worker: Option<u32>,
    /// The label ([`crate::spans::label`]) of the span current on its
    /// thread when it was made (the innermost entered there), if any.
    pub span: Option<Arc<str>>,
}

impl AllocSample {
    /// Whether the sample counts as live at `t_ns`: tracked, made at or
    /// before `t_ns` and not freed by then.
    ///
    /// ```
    /// # use runtrace_model::profile::{AllocSample, Live};
    /// let s = AllocSample {
    ///     ts_ns: 10, tid: 1, thread: String::new(), stack: Vec::new().into(), size: 8,
    ///     weight: 4096, live: Live::Tracked, freed_ns: Some(50), task: None,
    ///     location: None, worker: None, span: None,
    /// };
    /// assert!(!s.live_at(5) && s.live_at(10) && s.live_at(49) && !s.live_at(50));
    /// ```
    pub fn live_at(&self, t_ns: i64) -> bool {
        self.live == Live::Tracked && self.ts_ns <= t_ns && self.freed_ns.is_none_or(|f| f > t_ns)
    }
}

/// The memory profile's totals: whether the trace has a live set, and
/// what it lost track of (`alloc_note`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryInfo {
    /// Some sample was recorded with the live set on.
    pub live_set: bool,
    /// Samples (and moves) the live set had no room for.
    pub untracked: u64,
    /// Frees lost: up to that many samples look live but are not.
    pub lost_frees: u64,
    /// Frees naming no live sample (its sample was lost).
    pub unmatched_frees: u64,
}

/// Every sample of a trace, attributed, with what symbolization needs.
#[derive(Debug, Clone, Default)]
pub struct Profile {
    /// Samples in time order.
    pub samples: Vec<Sample>,
    /// Sampled allocations in time order (`alloc_sample`), with their
    /// frees when the live set was on.
    pub allocs: Vec<AllocSample>,
    /// The live set's totals.
    pub memory: MemoryInfo,
    /// The recorded processes' executable mappings.
    pub mappings: Vec<Mapping>,
    /// What CPU profiling did, per file that says (`PROFILE` frames).
    pub info: Vec<(PathBuf, ProfileInfo)>,
    /// Things a user should know, one line each (no profile recorded,
    /// profiling refused and why, undefined stacks, ...).
    pub notes: Vec<String>,
    /// What reading found (files, damage), as `runtrace analyze` reports it.
    pub stats: ReadStats,
}

impl Profile {
    /// Whether the trace has CPU or allocation samples.
    ///
    /// ```
    /// assert!(!runtrace_model::profile::Profile::default().has_samples());
    /// ```
    pub fn has_samples(&self) -> bool {
        !self.samples.is_empty() || !self.allocs.is_empty()
    }
}

/// Nothing could be read: every file was missing, unreadable or not a
/// trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// What went wrong, one line per problem (file and byte offset).
    pub errors: Vec<String>,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.errors.join("\n"))
    }
}

impl std::error::Error for Error {}

/// Reads the trace files (what `runtrace analyze` takes: files in any
/// order, sorted by index) and attributes every sample. Damage is in
/// [`Profile::stats`]; only a read that found no trace at all is an error.
pub fn load<P: AsRef<Path>>(paths: &[P]) -> Result<Profile, Error> {
    let paths = input::sorted(paths);
    if paths.is_empty() {
        return Err(Error {
            errors: vec!["no trace files given".into()],
        });
    }
    let mut pass = ProfilePass::default();
    let (model, stats) = input::read(&paths, &mut pass, None);
    if model.procs.is_empty() {
        let mut errors = stats.errors.clone();
        if errors.is_empty() {
            errors.push("no trace file could be read".into());
        }
        return Err(Error { errors });
    }
    Ok(pass.profile(&model, stats))
}

/// Closed polls remembered per thread, for `off_cpu` events whose
/// switch-out was in a poll that has ended by the switch-in (clock skew
/// between the sampler's and the poll events' clocks) and for samples
/// delivered after a later poll started.
const RECENT_POLLS: usize = 16;

/// Span enters remembered per thread after their exit, for allocation
/// samples delivered after a later enter or exit on their thread.
const RECENT_ENTERS: usize = 16;

/// The spans entered on one thread: open enters (outermost first) and
/// the last closed ones, as (span id, start, end, label index; ticks,
/// `end` `u64::MAX` while open).
#[derive(Debug, Default, Clone)]
struct ThreadSpans {
    open: Vec<(u64, u64, u64, u32)>,
    recent: VecDeque<(u64, u64, u64, u32)>,
}

impl ThreadSpans {
    /// The label of the innermost span entered at `t`: of the enters
    /// around `t`, the one that began last.
    fn at(&self, t: u64) -> Option<u32> {
        self.open
            .iter()
            .chain(self.recent.iter())
            .filter(|e| e.1 <= t && t <= e.2)
            .max_by_key(|e| e.1)
            .map(|e| e.3)
    }
}

/// A poll on one thread, in ticks (`end`: `u64::MAX` while running).
#[derive(Debug, Clone, Copy)]
struct Span {
    start: u64,
    end: u64,
    task: u64,
    worker: u32,
    loc: u32,
}

impl Span {
    fn contains(&self, t: u64) -> bool {
        self.start <= t && t <= self.end
    }
}

#[derive(Debug, Default, Clone)]
struct ThreadPolls {
    open: Option<Span>,
    recent: VecDeque<Span>,
    /// Samples taken in the open poll (indices into the pass's samples):
    /// their poll's end is known when it closes.
    open_samples: Vec<usize>,
}

impl ThreadPolls {
    /// Closes the open poll at `end`, giving its samples that end.
    fn close(&mut self, end: u64, poll_end: &mut [u64]) {
        for i in self.open_samples.drain(..) {
            poll_end[i] = end;
        }
        if let Some(mut s) = self.open.take() {
            s.end = end;
            if self.recent.len() == RECENT_POLLS {
                self.recent.pop_front();
            }
            self.recent.push_back(s);
        }
    }

    /// The poll running at `t`, newest first.
    fn at(&self, t: u64) -> Option<&Span> {
        self.open
            .iter()
            .chain(self.recent.iter().rev())
            .find(|s| s.contains(t))
    }
}

/// The pass behind [`load`]: feed it with [`input::read`] (alone or paired
/// with other passes), then take the result with [`ProfilePass::profile`].
///
/// ```
/// use runtrace_model::profile::ProfilePass;
/// use runtrace_model::synth::TraceBuilder;
/// let mut b = TraceBuilder::new();
/// b.stacks(&[(1, &[0x40_1234])]);
/// b.poll_start(100, 0, 2_000, 7, 0, 0);
/// b.cpu_sample(1, 3_000, 100, 1);
/// b.poll_end(100, 0, 4_000, 7, true);
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("trace.0.bin");
/// std::fs::write(&path, b.finish()).unwrap();
/// // Pair it with other passes to read once for all of them.
/// let mut pass = ProfilePass::default();
/// let (model, stats) = runtrace_model::input::read(&[path], &mut pass, None);
/// let profile = pass.profile(&model, stats);
/// assert_eq!(profile.samples[0].worker, Some(0));
/// ```
#[derive(Debug, Default, Clone)]
pub struct ProfilePass {
    threads: Vec<ThreadPolls>,
    samples: Vec<Sample>,
    /// Thread index of each sample (names are known at the end).
    sample_thread: Vec<u32>,
    /// End of each sample's poll in ticks (`u64::MAX`: outside polls, or
    /// not ended yet).
    poll_end: Vec<u64>,
    undefined_stacks: u64,
    allocs: Vec<AllocSample>,
    /// Thread index of each allocation sample.
    alloc_thread: Vec<u32>,
    /// Live tracked samples by address (indices into `allocs`).
    at_addr: std::collections::HashMap<u64, Vec<usize>>,
    memory: MemoryInfo,
    /// Spans entered, per thread (allocation samples' spans).
    spans: Vec<ThreadSpans>,
    /// Span labels, and each label's text once.
    labels: crate::spans::Labels,
    label_text: Vec<Arc<str>>,
}

impl ProfilePass {
    fn polls(&mut self, t: u32) -> &mut ThreadPolls {
        let i = t as usize;
        if i >= self.threads.len() {
            self.threads.resize_with(i + 1, ThreadPolls::default);
        }
        &mut self.threads[i]
    }

    fn sample(&mut self, ev: &Ev, model: &Model) {
        let t = ev.worker;
        let th = &model.threads[t as usize];
        let proc = &model.procs[th.proc as usize];
        let kind = if ev.kind == kind::OFF_CPU {
            SampleKind::OffCpu { off_ns: ev.x }
        } else {
            SampleKind::OnCpu
        };
        // Off-CPU time belongs to where the thread switched out.
        let at = match kind {
            SampleKind::OnCpu => ev.ticks,
            SampleKind::OffCpu { off_ns } => {
                let off = (off_ns as u128 * proc.ticks_per_sec as u128 / 1_000_000_000) as u64;
                ev.ticks.saturating_sub(off)
            }
        };
        let span = self.threads.get(t as usize).and_then(|p| p.at(at)).copied();
        let index = self.samples.len();
        if span.is_some_and(|s| s.end == u64::MAX) {
            self.polls(t).open_samples.push(index);
        }
        self.poll_end.push(span.map_or(u64::MAX, |s| s.end));
        if ev.flag == 1 {
            self.undefined_stacks += 1;
        }
        self.samples.push(Sample {
            ts_ns: proc.ns(ev.ticks),
            tid: th.tid,
            thread: String::new(),
            stack: model.stacks[ev.a as usize].clone(),
            kind,
            task: span.map(|s| s.task),
            location: span
                .filter(|s| s.loc != UNKNOWN_LOC)
                .map(|s| model.locs[s.loc as usize].text.clone()),
            worker: span
                .map(|s| s.worker)
                .filter(|&w| w != runtrace_format::NO_WORKER),
            poll_start_ns: span.map(|s| proc.ns(s.start)),
            poll_end_ns: None,
        });
        self.sample_thread.push(t);
    }

    fn alloc(&mut self, ev: &Ev, model: &Model) {
        let t = ev.worker;
        let th = &model.threads[t as usize];
        let proc = &model.procs[th.proc as usize];
        let i = ev.x as usize;
        let (size, weight, addr) = (model.side[i], model.side[i + 1], model.side[i + 2]);
        let live = match ev.flag & 3 {
            0 => Live::Off,
            1 => Live::Tracked,
            _ => Live::Untracked,
        };
        if ev.flag & 4 != 0 {
            self.undefined_stacks += 1;
        }
        if live != Live::Off {
            self.memory.live_set = true;
        }
        let span = self
            .threads
            .get(t as usize)
            .and_then(|p| p.at(ev.ticks))
            .copied();
        let in_span = self
            .spans
            .get(t as usize)
            .and_then(|sp| sp.at(ev.ticks))
            .map(|l| self.label_text[l as usize].clone());
        if live == Live::Tracked {
            self.at_addr
                .entry(addr)
                .or_default()
                .push(self.allocs.len());
        }
        self.allocs.push(AllocSample {
            ts_ns: proc.ns(ev.ticks),
            tid: th.tid,
            thread: String::new(),
            stack: model.stacks[ev.a as usize].clone(),
            size,
            weight,
            live,
            freed_ns: None,
            task: span.map(|s| s.task),
            location: span
                .filter(|s| s.loc != UNKNOWN_LOC)
                .map(|s| model.locs[s.loc as usize].text.clone()),
            worker: span
                .map(|s| s.worker)
                .filter(|&w| w != runtrace_format::NO_WORKER),
            span: in_span,
        });
        self.alloc_thread.push(t);
    }

    /// A span enter or exit on its thread (what allocation samples are
    /// attributed to).
    fn span_life(&mut self, rec: &Life<'_>, model: &Model) {
        match *rec {
            Life::SpanEnter(e) => {
                let l = self.labels.of(model, e.name, e.fields);
                if l as usize == self.label_text.len() {
                    self.label_text
                        .push(Arc::from(self.labels.labels[l as usize].as_str()));
                }
                let i = e.thread as usize;
                if i >= self.spans.len() {
                    self.spans.resize_with(i + 1, ThreadSpans::default);
                }
                self.spans[i].open.push((e.span, e.start, u64::MAX, l));
            }
            Life::SpanExit(e) => {
                let Some(th) = self.spans.get_mut(e.thread as usize) else {
                    return;
                };
                let Some(k) = th.open.iter().rposition(|o| o.0 == e.span) else {
                    return;
                };
                let mut o = th.open.remove(k);
                o.2 = e.end;
                if th.recent.len() == RECENT_ENTERS {
                    th.recent.pop_front();
                }
                th.recent.push_back(o);
            }
            _ => {}
        }
    }

    fn free(&mut self, ev: &Ev, model: &Model) {
        let Some(v) = self.at_addr.remove(&ev.x) else {
            self.memory.unmatched_frees += 1;
            return;
        };
        if ev.a != 0 {
            // Moved by realloc: the samples live on at the new address.
            let to = model.side[ev.a as usize - 1];
            self.at_addr.entry(to).or_default().extend(v);
            return;
        }
        let th = &model.threads[ev.worker as usize];
        let ns = model.procs[th.proc as usize].ns(ev.ticks);
        for i in v {
            self.allocs[i].freed_ns = Some(ns);
        }
    }

    /// The attributed samples, the mappings and profile frames the read
    /// found, and notes about them. Call after [`input::read`].
    pub fn profile(self, model: &Model, stats: ReadStats) -> Profile {
        let mut allocs = self.allocs;
        for (s, &t) in allocs.iter_mut().zip(&self.alloc_thread) {
            if let Some(name) = &model.threads[t as usize].name {
                s.thread.clone_from(name);
            }
        }
        let memory = self.memory;
        let mut samples = self.samples;
        for ((s, &t), &end) in samples
            .iter_mut()
            .zip(&self.sample_thread)
            .zip(&self.poll_end)
        {
            let th = &model.threads[t as usize];
            if let Some(name) = &th.name {
                s.thread.clone_from(name);
            }
            if end != u64::MAX {
                s.poll_end_ns = Some(model.procs[th.proc as usize].ns(end));
            }
        }
        let mut notes = Vec::new();
        if memory.untracked > 0 {
            notes.push(format!(
                "the live set had no room for {} sampled allocations: they are never counted as live",
                memory.untracked
            ));
        }
        if memory.lost_frees > 0 {
            notes.push(format!(
                "{} frees of sampled allocations were lost (a full sample queue): live bytes may be overstated by that many samples",
                memory.lost_frees
            ));
        }
        if model.profiles.is_empty() && allocs.is_empty() {
            notes.push(
                "no PROFILE frame: the trace was recorded without CPU profiling \
                 (Recorder::builder().cpu_profile(hz) or RUNTRACE_CPU_HZ)"
                    .to_string(),
            );
        }
        for (path, info) in &model.profiles {
            if info.mode == ProfileInfo::MODE_NONE {
                notes.push(format!(
                    "{}: CPU profiling was not possible: {}",
                    path.display(),
                    info.message
                ));
            }
        }
        if self.undefined_stacks > 0 {
            notes.push(format!(
                "{} samples name a stack that no STACKS frame defined (their stack is empty)",
                self.undefined_stacks
            ));
        }
        if !samples.is_empty() && model.mappings.is_empty() {
            notes.push("samples but no MAPPINGS frame: addresses cannot be symbolized".to_string());
        }
        Profile {
            samples,
            allocs,
            memory,
            mappings: model.mappings.clone(),
            info: model.profiles.clone(),
            notes,
            stats,
        }
    }
}

impl Pass for ProfilePass {
    #[inline]
    fn wants(&self) -> Wants {
        Wants::LIFECYCLE.or(Wants::PROFILE).or(Wants::SPANS)
    }

    fn life(&mut self, rec: &Life<'_>, model: &Model) {
        if matches!(rec, Life::SpanEnter(_) | Life::SpanExit(_)) {
            self.span_life(rec, model);
            return;
        }
        if let Life::PollStart(p) = rec {
            let i = p.thread as usize;
            if i >= self.threads.len() {
                self.threads.resize_with(i + 1, ThreadPolls::default);
            }
            let polls = &mut self.threads[i];
            // A poll without its end (lost events) ends here.
            polls.close(p.start, &mut self.poll_end);
            polls.open = Some(Span {
                start: p.start,
                end: u64::MAX,
                task: p.task,
                worker: p.worker,
                loc: p.loc,
            });
        }
    }

    fn event(&mut self, ev: &Ev, model: &Model) {
        match ev.kind {
            kind::POLL_END => {
                if let Some(p) = self.threads.get_mut(ev.thread as usize) {
                    p.close(ev.ticks, &mut self.poll_end);
                }
            }
            kind::CPU_SAMPLE | kind::OFF_CPU => self.sample(ev, model),
            kind::ALLOC_SAMPLE => self.alloc(ev, model),
            kind::ALLOC_FREE => self.free(ev, model),
            kind::ALLOC_NOTE => {
                self.memory.untracked += ev.x;
                self.memory.lost_frees += ev.a as u64;
            }
            _ => {}
        }
    }
}
