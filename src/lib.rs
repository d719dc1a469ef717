//! runtrace: see inside your async runtime.
//!
//! This crate is a thin facade: applications depend on it alone and pick
//! what they need with cargo features.
//!
//! | feature | what it adds |
//! |---|---|
//! | `record` | in-process recording to `trace.N.bin` files ([`Recorder`], [`record`]) |
//!
//! The trace format (always available, for tools that read traces) is
//! [`format`]; it is specified in `docs/format.md`.
//!
//! ```no_run
//! # #[cfg(feature = "record")]
//! # fn main() -> Result<(), runtrace::RecordError> {
//! let guard = runtrace::Recorder::builder().path("traces/trace").start()?;
//! runtrace::record::task_spawn(1, 0, runtrace::Loc::caller(), runtrace::Istr::EMPTY);
//! let stats = guard.finish()?;
//! println!("{} events in {} file(s)", stats.events, stats.files);
//! # Ok(()) }
//! # #[cfg(not(feature = "record"))]
//! # fn main() {}
//! ```

pub use runtrace_format as format;

#[cfg(feature = "record")]
pub use runtrace_recorder::{
    is_recording, user_events, Istr, Loc, RecordError, RecordStats, Recorder, RecorderBuilder,
    RecordingGuard,
};

/// One function per built-in event (generated from `probes/events.toml`),
/// recording it when a recording runs.
#[cfg(feature = "record")]
pub mod record {
    pub use runtrace_recorder::events::*;
}
