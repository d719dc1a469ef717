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
//! One streaming pass with the same reader and ordering as
//! `runtrace analyze` (`read.rs`), in memory bounded by the lookback window
//! (plus a cap on remembered intervals), not by the trace: totals and
//! percentiles are kept per queue, lock, I/O op and heartbeat; the lock
//! waits, lock holds and I/O intervals of the last `lookback + lookahead`
//! seconds are kept as intervals; processing and stall time as per-thread
//! counters in 10 ms buckets over the same span. docs/analysis.md
//! (`runtrace backlog`) describes the attribution model and every JSON key.
//!
//! ```
//! use runtrace_analyze::backlog::{analyze_bytes, BacklogOptions, Cause};
//! use runtrace_analyze::synth::TraceBuilder;
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

use crate::event::{kind, Ev};
use crate::fxhash::FxHashMap;
use crate::hist::{Histogram, Summary};
use crate::input::{self, ReadStats};
use crate::model::{Model, Process, Thread};
use crate::pass::{Pass, Wants};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::fmt::{self, Write as _};
use std::path::{Path, PathBuf};

/// The shortest window a trigger is judged over (see `evaluate`).
const MIN_WINDOW_NS: u64 = 100_000_000;

/// "No lock" / "no thread".
const NONE: u32 = u32::MAX;
/// Per-item baselines need this many items before the window; with fewer,
/// the first quarter of the window is the baseline.
const MIN_BASE_ITEMS: u64 = 5;
/// Longest-hold and slowest-I/O lists keep this many entries.
const TOP: usize = 5;
/// A hold that blocked a wait ends by the time the waiter gets the lock;
/// this much later still counts (timestamps of different CPUs).
const SLACK_NS: u64 = 1_000_000;
/// A hold's end is stamped after the lock is released (runtrace-sync
/// releases first, then reads the clock), so a holder preempted in between
/// stamps it late, after the waiter already got the lock: holds ending this
/// much after a wait still count as blocking it (a later holder cannot
/// overlap the wait: it acquired after the waiter).
const LATE_HOLD_NS: u64 = 250_000_000;
/// Holds shorter than this are remembered apart (see `LockSt::short`).
const SHORT_HOLD_NS: u64 = 50_000;
/// Heartbeat gaps at least this long are kept as stall evidence.
const HB_GAP_NS: u64 = 10_000_000;
/// A trigger is judged this long after all its consumers resumed (the
/// holder's late-stamped hold, a heartbeat ending a silence, come in).
const GRACE_NS: u64 = LATE_HOLD_NS;
/// The text report shows at most this many rate windows per queue ...
const TEXT_MAX_WINDOWS: usize = 60;
/// ... and this many triggers (JSON has all).
const TEXT_MAX_TRIGGERS: usize = 50;

/// Settings of the backlog analysis (defaults in docs/analysis.md).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BacklogOptions {
    /// Width of the rate windows of each queue (`--window`, 1 s).
    pub window_ns: u64,
    /// How far before a trigger its causes are looked for (`--lookback`,
    /// 2 s).
    pub lookback_ns: u64,
    /// How long after a trigger the analysis waits for the events that end
    /// after it (a lock wait in progress at the trigger is recorded when it
    /// ends) before judging it: it judges as soon as every consumer of the
    /// queue has dequeued or finished an item after the trigger, or after
    /// this long (10 s), or at the end of the recording.
    pub lookahead_ns: u64,
    /// Resolution of the per-thread processing and stall counters (10 ms).
    pub bucket_ns: u64,
    /// Verdicts with a smaller share of the lost time are not reported
    /// (0.1).
    pub floor: f64,
    /// ... nor those smaller than this share of the consumers' time in the
    /// window (0.02): a healthy queue loses a little time everywhere.
    pub min_lost_share: f64,
    /// Processing counts as slower when its mean in the window is at least
    /// this many times the baseline mean (1.2).
    pub slowdown_ratio: f64,
    /// Lock-wait, lock-hold and I/O intervals remembered at most, each kind
    /// (262,144; the oldest go first, counted in `notes`).
    pub max_intervals: usize,
}

impl Default for BacklogOptions {
    fn default() -> Self {
        BacklogOptions {
            window_ns: 1_000_000_000,
            lookback_ns: 2_000_000_000,
            lookahead_ns: 10_000_000_000,
            bucket_ns: 10_000_000,
            floor: 0.1,
            min_lost_share: 0.02,
            slowdown_ratio: 1.2,
            max_intervals: 1 << 18,
        }
    }
}

/// A root cause of a backlog.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Cause {
    /// The consumers were idle while the queue had items (not waiting on a
    /// lock, not in I/O, not processing), or no thread consumed at all.
    ConsumerStall,
    /// The consumers waited on a lock whose holder was not in I/O.
    LockContention,
    /// The consumers were in I/O themselves, or waited on a lock whose
    /// holder was in I/O.
    IoBlocking,
    /// The consumers' processing per item (lock waits and I/O excluded)
    /// took longer than before.
    ProcessingSlowdown,
}

impl Cause {
    /// `consumer_stall`, `lock_contention`, `io_blocking` or
    /// `processing_slowdown`.
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::ConsumerStall => "consumer_stall",
            Cause::LockContention => "lock_contention",
            Cause::IoBlocking => "io_blocking",
            Cause::ProcessingSlowdown => "processing_slowdown",
        }
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One ranked root cause of a trigger.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// What caused it.
    pub cause: Cause,
    /// Share of the consumers' lost time in the lookback window explained
    /// by this cause, lock and thread (0..1).
    pub score: f64,
    /// The lock concerned (waited on, or held during the I/O), if any.
    pub lock: Option<String>,
    /// The thread responsible (`name (tid N)`, or `tid N` when unnamed):
    /// the lock's holder for lock causes and I/O under a lock, the consumer
    /// otherwise; `None` when unknown.
    pub thread: Option<String>,
    /// The lost time attributed (ns).
    pub lost_ns: u64,
    /// A sentence with the numbers.
    pub evidence: String,
}

/// One `backlog_trigger` and its verdicts.
#[derive(Debug, Clone, PartialEq)]
pub struct TriggerReport {
    /// When it fired, ns since the recording started.
    pub timestamp_ns: u64,
    /// The queue.
    pub queue: String,
    /// Items in the queue at the trigger.
    pub queue_size: u32,
    /// `size_threshold`, `growth_rate`, `manual`, ...
    pub reason: String,
    /// The detector's growth rate (items per second).
    pub growth_rate_per_sec: i64,
    /// The lookback window judged, `[start, end]` ns since the recording
    /// started.
    pub window_ns: [u64; 2],
    /// The queue's consumers (threads that dequeued from it).
    pub consumers: Vec<String>,
    /// Enqueues per second before the window (the baseline; `None` when
    /// the window starts with the queue's first event), and in it.
    pub enqueue_rate_before: Option<f64>,
    /// See `enqueue_rate_before`.
    pub enqueue_rate_during: f64,
    /// Dequeues per second before the window (`None`: no time before),
    /// and in it.
    pub dequeue_rate_before: Option<f64>,
    /// See `dequeue_rate_before`.
    pub dequeue_rate_during: f64,
    /// Lost time of the consumers in the window, all causes (ns).
    pub lost_ns: u64,
    /// Items dropped in the window.
    pub dropped_in_window: u64,
    /// Verdicts above the floor, best first.
    pub verdicts: Vec<Verdict>,
}

/// One rate window of a queue.
#[derive(Debug, Clone, PartialEq)]
pub struct RateWindow {
    /// Start, ns since the recording started.
    pub start_ns: u64,
    /// Enqueues in the window.
    pub enqueued: u64,
    /// Dequeues in the window.
    pub dequeued: u64,
    /// Drops in the window.
    pub dropped: u64,
    /// Enqueues per second (producer rate).
    pub enqueue_per_sec: f64,
    /// Dequeues per second (consumer rate).
    pub dequeue_per_sec: f64,
    /// Queue size at the window's last event.
    pub size_end: u32,
    /// Largest size seen in the window.
    pub max_size: u32,
    /// Size change since the previous window's end, per second.
    pub growth_per_sec: f64,
    /// Fastest growth over one growth step (100 ms, or the window if
    /// shorter) ending in this window, per second.
    pub peak_growth_per_sec: f64,
}

/// Per-queue statistics.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueReport {
    /// The queue's name.
    pub name: String,
    /// `enqueue` events.
    pub enqueued: u64,
    /// `dequeue` events.
    pub dequeued: u64,
    /// `item_dropped` events.
    pub dropped: u64,
    /// Drops by cause (`full`, `disconnected`, ...).
    pub dropped_by_cause: Vec<(String, u64)>,
    /// `processing_end` events with success.
    pub processed_ok: u64,
    /// `processing_end` events without.
    pub processed_failed: u64,
    /// Largest `queue_size` of any of its events.
    pub max_size: u32,
    /// `dequeue.queue_delay_ns` (zeros, "not measured", left out).
    pub queue_delay_ns: Summary,
    /// `processing_end.processing_ns`.
    pub processing_ns: Summary,
    /// Threads that dequeued from it.
    pub consumers: Vec<String>,
    /// Windows with events, in time order.
    pub windows: Vec<RateWindow>,
    /// Fastest growth over one growth step (100 ms, or the window if
    /// shorter), per second: a spike shorter than a rate window shows here.
    pub peak_growth_per_sec: f64,
    /// When that step ended, ns since the recording started.
    pub peak_growth_at_ns: u64,
    /// `queue_snapshot` events.
    pub snapshots: u64,
}

/// A long lock hold.
#[derive(Debug, Clone, PartialEq)]
pub struct HoldRef {
    /// The holder.
    pub thread: String,
    /// How long (ns).
    pub hold_ns: u64,
    /// When it ended, ns since the recording started.
    pub at_ns: u64,
}

/// Per-lock statistics.
#[derive(Debug, Clone, PartialEq)]
pub struct LockReport {
    /// The lock's name.
    pub name: String,
    /// `lock_wait` events (contended acquisitions at or over the lock's
    /// wait threshold).
    pub waits: u64,
    /// Sum of their `wait_ns`.
    pub wait_ns_total: u64,
    /// Mean wait.
    pub wait_ns_mean: u64,
    /// Wait percentiles.
    pub wait_ns: Summary,
    /// `lock_hold` events.
    pub holds: u64,
    /// Longest hold.
    pub hold_ns_max: u64,
    /// Sum of the holds.
    pub hold_ns_total: u64,
    /// The longest hold of each of the (up to 5) threads with the longest
    /// holds, longest first.
    pub longest_holds: Vec<HoldRef>,
}

/// A slow I/O operation.
#[derive(Debug, Clone, PartialEq)]
pub struct IoRef {
    /// The thread that did it.
    pub thread: String,
    /// How long (ns).
    pub io_ns: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// When it ended, ns since the recording started.
    pub at_ns: u64,
}

/// Per-I/O-op statistics.
#[derive(Debug, Clone, PartialEq)]
pub struct IoReport {
    /// The op (`file_write`, `flush`, ...).
    pub op: String,
    /// `io` events.
    pub count: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Duration percentiles.
    pub io_ns: Summary,
    /// Sum of the durations.
    pub io_ns_total: u64,
    /// The slowest (up to 5), slowest first.
    pub slowest: Vec<IoRef>,
}

