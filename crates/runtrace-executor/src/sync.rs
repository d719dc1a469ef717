//! The one place this crate gets its atomics, cells and locks from: loom's
//! under `cfg(loom)` (model tests), std's otherwise. Same idea as tokio's
//! `crate::loom` and `runtrace-recorder/src/sync.rs`. No other module
//! imports from `std::sync::atomic`, `std::cell` or `std::sync::Mutex`.
//!
//! What loom models is the cross-thread wake path (`inject.rs`). Always
//! std's, on purpose:
//! - `StaticAtomicU32`/`StaticAtomicU64`: id counters in `static`s, which
//!   loom's atomics cannot be (their constructor is not `const`, and they
//!   exist only inside a model). Tokio's shim has the same alias.
//! - `Cell`, `RefCell`: thread-confined (thread-locals, and
//!   the owner-only state of ownership rule 1), so there is nothing for a
//!   model to interleave.

#[cfg(loom)]
#[allow(unused_imports)] // `Arc` is for the loom models
pub(crate) use loom::sync::{
    atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
    Arc, Mutex,
};

#[cfg(not(loom))]
#[allow(unused_imports)] // `Arc` is for the loom models
pub(crate) use std::sync::{
    atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
    Arc, Mutex,
};

pub(crate) use std::cell::{Cell, RefCell};
pub(crate) use std::sync::atomic::{AtomicU32 as StaticAtomicU32, AtomicU64 as StaticAtomicU64};
