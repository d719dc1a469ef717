//! The runtime analysis's result types (`runtrace analyze`): statistics
//! and findings; [`super::render`] has their text and JSON forms (the JSON
//! keys are documented in docs/analysis.md).

use super::thresholds::Thresholds;
use runtrace_model::hist::Summary;
use serde_json::Value;
use std::fmt;
use std::path::PathBuf;

/// How serious a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Worth a look.
    Warning,
    /// Likely hurting latency or throughput now.
    Critical,
}

impl Severity {
    /// `warning` or `critical`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }
}

/// The kinds of finding (docs/analysis.md says what triggers each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FindingKind {
    /// A poll longer than `long_poll_ns`.
    LongPoll,
    /// Wake -> poll p99 above `wake_delay_ns`.
    WakeDelay,
    /// A deep local queue while polls waited long.
    LocalQueueBuildup,
    /// Busy times of one runtime's workers differ too much.
    WorkerImbalance,
    /// A worker parked while another had queued work.
    IdleWhileQueued,
    /// A location whose mean poll is long, with no evidence whether the
    /// polls burned CPU or blocked (the trace has no per-poll CPU time).
    SlowPoll,
    /// Workers runnable but not running: the host's CPUs were busy with
    /// others (other processes, a CPU quota).
    HostStarvation,
    /// A `runtrace::sync` named lock held while others waited for it.
    LockConvoy,
    /// A tokio lock (or semaphore permit) held across an await while
    /// other tasks waited for it.
    LockHeldAcrossAwait,
    /// Tasks waited long on a tokio resource (a lock, a semaphore, a
    /// channel's capacity, a oneshot).
    ResourceWait,
    /// Tasks of one location pile up, pending and never woken.
    TaskLeak,
    /// Tasks pending with no wake far longer than their siblings live (a
    /// lost wake-up).
    StuckTask,
    /// Tasks that mostly wake themselves (a busy-yield loop).
    SelfWake,
    /// A location's live heap bytes grow steadily (the memory profile's
    /// live set: [`crate::memory::growth`]).
    MemoryGrowth,
}

impl FindingKind {
    /// The `kind` string in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            FindingKind::LongPoll => "long_poll",
            FindingKind::WakeDelay => "wake_delay",
            FindingKind::LocalQueueBuildup => "local_queue_buildup",
            FindingKind::WorkerImbalance => "worker_imbalance",
            FindingKind::IdleWhileQueued => "idle_while_queued",
            FindingKind::SlowPoll => "slow_poll",
            FindingKind::HostStarvation => "host_starvation",
            FindingKind::LockConvoy => "lock_convoy",
            FindingKind::LockHeldAcrossAwait => "lock_held_across_await",
            FindingKind::ResourceWait => "resource_wait",
            FindingKind::TaskLeak => "task_leak",
            FindingKind::SelfWake => "self_wake",
            FindingKind::StuckTask => "stuck_task",
            FindingKind::MemoryGrowth => "memory_growth",
        }
    }
}

/// Names a worker: keyed by process, OS thread and worker index, since
/// executor and tokio workers may share small indices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerId {
    /// Process id.
    pub pid: u64,
    /// OS thread id.
    pub tid: u64,
    /// Worker index (None: polls on a thread that is not a worker).
    pub worker: Option<u32>,
    /// `tokio`, `executor` or `unknown` (never polled).
    pub kind: &'static str,
}

impl fmt::Display for WorkerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.worker {
            Some(w) => write!(f, "{} worker {w} (tid {})", self.kind, self.tid),
            None => write!(f, "non-worker thread {}", self.tid),
        }
    }
}

/// One finding.
#[derive(Debug, Clone)]
pub struct Finding {
    /// What kind.
    pub kind: FindingKind,
    /// How bad.
    pub severity: Severity,
    /// The spawn location responsible: the cause (`file:line:col`; None
    /// when the cause is outside the process or unknown).
    pub spawn_loc: Option<String>,
    /// Its id in the trace (0: unknown location).
    pub spawn_loc_id: Option<u64>,
    /// Every spawn location the finding names, most responsible first.
    pub spawn_locs: Vec<String>,
    /// The worker concerned, if one.
    pub worker: Option<WorkerId>,
    /// The time window of the evidence, ns since the recording started.
    pub window_ns: Option<(i64, i64)>,
    /// A sentence for a person, with the numbers.
    pub detail: String,
    /// The numbers, as JSON.
    pub evidence: Value,
    /// The locations that suffered from it, most delayed polls first.
    pub victims: Vec<Victim>,
    /// Symptoms this cause explains (same blamed location, same windows
    /// and workers), which are then not findings of their own.
    pub effects: Vec<Finding>,
    /// What the blamed location's polls ran, from the trace's CPU samples
    /// (None: the trace has no samples, or the finding blames no
    /// location). Filled by [`Report::add_functions`].
    pub functions: Option<CpuFunctions>,
    /// The spans the blamed location's polls were serving, most poll time
    /// first (`GET /item (p99 120 ms)`; empty without spans).
    pub spans: Vec<String>,
}

