//! `runtrace top`: a live view of a recording being written, and replay
//! of a finished one with pause, step, seek and rewind, in one terminal
//! view: workers, spawn locations and live findings over a sliding window.
//!
//! The analysis is `runtrace analyze`'s, not a copy: every window is run
//! through runtrace-analyze's runtime engine (its pass and its findings'
//! rules) over the window's events; this crate only chooses the windows
//! and shows them. Modules, data first:
//! - [`lives`] keeps what was alive when: task lives (their spawn
//!   locations) and the application's span lives (their names);
//! - [`window`] analyses one window (the engine, plus [`window::Now`]:
//!   what each worker polls at the window's end, and the CPU samples of
//!   each location's polls when the recording has a CPU profile), seeding
//!   the tasks and spans alive at its start;
//! - [`stagger`] computes the windows while following from one lifecycle
//!   tracker, each event through it once, its records handed to the pass
//!   of every window still open, and [`shared_now`] keeps what
//!   [`window::Now`] says once for all of them ([`workers`]: state per
//!   worker, looked up at every poll);
//! - [`heap`] follows the memory profile (sampled heap bytes live and
//!   allocated in a window), when the trace has one;
//! - [`snapshot`] turns a window into rows (header, workers, locations,
//!   spans, findings with their age) and into text or JSON (`--once`);
//! - [`source`] gives the windows: [`source::Live`] follows a recording
//!   as it is written (runtrace-model's `input::follow`), in memory
//!   bounded by the window; [`source::Replay`] reads a finished one into
//!   an index and computes the window at any position;
//! - `ui` (feature `ui`, default) is the terminal: state and keys,
//!   drawing, the loop.
//!
//! ```
//! use runtrace_model::synth::TraceBuilder;
//! use runtrace_top::source::{Options, Replay};
//! let dir = tempfile::tempdir().unwrap();
//! let mut b = TraceBuilder::new();
//! b.location(1, "src/main.rs", 3, 1);
//! b.spawn(7, 1_000, 1, 0, 1, 0);
//! b.poll_start(7, 0, 2_000, 1, 0, 0);
//! b.poll_end(7, 0, 80_000_000, 1, true); // an 80 ms poll
//! std::fs::write(dir.path().join("trace.0.bin"), b.finish()).unwrap();
//! let mut r = Replay::open(dir.path(), Options::default()).unwrap();
//! let s = r.snapshot();
//! assert!(s.to_text().contains("long_poll"));
//! assert_eq!(s.to_json()["findings"][0]["cause"], "src/main.rs:3:1");
//! ```

#![warn(missing_docs)]

pub mod heap;
pub mod lives;
pub mod shared_now;
pub mod snapshot;
pub mod source;
pub mod stagger;
#[cfg(feature = "ui")]
pub mod ui;
pub mod window;
pub mod workers;
