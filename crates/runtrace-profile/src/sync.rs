//! The one place this crate gets its atomics, cells and locks from: loom's
//! under `cfg(loom)` (model tests), std's otherwise. Same idea as tokio's
//! `crate::loom` and `runtrace-recorder/src/sync.rs`. No other module
//! imports from `std::sync::atomic`, `std::cell` or `std::sync::Mutex`.
//!
//! What loom models is the signal sampler's protocol (`signal.rs`: the
//! per-thread sample ring and the handler's slot table): its atomics and
//! its `UnsafeCell` switch to loom's. The rest is std's under both cfgs,
//! on purpose:
//! - `StaticAtomicU32`, `StaticAtomicU64`: words in `static`s (loom's
//!   atomics cannot live there: their constructor is not `const`, and
//!   they exist only inside a model), and the words of memory the kernel
//!   shares with us (the perf rings' `data_head`/`data_tail` in `perf.rs`,
//!   the BPF ring's positions and thread table in `bpf.rs`), outside every
//!   model.
//! - `Mutex`: installing the signal handler, once, outside every model.

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU64, Ordering};

pub(crate) use std::sync::atomic::AtomicU32 as StaticAtomicU32;
pub(crate) use std::sync::atomic::AtomicU64 as StaticAtomicU64;
pub(crate) use std::sync::Mutex;

/// std's `UnsafeCell` with loom's closure API, so the sample ring compiles
/// against either.
#[cfg(not(loom))]
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) const fn new(v: T) -> Self {
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
/// pairs, as crossbeam's `CachePadded` notes), so a sample ring's producer
/// (the signal handler) and consumer (the writer) indices do not share a
/// line.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct CachePadded<T>(pub(crate) T);

impl<T> std::ops::Deref for CachePadded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}
