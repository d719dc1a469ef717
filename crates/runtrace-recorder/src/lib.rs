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
//   writer   -> error, ring, state, sync (and runtrace-profile's Profiler)
//   producer -> config, out, ring, state, sync
//   state    -> config, error, ring, sync
//   ring     -> sync
//   config   -> error
// `session` ties configuration, state and the writer together; producers
// reach a recording through `state` alone (see its rules).
mod config;
mod error;
mod out;
mod producer;
mod ring;
mod session;
mod state;
mod stats;
mod sync;
mod writer;

pub use config::{Config, RecorderBuilder};
pub use error::RecordError;
pub use producer::is_recording;
#[doc(hidden)]
pub use producer::{emit, emit_at, encode_str, encode_task};
pub use runtrace_core::{Istr, Loc, UserEventDef};
pub use runtrace_format::schema::FieldType;
pub use session::{Recorder, RecordingGuard};
pub use stats::RecordStats;

#[doc(hidden)]
pub use runtrace_format::varint as __varint;

/// The Rust argument type of a catalog field type.
#[doc(hidden)]
#[macro_export]
macro_rules! __arg_ty {
    (u64) => {
        u64
    };
    (u32) => {
        u32
    };
    (u16) => {
        u16
    };
    (u8) => {
        u8
    };
    (i64) => {
        i64
    };
    (i32) => {
        i32
    };
    (bool) => {
        bool
    };
    (f64) => {
        f64
    };
    (str) => {
        &str
    };
    (istr) => {
        $crate::Istr
    };
    (loc) => {
        $crate::Loc
    };
    (task) => {
        u64
    };
    (worker) => {
        u32
    };
}

/// The `FieldType` of a catalog field type.
#[doc(hidden)]
#[macro_export]
macro_rules! __field_ty {
    (u64) => {
        $crate::FieldType::U64
    };
    (u32) => {
        $crate::FieldType::U32
    };
    (u16) => {
        $crate::FieldType::U16
    };
    (u8) => {
        $crate::FieldType::U8
    };
    (i64) => {
        $crate::FieldType::I64
    };
    (i32) => {
        $crate::FieldType::I32
    };
    (bool) => {
        $crate::FieldType::Bool
    };
    (f64) => {
        $crate::FieldType::F64
    };
    (str) => {
        $crate::FieldType::Str
    };
}

/// Most bytes a field of this type takes.
#[doc(hidden)]
#[macro_export]
macro_rules! __max_len {
    (bool) => {
        1
    };
    (f64) => {
        8
    };
    (str) => {
        2 + 255
    };
    (worker) => {
        0
    };
    ($t:ident) => {
        10
    };
}

/// Encodes one field at `$buf[$pos..]`, evaluating to the new position.
#[doc(hidden)]
#[macro_export]
macro_rules! __enc {
    ($buf:ident, $pos:ident, $reg:ident, task, $v:expr) => {
        $crate::encode_task($buf, $pos, $reg, $v)
    };
    ($buf:ident, $pos:ident, $reg:ident, worker, $v:expr) => {
        $pos
    };
    ($buf:ident, $pos:ident, $reg:ident, bool, $v:expr) => {{
        $buf[$pos] = $v as u8;
        $pos + 1
    }};
    ($buf:ident, $pos:ident, $reg:ident, f64, $v:expr) => {{
        $buf[$pos..$pos + 8].copy_from_slice(&f64::to_le_bytes($v));
        $pos + 8
    }};
    ($buf:ident, $pos:ident, $reg:ident, str, $v:expr) => {
        $crate::encode_str($buf, $pos, $v)
    };
    ($buf:ident, $pos:ident, $reg:ident, istr, $v:expr) => {
        $crate::__varint::write($buf, $pos, $v.id() as u64)
    };
    ($buf:ident, $pos:ident, $reg:ident, loc, $v:expr) => {
        $crate::__varint::write($buf, $pos, $v.id() as u64)
    };
    ($buf:ident, $pos:ident, $reg:ident, i64, $v:expr) => {
        $crate::__varint::write($buf, $pos, $crate::__varint::zigzag($v))
    };
    ($buf:ident, $pos:ident, $reg:ident, i32, $v:expr) => {
        $crate::__varint::write($buf, $pos, $crate::__varint::zigzag($v as i64))
    };
    ($buf:ident, $pos:ident, $reg:ident, $t:ident, $v:expr) => {
        $crate::__varint::write($buf, $pos, $v as u64)
    };
}

