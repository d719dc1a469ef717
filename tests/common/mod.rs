//! Helpers shared by integration tests (each test crate uses a part).
#![allow(dead_code)]

pub mod lttng;

use std::path::{Path, PathBuf};
use std::process::Command;

/// A scratch directory for one test (`$TMPDIR/runtrace-NAME-XXXX`) that
/// removes itself when dropped, whether the test passed or failed.
///
/// ```ignore
/// let dir = common::scratch_dir("pipeline");
/// let trace = dir.path().join("trace");
/// ```
pub fn scratch_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("runtrace-{name}-"))
        .tempdir()
        .unwrap_or_else(|e| panic!("cannot create a scratch directory for {name}: {e}"))
}

/// The trace files (`*.bin`) in `dir`, in recording order (format.md §11).
///
/// ```ignore
/// let files = common::trace_files(dir.path());
/// ```
pub fn trace_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "bin"))
        .collect();
    runtrace_format::merge::sort_trace_paths(&mut files);
    files
}

/// Builds the example (a no-op when `cargo test` already did) and returns
/// its path, next to the test binaries.
pub fn example(name: &str) -> PathBuf {
    let st = Command::new(env!("CARGO"))
        .args(["build", "--quiet", "--example", name])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .unwrap();
    assert!(st.success(), "cargo build --example {name}");
    let exe = std::env::current_exe().unwrap();
    let p = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples")
        .join(name);
    assert!(p.exists(), "{} not built", p.display());
    p
}
