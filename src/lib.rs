//! runtrace: see inside your async runtime.
//!
//! This crate is a thin facade: applications depend on it alone and pick
//! backends with cargo features. Every probe site fires to all of them.
//!
//! | feature | backend |
//! |---|---|
//! | `record` | in-process recording to `trace.N.bin` ([`Recorder`]) |
//! | `usdt` | SystemTap SDT probes for `perf probe`, bpftrace (`docs/probes.md`) |
//! | `lttng` | LTTng-UST tracepoints `runtrace:<event>` |
//! | `perf-probe` | `runtrace_<event>` functions for `perf probe` (`setup_probes.sh`) |
//! | `executor` | the instrumented executor ([`executor`]) |
//! | `tokio` | hooks recording a stock tokio runtime (`tokio::instrument`) |
//! | `taskdump` | with `tokio`: task dumps, where each pending task sits (`tokio::dump()`, `RUNTRACE_TASK_DUMP`; Linux) |
//! | `sync` | named locks, instrumented queues, I/O timing, heartbeats (`runtrace::sync`) |
//! | `object-store` | with `record`: ship sealed segments to object storage (`sink::ObjectStoreSink`; S3 with `object-store-aws`) |
//!
//! With no backend feature a probe site compiles to nothing (its arguments
//! are still type-checked). The trace format is [`format`](mod@format)
//! (`docs/format.md`); its reading side (`FileReader`, the merging
//! `EventStream`, `files`, `check`) comes with the feature `read`, on by
//! default. A build that only fires probes can leave it out, and compile no
//! trace reader: `runtrace = { default-features = false, features =
//! ["usdt"] }` (`record` does not need it either: the recorder only
//! encodes).
//!
//! ```
//! let task_id = 7;
//! // Fields by name, in any order; the values are only computed when some
//! // backend wants the event.
//! runtrace::probe!(task_poll_end { task_id, worker: 0, ready: true });
//! ```

pub use runtrace_core::{Istr, Loc};
pub use runtrace_format as format;

#[cfg(feature = "record")]
pub use runtrace_recorder::{
    is_recording, user_events, RecordError, RecordStats, Recorder, RecorderBuilder, RecordingGuard,
};

/// Where sealed segments are shipped (feature `record`; the object store
/// with feature `object-store`): docs/flight-recorder.md, "Sinks".
#[cfg(feature = "record")]
pub use runtrace_recorder::sink;

/// Sampled heap allocations (feature `alloc`): the global allocator
/// wrapper [`alloc::Sampled`].
#[cfg(feature = "alloc")]
pub mod alloc;

/// Without feature `alloc` there is no allocator wrapper (the doc test
/// checks that this does not compile):
///
/// ```compile_fail
/// static A: runtrace::alloc::Sampled<std::alloc::System> =
///     runtrace::alloc::Sampled::new(std::alloc::System);
/// ```
#[cfg(not(feature = "alloc"))]
#[doc(hidden)]
pub mod __no_alloc_wrapper {}

/// The instrumented executor (feature `executor`).
#[cfg(feature = "executor")]
pub use runtrace_executor as executor;

/// Instrumented locks, queues, I/O timing and heartbeats (feature
/// `sync`): `runtrace::sync::Mutex::new("log", ..)`.
#[cfg(feature = "sync")]
pub use runtrace_sync as sync;
/// Recording of stock tokio runtimes (feature `tokio`):
/// `runtrace::tokio::instrument(&mut builder)`, `runtrace::tokio::layer()`.
#[cfg(feature = "tokio")]
pub use runtrace_tokio as tokio;

/// `#[runtrace::main]` and `#[runtrace::test]` (feature `tokio`): drop-ins
/// for `#[tokio::main]` and `#[tokio::test]` that record the runtime when
/// `RUNTRACE_PATH` is set (docs/recorder.md, "Instrumenting an existing
/// application").
#[cfg(feature = "tokio")]
pub use runtrace_macros::{main, test};

#[cfg(feature = "tokio")]
#[doc(hidden)]
pub mod __entry;

/// The built-in probes (one module per event of `probes/events.toml`).
#[doc(hidden)]
pub use runtrace_probes::builtin as __probes;

/// What generated probe code refers to.
#[doc(hidden)]
pub use runtrace_probes::__rt;

/// One function per built-in event, recording it when a recording runs
/// (the `record` backend alone; [`probe!`] fires every backend).
#[cfg(feature = "record")]
pub mod record {
    pub use runtrace_recorder::events::*;
}

/// Asks for a flight-recorder snapshot (docs/flight-recorder.md): records
/// a `snapshot_request` event with the reason, which becomes a snapshot
/// trigger when the recording lists the reason (or `*`) in
/// `snapshot_on_event` / `RUNTRACE_SNAPSHOT_EVENTS`. Without the `record`
/// feature, or when no recording runs, it does nothing.
///
/// ```
/// runtrace::snapshot!("queue-overflow");
/// ```
#[macro_export]
macro_rules! snapshot {
    ($reason:expr) => {
        $crate::__snapshot($reason)
    };
}

/// What [`snapshot!`] calls.
#[doc(hidden)]
#[inline]
pub fn __snapshot(reason: &str) {
    #[cfg(feature = "record")]
    runtrace_recorder::snapshot_request(reason);
    #[cfg(not(feature = "record"))]
    let _ = reason;
}

/// Fires a probe: a built-in event by name, or an application event by
/// path (`myapp::request_done`, from [`include_provider!`]).
///
/// Fields are given by name (`task_id`, or `task_id: expr`), in any order;
/// a missing or unknown field is a compile error. The values are evaluated
/// only when some enabled backend wants the event.
///
/// ```
/// let q = runtrace::Istr::new("latency");
/// runtrace::probe!(task_poll_start { task_id: 1, worker: 0, queue: q, local_q: 3 });
/// ```
#[macro_export]
macro_rules! probe {
    ($event:ident { $($body:tt)* }) => {
        $crate::probe!(@fire [$crate::__probes::$event] $($body)*)
    };
    ($($seg:ident)::+ { $($body:tt)* }) => {
        $crate::probe!(@fire [$($seg)::+] $($body)*)
    };
    (@fire [$($m:tt)*] $($field:ident $(: $value:expr)?),* $(,)?) => {
        if $($m)*::enabled() {
            $($m)*::fire($($m)*::Args { $($field $(: $value)?),* })
        }
    };
}

/// Includes an application's probes generated by `runtrace_build::provider`
/// in its `build.rs`, as module `$provider`. (Not run as a doc test: it
/// needs that build script; `tests/fixtures/probe-app` is a complete
/// application using it, built and run by `tests/probe_app.rs`.)
///
/// ```ignore
/// runtrace::include_provider!(myapp);
/// runtrace::probe!(myapp::request_done { status: 200, route: "/" });
/// ```
#[macro_export]
macro_rules! include_provider {
    ($provider:ident) => {
        #[allow(clippy::all, unused_imports)]
        pub mod $provider {
            include!(concat!(
                env!("OUT_DIR"),
                "/",
                stringify!($provider),
                "_probes.rs"
            ));
        }
    };
}