/// `Some(worker)` for a `worker` field, nothing otherwise.
#[doc(hidden)]
#[macro_export]
macro_rules! __note_worker {
    ($w:ident, worker, $v:expr) => {
        $w = Some($v)
    };
    ($w:ident, $t:ident, $v:expr) => {};
}

/// Writes one built-in event field through an [`out::Out`]; at most
/// `__max_len!` of its type bytes.
macro_rules! put {
    ($out:ident, $reg:ident, task, $v:expr) => {
        $out.task($reg, $v)
    };
    ($out:ident, $reg:ident, worker, $v:expr) => {};
    ($out:ident, $reg:ident, bool, $v:expr) => {
        $out.byte($v as u8)
    };
    ($out:ident, $reg:ident, istr, $v:expr) => {
        $out.varint($v.id() as u64)
    };
    ($out:ident, $reg:ident, loc, $v:expr) => {
        $out.varint($v.id() as u64)
    };
    ($out:ident, $reg:ident, i64, $v:expr) => {
        $out.varint($crate::__varint::zigzag($v))
    };
    ($out:ident, $reg:ident, i32, $v:expr) => {
        $out.varint($crate::__varint::zigzag($v as i64))
    };
    // No built-in event has these; `Out` would need a method for each (an
    // `f64` would otherwise fall to the varint arm below through `as`).
    ($out:ident, $reg:ident, f64, $v:expr) => {
        compile_error!("built-in events have no f64 field writer (recorder/src/out.rs)")
    };
    ($out:ident, $reg:ident, str, $v:expr) => {
        compile_error!("built-in events have no str field writer (recorder/src/out.rs)")
    };
    ($out:ident, $reg:ident, $t:ident, $v:expr) => {
        $out.varint($v as u64)
    };
}

/// The body of a built-in event's recording function: `$ticks` is the
/// caller's time (`Some`) or `None` to read the clock.
macro_rules! record_builtin {
    ($ticks:expr, $id:expr, [$($f:ident : $t:ident),*]) => {{
        // `emit_out` returns at once when no recording runs (its one load
        // of the recording generation is the only check).
        let mut worker: Option<u32> = None;
        $( __note_worker!(worker, $t, $f); )*
        // SAFETY: the bound is the sum of the fields' longest encodings
        // (`__max_len!`), and `put!` writes each field within its type's.
        unsafe {
            crate::producer::emit_out($ticks, $id, 0 $(+ __max_len!($t))*, worker, |out: &mut crate::out::Out, reg: &mut u64| {
                let _ = &reg;
                $( put!(out, reg, $t, $f); )*
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
            pub fn $name($($f: __arg_ty!($t)),*) {
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
            pub fn $name(ticks: u64, $($f: __arg_ty!($t)),*) {
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

/// Declares application-defined events, recorded self-described in the
/// same trace as the built-in ones (their schemas travel in the file).
///
/// Field types: `u64 u32 u16 u8 i64 i32 bool f64 str` (`str`: at most 255
/// bytes, longer text is truncated).
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
#[macro_export]
macro_rules! user_events {
    (provider = $prov:literal; $( $(#[$m:meta])* $vis:vis fn $name:ident ( $($f:ident : $t:ident),* $(,)? ); )*) => {
        $(
            $(#[$m])*
            #[inline]
            #[allow(unused_mut, unused_assignments, clippy::too_many_arguments)]
            $vis fn $name($($f: $crate::__arg_ty!($t)),*) {
                static DEF: $crate::UserEventDef = $crate::UserEventDef::new(
                    $prov,
                    stringify!($name),
                    &[$((stringify!($f), $crate::__field_ty!($t))),*],
                );
                if !$crate::is_recording() {
                    return;
                }
                $crate::emit(DEF.id(), 0 $(+ $crate::__max_len!($t))*, None, |buf: &mut [u8], pos: usize, reg: &mut u64| {
                    let _ = &reg;
                    $( let pos = $crate::__enc!(buf, pos, reg, $t, $f); )*
                    pos
                });
            }
        )*
    };
}
