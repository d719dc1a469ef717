//! The HTML report (`runtrace report`): one self-contained page for a
//! person on call. Summary, findings first, per-worker utilisation over
//! time (with a line at each flight-recorder snapshot trigger, and a table
//! of them), poll-duration and wake->poll histograms, the top spawn locations,
//! the tokio resources waited on most when the trace has resource events,
//! and the backlog timeline with each trigger's verdict when the trace has
//! runtrace-sync events, the CPU flame graphs when the trace has a CPU
//! profile, and the sampled heap bytes live over time when it has a
//! memory profile with the live set. Inline CSS and SVG, no script, nothing loaded from the network;
//! aggregates only, so its size does not grow with the trace.
//!
//! One streaming read feeds four passes: `runtrace_analyze`'s runtime
//! engine, backlog pass and CPU profile (when the trace has one: findings
//! then name their functions, as `runtrace analyze` does), and
//! [`charts::Charts`].
//!
//! ```
//! use runtrace_model::synth::TraceBuilder;
//! let mut b = TraceBuilder::new();
//! b.location(1, "src/main.rs", 10, 5);
//! b.spawn(7, 1_000, 1, 0, 1, 0);
//! b.poll_start(7, 0, 2_000, 1, 0, 0);
//! b.poll_end(7, 0, 60_000_000, 1, true); // a 60 ms poll: a finding
//! let dir = tempfile::tempdir().unwrap();
//! let input = dir.path().join("trace.0.bin");
//! std::fs::write(&input, b.finish()).unwrap();
//! let out = dir.path().join("report.html");
//! let r = runtrace_export::report::write(&[input], &out).unwrap();
//! assert!(r.errors.is_empty(), "{:?}", r.errors);
//! assert!(r.findings >= 1); // the long poll
//! assert!(std::fs::read_to_string(&out).unwrap().contains("long poll"));
//! ```

pub mod charts;
pub mod html;

use crate::flamegraph::{fold, stacks, svg, Selection};
use runtrace_analyze::backlog::{Backlog, BacklogOptions};
use runtrace_analyze::functions::StackNames;
use runtrace_analyze::runtime::{Engine, WhenProfiled};
use runtrace_analyze::Thresholds;
use runtrace_format::output::{refuse_input, AtomicFile};
use runtrace_model::profile::Profile;
use std::io::Write;
use std::path::{Path, PathBuf};

/// What [`write()`] wrote.
#[derive(Debug, Default)]
pub struct Written {
    /// Bytes of the page.
    pub bytes: u64,
    /// Events read.
    pub events: u64,
    /// Findings shown.
    pub findings: usize,
    /// Damage in the input (file and byte offset); the page covers what
    /// was readable.
    pub errors: Vec<String>,
}

/// Reads `paths` once and writes the report page to `out`. `Err` names the
/// output file when it cannot be written.
pub fn write<P: AsRef<Path>>(paths: &[P], out: &Path) -> Result<Written, String> {
    let paths: Vec<PathBuf> = runtrace_model::input::sorted(paths);
    refuse_input(out, &paths)?;
    // Fail on an unwritable path before reading a large trace; the page
    // appears complete or not at all.
    let mut file =
        AtomicFile::create(out).map_err(|e| format!("{}: cannot create: {e}", out.display()))?;
    let backlog_opts = BacklogOptions::default();
    let mut passes = (
        Engine::new(Thresholds::default()),
        (
            Backlog::new(&backlog_opts),
            (charts::Charts::default(), WhenProfiled::new(&paths)),
        ),
    );
    let (model, stats) = runtrace_model::input::read(&paths, &mut passes, None);
    let mut r = passes.0.report(&model, stats.clone());
    let (backlog, (mut charts, profiled)) = passes.1;
    let profile = profiled.pass.profile(&model, stats.clone());
    let (mut flames, mut notes) = (Vec::new(), Vec::new());
    if profile.has_samples() {
        let mut names = StackNames::recorded(&profile);
        r.add_functions(&profile, &mut names);
        flames = flame_graphs(&profile, &mut names);
        notes = names.problems();
    }
    charts.live =
        runtrace_analyze::memory::live_over_time(&profile, r.duration_ns, charts::BUCKETS);
    let b = backlog.report(&model, stats);
    let page = html::render(&r, &b, &charts, &model, &flames, &notes);
    file.write_all(page.as_bytes())
        .and_then(|()| file.commit())
        .map_err(|e| format!("{}: cannot write: {e}", out.display()))?;
    Ok(Written {
        bytes: page.len() as u64,
        events: r.events,
        findings: r.findings.len(),
        errors: if r.is_damaged() { r.errors } else { Vec::new() },
    })
}

/// The flame graphs of the page's CPU section: all on-CPU samples, then
/// all off-CPU time, as `runtrace flamegraph -o` draws them (one kind is
/// left out when the trace has no samples of it).
fn flame_graphs(profile: &Profile, names: &mut StackNames) -> Vec<html::Flame> {
    [false, true]
        .into_iter()
        .filter_map(|off_cpu| {
            let sel = Selection {
                off_cpu,
                ..Selection::default()
            };
            let folded = fold(stacks(profile, &sel, names));
            let title = if off_cpu {
                "Off-CPU time (µs), the application's threads (runtrace's own left out)"
            } else {
                "On-CPU samples, the application's threads (runtrace's own left out)"
            };
            let mut image = Vec::new();
            svg(&folded, title, sel.count_name(), &mut image).ok()?;
            Some(html::Flame { title, svg: image })
        })
        .collect()
}
