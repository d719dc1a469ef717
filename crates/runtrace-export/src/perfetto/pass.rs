//! The exporter pass: runtrace events (in time order, from
//! `runtrace_model::input`) to Perfetto track events, streaming. State is
//! per live task, per thread (its open slices) and per track, so memory is
//! bounded by the trace's concurrency, never its length.

use super::proto::{
    CounterDescriptor, DebugAnnotation, ProcessDescriptor, ThreadDescriptor, TrackDescriptor,
    TrackEvent, TYPE_COUNTER, TYPE_INSTANT, TYPE_SLICE_BEGIN, TYPE_SLICE_END,
};
use super::samples::{Root, Samples};
use super::writer::PacketWriter;
use runtrace_model::event::{kind, Ev};
use runtrace_model::lifecycle::{Life, Poll};
use runtrace_model::model::{Model, UNKNOWN_LOC};
use runtrace_model::pass::{Pass, Wants};
use runtrace_model::spans::{Entered, Labels, Span};
use runtrace_model::waits::{FinishedWait, WaitTracker};
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::io::Write;
use std::sync::Arc;

/// Debug annotation names, by iid - 1 (interned once, up front).
pub(crate) const ANNOTATIONS: &[&str] = &[
    "task_id",
    "local_q",
    "worker",
    "executor_queue",
    "bytes",
    "duration_ns",
    "queue_size",
    "cause",
    "growth_per_s",
    "reason",
    "write",
    "span_id",
    "fields",
    "busy_ns",
    "delay_ns",
    "resource",
    "resource_id",
    "released_by",
    "waiter_task",
    "releaser_task",
];
const A_TASK: u64 = 1;
const A_LOCAL_Q: u64 = 2;
const A_WORKER: u64 = 3;
const A_EXECUTOR: u64 = 4;
const A_BYTES: u64 = 5;
const A_DUR: u64 = 6;
const A_QUEUE_SIZE: u64 = 7;
const A_CAUSE: u64 = 8;
const A_GROWTH: u64 = 9;
const A_REASON: u64 = 10;
const A_WRITE: u64 = 11;
const A_SPAN: u64 = 12;
const A_FIELDS: u64 = 13;
const A_BUSY: u64 = 14;
const A_DELAY: u64 = 15;
const A_RESOURCE: u64 = 16;
const A_RESOURCE_ID: u64 = 17;
const A_RELEASED_BY: u64 = 18;
const A_WAITER: u64 = 19;
const A_RELEASER: u64 = 20;

/// Name spaces of [`PacketWriter::event_name`].
const S_LOC: usize = 0;
const S_FIXED: usize = 1;
/// Span labels, index = [`Labels`] index.
const S_SPAN: usize = 2;
/// Application names: space `S_APP + group`, index = name index.
const S_APP: usize = 3;
const FIXED: &[&str] = &["parked", "wake", "spawn", "release", "handover"];
const F_PARKED: u32 = 0;
const F_WAKE: u32 = 1;
const F_SPAWN: u32 = 2;
const F_RELEASE: u32 = 3;
const F_HANDOVER: u32 = 4;
/// Resource wait slices' names ("wait Mutex src/db.rs:12:9"), index =
/// [`Exporter::wait_names`] index.
const S_WAIT: usize = S_APP + APP.len();
/// Flight-recorder snapshot triggers' names ("snapshot: slow-poll"),
/// index = [`Model::snapshots`] index.
const S_SNAPSHOT: usize = S_WAIT + 1;
/// Resource wait lanes: kind [`U_SPAN_LANE`] with this bit in the lane
/// part of the index (span lanes stay under [`MAX_LANES`]).
const WAIT_LANE_BIT: u64 = 1 << 15;

/// Application event groups: name prefix and lane track name.
const APP: &[(&str, &str)] = &[
    ("wait ", "lock waits"),
    ("hold ", "lock holds"),
    ("io ", "io"),
    ("process ", "processing"),
    ("dropped ", ""),
    ("backlog trigger ", ""),
    ("heartbeat ", ""),
];
const G_WAIT: usize = 0;
const G_HOLD: usize = 1;
const G_IO: usize = 2;
const G_PROC: usize = 3;
const G_DROP: usize = 4;
const G_TRIGGER: usize = 5;
const G_HEARTBEAT: usize = 6;

/// Track uuid kinds: `uuid = index << 3 | kind`, so the uuids events
/// carry are one- or two-byte varints (the output is mostly track events).
const U_PROC: u64 = 1;
const U_THREAD: u64 = 2;
const U_LOCAL_Q: u64 = 3;
const U_GLOBAL_Q: u64 = 4;
const U_NAMED_Q: u64 = 5;
const U_APP_Q: u64 = 6;
const U_LANE: u64 = 7;

/// Kind 0: the lanes of the spans' whole lives under a process track
/// (index `proc << 16 | lane`, plus 1: never uuid 0).
const U_SPAN_LANE: u64 = 0;

/// The uuid of track `index` of `kind`.
#[inline(always)]
fn uuid(kind: u64, index: u64) -> u64 {
    index << 3 | kind
}
/// Most lanes per (thread, group); more overlapping slices are counted,
/// not drawn.
const MAX_LANES: usize = 255;

