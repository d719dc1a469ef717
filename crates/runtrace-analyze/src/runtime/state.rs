//! The runtime engine's state: per recording (live tasks, idle-while-
//! queued tracking), per thread (its workers), per worker, per spawn
//! location and per named queue. The [`super::engine::Engine`] moves it.

use runtrace_model::fxhash::FxHashMap;
use runtrace_model::hist::Histogram;
use runtrace_model::model::TickScale;

/// Runtime state of one recording (process): its live tasks at the end,
/// and idle-while-queued tracking.
#[derive(Clone)]
pub(crate) struct ProcState {
    /// Tick-to-ns conversion of the recording (a copy of the model's).
    pub(super) scale: TickScale,
    /// Tasks alive when the recording's events ended.
    pub(super) live_tasks: u64,
    /// The global queue depth of the last QueueSample.
    pub(super) last_sample_q: u32,
    /// The global queue as queued work for idle-while-queued: the depth,
    /// once two consecutive samples both saw a non-empty queue (a sample
    /// is a snapshot; one non-empty sample is a task in transit).
    pub(super) global_q: u32,
    pub idle: Idle,
}

impl ProcState {
    pub fn live_tasks(&self) -> u64 {
        self.live_tasks
    }
}

/// Idle-while-queued tracking for one process.
#[derive(Clone, Default)]
pub(crate) struct Idle {
    pub(super) parked: u32,
    pub(super) parked_tokio: u32,
    pub(super) over: u32,
    pub(super) last_parked: u32,
    pub(super) active: bool,
    pub(super) start: u64,
    pub(super) cur_parked: u32,
    pub(super) cur_over: u32,
    pub(super) cur_max_q: u32,
    pub(super) cur_max_global: u32,
    pub(super) cur_locs: Vec<u64>,
    pub(super) touched: Vec<u32>,
    pub windows: u64,
    pub total_ns: u64,
    pub longest: Option<IdleWindow>,
    pub locs: Vec<u64>,
}

/// One stretch during which a worker was parked while work was queued.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IdleWindow {
    pub start: u64,
    pub end: u64,
    pub ns: u64,
    /// Worker index (engine's) that was parked.
    pub parked: u32,
    /// Worker index with a deep local queue (`u32::MAX`: the global queue).
    pub queued: u32,
    pub max_local_q: u32,
    pub max_global_q: u32,
}

/// Runtime state of a thread: its workers.
#[derive(Clone)]
pub(crate) struct ThreadState {
    /// Its process (a copy of the model's).
    pub proc: u32,
    /// The first worker it ran as: (worker index from the trace,
    /// engine's worker index). Inline: looked up at every poll start and
    /// end, and a thread is one worker but for one that changed runtimes.
    pub(super) first: Option<(u32, u32)>,
    /// The others, the same way.
    pub(super) workers: Vec<(u32, u32)>,
}

#[derive(Clone, Copy, Default)]
pub(super) struct RingEntry {
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) loc: u32,
    pub(super) local_q: u32,
}

/// A delayed poll: the window from its wake to its start.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Window {
    pub delay_ns: u64,
    pub wake: u64,
    pub poll: u64,
    pub worker: u32,
    pub task: u64,
    /// Location index of the delayed task.
    pub victim: u32,
    pub max_local_q: u32,
}

/// Local queue buildup on one worker.
#[derive(Clone, Default)]
pub(crate) struct Buildup {
    pub count: u64,
    pub max_local_q: u32,
    pub worst: Option<Window>,
    pub victims: Vec<u64>,
    /// Worst delay ns by victim location index.
    pub victims_worst: Vec<u64>,
    pub blockers: Vec<u64>,
    pub(super) upto: u64,
}