/// The CPU profile of the polls of a finding's blamed location: whether
/// they burned CPU or blocked, and in which functions.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuFunctions {
    /// On-CPU samples taken in its polls.
    pub on_cpu_samples: u64,
    /// Those samples times the sampling period: the CPU time they stand
    /// for.
    pub on_cpu_ns: u64,
    /// Time its polls' threads were blocked inside them: switched out in
    /// a system call (the stack's leaf in a shared library: libc's
    /// wrappers).
    pub off_cpu_ns: u64,
    /// Those blocking switch-outs.
    pub off_cpu_switches: u64,
    /// Time its polls' threads were preempted inside them (switched out
    /// anywhere else: runnable, waiting for a CPU); not counted as
    /// blocked.
    pub preempted_ns: u64,
    /// Those preemptions.
    pub preempted_switches: u64,
    /// `off_cpu_ns` exceeds `on_cpu_ns`: the polls mostly blocked.
    pub mostly_off_cpu: bool,
    /// The top functions: off-CPU first when mostly off-CPU.
    pub functions: Vec<FunctionShare>,
    /// The polls these samples come from: those that lasted over this
    /// (the finding's long or slow polls), or all the location's polls (0).
    pub polls_over_ns: u64,
    /// Of those samples, the ones whose stack did not reach its thread's
    /// start (a frame-pointer walk cut short): still counted by the poll
    /// they landed in, but their functions may be wrong.
    pub truncated_stacks: u64,
    /// The location's whole profile (all its polls), when the figures
    /// above cover only some of them.
    pub location: Option<LocationCpu>,
}

/// The CPU profile of all the polls of a location, next to a finding's
/// own ([`CpuFunctions::location`]).
#[derive(Debug, Clone, PartialEq)]
pub struct LocationCpu {
    /// On-CPU samples in all its polls.
    pub on_cpu_samples: u64,
    /// Their CPU time (samples times the period).
    pub on_cpu_ns: u64,
    /// Blocked time in all its polls.
    pub off_cpu_ns: u64,
    /// `off_cpu_ns` exceeds `on_cpu_ns`.
    pub mostly_off_cpu: bool,
    /// Its top function (off-CPU when mostly off-CPU).
    pub top: Option<FunctionShare>,
}

/// A function of the application a location's polls ran in (on-CPU) or
/// blocked in (off-CPU): each sample's first frame from the leaf outside
/// shared libraries and Rust's standard library
/// ([`crate::functions::own_frame`]).
#[derive(Debug, Clone, PartialEq)]
pub struct FunctionShare {
    /// Demangled name, or `[unknown] ...`.
    pub function: String,
    /// Source file, if the debug info says.
    pub file: Option<String>,
    /// Line, if the debug info says.
    pub line: Option<u32>,
    /// On-CPU samples in it, or switch-outs in it (off-CPU).
    pub samples: u64,
    /// Its share of the on-CPU samples, or of the off-CPU time.
    pub share: f64,
    /// An off-CPU entry (the polls blocked there).
    pub off_cpu: bool,
    /// Off-CPU time in it (0 for on-CPU entries).
    pub off_ns: u64,
    /// What it was calling, when that was a library or std function
    /// (`std::thread::sleep`, `memcpy`): the most frequent.
    pub via: Option<String>,
}

/// A location that suffered from a finding's cause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Victim {
    /// `file:line:col` of the delayed tasks' spawn.
    pub location: String,
    /// Its polls that started more than `wake_delay_ns` after their wake,
    /// with the cause occupying the worker meanwhile.
    pub delayed_polls: u64,
    /// The longest of those waits.
    pub worst_delay_ns: u64,
}

/// One worker's statistics.
#[derive(Debug, Clone)]
pub struct WorkerReport {
    /// Which worker.
    pub id: WorkerId,
    /// Thread name, if the trace has one.
    pub thread: Option<String>,
    /// Runtime id (from WorkerStart / WorkerStop).
    pub runtime: Option<u32>,
    /// The runtime's name (from RuntimeName), when it has one.
    pub runtime_name: Option<String>,
    /// Completed polls.
    pub polls: u64,
    /// Sum of poll durations.
    pub busy_ns: u64,
    /// Time parked (WorkerPark -> WorkerUnpark; a park open at the end
    /// counts to the end of the trace).
    pub parked_ns: u64,
    /// Parks.
    pub parks: u64,
    /// busy / (busy + parked), or busy / trace duration without parks.
    pub busy_ratio: f64,
    /// busy / polls.
    pub mean_poll_ns: u64,
    /// Deepest local queue seen at a poll start or park.
    pub max_local_q: u32,
    /// Scheduler wait: growth of `sched_wait_ns` between the worker's
    /// first and last unpark.
    pub sched_wait_ns: u64,
}