/// Heartbeats of one thread in one role.
#[derive(Debug, Clone, PartialEq)]
pub struct HeartbeatReport {
    /// The thread.
    pub thread: String,
    /// Its role.
    pub role: String,
    /// `thread_heartbeat` events.
    pub beats: u64,
    /// Longest `gap_ns`.
    pub max_gap_ns: u64,
    /// When the beat ending that gap came, ns since the recording started.
    pub max_gap_at_ns: u64,
}

/// The result of `runtrace backlog`.
#[derive(Debug, Clone, PartialEq)]
pub struct BacklogReport {
    /// Per queue, by name.
    pub queues: Vec<QueueReport>,
    /// Per lock, by total wait, most first.
    pub locks: Vec<LockReport>,
    /// Per I/O op, by total time, most first.
    pub io: Vec<IoReport>,
    /// Per (thread, role), longest gap first.
    pub heartbeats: Vec<HeartbeatReport>,
    /// Every `backlog_trigger`, in time order, with its verdicts.
    pub triggers: Vec<TriggerReport>,
    /// Files read, in order.
    pub files: Vec<PathBuf>,
    /// Bytes read.
    pub bytes: u64,
    /// Events decoded (every kind).
    pub events: u64,
    /// Application-instrumentation events among them.
    pub app_events: u64,
    /// First to last event of the longest recording (ns).
    pub duration_ns: u64,
    /// Each problem with a file, with its byte offset.
    pub errors: Vec<String>,
    /// A file was damaged or cut short.
    pub damaged: bool,
    /// Intact files without an `END` frame.
    pub unsealed_files: Vec<PathBuf>,
    /// Remarks: no application events, memory bounds hit, late events.
    pub notes: Vec<String>,
    /// The settings used.
    pub options: BacklogOptions,
}

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
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path: PathBuf =
        std::env::temp_dir().join(format!("runtrace-backlog-{}-{n}.0.bin", std::process::id()));
    if let Err(err) = std::fs::write(&path, bytes) {
        let mut r = analyze_files::<PathBuf>(&[], opts);
        r.errors
            .push(format!("{}: cannot write: {err}", path.display()));
        r.damaged = true;
        return r;
    }
    let r = analyze_files(std::slice::from_ref(&path), opts);
    let _ = std::fs::remove_file(&path);
    r
}

/// Options with zero widths replaced by the defaults (a zero window would
/// divide by zero; the CLI rejects them, the library must not panic).
fn sane(o: &BacklogOptions) -> BacklogOptions {
    let d = BacklogOptions::default();
    let pick = |v: u64, dv: u64| if v == 0 { dv } else { v };
    BacklogOptions {
        window_ns: pick(o.window_ns, d.window_ns),
        lookback_ns: pick(o.lookback_ns, d.lookback_ns),
        lookahead_ns: o.lookahead_ns,
        bucket_ns: pick(o.bucket_ns, d.bucket_ns),
        floor: if o.floor.is_finite() {
            o.floor
        } else {
            d.floor
        },
        min_lost_share: if o.min_lost_share.is_finite() {
            o.min_lost_share
        } else {
            d.min_lost_share
        },
        slowdown_ratio: if o.slowdown_ratio.is_finite() {
            o.slowdown_ratio
        } else {
            d.slowdown_ratio
        },
        max_intervals: o.max_intervals.max(16),
    }
}

// ---------------------------------------------------------------------------
// State

/// A time interval on a thread: a lock wait or hold (`obj`: lock), an I/O
/// (`obj`: op, `bytes`).
#[derive(Debug, Clone, Copy)]
struct Span {
    start: u64,
    end: u64,
    thread: u32,
    obj: u32,
    bytes: u64,
}

/// Counters in fixed-width time buckets over a sliding span: bucket `b`
/// covers `[b * width, (b + 1) * width)`.
struct Ring<T> {
    base: u64,
    buf: VecDeque<T>,
    cap: usize,
}

impl<T: Default + Copy> Ring<T> {
    fn new(cap: usize) -> Ring<T> {
        Ring {
            base: 0,
            buf: VecDeque::new(),
            cap: cap.max(2),
        }
    }

    /// Bucket `b`, or None when it has already slid out.
    #[inline]
    fn slot(&mut self, b: u64) -> Option<&mut T> {
        if self.buf.is_empty() {
            self.base = b;
            self.buf.push_back(T::default());
        }
        if b < self.base {
            return None;
        }
        let end = self.base + self.buf.len() as u64;
        if b >= end {
            if b - end >= self.cap as u64 {
                // A jump further than the whole span: start over.
                self.buf.clear();
                self.base = b;
                self.buf.push_back(T::default());
            } else {
                while self.base + (self.buf.len() as u64) <= b {
                    self.buf.push_back(T::default());
                    if self.buf.len() > self.cap {
                        self.buf.pop_front();
                        self.base += 1;
                    }
                }
            }
        }
        self.buf.get_mut((b - self.base) as usize)
    }

    /// Folds buckets `from..=to` that are still held.
    fn fold<A>(&self, from: u64, to: u64, init: A, mut f: impl FnMut(A, &T) -> A) -> A {
        let mut acc = init;
        if self.buf.is_empty() || to < self.base {
            return acc;
        }
        let lo = from.saturating_sub(self.base) as usize;
        let hi = ((to - self.base) as usize).min(self.buf.len() - 1);
        if from > to || lo > hi {
            return acc;
        }
        for i in lo..=hi {
            if let Some(x) = self.buf.get(i) {
                acc = f(acc, x);
            }
        }
        acc
    }
}

/// Per consumer thread, per bucket.
#[derive(Debug, Default, Clone, Copy)]
struct CBucket {
    /// Processing time minus the lock waits and I/O inside it (ns).
    net: u64,
    /// Items whose processing ended in the bucket.
    items: u64,
    /// Idle time while the queue had items (ns).
    stall: u64,
    /// Dequeues.
    deqs: u64,
}

/// Per queue, per bucket.
#[derive(Debug, Default, Clone, Copy)]
struct QBucket {
    enq: u64,
    deq: u64,
    drops: u64,
}

/// Per thread.
struct ThreadSt {
    /// Lock waits and I/O recorded on this thread since its last dequeue
    /// or processing end: inside that item's processing, or inside the
    /// gap before the next dequeue.
    blocked: u64,
    /// Its last dequeue or processing end (ns).
    mark: u64,
    has_mark: bool,
    /// Dequeued, processing not ended.
    in_item: bool,
    ring: Ring<CBucket>,
    cum: CBucket,
}

#[derive(Debug, Clone, Copy)]
struct Row {
    idx: u64,
    enq: u64,
    deq: u64,
    drops: u64,
    size_end: u32,
    max_size: u32,
    peak_growth: f64,
}

struct QueueSt {
    name: u32,
    enq: u64,
    deq: u64,
    ok: u64,
    fail: u64,
    drops: Vec<(u32, u64)>,
    dropped: u64,
    max_size: u32,
    delay: Histogram,
    proc: Histogram,
    rows: Vec<Row>,
    ring: Ring<QBucket>,
    cum: QBucket,
    consumers: Vec<u32>,
    first_ns: u64,
    snapshots: u64,
    /// When the queue's size last rose from 0 (`u64::MAX`: empty).
    nonempty_since: u64,
    /// When the queue's last backlog episode ended: its consumers all
    /// resumed after its last trigger (or that trigger's time until they
    /// do; `u64::MAX`: no trigger yet).
    last_trigger: u64,
    /// The current growth step, the size at its start, the last size seen.
    step: u64,
    step_base: u32,
    last_size: u32,
    peak: f64,
    peak_at: u64,
}

struct LockSt {
    name: u32,
    waits: u64,
    wait_total: u64,
    wait: Histogram,
    holds: u64,
    hold_max: u64,
    hold_total: u64,
    /// (thread, hold_ns, at): each thread's longest, longest first.
    top: Vec<(u32, u64, u64)>,
    /// Recent holds of at least `SHORT_HOLD_NS` (few: at most one per
    /// thread per `SHORT_HOLD_NS`), and the shorter ones apart, so that a
    /// flood of short holds cannot push out the long ones that explain
    /// waits.
    ring: VecDeque<Span>,
    short: VecDeque<Span>,
}

struct OpSt {
    name: u32,
    count: u64,
    bytes: u64,
    total: u64,
    hist: Histogram,
    /// (thread, io_ns, bytes, at), slowest first.
    top: Vec<(u32, u64, u64, u64)>,
}

#[derive(Default)]
struct Hb {
    beats: u64,
    max_gap: u64,
    at: u64,
}

#[derive(Debug, Clone, Copy)]
struct Pending {
    t: u64,
    /// `t` computed exactly as `runtrace analyze` and `runtrace jsonl` do
    /// (the analysis clock may differ by rounding on long traces whose
    /// tick is not a whole number of ns).
    exact: u64,
    /// When the queue's size last rose from 0 before the trigger
    /// (`u64::MAX`: unknown).
    since: u64,
    /// The end of the queue's previous backlog episode (`u64::MAX`: none).
    prev: u64,
    q: u32,
    size: u32,
    growth: i64,
    reason: u32,
    deadline: u64,
}

/// Lost time attributed to one (cause, lock, thread) in a trigger's window.
#[derive(Debug, Clone)]
struct Acc {
    cause: Cause,
    lock: u32,
    thread: u32,
    /// The holder's I/O (not the consumer's own).
    under_lock: bool,
    ns: u64,
    /// Waits, I/O operations or items counted.
    n: u64,
    /// Consumer threads that lost the time.
    victims: Vec<u32>,
    /// The worst single interval (slowest I/O, longest hold, longest
    /// heartbeat gap with its role in `worst_op`).
    worst_ns: u64,
    worst_at: u64,
    worst_op: u32,
    worst_bytes: u64,
    /// The I/O that ended last (the one at the trigger, often).
    last: Option<Span>,
    /// The longest lock wait counted (whole, not clipped to the window).
    max_wait: u64,
    base_mean: u64,
    win_mean: u64,
}

impl Acc {
    /// Notes an I/O operation of this cause: the slowest and the latest
    /// are quoted as evidence.
    fn note_io(&mut self, x: &Span) {
        if x.end - x.start > self.worst_ns {
            self.worst_ns = x.end - x.start;
            self.worst_at = x.end;
            self.worst_op = x.obj;
            self.worst_bytes = x.bytes;
        }
        if self.last.is_none_or(|l| x.end > l.end) {
            self.last = Some(*x);
        }
    }
}

/// A judged trigger, with thread and name indexes (names are resolved when
/// the report is built: a THREAD frame may come late).
struct TriggerRec {
    t: u64,
    exact: u64,
    q: u32,
    size: u32,
    growth: i64,
    reason: u32,
    ws: u64,
    consumers: Vec<u32>,
    enq_before: Option<f64>,
    enq_during: f64,
    deq_before: Option<f64>,
    deq_during: f64,
    drops: u64,
    lost: u64,
    verdicts: Vec<(f64, Acc)>,
}