/// A multiplicative hasher for integer keys (task ids are not adversarial).
#[derive(Default)]
struct IntHasher(u64);

impl Hasher for IntHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(v as u64);
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
}

type IntMap<K, V> = HashMap<K, V, BuildHasherDefault<IntHasher>>;

/// What was written: the tests compare these with `runtrace check`.
///
/// ```
/// let s = runtrace_export::perfetto::ExportStats::default();
/// assert_eq!(s.polls, 0);
/// ```
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ExportStats {
    /// Packets written.
    pub packets: u64,
    /// Poll slices (one per TaskPollStart).
    pub polls: u64,
    /// Parked slices (one per WorkerPark).
    pub parks: u64,
    /// Flows started (a spawn or the first wake before a poll).
    pub flows: u64,
    /// Flows that reached a poll.
    pub flows_joined: u64,
    /// Counter values.
    pub counter_values: u64,
    /// Application slices (lock waits and holds, I/O, processing).
    pub app_slices: u64,
    /// Instants (wakes, spawns, drops, triggers, heartbeats).
    pub instants: u64,
    /// Slices still open at the end of a recording, closed there.
    pub closed_at_end: u64,
    /// Polls that began while a poll of the same task was still open on
    /// the thread: the open one lost its end, and was ended there.
    pub closed_early: u64,
    /// Poll ends and unparks with no open poll or park (skipped).
    pub unmatched_ends: u64,
    /// Application slices beyond `MAX_LANES` overlapping ones (skipped).
    pub overlapping_skipped: u64,
    /// CPU samples written as callstack samples (one per `cpu_sample`).
    pub cpu_samples: u64,
    /// Off-CPU stacks written as callstack samples (one per `off_cpu`).
    pub off_cpu_samples: u64,
    /// Allocation samples written as callstack samples (one per
    /// `alloc_sample`).
    pub alloc_samples: u64,
    /// Span slices on thread tracks (one per enter, inside the poll it
    /// ran in).
    pub span_slices: u64,
    /// Spans' whole lives (first enter to close) on the process's span
    /// lanes.
    pub span_lives: u64,
    /// Flight-recorder snapshot triggers, as instants on their process's
    /// track named by the reason.
    pub snapshot_triggers: u64,
    /// The application's snapshot requests (`runtrace::snapshot!`), as
    /// instants beside them ("snapshot requested: REASON").
    pub snapshot_requests: u64,
    /// Waits on tokio resources, as slices on the process's resource wait
    /// lanes (`runtrace_model::waits`).
    pub resource_waits: u64,
    /// Of those, the waits whose releaser is known: a flow from its
    /// release (or wake) to the wait's handover slice.
    pub resource_flows: u64,
}

#[derive(Clone, Copy, PartialEq)]
enum Open {
    Poll(u64),
    Park,
    Span(u64),
}

#[derive(Default)]
struct ThreadState {
    described: bool,
    stack: Vec<Open>,
    local_q: Option<u32>,
}

/// The id of the flow from the wake (or spawn) at `ticks` of `task` in
/// recording `proc` to the poll that answers it (the lifecycle's
/// [`Poll::wake`]): both ends compute it, so no task map is kept. Never 0.
fn flow_id(proc: u32, task: u64, ticks: u64) -> u64 {
    // splitmix64 finalizer over the three values: distinct flows collide
    // with probability ~2^-64 per pair.
    let mut z = ticks ^ task.rotate_left(32) ^ (proc as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)).max(1)
}

/// The Perfetto exporter as a pass; [`Exporter::finish_output`] returns
/// the output and what was written. Run it beside other passes in one
/// read as a pair.
///
/// ```
/// use runtrace_model::synth::TraceBuilder;
/// use runtrace_export::perfetto::Exporter;
/// let mut b = TraceBuilder::new();
/// b.park(7, 0, 1_000, 0, 0);
/// b.unpark(7, 0, 9_000, 0, 0);
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("trace.0.bin");
/// std::fs::write(&path, b.finish()).unwrap();
/// let mut ex = Exporter::new(Vec::new());
/// runtrace_model::input::read(&[path], &mut ex, None);
/// let (bytes, err, stats) = ex.finish_output();
/// assert!(err.is_none() && !bytes.is_empty());
/// assert_eq!(stats.parks, 1);
/// ```
pub struct Exporter<W: Write> {
    w: PacketWriter<W>,
    te: TrackEvent,
    threads: Vec<ThreadState>,
    procs_described: Vec<bool>,
    /// The lifecycle's record of the raw event being exported (it comes
    /// just before the event): a poll start's task location and wake.
    cur_poll: Option<Poll>,
    /// Whether the wake being exported is its task's first since its last
    /// poll (the one its next poll answers).
    cur_wake_first: bool,
    tracks: HashSet<u64, BuildHasherDefault<IntHasher>>,
    lanes: IntMap<(u32, usize), Vec<u64>>,
    /// Span labels (the slices' names).
    labels: Labels,
    /// Per recording, the end of the last span life on each lane.
    span_lanes: Vec<Vec<u64>>,
    /// Runtime names by (recording, runtime): worker tracks say them.
    runtime_names: IntMap<(u32, u32), String>,
    /// Wall-clock ns of timestamp 0: the anchor of the first recording
    /// with an event (`u64::MAX` until then). Events of a recording that
    /// started earlier are clamped to 0.
    base: u64,
    stats: ExportStats,
    samples: Samples,
    /// The finished waits on tokio resources.
    waits: WaitTracker,
    /// Per recording, the end of the last wait on each resource wait lane.
    wait_lanes: Vec<Vec<u64>>,
    /// Wait slice names by (type, creation site, internal).
    wait_names: IntMap<(u32, u32, bool), u32>,
}

