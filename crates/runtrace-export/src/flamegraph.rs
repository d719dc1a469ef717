//! Flame graphs of a recording's CPU profile (`runtrace flamegraph`,
//! `examples/cpu_flamegraph.rs`): select samples ([`Selection`]), name
//! their frames with `runtrace_symbolize`, fold identical stacks
//! ([`fold`], inferno's `a;b;c N` format, root first) and draw the SVG
//! ([`svg`], with the inferno crate).
//!
//! ```
//! use runtrace_export::flamegraph::{fold, svg};
//! let folded = fold([
//!     (vec!["main".to_string(), "parse".to_string()], 3),
//!     (vec!["main".to_string()], 1),
//!     (vec!["main".to_string(), "parse".to_string()], 2),
//! ]);
//! assert_eq!(folded, "main 1\nmain;parse 5\n");
//! let mut out = Vec::new();
//! svg(&folded, "on-CPU", "samples", &mut out).unwrap();
//! assert!(String::from_utf8(out).unwrap().contains("<svg"));
//! ```

use runtrace_format::output::{refuse_input, write_atomic};
use std::io::Write;
use std::path::{Path, PathBuf};

// Selecting, naming and folding are runtrace-analyze's (the MCP server
// answers folded stacks too); drawing them is this module's.
pub use runtrace_analyze::folded::{
    fold, named, stacks, why_empty, MemoryView, Selection, NO_STACK,
};

/// Draws folded stacks ([`fold`]'s output) as an SVG flame graph with
/// inferno: `title` on top, widths counted in `count_name` (`samples`,
/// `µs`). Colours are deterministic (a function keeps its colour from one
/// graph to the next). Errors name what failed (an empty input is one:
/// inferno draws nothing from it).
///
/// ```
/// let mut out = Vec::new();
/// runtrace_export::flamegraph::svg("main;work 7\n", "t", "samples", &mut out).unwrap();
/// assert!(String::from_utf8(out).unwrap().contains("work"));
/// assert!(runtrace_export::flamegraph::svg("", "t", "samples", &mut Vec::new()).is_err());
/// ```
pub fn svg(folded: &str, title: &str, count_name: &str, out: impl Write) -> Result<(), String> {
    if folded.trim().is_empty() {
        return Err("no stacks to draw".to_string());
    }
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = title.to_string();
    opts.count_name = count_name.to_string();
    opts.deterministic = true;
    opts.hash = true;
    opts.colors =
        inferno::flamegraph::color::Palette::Multi(inferno::flamegraph::color::MultiPalette::Rust);
    inferno::flamegraph::from_lines(&mut opts, folded.lines(), out)
        .map_err(|e| format!("cannot draw the flame graph: {e}"))
}

/// Draws folded stacks for selection `sel` ([`svg`], titled and counted
/// as `sel` says) into the file `out`, written atomically; refuses to
/// overwrite one of the `inputs` (the trace files). Errors name the file.
///
/// ```
/// use runtrace_export::flamegraph::{svg_file, Selection};
/// let dir = tempfile::tempdir().unwrap();
/// let out = dir.path().join("f.svg");
/// svg_file("main;work 7\n", &Selection::default(), &out, &[]).unwrap();
/// assert!(std::fs::read_to_string(&out).unwrap().contains("<svg"));
/// ```
pub fn svg_file(
    folded: &str,
    sel: &Selection,
    out: &Path,
    inputs: &[PathBuf],
) -> Result<(), String> {
    let mut bytes = Vec::new();
    svg(folded, &sel.title(), sel.count_name(), &mut bytes)
        .map_err(|e| format!("{}: {e}", out.display()))
        .and_then(|()| refuse_input(out, inputs))
        .and_then(|()| write_atomic(out, &bytes))
}