/// The backlog analysis (`runtrace backlog`) as a [`Pass`]: queues,
/// locks, I/O and heartbeats from the application events, and a verdict
/// for every `backlog_trigger`. Its report: [`Backlog::report`].
///
/// ```
/// use runtrace_analyze::backlog::{Backlog, BacklogOptions};
/// use runtrace_analyze::{input, synth::TraceBuilder};
/// let mut b = TraceBuilder::new();
/// b.string(1, "jobs");
/// b.enqueue(1, 1_000, 1, 1, 1);
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("trace.0.bin");
/// std::fs::write(&path, b.finish()).unwrap();
/// let mut pass = Backlog::new(&BacklogOptions::default());
/// let (model, stats) = input::read(&[path], &mut pass, None);
/// assert_eq!(pass.report(&model, stats).queues[0].enqueued, 1);
/// ```
pub struct Backlog {
    o: BacklogOptions,
    /// Out-of-order events (analysed late) and the last timestamp seen.
    late_events: u64,
    last_ticks_seen: u64,
    qmap: Vec<u32>,
    lmap: Vec<u32>,
    omap: Vec<u32>,
    queues: Vec<QueueSt>,
    locks: Vec<LockSt>,
    ops: Vec<OpSt>,
    hbs: FxHashMap<(u32, u32), Hb>,
    threads: Vec<Option<ThreadSt>>,
    waits: VecDeque<Span>,
    ios: VecDeque<Span>,
    hb_gaps: VecDeque<Span>,
    pending: Vec<Pending>,
    next_deadline: u64,
    done: Vec<TriggerRec>,
    now: u64,
    app_events: u64,
    evicted: u64,
    evicted_short: u64,
    scratch: Vec<(u64, u64, u32)>,
}

impl Pass for Backlog {
    fn wants(&self) -> Wants {
        Wants::APP
    }

    fn event(&mut self, ev: &Ev, model: &Model) {
        if ev.ticks < self.last_ticks_seen {
            self.late_events += 1;
        } else {
            self.last_ticks_seen = ev.ticks;
        }
        self.app_event(ev, model);
    }

    fn end_recording(&mut self, _model: &Model) {
        self.last_ticks_seen = 0;
        self.close_recording();
    }

    fn finish(&mut self, _model: &Model) {
        self.close_recording();
    }
}

impl Backlog {
    /// A pass with options `o` (zero widths replaced by the defaults).
    pub fn new(o: &BacklogOptions) -> Backlog {
        Backlog {
            o: sane(o),
            late_events: 0,
            last_ticks_seen: 0,
            qmap: Vec::new(),
            lmap: Vec::new(),
            omap: Vec::new(),
            queues: Vec::new(),
            locks: Vec::new(),
            ops: Vec::new(),
            hbs: FxHashMap::default(),
            threads: Vec::new(),
            waits: VecDeque::new(),
            ios: VecDeque::new(),
            hb_gaps: VecDeque::new(),
            pending: Vec::new(),
            next_deadline: u64::MAX,
            done: Vec::new(),
            now: 0,
            app_events: 0,
            evicted: 0,
            evicted_short: 0,
            scratch: Vec::new(),
        }
    }

    /// Buckets a consumer ring keeps: the lookback and lookahead spans.
    fn ring_cap(&self) -> usize {
        ((self.o.lookback_ns.saturating_add(self.o.lookahead_ns) / self.o.bucket_ns) as usize)
            .saturating_add(4)
            .min(1 << 20)
    }

    /// The growth step: 100 ms, or the rate window if shorter.
    fn step_ns(&self) -> u64 {
        self.o.window_ns.min(100_000_000)
    }

    fn queue(&mut self, name: u32, now: u64) -> usize {
        let i = name as usize;
        if i >= self.qmap.len() {
            self.qmap.resize(i + 1, NONE);
        }
        if self.qmap[i] == NONE {
            self.qmap[i] = self.queues.len() as u32;
            let cap = self.ring_cap();
            self.queues.push(QueueSt {
                name,
                enq: 0,
                deq: 0,
                ok: 0,
                fail: 0,
                drops: Vec::new(),
                dropped: 0,
                max_size: 0,
                delay: Histogram::new(),
                proc: Histogram::new(),
                rows: Vec::new(),
                ring: Ring::new(cap),
                cum: QBucket::default(),
                consumers: Vec::new(),
                first_ns: now,
                snapshots: 0,
                nonempty_since: u64::MAX,
                last_trigger: u64::MAX,
                step: now / self.step_ns(),
                step_base: 0,
                last_size: 0,
                peak: 0.0,
                peak_at: 0,
            });
        }
        self.qmap[i] as usize
    }

    fn lock(&mut self, name: u32) -> usize {
        let i = name as usize;
        if i >= self.lmap.len() {
            self.lmap.resize(i + 1, NONE);
        }
        if self.lmap[i] == NONE {
            self.lmap[i] = self.locks.len() as u32;
            self.locks.push(LockSt {
                name,
                waits: 0,
                wait_total: 0,
                wait: Histogram::new(),
                holds: 0,
                hold_max: 0,
                hold_total: 0,
                top: Vec::new(),
                ring: VecDeque::new(),
                short: VecDeque::new(),
            });
        }
        self.lmap[i] as usize
    }

    fn op(&mut self, name: u32) -> usize {
        let i = name as usize;
        if i >= self.omap.len() {
            self.omap.resize(i + 1, NONE);
        }
        if self.omap[i] == NONE {
            self.omap[i] = self.ops.len() as u32;
            self.ops.push(OpSt {
                name,
                count: 0,
                bytes: 0,
                total: 0,
                hist: Histogram::new(),
                top: Vec::new(),
            });
        }
        self.omap[i] as usize
    }

    fn thread(&mut self, t: u32) -> &mut ThreadSt {
        let i = t as usize;
        if i >= self.threads.len() {
            self.threads.resize_with(i + 1, || None);
        }
        let cap = self.ring_cap();
        self.threads[i].get_or_insert_with(|| ThreadSt {
            blocked: 0,
            mark: 0,
            has_mark: false,
            in_item: false,
            ring: Ring::new(cap),
            cum: CBucket::default(),
        })
    }

    /// Where interval rings may forget: nothing a pending or future trigger
    /// looks at ends before this.
    fn horizon(&self) -> u64 {
        let oldest = self.pending.iter().map(|p| p.t).min().unwrap_or(self.now);
        oldest.min(self.now).saturating_sub(self.o.lookback_ns)
    }

    fn push_span(ring: &mut VecDeque<Span>, s: Span, horizon: u64, cap: usize, evicted: &mut u64) {
        while let Some(f) = ring.front() {
            if f.end < horizon {
                ring.pop_front();
            } else if ring.len() >= cap {
                ring.pop_front();
                *evicted += 1;
            } else {
                break;
            }
        }
        ring.push_back(s);
    }

    /// One application event, in timestamp order.
    fn app_event(&mut self, ev: &Ev, m: &Model) {
        let Some(p) = m
            .threads
            .get(ev.thread as usize)
            .and_then(|t| m.procs.get(t.proc as usize))
        else {
            return;
        };
        let now = p.scale.ns(ev.ticks.saturating_sub(p.anchor_ticks));
        if now > self.now {
            self.now = now;
        }
        self.app_events += 1;
        let th = ev.thread;
        let bn = self.o.bucket_ns;
        match ev.kind {
            kind::LOCK_WAIT => {
                let l = self.lock(ev.worker);
                let lk = &mut self.locks[l];
                lk.waits += 1;
                lk.wait_total = lk.wait_total.saturating_add(ev.x);
                lk.wait.record(ev.x);
                let t = self.thread(th);
                t.blocked = t.blocked.saturating_add(ev.x);
                let h = self.horizon();
                let s = Span {
                    start: now.saturating_sub(ev.x),
                    end: now,
                    thread: th,
                    obj: l as u32,
                    bytes: 0,
                };
                Self::push_span(
                    &mut self.waits,
                    s,
                    h,
                    self.o.max_intervals,
                    &mut self.evicted,
                );
            }
            kind::LOCK_HOLD => {
                let l = self.lock(ev.worker);
                let h = self.horizon();
                let cap = self.o.max_intervals;
                let lk = &mut self.locks[l];
                lk.holds += 1;
                lk.hold_total = lk.hold_total.saturating_add(ev.x);
                lk.hold_max = lk.hold_max.max(ev.x);
                top_hold(&mut lk.top, th, ev.x, now);
                let s = Span {
                    start: now.saturating_sub(ev.x),
                    end: now,
                    thread: th,
                    obj: l as u32,
                    bytes: 0,
                };
                if ev.x >= SHORT_HOLD_NS {
                    Self::push_span(&mut lk.ring, s, h, cap, &mut self.evicted);
                } else {
                    Self::push_span(&mut lk.short, s, h, cap / 4, &mut self.evicted_short);
                }
            }
            kind::ENQUEUE | kind::DEQUEUE | kind::ITEM_DROPPED | kind::QUEUE_SNAPSHOT => {
                let qi = self.queue(ev.worker, now);
                let widx = now / self.o.window_ns;
                let step = now / self.step_ns();
                let q = &mut self.queues[qi];
                let size = ev.a;
                if step != q.step {
                    close_step(q, self.o.window_ns, self.o.window_ns.min(100_000_000));
                    q.step = step;
                    q.step_base = q.last_size;
                }
                q.last_size = size;
                q.max_size = q.max_size.max(size);
                // Since when the queue holds items, from the sizes: other
                // consumers may have taken the oldest items, so this can
                // reach back further than a dequeued item's delay.
                let since = q.nonempty_since;
                if ev.kind != kind::ITEM_DROPPED {
                    if size == 0 {
                        q.nonempty_since = u64::MAX;
                    } else if since == u64::MAX {
                        q.nonempty_since = now;
                    }
                }
                let rw = row(&mut q.rows, widx);
                rw.size_end = size;
                rw.max_size = rw.max_size.max(size);
                match ev.kind {
                    kind::ENQUEUE => {
                        q.enq += 1;
                        rw.enq += 1;
                        q.cum.enq += 1;
                        if let Some(b) = q.ring.slot(now / bn) {
                            b.enq += 1;
                        }
                    }
                    kind::DEQUEUE => {
                        q.deq += 1;
                        rw.deq += 1;
                        q.cum.deq += 1;
                        if let Some(b) = q.ring.slot(now / bn) {
                            b.deq += 1;
                        }
                        if ev.x > 0 {
                            q.delay.record(ev.x);
                        }
                        if !q.consumers.contains(&th) {
                            q.consumers.push(th);
                        }
                        self.dequeue(th, now, ev.x, size, since);
                    }
                    kind::ITEM_DROPPED => {
                        q.dropped += 1;
                        rw.drops += 1;
                        if let Some(b) = q.ring.slot(now / bn) {
                            b.drops += 1;
                        }
                        let cause = ev.x as u32;
                        match q.drops.iter_mut().find(|d| d.0 == cause) {
                            Some(d) => d.1 += 1,
                            None => q.drops.push((cause, 1)),
                        }
                    }
                    _ => q.snapshots += 1,
                }
            }
            kind::PROCESSING_END => {
                let qi = self.queue(ev.worker, now);
                let q = &mut self.queues[qi];
                if ev.flag != 0 {
                    q.ok += 1;
                } else {
                    q.fail += 1;
                }
                q.proc.record(ev.x);
                let t = self.thread(th);
                let net = ev.x - ev.x.min(t.blocked);
                spread(
                    &mut t.ring,
                    now.saturating_sub(ev.x),
                    now,
                    net,
                    bn,
                    |b, v| b.net = b.net.saturating_add(v),
                );
                if let Some(b) = t.ring.slot(now / bn) {
                    b.items += 1;
                }
                t.cum.net = t.cum.net.saturating_add(net);
                t.cum.items += 1;
                t.blocked = 0;
                t.in_item = false;
                t.mark = now;
                t.has_mark = true;
            }
            kind::BACKLOG_TRIGGER => {
                let qi = self.queue(ev.worker, now) as u32;
                let since = self.queues[qi as usize].nonempty_since;
                let prev = std::mem::replace(&mut self.queues[qi as usize].last_trigger, now);
                let i = ev.x as usize;
                let growth = m.side.get(i).copied().unwrap_or(0) as i64;
                let reason = m.side.get(i + 1).copied().unwrap_or(0) as u32;
                let deadline = now.saturating_add(self.o.lookahead_ns);
                self.pending.push(Pending {
                    t: now,
                    exact: p.ns(ev.ticks).max(0) as u64,
                    since,
                    prev,
                    q: qi,
                    size: ev.a,
                    growth,
                    reason,
                    deadline,
                });
                self.next_deadline = self.next_deadline.min(deadline);
            }
            kind::IO => {
                let o = self.op(ev.worker);
                let bytes = if ev.flag == 1 {
                    m.side.get(ev.a as usize).copied().unwrap_or(0)
                } else {
                    ev.a as u64
                };
                let op = &mut self.ops[o];
                op.count += 1;
                op.bytes = op.bytes.saturating_add(bytes);
                op.total = op.total.saturating_add(ev.x);
                op.hist.record(ev.x);
                if op.top.len() < TOP || op.top.last().is_some_and(|l| ev.x > l.1) {
                    let at = op.top.partition_point(|x| x.1 >= ev.x);
                    op.top.insert(at, (th, ev.x, bytes, now));
                    op.top.truncate(TOP);
                }
                let t = self.thread(th);
                t.blocked = t.blocked.saturating_add(ev.x);
                let h = self.horizon();
                let s = Span {
                    start: now.saturating_sub(ev.x),
                    end: now,
                    thread: th,
                    obj: ev.worker,
                    bytes,
                };
                Self::push_span(&mut self.ios, s, h, self.o.max_intervals, &mut self.evicted);
            }
            kind::HEARTBEAT => {
                let hb = self.hbs.entry((th, ev.worker)).or_default();
                hb.beats += 1;
                if hb.beats == 1 || ev.x > hb.max_gap {
                    hb.max_gap = ev.x;
                    hb.at = now;
                }
                // Long gaps are evidence for a stall verdict (short ones,
                // the common case, are not kept).
                if ev.x >= HB_GAP_NS {
                    let h = self.horizon();
                    let s = Span {
                        start: now.saturating_sub(ev.x),
                        end: now,
                        thread: th,
                        obj: ev.worker,
                        bytes: 0,
                    };
                    Self::push_span(
                        &mut self.hb_gaps,
                        s,
                        h,
                        self.o.max_intervals,
                        &mut self.evicted,
                    );
                }
            }
            _ => {}
        }
        if !self.pending.is_empty() && (ev.kind == kind::DEQUEUE || now >= self.next_deadline) {
            self.check_pending(false);
        }
    }

