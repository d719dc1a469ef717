//! runtrace's built-in probe sites, generated from `probes/events.toml` for
//! the backends enabled as features (`usdt`, `lttng`, `perf-probe`,
//! `record`). With none enabled every probe compiles to nothing.
//!
//! Applications fire these through the facade's `runtrace::probe!` macro;
//! each event is a module with `Args`, `enabled()` and `fire()`:
//!
//! ```
//! use runtrace_probes::builtin::task_poll_end;
//! if task_poll_end::enabled() {
//!     task_poll_end::fire(task_poll_end::Args { task_id: 7, worker: 0, ready: true });
//! }
//! ```

#![warn(missing_docs)]

mod cstr;

/// What generated probe code (here and in applications) refers to.
#[doc(hidden)]
pub mod __rt {
    pub use crate::cstr::CStrBuf;
    pub use runtrace_core::{Istr, Loc, UserEventDef};
    pub use runtrace_format::schema::wire;
    pub use runtrace_format::schema::FieldType;
    #[cfg(feature = "record")]
    pub use runtrace_recorder as recorder;
}

/// The built-in events, one module each.
pub mod builtin {
    include!(concat!(env!("OUT_DIR"), "/runtrace_probes.rs"));
}

pub use runtrace_core::{Istr, Loc};

/// Whether a backend that starts listening without telling this process
/// is compiled in (USDT and LTTng-UST are switched on by outside tools,
/// perf-probe functions are probed from outside). When false, only the
/// recorder listens, and it announces its starts and ends through
/// [`runtrace_core::listeners`]: code may then cache `enabled()` until
/// the next change.
///
/// ```
/// let cached_ok = !runtrace_probes::EXTERNAL_BACKENDS;
/// # let _ = cached_ok;
/// ```
pub const EXTERNAL_BACKENDS: bool = cfg!(any(
    feature = "usdt",
    feature = "lttng",
    feature = "perf-probe"
));
