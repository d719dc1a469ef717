//! Trace-file names (docs/format.md section 11): which paths are trace
//! files, the order of a recording's files, and a recording's directory
//! standing for the files in it.
//!
//! The recorder writes `PATH.N.bin.active` and renames it to `PATH.N.bin`
//! once sealed; `N` counts from 0 per recording. Every tool that takes
//! trace files on its command line goes through here, so they all agree on
//! what a directory holds and in which order the files are read.
//!
//! ```no_run
//! use runtrace_format::files;
//! use std::path::PathBuf;
//! let mut paths = files::expand(&[PathBuf::from("traces/")]).unwrap();
//! files::sort_trace_paths(&mut paths);
//! for p in &paths {
//!     if let Some(why) = files::unreadable(p) {
//!         eprintln!("{why}");
//!     }
//! }
//! ```

use std::path::{Path, PathBuf};

/// The trace files of `inputs`: files as given, directories replaced by
/// the `PATH.N.bin` and `PATH.N.bin.active` files in them (in directory
/// order; sort them with [`sort_trace_paths`]). A directory without any is
/// an error message naming it.
///
/// A recording's directory means all its files: a `.active` file is one
/// still being written, or left behind by a recording that crashed or ran
/// out of disk, and its events are part of the recording. Readers report
/// it as unsealed (or truncated), never silently skip it.
///
/// ```
/// let dir = std::env::temp_dir().join(format!("runtrace-files-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// std::fs::write(dir.join("trace.0.bin"), b"").unwrap();
/// std::fs::write(dir.join("notes.txt"), b"").unwrap();
/// let got = runtrace_format::files::expand(&[dir.clone()]).unwrap();
/// assert_eq!(got, [dir.join("trace.0.bin")]);
/// std::fs::remove_dir_all(&dir).unwrap();
/// ```
pub fn expand(inputs: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for p in inputs {
        if !p.is_dir() {
            out.push(p.clone());
            continue;
        }
        let rd = std::fs::read_dir(p).map_err(|e| format!("{}: cannot read: {e}", p.display()))?;
        let before = out.len();
        for ent in rd.flatten() {
            let path = ent.path();
            if is_trace_file(&path) || is_active_trace_file(&path) {
                out.push(path);
            }
        }
        if out.len() == before {
            return Err(format!(
                "{}: is a directory without trace files (trace.N.bin or trace.N.bin.active)",
                p.display()
            ));
        }
    }
    Ok(out)
}

/// Like [`expand`], one input at a time: a directory without trace files
/// (or one that cannot be read) stays in the list as given, for the command
/// to report as a path that is not a trace file beside the other paths'
/// results.
///
/// ```
/// use std::path::PathBuf;
/// let empty = std::env::temp_dir().join(format!("runtrace-files-lenient-{}", std::process::id()));
/// std::fs::create_dir_all(&empty).unwrap();
/// let got = runtrace_format::files::expand_lenient(vec![empty.clone(), PathBuf::from("x.0.bin")]);
/// assert_eq!(got, [empty.clone(), PathBuf::from("x.0.bin")]);
/// std::fs::remove_dir_all(&empty).unwrap();
/// ```
pub fn expand_lenient(inputs: Vec<PathBuf>) -> Vec<PathBuf> {
    inputs
        .into_iter()
        .flat_map(|p| expand(std::slice::from_ref(&p)).unwrap_or_else(|_| vec![p]))
        .collect()
}

/// True for an existing regular file named `*.N.bin`, as the recorder names
/// sealed files.
///
/// ```
/// use std::path::Path;
/// // Not a file on disk: false whatever the name.
/// assert!(!runtrace_format::files::is_trace_file(Path::new("/nonexistent/trace.0.bin")));
/// ```
pub fn is_trace_file(p: &Path) -> bool {
    is_trace_name(p) && p.is_file()
}

/// True for an existing regular file named `*.N.bin.active`: a trace file
/// the recorder had not sealed (still recording, or it crashed).
///
/// ```
/// use std::path::Path;
/// assert!(!runtrace_format::files::is_active_trace_file(Path::new("/nonexistent/trace.0.bin.active")));
/// ```
pub fn is_active_trace_file(p: &Path) -> bool {
    p.to_str()
        .and_then(|s| s.strip_suffix(".active"))
        .is_some_and(|sealed_name| {
            is_trace_name(Path::new(sealed_name)) && std::fs::metadata(p).is_ok_and(|m| m.is_file())
        })
}

/// True when the name is `*.N.bin` (whatever is on disk).
pub(crate) fn is_trace_name(p: &Path) -> bool {
    let Some(name) = p.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    let Some(stem) = name.strip_suffix(".bin") else {
        return false;
    };
    stem.rsplit_once('.')
        .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Sorts paths so `x.2.bin` comes before `x.10.bin` (numeric N, and
/// `x.N.bin.active` in its place), keeping other names in lexical order.
///
/// ```
/// use std::path::PathBuf;
/// let mut v: Vec<PathBuf> = ["t.10.bin", "t.2.bin", "t.3.bin.active"].map(PathBuf::from).into();
/// runtrace_format::files::sort_trace_paths(&mut v);
/// assert_eq!(v, ["t.2.bin", "t.3.bin.active", "t.10.bin"].map(PathBuf::from));
/// ```
pub fn sort_trace_paths(paths: &mut [PathBuf]) {
    fn key(p: &Path) -> (String, u64, String) {
        let s = p.to_string_lossy().into_owned();
        let base = s.strip_suffix(".active").unwrap_or(&s);
        if let Some(stem) = base.strip_suffix(".bin") {
            if let Some((pre, n)) = stem.rsplit_once('.') {
                if let Ok(n) = n.parse::<u64>() {
                    return (pre.to_string(), n, s.clone());
                }
            }
        }
        (s.clone(), 0, s)
    }
    paths.sort_by_key(|p| key(p));
}

/// Why `path` cannot be read as a trace file, as a message naming it, or
/// `None` if it looks readable. Tools check this up front so that a typo in
/// one path gives a clear message instead of a low-level read error.
///
/// ```
/// use std::path::Path;
/// let why = runtrace_format::files::unreadable(Path::new("/nonexistent/trace.0.bin")).unwrap();
/// assert!(why.starts_with("/nonexistent/trace.0.bin: cannot open: "), "{why}");
/// let dir = std::env::temp_dir();
/// assert!(runtrace_format::files::unreadable(&dir).unwrap().ends_with(": is a directory, not a trace file"));
/// ```
pub fn unreadable(path: &Path) -> Option<String> {
    match std::fs::metadata(path) {
        Err(e) => Some(format!("{}: cannot open: {e}", path.display())),
        Ok(m) if m.is_dir() => Some(format!(
            "{}: is a directory, not a trace file",
            path.display()
        )),
        // A FIFO or device would block or never end: refused, as `doctor`
        // refuses non-regular binaries.
        Ok(m) if !m.is_file() => Some(format!(
            "{}: is not a regular file (a FIFO, socket or device), not a trace file",
            path.display()
        )),
        Ok(_) => None,
    }
}
