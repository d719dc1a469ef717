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

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
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
            // The path prefix the recording was made with
            // (`RUNTRACE_PATH=traces/trace`): its files.
            let files = if p.exists() {
                Vec::new()
            } else {
                with_prefix(p)
            };
            if files.is_empty() {
                out.push(p.clone());
            } else {
                out.extend(files);
            }
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
            return Err(no_trace_files(p));
        }
    }
    Ok(dedup(out))
}

/// What is wrong with directory `dir` given as a recording.
fn no_trace_files(dir: &Path) -> String {
    format!(
        "{}: is a directory without trace files (trace.N.bin or trace.N.bin.active)",
        dir.display()
    )
}

/// The trace files of the recording made with path prefix `prefix`
/// (`PREFIX.N.bin`, `PREFIX.N.bin.active`), none when there are none.
///
/// ```
/// let dir = std::env::temp_dir().join(format!("runtrace-prefix-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// std::fs::write(dir.join("app.0.bin"), b"").unwrap();
/// std::fs::write(dir.join("app.1.bin.active"), b"").unwrap();
/// std::fs::write(dir.join("other.0.bin"), b"").unwrap();
/// let mut got = runtrace_format::files::with_prefix(&dir.join("app"));
/// got.sort();
/// assert_eq!(got, [dir.join("app.0.bin"), dir.join("app.1.bin.active")]);
/// std::fs::remove_dir_all(&dir).unwrap();
/// ```
pub fn with_prefix(prefix: &Path) -> Vec<PathBuf> {
    let (Some(name), dir) = (prefix.file_name(), prefix.parent()) else {
        return Vec::new();
    };
    let dir = match dir {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let want = name.as_bytes();
    rd.flatten()
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().map_or(&[][..], |n| n.as_bytes());
            // Exactly `PREFIX.N.bin` or `PREFIX.N.bin.active`.
            let rest = n.strip_prefix(want).unwrap_or(&[]);
            let rest = rest.strip_suffix(b".active").unwrap_or(rest);
            rest.strip_prefix(b".")
                .and_then(|r| r.strip_suffix(b".bin"))
                .is_some_and(|d| !d.is_empty() && d.iter().all(u8::is_ascii_digit))
                && (is_trace_file(p) || is_active_trace_file(p))
        })
        .collect()
}

/// `paths` with every file named twice (by device and inode: links and
/// different spellings count) kept once, at its first place; paths that do
/// not exist are kept as given, for the reader to report.
///
/// ```
/// use std::path::PathBuf;
/// let f = std::env::temp_dir().join(format!("runtrace-dedup-{}.0.bin", std::process::id()));
/// std::fs::write(&f, b"").unwrap();
/// let twice = vec![f.clone(), f.parent().unwrap().join(".").join(f.file_name().unwrap())];
/// assert_eq!(runtrace_format::files::dedup(twice), [f.clone()]);
/// std::fs::remove_file(&f).unwrap();
/// ```
pub fn dedup(paths: Vec<PathBuf>) -> Vec<PathBuf> {
    let mut seen = std::collections::HashSet::new();
    paths
        .into_iter()
        .filter(|p| match std::fs::metadata(p) {
            Ok(m) => seen.insert((m.dev(), m.ino())),
            Err(_) => true,
        })
        .collect()
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
    dedup(
        inputs
            .into_iter()
            .flat_map(|p| expand(std::slice::from_ref(&p)).unwrap_or_else(|_| vec![p]))
            .collect(),
    )
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
    p.file_name().is_some_and(|n| {
        n.as_bytes()
            .strip_suffix(b".active")
            .is_some_and(|sealed| trace_index(sealed).is_some())
    }) && std::fs::metadata(p).is_ok_and(|m| m.is_file())
}

/// True when the name is `*.N.bin` (whatever is on disk). Names are bytes:
/// a path that is not UTF-8 is a trace file all the same.
pub(crate) fn is_trace_name(p: &Path) -> bool {
    p.file_name()
        .is_some_and(|n| trace_index(n.as_bytes()).is_some())
}

/// `N` of a name ending in `.N.bin`.
fn trace_index(name: &[u8]) -> Option<u64> {
    let stem = name.strip_suffix(b".bin")?;
    let dot = stem.iter().rposition(|&b| b == b'.')?;
    let n = &stem[dot + 1..];
    if n.is_empty() || !n.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(n).ok()?.parse().ok()
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
    fn key(p: &Path) -> (Vec<u8>, u64, Vec<u8>) {
        let s = p.as_os_str().as_bytes().to_vec();
        let base = s.strip_suffix(b".active").unwrap_or(&s);
        if let Some(n) = trace_index(base) {
            // The prefix: everything before `.N.bin`.
            let digits = n.to_string().len();
            let pre = base[..base.len().saturating_sub(".bin".len() + digits + 1)].to_vec();
            return (pre, n, s);
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
/// assert!(runtrace_format::files::unreadable(&dir).unwrap().ends_with(
///     ": is a directory without trace files (trace.N.bin or trace.N.bin.active)"
/// ));
/// ```
pub fn unreadable(path: &Path) -> Option<String> {
    match std::fs::metadata(path) {
        Err(e) => Some(format!("{}: cannot open: {e}", path.display())),
        // A directory with trace files stands for them ([`expand`]): one
        // that reaches a reader has none.
        Ok(m) if m.is_dir() => Some(no_trace_files(path)),
        // A FIFO or device would block or never end: refused, as `doctor`
        // refuses non-regular binaries.
        Ok(m) if !m.is_file() => Some(format!(
            "{}: is not a regular file (a FIFO, socket or device), not a trace file",
            path.display()
        )),
        Ok(_) => None,
    }
}