impl<W: Write> Exporter<W> {
    /// An exporter writing to `out`.
    pub fn new(out: W) -> Self {
        let mut w = PacketWriter::new(out);
        w.annotation_names(ANNOTATIONS);
        Exporter {
            w,
            te: TrackEvent::default(),
            threads: Vec::new(),
            procs_described: Vec::new(),
            cur_poll: None,
            cur_wake_first: false,
            tracks: HashSet::default(),
            lanes: IntMap::default(),
            labels: Labels::default(),
            span_lanes: Vec::new(),
            runtime_names: IntMap::default(),
            base: u64::MAX,
            stats: ExportStats::default(),
            samples: Samples::default(),
            waits: WaitTracker::default(),
            wait_lanes: Vec::new(),
            wait_names: IntMap::default(),
        }
    }

    /// What could not be symbolized in the samples' stacks, one line each
    /// (binary not found, stripped, ...); empty without samples.
    pub fn symbol_problems(&self) -> Vec<String> {
        self.samples.problems()
    }

    /// The output, the first write error and the statistics.
    pub fn finish_output(self) -> (W, Option<std::io::Error>, ExportStats) {
        let mut stats = self.stats;
        stats.packets = self.w.packets;
        let (out, err) = self.w.finish();
        (out, err, stats)
    }

    /// The timestamp of `ticks` on thread `t`'s clock: wall-clock ns
    /// minus [`Exporter::base`] (ns since the first recording started, so
    /// timestamps are short varints and recordings line up).
    #[inline]
    fn ts(&mut self, model: &Model, t: u32, ticks: u64) -> u64 {
        let proc = model.threads[t as usize].proc;
        self.ts_of(model, proc, ticks)
    }

    /// A fresh event on `track` (keeps the scratch vectors' capacity).
    #[inline]
    fn begin(&mut self, ty: i32, track: u64) -> TrackEvent {
        let mut e = std::mem::take(&mut self.te);
        e.debug_annotations.clear();
        e.flow_ids.clear();
        e.terminating_flow_ids.clear();
        e.r#type = Some(ty);
        e.track_uuid = Some(track);
        e.name_iid = None;
        e.counter_value = None;
        e
    }

    #[inline]
    fn emit(&mut self, ts: u64, e: TrackEvent) {
        self.te = self.w.event(ts, e);
    }

    fn ensure_proc(&mut self, model: &Model, p: u32) -> u64 {
        let uuid = uuid(U_PROC, p as u64);
        if self.procs_described.len() <= p as usize {
            self.procs_described.resize(p as usize + 1, false);
        }
        if !self.procs_described[p as usize] {
            self.procs_described[p as usize] = true;
            let pr = &model.procs[p as usize];
            self.w.track(TrackDescriptor {
                uuid: Some(uuid),
                name: Some(format!("{} (pid {})", pr.process_name, pr.pid)),
                process: Some(ProcessDescriptor {
                    pid: Some(pr.pid as i32),
                    process_name: Some(pr.process_name.clone()),
                }),
                ..Default::default()
            });
        }
        uuid
    }

    /// Thread `ev.thread`'s track, described on first use with the best
    /// name known then (worker kind and index, thread name, tid).
    #[inline]
    fn thread_track(&mut self, model: &Model, ev: &Ev) -> u64 {
        let t = ev.thread as usize;
        if t >= self.threads.len() {
            self.threads.resize_with(t + 1, ThreadState::default);
        }
        if !self.threads[t].described {
            self.describe_thread(model, ev);
        }
        uuid(U_THREAD, ev.thread as u64)
    }

    #[cold]
    fn describe_thread(&mut self, model: &Model, ev: &Ev) {
        self.threads[ev.thread as usize].described = true;
        let th = &model.threads[ev.thread as usize];
        // The process track comes first (thread tracks join it by pid).
        self.ensure_proc(model, th.proc);
        let pid = model.procs[th.proc as usize].pid;
        let worker = match ev.kind {
            kind::POLL_START if ev.flag == 1 => Some(format!("executor {}", ev.worker)),
            kind::POLL_START => Some(format!("tokio worker {}", ev.worker)),
            // Only runtrace-tokio records worker start and stop; `a` is
            // the runtime, named by the RuntimeName just before.
            kind::WORKER_START | kind::WORKER_STOP => {
                Some(match self.runtime_names.get(&(th.proc, ev.a)) {
                    Some(rt) => format!("{rt} worker {}", ev.worker),
                    None => format!("tokio worker {}", ev.worker),
                })
            }
            kind::PARK | kind::UNPARK => Some(format!("worker {}", ev.worker)),
            _ => None,
        };
        let name = match (worker, &th.name) {
            (Some(w), Some(n)) => format!("{w} ({n})"),
            (Some(w), None) => w,
            (None, Some(n)) => n.clone(),
            (None, None) => format!("thread {}", th.tid),
        };
        self.w.track(TrackDescriptor {
            uuid: Some(uuid(U_THREAD, ev.thread as u64)),
            name: Some(name.clone()),
            thread: Some(ThreadDescriptor {
                pid: Some(pid as i32),
                tid: Some(th.tid as i32),
                thread_name: Some(name),
            }),
            ..Default::default()
        });
    }

