//! A task: its header (the async-task metadata, [`Meta`]), its harness
//! ([`TaskFuture`]: catches panics, keeps the live-task count, fires the
//! poll-start probe and takes the poll's end time), the [`JoinHandle`]
//! that awaits it, and the registry of live tasks.
//!
//! The run loop (`run.rs`) and the harness talk through this module's
//! thread-locals: the loop says what it knows about the poll it starts
//! (`POLL_MODE`, `POLL_T0`, `POLL_CTX`), the harness says what happened
//! (`POLLED`, `TASK_DONE`, `POLL_END`), so the clock is read once per
//! poll transition. Each is a plain `Cell` with a constant initialiser, so
//! an access is one thread-local load or store; a poll that is neither
//! timed nor traced touches only `POLL_MODE`, `POLLED` and `TASK_DONE`.

use crate::error::JoinError;
use crate::sync::{AtomicU64, AtomicUsize, Cell, Mutex, Ordering, RefCell, StaticAtomicU64};
use async_task::Runnable;
use runtrace_core::clock::TraceClock;
use runtrace_core::Istr;
use runtrace_probes::builtin as probes;
use std::any::Any;
use std::future::Future;
// std's, not loom's: loom's `Arc` cannot hold an unsized `dyn Any`, and
// nothing in the loom models builds a task.
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

/// Executor task ids start high so they never collide with tokio's (which
/// count from 1) in a trace holding both. Threads take them in blocks of
/// `ID_BLOCK` (`next_task_id`).
static NEXT_TASK_ID: StaticAtomicU64 = StaticAtomicU64::new(1 << 48);

/// Task ids a thread takes from `NEXT_TASK_ID` at a time: one atomic
/// read-modify-write per this many spawns instead of one per spawn.
const ID_BLOCK: u64 = 1024;

/// A new task id, unique in the process (ascending on each thread).
fn next_task_id() -> u64 {
    thread_local! {
        /// The rest of this thread's block: (next, end).
        static IDS: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
    }
    let (next, end) = IDS.get();
    if next < end {
        IDS.set((next + 1, end));
        return next;
    }
    let first = NEXT_TASK_ID.fetch_add(ID_BLOCK, Ordering::Relaxed);
    IDS.set((first + 1, first + ID_BLOCK));
    first
}

/// `POLL_MODE` bits: what the poll the run loop starts needs from the
/// harness.
pub(crate) mod mode {
    /// Take the poll's end time (`POLL_END`; its start is `POLL_T0`).
    pub(crate) const TIMED: u8 = 1;
    /// Charge the poll's duration to the task's service (a LAS queue).
    pub(crate) const LAS: u8 = 2;
    /// Fire PollStart with `POLL_CTX`.
    pub(crate) const TRACED: u8 = 4;
}

thread_local! {
    /// The task being polled on this thread (0: none), for wake attribution
    /// and `parent_task_id`.
    pub(crate) static CURRENT_TASK: Cell<u64> = const { Cell::new(0) };
    /// Set by the task wrapper when a poll finished the task.
    pub(crate) static TASK_DONE: Cell<bool> = const { Cell::new(false) };
    /// `mode` bits for the poll the run loop is starting (0 outside one).
    pub(crate) static POLL_MODE: Cell<u8> = const { Cell::new(0) };
    /// The poll's start time (trace ticks), when `TIMED` or `TRACED`.
    pub(crate) static POLL_T0: Cell<u64> = const { Cell::new(0) };
    /// What the run loop knows about the poll it is starting, for the
    /// PollStart that `TaskFuture::poll` fires (`TRACED`).
    pub(crate) static POLL_CTX: Cell<PollCtx> = const { Cell::new(PollCtx::NONE) };
    /// The end time `TaskFuture::poll` read, for the run loop (valid when
    /// `POLLED` and the mode was `TIMED` or `TRACED`).
    pub(crate) static POLL_END: Cell<u64> = const { Cell::new(0) };
    /// Set by `TaskFuture::poll`: the task was really polled.
    pub(crate) static POLLED: Cell<bool> = const { Cell::new(false) };
    /// The task `JoinHandle::abort` is cancelling (0: none).
    pub(crate) static ABORTING: Cell<u64> = const { Cell::new(0) };
}

/// What the run loop knows about the poll it starts (`POLL_CTX`).
#[derive(Clone, Copy)]
pub(crate) struct PollCtx {
    pub(crate) worker: u32,
    pub(crate) queue: Istr,
    pub(crate) depth: u32,
}

impl PollCtx {
    const NONE: PollCtx = PollCtx {
        worker: 0,
        queue: Istr::EMPTY,
        depth: 0,
    };
}