/// One spawn location's statistics.
#[derive(Debug, Clone)]
pub struct LocationReport {
    /// Location id in the trace (0: unknown).
    pub spawn_loc_id: u64,
    /// `file:line:col`, or `<unknown>`.
    pub location: String,
    /// Tasks spawned there (tasks first seen without a spawn count under
    /// `<unknown>`).
    pub tasks: u64,
    /// Completed polls.
    pub polls: u64,
    /// Sum of poll durations.
    pub poll_ns_total: u64,
    /// Mean poll duration.
    pub poll_ns_mean: u64,
    /// Poll duration percentiles.
    pub poll_ns: Summary,
    /// Wake -> poll delay percentiles.
    pub wake_to_poll_ns: Summary,
    /// Polls over the long-poll threshold.
    pub long_polls: u64,
    /// Polls with no wake (nor spawn) recorded before them: their delay
    /// cannot be measured (tasks whose wakes are not traced).
    pub uncovered_polls: u64,
}

/// Global (injection) queue depth from QueueSample events.
#[derive(Debug, Clone, Default)]
pub struct QueueReport {
    /// Queue name (empty: the runtime's global queue).
    pub name: String,
    /// Samples.
    pub samples: u64,
    /// Deepest.
    pub max: u64,
    /// Mean over samples.
    pub mean: f64,
}

/// A recording (process) in the input.
#[derive(Debug, Clone)]
pub struct ProcessReport {
    /// Process id.
    pub pid: u64,
    /// Process name.
    pub name: String,
    /// Recording id.
    pub recording_id: u64,
    /// Events.
    pub events: u64,
    /// First to last event.
    pub duration_ns: u64,
    /// Tasks still alive at the end.
    pub live_tasks: u64,
}

/// Everything `runtrace analyze` reports.
#[derive(Debug, Clone)]
pub struct Report {
    /// Files read, in order.
    pub files: Vec<PathBuf>,
    /// Bytes read.
    pub bytes: u64,
    /// Events decoded (every type).
    pub events: u64,
    /// First to last event (wall clock, across recordings).
    pub duration_ns: u64,
    /// Events the recorder reported lost (DROPPED frames).
    pub dropped_events: u64,
    /// Of `dropped_events`, profiler samples the writer could not keep
    /// (no task, poll or wake event among them, so they leave the
    /// lifecycle whole and no finding is caveated for them).
    pub dropped_profiler_samples: u64,
    /// Damage found (file and byte offset in each).
    pub errors: Vec<String>,
    /// True when some file was damaged or cut short (exit code 1).
    pub damaged: bool,
    /// Intact files without an END frame.
    pub unsealed_files: Vec<PathBuf>,
    /// Recordings.
    pub processes: Vec<ProcessReport>,
    /// TaskSpawn events.
    pub tasks_spawned: u64,
    /// TaskTerminate events.
    pub tasks_terminated: u64,
    /// Of those, tasks with no spawn and no poll in the trace: tokio's
    /// blocking tasks (its worker launches, `spawn_blocking`), for which
    /// tokio calls no spawn or poll hook, or tasks spawned before the
    /// recording began and not polled in it. They are why a trace can
    /// count more terminated tasks than spawned ones.
    pub tasks_terminated_unseen: u64,
    /// Workers, by process, kind and index.
    pub workers: Vec<WorkerReport>,
    /// Workers left out of `workers` (at most 10,000 are listed, the
    /// busiest: `runtime::build::MAX_REPORTED_WORKERS`).
    pub workers_omitted: u64,
    /// Poll durations.
    pub poll_ns: Summary,
    /// Mean poll duration.
    pub poll_ns_mean: u64,
    /// Wake -> poll delays (spawn -> first poll included).
    pub wake_to_poll_ns: Summary,
    /// Spawn locations by total poll time, descending.
    pub spawn_locations: Vec<LocationReport>,
    /// Global queue depth.
    pub global_queue: QueueReport,
    /// Named (executor) queues.
    pub queues: Vec<QueueReport>,
    /// Findings, critical first.
    pub findings: Vec<Finding>,
    /// The application's spans ([`crate::spans`]; empty without them).
    pub spans: crate::spans::SpanReport,
    /// Things about the input worth knowing (unmatched events, ...).
    pub notes: Vec<String>,
    /// The thresholds used.
    pub thresholds: Thresholds,
    /// Where tasks' lives went, per spawn location (`task_life`: running,
    /// waiting for a worker, waiting on resources, other), and what was
    /// read of tokio's resources (`resources`): docs/analysis.md.
    pub waiting: Value,
    /// Every tokio resource site waited on, most total waiting first
    /// ([`super::ResourceSite`]; empty without resource events). Not in
    /// the JSON (`get_resource_waits` and the HTML report show it).
    pub resource_waits: Vec<super::ResourceSite>,
    /// Heap allocations per spawn location, from the memory profile
    /// (empty without one; filled by `add_functions`).
    pub memory: Vec<crate::memory::LocationMemory>,
    /// Heap allocations per span label (empty without spans or without a
    /// memory profile; filled by `add_functions`).
    pub memory_spans: Vec<crate::memory::SpanMemory>,
    /// Flight-recorder snapshot triggers and the application's requests,
    /// in time order per recording (empty for recordings that never asked
    /// for a snapshot).
    pub snapshots: Vec<SnapshotTrigger>,
}

