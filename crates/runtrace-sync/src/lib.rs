//! Drop-in instrumented primitives for application code (facade feature
//! `sync`, as `runtrace::sync`).
//!
//! Seed 001's team hand-wrote LTTng tracepoints for lock waits and holds,
//! queue enqueue/dequeue/processing, dropped items, queue snapshots, a
//! backlog trigger, blocking I/O and thread heartbeats. These types fire the
//! same events as built-in runtrace probes (`probes/events.toml`), so the
//! in-process recorder, LTTng (`lttng enable-event -u 'runtrace:lock_wait'
//! --filter 'wait_ns > 50000'`), perf and bpftrace all see them, and
//! `runtrace backlog` correlates them.
//!
//! | type | events |
//! |---|---|
//! | [`Mutex`], [`RwLock`] | `lock_wait`, `lock_hold` |
//! | [`queue::bounded`] | `enqueue`, `dequeue`, `processing_end`, `item_dropped`, `queue_snapshot`, `backlog_trigger` |
//! | [`io::timed`] | `io` |
//! | [`heartbeat`] | `thread_heartbeat` |
//!
//! With no probe backend listening, each primitive costs a relaxed load or
//! two over what it wraps (parking_lot, crossbeam-channel): the clock is
//! read only when some backend wants the event.
//!
//! ```
//! use runtrace_sync::{queue, Mutex};
//! let log = Mutex::new("log", Vec::new());
//! let (tx, rx) = queue::bounded("requests", 16);
//! tx.send(7u32).unwrap();
//! let item = rx.recv().unwrap(); // a guard: `processing_end` when dropped
//! log.lock().push(*item);
//! drop(item);
//! assert_eq!(*log.lock(), [7]);
//! ```

#![warn(missing_docs)]

pub mod backlog;
mod clock;
mod heartbeat;
pub mod io;
mod lock;
mod names;
pub mod queue;

pub use heartbeat::heartbeat;
pub use lock::{LockOptions, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