/// Per-task data (async-task metadata).
pub(crate) struct Meta {
    pub(crate) id: u64,
    pub(crate) queue: usize,
    /// Attained service (poll ticks), for LAS. Only the owner thread writes
    /// it (at the end of the task's polls, which all run there), so a load
    /// and a store do: no read-modify-write.
    pub(crate) service: AtomicU64,
    /// The future may be `!Send` (spawned with `Executor::spawn*`): it must
    /// only be dropped on the owner thread.
    pub(crate) local: bool,
    /// The executor the task belongs to (`wake::Shared`; type-erased, so
    /// this module need not import `wake`). The schedule function finds it
    /// here instead of capturing it: see `wake::schedule_task`.
    pub(crate) exec: Arc<dyn Any + Send + Sync>,
}

impl Meta {
    /// A new task's header, with the next task id, for the executor
    /// `exec`.
    pub(crate) fn new(queue: usize, local: bool, exec: Arc<dyn Any + Send + Sync>) -> Meta {
        Meta {
            id: next_task_id(),
            queue,
            service: AtomicU64::new(0),
            local,
            exec,
        }
    }

    pub(crate) fn service(&self) -> u64 {
        self.service.load(Ordering::Relaxed)
    }
}

/// Every live task's waker, so `Shutdown::Cancel` can reach tasks that
/// nothing else would wake (parked on `pending()`, or on a waker they hold
/// themselves). A slot is taken at spawn and given back when the task's
/// future completes or is dropped.
///
/// Two halves, because a local task's future lives and dies on the owner
/// thread (async-task's `spawn_local` checks it) while a `Spawner`'s task
/// may be dropped on the thread that wakes it after shutdown (`schedule`):
/// - `local`: tasks spawned with `Executor::spawn*`. Ownership rule 1:
///   touched only on the owner thread, so no lock and no atomic.
/// - `remote`: tasks spawned through a `Spawner`, behind a mutex.
pub(crate) struct Registry {
    owner_thread: u64,
    /// Rule 1: owner thread only (see `local_slots`).
    local: RefCell<Slots>,
    local_count: Cell<usize>,
    remote: Mutex<Slots>,
    remote_count: AtomicUsize,
}

// SAFETY: `local` and `local_count` are reached only through
// `local_slots`/`local_count`, which check that the caller is the owner
// thread (ownership rule 1) and panic otherwise; `remote` and
// `remote_count` are Sync by themselves.
unsafe impl Sync for Registry {}
// SAFETY: as above; the wakers inside are Send.
unsafe impl Send for Registry {}

/// A live-task slot: its index, and the top bit set for the remote half.
#[derive(Clone, Copy)]
pub(crate) struct Slot(u32);

const REMOTE_SLOT: u32 = 1 << 31;

#[derive(Default)]
struct Slots {
    wakers: Vec<Option<Waker>>,
    free: Vec<u32>,
}

impl Slots {
    #[inline]
    fn take_slot(&mut self) -> u32 {
        match self.free.pop() {
            Some(i) => i,
            None => {
                self.wakers.push(None);
                (self.wakers.len() - 1) as u32
            }
        }
    }

    #[inline]
    fn give_back(&mut self, i: u32) -> Option<Waker> {
        self.free.push(i);
        self.wakers[i as usize].take()
    }
}

impl Registry {
    /// An empty registry for an executor owned by thread `owner_thread`.
    pub(crate) fn new(owner_thread: u64) -> Registry {
        Registry {
            owner_thread,
            local: RefCell::default(),
            local_count: Cell::new(0),
            remote: Mutex::new(Slots::default()),
            remote_count: AtomicUsize::new(0),
        }
    }

    /// The local half, on the owner thread only (rule 1).
    #[inline]
    fn local_slots(&self) -> &RefCell<Slots> {
        assert!(
            crate::thread::thread_no() == self.owner_thread,
            "runtrace executor: a local task's registry slot used off its thread"
        );
        &self.local
    }

    /// Live tasks (`Executor::live_tasks`; called on the owner thread).
    pub(crate) fn count(&self) -> usize {
        let local = if crate::thread::thread_no() == self.owner_thread {
            self.local_count.get()
        } else {
            0
        };
        local + self.remote_count.load(Ordering::Relaxed)
    }

    pub(crate) fn release(&self, slot: Slot) {
        let w = if slot.0 & REMOTE_SLOT == 0 {
            // A local task's future is dropped on the owner thread only
            // (async-task's `spawn_local` asserts it before dropping it).
            let w = self.local_slots().borrow_mut().give_back(slot.0);
            self.local_count.set(self.local_count.get() - 1);
            w
        } else {
            let w = self
                .remote
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .give_back(slot.0 & !REMOTE_SLOT);
            self.remote_count.fetch_sub(1, Ordering::Relaxed);
            w
        };
        // Dropped outside the borrow or lock: it may be a reference to a
        // task, whose drop may come back here.
        drop(w);
    }