    /// A consumer took an item: the gap since its last item, while the
    /// queue had items and it was neither waiting on a lock nor in I/O, is
    /// stall time.
    fn dequeue(&mut self, th: u32, now: u64, delay: u64, size_after: u32, since: u64) {
        let bn = self.o.bucket_ns;
        let t = self.thread(th);
        if t.has_mark && !t.in_item && now > t.mark {
            // The queue was not empty from the item's enqueue on, and
            // since its size last rose from 0 (the earlier of the two);
            // with neither known, through the whole gap if items remain.
            let item = if delay > 0 {
                now.saturating_sub(delay)
            } else {
                u64::MAX
            };
            let start = if item.min(since) != u64::MAX {
                t.mark.max(item.min(since)).min(now)
            } else if size_after > 0 {
                t.mark
            } else {
                now
            };
            let gap = now - start;
            let stall = gap.saturating_sub(t.blocked);
            if stall > 0 {
                spread(&mut t.ring, start, now, stall, bn, |b, v| {
                    b.stall = b.stall.saturating_add(v)
                });
                t.cum.stall = t.cum.stall.saturating_add(stall);
            }
        }
        if let Some(b) = t.ring.slot(now / bn) {
            b.deqs += 1;
        }
        t.cum.deqs += 1;
        t.blocked = 0;
        t.in_item = true;
        t.mark = now;
        t.has_mark = true;
    }

    /// Judges the triggers whose evidence is complete (`all`: every one,
    /// at the end of a recording).
    fn check_pending(&mut self, all: bool) {
        let now = self.now;
        let mut i = 0;
        while i < self.pending.len() {
            let p = self.pending[i];
            // Every consumer has resumed since the trigger: what blocked
            // it has ended and been recorded; what it records right after
            // resuming (a heartbeat ending its silence) comes within
            // `GRACE_NS`.
            if now > p.t
                && p.deadline > now.saturating_add(GRACE_NS)
                && self.queues[p.q as usize].consumers.iter().all(|&c| {
                    self.threads
                        .get(c as usize)
                        .and_then(|t| t.as_ref())
                        .is_some_and(|t| t.mark > p.t)
                })
            {
                self.pending[i].deadline = now.saturating_add(GRACE_NS);
                // The episode is over: the queue's next trigger is judged
                // from here on.
                let q = &mut self.queues[p.q as usize];
                if q.last_trigger == p.t {
                    q.last_trigger = now;
                }
            }
            let ready = all || now >= self.pending[i].deadline;
            if ready {
                self.pending.remove(i);
                let rec = self.evaluate(&p);
                self.done.push(rec);
            } else {
                i += 1;
            }
        }
        self.next_deadline = self
            .pending
            .iter()
            .map(|p| p.deadline)
            .min()
            .unwrap_or(u64::MAX);
    }

    /// End of a recording (or of the trace): judge what is pending, and
    /// forget the time-window state (another recording has its own clock).
    fn close_recording(&mut self) {
        self.check_pending(true);
        self.waits.clear();
        self.ios.clear();
        self.hb_gaps.clear();
        for l in &mut self.locks {
            l.ring.clear();
            l.short.clear();
        }
        let (w, st) = (self.o.window_ns, self.step_ns());
        for q in &mut self.queues {
            close_step(q, w, st);
            q.step_base = q.last_size;
            q.step = u64::MAX;
            q.nonempty_since = u64::MAX;
        }
        let cap = self.ring_cap();
        for t in self.threads.iter_mut().flatten() {
            t.ring = Ring::new(cap);
            t.has_mark = false;
            t.in_item = false;
            t.blocked = 0;
        }
        for q in &mut self.queues {
            q.ring = Ring::new(cap);
        }
        self.now = 0;
    }

    /// I/O time of `thread` inside `[s, e]` (intervals ending by `limit`),
    /// and its slowest such operation.
    fn io_overlap(
        &self,
        thread: u32,
        s: u64,
        e: u64,
        limit: u64,
    ) -> (u64, Option<Span>, Option<Span>) {
        let mut sum = 0u64;
        let (mut worst, mut last): (Option<Span>, Option<Span>) = (None, None);
        let first = self.ios.partition_point(|x| x.end < s);
        for x in self.ios.range(first..) {
            if x.end > limit.saturating_add(SLACK_NS) {
                break;
            }
            if x.thread != thread || x.start >= e {
                continue;
            }
            let ov = x.end.min(e).saturating_sub(x.start.max(s));
            if ov > 0 {
                sum = sum.saturating_add(ov);
                if worst.is_none_or(|w| x.end - x.start > w.end - w.start) {
                    worst = Some(*x);
                }
                if last.is_none_or(|w| x.end > w.end) {
                    last = Some(*x);
                }
            }
        }
        (sum.min(e - s), worst, last)
    }

    /// The lock `thread` held across `[s, e]`, if a recorded hold shows it
    /// among the next 256 holds of each lock ending after `e` (the hold
    /// around an I/O ends soon after it; the bound keeps a trigger's cost
    /// independent of the hold rate).
    fn held_by(&self, thread: u32, s: u64, e: u64) -> u32 {
        for (li, l) in self.locks.iter().enumerate() {
            for r in [&l.ring, &l.short] {
                let first = r.partition_point(|h| h.end < e);
                for h in r.range(first..).take(256) {
                    if h.thread == thread && h.start <= s && h.end >= e {
                        return li as u32;
                    }
                }
            }
        }
        NONE
    }

