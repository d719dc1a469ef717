//! runtrace's in-process recorder: lock-free per-thread buffers, a writer
//! thread, rotation and eviction, writing trace format v1
//! (`docs/format.md`).
//!
//! ```no_run
//! use runtrace_recorder::{Istr, Loc, Recorder};
//! let guard = Recorder::builder().path("out/trace").start()?;
//! let q = Istr::new("latency");
//! runtrace_recorder::task_spawn(1, 0, Loc::caller(), q);
//! runtrace_recorder::task_poll_start(1, 0, q, 0);
//! runtrace_recorder::task_poll_end(1, 0, true);
//! runtrace_recorder::task_terminate(1);
//! let stats = guard.finish()?;
//! assert_eq!(stats.events, 4);
//! # Ok::<(), runtrace_recorder::RecordError>(())
//! ```
//!
//! Built-in events get one function each, generated from
//! `probes/events.toml`; applications declare their own with
//! [`user_events!`].

#![warn(missing_docs)]

// Module dependencies (a DAG: nothing imports back):
//   session  -> config, error, state, writer
//   writer   -> error, ring, rules, sink, snapshot, state, store, sync, trigger (and
//               runtrace-profile's Profiler)
//   rules    -> (runtrace-format only)
//   snapshot -> sink, store
//   sink     -> error (and runtrace-format's partition names)
//   store    -> error
//   trigger  -> error
//   producer -> config, out, ring, state, sync
//   state    -> config, error, ring, sync
//   ring     -> sync
//   config   -> error, sink
// `session` ties configuration, state and the writer together; producers
// reach a recording through `state` alone (see its rules).
mod config;
mod error;
mod out;
mod producer;
mod ring;
mod rules;
mod session;
pub mod sink;
mod snapshot;
mod state;
mod stats;
mod store;
mod sync;
mod trigger;
mod writer;

pub use config::{signal_by_name, Config, RecorderBuilder};
pub use error::RecordError;
pub use producer::is_recording;
#[doc(hidden)]
pub use producer::{emit, emit_at};
pub use runtrace_core::{Istr, Loc, UserEventDef};
pub use runtrace_format::schema::FieldType;
pub use session::{Recorder, RecordingGuard};
pub use stats::RecordStats;

// The per-type facts of every field type (argument types, `FieldType`s,
// longest encodings, encoding statements) come from one generated macro:
// runtrace-format's build script writes it from runtrace-build's table of
// field types, so no macro here has an arm per type.
#[doc(hidden)]
pub use runtrace_format::__field_type;
#[doc(hidden)]
pub use runtrace_format::schema::wire::SliceSink;

/// The body of a built-in event's recording function: `$ticks` is the
/// caller's time (`Some`) or `None` to read the clock.
macro_rules! record_builtin {
    ($ticks:expr, $id:expr, [$($f:ident : $t:ident),*]) => {{
        // `emit_out` returns at once when no recording runs (its one load
        // of the recording generation is the only check).
        let mut worker: Option<u32> = None;
        $( $crate::__field_type!(worker worker $t $f); )*
        // SAFETY: the bound is the sum of the fields' longest encodings
        // (`max`), and each `put` writes its field by its type's encoding,
        // within that type's longest.
        unsafe {
            crate::producer::emit_out($ticks, $id, 0 $(+ $crate::__field_type!(max $t))*, worker, |out: &mut crate::out::Out, reg: &mut u64| {
                let _ = &reg;
                $( $crate::__field_type!(put out reg $t $f); )*
            })
        }
    }};
}

macro_rules! gen_builtin_fns {
    ($( ($name:ident, $id:expr, $json:expr, $doc:expr, [$($f:ident : $t:ident),* $(,)?]) )*) => {
        $(
            #[doc = concat!("Records `", stringify!($name), "`: ", $doc)]
            ///
            /// Costs one relaxed load and a branch when no recording runs.
            #[inline]
            #[allow(unused_mut, unused_assignments, clippy::too_many_arguments)]
            pub fn $name($($f: $crate::__field_type!(arg [$crate] $t)),*) {
                record_builtin!(None, $id, [$($f: $t),*])
            }
        )*
    };
}

