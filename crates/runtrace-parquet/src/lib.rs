//! Parquet export of runtrace recordings (`runtrace export parquet`):
//! Hive-partitioned tables with a stable, versioned schema that DuckDB,
//! Spark, Trino/Athena and DataFusion query across hosts with plain SQL.
//! docs/parquet.md documents every table and column and gives the SQL.
//!
//! Layers: [`schema`] names the tables and columns; [`writer`] writes one
//! table's file in bounded memory under a temporary name; [`layout`] knows
//! the dataset's directories and what it already holds; [`pass`] turns the
//! analysis input's events into rows (one read, as an analysis pass), with
//! [`samples`] doing the `cpu_samples` rows (attributed, symbolized); and
//! [`export`] runs it and commits the files (renames them into place) only
//! when all are complete.
//!
//! ```
//! use runtrace_model::synth::TraceBuilder;
//! use runtrace_parquet::{export, ExportOptions};
//! let mut b = TraceBuilder::new();
//! b.location(1, "src/main.rs", 10, 5);
//! b.spawn(7, 1_000, 1, 0, 1, 0);
//! b.poll_start(7, 0, 2_000, 1, 0, 0);
//! b.poll_end(7, 0, 5_000, 1, true);
//! let dir = tempfile::tempdir().unwrap();
//! let trace = dir.path().join("trace.0.bin");
//! std::fs::write(&trace, b.finish()).unwrap();
//! let opts = ExportOptions { host: Some("h1".into()), ..Default::default() };
//! let s = export(&[trace], &dir.path().join("ds"), &opts).unwrap();
//! assert_eq!(s.rows("polls"), 1);
//! assert!(!s.damaged);
//! ```

#![warn(missing_docs)]

pub mod layout;
pub mod pass;
pub mod samples;
pub mod schema;
pub mod writer;

use pass::{Exporter, Target};
use std::path::{Path, PathBuf};

/// Options of [`export`].
#[derive(Debug, Clone, Default)]
pub struct ExportOptions {
    /// `service` partition (default: each recording's process name, made
    /// safe).
    pub service: Option<String>,
    /// `host` partition (default: this machine's host name).
    pub host: Option<String>,
    /// Replace recordings already in the dataset instead of refusing them.
    pub replace: bool,
}

/// What an export did.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// Files written (final paths), with their table and rows.
    pub files: Vec<(String, PathBuf, u64)>,
    /// Recordings exported.
    pub recordings: Vec<u64>,
    /// Files of earlier exports replaced (`--replace`) and removed.
    pub replaced: Vec<PathBuf>,
    /// Events read.
    pub events: u64,
    /// Where the input was damaged (file and byte offset, and what).
    pub errors: Vec<String>,
    /// Some input file was damaged or cut: the dataset holds what was
    /// readable.
    pub damaged: bool,
    /// About the CPU profile, when the recordings have samples: what could
    /// not be symbolized and why, one line each.
    pub notes: Vec<String>,
}

impl Summary {
    /// Rows written to `table`.
    pub fn rows(&self, table: &str) -> u64 {
        self.files
            .iter()
            .filter(|(t, _, _)| t == table)
            .map(|(_, _, n)| n)
            .sum()
    }

    /// The line `runtrace export parquet` prints: what was exported where.
    ///
    /// ```
    /// let s = runtrace_parquet::Summary { recordings: vec![7], events: 10, ..Default::default() };
    /// assert_eq!(s.line("ds".as_ref()), "exported 1 recording(s), 10 events, 0 rows in 0 files to ds");
    /// ```
    pub fn line(&self, root: &Path) -> String {
        let rows: u64 = self.files.iter().map(|f| f.2).sum();
        let mut s = format!(
            "exported {} recording(s), {} events, {rows} rows in {} files to {}",
            self.recordings.len(),
            self.events,
            self.files.len(),
            root.display()
        );
        if !self.replaced.is_empty() {
            s += &format!(
                " (replaced {} files of an earlier export)",
                self.replaced.len()
            );
        }
        s
    }
}