    fn evaluate(&mut self, p: &Pending) -> TriggerRec {
        let o = self.o;
        let t = p.t;
        // The window starts after the queue's previous episode (its
        // consumers resumed after its previous trigger), so one spike's
        // causes are not counted again in the next one's, and no earlier
        // than when the queue was last empty: the backlog built up from
        // there, and what the consumers lost before it had been caught up
        // (on a busy machine, scheduling delays spread over seconds would
        // otherwise outweigh the stall that built this backlog). It spans
        // at least MIN_WINDOW_NS (rates over less are noise), at most the
        // lookback.
        // (A trigger recorded out of order within its thread can see a
        // later `since`: then it is not known.)
        let known = |x: u64| if x == u64::MAX || x > t { 0 } else { x };
        let episode = known(p.prev)
            .max(known(p.since))
            .min(t.saturating_sub(MIN_WINDOW_NS));
        let ws = episode.max(t.saturating_sub(o.lookback_ns));
        let span = (t - ws).max(1);
        let (b0, b1) = (ws / o.bucket_ns, t / o.bucket_ns);
        let consumers = self.queues[p.q as usize].consumers.clone();
        let mut accs: Vec<Acc> = Vec::new();
        for &c in &consumers {
            // 1. The consumer's lock waits: under the holder's I/O, or not.
            let first = self.waits.partition_point(|w| w.end < ws);
            for w in self.waits.range(first..) {
                if w.thread != c || w.start >= t {
                    continue;
                }
                let (a, b) = (w.start.max(ws), w.end.min(t));
                if b <= a {
                    continue;
                }
                let lk = &self.locks[w.obj as usize];
                self.scratch.clear();
                for (r, slack) in [(&lk.ring, LATE_HOLD_NS), (&lk.short, SLACK_NS)] {
                    let h0 = r.partition_point(|h| h.end < a);
                    for h in r.range(h0..) {
                        if h.end > w.end.saturating_add(slack) {
                            break;
                        }
                        if h.thread != c && h.start < b && h.end > a {
                            self.scratch.push((h.start, h.end, h.thread));
                        }
                    }
                }
                self.scratch.sort_unstable();
                let (mut cur, mut covered) = (a, 0u64);
                let mut counted = false;
                for k in 0..self.scratch.len() {
                    let (hs, he, ht) = self.scratch[k];
                    let (s0, e0) = (hs.max(cur), he.min(b));
                    if e0 <= s0 {
                        continue;
                    }
                    let (io, worst, last) = self.io_overlap(ht, s0, e0, he);
                    if io > 0 {
                        let acc = add(&mut accs, Cause::IoBlocking, w.obj, ht, true, io, c);
                        if !counted {
                            acc.n += 1;
                        }
                        acc.max_wait = acc.max_wait.max(w.end - w.start);
                        for x in [worst, last].into_iter().flatten() {
                            acc.note_io(&x);
                        }
                    }
                    if e0 - s0 > io {
                        let acc = add(
                            &mut accs,
                            Cause::LockContention,
                            w.obj,
                            ht,
                            false,
                            e0 - s0 - io,
                            c,
                        );
                        if !counted {
                            acc.n += 1;
                        }
                        acc.max_wait = acc.max_wait.max(w.end - w.start);
                        if he - hs > acc.worst_ns {
                            acc.worst_ns = he - hs;
                            acc.worst_at = he;
                        }
                    }
                    counted = true;
                    covered += e0 - s0;
                    cur = e0;
                }
                if b - a > covered {
                    let acc = add(
                        &mut accs,
                        Cause::LockContention,
                        w.obj,
                        NONE,
                        false,
                        b - a - covered,
                        c,
                    );
                    acc.n += 1;
                    acc.max_wait = acc.max_wait.max(w.end - w.start);
                }
            }
            // 2. The consumer's own I/O.
            let first = self.ios.partition_point(|x| x.end < ws);
            for x in self.ios.range(first..) {
                if x.thread != c || x.start >= t {
                    continue;
                }
                let (a, b) = (x.start.max(ws), x.end.min(t));
                if b <= a {
                    continue;
                }
                let lock = self.held_by(c, x.start, x.end);
                let acc = add(&mut accs, Cause::IoBlocking, lock, c, false, b - a, c);
                acc.n += 1;
                acc.note_io(x);
            }
            let Some(ts) = self.threads.get(c as usize).and_then(|x| x.as_ref()) else {
                continue;
            };
            // 3. Processing above the baseline.
            let (base_mean, w_net, w_items) = baseline(ts, b0, b1, |x| (x.net, x.items));
            if base_mean > 0 && w_items > 0 {
                let w_mean = w_net / w_items;
                if w_mean as f64 >= base_mean as f64 * o.slowdown_ratio {
                    let excess = w_net.saturating_sub(base_mean.saturating_mul(w_items));
                    let acc = add(
                        &mut accs,
                        Cause::ProcessingSlowdown,
                        NONE,
                        c,
                        false,
                        excess,
                        c,
                    );
                    acc.n += w_items;
                    acc.base_mean = base_mean;
                    acc.win_mean = w_mean;
                }
            }
            // 4. Idle while items waited, beyond the baseline's idle time
            // per dequeue (a healthy consumer also spends a little time
            // between items), and a gap still open at the trigger
            // (nothing since).
            let (base_stall, w_stall, w_deqs) = baseline(ts, b0, b1, |x| (x.stall, x.deqs));
            let mut stall = w_stall.saturating_sub(base_stall.saturating_mul(w_deqs));
            if ts.has_mark && ts.mark < t && p.size > 0 {
                // Idle since its last item, while the queue held items.
                let o0 = ts
                    .mark
                    .max(ws)
                    .max(if p.since == u64::MAX { 0 } else { p.since });
                let mut blocked = 0u64;
                for r in [&self.waits, &self.ios] {
                    let f = r.partition_point(|x| x.end < o0);
                    for x in r.range(f..) {
                        if x.thread == c {
                            blocked = blocked
                                .saturating_add(x.end.min(t).saturating_sub(x.start.max(o0)));
                        }
                    }
                }
                stall = stall.saturating_add((t - o0).saturating_sub(blocked));
            }
            if stall > 0 {
                let acc = add(&mut accs, Cause::ConsumerStall, NONE, c, false, stall, c);
                // Its longest heartbeat gap overlapping the window.
                let f = self.hb_gaps.partition_point(|x| x.end < ws);
                for x in self.hb_gaps.range(f..) {
                    if x.thread == c && x.start < t && x.end - x.start > acc.worst_ns {
                        acc.worst_ns = x.end - x.start;
                        acc.worst_at = x.end;
                        acc.worst_op = x.obj;
                    }
                }
            }
        }
        let q = &self.queues[p.q as usize];
        let (w, after) = (
            q.ring.fold(b0, b1, QBucket::default(), |a, x| QBucket {
                enq: a.enq + x.enq,
                deq: a.deq + x.deq,
                drops: a.drops + x.drops,
            }),
            q.ring
                .fold(b0, u64::MAX, QBucket::default(), |a, x| QBucket {
                    enq: a.enq + x.enq,
                    deq: a.deq + x.deq,
                    drops: a.drops + x.drops,
                }),
        );
        let secs = span as f64 / 1e9;
        let before_secs = ws.saturating_sub(q.first_ns) as f64 / 1e9;
        let rate = |n: u64, s: f64| if s > 0.0 { n as f64 / s } else { 0.0 };
        let before = |n: u64| (before_secs > 0.0).then(|| rate(n, before_secs));
        let enq_before = before(q.cum.enq.saturating_sub(after.enq));
        let deq_before = before(q.cum.deq.saturating_sub(after.deq));
        if consumers.is_empty() && w.enq > 0 {
            add(
                &mut accs,
                Cause::ConsumerStall,
                NONE,
                NONE,
                false,
                span,
                NONE,
            );
        }
        let capacity = consumers.len().max(1) as f64 * span as f64;
        // Without processing guards (no `processing_end` for this queue)
        // idle time cannot be told from processing: a dequeue rate that
        // fell while items were enqueued is the stall, as far as the
        // explained time does not already cover it (`under_lock` marks
        // this rate-based kind in the accumulator).
        let deq_during = rate(w.deq, secs);
        if q.ok + q.fail == 0 && !consumers.is_empty() && w.enq > 0 {
            if let Some(db) = deq_before.filter(|&db| db > 0.0 && deq_during < db) {
                let explained = accs.iter().fold(0u64, |s, a| s.saturating_add(a.ns));
                let fell = (1.0 - deq_during / db) * capacity;
                if fell > explained as f64 {
                    let who = if consumers.len() == 1 {
                        consumers[0]
                    } else {
                        NONE
                    };
                    add(
                        &mut accs,
                        Cause::ConsumerStall,
                        NONE,
                        who,
                        true,
                        (fell - explained as f64) as u64,
                        who,
                    );
                }
            }
        }
        let lost: u64 = accs.iter().fold(0u64, |s, a| s.saturating_add(a.ns));
        let mut verdicts: Vec<(f64, Acc)> = accs
            .into_iter()
            .filter(|a| a.ns > 0)
            .map(|a| (a.ns as f64 / lost.max(1) as f64, a))
            .filter(|(s, a)| *s >= o.floor && a.ns as f64 >= o.min_lost_share * capacity)
            .collect();
        // Best first; at equal scores, the deeper cause (I/O, then locks)
        // first.
        let depth = |c: Cause| match c {
            Cause::IoBlocking => 0,
            Cause::LockContention => 1,
            Cause::ProcessingSlowdown => 2,
            Cause::ConsumerStall => 3,
        };
        verdicts.sort_by(|x, y| {
            y.0.total_cmp(&x.0)
                .then(depth(x.1.cause).cmp(&depth(y.1.cause)))
        });
        TriggerRec {
            t,
            exact: p.exact,
            q: p.q,
            size: p.size,
            growth: p.growth,
            reason: p.reason,
            ws,
            consumers,
            enq_before,
            enq_during: rate(w.enq, secs),
            deq_before,
            deq_during,
            drops: w.drops,
            lost,
            verdicts,
        }
    }
}

/// A per-item baseline and the window to judge against it, from a
/// consumer's buckets: (baseline mean of `f`'s value per count, window
/// value, window count). The baseline is everything before the window;
/// with fewer than `MIN_BASE_ITEMS` counts there, the window's first
/// quarter (and the rest of the window is judged); with fewer than 3 there
/// either, no baseline (mean 0).
fn baseline(
    ts: &ThreadSt,
    b0: u64,
    b1: u64,
    f: impl Fn(&CBucket) -> (u64, u64),
) -> (u64, u64, u64) {
    let sum = |from: u64, to: u64| {
        ts.ring.fold(from, to, (0u64, 0u64), |(v, n), x| {
            let (a, b) = f(x);
            (v.saturating_add(a), n.saturating_add(b))
        })
    };
    let (w_v, w_n) = sum(b0, b1);
    let (after_v, after_n) = sum(b0, u64::MAX);
    let (cum_v, cum_n) = f(&ts.cum);
    let (base_v, base_n) = (cum_v.saturating_sub(after_v), cum_n.saturating_sub(after_n));
    if base_n >= MIN_BASE_ITEMS {
        return (base_v / base_n, w_v, w_n);
    }
    let bq = b0 + (b1 - b0 + 1) / 4;
    let (qv, qn) = sum(b0, bq.saturating_sub(1));
    let (rv, rn) = sum(bq, b1);
    if qn >= 3 {
        (qv / qn, rv, rn)
    } else {
        (0, w_v, w_n)
    }
}

/// The accumulator of (cause, lock, thread), created on first use, with
/// `ns` added and `victim` (a consumer, or `NONE`) noted.
fn add(
    accs: &mut Vec<Acc>,
    cause: Cause,
    lock: u32,
    thread: u32,
    under: bool,
    ns: u64,
    victim: u32,
) -> &mut Acc {
    let i = match accs.iter().position(|a| {
        a.cause == cause && a.lock == lock && a.thread == thread && a.under_lock == under
    }) {
        Some(i) => i,
        None => {
            accs.push(Acc {
                cause,
                lock,
                thread,
                under_lock: under,
                ns: 0,
                n: 0,
                victims: Vec::new(),
                worst_ns: 0,
                worst_at: 0,
                worst_op: NONE,
                worst_bytes: 0,
                last: None,
                max_wait: 0,
                base_mean: 0,
                win_mean: 0,
            });
            accs.len() - 1
        }
    };
    let a = &mut accs[i];
    a.ns = a.ns.saturating_add(ns);
    if victim != NONE && !a.victims.contains(&victim) {
        a.victims.push(victim);
    }
    a
}

/// Ends the queue's current growth step: its growth per second counts
/// toward the peak of the queue and of the step's window.
fn close_step(q: &mut QueueSt, window_ns: u64, step_ns: u64) {
    if q.step == u64::MAX {
        return;
    }
    let g = (q.last_size as f64 - q.step_base as f64) / (step_ns as f64 / 1e9);
    let end = q.step.saturating_add(1).saturating_mul(step_ns);
    if g > q.peak {
        q.peak = g;
        q.peak_at = end;
    }
    let r = row(&mut q.rows, q.step.saturating_mul(step_ns) / window_ns);
    if g > r.peak_growth {
        r.peak_growth = g;
    }
}

/// The row of window `idx` (events come in time order, so it is the last
/// row or a new one; a late event finds its row by search).
fn row(rows: &mut Vec<Row>, idx: u64) -> &mut Row {
    let pos = match rows.last().map(|r| r.idx) {
        Some(last) if last == idx => rows.len() - 1,
        Some(last) if last > idx => match rows.binary_search_by_key(&idx, |r| r.idx) {
            Ok(i) => i,
            Err(i) => {
                let prev = if i > 0 { rows[i - 1].size_end } else { 0 };
                rows.insert(i, new_row(idx, prev));
                i
            }
        },
        _ => {
            let prev = rows.last().map_or(0, |r| r.size_end);
            rows.push(new_row(idx, prev));
            rows.len() - 1
        }
    };
    &mut rows[pos]
}

fn new_row(idx: u64, size: u32) -> Row {
    Row {
        idx,
        enq: 0,
        deq: 0,
        drops: 0,
        size_end: size,
        max_size: 0,
        peak_growth: 0.0,
    }
}

