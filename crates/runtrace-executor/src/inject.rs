//! The cross-thread wake path (ownership rule 2): wakes on threads other
//! than the owner push the task here and wake the tokio task hosting the
//! executor, which moves the tasks onto their run queues on its next turn.
//!
//! # Protocol
//! 1. `queue` holds the injected items; it is only touched under its mutex.
//!    The mutex alone carries the items between threads.
//! 2. `flagged` is a hint that `queue` may be non-empty, so the owner can
//!    skip the lock on every turn. A pusher sets it after its push (the
//!    unlock), so a reader that sees it cleared has either taken the item or
//!    will see the flag set again.
//! 3. The owner clears `flagged` *before* it takes `queue` (`drain`), so an
//!    item pushed between the two is either taken now or leaves the flag set
//!    for the next drain; it is never stranded with the flag clear.
//! 4. Every push is followed by `wake_host` on the pushing thread. At the
//!    start of every turn, before it drains, the owner makes sure the host
//!    waker is registered (`set_host` when it changed). So an item a drain
//!    misses was pushed after the registration, and its wake reaches the
//!    registered waker and makes the owner drain again.
//! 5. Rule 4 needs a wake to happen-before the poll it causes, so that the
//!    next drain sees the pushed flag (`is_flagged` is a Relaxed load). Tokio
//!    wakers guarantee it (the task's state is an AcqRel read-modify-write).
//!
//! The loom models of rules 1-5 are in `inject/loom_tests.rs`. They fail
//! (a lost wake) when the host wake is made Relaxed (rule 5), when `drain`
//! takes the queue before clearing the flag (rule 3), or when `push` sets
//! the flag before pushing (rule 2); they pass with `flagged` all Relaxed,
//! as rule 1 says: its Release/Acquire pair is not what carries the items.

use crate::sync::{AtomicBool, Mutex, Ordering};
use std::task::Waker;

pub(crate) struct Inject<T> {
    /// Rule 1.
    queue: Mutex<Vec<T>>,
    /// Rule 2.
    flagged: AtomicBool,
    /// The waker of the tokio task hosting the executor (rule 4).
    host: Mutex<Option<Waker>>,
}

impl<T> Inject<T> {
    pub(crate) fn new() -> Inject<T> {
        Inject {
            queue: Mutex::new(Vec::new()),
            flagged: AtomicBool::new(false),
            host: Mutex::new(None),
        }
    }

    /// Any thread: adds `item` (rules 1 and 2). Call `wake_host` after it.
    pub(crate) fn push(&self, item: T) {
        self.queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(item);
        // Release: pairs with the Acquire swap in `drain`. Not load-bearing:
        // the mutex carries the items (rule 1).
        self.flagged.store(true, Ordering::Release);
    }

    /// Any thread: wakes the host task, if one is registered (rule 4).
    pub(crate) fn wake_host(&self) {
        let w = self.host.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(w) = w {
            w.wake();
        }
    }

    /// Owner: registers the host task's waker (before draining, rule 4).
    pub(crate) fn set_host(&self, w: Waker) {
        *self.host.lock().unwrap_or_else(|e| e.into_inner()) = Some(w);
    }

    /// Owner: whether items may be waiting (a hint, rule 2).
    pub(crate) fn is_flagged(&self) -> bool {
        self.flagged.load(Ordering::Relaxed)
    }

    /// Owner: takes the injected items, if the flag says there are any
    /// (rule 3).
    pub(crate) fn drain(&self) -> Vec<T> {
        // Acquire: pairs with the Release store in `push`.
        if self.flagged.swap(false, Ordering::Acquire) {
            std::mem::take(&mut *self.queue.lock().unwrap_or_else(|e| e.into_inner()))
        } else {
            Vec::new()
        }
    }

    /// Owner, at shutdown: takes every item whatever the flag says.
    pub(crate) fn take_all(&self) -> Vec<T> {
        std::mem::take(&mut *self.queue.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

#[cfg(all(test, loom))]
mod loom_tests;
