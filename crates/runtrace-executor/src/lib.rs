//! runtrace's instrumented executor: one per thread, hosted on tokio, with
//! weighted queues chosen by EEVDF and a `RunnableFifo` or `Las` scheduler
//! inside each queue (see [`sched`](crate::Policy) for the rules).
//!
//! ```
//! use runtrace_executor::{Executor, QueueConfig};
//! let ex = Executor::builder()
//!     .queue("latency", QueueConfig::fifo().share(8))
//!     .queue("batch", QueueConfig::las().share(1))
//!     .build()?;
//! let out = ex.block_on(async {
//!     let a = ex.spawn(async { 1 });
//!     let b = ex.spawn_on("batch", async { 2 })?;
//!     Ok::<_, runtrace_executor::SpawnError>(a.await.unwrap() + b.await.unwrap())
//! })?;
//! assert_eq!(out, 3);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Tasks run inside a tokio current-thread runtime (or any tokio context,
//! with [`Executor::run_until`]), so they use tokio's I/O, timers and
//! channels; they may be `!Send`. Every spawn, poll start and end (with the
//! queue and its depth), wake (with the waking task), terminate, park and
//! unpark of the executor, and switch of queue fires a runtrace probe, so
//! the recorder, perf, bpftrace and LTTng all see it. The clock is read
//! once per poll transition (the end of one poll is the start of the next)
//! and only when the scheduler or a listening backend needs it.
//!
//! `tokio::task::yield_now` defers its wake to the end of the executor's
//! turn (tokio batches such wakes), so a task yielding that way runs once
//! per turn whatever its queue's share; shares apply fully to tasks that
//! wake through ordinary wakers (I/O, timers, channels, `wake_by_ref`).
//!
//! # Ownership rules (see `Shared::owner`)
//! 1. Tasks, their run queues and the EEVDF state belong to the thread that
//!    built the executor (the owner); `Executor` is `!Send`.
//! 2. A wake on the owner thread pushes the task onto an owner-only list
//!    without a lock or an atomic read-modify-write; a wake on any other
//!    thread goes through the injection queue (a mutex) and wakes the tokio
//!    task hosting the executor.
//! 3. The hosting tokio task is woken at most once per idle period (the
//!    `notified` flag), so a burst of wakes costs one wake-up.

mod inject;
mod sched;
mod sync;

pub use sched::{Policy, LAS_AGING};

use async_task::Runnable;
use inject::Inject;
use runtrace_core::clock::TraceClock;
use runtrace_core::{Istr, Loc};
use runtrace_probes::builtin as probes;
use sched::Sched;
use std::any::Any;
use std::cell::{Cell, RefCell, UnsafeCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

/// The largest wake buffer kept for reuse (`OwnerOnly::spare`).
const SPARE_MAX: usize = 1024;

/// Executor task ids start high so they never collide with tokio's (which
/// count from 1) in a trace holding both.
static NEXT_TASK_ID: AtomicU64 = AtomicU64::new(1 << 48);
static NEXT_EXECUTOR: AtomicU32 = AtomicU32::new(0);
static NEXT_THREAD_NO: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// A number for this thread (cheaper to compare than `ThreadId`).
    static THREAD_NO: Cell<u64> = const { Cell::new(0) };
    /// The task being polled on this thread (0: none), for wake attribution
    /// and `parent_task_id`.
    static CURRENT_TASK: Cell<u64> = const { Cell::new(0) };
    /// Set by the task wrapper when a poll finished the task.
    static TASK_DONE: Cell<bool> = const { Cell::new(false) };
    /// What the run loop knows about the poll it is starting, for the
    /// PollStart that `TaskFuture::poll` fires.
    static POLL_CTX: Cell<Option<PollCtx>> = const { Cell::new(None) };
    /// For `TaskFuture::poll`: the poll's start time and whether the task
    /// is in a LAS queue (None: nothing needs the poll's duration).
    static POLL_TIMING: Cell<Option<(u64, bool)>> = const { Cell::new(None) };
    /// The end time `TaskFuture::poll` read, for the run loop.
    static POLL_END: Cell<Option<u64>> = const { Cell::new(None) };
    /// Set by `TaskFuture::poll`: the task was really polled.
    static POLLED: Cell<bool> = const { Cell::new(false) };
    /// The task `JoinHandle::abort` is cancelling (0: none).
    static ABORTING: Cell<u64> = const { Cell::new(0) };
}

#[derive(Clone, Copy)]
struct PollCtx {
    t0: u64,
    worker: u32,
    queue: Istr,
    depth: u32,
}

fn thread_no() -> u64 {
    THREAD_NO.with(|t| {
        if t.get() == 0 {
            t.set(NEXT_THREAD_NO.fetch_add(1, Ordering::Relaxed));
        }
        t.get()
    })
}

