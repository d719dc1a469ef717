//! The runtrace trace model: what a recording *is*, read from its files,
//! with no analysis in it. Every analysis, exporter and tool above builds
//! on this crate.
//!
//! Modules, data flow first:
//! - [`input`] reads the files once, in bounded memory: chunks are walked
//!   without building `Event`s ([`runtrace_format::reader::FileReader::next_raw`]),
//!   the events some pass reads are kept as 32-byte [`event::Ev`]s (which
//!   built-in event is which kind, and which field is which, comes from the
//!   catalog, `probes/events.toml`), put in timestamp order one writer
//!   round behind (docs/format.md section 8), and handed to
//!   [passes](pass::Pass), while it fills the [`model::Model`]: processes,
//!   threads, spawn locations and names.
//! - [`event`] is the compact event and its kinds; [`kinds`] names them.
//! - [`model`] is a recording's identity (processes, threads, locations,
//!   names, stacks, mappings).
//! - [`records`] is what the lifecycle layer hands a pass ([`records::Life`]
//!   and the polls, tasks, wakes and spans it carries), data only, below
//!   the pass trait and the trackers.
//! - [`pass`] is the trait every analysis and exporter implements, and
//!   [`lifecycle`] pairs the task lifecycle once for all of them (a poll
//!   with its task, location, worker and the wake it answers; a task's
//!   spawn, parent, first poll and end).
//! - [`spans`] pairs the application's spans (enter with exit, each with
//!   the poll it ran in; a span's life from creation to close) for the
//!   lifecycle layer.
//! - [`profile`] attributes CPU samples (`cpu_sample`, `off_cpu`) to the
//!   poll, task, spawn location and worker they were taken in.
//! - [`hist`] is the fixed-precision histogram the reports share, and
//!   [`fmt_ns`] their duration format.
//! - [`synth`] builds trace files for tests and examples.
//!
//! ```
//! use runtrace_model::{input, synth::TraceBuilder};
//! # use runtrace_model::{event::{kind, Ev}, model::Model, pass::{Pass, Wants}};
//! # #[derive(Default)] struct Polls(u64);
//! # impl Pass for Polls {
//! #     fn wants(&self) -> Wants { Wants::RUNTIME }
//! #     fn event(&mut self, ev: &Ev, _: &Model) { self.0 += (ev.kind == kind::POLL_START) as u64 }
//! # }
//! let mut b = TraceBuilder::new();
//! b.poll_start(1, 0, 1_000, 7, 0, 0);
//! b.poll_end(1, 0, 3_000, 7, true);
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("trace.0.bin");
//! std::fs::write(&path, b.finish()).unwrap();
//! let mut polls = Polls::default();
//! let (model, stats) = input::read(&[path], &mut polls, None);
//! assert_eq!((polls.0, stats.events, model.threads.len()), (1, 2, 1));
//! ```

#![warn(missing_docs)]

pub mod event;
pub mod fxhash;
pub mod hist;
pub mod idmap;
pub mod input;
pub mod kinds;
pub mod lifecycle;
pub mod model;
pub mod pass;
pub mod profile;
pub mod records;
pub mod spans;
pub mod synth;
mod units;
pub mod waits;

pub use units::{fmt_ns, parse_duration, parse_seconds, shown_name, MAX_SHOWN_NAME};
