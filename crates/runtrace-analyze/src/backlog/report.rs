//! `runtrace backlog`'s result types (text and JSON forms in
//! [`super::render`]).

use super::options::BacklogOptions;
use runtrace_model::hist::Summary;
use std::fmt;
use std::path::PathBuf;

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
    /// The queue (shared with the model, not copied per trigger: a queue
    /// name can be as long as the file; renderers show it through
    /// [`runtrace_model::shown_name`]).
    pub queue: std::sync::Arc<str>,
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