/// A queue's policy and share (weight).
///
/// ```
/// use runtrace_executor::QueueConfig;
/// let q = QueueConfig::las().share(4);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct QueueConfig {
    policy: Policy,
    share: u32,
}

impl QueueConfig {
    /// `RunnableFifo`, share 1.
    pub fn fifo() -> QueueConfig {
        QueueConfig {
            policy: Policy::RunnableFifo,
            share: 1,
        }
    }
    /// `Las`, share 1.
    pub fn las() -> QueueConfig {
        QueueConfig {
            policy: Policy::Las,
            share: 1,
        }
    }
    /// The queue's share of the executor's time relative to the others.
    pub fn share(mut self, share: u32) -> QueueConfig {
        self.share = share;
        self
    }
}

/// Why an executor could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuildError {
    /// No queue was configured.
    NoQueue,
    /// Two queues have this name.
    DuplicateQueue(String),
    /// This queue has share 0.
    ZeroShare(String),
    /// A queue name is empty.
    EmptyName,
    /// A setting is out of range (names it).
    Invalid(String),
}

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BuildError::NoQueue => write!(
                f,
                "executor has no queue: add one with .queue(name, config)"
            ),
            BuildError::DuplicateQueue(n) => write!(f, "queue {n:?} is defined twice"),
            BuildError::ZeroShare(n) => {
                write!(f, "queue {n:?} has share 0 (shares must be at least 1)")
            }
            BuildError::EmptyName => write!(f, "a queue name is empty"),
            BuildError::Invalid(m) => write!(f, "invalid executor setting: {m}"),
        }
    }
}
impl std::error::Error for BuildError {}

/// Why a task could not be spawned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpawnError {
    /// No queue has this name.
    UnknownQueue(String),
    /// The executor was shut down.
    ShutDown,
}

impl std::fmt::Display for SpawnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpawnError::UnknownQueue(n) => write!(f, "no queue named {n:?} on this executor"),
            SpawnError::ShutDown => write!(f, "the executor was shut down"),
        }
    }
}
impl std::error::Error for SpawnError {}

/// Why a task did not produce its output.
pub enum JoinError {
    /// It was aborted (or the executor was shut down) first.
    Cancelled,
    /// It panicked; the payload is kept.
    Panic(Box<dyn Any + Send>),
}

impl JoinError {
    /// True for [`JoinError::Cancelled`].
    pub fn is_cancelled(&self) -> bool {
        matches!(self, JoinError::Cancelled)
    }
    /// True for [`JoinError::Panic`].
    pub fn is_panic(&self) -> bool {
        matches!(self, JoinError::Panic(_))
    }
    /// The panic message, when the payload is a string.
    pub fn panic_message(&self) -> Option<&str> {
        match self {
            JoinError::Panic(p) => p
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| p.downcast_ref::<String>().map(|s| s.as_str())),
            JoinError::Cancelled => None,
        }
    }
}

impl std::fmt::Debug for JoinError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JoinError::Cancelled => write!(f, "JoinError::Cancelled"),
            JoinError::Panic(_) => write!(
                f,
                "JoinError::Panic({:?})",
                self.panic_message().unwrap_or("..")
            ),
        }
    }
}

impl std::fmt::Display for JoinError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JoinError::Cancelled => write!(f, "task was cancelled"),
            JoinError::Panic(_) => write!(
                f,
                "task panicked: {}",
                self.panic_message().unwrap_or("(non-string payload)")
            ),
        }
    }
}
impl std::error::Error for JoinError {}

/// Per-task data (async-task metadata).
pub(crate) struct Meta {
    id: u64,
    queue: usize,
    /// Attained service (poll ticks), for LAS.
    service: AtomicU64,
    /// The future may be `!Send` (spawned with `Executor::spawn*`): it must
    /// only be dropped on the owner thread.
    local: bool,
}

impl Meta {
    pub(crate) fn service(&self) -> u64 {
        self.service.load(Ordering::Relaxed)
    }
}

/// State only the owner thread touches (ownership rule 1).
#[derive(Default)]
struct OwnerOnly {
    woken: Vec<Runnable<Meta>>,
    /// An empty buffer swapped with `woken` at every collection, so
    /// collecting wakes does not free and regrow a Vec each time.
    spare: Vec<Runnable<Meta>>,
    host: Option<Waker>,
    notified: bool,
}

/// What wakers on any thread can reach.
struct Shared {
    worker: u32,
    names: Vec<String>,
    owner_thread: u64,
    /// Rule 1: only ever accessed on `owner_thread`, never across a call
    /// that could re-enter it.
    owner: UnsafeCell<OwnerOnly>,
    /// Rule 2: wakes from other threads (protocol in `inject.rs`).
    inject: Inject<Runnable<Meta>>,
    /// Live tasks (see `TaskFuture`). Leaked once per executor (a few
    /// words; emptied at shutdown) so tasks can point at it without a
    /// reference count per spawn.
    live: &'static Registry,
    closed: AtomicBool,
}