macro_rules! gen_builtin_fns_at {
    ($( ($name:ident, $id:expr, $json:expr, $doc:expr, [$($f:ident : $t:ident),* $(,)?]) )*) => {
        $(
            #[doc = concat!("Records `", stringify!($name), "` at a time the caller read (trace ticks).")]
            #[inline]
            #[allow(unused_mut, unused_assignments, clippy::too_many_arguments)]
            pub fn $name(ticks: u64, $($f: $crate::__field_type!(arg [$crate] $t)),*) {
                record_builtin!(Some(ticks), $id, [$($f: $t),*])
            }
        )*
    };
}

/// One recording function per built-in event, generated from
/// `probes/events.toml` (also re-exported at the crate root).
pub mod events {
    runtrace_format::for_each_builtin_event!(gen_builtin_fns);

    /// The same functions taking the event's time (trace ticks) from the
    /// caller, for callers that read the clock once for several events.
    pub mod at {
        runtrace_format::for_each_builtin_event!(gen_builtin_fns_at);
    }
}
pub use events::*;

/// Asks for a flight-recorder snapshot from anywhere in the application:
/// records a `snapshot_request` event with `reason` on this thread. The
/// writer thread turns it into a snapshot trigger (reason `reason`) when
/// the recording lists the reason, or `*`, in
/// [`snapshot_on_event`](crate::RecorderBuilder::snapshot_on_event)
/// (`RUNTRACE_SNAPSHOT_EVENTS`); otherwise it stays a mark in the trace.
/// Costs what any event with a string field costs; nothing when no
/// recording runs.
///
/// ```no_run
/// let guard = runtrace_recorder::Recorder::builder()
///     .path("/var/tmp/myapp/trace")
///     .in_memory(64 << 20)
///     .snapshot_on_event("*")
///     .start()?;
/// runtrace_recorder::snapshot!("cache-stampede");
/// guard.finish()?;
/// # Ok::<(), runtrace_recorder::RecordError>(())
/// ```
#[macro_export]
macro_rules! snapshot {
    ($reason:expr) => {
        $crate::snapshot_request($reason)
    };
}

/// Declares application-defined events, recorded self-described in the
/// same trace as the built-in ones (their schemas travel in the file).
///
/// Field types: those of the catalog but `task` and `worker`, which are
/// the built-in events' (`u64 u32 u16 u8 i64 i32 bool f64 str istr loc`;
/// `str`: at most 255 bytes, longer text is truncated).
///
/// ```no_run
/// runtrace_recorder::user_events! {
///     provider = "myapp";
///     /// A request finished.
///     pub fn request_done(status: u16, latency_us: u64, ok: bool, route: str);
/// }
/// let g = runtrace_recorder::Recorder::builder().path("t/trace").start()?;
/// request_done(200, 1500, true, "/api/users");
/// g.finish()?;
/// # Ok::<(), runtrace_recorder::RecordError>(())
/// ```
///
/// ```compile_fail
/// // `task` and `worker` are the built-in events' registers.
/// runtrace_recorder::user_events! {
///     provider = "myapp";
///     pub fn job(task: task);
/// }
/// ```
#[macro_export]
macro_rules! user_events {
    (provider = $prov:literal; $( $(#[$m:meta])* $vis:vis fn $name:ident ( $($f:ident : $t:ident),* $(,)? ); )*) => {
        $(
            $(#[$m])*
            #[inline]
            #[allow(unused_mut, unused_assignments, clippy::too_many_arguments)]
            $vis fn $name($($f: $crate::__field_type!(arg [$crate] $t)),*) {
                static DEF: $crate::UserEventDef = $crate::UserEventDef::new(
                    $prov,
                    stringify!($name),
                    &[$((stringify!($f), $crate::__field_type!(app_variant $t))),*],
                );
                if !$crate::is_recording() {
                    return;
                }
                $crate::emit(DEF.id(), 0 $(+ $crate::__field_type!(max $t))*, None, |sink: &mut $crate::SliceSink<'_>, reg: &mut u64| {
                    let _ = &reg;
                    $( $crate::__field_type!(put sink reg $t $f); )*
                });
            }
        )*
    };
}