    /// Counter track `uuid` under `parent`, described on first use.
    fn counter(&mut self, ts: u64, uuid: u64, parent: u64, name: impl FnOnce() -> String, v: u64) {
        if self.tracks.insert(uuid) {
            self.w.track(TrackDescriptor {
                uuid: Some(uuid),
                name: Some(name()),
                parent_uuid: Some(parent),
                counter: Some(CounterDescriptor {}),
                ..Default::default()
            });
        }
        let mut e = self.begin(TYPE_COUNTER, uuid);
        e.counter_value = Some(v as i64);
        self.emit(ts, e);
        self.stats.counter_values += 1;
    }

    /// Adds annotation `iid`, its value set by `set`.
    fn ann(e: &mut TrackEvent, iid: u64, set: impl FnOnce(&mut DebugAnnotation)) {
        let mut a = DebugAnnotation {
            name_iid: Some(iid),
            ..Default::default()
        };
        set(&mut a);
        e.debug_annotations.push(a);
    }

    /// Adds an unsigned annotation.
    fn ann_u(e: &mut TrackEvent, iid: u64, v: u64) {
        Self::ann(e, iid, |a| a.uint_value = Some(v));
    }

    fn app_name(&mut self, model: &Model, group: usize, name: u32) -> u64 {
        self.w.event_name(S_APP + group, name, || {
            format!("{}{}", APP[group].0, model.name(name))
        })
    }

    /// An application slice [end - dur, end] on a lane of `group` under the
    /// thread: the first lane free at its start, so no track overlaps.
    fn app_slice(&mut self, model: &Model, ev: &Ev, group: usize, dur: u64) {
        let thread = self.thread_track(model, ev);
        let end = self.ts(model, ev.thread, ev.ticks);
        let start = end.saturating_sub(dur);
        let lanes = self.lanes.entry((ev.thread, group)).or_default();
        let lane = match lanes.iter().position(|&e| e <= start) {
            Some(i) => i,
            None if lanes.len() < MAX_LANES => {
                lanes.push(0);
                lanes.len() - 1
            }
            None => {
                self.stats.overlapping_skipped += 1;
                return;
            }
        };
        lanes[lane] = end;
        let uuid = uuid(
            U_LANE,
            (ev.thread as u64) << 16 | (group as u64) << 8 | lane as u64,
        );
        if self.tracks.insert(uuid) {
            let name = if lane == 0 {
                APP[group].1.to_string()
            } else {
                format!("{} {}", APP[group].1, lane + 1)
            };
            self.w.track(TrackDescriptor {
                uuid: Some(uuid),
                name: Some(name),
                parent_uuid: Some(thread),
                ..Default::default()
            });
        }
        let iid = self.app_name(model, group, ev.worker);
        let mut e = self.begin(TYPE_SLICE_BEGIN, uuid);
        e.name_iid = Some(iid);
        Self::ann_u(&mut e, A_DUR, dur);
        match ev.kind {
            kind::IO => {
                let bytes = if ev.flag == 1 {
                    model.side.get(ev.a as usize).copied().unwrap_or(0)
                } else {
                    ev.a as u64
                };
                Self::ann_u(&mut e, A_BYTES, bytes);
            }
            kind::LOCK_WAIT | kind::LOCK_HOLD => {
                Self::ann(&mut e, A_WRITE, |a| a.bool_value = Some(ev.flag == 1))
            }
            _ => {}
        }
        self.emit(start, e);
        let e = self.begin(TYPE_SLICE_END, uuid);
        self.emit(end, e);
        self.stats.app_slices += 1;
    }

    fn instant(&mut self, ts: u64, track: u64, iid: u64, fill: impl FnOnce(&mut TrackEvent)) {
        let mut e = self.begin(TYPE_INSTANT, track);
        e.name_iid = Some(iid);
        fill(&mut e);
        self.emit(ts, e);
        self.stats.instants += 1;
    }

    /// Ends a `target` still open on thread `t` (and what is open inside
    /// it), counting it in [`ExportStats::closed_early`].
    fn close_stale(&mut self, t: u32, ts: u64, target: Open) {
        if self.threads[t as usize].stack.contains(&target) {
            self.close_to(t, ts, target);
            self.stats.closed_early += 1;
        }
    }

    /// Ends open slices of thread `t` down to and including the first
    /// `target` (innermost first); counts it unmatched when none is open.
    fn close_to(&mut self, t: u32, ts: u64, target: Open) {
        let stack = &mut self.threads[t as usize].stack;
        let Some(pos) = stack.iter().rposition(|&o| o == target) else {
            self.stats.unmatched_ends += 1;
            return;
        };
        let n = stack.len() - pos;
        stack.truncate(pos);
        for _ in 0..n {
            let e = self.begin(TYPE_SLICE_END, uuid(U_THREAD, t as u64));
            self.emit(ts, e);
        }
    }

