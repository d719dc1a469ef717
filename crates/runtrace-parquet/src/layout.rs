//! Where files go in a dataset, and what a dataset already holds:
//! `DATASET/<table>/service=<s>/host=<h>/date=<yyyy-mm-dd>/part-<recording>-<n>.parquet`
//! (Hive partitioning, which DuckDB, Spark, Trino/Athena and DataFusion
//! read as the columns `service`, `host` and `date`).
//!
//! ```
//! use runtrace_parquet::layout::{date_of, file_path, partition_name};
//! use runtrace_parquet::schema::Table;
//! assert!(partition_name("web-01.eu", "--host").is_ok());
//! assert!(partition_name("../etc", "--host").is_err());
//! assert_eq!(date_of(1_700_000_000_000_000_000), "2023-11-14");
//! let p = file_path("ds".as_ref(), Table::Polls, "api", "h1", "2023-11-14", 0xab, 0);
//! assert_eq!(p.to_str().unwrap(),
//!     "ds/polls/service=api/host=h1/date=2023-11-14/part-00000000000000ab-0.parquet");
//! ```

use crate::schema::{Table, SCHEMA_VERSION, VERSION_KEY};
use parquet::file::reader::{FileReader, SerializedFileReader};
use std::path::{Path, PathBuf};

/// `value` if it is a safe partition name (1 to 128 characters of
/// `A-Z a-z 0-9 . _ -`, not starting with `.` or `-`), else an error
/// naming `flag`. The rule is runtrace-format's
/// ([`runtrace_format::partition`]), which the recorder's object-store
/// keys share.
pub fn partition_name(value: &str, flag: &str) -> Result<String, String> {
    runtrace_format::partition::partition_name(value, flag)
}

/// A default partition name made safe: unsafe characters become `_`
/// (a process name such as `my app/1` gives `my_app_1`).
pub fn sanitize(value: &str) -> String {
    runtrace_format::partition::sanitize(value)
}

/// This machine's host name (for the default `host` partition), made safe.
pub fn hostname() -> String {
    runtrace_format::partition::hostname()
}

/// The UTC date (`yyyy-mm-dd`) of `epoch_ns`.
pub fn date_of(epoch_ns: u64) -> String {
    runtrace_format::partition::date_of(epoch_ns)
}

/// The path of file `n` of recording `recording_id` in `table`.
pub fn file_path(
    root: &Path,
    table: Table,
    service: &str,
    host: &str,
    date: &str,
    recording_id: u64,
    n: u32,
) -> PathBuf {
    root.join(table.name())
        .join(format!("service={service}"))
        .join(format!("host={host}"))
        .join(format!("date={date}"))
        .join(format!("part-{recording_id:016x}-{n}.parquet"))
}

/// The recording id in a data file's name (`part-<16 hex>-<n>.parquet`).
pub fn recording_of(path: &Path) -> Option<u64> {
    let name = path.file_name()?.to_str()?;
    let rest = name.strip_prefix("part-")?.strip_suffix(".parquet")?;
    let (id, _) = rest.split_once('-')?;
    u64::from_str_radix(id, 16).ok()
}

/// The data files (`*.parquet`, not hidden) of `table` in the dataset.
pub fn data_files(root: &Path, table: Table) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![(root.join(table.name()), 0)];
    while let Some((dir, depth)) = dirs.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') {
                continue;
            }
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                if depth < 3 {
                    dirs.push((p, depth + 1));
                }
            } else if name.ends_with(".parquet") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Checks that an existing data file of `table` has this version's
/// schema: the same [`SCHEMA_VERSION`] in its metadata, and the same
/// columns and types.
pub fn check_schema(path: &Path, table: Table) -> Result<(), String> {
    let file =
        std::fs::File::open(path).map_err(|e| format!("{}: cannot open: {e}", path.display()))?;
    let r = SerializedFileReader::new(file)
        .map_err(|e| format!("{}: not a readable Parquet file: {e}", path.display()))?;
    let meta = r.metadata().file_metadata();
    let version = meta
        .key_value_metadata()
        .and_then(|kv| kv.iter().find(|k| k.key == VERSION_KEY))
        .and_then(|k| k.value.clone());
    if version.as_deref() != Some(&SCHEMA_VERSION.to_string()) {
        return Err(format!(
            "{}: schema mismatch: the dataset's {} table has schema version {}, this runtrace writes version {SCHEMA_VERSION}; export to a new dataset",
            path.display(),
            table.name(),
            version.as_deref().unwrap_or("<none>")
        ));
    }
    // Top-level fields (a list column has a leaf named after its element).
    let have: Vec<String> = meta
        .schema_descr()
        .root_schema()
        .get_fields()
        .iter()
        .map(|c| c.name().to_string())
        .collect();
    let want: Vec<&str> = table.columns().iter().map(|c| c.name).collect();
    if have != want {
        return Err(format!(
            "{}: schema mismatch: the dataset's {} table has columns {have:?}, this runtrace writes {want:?}",
            path.display(),
            table.name()
        ));
    }
    Ok(())
}

/// Creates directory `dir` under the dataset `root` (and its parents up
/// to `root`), refusing to go through a symbolic link: a link planted in
/// the dataset must not make the export write outside it.
///
/// ```
/// let root = std::env::temp_dir().join(format!("runtrace-safe-dir-{}", std::process::id()));
/// std::fs::create_dir_all(&root).unwrap();
/// runtrace_parquet::layout::create_dir_in(&root, &root.join("polls/service=a")).unwrap();
/// std::os::unix::fs::symlink("/tmp", root.join("tasks")).unwrap();
/// let err = runtrace_parquet::layout::create_dir_in(&root, &root.join("tasks/service=a")).unwrap_err();
/// assert!(err.contains("symbolic link"), "{err}");
/// std::fs::remove_dir_all(&root).unwrap();
/// ```
pub fn create_dir_in(root: &Path, dir: &Path) -> Result<(), String> {
    let rel = dir.strip_prefix(root).map_err(|_| {
        format!(
            "{}: not inside the dataset {}",
            dir.display(),
            root.display()
        )
    })?;
    let mut at = root.to_path_buf();
    for c in rel.components() {
        at.push(c);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(format!(
                    "{}: is a symbolic link inside the dataset; refusing to write through it",
                    at.display()
                ))
            }
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(format!("{}: is not a directory", at.display())),
            Err(_) => match std::fs::create_dir(&at) {
                Ok(()) => {}
                // Made meanwhile by a concurrent export: checked again.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    if std::fs::symlink_metadata(&at).is_ok_and(|m| !m.is_dir()) {
                        return Err(format!("{}: is not a directory", at.display()));
                    }
                }
                Err(e) => return Err(format!("{}: cannot create: {e}", at.display())),
            },
        }
    }
    Ok(())
}