    /// Creates a task with `spawn(slot)` and registers its waker in `slot`:
    /// in the local half (owner thread only) when `local`, else in the
    /// remote half.
    pub(crate) fn register<T>(
        &self,
        local: bool,
        spawn: impl FnOnce(Slot) -> (Runnable<Meta>, T),
    ) -> (Runnable<Meta>, T) {
        if local {
            let i = self.local_slots().borrow_mut().take_slot();
            let (r, t) = spawn(Slot(i));
            self.local.borrow_mut().wakers[i as usize] = Some(r.waker());
            self.local_count.set(self.local_count.get() + 1);
            (r, t)
        } else {
            // Under the lock until the waker is in: the slot is not handed
            // out twice, and `take_all` sees every registered task.
            let mut s = self.remote.lock().unwrap_or_else(|e| e.into_inner());
            let i = s.take_slot();
            assert!(i < REMOTE_SLOT, "runtrace executor: 2^31 live remote tasks");
            let (r, t) = spawn(Slot(i | REMOTE_SLOT));
            s.wakers[i as usize] = Some(r.waker());
            self.remote_count.fetch_add(1, Ordering::Relaxed);
            (r, t)
        }
    }

    /// Every registered waker (taken out, so the tasks are no longer kept
    /// alive by the registry). On the owner thread.
    pub(crate) fn take_all(&self) -> Vec<Waker> {
        let mut out: Vec<Waker> = {
            let mut s = self.local_slots().borrow_mut();
            s.wakers.iter_mut().filter_map(Option::take).collect()
        };
        let mut s = self.remote.lock().unwrap_or_else(|e| e.into_inner());
        out.extend(s.wakers.iter_mut().filter_map(Option::take));
        out
    }
}

/// Wraps a task's future: catches panics, tells the run loop when the task
/// finished, and keeps the live-task count: a task is live from spawn until
/// its future completes or is dropped (cancelled), whatever handles or
/// wakers still point at its allocation. A task dropped unfinished fires
/// TaskTerminate here (the run loop fires it for completed ones).
pub(crate) struct TaskFuture<F> {
    fut: F,
    /// The task's header (its id, and its attained service for LAS).
    meta: *const Meta,
    live: &'static Registry,
    slot: Slot,
    done: bool,
}

// SAFETY: `meta` points at the task's metadata (Sync), valid for this
// value's whole life (see `meta()`); the rest is `F`'s business, so
// TaskFuture is Send exactly when F is.
unsafe impl<F: Send> Send for TaskFuture<F> {}

impl<F> TaskFuture<F> {
    /// The harness of the task with header `m`, holding live-task slot
    /// `slot` of `live` until its future completes or is dropped.
    pub(crate) fn new(fut: F, m: &Meta, live: &'static Registry, slot: Slot) -> TaskFuture<F> {
        TaskFuture {
            fut,
            meta: m,
            live,
            slot,
            done: false,
        }
    }

    fn meta(&self) -> &Meta {
        // SAFETY: `meta` points into this task's header, which async-task
        // keeps until the task is freed, after its future (this value) is
        // dropped.
        unsafe { &*self.meta }
    }
}

impl<F> Drop for TaskFuture<F> {
    fn drop(&mut self) {
        self.live.release(self.slot);
        if !self.done && probes::task_terminate::enabled() {
            probes::task_terminate::fire(probes::task_terminate::Args {
                task_id: self.meta().id,
            });
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
        let m = POLL_MODE.get();
        if m & mode::TRACED != 0 {
            let c = POLL_CTX.get();
            probes::task_poll_start::fire_at(
                POLL_T0.get(),
                probes::task_poll_start::Args {
                    task_id: this.meta().id,
                    worker: c.worker,
                    queue: c.queue,
                    local_q: c.depth,
                },
            );
        }
        // SAFETY: as above.
        let fut = unsafe { Pin::new_unchecked(&mut this.fut) };
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fut.poll(cx)));
        if m & (mode::TIMED | mode::TRACED) != 0 {
            let t0 = POLL_T0.get();
            let t1 = TraceClock::get().now().max(t0);
            POLL_END.set(t1);
            if m & mode::LAS != 0 {
                let s = &this.meta().service;
                // Only the owner thread writes `service` (Meta), so this is
                // no lost update.
                s.store(s.load(Ordering::Relaxed) + (t1 - t0), Ordering::Relaxed);
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

pub(crate) type TaskOut<T> = Result<T, Box<dyn Any + Send>>;

/// A spawned task's result: a future of `Result<T, JoinError>`.
///
/// Dropping it detaches the task; [`abort`](JoinHandle::abort) cancels it
/// and drops its future at once if it is not running.
///
/// ```
/// use runtrace_executor::{Executor, QueueConfig};
/// let ex = Executor::builder().queue("main", QueueConfig::fifo()).build()?;
/// let h = ex.spawn(async { "done" });
/// assert_eq!(ex.block_on(h).unwrap(), "done");
/// # Ok::<(), runtrace_executor::BuildError>(())
/// ```
pub struct JoinHandle<T> {
    task: Cell<Option<async_task::FallibleTask<TaskOut<T>, Meta>>>,
    id: u64,
}

impl<T> JoinHandle<T> {
    pub(crate) fn new(task: async_task::Task<TaskOut<T>, Meta>, id: u64) -> JoinHandle<T> {
        JoinHandle {
            task: Cell::new(Some(task.fallible())),
            id,
        }
    }

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
