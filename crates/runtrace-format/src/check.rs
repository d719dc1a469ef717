//! Validate trace files and summarise them (what `runtrace check` reports).
//!
//! Every file is read to the end with [`FileReader`], which reports damage
//! (truncation, checksum mismatches, undecodable chunks) and carries on
//! where the format allows, so one run lists every problem, and checks each
//! sealed file's `END` totals against what its chunks and `DROPPED` frames
//! actually held ([`FileReader::end_mismatches`]).
//!
//! ```no_run
//! let report = runtrace_format::check::check_files(&["trace.0.bin", "trace.1.bin"]);
//! println!("{report}");
//! std::process::exit(if report.is_clean() { 0 } else { 1 });
//! ```

use crate::files::{sort_trace_paths, unreadable};
use crate::per_schema::PerSchema;
use crate::reader::{ErrorKind, FileReader, Record};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// The state a checked file was left in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileStatus {
    /// Read to its `END` frame without damage.
    Sealed,
    /// Intact, but no `END` frame: cut short at a frame boundary, or still
    /// being written (`.active`).
    Unsealed,
    /// Ends inside a frame.
    Truncated,
    /// Has corrupt frames (or an `END` whose totals do not match).
    Damaged,
    /// Could not be opened, or is not a runtrace file at all.
    Unreadable,
}

impl FileStatus {
    /// The word `runtrace check` prints for it (capitals for trouble).
    ///
    /// ```
    /// use runtrace_format::check::FileStatus;
    /// assert_eq!(FileStatus::Sealed.label(), "sealed");
    /// assert_eq!(FileStatus::Truncated.label(), "TRUNCATED");
    /// ```
    pub fn label(self) -> &'static str {
        match self {
            FileStatus::Sealed => "sealed",
            FileStatus::Unsealed => "UNSEALED",
            FileStatus::Truncated => "TRUNCATED",
            FileStatus::Damaged => "DAMAGED",
            FileStatus::Unreadable => "UNREADABLE",
        }
    }
}

/// What `check` found in one file.
///
/// ```no_run
/// let r = runtrace_format::check::check_files(&["trace.0.bin"]);
/// let f = &r.files[0];
/// println!("{}: {} ({} events)", f.path.display(), f.status.label(), f.events);
/// ```
#[derive(Debug, Clone)]
pub struct FileSummary {
    /// The file.
    pub path: PathBuf,
    /// Its size on disk.
    pub bytes: u64,
    /// Events decoded from it.
    pub events: u64,
    /// It has an `END` frame (it may still be damaged before it).
    pub sealed: bool,
    /// How it ended.
    pub status: FileStatus,
}

/// The result of checking a set of trace files; `Display` is the text
/// `runtrace check` prints.
///
/// ```
/// use runtrace_format::check::CheckReport;
/// let r = CheckReport::default();
/// assert!(r.is_clean() && !r.truncated());
/// assert_eq!(r.bytes_per_event(), None);
/// assert!(r.to_string().ends_with("result:          OK"));
/// ```
#[derive(Debug, Clone, Default)]
pub struct CheckReport {
    /// One entry per file, in the order checked.
    pub files: Vec<FileSummary>,
    /// Events decoded, over all files.
    pub events: u64,
    /// Bytes on disk, over all files.
    pub bytes: u64,
    /// Events the recorder reported lost (sum of `DROPPED` frames).
    pub dropped_events: u64,
    /// Events per type, by display name (`PollStart`, `provider:name`).
    pub event_counts: BTreeMap<String, u64>,
    /// Every problem found, each naming its file (and byte offset where
    /// there is one).
    pub errors: Vec<String>,
}

impl CheckReport {
    /// True when some file ends inside a frame or lacks its `END` frame.
    pub fn truncated(&self) -> bool {
        self.files
            .iter()
            .any(|f| matches!(f.status, FileStatus::Truncated | FileStatus::Unsealed))
    }

    /// Files with an `END` frame.
    pub fn sealed(&self) -> usize {
        self.files.iter().filter(|f| f.sealed).count()
    }

    /// Files that are intact but have no `END` frame.
    pub fn unsealed(&self) -> impl Iterator<Item = &Path> {
        self.files
            .iter()
            .filter(|f| f.status == FileStatus::Unsealed)
            .map(|f| f.path.as_path())
    }

    /// Average bytes per event, `None` when there are no events.
    pub fn bytes_per_event(&self) -> Option<f64> {
        (self.events > 0).then(|| self.bytes as f64 / self.events as f64)
    }

    /// True when nothing is wrong: no errors and nothing cut short.
    pub fn is_clean(&self) -> bool {
        self.errors.is_empty() && !self.truncated()
    }

    /// True when some file is damaged: an error was found, or a file ends
    /// inside a frame. An intact file that merely lacks its `END` frame
    /// (a live or crashed recording) is incomplete, not damaged.
    ///
    /// ```
    /// assert!(!runtrace_format::check::CheckReport::default().is_damaged());
    /// ```
    pub fn is_damaged(&self) -> bool {
        !self.errors.is_empty()
            || self.files.iter().any(|f| {
                matches!(
                    f.status,
                    FileStatus::Truncated | FileStatus::Damaged | FileStatus::Unreadable
                )
            })
    }