/// Every live task's waker, so `Shutdown::Cancel` can reach tasks that
/// nothing else would wake (parked on `pending()`, or on a waker they hold
/// themselves). A slot is taken at spawn and given back when the task's
/// future completes or is dropped (one uncontended lock each).
#[derive(Default)]
struct Registry {
    slots: std::sync::Mutex<Slots>,
    count: AtomicUsize,
}

#[derive(Default)]
struct Slots {
    wakers: Vec<Option<Waker>>,
    free: Vec<usize>,
}

impl Registry {
    fn release(&self, slot: usize) {
        let w = {
            let mut s = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            s.free.push(slot);
            s.wakers[slot].take()
        };
        self.count.fetch_sub(1, Ordering::Relaxed);
        // Dropped outside the lock: it may be a reference to a task.
        drop(w);
    }

    /// Creates a task with `spawn(slot)` and registers its waker in `slot`
    /// (under the lock, so the slot is not handed out twice).
    fn register<T>(&self, spawn: impl FnOnce(usize) -> (Runnable<Meta>, T)) -> (Runnable<Meta>, T) {
        let mut s = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let slot = match s.free.pop() {
            Some(i) => i,
            None => {
                s.wakers.push(None);
                s.wakers.len() - 1
            }
        };
        let (r, t) = spawn(slot);
        s.wakers[slot] = Some(r.waker());
        self.count.fetch_add(1, Ordering::Relaxed);
        (r, t)
    }

    /// Every registered waker (taken out, so the tasks are no longer kept
    /// alive by the registry).
    fn take_all(&self) -> Vec<Waker> {
        let mut s = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        s.wakers.iter_mut().filter_map(Option::take).collect()
    }
}

// SAFETY: `owner` is only accessed from `owner_thread` (checked at every
// access in `owner_mut`); everything else is Sync by itself.
unsafe impl Sync for Shared {}
// SAFETY: as above; the runnables and wakers inside are Send.
unsafe impl Send for Shared {}

impl Shared {
    /// The owner-only state, when called on the owner thread.
    #[allow(clippy::mut_from_ref)]
    fn owner_mut(&self) -> Option<&mut OwnerOnly> {
        if thread_no() == self.owner_thread {
            // SAFETY: rule 1: we are on the owner thread, and callers never
            // hold this reference across anything that could call back here.
            Some(unsafe { &mut *self.owner.get() })
        } else {
            None
        }
    }

    /// Makes sure the tokio task hosting the executor will poll it (rule 3).
    fn notify(&self) {
        match self.owner_mut() {
            Some(o) => {
                if !o.notified {
                    o.notified = true;
                    if let Some(w) = o.host.clone() {
                        w.wake();
                    }
                }
            }
            None => self.inject.wake_host(),
        }
    }
}

/// The schedule function of every task (async-task calls it on each wake).
fn schedule(shared: &Shared, r: Runnable<Meta>) {
    let id = r.metadata().id;
    let on_owner = thread_no() == shared.owner_thread;
    if on_owner && ABORTING.get() == id {
        // `abort()` on a parked task: run it now, which drops its future
        // (the task is closed), instead of waiting for the executor. Not on
        // another thread: a `!Send` future must be dropped on its own
        // (async-task aborts the process otherwise); it goes through the
        // injection queue and the owner drops it at its next turn.
        r.run();
        return;
    }
    if shared.closed.load(Ordering::Relaxed) {
        if on_owner || !r.metadata().local {
            drop(r); // drops the future
        } else {
            // As above: the owner drops it (`collect_woken`).
            shared.inject.push(r);
            shared.inject.wake_host();
        }
        return;
    }
    if probes::task_wake::enabled() {
        probes::task_wake::fire(probes::task_wake::Args {
            woken_task_id: id,
            waker_task_id: CURRENT_TASK.get(),
            worker: if thread_no() == shared.owner_thread {
                shared.worker
            } else {
                runtrace_format::NO_WORKER
            },
        });
    }
    if let Some(o) = shared.owner_mut() {
        o.woken.push(r);
    } else {
        shared.inject.push(r);
    }
    shared.notify();
}

/// Wraps a task's future: catches panics, tells the run loop when the task
/// finished, and keeps the live-task count: a task is live from spawn until
/// its future completes or is dropped (cancelled), whatever handles or
/// wakers still point at its allocation. A task dropped unfinished fires
/// TaskTerminate here (the run loop fires it for completed ones).
struct TaskFuture<F> {
    fut: F,
    id: u64,
    done: bool,
    live: &'static Registry,
    slot: usize,
    /// The task's attained service, in its metadata (for LAS).
    service: *const AtomicU64,
}