/// When and why a flight-recorder snapshot fired (a `snapshot_trigger`
/// event, docs/flight-recorder.md), or the application asked for one (a
/// `snapshot_request`, `request`).
///
/// ```
/// use runtrace_analyze::runtime::{analyze_bytes, Options};
/// use runtrace_model::synth::TraceBuilder;
/// let mut b = TraceBuilder::new();
/// b.poll_start(7, 0, 1_000, 1, 0, 0);
/// b.poll_end(7, 0, 2_000, 1, true);
/// b.snapshot_trigger(9, 1_500, "slow-poll");
/// let r = analyze_bytes(&b.finish(), Options::default());
/// assert_eq!(r.snapshots.len(), 1);
/// assert_eq!(r.snapshots[0].reason, "slow-poll");
/// assert!(!r.snapshots[0].request);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotTrigger {
    /// The recording's process id.
    pub pid: u64,
    /// When it fired, ns since the recording started.
    pub at_ns: i64,
    /// When it fired, wall clock (ns since the Unix epoch).
    pub wall_ns: i128,
    /// Why: the reason given to `snapshot()`, `signal`, or the built-in
    /// rule's name (`slow-poll`); a request's: the reason given to
    /// `snapshot!`.
    pub reason: String,
    /// The application's request (`runtrace::snapshot!`), not a trigger.
    pub request: bool,
    /// A request that a trigger of its reason followed (a rule lists it);
    /// false for triggers.
    pub answered: bool,
}

/// What `analyze` and `summary` say when most polls of a trace had no wake
/// recorded before them ([`Report::wakes_missing`]): tokio reports the
/// wakes of plain `tokio::spawn` tasks only to a tracing subscriber, and
/// runtrace sets none by itself (docs/recorder.md).
pub const WAKES_HINT: &str = "most polls had no wake recorded before them, so wake-to-poll delays are not measured: plain tokio::spawn tasks report their wakes through runtrace's tracing layer. Add it to the application's subscriber: tracing_subscriber::registry().with(runtrace::tokio::layer()) (a program with no subscriber: runtrace::tokio::wakes::install_global())";

/// Whether `uncovered` of `polls` (polls with no wake nor spawn before
/// them) say the trace lacks wakes: at least 10, and most polls.
pub(crate) fn wakes_missing(uncovered: u64, polls: u64) -> bool {
    uncovered >= 10 && uncovered * 2 > polls
}

impl Report {
    /// Whether most polls had no wake recorded before them (the
    /// application's tracing subscriber lacks runtrace's layer): then
    /// [`WAKES_HINT`] applies.
    ///
    /// ```
    /// # fn f(r: &runtrace_analyze::Report) {
    /// if r.wakes_missing() {
    ///     println!("{}", runtrace_analyze::runtime::WAKES_HINT);
    /// }
    /// # }
    /// ```
    pub fn wakes_missing(&self) -> bool {
        let (u, p) = self
            .spawn_locations
            .iter()
            .fold((0, 0), |(u, p), l| (u + l.uncovered_polls, p + l.polls));
        wakes_missing(u, p)
    }
}

/// "once", "twice", "N times".
pub(crate) fn times(n: u64) -> String {
    match n {
        1 => "once".into(),
        2 => "twice".into(),
        n => format!("{n} times"),
    }
}

/// A point in the trace, as seconds since the recording started.
pub(crate) fn fmt_at(ns: i64) -> String {
    format!("{:.6} s", ns as f64 / 1e9)
}