    /// The verdict on the last line: `OK`, `INCOMPLETE` (intact, but some
    /// file has no `END` frame) or `DAMAGED`.
    ///
    /// ```
    /// assert_eq!(runtrace_format::check::CheckReport::default().verdict(), "OK");
    /// ```
    pub fn verdict(&self) -> &'static str {
        if self.is_clean() {
            "OK"
        } else if self.is_damaged() {
            "DAMAGED"
        } else {
            "INCOMPLETE"
        }
    }
}

impl fmt::Display for CheckReport {
    /// The human-readable summary `runtrace check` prints.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.files.len();
        writeln!(f, "files:           {n} ({} sealed)", self.sealed())?;
        let width = self
            .files
            .iter()
            .map(|s| s.path.display().to_string().len())
            .max()
            .unwrap_or(0);
        for s in &self.files {
            writeln!(
                f,
                "  {:<width$}  {:<10} {:>10} events {:>12} bytes",
                s.path.display(),
                s.status.label(),
                s.events,
                s.bytes
            )?;
        }
        writeln!(f, "events:          {}", self.events)?;
        match self.bytes_per_event() {
            Some(b) => writeln!(f, "bytes:           {} ({b:.2} bytes/event)", self.bytes)?,
            None => writeln!(f, "bytes:           {}", self.bytes)?,
        }
        writeln!(f, "dropped events:  {}", self.dropped_events)?;
        writeln!(
            f,
            "truncated:       {}",
            if self.truncated() { "yes" } else { "no" }
        )?;
        for p in self.unsealed() {
            let why = if p.to_string_lossy().ends_with(".active") {
                "never sealed (.active): the recording is still being written, or it was \
                 killed or ran out of disk before sealing this file; events after its last \
                 frame are lost and not counted"
            } else {
                "the recording was cut short (or is still being written)"
            };
            writeln!(f, "  {}: no END frame: {why}", p.display())?;
        }
        if !self.event_counts.is_empty() {
            writeln!(f, "event counts:")?;
            // Most frequent first: that is what a reader looks for.
            let mut counts: Vec<_> = self.event_counts.iter().collect();
            counts.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
            let w = counts.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
            for (name, c) in counts {
                writeln!(f, "  {name:<w$}  {c:>12}")?;
            }
        }
        if !self.errors.is_empty() {
            writeln!(f, "errors ({}):", self.errors.len())?;
            for e in &self.errors {
                writeln!(f, "  {e}")?;
            }
        }
        write!(f, "result:          {}", self.verdict())
    }
}

/// Checks trace files (sorted as `trace.0.bin`, `trace.1.bin`, ...) and
/// returns what was found. Never panics; unreadable paths become errors.
///
/// ```no_run
/// let r = runtrace_format::check::check_files(&["trace.0.bin"]);
/// assert!(r.is_clean(), "{:?}", r.errors);
/// ```
pub fn check_files<P: AsRef<Path>>(paths: &[P]) -> CheckReport {
    let mut paths: Vec<PathBuf> = paths.iter().map(|p| p.as_ref().to_path_buf()).collect();
    sort_trace_paths(&mut paths);
    let mut report = CheckReport::default();
    let mut counts = PerSchema::new();
    for p in &paths {
        let summary = check_one(p, &mut report, &mut counts);
        report.events += summary.events;
        report.bytes += summary.bytes;
        report.files.push(summary);
    }
    // Different files carry their own copies of a schema: merge by name.
    for (schema, n) in counts.iter() {
        *report
            .event_counts
            .entry(schema.display_name())
            .or_default() += *n;
    }
    report
}

/// Reads one file to the end, adding its errors and drops to `report`.
fn check_one(path: &Path, report: &mut CheckReport, counts: &mut PerSchema<u64>) -> FileSummary {
    let mut summary = FileSummary {
        path: path.to_path_buf(),
        bytes: 0,
        events: 0,
        sealed: false,
        status: FileStatus::Unreadable,
    };
    if let Some(msg) = unreadable(path) {
        report.errors.push(msg);
        return summary;
    }
    let mut reader = match FileReader::open(path) {
        Ok(r) => r,
        Err(e) => {
            report
                .errors
                .push(format!("{}: cannot open: {e}", path.display()));
            return summary;
        }
    };
    summary.bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let (mut has_header, mut cut, mut damaged) = (false, false, false);
    for rec in reader.by_ref() {
        match rec {
            Ok(Record::Header(_)) => has_header = true,
            Ok(Record::Events { events, .. }) => {
                summary.events += events.len() as u64;
                for ev in &events {
                    *counts.get(&ev.schema, |_| 0) += 1;
                }
            }
            Ok(_) => {}
            Err(e) => {
                match e.kind {
                    ErrorKind::Truncated => cut = true,
                    _ => damaged = true,
                }
                report.errors.push(e.to_string());
            }
        }
    }
    report.dropped_events = report.dropped_events.saturating_add(reader.dropped_read());
    // Empty after damage: the shortfall is already reported.
    for e in reader.end_mismatches() {
        damaged = true;
        report.errors.push(e.to_string());
    }
    summary.sealed = reader.sealed();
    summary.status = if !has_header {
        // Bad magic or header: the reader reported why.
        FileStatus::Unreadable
    } else if cut {
        FileStatus::Truncated
    } else if !summary.sealed {
        FileStatus::Unsealed
    } else if damaged {
        FileStatus::Damaged
    } else {
        FileStatus::Sealed
    };
    summary
}
