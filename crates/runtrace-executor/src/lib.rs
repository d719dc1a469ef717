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
//! # Ownership rules (enforced in `wake.rs`, see `Shared::owner`)
//! 1. Tasks, their run queues and the EEVDF state belong to the thread that
//!    built the executor (the owner); `Executor` is `!Send`.
//! 2. A wake on the owner thread pushes the task onto its run queue (or,
//!    when the queues are borrowed or the task is the one being polled,
//!    onto an owner-only list the run loop empties at its next step),
//!    without a lock or an atomic read-modify-write; a wake on any other
//!    thread goes through the injection queue (a mutex) and wakes the tokio
//!    task hosting the executor.
//! 3. The hosting tokio task is woken at most once per idle period (the
//!    `notified` flag), so a burst of wakes costs one wake-up.
//!
//! # Modules
//! Dependencies point down this list only (no cycles):
//! - `builder`: [`Builder`], [`QueueConfig`]; makes an [`Executor`].
//! - `executor`: the [`Executor`] and [`Spawner`] handles.
//! - `run`: the run loop (one turn on the tokio host task).
//! - `wake`: the wake path (rules 1-3), the owner-only state (run queues,
//!   wake list), the schedule function.
//! - `sched`: run queues, FIFO/LAS, EEVDF across queues.
//! - `inject`: cross-thread wakes (rule 2), with loom models.
//! - `task`: task header, harness, live-task registry and [`JoinHandle`].
//! - `error`: [`BuildError`], [`SpawnError`], [`JoinError`].
//! - `thread`: this thread's number, for the ownership checks.
//! - `sync`: atomics, cells and locks (loom's under `cfg(loom)`).

mod builder;
mod error;
mod executor;
mod inject;
mod run;
mod sched;
mod sync;
mod task;
mod thread;
mod wake;

pub use builder::{Builder, QueueConfig};
pub use error::{BuildError, JoinError, SpawnError};
pub use executor::{Executor, Shutdown, Spawner};
pub use sched::{Policy, LAS_AGING, LAS_QUANTUM};
pub use task::JoinHandle;
