//! Perfetto timeline export (`runtrace perfetto`): trace files to a
//! Perfetto TrackEvent protobuf trace, the format ui.perfetto.dev opens.
//!
//! One process track per recording, one thread track per thread (named
//! `tokio worker N`, `executor N` or by the thread's name), a slice per
//! poll named by the task's spawn location (task id, local queue depth,
//! worker as debug annotations), parked stretches as slices, a flow arrow
//! from each spawn and each wake to the poll it caused, counter tracks for
//! every worker's local queue, the global queue, named executor queues and
//! runtrace-sync's queues, and the application events: lock waits and holds,
//! I/O and processing as slices (on lanes under their thread), drops,
//! backlog triggers and heartbeats as instants, and the profiles: each
//! CPU sample, off-CPU stack and allocation sample as a callstack sample
//! on its thread (symbolized, [`OFF_CPU_ROOT`] at the root of off-CPU
//! stacks, [`ALLOC_ROOT`] at the root of allocations; trace processor's
//! `perf_sample` table), and flight-recorder snapshot triggers as
//! instants on their process track (`snapshot: <reason>`). Names,
//! frames and callstacks are
//! interned (`interned_data`, one sequence with incremental state).
//!
//! It is a [pass](runtrace_model::pass::Pass) over one streaming read, so
//! memory is bounded by the trace's concurrency (live tasks, open slices,
//! tracks), not its length; the output is written as it goes.
//!
//! ```
//! use runtrace_model::synth::TraceBuilder;
//! let mut b = TraceBuilder::new();
//! b.location(1, "src/main.rs", 10, 5);
//! b.spawn(7, 1_000, 1, 0, 1, 0);
//! b.poll_start(7, 0, 2_000, 1, 0, 0);
//! b.poll_end(7, 0, 5_000, 1, true);
//! let dir = tempfile::tempdir().unwrap();
//! let input = dir.path().join("trace.0.bin");
//! std::fs::write(&input, b.finish()).unwrap();
//! let out = dir.path().join("trace.pftrace");
//! let r = runtrace_export::perfetto::convert(&[input], &out).unwrap();
//! assert_eq!((r.stats.polls, r.stats.flows_joined), (1, 1));
//! assert!(r.errors.is_empty());
//! ```

mod pass;
pub mod proto;
mod samples;
pub mod writer;

pub use pass::{ExportStats, Exporter};
pub use samples::{ALLOC_ROOT, NO_STACK, OFF_CPU_ROOT};

use runtrace_format::output::{refuse_input, AtomicFile};
use std::io::BufWriter;
use std::path::{Path, PathBuf};

/// The result of a conversion.
#[derive(Debug, Default)]
pub struct Converted {
    /// What was written.
    pub stats: ExportStats,
    /// Events read (all types).
    pub events: u64,
    /// Damage in the input (file and byte offset); what was readable was
    /// converted.
    pub errors: Vec<String>,
    /// What a user should know about what the timeline does not show.
    pub notes: Vec<String>,
}

/// Converts the trace files `paths` (any order; `trace.N.bin` sorted by N)
/// to a Perfetto trace at `out`. `Err` names the output file when it
/// cannot be created or written; damage in the input is in
/// [`Converted::errors`] and the readable part is converted.
pub fn convert<P: AsRef<Path>>(paths: &[P], out: &Path) -> Result<Converted, String> {
    let paths: Vec<PathBuf> = runtrace_model::input::sorted(paths);
    refuse_input(out, &paths)?;
    // Complete or not at all: renamed into place once written.
    let file =
        AtomicFile::create(out).map_err(|e| format!("{}: cannot create: {e}", out.display()))?;
    let mut ex = Exporter::new(BufWriter::with_capacity(1 << 20, file));
    let (_model, stats) = runtrace_model::input::read(&paths, &mut ex, None);
    let symbols = ex.symbol_problems();
    let (buffered, err, written) = ex.finish_output();
    if let Some(e) = err {
        return Err(format!("{}: cannot write: {e}", out.display()));
    }
    buffered
        .into_inner()
        .map_err(|e| e.into_error())
        .and_then(AtomicFile::commit)
        .map_err(|e| format!("{}: cannot write: {e}", out.display()))?;
    let shown = written.polls
        + written.parks
        + written.instants
        + written.app_slices
        + written.counter_values
        + written.cpu_samples
        + written.off_cpu_samples
        + written.alloc_samples;
    let mut notes: Vec<String> = (stats.events > 0 && shown == 0)
        .then(|| {
            format!(
                "none of the trace's {} events is of a kind the timeline shows (tasks, workers, queues, runtrace-sync's locks, queues and I/O, CPU samples): user-defined events are not exported; the file holds the recordings' process tracks only",
                stats.events
            )
        })
        .into_iter()
        .collect();
    notes.extend(symbols.into_iter().map(|p| format!("samples' stacks: {p}")));
    Ok(Converted {
        stats: written,
        events: stats.events,
        notes,
        errors: if stats.damaged {
            stats.errors
        } else {
            Vec::new()
        },
    })
}
