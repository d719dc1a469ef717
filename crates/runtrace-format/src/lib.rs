//! runtrace trace format v1: event schemas, encoding primitives, frames and a
//! streaming file reader.
//!
//! The normative description is `docs/format.md`; this crate is its
//! reference implementation and has no dependency on the recorder, so tools
//! that only read traces stay small.
//!
//! Two sides, one feature apart. Writers need [`schema`], [`varint`],
//! [`frame`] (encoders, and decoders of single frames) and [`chunk`] (the
//! chunk header and walker); they are always built. The reading side,
//! feature `read` (on by default), adds `reader` (`FileReader`), `merge`
//! (the time-ordered `EventStream`), `value` (decoded events),
//! `per_schema`, `files` (a recording's file names) and `check`.
//! runtrace-core, the probe backends and the recorder use this crate with
//! default features off, so a build that only fires probes or records
//! compiles no reader.
//!
//! ```
//! use runtrace_format::{schema::BUILTIN_EVENTS, varint};
//! // The built-in catalog comes from probes/events.toml.
//! assert!(BUILTIN_EVENTS.iter().any(|e| e.name == "task_poll_start"));
//! let mut buf = Vec::new();
//! varint::put(&mut buf, 300);
//! assert_eq!(buf, [0xAC, 0x02]);
//! ```

#![warn(missing_docs)]

// The writing side (and what reading builds on).
pub mod chunk;
pub mod civil;
pub mod dense;
pub mod frame;
pub mod partition;
pub mod schema;
pub mod varint;

// The reading side.
#[cfg(feature = "read")]
pub mod check;
#[cfg(feature = "read")]
pub mod files;
#[cfg(feature = "read")]
pub mod merge;
#[cfg(feature = "read")]
pub mod output;
#[cfg(feature = "read")]
pub mod per_schema;
#[cfg(feature = "read")]
pub mod reader;
#[cfg(feature = "read")]
pub mod value;

#[cfg(feature = "read")]
pub use reader::{EndTotal, ErrorKind, FileReader, ReadError, Record};
pub use schema::{FieldType, Schema, SchemaField};
#[cfg(feature = "read")]
pub use value::{Event, Value};

/// The 8 bytes every trace file starts with.
pub const MAGIC: &[u8; 8] = b"RUNTRACE";
/// Major format version written and understood by this crate.
pub const VERSION_MAJOR: u64 = 1;
/// Minor format version written by this crate (1.1: CPU profiles, the
/// `STACKS`, `MAPPINGS` and `PROFILE` frames; 1.2: the `FINISH` frame, a
/// recording's end; 1.3: the `DCHUNK` frame, dense records, [`dense`]).
pub const VERSION_MINOR: u64 = 3;
/// Largest frame payload a reader accepts; longer frames are corrupt.
pub const MAX_FRAME_LEN: u32 = 64 << 20;
/// Longest inline `str` field, in bytes.
pub const MAX_INLINE_STR: usize = 255;
/// Most fields an event may have.
pub const MAX_FIELDS: usize = 32;
/// Worker register value meaning "not a worker".
pub const NO_WORKER: u32 = u32::MAX;
/// First event type id available to application-defined events.
pub const FIRST_USER_EVENT_ID: u32 = 128;
/// Tag byte that escapes to a varint type id.
pub const TAG_ESCAPE: u8 = 255;
/// Type id of the `set_worker` record.
pub const SET_WORKER: u32 = 0;