/// Keeps each thread's longest hold, the `TOP` longest first (a short list
/// scanned linearly; most holds are shorter than the shortest kept).
fn top_hold(top: &mut Vec<(u32, u64, u64)>, th: u32, ns: u64, at: u64) {
    if top.len() >= TOP && top.last().is_some_and(|l| ns <= l.1) {
        return;
    }
    if let Some(i) = top.iter().position(|x| x.0 == th) {
        if top[i].1 >= ns {
            return;
        }
        top.remove(i);
    }
    let at_i = top.partition_point(|x| x.1 >= ns);
    top.insert(at_i, (th, ns, at));
    top.truncate(TOP);
}

/// Adds `amount` to the buckets of `[start, end]`, in proportion to their
/// overlap (all of it to `end`'s bucket for an empty interval).
fn spread<T: Default + Copy>(
    ring: &mut Ring<T>,
    start: u64,
    end: u64,
    amount: u64,
    bn: u64,
    mut f: impl FnMut(&mut T, u64),
) {
    if amount == 0 {
        return;
    }
    let (b0, b1) = (start / bn, end / bn);
    if b0 == b1 || end <= start {
        if let Some(b) = ring.slot(end / bn) {
            f(b, amount);
        }
        return;
    }
    let len = (end - start) as u128;
    // Only the buckets the ring can hold.
    let first = b0.max(b1.saturating_sub(ring.cap as u64 - 1));
    let mut given = 0u64;
    for b in first..=b1 {
        let (s, e) = (
            b.saturating_mul(bn).max(start),
            b.saturating_add(1).saturating_mul(bn).min(end),
        );
        let share = if b == b1 {
            amount - given.min(amount)
        } else {
            (amount as u128 * e.saturating_sub(s) as u128 / len) as u64
        };
        given = given.saturating_add(share);
        if let Some(x) = ring.slot(b) {
            f(x, share);
        }
    }
}

// ---------------------------------------------------------------------------
// Report

impl Backlog {
    /// The report of a finished pass (after [`input::read`]) over the model
    /// and read statistics of the same read.
    pub fn report(&self, model: &Model, stats: ReadStats) -> BacklogReport {
        build(self, model, stats)
    }
}

struct Names<'a> {
    threads: &'a [Thread],
    procs: &'a [Process],
    multi: bool,
}

impl Names<'_> {
    fn thread(&self, t: u32) -> Option<String> {
        let th = self.threads.get(t as usize)?;
        let pid = self.procs.get(th.proc as usize).map_or(0, |p| p.pid);
        let id = if self.multi {
            format!("pid {pid}, tid {}", th.tid)
        } else {
            format!("tid {}", th.tid)
        };
        Some(match &th.name {
            Some(n) if !n.is_empty() => format!("{n} ({id})"),
            _ => id,
        })
    }

    fn thread_or(&self, t: u32) -> String {
        self.thread(t).unwrap_or_else(|| "?".into())
    }
}

fn list(v: &[String]) -> String {
    match v.len() {
        0 => "the consumers".into(),
        1 => v[0].clone(),
        _ => format!("{} and {}", v[..v.len() - 1].join(", "), v[v.len() - 1]),
    }
}

fn build(s: &Backlog, m: &Model, rs: ReadStats) -> BacklogReport {
    let nm = Names {
        threads: &m.threads,
        procs: &m.procs,
        multi: m.procs.len() > 1,
    };
    let o = s.o;
    let name = |i: u32| m.name(i).to_string();
    let mut queues: Vec<QueueReport> = s
        .queues
        .iter()
        .map(|q| {
            let wsec = o.window_ns as f64 / 1e9;
            let mut prev: Option<(u64, u32)> = None;
            let windows: Vec<RateWindow> = q
                .rows
                .iter()
                .map(|r| {
                    // Growth against the previous window's end (per second
                    // of the time since it, when windows were skipped).
                    let (span, before) = match prev {
                        Some((pi, ps)) => ((r.idx - pi) as f64 * wsec, ps),
                        None => (wsec, 0),
                    };
                    prev = Some((r.idx, r.size_end));
                    RateWindow {
                        start_ns: r.idx.saturating_mul(o.window_ns),
                        enqueued: r.enq,
                        dequeued: r.deq,
                        dropped: r.drops,
                        enqueue_per_sec: r.enq as f64 / wsec,
                        dequeue_per_sec: r.deq as f64 / wsec,
                        size_end: r.size_end,
                        max_size: r.max_size,
                        growth_per_sec: (r.size_end as f64 - before as f64) / span,
                        peak_growth_per_sec: r.peak_growth,
                    }
                })
                .collect();
            QueueReport {
                name: name(q.name),
                enqueued: q.enq,
                dequeued: q.deq,
                dropped: q.dropped,
                dropped_by_cause: q.drops.iter().map(|&(c, n)| (name(c), n)).collect(),
                processed_ok: q.ok,
                processed_failed: q.fail,
                max_size: q.max_size,
                queue_delay_ns: q.delay.summary(),
                processing_ns: q.proc.summary(),
                consumers: q.consumers.iter().map(|&c| nm.thread_or(c)).collect(),
                windows,
                peak_growth_per_sec: q.peak,
                peak_growth_at_ns: q.peak_at,
                snapshots: q.snapshots,
            }
        })
        .collect();
    queues.sort_by(|a, b| a.name.cmp(&b.name));
    let mut locks: Vec<LockReport> = s
        .locks
        .iter()
        .map(|l| LockReport {
            name: name(l.name),
            waits: l.waits,
            wait_ns_total: l.wait_total,
            wait_ns_mean: l.wait_total.checked_div(l.waits).unwrap_or(0),
            wait_ns: l.wait.summary(),
            holds: l.holds,
            hold_ns_max: l.hold_max,
            hold_ns_total: l.hold_total,
            longest_holds: l
                .top
                .iter()
                .map(|&(t, ns, at)| HoldRef {
                    thread: nm.thread_or(t),
                    hold_ns: ns,
                    at_ns: at,
                })
                .collect(),
        })
        .collect();
    locks.sort_by(|a, b| {
        b.wait_ns_total
            .cmp(&a.wait_ns_total)
            .then(b.hold_ns_max.cmp(&a.hold_ns_max))
            .then(a.name.cmp(&b.name))
    });
    let mut io: Vec<IoReport> = s
        .ops
        .iter()
        .map(|x| IoReport {
            op: name(x.name),
            count: x.count,
            bytes: x.bytes,
            io_ns: x.hist.summary(),
            io_ns_total: x.total,
            slowest: x
                .top
                .iter()
                .map(|&(t, ns, bytes, at)| IoRef {
                    thread: nm.thread_or(t),
                    io_ns: ns,
                    bytes,
                    at_ns: at,
                })
                .collect(),
        })
        .collect();
    io.sort_by(|a, b| b.io_ns_total.cmp(&a.io_ns_total).then(a.op.cmp(&b.op)));
    let mut heartbeats: Vec<HeartbeatReport> = s
        .hbs
        .iter()
        .map(|(&(t, r), h)| HeartbeatReport {
            thread: nm.thread_or(t),
            role: name(r),
            beats: h.beats,
            max_gap_ns: h.max_gap,
            max_gap_at_ns: h.at,
        })
        .collect();
    heartbeats.sort_by(|a, b| {
        b.max_gap_ns
            .cmp(&a.max_gap_ns)
            .then(a.thread.cmp(&b.thread))
            .then(a.role.cmp(&b.role))
    });
    let mut triggers: Vec<TriggerReport> = s
        .done
        .iter()
        .map(|r| {
            let qname = name(s.queues[r.q as usize].name);
            let verdicts = r
                .verdicts
                .iter()
                .map(|(score, a)| Verdict {
                    cause: a.cause,
                    score: (score * 1000.0).round() / 1000.0,
                    lock: (a.lock != NONE).then(|| name(s.locks[a.lock as usize].name)),
                    thread: if a.thread == NONE {
                        None
                    } else {
                        nm.thread(a.thread)
                    },
                    lost_ns: a.ns,
                    evidence: evidence(s, m, &nm, r, a, &qname),
                })
                .collect();
            TriggerReport {
                timestamp_ns: r.exact,
                queue: qname,
                queue_size: r.size,
                reason: name(r.reason),
                growth_rate_per_sec: r.growth,
                window_ns: [r.ws, r.t],
                consumers: r.consumers.iter().map(|&c| nm.thread_or(c)).collect(),
                enqueue_rate_before: r.enq_before,
                enqueue_rate_during: r.enq_during,
                dequeue_rate_before: r.deq_before,
                dequeue_rate_during: r.deq_during,
                lost_ns: r.lost,
                dropped_in_window: r.drops,
                verdicts,
            }
        })
        .collect();
    triggers.sort_by_key(|t| t.timestamp_ns);
    let mut notes = Vec::new();
    if s.app_events == 0 {
        notes.push(
            "no application-instrumentation events (lock_wait, lock_hold, enqueue, dequeue, \
             processing_end, item_dropped, queue_snapshot, backlog_trigger, io, \
             thread_heartbeat) in the trace: nothing to report (record with runtrace::sync's \
             primitives)"
                .into(),
        );
    }
    if s.evicted > 0 {
        notes.push(format!(
            "{} lock or I/O intervals were forgotten early (more than {} of a kind within the \
             lookback window): verdicts near them may miss some",
            s.evicted, o.max_intervals
        ));
    }
    if s.evicted_short > 0 {
        notes.push(format!(
            "{} lock holds under 50 us were forgotten early (more than {} within the lookback \
             window): waits in a convoy of short holds may be reported with an unknown holder",
            s.evicted_short,
            o.max_intervals / 4
        ));
    }
    if s.late_events > 0 {
        notes.push(format!(
            "{} events arrived out of timestamp order and were analysed late",
            s.late_events
        ));
    }
    let duration_ns = m
        .procs
        .iter()
        .filter(|p| p.last_ticks >= p.first_ticks)
        .map(|p| p.scale.ns(p.last_ticks - p.first_ticks))
        .max()
        .unwrap_or(0);
    BacklogReport {
        queues,
        locks,
        io,
        heartbeats,
        triggers,
        files: rs.files,
        bytes: rs.bytes,
        events: rs.events,
        app_events: s.app_events,
        duration_ns,
        errors: rs.errors,
        damaged: rs.damaged,
        unsealed_files: rs.unsealed,
        notes,
        options: o,
    }
}

fn fmt_at(ns: u64) -> String {
    format!("{:.3} s", ns as f64 / 1e9)
}

fn fmt_rate(r: f64) -> String {
    if r >= 100.0 || r == 0.0 {
        format!("{r:.0}/s")
    } else {
        format!("{r:.1}/s")
    }
}

