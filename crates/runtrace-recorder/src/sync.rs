//! The one place this crate gets its atomics, cells and locks from: loom's
//! under `cfg(loom)` (model tests), std's otherwise. Same idea as tokio's
//! `crate::loom`. No other module imports from `std::sync::atomic`,
//! `std::cell` or `std::sync::{Mutex, OnceLock}`.
//!
//! What loom models is the ring protocol (`ring.rs`): its atomics and its
//! `UnsafeCell` switch to loom's. The rest is std's under both cfgs, on
//! purpose:
//! - `StaticAtomicU64`: the generation counters live in `static`s, which
//!   loom's atomics cannot (their constructor is not `const`, and they
//!   exist only inside a model). Tokio's shim has the same alias.
//! - `StaticAtomicBool`, `StaticAtomicPtr`: the snapshot signal's flag,
//!   time and clock (`trigger.rs`), statics for the same reason (a signal
//!   handler can reach nothing else): one Release store in the handler,
//!   one Acquire swap on the writer thread.
//! - `Cell`, `RefCell`: thread-confined (the producer's thread-locals), so
//!   there is nothing for a model to interleave.
//! - `Mutex`, `OnceLock`: the recording's registration and start/stop,
//!   off the hot path and outside every model.

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

pub(crate) use std::cell::{Cell, RefCell};
pub(crate) use std::sync::atomic::AtomicU64 as StaticAtomicU64;
pub(crate) use std::sync::atomic::{AtomicBool as StaticAtomicBool, AtomicPtr as StaticAtomicPtr};
pub(crate) use std::sync::{Mutex, OnceLock};

/// std's `UnsafeCell` with loom's closure API, so the ring compiles against
/// either.
#[cfg(not(loom))]
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) fn new(v: T) -> Self {
        UnsafeCell(std::cell::UnsafeCell::new(v))
    }
    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }
    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

/// Keeps a value on its own cache lines (128 bytes: x86_64 prefetches line
/// pairs, as crossbeam's `CachePadded` notes), so the producer's and the
/// writer's indices do not share a line.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct CachePadded<T>(pub(crate) T);

impl<T> std::ops::Deref for CachePadded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}