/// A worker: key (process, thread, worker index).
#[derive(Clone)]
pub(crate) struct Worker {
    pub proc: u32,
    pub thread: u32,
    /// The worker index from the trace (`NO_WORKER`: polls outside workers).
    pub worker: u32,
    pub runtime: Option<u32>,
    pub saw_executor: bool,
    pub saw_tokio: bool,
    pub polls: u64,
    pub busy_ns: u64,
    pub parked_ns: u64,
    pub parks: u64,
    pub max_local_q: u32,
    /// Last known local queue depth.
    pub(super) local_q: u32,
    pub sched_wait_ns: u64,
    /// The thread's CPU time over the same reads as `sched_wait_ns` (from
    /// the first unpark's read to the last), in ms.
    pub run_ms: u64,
    /// The CPU time (ms) of the first unpark's read.
    pub(super) first_cpu_ms: Option<u32>,
    pub(super) parked: bool,
    pub(super) park_start: u64,
    pub(super) over: bool,
    pub(super) last_sched_wait: Option<u64>,
    pub(super) scale: TickScale,
    pub(super) ring: Vec<RingEntry>,
    pub(super) ring_head: usize,
    /// (polls, poll ns) by location index.
    pub loc_polls: Vec<(u64, u64)>,
    /// Per victim location: delayed-window time already attributed.
    pub(super) upto_victim: Vec<u64>,
    // Boxed: rarely used, and a trace can have hundreds of thousands of
    // workers (one per thread), so the per-worker array stays small.
    pub buildup: Box<Buildup>,
    /// Long polls (location, ns) since the last unpark, judged at the
    /// next unpark: preempted when the scheduler wait grew by at least
    /// half their time (bounded: [`MAX_PENDING_LONG`]).
    pub(super) long_since_unpark: Vec<(u32, u64)>,
    /// Ticks of the last unpark.
    pub(super) last_unpark: u64,
}

/// Long polls a worker keeps between two unparks for the preemption check.
pub(super) const MAX_PENDING_LONG: usize = 64;

impl Worker {
    pub fn is_executor(&self) -> bool {
        self.saw_executor && !self.saw_tokio
    }
}

/// Delayed polls of one location (victims).
#[derive(Clone, Default)]
pub(crate) struct Delayed {
    pub count: u64,
    pub worst: Option<Window>,
    /// Poll ns by location index that ran on the delayed task's worker
    /// during its delayed windows.
    pub blockers: Vec<u64>,
    /// By culprit location index (the location that occupied the worker
    /// longest during a delayed window): (delayed polls, worst delay ns).
    pub by_culprit: Vec<(u64, u64)>,
    /// Delayed polls during which the worker ran nothing we saw (the task
    /// waited in another worker's queue, or the worker was parked).
    pub unexplained: u64,
}

/// Tasks remembered per location for the spread of its long polls.
pub(super) const MAX_BAD_TASKS: usize = 4096;

/// The poll that took longest at a location.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PollRef {
    pub ns: u64,
    pub start: u64,
    pub worker: u32,
    pub task: u64,
}

/// Statistics of a spawn location ([`Model::locs`] has its text).
#[derive(Clone)]
pub(crate) struct LocStats {
    pub tasks: u64,
    pub poll: Histogram,
    pub wake: Histogram,
    pub long_polls: u64,
    pub critical_polls: u64,
    pub worst_poll: Option<PollRef>,
    pub delayed: Delayed,
    /// Polls with no wake (nor spawn) recorded before them: the task's
    /// wakes are not seen, so its delays cannot be measured.
    pub uncovered_polls: u64,
    /// Long polls during which the worker mostly waited for a CPU.
    pub preempted_polls: u64,
    /// Per task: (long polls, their ns), at most [`MAX_BAD_TASKS`] tasks.
    pub bad_tasks: FxHashMap<u64, (u64, u64)>,
    /// Long polls of tasks not kept in `bad_tasks` (the bound was hit).
    pub bad_tasks_overflow: u64,
}

impl LocStats {
    pub fn new() -> LocStats {
        LocStats {
            tasks: 0,
            poll: Histogram::new(),
            wake: Histogram::new(),
            long_polls: 0,
            critical_polls: 0,
            worst_poll: None,
            delayed: Delayed::default(),
            uncovered_polls: 0,
            preempted_polls: 0,
            bad_tasks: FxHashMap::default(),
            bad_tasks_overflow: 0,
        }
    }
}

/// Statistics of a named queue (executor queues).
#[derive(Default, Clone)]
pub(crate) struct QueueStats {
    pub samples: u64,
    pub sum: u64,
    pub max: u64,
}

#[inline(always)]
pub(super) fn bump(v: &mut Vec<u64>, i: u32, by: u64) {
    let i = i as usize;
    if i >= v.len() {
        v.resize(i + 1, 0);
    }
    v[i] += by;
}