/// "1 wait", "2 waits".
fn plural(n: u64, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// "1 wait of 300 ms", "4 waits, the longest 300 ms".
fn waits(a: &Acc) -> String {
    if a.n == 1 {
        format!("1 wait of {}", crate::fmt_ns(a.max_wait))
    } else {
        format!("{} waits, the longest {}", a.n, crate::fmt_ns(a.max_wait))
    }
}

fn fmt_before(r: Option<f64>) -> String {
    r.map_or_else(|| "n/a".into(), fmt_rate)
}

fn evidence(
    s: &Backlog,
    m: &Model,
    nm: &Names<'_>,
    r: &TriggerRec,
    a: &Acc,
    queue: &str,
) -> String {
    use crate::fmt_ns;
    let victims: Vec<String> = a.victims.iter().map(|&v| nm.thread_or(v)).collect();
    let who = list(&victims);
    let lock = |l: u32| {
        if l == NONE {
            String::new()
        } else {
            format!("lock \"{}\"", m.name(s.locks[l as usize].name))
        }
    };
    let window = fmt_ns(r.t - r.ws);
    match a.cause {
        Cause::ConsumerStall if a.under_lock => format!(
            "the dequeue rate of \"{queue}\" fell to {} (before: {}) while items were enqueued at \
             {} (before: {}), more than the recorded lock waits and I/O explain (no \
             processing_end events to tell idle time from processing)",
            fmt_rate(r.deq_during),
            fmt_before(r.deq_before),
            fmt_rate(r.enq_during),
            fmt_before(r.enq_before)
        ),
        Cause::ConsumerStall if a.thread == NONE => format!(
            "no thread dequeued from \"{queue}\" in the {window} before the trigger; enqueue rate {} (before: {})",
            fmt_rate(r.enq_during),
            fmt_before(r.enq_before)
        ),
        Cause::ConsumerStall => format!(
            "{who} was idle for {} of the {window} before the trigger (beyond its usual pause \
             between items) while \"{queue}\" had items waiting: not processing, not waiting on \
             a recorded lock, not in recorded I/O; dequeue rate {} (before: {}), enqueue rate {} \
             (before: {})",
            fmt_ns(a.ns),
            fmt_rate(r.deq_during),
            fmt_before(r.deq_before),
            fmt_rate(r.enq_during),
            fmt_before(r.enq_before)
        ) + &if a.worst_op != NONE {
            format!(
                "; its \"{}\" heartbeat was silent for {}, until {}",
                m.name(a.worst_op),
                fmt_ns(a.worst_ns),
                fmt_at(a.worst_at)
            )
        } else {
            String::new()
        },
        Cause::LockContention if a.thread == NONE => format!(
            "{who} waited {} on {} ({}) with no recorded hold by another thread covering \
             the waits (holds under the lock's hold threshold?)",
            fmt_ns(a.ns),
            lock(a.lock),
            waits(a)
        ),
        Cause::LockContention => format!(
            "{who} waited {} on {} ({}) while {} held it without recorded I/O (its longest \
             such hold {}, ending at {})",
            fmt_ns(a.ns),
            lock(a.lock),
            waits(a),
            nm.thread_or(a.thread),
            fmt_ns(a.worst_ns),
            fmt_at(a.worst_at)
        ),
        Cause::IoBlocking => {
            let mut slowest = if a.worst_op != NONE {
                format!(
                    "; slowest: {} of {} bytes taking {}, ending at {}",
                    m.name(a.worst_op),
                    a.worst_bytes,
                    fmt_ns(a.worst_ns),
                    fmt_at(a.worst_at)
                )
            } else {
                String::new()
            };
            if let Some(l) = a.last.filter(|l| l.end != a.worst_at) {
                let _ = write!(
                    slowest,
                    "; latest: {} of {} bytes taking {}, ending at {}",
                    m.name(l.obj),
                    l.bytes,
                    fmt_ns(l.end - l.start),
                    fmt_at(l.end)
                );
            }
            if a.under_lock {
                format!(
                    "{who} waited {} on {} ({}) while its holder {} was in I/O{slowest}",
                    fmt_ns(a.ns),
                    lock(a.lock),
                    waits(a),
                    nm.thread_or(a.thread)
                )
            } else {
                let held = if a.lock == NONE {
                    String::new()
                } else {
                    format!(" while holding {}", lock(a.lock))
                };
                format!(
                    "{} spent {} of the {window} before the trigger in its own I/O{held} ({}){slowest}",
                    nm.thread_or(a.thread),
                    fmt_ns(a.ns),
                    plural(a.n, "operation")
                )
            }
        }
        Cause::ProcessingSlowdown => format!(
            "{}'s processing of \"{queue}\" items (lock waits and I/O excluded) took {} on average \
             over {} items in the window, against {} before: {} over the baseline",
            nm.thread_or(a.thread),
            fmt_ns(a.win_mean),
            a.n,
            fmt_ns(a.base_mean),
            fmt_ns(a.ns)
        ),
    }
}

/// How many triggers had one (cause, lock, thread) as their top verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct CauseCount {
    /// The cause; `None` for triggers without a verdict above the floor.
    pub cause: Option<Cause>,
    /// The verdict's lock.
    pub lock: Option<String>,
    /// The verdict's thread.
    pub thread: Option<String>,
    /// Triggers.
    pub triggers: u64,
}

impl BacklogReport {
    /// The top verdicts of all triggers, grouped and counted, most common
    /// first: what to fix first when a long trace has many triggers.
    pub fn top_causes(&self) -> Vec<CauseCount> {
        let mut v: Vec<CauseCount> = Vec::new();
        for t in &self.triggers {
            let top = t.verdicts.first();
            let (cause, lock, thread) = (
                top.map(|x| x.cause),
                top.and_then(|x| x.lock.clone()),
                top.and_then(|x| x.thread.clone()),
            );
            match v
                .iter_mut()
                .find(|c| c.cause == cause && c.lock == lock && c.thread == thread)
            {
                Some(c) => c.triggers += 1,
                None => v.push(CauseCount {
                    cause,
                    lock,
                    thread,
                    triggers: 1,
                }),
            }
        }
        v.sort_by_key(|c| std::cmp::Reverse(c.triggers));
        v
    }

    /// A file was damaged or cut short (the CLI exits with 1).
    pub fn is_damaged(&self) -> bool {
        self.damaged
    }