    fn local_q(&mut self, ev: &Ev, ts: u64, q: u32) {
        let t = ev.thread as usize;
        if self.threads[t].local_q == Some(q) {
            return;
        }
        self.threads[t].local_q = Some(q);
        let parent = uuid(U_THREAD, ev.thread as u64);
        self.counter(
            ts,
            uuid(U_LOCAL_Q, ev.thread as u64),
            parent,
            || format!("local queue (worker {})", ev.worker),
            q as u64,
        );
    }

    /// A `cpu_sample`, `off_cpu` or `alloc_sample` event as a callstack
    /// sample of the sampled (allocating) thread (`ev.worker`; `ev.thread`
    /// is the thread that wrote it), an off-CPU one at its switch-out time.
    fn sample(&mut self, ev: &Ev, model: &Model) {
        let t = ev.worker;
        let Some(th) = model.threads.get(t as usize) else {
            return;
        };
        let pid = model.procs[th.proc as usize].pid as u32;
        let tid = th.tid as u32;
        // The sampled (or allocating) thread is in `worker` for all three
        // kinds (runtrace_model::event's packing).
        let root = match ev.kind {
            kind::OFF_CPU => Root::OffCpu,
            kind::ALLOC_SAMPLE => Root::Alloc,
            _ => Root::OnCpu,
        };
        let mut ts = self.ts(model, t, ev.ticks);
        if root == Root::OffCpu {
            ts = ts.saturating_sub(ev.x);
        }
        let stack = model
            .stacks
            .get(ev.a as usize)
            .cloned()
            .unwrap_or_else(|| Arc::from(&[][..]));
        self.samples.write(
            &mut self.w,
            &model.mappings,
            ts,
            pid,
            tid,
            ev.a,
            &stack,
            root,
        );
        match root {
            Root::OnCpu => self.stats.cpu_samples += 1,
            Root::OffCpu => self.stats.off_cpu_samples += 1,
            Root::Alloc => self.stats.alloc_samples += 1,
        }
    }

    /// A span slice on the thread track, inside the poll open there.
    fn span_enter(&mut self, model: &Model, e: &Entered) {
        let pseudo = Ev {
            ticks: e.start,
            x: e.span,
            a: 0,
            thread: e.thread,
            worker: e.worker,
            kind: kind::SPAN_ENTER,
            flag: 0,
        };
        let track = self.thread_track(model, &pseudo);
        let ts = self.ts(model, e.thread, e.start);
        let l = self.labels.of(model, e.name, e.fields);
        let labels = &self.labels;
        let iid = self
            .w
            .event_name(S_SPAN, l, || labels.labels[l as usize].clone());
        let mut ev = self.begin(TYPE_SLICE_BEGIN, track);
        ev.name_iid = Some(iid);
        Self::ann_u(&mut ev, A_SPAN, e.span);
        if e.task != 0 {
            Self::ann_u(&mut ev, A_TASK, e.task);
        }
        self.emit(ts, ev);
        self.threads[e.thread as usize]
            .stack
            .push(Open::Span(e.span));
        self.stats.span_slices += 1;
    }

    /// A span's whole life, first enter to close, as a slice on the first
    /// free lane of its recording's span lanes (an async track per lane
    /// under the process: requests overlap).
    fn span_life(&mut self, model: &Model, s: &Span) {
        let (Some(first), Some(close)) = (s.first_enter, s.close) else {
            return; // never entered: no life to draw
        };
        let start = self.ts(model, s.thread, first);
        let end = self.ts(model, s.thread, close);
        let p = s.proc as usize;
        if p >= self.span_lanes.len() {
            self.span_lanes.resize_with(p + 1, Vec::new);
        }
        let lanes = &mut self.span_lanes[p];
        let lane = match lanes.iter().position(|&e| e <= start) {
            Some(i) => i,
            None if lanes.len() < MAX_LANES => {
                lanes.push(0);
                lanes.len() - 1
            }
            None => {
                self.stats.overlapping_skipped += 1;
                return;
            }
        };
        lanes[lane] = end;
        let parent = self.ensure_proc(model, s.proc);
        let uuid = uuid(U_SPAN_LANE, ((s.proc as u64) << 16 | lane as u64) + 1);
        if self.tracks.insert(uuid) {
            let name = if lane == 0 {
                "spans".to_string()
            } else {
                format!("spans {}", lane + 1)
            };
            self.w.track(TrackDescriptor {
                uuid: Some(uuid),
                name: Some(name),
                parent_uuid: Some(parent),
                ..Default::default()
            });
        }
        let l = self.labels.of(model, s.name, s.fields);
        let labels = &self.labels;
        let iid = self
            .w
            .event_name(S_SPAN, l, || labels.labels[l as usize].clone());
        let scale = model.procs[p].scale;
        let fields = model.name(s.fields).to_string();
        let mut e = self.begin(TYPE_SLICE_BEGIN, uuid);
        e.name_iid = Some(iid);
        Self::ann_u(&mut e, A_SPAN, s.id);
        if !fields.is_empty() {
            Self::ann(&mut e, A_FIELDS, |a| a.string_value = Some(fields));
        }
        if s.task != 0 {
            Self::ann_u(&mut e, A_TASK, s.task);
        }
        Self::ann_u(&mut e, A_BUSY, scale.ns(s.busy_ticks));
        Self::ann_u(&mut e, A_DELAY, scale.ns(s.delay_ticks));
        self.emit(start, e);
        let e = self.begin(TYPE_SLICE_END, uuid);
        self.emit(end, e);
        self.stats.span_lives += 1;
    }

