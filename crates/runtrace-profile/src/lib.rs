//! runtrace's profilers: sample the user stacks of a recording's threads
//! (on-CPU at a rate, off-CPU at each switch-out) and turn the samples into
//! trace format 1.1's `cpu_sample` / `off_cpu` events and `PROFILE`,
//! `MAPPINGS` and `STACKS` frames (`docs/format.md`). That is this crate's
//! one job; writing the frames to files is the recorder's.
//!
//! The recorder (`runtrace-recorder`) drives a [`Profiler`] from its writer
//! thread ("the writer" throughout this crate) through a small interface:
//! [`Profiler::start`] with a rate and a [`CpuBackend`],
//! [`Profiler::add_thread`] / [`Profiler::remove_thread`] as threads join
//! and leave, and per writer round [`Profiler::collect`] (the [`RawSample`]s
//! up to the round's watermark), [`Profiler::encode`] (their frames, an
//! [`Encoded`]) and, if writing them failed, [`Profiler::undo`];
//! [`Profiler::file_start`] whenever a file opens. Nothing here runs on
//! the application's threads except the signal fallback's handler.
//!
//! ```
//! use runtrace_profile::{CpuBackend, Profiler, RawKind, RawSample};
//! let clock = runtrace_core::clock::TraceClock::get();
//! // `Off` samples nothing: enough to show the frames (see `Profiler` for
//! // sampling for real, which needs a kernel that allows it).
//! let mut p = Profiler::start(99, CpuBackend::Off, false, clock);
//! let mut file = Vec::new();
//! p.file_start(&mut file);
//! let s = RawSample { tid: 7, ticks: 100, kind: RawKind::OnCpu, stack: vec![0x1000, 0x2000] };
//! let round = p.encode(&[s], 1);
//! file.extend_from_slice(&round.defs); // STACKS
//! file.extend_from_slice(&round.chunk); // one cpu_sample event
//! ```
//!
//! Modules, in data-flow order (`profiler` uses the others; none of them
//! imports it, and the samplers share only `sample`):
//! - the samplers, picked once at start: `perf` (`perf_event_open`: on-CPU
//!   events per CPU or per thread, off-CPU per thread; lock-free reads of
//!   their mmap rings), `bpf` (off-CPU stacks from the `sched:sched_switch`
//!   tracepoint through a BPF program written as instructions, and a
//!   lock-free reader of its ring) with `btf` (a field's offset in the
//!   kernel's BTF, for the program) and `signal` (the CPU-time timer +
//!   SIGPROF fallback: an async-signal-safe frame-pointer walk into
//!   per-thread SPSC rings, with loom models);
//! - `sample`: the [`RawSample`] every sampler produces, and the clock
//!   pair they convert kernel times with;
//! - `maps`: the executable mappings (and build ids) the stacks point into;
//! - `intern`: stack ids, each stack defined once per file;
//! - `profiler`: the [`Profiler`], which picks the samplers and encodes;
//! - `sync`: the atomics and cells, loom's under `cfg(loom)`
//!   (`RUSTFLAGS="--cfg loom" cargo test -p runtrace-profile --release
//!   --lib loom_`).
//!
//! - `alloc`: sampled heap allocations (Poisson by bytes), which an
//!   allocator wrapper (`runtrace::alloc::Sampled`) feeds through
//!   [`alloc::on_alloc`]; a static lock-free queue the writer drains.

#![warn(missing_docs)]
// Under `--cfg loom` (.ci/run's loom models) this crate is also built as a
// dependency of the other crates' models, where the code that uses its
// lock-free queue and live table is compiled out: unused there, not dead.
#![cfg_attr(loom, allow(dead_code))]

// Modules in data-flow order (a blank line between them keeps rustfmt
// from sorting them).

// Sampler: perf_event_open's rings.
mod perf;

// Sampler: off-CPU stacks through BPF, and the kernel BTF lookup it needs.
mod bpf;
mod btf;

// Sampler: the timer + SIGPROF fallback.
mod signal;

// Sampler: heap allocations, called by an allocator wrapper.
pub mod alloc;

// The live set's address table (alloc's frees of sampled allocations).
mod live;

// What every sampler hands over.
mod sample;

// Where the stacks point: executable mappings.
mod maps;

// Stacks completed past a leaf without a frame pointer (.eh_frame).
mod unwind;

// Stack ids.
mod intern;

// The interface the recorder drives.
mod profiler;

// Atomics and cells (loom's under cfg(loom)).
mod sync;

pub use profiler::{CpuBackend, Encoded, Profiler, Undo};
pub use sample::{RawKind, RawSample};
