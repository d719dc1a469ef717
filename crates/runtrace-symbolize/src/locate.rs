//! Finding the binary behind a recorded mapping: the recorded path if it
//! still holds the same build, else a file of the same name or build id in
//! the search directories. A file whose build id differs from the recorded
//! one is never used: its addresses would name the wrong functions.

use crate::elf::{self, ElfInfo};
use std::path::{Path, PathBuf};

/// Where to look for binaries besides the paths recorded in the trace.
///
/// ```
/// let opts = runtrace_symbolize::SymbolizeOptions {
///     search_dirs: vec!["target/release".into(), "/usr/lib/debug".into()],
/// };
/// assert_eq!(runtrace_symbolize::SymbolizeOptions::default().search_dirs.len(), 0);
/// # let _ = opts;
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SymbolizeOptions {
    /// Extra directories, searched in order after the recorded path: a
    /// file with the mapping's file name, or the debuginfod/GDB layout
    /// `.build-id/xx/yyyy…` (and `….debug`) for the recorded build id.
    /// They are also where blazesym looks for `.gnu_debuglink` files
    /// (after `/usr/lib/debug` and `/lib/debug`).
    pub search_dirs: Vec<PathBuf>,
}

/// The outcome of the search for one mapping's binary.
#[derive(Debug, Clone)]
pub(crate) enum Located {
    /// A file that matches (same build id, or the recording had none).
    Found { path: PathBuf, info: ElfInfo },
    /// No candidate file exists.
    NotFound,
    /// Candidates exist, but none has the recorded build id; the first
    /// one seen and its id (`None`: it has no build id note).
    Mismatch {
        path: PathBuf,
        found: Option<Vec<u8>>,
    },
    /// A candidate exists but cannot be read as ELF.
    Unreadable { path: PathBuf, why: String },
}

/// The recorded path as a file name: `/proc/self/maps` appends
/// ` (deleted)` to a binary replaced or removed while the process ran.
pub(crate) fn recorded_path(path: &str) -> &str {
    path.strip_suffix(" (deleted)").unwrap_or(path)
}

/// The candidate files for a mapping, most trusted first.
fn candidates(path: &str, build_id: &[u8], opts: &SymbolizeOptions) -> Vec<PathBuf> {
    let recorded = Path::new(recorded_path(path));
    let mut out = Vec::new();
    if !path.is_empty() {
        out.push(recorded.to_path_buf());
    }
    let hex = elf::hex(build_id);
    for dir in &opts.search_dirs {
        if hex.len() > 2 {
            let by_id = dir.join(".build-id").join(&hex[..2]);
            out.push(by_id.join(&hex[2..]));
            out.push(by_id.join(format!("{}.debug", &hex[2..])));
        }
        if let Some(name) = recorded.file_name() {
            out.push(dir.join(name));
        }
    }
    out
}

/// Finds the binary for a mapping of `path` recorded with `build_id`
/// (empty: unknown, so the first readable candidate is taken unverified).
pub(crate) fn locate(path: &str, build_id: &[u8], opts: &SymbolizeOptions) -> Located {
    let mut first_bad: Option<Located> = None;
    for candidate in candidates(path, build_id, opts) {
        if !candidate.is_file() {
            continue;
        }
        match elf::read(&candidate) {
            Ok(info) if build_id.is_empty() || info.build_id.as_deref() == Some(build_id) => {
                return Located::Found {
                    path: candidate,
                    info,
                }
            }
            Ok(info) => {
                if !matches!(first_bad, Some(Located::Mismatch { .. })) {
                    first_bad = Some(Located::Mismatch {
                        path: candidate,
                        found: info.build_id,
                    });
                }
            }
            Err(why) => {
                first_bad.get_or_insert(Located::Unreadable {
                    path: candidate,
                    why,
                });
            }
        }
    }
    first_bad.unwrap_or(Located::NotFound)
}