    /// A finished wait on a tokio resource: a slice "wait KIND SITE" from
    /// its first Pending poll to its Ready poll on the first free lane of
    /// its recording's resource wait lanes (tasks have no tracks; the
    /// waiter is annotated), and, when its releaser is known, a
    /// "handover" slice inside it from the release (or wake) to the Ready
    /// poll, which a flow from a "release" instant on the releaser's
    /// thread reaches.
    fn resource_wait(&mut self, model: &Model, w: &FinishedWait) {
        let start = self.ts_of(model, w.proc, w.start);
        let end = self.ts_of(model, w.proc, w.end);
        let p = w.proc as usize;
        if p >= self.wait_lanes.len() {
            self.wait_lanes.resize_with(p + 1, Vec::new);
        }
        let lanes = &mut self.wait_lanes[p];
        let lane = match lanes.iter().position(|&e| e <= start) {
            Some(i) => i,
            None if lanes.len() < MAX_LANES => {
                lanes.push(0);
                lanes.len() - 1
            }
            None => {
                self.stats.overlapping_skipped += 1;
                return;
            }
        };
        lanes[lane] = end;
        let parent = self.ensure_proc(model, w.proc);
        let lane_uuid = uuid(
            U_SPAN_LANE,
            ((w.proc as u64) << 16 | WAIT_LANE_BIT | lane as u64) + 1,
        );
        if self.tracks.insert(lane_uuid) {
            let name = if lane == 0 {
                "resource waits".to_string()
            } else {
                format!("resource waits {}", lane + 1)
            };
            self.w.track(TrackDescriptor {
                uuid: Some(lane_uuid),
                name: Some(name),
                parent_uuid: Some(parent),
                ..Default::default()
            });
        }
        let r = w.resource;
        let n = self.wait_names.len() as u32;
        let index = *self
            .wait_names
            .entry((r.ty, r.loc, r.internal))
            .or_insert(n);
        let label = r.label(model);
        let iid = self.w.event_name(S_WAIT, index, || format!("wait {label}"));
        // The releaser's side first: a flow ends after it starts.
        let released = w.released_by.filter(|b| {
            self.threads
                .get(b.thread as usize)
                .is_some_and(|t| t.described)
        });
        let flow = released.map(|b| {
            let flow = flow_id(w.proc, w.task ^ 1 << 63, w.end);
            let at = self.ts_of(model, w.proc, b.ticks).clamp(start, end);
            let iid = self.w.event_name(S_FIXED, F_RELEASE, || FIXED[3].into());
            let label = label.clone();
            self.instant(at, uuid(U_THREAD, b.thread as u64), iid, |e| {
                Self::ann(e, A_RESOURCE, |a| a.string_value = Some(label));
                Self::ann_u(e, A_RESOURCE_ID, r.id as u64);
                Self::ann_u(e, A_WAITER, w.task);
                Self::ann_u(e, A_RELEASER, b.task);
                e.flow_ids.push(flow);
            });
            self.stats.flows += 1;
            (flow, at, b)
        });
        let mut e = self.begin(TYPE_SLICE_BEGIN, lane_uuid);
        e.name_iid = Some(iid);
        Self::ann_u(&mut e, A_TASK, w.task);
        Self::ann_u(&mut e, A_RESOURCE_ID, r.id as u64);
        Self::ann_u(&mut e, A_DUR, w.ns(model));
        self.emit(start, e);
        if let Some((flow, at, b)) = flow {
            let iid = self.w.event_name(S_FIXED, F_HANDOVER, || FIXED[4].into());
            let by = format!(
                "{} of task {} ({})",
                if b.release { "release" } else { "wake" },
                b.task,
                model.locs[b.loc as usize].text
            );
            let mut e = self.begin(TYPE_SLICE_BEGIN, lane_uuid);
            e.name_iid = Some(iid);
            Self::ann(&mut e, A_RELEASED_BY, |a| a.string_value = Some(by));
            Self::ann_u(&mut e, A_RELEASER, b.task);
            e.terminating_flow_ids.push(flow);
            self.emit(at, e);
            let e = self.begin(TYPE_SLICE_END, lane_uuid);
            self.emit(end, e);
            self.stats.resource_flows += 1;
            self.stats.flows_joined += 1;
        }
        let e = self.begin(TYPE_SLICE_END, lane_uuid);
        self.emit(end, e);
        self.stats.resource_waits += 1;
    }