/// Exports the trace files `paths` (any order) into the dataset `root`.
///
/// Every file is written under a temporary name and renamed into place
/// only when all are complete, so an error (a bad partition name, an
/// unwritable path, a schema mismatch, a recording already exported)
/// leaves the dataset as it was. Damaged input is not an error: what was
/// readable is exported and [`Summary::damaged`] says where it broke.
pub fn export(paths: &[PathBuf], root: &Path, opts: &ExportOptions) -> Result<Summary, String> {
    let nothing = |e: String| format!("{e}; nothing was written to {}", root.display());
    let (target, _lock) = prepare(root, opts).map_err(nothing)?;
    let mut ex = Exporter::new(target.clone());
    let paths = runtrace_model::input::sorted(paths);
    let (_model, stats) = runtrace_model::input::read(&paths, &mut ex, None);
    let written = ex.take_written();
    let notes = std::mem::take(&mut ex.samples.notes);
    if let Some(e) = ex.error.take() {
        for w in &written {
            let _ = std::fs::remove_file(&w.tmp);
        }
        return Err(nothing(e));
    }
    let mut s = commit(written, &target, stats)?;
    s.notes = notes;
    Ok(s)
}

/// Checks the options and the dataset, and takes its lock (held while the
/// returned file is open).
fn prepare(root: &Path, opts: &ExportOptions) -> Result<(Target, std::fs::File), String> {
    let service = match &opts.service {
        Some(s) => Some(layout::partition_name(s, "--service")?),
        None => None,
    };
    let host = match &opts.host {
        Some(h) => layout::partition_name(h, "--host")?,
        None => layout::hostname(),
    };
    std::fs::create_dir_all(root).map_err(|e| {
        format!(
            "{}: cannot create the dataset directory: {e}",
            root.display()
        )
    })?;
    // One export at a time per dataset: a second waits here, then sees
    // the first's recordings (and refuses the same one without
    // --replace). Also tells whether the directory is writable, before
    // reading any trace.
    let lock = lock_dataset(root)?;
    for t in schema::Table::ALL {
        if let Some(f) = layout::data_files(root, t).first() {
            layout::check_schema(f, t)?;
        }
    }
    let target = Target {
        root: root.to_path_buf(),
        service,
        host,
        existing: pass::existing_recordings(root),
        replace: opts.replace,
    };
    Ok((target, lock))
}

/// Takes the dataset's export lock (`DATASET/.runtrace-export.lock`, an
/// exclusive `flock`, waited for), created exclusively when missing and
/// never through a symbolic link; released when the returned file closes.
fn lock_dataset(root: &Path) -> Result<std::fs::File, String> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let path = root.join(".runtrace-export.lock");
    let file = std::fs::File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .map_err(|e| {
            format!(
                "{}: cannot write in the dataset directory: {e}",
                path.display()
            )
        })?;
    loop {
        // SAFETY: `file` is an open descriptor for the whole call.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
            return Ok(file);
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(format!("{}: cannot lock: {e}", path.display()));
        }
    }
}

/// Renames the files into place, then removes the replaced recordings'
/// files that no new file overwrote.
fn commit(
    written: Vec<pass::Written>,
    target: &Target,
    stats: runtrace_model::input::ReadStats,
) -> Result<Summary, String> {
    let mut s = Summary {
        events: stats.events,
        errors: stats.errors,
        damaged: stats.damaged,
        ..Summary::default()
    };
    for w in &written {
        if !s.recordings.contains(&w.recording_id) {
            s.recordings.push(w.recording_id);
        }
    }
    let mut err = None;
    for w in written {
        if err.is_some() {
            let _ = std::fs::remove_file(&w.tmp);
            continue;
        }
        match std::fs::rename(&w.tmp, &w.path) {
            Ok(()) => s.files.push((w.table.name().to_string(), w.path, w.rows)),
            Err(e) => {
                let _ = std::fs::remove_file(&w.tmp);
                err = Some(format!(
                    "{}: cannot rename into place: {e}",
                    w.path.display()
                ));
            }
        }
    }
    if let Some(e) = err {
        // Some files may be in place already: say which.
        let done: Vec<String> = s.files.iter().map(|f| f.1.display().to_string()).collect();
        return Err(if done.is_empty() {
            format!("{e}; nothing was written to {}", target.root.display())
        } else {
            format!(
                "{e}; {} file(s) of this export were committed before it: {}",
                done.len(),
                done.join(", ")
            )
        });
    }
    if target.replace {
        for id in &s.recordings {
            for old in target.existing.get(id).into_iter().flatten() {
                if !s.files.iter().any(|(_, p, _)| p == old) && std::fs::remove_file(old).is_ok() {
                    s.replaced.push(old.clone());
                }
            }
        }
    }
    Ok(s)
}