// SAFETY: `service` points at an AtomicU64 (Sync) in the task's metadata,
// valid for this value's whole life (see `poll`); the rest is `F`'s
// business, so TaskFuture is Send exactly when F is.
unsafe impl<F: Send> Send for TaskFuture<F> {}

impl<F> Drop for TaskFuture<F> {
    fn drop(&mut self) {
        self.live.release(self.slot);
        if !self.done && probes::task_terminate::enabled() {
            probes::task_terminate::fire(probes::task_terminate::Args { task_id: self.id });
        }
    }
}

impl<F: Future> Future for TaskFuture<F> {
    type Output = Result<F::Output, Box<dyn Any + Send>>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: structural pinning: `fut` is never moved out; the other
        // fields are plain data.
        let this = unsafe { self.get_unchecked_mut() };
        POLLED.set(true);
        if let Some(c) = POLL_CTX.take() {
            probes::task_poll_start::fire_at(
                c.t0,
                probes::task_poll_start::Args {
                    task_id: this.id,
                    worker: c.worker,
                    queue: c.queue,
                    local_q: c.depth,
                },
            );
        }
        // SAFETY: as above.
        let fut = unsafe { Pin::new_unchecked(&mut this.fut) };
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fut.poll(cx)));
        if let Some((t0, las)) = POLL_TIMING.take() {
            let t1 = TraceClock::get().now().max(t0);
            POLL_END.set(Some(t1));
            if las {
                // SAFETY: `service` points into this task's metadata, which
                // async-task keeps until the task is freed, after its future
                // (this value) is dropped.
                unsafe { (*this.service).fetch_add(t1 - t0, Ordering::Relaxed) };
            }
        }
        let r = match r {
            Ok(Poll::Pending) => return Poll::Pending,
            Ok(Poll::Ready(v)) => Ok(v),
            Err(p) => Err(p),
        };
        this.done = true;
        TASK_DONE.set(true);
        Poll::Ready(r)
    }
}

type TaskOut<T> = Result<T, Box<dyn Any + Send>>;

/// A spawned task's result: a future of `Result<T, JoinError>`.
///
/// Dropping it detaches the task; [`abort`](JoinHandle::abort) cancels it
/// and drops its future at once if it is not running.
pub struct JoinHandle<T> {
    task: Cell<Option<async_task::FallibleTask<TaskOut<T>, Meta>>>,
    id: u64,
}

impl<T> JoinHandle<T> {
    /// The task's id (as in traces).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Cancels the task. Called on the executor's thread, a parked task's
    /// future is dropped before `abort` returns; a queued one's when the
    /// executor reaches it (it is not polled again); a running one's after
    /// its current poll. Called on another thread, the executor drops it on
    /// its own thread at its next turn (a `!Send` future never leaves it).
    /// Awaiting the handle then gives [`JoinError::Cancelled`].
    pub fn abort(&self) {
        if let Some(t) = self.task.take() {
            let prev = ABORTING.replace(self.id);
            drop(t);
            ABORTING.set(prev);
        }
    }

    /// Whether the task has finished (completed, panicked or cancelled).
    pub fn is_finished(&self) -> bool {
        let t = self.task.take();
        let done = t.as_ref().is_none_or(|t| t.is_finished());
        self.task.set(t);
        done
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(mut t) = self.task.take() else {
            return Poll::Ready(Err(JoinError::Cancelled));
        };
        match Pin::new(&mut t).poll(cx) {
            Poll::Ready(None) => Poll::Ready(Err(JoinError::Cancelled)),
            Poll::Ready(Some(Ok(v))) => Poll::Ready(Ok(v)),
            Poll::Ready(Some(Err(p))) => Poll::Ready(Err(JoinError::Panic(p))),
            Poll::Pending => {
                self.task.set(Some(t));
                Poll::Pending
            }
        }
    }
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.detach();
        }
    }
}

/// How [`Executor::shutdown`] ends the executor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shutdown {
    /// Drop every task now (queued and parked tasks' futures are dropped
    /// when their wakers next fire or are dropped).
    Cancel,
}

/// Builds an [`Executor`].
#[derive(Debug, Clone)]
pub struct Builder {
    queues: Vec<(String, QueueConfig)>,
    max_polls_per_turn: u32,
    max_turn_time: Duration,
    low_share_turn_time: Duration,
    time_slice: Duration,
}

impl Builder {
    /// Adds a queue (the first one is where [`Executor::spawn`] puts tasks).
    pub fn queue(mut self, name: impl Into<String>, cfg: QueueConfig) -> Builder {
        self.queues.push((name.into(), cfg));
        self
    }