    /// [`Exporter::ts`] for recording `proc`'s clock.
    #[inline]
    fn ts_of(&mut self, model: &Model, proc: u32, ticks: u64) -> u64 {
        let p = &model.procs[proc as usize];
        if self.base == u64::MAX {
            self.base = p.anchor_wall_ns;
        }
        p.anchor_wall_ns
            .saturating_add(p.scale.ns(ticks.saturating_sub(p.anchor_ticks)))
            .saturating_sub(self.base)
    }

    /// The snapshot triggers (known once the read is over: the model
    /// keeps them, the passes never see them), as instants on their
    /// process's track; the trace processor sorts packets by time.
    fn snapshots(&mut self, model: &Model) {
        for (i, s) in model.snapshots.iter().enumerate() {
            let track = self.ensure_proc(model, s.proc);
            let ts = self.ts_of(model, s.proc, s.ticks);
            let iid = self.w.event_name(S_SNAPSHOT, i as u32, || {
                if s.request {
                    format!("snapshot requested: {}", s.reason)
                } else {
                    format!("snapshot: {}", s.reason)
                }
            });
            let reason = s.reason.to_string();
            self.instant(ts, track, iid, |e| {
                Self::ann(e, A_REASON, |a| a.string_value = Some(reason))
            });
            if s.request {
                self.stats.snapshot_requests += 1;
            } else {
                self.stats.snapshot_triggers += 1;
            }
        }
    }

    /// Closes every open slice at the end of its recording.
    fn close_all(&mut self, model: &Model) {
        for t in 0..self.threads.len() {
            let n = self.threads[t].stack.len();
            if n == 0 {
                continue;
            }
            let last = model.proc_of(t as u32).last_ticks;
            let ts = self.ts(model, t as u32, last);
            self.threads[t].stack.clear();
            for _ in 0..n {
                let e = self.begin(TYPE_SLICE_END, uuid(U_THREAD, t as u64));
                self.emit(ts, e);
            }
            self.stats.closed_at_end += n as u64;
        }
    }
}

impl<W: Write> Pass for Exporter<W> {
    #[inline]
    fn wants(&self) -> Wants {
        Wants::LIFECYCLE
            .or(Wants::APP)
            .or(Wants::PROFILE)
            .or(Wants::SPANS)
    }

    fn life(&mut self, rec: &Life<'_>, model: &Model) {
        self.waits.life(rec, model);
        match *rec {
            Life::PollStart(p) => self.cur_poll = Some(*p),
            Life::Wake(w) => self.cur_wake_first = w.first(),
            Life::SpanEnter(e) => self.span_enter(model, e),
            Life::SpanExit(e) => {
                let ts = self.ts(model, e.thread, e.end);
                self.close_to(e.thread, ts, Open::Span(e.span));
            }
            Life::SpanClose(s) => self.span_life(model, s),
            _ => {}
        }
    }

