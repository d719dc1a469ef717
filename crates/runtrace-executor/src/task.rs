//! A task: its header (the async-task metadata, [`Meta`]), its harness
//! ([`TaskFuture`]: catches panics, keeps the live-task count, fires the
//! poll-start probe and takes the poll's end time), the [`JoinHandle`]
//! that awaits it, and the registry of live tasks.
//!
//! The run loop (`run.rs`) and the harness talk through this module's
//! thread-locals: the loop says what it knows about the poll it starts
//! (`POLL_CTX`, `POLL_TIMING`), the harness says what happened
//! (`POLLED`, `TASK_DONE`, `POLL_END`), so the clock is read once per
//! poll transition.

use crate::error::JoinError;
use crate::sync::{AtomicU64, AtomicUsize, Cell, Mutex, Ordering, StaticAtomicU64};
use async_task::Runnable;
use runtrace_core::clock::TraceClock;
use runtrace_core::Istr;
use runtrace_probes::builtin as probes;
use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// Executor task ids start high so they never collide with tokio's (which
/// count from 1) in a trace holding both.
static NEXT_TASK_ID: StaticAtomicU64 = StaticAtomicU64::new(1 << 48);

thread_local! {
    /// The task being polled on this thread (0: none), for wake attribution
    /// and `parent_task_id`.
    pub(crate) static CURRENT_TASK: Cell<u64> = const { Cell::new(0) };
    /// Set by the task wrapper when a poll finished the task.
    pub(crate) static TASK_DONE: Cell<bool> = const { Cell::new(false) };
    /// What the run loop knows about the poll it is starting, for the
    /// PollStart that `TaskFuture::poll` fires.
    pub(crate) static POLL_CTX: Cell<Option<PollCtx>> = const { Cell::new(None) };
    /// For `TaskFuture::poll`: the poll's start time and whether the task
    /// is in a LAS queue (None: nothing needs the poll's duration).
    pub(crate) static POLL_TIMING: Cell<Option<(u64, bool)>> = const { Cell::new(None) };
    /// The end time `TaskFuture::poll` read, for the run loop.
    pub(crate) static POLL_END: Cell<Option<u64>> = const { Cell::new(None) };
    /// Set by `TaskFuture::poll`: the task was really polled.
    pub(crate) static POLLED: Cell<bool> = const { Cell::new(false) };
    /// The task `JoinHandle::abort` is cancelling (0: none).
    pub(crate) static ABORTING: Cell<u64> = const { Cell::new(0) };
}

/// What the run loop knows about the poll it starts (`POLL_CTX`).
#[derive(Clone, Copy)]
pub(crate) struct PollCtx {
    pub(crate) t0: u64,
    pub(crate) worker: u32,
    pub(crate) queue: Istr,
    pub(crate) depth: u32,
}

/// Per-task data (async-task metadata).
pub(crate) struct Meta {
    pub(crate) id: u64,
    pub(crate) queue: usize,
    /// Attained service (poll ticks), for LAS.
    pub(crate) service: AtomicU64,
    /// The future may be `!Send` (spawned with `Executor::spawn*`): it must
    /// only be dropped on the owner thread.
    pub(crate) local: bool,
}

impl Meta {
    /// A new task's header, with the next task id.
    pub(crate) fn new(queue: usize, local: bool) -> Meta {
        Meta {
            id: NEXT_TASK_ID.fetch_add(1, Ordering::Relaxed),
            queue,
            service: AtomicU64::new(0),
            local,
        }
    }

    pub(crate) fn service(&self) -> u64 {
        self.service.load(Ordering::Relaxed)
    }
}

/// Every live task's waker, so `Shutdown::Cancel` can reach tasks that
/// nothing else would wake (parked on `pending()`, or on a waker they hold
/// themselves). A slot is taken at spawn and given back when the task's
/// future completes or is dropped (one uncontended lock each).
#[derive(Default)]
pub(crate) struct Registry {
    slots: Mutex<Slots>,
    /// Live tasks (`Executor::live_tasks`).
    pub(crate) count: AtomicUsize,
}

#[derive(Default)]
struct Slots {
    wakers: Vec<Option<Waker>>,
    free: Vec<usize>,
}

impl Registry {
    pub(crate) fn release(&self, slot: usize) {
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
    pub(crate) fn register<T>(
        &self,
        spawn: impl FnOnce(usize) -> (Runnable<Meta>, T),
    ) -> (Runnable<Meta>, T) {
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
    pub(crate) fn take_all(&self) -> Vec<Waker> {
        let mut s = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        s.wakers.iter_mut().filter_map(Option::take).collect()
    }
}

/// Wraps a task's future: catches panics, tells the run loop when the task
/// finished, and keeps the live-task count: a task is live from spawn until
/// its future completes or is dropped (cancelled), whatever handles or
/// wakers still point at its allocation. A task dropped unfinished fires
/// TaskTerminate here (the run loop fires it for completed ones).
pub(crate) struct TaskFuture<F> {
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

impl<F> TaskFuture<F> {
    /// The harness of the task with header `m`, holding live-task slot
    /// `slot` of `live` until its future completes or is dropped.
    pub(crate) fn new(fut: F, m: &Meta, live: &'static Registry, slot: usize) -> TaskFuture<F> {
        TaskFuture {
            fut,
            id: m.id,
            done: false,
            live,
            slot,
            service: &m.service,
        }
    }
}

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