    /// Polls per turn before yielding to the tokio driver, so I/O and timers
    /// stay timely (default 128).
    pub fn max_polls_per_turn(mut self, n: u32) -> Builder {
        self.max_polls_per_turn = n;
        self
    }

    /// Time per turn before yielding to the tokio driver (default 1 ms):
    /// long polls would otherwise delay timers and I/O by up to
    /// `max_polls_per_turn` of them. Checked when the executor reads the
    /// clock anyway (several queues, a LAS queue, or a listening backend);
    /// a single FIFO queue with nothing listening relies on the poll count.
    pub fn max_turn_time(mut self, d: Duration) -> Builder {
        self.max_turn_time = d;
        self
    }

    /// How long into a turn a task from a *lower-share* queue (a share
    /// below the executor's highest) may still start (default 100 us);
    /// later, the executor yields to the tokio driver first. A poll cannot
    /// be preempted, so a low-share poll started late in a turn would hold
    /// a higher-share queue's due timer or I/O wake for the rest of the
    /// turn plus that poll; this way such a wake waits at most this long
    /// plus one poll. Queues with the highest share keep the full
    /// `max_turn_time`; with one queue (or equal shares) it never applies.
    pub fn low_share_turn_time(mut self, d: Duration) -> Builder {
        self.low_share_turn_time = d;
        self
    }

    /// The EEVDF request size: a queue's virtual deadline is its virtual
    /// runtime plus `slice / share`, and a queue that becomes runnable
    /// after idling keeps at most one slice of credit (measured in its own
    /// poll time). Default 4 ms: while a high-share queue idles, a
    /// low-share queue running alone moves the virtual time on, so the
    /// high-share queue always comes back with the full credit; with polls
    /// of hundreds of microseconds, a 500 us slice used it up after a poll
    /// or two, and a low-share poll (not preemptible) then cut into nearly
    /// every busy period of the high-share queue. The cost: a queue that
    /// wakes with credit can run up to a slice before a queue that was
    /// running gets a pick.
    pub fn time_slice(mut self, d: Duration) -> Builder {
        self.time_slice = d;
        self
    }

    /// Checks the configuration and builds the executor on this thread.
    pub fn build(self) -> Result<Executor, BuildError> {
        if self.queues.is_empty() {
            return Err(BuildError::NoQueue);
        }
        for (i, (n, c)) in self.queues.iter().enumerate() {
            if n.is_empty() {
                return Err(BuildError::EmptyName);
            }
            if c.share == 0 {
                return Err(BuildError::ZeroShare(n.clone()));
            }
            if self.queues[..i].iter().any(|(m, _)| m == n) {
                return Err(BuildError::DuplicateQueue(n.clone()));
            }
        }
        if self.max_turn_time.is_zero() {
            return Err(BuildError::Invalid("max_turn_time must be positive".into()));
        }
        if self.max_polls_per_turn == 0 {
            return Err(BuildError::Invalid(
                "max_polls_per_turn must be at least 1".into(),
            ));
        }
        if self.low_share_turn_time.is_zero() {
            return Err(BuildError::Invalid(
                "low_share_turn_time must be positive".into(),
            ));
        }
        if self.time_slice.is_zero() {
            return Err(BuildError::Invalid("time_slice must be positive".into()));
        }
        let clock = TraceClock::get();
        let slice = (self.time_slice.as_nanos() * clock.ticks_per_sec() as u128 / 1_000_000_000)
            .max(1) as u64;
        let cfg: Vec<(String, Policy, u32)> = self
            .queues
            .iter()
            .map(|(n, c)| (n.clone(), c.policy, c.share))
            .collect();
        let timed = cfg.len() > 1 || cfg.iter().any(|(_, p, _)| *p == Policy::Las);
        let ticks = |d: Duration| {
            (d.as_nanos() * clock.ticks_per_sec() as u128 / 1_000_000_000)
                .clamp(1, u64::MAX as u128) as u64
        };
        let turn_ticks = ticks(self.max_turn_time);
        let top_share = cfg.iter().map(|(_, _, w)| *w).max().unwrap_or(1);
        let shared = Arc::new(Shared {
            worker: NEXT_EXECUTOR.fetch_add(1, Ordering::Relaxed),
            names: cfg.iter().map(|(n, _, _)| n.clone()).collect(),
            owner_thread: thread_no(),
            owner: UnsafeCell::new(OwnerOnly::default()),
            inject: Inject::new(),
            live: Box::leak(Box::default()),
            closed: AtomicBool::new(false),
        });
        Ok(Executor {
            local: Rc::new(Local {
                sched: RefCell::new(Sched::new(&cfg, slice)),
                shared,
                clock,
                timed,
                las: cfg.iter().map(|(_, p, _)| *p == Policy::Las).collect(),
                low: cfg.iter().map(|(_, _, w)| *w < top_share).collect(),
                max_polls: self.max_polls_per_turn,
                turn_ticks,
                low_turn_ticks: ticks(self.low_share_turn_time).min(turn_ticks),
                parked: Cell::new(false),
            }),
        })
    }
}

