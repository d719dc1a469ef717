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

use crate::files::{dedup, sort_trace_paths, unreadable};
use crate::frame::{Finish, WRITER_THREAD};
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
    /// Why a recording is not complete, one line each, though no file is
    /// damaged: it did not finish (no `FINISH` frame: killed, crashed, or
    /// still recording), files of its sequence are missing, or it lost
    /// events (how many, and why).
    pub incomplete: Vec<String>,
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

    /// True when nothing is wrong: no errors, nothing cut short, every
    /// recording complete and without losses.
    pub fn is_clean(&self) -> bool {
        self.errors.is_empty() && !self.truncated() && self.incomplete.is_empty()
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

    /// The verdict on the last line: `OK` (every recording complete, no
    /// losses), `INCOMPLETE` (intact, but some file has no `END` frame, a
    /// recording did not finish, files are missing, or events were
    /// dropped: [`CheckReport::incomplete`]) or `DAMAGED`.
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
        for why in &self.incomplete {
            writeln!(f, "  incomplete: {why}")?;
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
    // A file given twice (a link, another spelling) is checked once.
    let mut paths = dedup(paths.iter().map(|p| p.as_ref().to_path_buf()).collect());
    sort_trace_paths(&mut paths);
    let mut report = CheckReport::default();
    let mut counts = PerSchema::new();
    let mut recordings: BTreeMap<u64, Recording> = BTreeMap::new();
    for p in &paths {
        let (summary, seen) = check_one(p, &mut report, &mut counts);
        if let Some(seen) = seen {
            let r = recordings.entry(seen.recording_id).or_default();
            r.indexes.push(seen.file_index);
            r.format_1_2 |= seen.version_minor >= 2;
            r.dropped = r.dropped.saturating_add(seen.dropped);
            r.profiler_dropped = r.profiler_dropped.saturating_add(seen.profiler_dropped);
            r.events = r.events.saturating_add(summary.events);
            if seen.finish.is_some() {
                r.finish = seen.finish;
            }
        }
        report.events += summary.events;
        report.bytes += summary.bytes;
        report.files.push(summary);
    }
    for (id, r) in &recordings {
        r.judge(*id, &mut report.incomplete);
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

/// What one file says about its recording.
struct Seen {
    recording_id: u64,
    file_index: u64,
    version_minor: u64,
    dropped: u64,
    /// Of `dropped`, those told by the writer thread itself: samples the
    /// profiler could not keep (docs/format.md section 10).
    profiler_dropped: u64,
    finish: Option<Finish>,
}

/// A recording's files among those checked.
#[derive(Default)]
struct Recording {
    /// Their indexes (`HEADER.file_index`).
    indexes: Vec<u64>,
    /// Some file was written by a recorder that writes `FINISH` frames.
    format_1_2: bool,
    events: u64,
    dropped: u64,
    profiler_dropped: u64,
    finish: Option<Finish>,
}

impl Recording {
    /// Why the recording is incomplete, if it is (docs/format.md
    /// section 11): no `FINISH` frame (format 1.2 on), files missing from
    /// its sequence, events lost.
    fn judge(&self, id: u64, out: &mut Vec<String>) {
        let mut idx = self.indexes.clone();
        idx.sort_unstable();
        idx.dedup();
        let last = idx.last().copied().unwrap_or(0);
        let (from, to) = match (self.finish, self.format_1_2) {
            (Some(f), _) => (f.evicted, f.files),
            (None, true) => {
                out.push(format!(
                    "recording {id:016x}: it did not finish: no FINISH frame after file {last} \
                     (the process was killed or crashed, or is still recording; or give every \
                     file of the recording, e.g. its directory)"
                ));
                (idx.first().copied().unwrap_or(0), last + 1)
            }
            // Format 1.1 has no FINISH frame: only gaps can be seen.
            (None, false) => (idx.first().copied().unwrap_or(0), last + 1),
        };
        let missing: Vec<String> = (from..to)
            .filter(|i| idx.binary_search(i).is_err())
            .take(20)
            .map(|i| i.to_string())
            .collect();
        if !missing.is_empty() {
            let n = (from..to).filter(|i| idx.binary_search(i).is_err()).count();
            out.push(format!(
                "recording {id:016x}: {n} file(s) of its sequence {from}..={} missing: index {}{}",
                to.saturating_sub(1),
                missing.join(", "),
                if n > missing.len() { ", ..." } else { "" }
            ));
        }
        let dropped = self
            .finish
            .map_or(self.dropped, |f| f.dropped.max(self.dropped));
        if dropped > 0 {
            let io = self.finish.map_or(0, |f| f.lost_to_writes.min(dropped));
            let samples = self.profiler_dropped.min(dropped - io);
            let buffers = dropped - io - samples;
            let total = dropped.saturating_add(self.finish.map_or(self.events, |f| f.events));
            // Each cause with its own remedy: raising the buffers does
            // nothing for samples the kernel's rings could not keep.
            let mut why = Vec::new();
            if buffers > 0 || samples + io == 0 {
                why.push(format!(
                    "{buffers} to full thread buffers (raise Recorder::builder().buffer_size or RUNTRACE_BUFFER_SIZE)"
                ));
            }
            if samples > 0 {
                why.push(format!(
                    "{samples} profiler samples (CPU, off-CPU or allocation) the kernel's or the sampler's rings could not keep: the writer thread fell behind, usually starved of CPU (give the process more CPU, or lower RUNTRACE_CPU_HZ)"
                ));
            }
            if io > 0 {
                why.push(format!("{io} to failed writes (disk full or I/O errors)"));
            }
            out.push(format!(
                "recording {id:016x}: {dropped} events dropped ({:.1}% of {total}): {}",
                dropped as f64 * 100.0 / total.max(1) as f64,
                why.join(", ")
            ));
        }
    }
}

/// Reads one file to the end, adding its errors and drops to `report`;
/// returns its summary and, when it has a header, what it says of its
/// recording.
fn check_one(
    path: &Path,
    report: &mut CheckReport,
    counts: &mut PerSchema<u64>,
) -> (FileSummary, Option<Seen>) {
    let mut summary = FileSummary {
        path: path.to_path_buf(),
        bytes: 0,
        events: 0,
        sealed: false,
        status: FileStatus::Unreadable,
    };
    if let Some(msg) = unreadable(path) {
        report.errors.push(msg);
        return (summary, None);
    }
    let mut reader = match FileReader::open(path) {
        Ok(r) => r,
        Err(e) => {
            report
                .errors
                .push(format!("{}: cannot open: {e}", path.display()));
            return (summary, None);
        }
    };
    summary.bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let (mut has_header, mut cut, mut damaged) = (false, false, false);
    // (tid, count) of every DROPPED frame, told apart once the file's
    // thread names are known: the writer tells the profiler's losses
    // under its own tid.
    let mut drops: Vec<(u64, u64)> = Vec::new();
    for rec in reader.by_ref() {
        match rec {
            Ok(Record::Header(_)) => has_header = true,
            Ok(Record::Events { events, .. }) => {
                summary.events += events.len() as u64;
                for ev in &events {
                    *counts.get(&ev.schema, |_| 0) += 1;
                }
            }
            Ok(Record::Dropped { tid, count, .. }) => drops.push((tid, count)),
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
    let seen = reader.header().map(|h| Seen {
        recording_id: h.recording_id,
        file_index: h.file_index,
        version_minor: h.version_minor,
        dropped: reader.dropped_read(),
        profiler_dropped: drops
            .iter()
            .filter(|(tid, _)| {
                reader.tables().threads().get(tid).map(String::as_str) == Some(WRITER_THREAD)
            })
            .map(|&(_, n)| n)
            .fold(0, u64::saturating_add),
        finish: reader.finish().copied(),
    });
    (summary, seen)
}