    fn event(&mut self, ev: &Ev, model: &Model) {
        if matches!(
            ev.kind,
            kind::CPU_SAMPLE | kind::OFF_CPU | kind::ALLOC_SAMPLE
        ) {
            // On the sampled thread, not the one that wrote the event (no
            // track for it: trace processor puts samples on the thread).
            self.sample(ev, model);
            return;
        }
        // A worker described before its WorkerStart (by a park, the
        // first thing a tokio worker does) is described again with its
        // runtime's name (the thread track's name follows the last
        // descriptor).
        if ev.kind == kind::WORKER_START
            && self
                .threads
                .get(ev.thread as usize)
                .is_some_and(|t| t.described)
            && self
                .runtime_names
                .contains_key(&(model.threads[ev.thread as usize].proc, ev.a))
        {
            self.describe_thread(model, ev);
        }
        if kind::is_span(ev.kind) {
            return; // drawn from their lifecycle records (`life`)
        }
        if matches!(
            ev.kind,
            kind::RESOURCE_NEW | kind::RESOURCE_POLL | kind::RESOURCE_RELEASE
        ) {
            if let Some(w) = self.waits.event(ev, model) {
                self.resource_wait(model, &w);
            }
            return;
        }
        if ev.kind == kind::RUNTIME_NAME {
            // Names the worker tracks described after it.
            let proc = model.threads[ev.thread as usize].proc;
            let name = model.name(ev.worker);
            if !name.is_empty() {
                self.runtime_names
                    .insert((proc, ev.x as u32), name.to_string());
            }
            return;
        }
        let track = self.thread_track(model, ev);
        let ts = self.ts(model, ev.thread, ev.ticks);
        let proc = model.threads[ev.thread as usize].proc;
        match ev.kind {
            kind::SPAWN => {
                let flow = flow_id(proc, ev.x, ev.ticks);
                self.stats.flows += 1;
                let iid = self.w.event_name(S_FIXED, F_SPAWN, || FIXED[2].into());
                self.instant(ts, track, iid, |e| {
                    Self::ann_u(e, A_TASK, ev.x);
                    e.flow_ids.push(flow);
                });
            }
            kind::POLL_START => {
                // A task is never polled inside its own poll: a poll of it
                // still open lost its end (damage); end it here, so open
                // slices stay bounded.
                self.close_stale(ev.thread, ts, Open::Poll(ev.x));
                self.local_q(ev, ts, ev.a);
                let (loc, flow) = match self.cur_poll.take() {
                    Some(p) => (p.loc, p.wake.map_or(0, |w| flow_id(proc, ev.x, w))),
                    None => (UNKNOWN_LOC, 0),
                };
                let iid = self
                    .w
                    .event_name(S_LOC, loc, || model.locs[loc as usize].text.to_string());
                let mut e = self.begin(TYPE_SLICE_BEGIN, track);
                e.name_iid = Some(iid);
                Self::ann_u(&mut e, A_TASK, ev.x);
                Self::ann_u(&mut e, A_LOCAL_Q, ev.a as u64);
                Self::ann_u(&mut e, A_WORKER, ev.worker as u64);
                if ev.flag == 1 {
                    Self::ann(&mut e, A_EXECUTOR, |a| a.bool_value = Some(true));
                }
                if flow != 0 {
                    e.terminating_flow_ids.push(flow);
                    self.stats.flows_joined += 1;
                }
                self.emit(ts, e);
                self.threads[ev.thread as usize]
                    .stack
                    .push(Open::Poll(ev.x));
                self.stats.polls += 1;
            }
            kind::POLL_END => self.close_to(ev.thread, ts, Open::Poll(ev.x)),
            kind::WAKE => {
                // Only the first wake before a poll starts a flow: the
                // poll answers that one.
                let flow = if std::mem::take(&mut self.cur_wake_first) {
                    self.stats.flows += 1;
                    flow_id(proc, ev.x, ev.ticks)
                } else {
                    0
                };
                let iid = self.w.event_name(S_FIXED, F_WAKE, || FIXED[1].into());
                self.instant(ts, track, iid, |e| {
                    Self::ann_u(e, A_TASK, ev.x);
                    if flow != 0 {
                        e.flow_ids.push(flow);
                    }
                });
            }
            kind::PARK => {
                self.local_q(ev, ts, ev.a);
                let iid = self.w.event_name(S_FIXED, F_PARKED, || FIXED[0].into());
                let mut e = self.begin(TYPE_SLICE_BEGIN, track);
                e.name_iid = Some(iid);
                self.emit(ts, e);
                self.threads[ev.thread as usize].stack.push(Open::Park);
                self.stats.parks += 1;
            }
            kind::UNPARK => self.close_to(ev.thread, ts, Open::Park),
            kind::QUEUE_SAMPLE => {
                let p = self.ensure_proc(model, proc);
                self.counter(
                    ts,
                    uuid(U_GLOBAL_Q, proc as u64),
                    p,
                    || "global queue".into(),
                    ev.a as u64,
                );
                if ev.worker != u32::MAX {
                    let q = ev.worker;
                    let name = || format!("queue {}", model.queues[q as usize]);
                    let uuid = uuid(U_NAMED_Q, (proc as u64) << 24 | q as u64);
                    self.counter(ts, uuid, p, name, ev.x);
                }
            }
            kind::LOCK_WAIT => self.app_slice(model, ev, G_WAIT, ev.x),
            kind::LOCK_HOLD => self.app_slice(model, ev, G_HOLD, ev.x),
            kind::IO => self.app_slice(model, ev, G_IO, ev.x),
            kind::PROCESSING_END => self.app_slice(model, ev, G_PROC, ev.x),
            kind::ENQUEUE | kind::DEQUEUE | kind::QUEUE_SNAPSHOT => {
                let p = self.ensure_proc(model, proc);
                let uuid = uuid(U_APP_Q, (proc as u64) << 24 | ev.worker as u64);
                let name = || format!("{} size", model.name(ev.worker));
                self.counter(ts, uuid, p, name, ev.a as u64);
            }
            kind::ITEM_DROPPED => {
                let iid = self.app_name(model, G_DROP, ev.worker);
                let cause = model.name(ev.x as u32).to_string();
                self.instant(ts, track, iid, |e| {
                    Self::ann_u(e, A_QUEUE_SIZE, ev.a as u64);
                    Self::ann(e, A_CAUSE, |a| a.string_value = Some(cause));
                });
            }
            kind::BACKLOG_TRIGGER => {
                let iid = self.app_name(model, G_TRIGGER, ev.worker);
                let side = |i: u64| model.side.get(i as usize).copied().unwrap_or(0);
                let growth = side(ev.x) as i64;
                let reason = model.name(side(ev.x + 1) as u32).to_string();
                self.instant(ts, track, iid, |e| {
                    Self::ann_u(e, A_QUEUE_SIZE, ev.a as u64);
                    Self::ann(e, A_GROWTH, |a| a.int_value = Some(growth));
                    Self::ann(e, A_REASON, |a| a.string_value = Some(reason));
                });
            }
            kind::HEARTBEAT => {
                let iid = self.app_name(model, G_HEARTBEAT, ev.worker);
                self.instant(ts, track, iid, |e| Self::ann_u(e, A_DUR, ev.x));
            }
            _ => {} // worker start/stop: the track is described above
        }
    }

    fn end_recording(&mut self, model: &Model) {
        self.close_all(model);
    }

    fn finish(&mut self, model: &Model) {
        // Every recording gets its process track, so a trace of events the
        // timeline does not show (user-defined ones) still opens as one.
        for p in 0..model.procs.len() {
            self.ensure_proc(model, p as u32);
        }
        self.snapshots(model);
        self.close_all(model);
    }
}