struct Local {
    shared: Arc<Shared>,
    sched: RefCell<Sched>,
    clock: &'static TraceClock,
    /// Poll durations are needed (several queues or a LAS queue).
    timed: bool,
    las: Vec<bool>,
    /// Per queue: its share is below the highest (`low_share_turn_time`
    /// applies to it).
    low: Vec<bool>,
    max_polls: u32,
    /// `max_turn_time` in trace ticks.
    turn_ticks: u64,
    /// `low_share_turn_time` in trace ticks (at most `turn_ticks`).
    low_turn_ticks: u64,
    parked: Cell<bool>,
}

/// A handle to an executor (cheap to clone; tasks keep one to spawn more).
#[derive(Clone)]
pub struct Executor {
    local: Rc<Local>,
}

/// A `Send + Clone` handle for spawning `Send` futures onto an executor from
/// other threads.
#[derive(Clone)]
pub struct Spawner {
    shared: Arc<Shared>,
}

fn queue_index(shared: &Shared, name: &str) -> Result<usize, SpawnError> {
    shared
        .names
        .iter()
        .position(|n| n == name)
        .ok_or_else(|| SpawnError::UnknownQueue(name.to_owned()))
}

fn new_meta(qi: usize, local: bool) -> Meta {
    Meta {
        id: NEXT_TASK_ID.fetch_add(1, Ordering::Relaxed),
        queue: qi,
        service: AtomicU64::new(0),
        local,
    }
}

fn spawned<T>(
    shared: &Arc<Shared>,
    loc: Loc,
    r: Runnable<Meta>,
    t: async_task::Task<TaskOut<T>, Meta>,
) -> JoinHandle<T> {
    let (id, qi) = (r.metadata().id, r.metadata().queue);
    if probes::task_spawn::enabled() {
        probes::task_spawn::fire(probes::task_spawn::Args {
            task_id: id,
            parent_task_id: CURRENT_TASK.get(),
            spawn_loc: loc,
            queue: Istr::new(&shared.names[qi]),
        });
    }
    r.schedule();
    JoinHandle {
        task: Cell::new(Some(t.fallible())),
        id,
    }
}

impl Executor {
    /// A builder (add at least one queue).
    pub fn builder() -> Builder {
        Builder {
            queues: Vec::new(),
            max_polls_per_turn: 128,
            max_turn_time: Duration::from_millis(1),
            low_share_turn_time: Duration::from_micros(100),
            time_slice: Duration::from_millis(4),
        }
    }