    /// The report as one JSON object (keys in docs/analysis.md).
    pub fn to_json(&self) -> Value {
        let sum = |s: &Summary| s.to_json();
        json!({
            "queues": self.queues.iter().map(|q| json!({
                "name": q.name,
                "enqueued": q.enqueued,
                "dequeued": q.dequeued,
                "dropped": q.dropped,
                "max_size": q.max_size,
                "dropped_by_cause": q.dropped_by_cause.iter()
                    .map(|(c, n)| (c.clone(), json!(n)))
                    .collect::<serde_json::Map<String, Value>>(),
                "processed_ok": q.processed_ok,
                "processed_failed": q.processed_failed,
                "queue_delay_ns": sum(&q.queue_delay_ns),
                "processing_ns": sum(&q.processing_ns),
                "consumers": q.consumers,
                "peak_growth_per_sec": q.peak_growth_per_sec,
                "peak_growth_at_ns": q.peak_growth_at_ns,
                "snapshots": q.snapshots,
                "windows": q.windows.iter().map(|w| json!({
                    "start_ns": w.start_ns,
                    "enqueued": w.enqueued,
                    "dequeued": w.dequeued,
                    "dropped": w.dropped,
                    "enqueue_per_sec": w.enqueue_per_sec,
                    "dequeue_per_sec": w.dequeue_per_sec,
                    "size_end": w.size_end,
                    "max_size": w.max_size,
                    "growth_per_sec": w.growth_per_sec,
                    "peak_growth_per_sec": w.peak_growth_per_sec,
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "locks": self.locks.iter().map(|l| json!({
                "name": l.name,
                "waits": l.waits,
                "wait_ns_total": l.wait_ns_total,
                "wait_ns_p99": l.wait_ns.p99,
                "hold_ns_max": l.hold_ns_max,
                "wait_ns_mean": l.wait_ns_mean,
                "wait_ns": sum(&l.wait_ns),
                "holds": l.holds,
                "hold_ns_total": l.hold_ns_total,
                "longest_holds": l.longest_holds.iter().map(|h| json!({
                    "thread": h.thread, "hold_ns": h.hold_ns, "at_ns": h.at_ns,
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "io": self.io.iter().map(|x| json!({
                "op": x.op,
                "count": x.count,
                "io_ns_p50": x.io_ns.p50,
                "io_ns_p99": x.io_ns.p99,
                "io_ns_max": x.io_ns.max,
                "bytes": x.bytes,
                "io_ns_total": x.io_ns_total,
                "io_ns": sum(&x.io_ns),
                "slowest": x.slowest.iter().map(|s| json!({
                    "thread": s.thread, "io_ns": s.io_ns, "bytes": s.bytes, "at_ns": s.at_ns,
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "heartbeats": self.heartbeats.iter().map(|h| json!({
                "thread": h.thread,
                "role": h.role,
                "beats": h.beats,
                "max_gap_ns": h.max_gap_ns,
                "max_gap_at_ns": h.max_gap_at_ns,
            })).collect::<Vec<_>>(),
            "triggers": self.triggers.iter().map(|t| json!({
                "timestamp_ns": t.timestamp_ns,
                "queue": t.queue,
                "queue_size": t.queue_size,
                "reason": t.reason,
                "verdicts": t.verdicts.iter().map(|v| json!({
                    "cause": v.cause.as_str(),
                    "score": v.score,
                    "lock": v.lock,
                    "thread": v.thread,
                    "evidence": v.evidence,
                    "lost_ns": v.lost_ns,
                })).collect::<Vec<_>>(),
                "growth_rate_per_sec": t.growth_rate_per_sec,
                "window_ns": t.window_ns,
                "consumers": t.consumers,
                "enqueue_rate_before": t.enqueue_rate_before,
                "enqueue_rate_during": t.enqueue_rate_during,
                "dequeue_rate_before": t.dequeue_rate_before,
                "dequeue_rate_during": t.dequeue_rate_during,
                "lost_ns": t.lost_ns,
                "dropped_in_window": t.dropped_in_window,
            })).collect::<Vec<_>>(),
            "top_causes": self.top_causes().iter().map(|c| json!({
                "cause": c.cause.map(|c| c.as_str()),
                "lock": c.lock,
                "thread": c.thread,
                "triggers": c.triggers,
            })).collect::<Vec<_>>(),
            "files": self.files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>(),
            "bytes": self.bytes,
            "events": self.events,
            "app_events": self.app_events,
            "duration_ns": self.duration_ns,
            "damaged": self.damaged,
            "errors": self.errors,
            "unsealed_files": self.unsealed_files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>(),
            "notes": self.notes,
            "options": {
                "window_ns": self.options.window_ns,
                "lookback_ns": self.options.lookback_ns,
                "lookahead_ns": self.options.lookahead_ns,
                "bucket_ns": self.options.bucket_ns,
                "floor": self.options.floor,
                "min_lost_share": self.options.min_lost_share,
                "slowdown_ratio": self.options.slowdown_ratio,
            },
        })
    }
}

impl fmt::Display for BacklogReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use crate::fmt_ns;
        let mut out = String::new();
        let o = &mut out;
        let _ = writeln!(o, "=== Summary");
        let _ = writeln!(
            o,
            "files: {}  bytes: {}  duration: {}  events: {} ({} application events)",
            self.files.len(),
            self.bytes,
            fmt_ns(self.duration_ns),
            self.events,
            self.app_events
        );
        let _ = writeln!(
            o,
            "rate window {}, lookback {}",
            fmt_ns(self.options.window_ns),
            fmt_ns(self.options.lookback_ns)
        );
        if !self.queues.is_empty() {
            let _ = writeln!(o, "\n=== Queues");
            for q in &self.queues {
                let drops = if q.dropped_by_cause.is_empty() {
                    String::new()
                } else {
                    let v: Vec<String> = q
                        .dropped_by_cause
                        .iter()
                        .map(|(c, n)| format!("{c} {n}"))
                        .collect();
                    format!(" ({})", v.join(", "))
                };
                let _ = writeln!(
                    o,
                    "\"{}\": enqueued {}, dequeued {}, dropped {}{drops}, processed {} ok / {} failed, max size {}, peak growth {} (at {})",
                    q.name, q.enqueued, q.dequeued, q.dropped, q.processed_ok, q.processed_failed,
                    q.max_size, fmt_rate(q.peak_growth_per_sec), fmt_at(q.peak_growth_at_ns)
                );
                let d = &q.queue_delay_ns;
                let p = &q.processing_ns;
                let _ = writeln!(
                    o,
                    "    queue delay  p50 {:>10}  p99 {:>10}  max {:>10}  ({} measured)",
                    fmt_ns(d.p50),
                    fmt_ns(d.p99),
                    fmt_ns(d.max),
                    d.count
                );
                let _ = writeln!(
                    o,
                    "    processing   p50 {:>10}  p99 {:>10}  max {:>10}  ({} items)",
                    fmt_ns(p.p50),
                    fmt_ns(p.p99),
                    fmt_ns(p.max),
                    p.count
                );
                let _ = writeln!(o, "    consumers: {}", list(&q.consumers));
            }
            for q in &self.queues {
                if q.windows.is_empty() {
                    continue;
                }
                let _ = writeln!(
                    o,
                    "\n=== Rates: \"{}\" per {} window",
                    q.name,
                    fmt_ns(self.options.window_ns)
                );
                let _ = writeln!(
                    o,
                    "{:>10} {:>10} {:>10} {:>8} {:>8} {:>8} {:>10} {:>12}",
                    "start", "enq/s", "deq/s", "drops", "size", "max", "growth/s", "peak grow/s"
                );
                // A long trace: the windows with the fastest growth (and
                // drops), in time order; JSON has every window.
                let shown: Vec<&RateWindow> = if q.windows.len() > TEXT_MAX_WINDOWS {
                    let mut idx: Vec<usize> = (0..q.windows.len()).collect();
                    idx.sort_by(|&a, &b| {
                        let (x, y) = (&q.windows[a], &q.windows[b]);
                        y.peak_growth_per_sec
                            .total_cmp(&x.peak_growth_per_sec)
                            .then(y.dropped.cmp(&x.dropped))
                            .then(a.cmp(&b))
                    });
                    idx.truncate(TEXT_MAX_WINDOWS);
                    idx.sort_unstable();
                    idx.iter().map(|&i| &q.windows[i]).collect()
                } else {
                    q.windows.iter().collect()
                };
                for w in &shown {
                    let _ = writeln!(
                        o,
                        "{:>10} {:>10.0} {:>10.0} {:>8} {:>8} {:>8} {:>+10.0} {:>+12.0}",
                        fmt_at(w.start_ns),
                        w.enqueue_per_sec,
                        w.dequeue_per_sec,
                        w.dropped,
                        w.size_end,
                        w.max_size,
                        w.growth_per_sec,
                        w.peak_growth_per_sec
                    );
                }
                if shown.len() < q.windows.len() {
                    let _ = writeln!(
                        o,
                        "({} windows with slower growth not shown; --json has all)",
                        q.windows.len() - shown.len()
                    );
                }
            }
        }
        if !self.locks.is_empty() {
            let _ = writeln!(o, "\n=== Locks (by total wait)");
            let _ = writeln!(
                o,
                "{:<20} {:>8} {:>11} {:>10} {:>10} {:>8} {:>10}  longest holds",
                "lock", "waits", "total wait", "mean", "p99", "holds", "max hold"
            );
            for l in &self.locks {
                let holds: Vec<String> = l
                    .longest_holds
                    .iter()
                    .take(3)
                    .map(|h| format!("{} {} at {}", h.thread, fmt_ns(h.hold_ns), fmt_at(h.at_ns)))
                    .collect();
                let _ = writeln!(
                    o,
                    "{:<20} {:>8} {:>11} {:>10} {:>10} {:>8} {:>10}  {}",
                    l.name,
                    l.waits,
                    fmt_ns(l.wait_ns_total),
                    fmt_ns(l.wait_ns_mean),
                    fmt_ns(l.wait_ns.p99),
                    l.holds,
                    fmt_ns(l.hold_ns_max),
                    holds.join("; ")
                );
            }
        }
        if !self.io.is_empty() {
            let _ = writeln!(o, "\n=== I/O (by total time)");
            let _ = writeln!(
                o,
                "{:<14} {:>8} {:>12} {:>10} {:>10} {:>10}  slowest",
                "op", "count", "bytes", "p50", "p99", "max"
            );
            for x in &self.io {
                let slow = x
                    .slowest
                    .first()
                    .map(|s| format!("{} at {} ({} bytes)", s.thread, fmt_at(s.at_ns), s.bytes))
                    .unwrap_or_default();
                let _ = writeln!(
                    o,
                    "{:<14} {:>8} {:>12} {:>10} {:>10} {:>10}  {}",
                    x.op,
                    x.count,
                    x.bytes,
                    fmt_ns(x.io_ns.p50),
                    fmt_ns(x.io_ns.p99),
                    fmt_ns(x.io_ns.max),
                    slow
                );
            }
        }
        if !self.heartbeats.is_empty() {
            let _ = writeln!(o, "\n=== Heartbeats (by longest gap)");
            for h in &self.heartbeats {
                let _ = writeln!(
                    o,
                    "{} as \"{}\": {} beats, longest gap {} ending at {}",
                    h.thread,
                    h.role,
                    h.beats,
                    fmt_ns(h.max_gap_ns),
                    fmt_at(h.max_gap_at_ns)
                );
            }
        }
        let summary = self.top_causes();
        if self.triggers.len() > 1 {
            let _ = writeln!(o, "\n=== Root causes (top verdict of each trigger)");
            for c in &summary {
                let mut who = String::new();
                if let Some(l) = &c.lock {
                    let _ = write!(who, " lock \"{l}\"");
                }
                if let Some(th) = &c.thread {
                    let _ = write!(who, " thread {th}");
                }
                let what = c.cause.map_or("no cause above the floor", |c| c.as_str());
                let _ = writeln!(
                    o,
                    "{:>6} of {}: {what}{who}",
                    c.triggers,
                    self.triggers.len()
                );
            }
        }
        let _ = writeln!(o, "\n=== Backlog triggers ({})", self.triggers.len());
        // Many triggers: the ones with the most lost time, in time order.
        let mut shown: Vec<usize> = (0..self.triggers.len()).collect();
        if shown.len() > TEXT_MAX_TRIGGERS {
            shown.sort_by(|&a, &b| {
                self.triggers[b]
                    .lost_ns
                    .cmp(&self.triggers[a].lost_ns)
                    .then(a.cmp(&b))
            });
            shown.truncate(TEXT_MAX_TRIGGERS);
            shown.sort_unstable();
            let _ = writeln!(
                o,
                "(the {TEXT_MAX_TRIGGERS} with the most lost time; --json has all)"
            );
        }
        for i in shown {
            let t = &self.triggers[i];
            let _ = writeln!(
                o,
                "[{}] at {}: \"{}\" size {} ({}, growth {}/s); judged {} .. {}: enqueue {} (before {}), dequeue {} (before {}){}, consumers lost {}",
                i + 1,
                fmt_at(t.timestamp_ns),
                t.queue,
                t.queue_size,
                t.reason,
                t.growth_rate_per_sec,
                fmt_at(t.window_ns[0]),
                fmt_at(t.window_ns[1]),
                fmt_rate(t.enqueue_rate_during),
                fmt_before(t.enqueue_rate_before),
                fmt_rate(t.dequeue_rate_during),
                fmt_before(t.dequeue_rate_before),
                if t.dropped_in_window > 0 {
                    format!(", {} dropped", t.dropped_in_window)
                } else {
                    String::new()
                },
                fmt_ns(t.lost_ns)
            );
            if t.verdicts.is_empty() {
                let _ = writeln!(o, "    no cause above the floor");
            }
            for (k, v) in t.verdicts.iter().enumerate() {
                let mut who = String::new();
                if let Some(l) = &v.lock {
                    let _ = write!(who, " lock \"{l}\"");
                }
                if let Some(th) = &v.thread {
                    let _ = write!(who, " thread {th}");
                }
                let _ = writeln!(
                    o,
                    "    {}. {} {:.2}{who}\n       {}",
                    k + 1,
                    v.cause,
                    v.score,
                    v.evidence
                );
            }
        }
        if !self.notes.is_empty() {
            let _ = writeln!(o, "\n=== Notes");
            for n in &self.notes {
                let _ = writeln!(o, "{n}");
            }
        }
        if !self.unsealed_files.is_empty() {
            for u in &self.unsealed_files {
                let _ = writeln!(
                    o,
                    "note: {}: no END frame (cut short or still being written)",
                    u.display()
                );
            }
        }
        if !self.errors.is_empty() {
            let _ = writeln!(o, "\n=== Errors");
            for e in &self.errors {
                let _ = writeln!(o, "{e}");
            }
        }
        f.write_str(&out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_slides_and_folds() {
        let mut r: Ring<u64> = Ring::new(4);
        assert!(r.slot(10).is_some());
        *r.slot(10).unwrap() += 1;
        *r.slot(12).unwrap() += 2;
        assert_eq!(r.fold(0, u64::MAX, 0, |a, x| a + x), 3);
        // Bucket 14 pushes 10 out (4 buckets kept: 11..=14).
        *r.slot(14).unwrap() += 4;
        assert!(r.slot(10).is_none());
        assert_eq!(r.fold(11, 14, 0, |a, x| a + x), 6);
        assert_eq!(r.fold(13, 14, 0, |a, x| a + x), 4);
        assert_eq!(r.fold(15, 20, 0, |a, x| a + x), 0);
        assert_eq!(r.fold(14, 13, 0, |a, x| a + x), 0);
        // A jump past the whole span starts over.
        *r.slot(1_000_000).unwrap() += 8;
        assert_eq!(r.fold(0, u64::MAX, 0, |a, x| a + x), 8);
        assert!(r.slot(u64::MAX).is_some());
    }

    #[test]
    fn spread_divides_by_overlap() {
        let mut r: Ring<u64> = Ring::new(100);
        // 30 over [5, 35) with buckets of 10: 5, 10, 10, 5.
        spread(&mut r, 5, 35, 30, 10, |b, v| *b += v);
        let v: Vec<u64> = (0..4).map(|b| r.fold(b, b, 0, |a, x| a + x)).collect();
        assert_eq!(v, [5, 10, 10, 5]);
        // Longer than the ring: only the last buckets, the remainder in the
        // last one, never more than the amount.
        let mut r: Ring<u64> = Ring::new(4);
        spread(&mut r, 0, 1_000, 1_000, 10, |b, v| *b += v);
        assert!(r.fold(0, u64::MAX, 0, |a, x| a + x) <= 1_000);
        let mut r: Ring<u64> = Ring::new(4);
        spread(&mut r, u64::MAX - 5, u64::MAX, 7, 10, |b, v| *b += v);
        assert_eq!(r.fold(0, u64::MAX, 0, |a, x| a + x), 7);
    }

    #[test]
    fn longest_holds_per_thread() {
        let mut top = Vec::new();
        for (th, ns) in [
            (1, 10),
            (2, 50),
            (1, 30),
            (3, 5),
            (4, 7),
            (5, 8),
            (6, 9),
            (2, 20),
        ] {
            top_hold(&mut top, th, ns, ns * 100);
        }
        let got: Vec<(u32, u64)> = top.iter().map(|x| (x.0, x.1)).collect();
        assert_eq!(got, [(2, 50), (1, 30), (6, 9), (5, 8), (4, 7)]);
    }
}
