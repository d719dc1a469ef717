//! runtrace exporters: a recording's trace files turned into formats other
//! tools read. This is the exporters layer of the data flow (trace files ->
//! [`runtrace_format`] reader -> exporter); one module per output format.
//!
//! - [`jsonl`]: JSON Lines, one object per event in timestamp order
//!   (`runtrace jsonl`, `examples/trace_to_jsonl.rs`, the user guide's
//!   Python snippets).
//! - [`perfetto`]: a Perfetto TrackEvent timeline (`runtrace perfetto`).
//! - [`report`]: a self-contained HTML report (`runtrace report`).
//! - [`flamegraph`]: folded stacks and SVG flame graphs of the CPU
//!   profile (`runtrace flamegraph`, `runtrace blocked --folded-out`).
//!
//! ```no_run
//! use std::path::{Path, PathBuf};
//! let code = runtrace_export::jsonl::convert(&[PathBuf::from("trace.0.bin")], Some(Path::new("trace.jsonl")));
//! # let _ = code;
//! ```

#![warn(missing_docs)]

pub mod flamegraph;
pub mod jsonl;
pub mod perfetto;
pub mod report;