    /// Spawns `fut` on the first queue. After `shutdown`, the task is
    /// dropped at once and its handle gives [`JoinError::Cancelled`].
    #[track_caller]
    pub fn spawn<F>(&self, fut: F) -> JoinHandle<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        self.spawn_at(0, Loc::caller(), fut)
    }

    /// Spawns `fut` on the queue called `queue`.
    #[track_caller]
    pub fn spawn_on<F>(&self, queue: &str, fut: F) -> Result<JoinHandle<F::Output>, SpawnError>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        let qi = queue_index(&self.local.shared, queue)?;
        Ok(self.spawn_at(qi, Loc::caller(), fut))
    }

    fn spawn_at<F>(&self, qi: usize, loc: Loc, fut: F) -> JoinHandle<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        let shared = &self.local.shared;
        let s = shared.clone();
        let live = shared.live;
        let (r, t) = live.register(|slot| {
            async_task::Builder::new()
                .metadata(new_meta(qi, true))
                .spawn_local(
                    move |m: &Meta| TaskFuture {
                        fut,
                        id: m.id,
                        done: false,
                        live,
                        slot,
                        service: &m.service,
                    },
                    move |r| schedule(&s, r),
                )
        });
        spawned(shared, loc, r, t)
    }

    /// A handle other threads can spawn `Send` futures with.
    pub fn spawner(&self) -> Spawner {
        Spawner {
            shared: self.local.shared.clone(),
        }
    }

    /// Tasks spawned and not yet freed (running, queued or parked).
    pub fn live_tasks(&self) -> usize {
        self.local.shared.live.count.load(Ordering::Relaxed)
    }

    /// This executor's worker index (as in traces).
    pub fn worker(&self) -> u32 {
        self.local.shared.worker
    }

    /// Creates a tokio current-thread runtime (`enable_all`) and runs `fut`
    /// with the executor on it.
    pub fn block_on<F: Future>(&self, fut: F) -> F::Output {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("runtrace executor: cannot build a tokio runtime: {e}"));
        rt.block_on(self.run_until(fut))
    }

    /// Runs the executor's tasks until `fut` completes, inside an existing
    /// tokio runtime (current-thread runtime or `LocalSet`).
    pub async fn run_until<F: Future>(&self, fut: F) -> F::Output {
        let main = Arc::new(MainWake {
            woken: AtomicBool::new(true),
            shared: self.local.shared.clone(),
        });
        let mut fut = std::pin::pin!(fut);
        std::future::poll_fn(|cx| self.turn(cx, fut.as_mut(), &main)).await
    }

    /// Ends the executor: see [`Shutdown`]. Spawning afterwards fails.
    pub fn shutdown(&self, mode: Shutdown) {
        match mode {
            Shutdown::Cancel => {
                self.local.shared.closed.store(true, Ordering::Relaxed);
                let queued = self.local.sched.borrow_mut().clear();
                drop(queued);
                let injected = self.local.shared.inject.take_all();
                drop(injected);
                if let Some(o) = self.local.shared.owner_mut() {
                    let woken = std::mem::take(&mut o.woken);
                    drop(woken);
                }
                // Parked tasks: wake each one; the closed executor's schedule
                // function drops it (its future with it).
                for w in self.local.shared.live.take_all() {
                    w.wake();
                }
            }
        }
    }

    /// Runs until every task has finished (call it inside `block_on` or
    /// `run_until`), then closes the executor.
    pub async fn shutdown_drain(&self) {
        while self.live_tasks() > 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        self.local.shared.closed.store(true, Ordering::Relaxed);
    }

    /// Moves woken and injected tasks onto their queues.
    fn collect_woken(&self) {
        let sh = &self.local.shared;
        let mut woken = sh
            .owner_mut()
            .map(|o| {
                let spare = std::mem::take(&mut o.spare);
                std::mem::replace(&mut o.woken, spare)
            })
            .unwrap_or_default();
        let mut injected = sh.inject.drain();
        if sh.closed.load(Ordering::Relaxed) {
            // Woken on another thread after (or racing with) shutdown: drop
            // the futures here, on their own thread, before borrowing the
            // queues (a drop may call back in); never poll them.
            drop(std::mem::take(&mut injected));
        }
        let mut sched = self.local.sched.borrow_mut();
        for r in woken.drain(..) {
            let q = r.metadata().queue;
            sched.push(q, r);
        }
        for r in injected {
            let q = r.metadata().queue;
            sched.push(q, r);
        }
        drop(sched);
        // Keep the (now empty) buffer for the next swap, unless a burst
        // (a mass spawn) grew it large.
        if woken.capacity() <= SPARE_MAX {
            if let Some(o) = sh.owner_mut() {
                o.spare = woken;
            }
        }
    }

    fn has_woken(&self) -> bool {
        let sh = &self.local.shared;
        sh.owner_mut().is_some_and(|o| !o.woken.is_empty()) || sh.inject.is_flagged()
    }

    /// One turn on the tokio runtime: poll the main future if woken, then
    /// up to `max_polls` tasks; yield to tokio after that or when idle.
    fn turn<F: Future>(
        &self,
        cx: &mut Context<'_>,
        mut fut: Pin<&mut F>,
        main: &Arc<MainWake>,
    ) -> Poll<F::Output> {
        let l = &*self.local;
        let sh = &*l.shared;
        let Some(o) = sh.owner_mut() else {
            panic!("runtrace executor: polled on a thread other than the one that built it");
        };
        if !o.host.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            o.host = Some(cx.waker().clone());
            sh.inject.set_host(cx.waker().clone());
        }
        // While we run, wakes need not wake the host (rule 3).
        o.notified = true;
        if l.parked.replace(false) && probes::worker_unpark::enabled() {
            let (cpu_ns, sched_wait_ns) = runtrace_core::clock::thread_cpu_and_wait_ns();
            probes::worker_unpark::fire(probes::worker_unpark::Args {
                worker: sh.worker,
                cpu_ns,
                sched_wait_ns,
            });
        }
        let main_waker = Waker::from(main.clone());
        let mut polls = 0;
        let mut now: Option<u64> = None;
        let mut turn_start: Option<u64> = None;
        let mut last_queue = usize::MAX;
        loop {
            if main.woken.swap(false, Ordering::Relaxed) {
                if let Poll::Ready(v) = fut.as_mut().poll(&mut Context::from_waker(&main_waker)) {
                    return Poll::Ready(v);
                }
            }
            if self.has_woken() {
                self.collect_woken();
            }
            // Time into this turn (0 until the clock has been read twice).
            let elapsed = match (turn_start, now) {
                (Some(a), Some(b)) => b.saturating_sub(a),
                _ => 0,
            };
            if polls >= l.max_polls || elapsed >= l.turn_ticks {
                // Yield to the tokio driver (I/O, timers), then come back.
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            let Some(qi) = l.sched.borrow().pick_queue() else {
                break;
            };
            if l.low[qi] && elapsed >= l.low_turn_ticks {
                // A lower-share poll could not be preempted by a
                // higher-share queue's timer or I/O wake that is due now:
                // let the driver deliver those first (`low_share_turn_time`).
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            let (r, depth) = {
                let mut s = l.sched.borrow_mut();
                if qi != last_queue && s.runnable_queues() > 1 && probes::queue_select::enabled() {
                    probes::queue_select::fire(probes::queue_select::Args {
                        worker: sh.worker,
                        queue: s.queues[qi].name,
                        vruntime: s.vruntime(qi),
                        runnable: s.runnable_queues(),
                    });
                }
                last_queue = qi;
                let r = s
                    .pop(qi)
                    .unwrap_or_else(|| unreachable!("picked queue is non-empty"));
                (r, s.queues[qi].len)
            };
            let id = r.metadata().id;
            let traced = probes::task_poll_start::enabled();
            let t0 = if l.timed || traced {
                now.unwrap_or_else(|| l.clock.now())
            } else {
                0
            };
            if (l.timed || traced) && turn_start.is_none() {
                turn_start = Some(t0);
            }
            if traced {
                // PollStart fires from inside the task's poll (TaskFuture),
                // so a cancelled task that `run` only drops gets none.
                let queue = l.sched.borrow().queues[qi].name;
                POLL_CTX.set(Some(PollCtx {
                    t0,
                    worker: sh.worker,
                    queue,
                    depth: depth as u32,
                }));
            }
            // The task's poll itself takes the end time (and, in a LAS queue,
            // charges the task's service): see `TaskFuture::poll`.
            if l.timed || traced {
                POLL_TIMING.set(Some((t0, l.las[qi])));
            }
            CURRENT_TASK.set(id);
            TASK_DONE.set(false);
            r.run();
            CURRENT_TASK.set(0);
            POLL_CTX.set(None);
            let done = TASK_DONE.get();
            let polled = POLLED.replace(false);
            polls += 1;
            if l.timed || traced {
                POLL_TIMING.set(None);
                // One clock read per transition: the poll's own, or ours
                // when the task was not polled (cancelled).
                let t1 = POLL_END.take().unwrap_or_else(|| l.clock.now()).max(t0);
                now = Some(t1);
                if l.timed {
                    l.sched.borrow_mut().charge(qi, t1 - t0);
                }
                if traced && polled {
                    probes::task_poll_end::fire_at(
                        t1,
                        probes::task_poll_end::Args {
                            task_id: id,
                            worker: sh.worker,
                            ready: done,
                        },
                    );
                    if done {
                        probes::task_terminate::fire_at(
                            t1,
                            probes::task_terminate::Args { task_id: id },
                        );
                    }
                }
            }
        }
        // Nothing runnable: park until a wake (rule 3).
        let o = sh.owner_mut().unwrap_or_else(|| unreachable!());
        o.notified = false;
        if !o.woken.is_empty() || main.woken.load(Ordering::Relaxed) {
            // Woken while we were finishing up: go round again soon.
            cx.waker().wake_by_ref();
            o.notified = true;
            return Poll::Pending;
        }
        l.parked.set(true);
        if probes::worker_park::enabled() {
            let (cpu_ns, _) = runtrace_core::clock::thread_cpu_and_wait_ns();
            probes::worker_park::fire(probes::worker_park::Args {
                worker: sh.worker,
                local_q: 0,
                cpu_ns,
            });
        }
        Poll::Pending
    }
}

impl Spawner {
    /// Spawns a `Send` future on the queue called `queue`, from any thread.
    #[track_caller]
    pub fn spawn_on<F>(&self, queue: &str, fut: F) -> Result<JoinHandle<F::Output>, SpawnError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        if self.shared.closed.load(Ordering::Relaxed) {
            return Err(SpawnError::ShutDown);
        }
        let qi = queue_index(&self.shared, queue)?;
        let loc = Loc::caller();
        let s = self.shared.clone();
        let live = self.shared.live;
        let (r, t) = live.register(|slot| {
            async_task::Builder::new()
                .metadata(new_meta(qi, false))
                .spawn(
                    move |m: &Meta| TaskFuture {
                        fut,
                        id: m.id,
                        done: false,
                        live,
                        slot,
                        service: &m.service,
                    },
                    move |r| schedule(&s, r),
                )
        });
        Ok(spawned(&self.shared, loc, r, t))
    }
}

/// The main future's waker: flags it and wakes the host if needed.
struct MainWake {
    woken: AtomicBool,
    shared: Arc<Shared>,
}

impl Wake for MainWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Relaxed);
        self.shared.notify();
    }
}
