//! The one place this crate's cross-thread wake path (`inject.rs`) gets its
//! locks and atomics from: loom's under `cfg(loom)` (model tests), std's
//! otherwise. Same idea as tokio's `crate::loom` and
//! `runtrace-recorder/src/sync.rs`.

#[cfg(loom)]
#[allow(unused_imports)] // `Arc` is for the loom models
pub(crate) use loom::sync::{
    atomic::{AtomicBool, Ordering},
    Arc, Mutex,
};

#[cfg(not(loom))]
#[allow(unused_imports)] // `Arc` is for the loom models
pub(crate) use std::sync::{
    atomic::{AtomicBool, Ordering},
    Arc, Mutex,
};
