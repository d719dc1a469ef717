//! The dataset's contract: layout, append without rewriting, duplicate
//! recordings refused or replaced, bad names / paths / schemas refused
//! with nothing written, damaged input exported as far as readable, and
//! a schema that cannot change without a version bump; concurrent exports
//! of one recording land once, and a partial commit says what it committed.

use arrow_schema::DataType;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use runtrace_model::synth::TraceBuilder;
use runtrace_parquet::layout::data_files;
use runtrace_parquet::schema::{describe, Table, SCHEMA_VERSION, VERSION_KEY};
use runtrace_parquet::{export, ExportOptions};
use std::path::{Path, PathBuf};

/// A recording `rid` with `tasks` tasks of two locations, each polled
/// twice after a wake; written to `dir/trace.0.bin`.
fn recording(dir: &Path, rid: u64, tasks: u64) -> PathBuf {
    let mut b = TraceBuilder::with_header(1_000_000_000, rid, 4000 + rid);
    b.location(1, "src/a.rs", 1, 1);
    b.location(2, "src/b.rs", 2, 1);
    b.string(1, "q");
    let mut t = 1_000;
    for task in 1..=tasks {
        b.spawn(7, t, task, 0, 1 + task % 2, 0);
        for k in 0..2 {
            b.poll_start(7, 0, t + 100, task, 0, 1);
            b.poll_end(7, 0, t + 400, task, k == 1);
            if k == 0 {
                b.wake(7, 0, t + 500, task, 0);
            }
            t += 1_000;
        }
        b.terminate(7, t, task);
        b.queue_snapshot(7, t + 1, 1, 3, task, task, 0);
        if task % 100 == 0 {
            b.round(t);
        }
    }
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("trace.0.bin");
    std::fs::write(&path, b.finish()).unwrap();
    path
}

fn opts(host: &str) -> ExportOptions {
    ExportOptions {
        host: Some(host.into()),
        service: Some("api".into()),
        replace: false,
    }
}

/// Every file under `root` (data and anything else), sorted.
/// Every file of the dataset but its export lock (`.runtrace-export.lock`,
/// which stays: deleting a lock file races with the next export).
fn all_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.file_type().unwrap().is_dir() {
                dirs.push(e.path());
            } else if e.path() != root.join(".runtrace-export.lock") {
                out.push(e.path());
            }
        }
    }
    out.sort();
    out
}

/// (path, inode, mtime) of every file: what "not rewritten" means.
fn snapshot(root: &Path) -> Vec<(PathBuf, u64, std::time::SystemTime)> {
    use std::os::unix::fs::MetadataExt;
    all_files(root)
        .into_iter()
        .map(|p| {
            let m = std::fs::metadata(&p).unwrap();
            (p, m.ino(), m.modified().unwrap())
        })
        .collect()
}

#[test]
fn layout_and_rows() {
    let dir = tempfile::tempdir().unwrap();
    let trace = recording(&dir.path().join("r"), 0xab, 50);
    let ds = dir.path().join("ds");
    let s = export(&[trace], &ds, &opts("web-1")).unwrap();
    assert_eq!(s.rows("polls"), 100);
    assert_eq!(s.rows("tasks"), 50);
    assert_eq!(s.rows("queue_snapshots"), 50);
    assert_eq!(s.recordings, [0xab]);
    // One file per table, named by the layout, and nothing else.
    let files = all_files(&ds);
    assert_eq!(files.len(), Table::ALL.len(), "{files:?}");
    for t in Table::ALL {
        let want = ds.join(format!(
            "{}/service=api/host=web-1/date=2023-11-14/part-00000000000000ab-0.parquet",
            t.name()
        ));
        assert!(files.contains(&want), "{want:?} not in {files:?}");
    }
    // Default service: the process name.
    let trace = recording(&dir.path().join("r2"), 0xac, 1);
    let o = ExportOptions {
        host: Some("web-1".into()),
        ..Default::default()
    };
    export(&[trace], &ds, &o).unwrap();
    assert!(ds.join("polls/service=synth/host=web-1").is_dir());
}

#[test]
fn append_never_rewrites_existing_files() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    export(&[recording(&dir.path().join("a"), 1, 10)], &ds, &opts("h1")).unwrap();
    let before = snapshot(&ds);
    std::thread::sleep(std::time::Duration::from_millis(20));
    export(&[recording(&dir.path().join("b"), 2, 10)], &ds, &opts("h2")).unwrap();
    export(&[recording(&dir.path().join("c"), 3, 10)], &ds, &opts("h1")).unwrap();
    let after = snapshot(&ds);
    for f in &before {
        assert!(after.contains(f), "{:?} was rewritten or removed", f.0);
    }
    assert_eq!(after.len(), before.len() * 3);
}

#[test]
fn duplicate_recording_is_refused_or_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    let trace = recording(&dir.path().join("a"), 7, 10);
    export(std::slice::from_ref(&trace), &ds, &opts("h1")).unwrap();
    let before = snapshot(&ds);
    // The same recording again, even under another host: refused.
    let err = export(std::slice::from_ref(&trace), &ds, &opts("h2")).unwrap_err();
    assert!(
        err.contains("0000000000000007") && err.contains("--replace"),
        "{err}"
    );
    assert_eq!(snapshot(&ds), before, "a refused export wrote nothing");
    // --replace under another host: the new files in, the old ones out.
    let o = ExportOptions {
        replace: true,
        ..opts("h2")
    };
    let s = export(std::slice::from_ref(&trace), &ds, &o).unwrap();
    assert_eq!(s.replaced.len(), Table::ALL.len());
    let files = all_files(&ds);
    assert_eq!(files.len(), Table::ALL.len());
    assert!(files
        .iter()
        .all(|f| f.to_str().unwrap().contains("host=h2")));
    // --replace at the same paths: renamed over, nothing left over.
    let s = export(&[trace], &ds, &o).unwrap();
    assert!(s.replaced.is_empty());
    assert_eq!(all_files(&ds).len(), Table::ALL.len());
}

#[test]
fn bad_partition_names_are_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let trace = recording(&dir.path().join("a"), 1, 1);
    let ds = dir.path().join("ds");
    for bad in [
        "",
        "../etc",
        "a/b",
        "a b",
        "a=b",
        "-x",
        ".hidden",
        "ü",
        &"x".repeat(129),
    ] {
        let err = export(std::slice::from_ref(&trace), &ds, &opts(bad)).unwrap_err();
        assert!(
            err.contains("--host") && err.contains("not a safe partition name"),
            "{err}"
        );
        let o = ExportOptions {
            service: Some(bad.into()),
            ..opts("h")
        };
        let err = export(std::slice::from_ref(&trace), &ds, &o).unwrap_err();
        assert!(err.contains("--service"), "{err}");
        assert!(!ds.exists());
    }
}

#[test]
fn unwritable_dataset_path_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let trace = recording(&dir.path().join("a"), 1, 1);
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    for root in [
        file.join("ds"),
        file.clone(),
        PathBuf::from("/proc/runtrace-ds"),
    ] {
        let err = export(std::slice::from_ref(&trace), &root, &opts("h")).unwrap_err();
        assert!(
            err.contains(root.to_str().unwrap()) && err.contains("cannot"),
            "{err}"
        );
    }
}

/// Writes a one-row Parquet file at `path` with `schema` and `version`
/// in its metadata: a dataset written by another runtrace.
fn foreign_file(path: &Path, col: &str, version: &str) {
    use arrow_array::{ArrayRef, RecordBatch, UInt64Array};
    use parquet::arrow::ArrowWriter;
    use parquet::file::metadata::KeyValue;
    use parquet::file::properties::WriterProperties;
    let schema = std::sync::Arc::new(arrow_schema::Schema::new(vec![arrow_schema::Field::new(
        col,
        DataType::UInt64,
        false,
    )]));
    let props = WriterProperties::builder()
        .set_key_value_metadata(Some(vec![KeyValue::new(
            VERSION_KEY.to_string(),
            version.to_string(),
        )]))
        .build();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut w = ArrowWriter::try_new(
        std::fs::File::create(path).unwrap(),
        schema.clone(),
        Some(props),
    )
    .unwrap();
    let col: ArrayRef = std::sync::Arc::new(UInt64Array::from(vec![1u64]));
    w.write(&RecordBatch::try_new(schema, vec![col]).unwrap())
        .unwrap();
    w.close().unwrap();
}

#[test]
fn schema_mismatch_with_the_dataset_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let trace = recording(&dir.path().join("a"), 1, 1);
    for (col, version, what) in [
        ("pid", "0", "schema version 0"),
        ("pid_renamed", &*SCHEMA_VERSION.to_string(), "columns"),
    ] {
        let ds = dir.path().join(format!("ds-{col}"));
        let old = ds.join("polls/service=x/host=y/date=2020-01-01/part-0000000000000099-0.parquet");
        foreign_file(&old, col, version);
        let before = snapshot(&ds);
        let err = export(std::slice::from_ref(&trace), &ds, &opts("h")).unwrap_err();
        assert!(
            err.contains("schema mismatch") && err.contains(what),
            "{err}"
        );
        assert!(err.contains(old.to_str().unwrap()), "{err}");
        assert_eq!(snapshot(&ds), before, "nothing written");
    }
}

#[test]
fn damaged_trace_exports_what_is_readable() {
    let dir = tempfile::tempdir().unwrap();
    let trace = recording(&dir.path().join("a"), 1, 2_000);
    let bytes = std::fs::read(&trace).unwrap();
    std::fs::write(&trace, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let ds = dir.path().join("ds");
    let s = export(std::slice::from_ref(&trace), &ds, &opts("h")).unwrap();
    assert!(s.damaged);
    assert!(!s.errors.is_empty());
    assert!(
        s.errors.iter().any(|e| e.contains(trace.to_str().unwrap())),
        "{:?}",
        s.errors
    );
    let polls = s.rows("polls");
    assert!(polls > 1_000 && polls < 4_000, "{polls}");
    assert!(all_files(&ds).iter().all(|f| !f
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .starts_with('.')));
}

/// The columns of the files actually written, as `describe()` lines.
fn file_columns(path: &Path, table: Table) -> (String, Option<String>) {
    let b = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path).unwrap()).unwrap();
    let version = b
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .and_then(|kv| kv.iter().find(|k| k.key == VERSION_KEY))
        .and_then(|k| k.value.clone());
    let mut s = String::new();
    for f in b.schema().fields() {
        let ty = match f.data_type() {
            DataType::UInt64 => "u64",
            DataType::UInt32 => "u32",
            DataType::Int64 => "i64",
            DataType::Float64 => "f64",
            DataType::Boolean => "bool",
            DataType::Utf8 => "string",
            DataType::List(item) if item.data_type() == &DataType::Utf8 => "list<string>",
            other => panic!("unexpected type {other}"),
        };
        let null = if f.is_nullable() { " null" } else { "" };
        s.push_str(&format!("{}.{} {ty}{null}\n", table.name(), f.name()));
    }
    (s, version)
}

/// A column renamed, retyped, added or removed without bumping
/// SCHEMA_VERSION (and committing schema/vN.txt) fails here; so does a
/// file whose metadata does not carry the version.
#[test]
fn schema_stability() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for v in 1..=SCHEMA_VERSION {
        assert!(
            root.join(format!("schema/v{v}.txt")).exists(),
            "schema/v{v}.txt: every version's schema stays committed"
        );
    }
    let golden =
        std::fs::read_to_string(root.join(format!("schema/v{SCHEMA_VERSION}.txt"))).unwrap();
    assert_eq!(
        describe(),
        golden,
        "the tables changed without a schema version bump: bump SCHEMA_VERSION in src/schema.rs, \
         add schema/v{}.txt, and document the change in docs/parquet.md",
        SCHEMA_VERSION + 1
    );
    // What the files carry is what the golden says.
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    export(&[recording(&dir.path().join("a"), 1, 3)], &ds, &opts("h")).unwrap();
    let mut from_files = String::new();
    for t in Table::ALL {
        let files = data_files(&ds, t);
        assert_eq!(files.len(), 1);
        let (cols, version) = file_columns(&files[0], t);
        assert_eq!(version, Some(SCHEMA_VERSION.to_string()), "{:?}", files[0]);
        from_files.push_str(&cols);
    }
    assert_eq!(from_files, golden);
}

#[test]
fn several_recordings_in_one_export() {
    let dir = tempfile::tempdir().unwrap();
    let a = recording(&dir.path().join("a"), 0x11, 20);
    let b = recording(&dir.path().join("b"), 0x22, 30);
    let ds = dir.path().join("ds");
    let s = export(&[b, a], &ds, &opts("h")).unwrap();
    assert_eq!(s.recordings, [0x11, 0x22]);
    assert_eq!(s.rows("polls"), 100);
    assert_eq!(all_files(&ds).len(), 2 * Table::ALL.len());
    let polls = data_files(&ds, Table::Polls);
    assert!(polls[0].ends_with("part-0000000000000011-0.parquet"));
    assert!(polls[1].ends_with("part-0000000000000022-0.parquet"));
}

/// The (task_id, parent_task_id) rows of `tasks` and (task_id, queue)
/// rows of `polls` in the dataset.
type TaskParents = Vec<(u64, Option<u64>)>;
type PollQueues = Vec<(u64, Option<String>)>;

fn lineage(ds: &Path) -> (TaskParents, PollQueues) {
    use arrow_array::{Array, StringArray, UInt64Array};
    let read = |t: Table| {
        let f = std::fs::File::open(&data_files(ds, t)[0]).unwrap();
        ParquetRecordBatchReaderBuilder::try_new(f)
            .unwrap()
            .build()
            .unwrap()
            .map(|b| b.unwrap())
            .collect::<Vec<_>>()
    };
    let mut tasks = Vec::new();
    for b in read(Table::Tasks) {
        let col = |n: &str| {
            b.column_by_name(n)
                .unwrap()
                .as_any()
                .downcast_ref::<UInt64Array>()
                .unwrap()
                .clone()
        };
        let (id, parent) = (col("task_id"), col("parent_task_id"));
        for i in 0..b.num_rows() {
            tasks.push((id.value(i), parent.is_valid(i).then(|| parent.value(i))));
        }
    }
    let mut polls = Vec::new();
    for b in read(Table::Polls) {
        let id = b.column_by_name("task_id").unwrap();
        let id = id.as_any().downcast_ref::<UInt64Array>().unwrap();
        let q = b.column_by_name("queue").unwrap();
        let q = q.as_any().downcast_ref::<StringArray>().unwrap();
        for i in 0..b.num_rows() {
            polls.push((id.value(i), q.is_valid(i).then(|| q.value(i).to_string())));
        }
    }
    (tasks, polls)
}

/// Parents and queues however they are packed in the analysis input:
/// near parents, a parent 2^40 ids older than its child, no parent; a few
/// queues, and more than 255 (names past the inline range); polls of a
/// tokio-style task (no queue) and of a task whose spawn is not in the
/// trace (queue unknown). A file with parents is not version 1 (where the
/// column was always null).
#[test]
fn parents_and_queues() {
    let mut b = TraceBuilder::with_header(1_000_000_000, 5, 5);
    b.location(1, "src/a.rs", 1, 1);
    for q in 1..=300u64 {
        b.string(q, &format!("queue-{q}"));
    }
    let big = 1u64 << 41;
    // (task, parent, queue string id)
    let mut spawns = vec![(10, 0, 1), (11, 10, 2), (big, 10, 1), (big + 1, big, 0)];
    spawns.extend((1..=300).map(|q| (100 + q, 11, q)));
    let mut t = 1_000;
    for &(task, parent, q) in &spawns {
        b.spawn(7, t, task, parent, 1, q);
        b.poll_start(7, 0, t + 10, task, q, 0);
        b.poll_end(7, 0, t + 20, task, true);
        b.terminate(7, t + 30, task);
        t += 100;
    }
    // Polled, never spawned in the trace, from a named queue.
    b.poll_start(7, 0, t, 9, 3, 0);
    b.poll_end(7, 0, t + 10, 9, false);
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.0.bin");
    std::fs::write(&trace, b.finish()).unwrap();
    let ds = dir.path().join("ds");
    export(&[trace], &ds, &opts("h")).unwrap();
    let (mut tasks, mut polls) = lineage(&ds);
    tasks.sort();
    polls.sort();
    let mut want_tasks: TaskParents = spawns
        .iter()
        .map(|&(task, parent, _)| (task, (parent != 0).then_some(parent)))
        .collect();
    want_tasks.sort();
    assert_eq!(tasks, want_tasks);
    let mut want_polls: PollQueues = spawns
        .iter()
        .map(|&(task, _, q)| (task, (q != 0).then(|| format!("queue-{q}"))))
        .chain([(9, None)])
        .collect();
    want_polls.sort();
    assert_eq!(polls, want_polls);
    let (_, version) = file_columns(&data_files(&ds, Table::Tasks)[0], Table::Tasks);
    assert_ne!(
        version.as_deref(),
        Some("1"),
        "version 1 files have parent_task_id and queue always null"
    );
}

/// Issue 37: two exports of the same recording into one dataset at the
/// same time. Without the dataset's lock both saw no earlier copy and
/// both "succeeded", one's files renamed over the other's. With it the
/// second waits for the first, then refuses the recording by name; the
/// dataset holds exactly one complete copy. (Threads here: the lock is a
/// `flock` on a descriptor each export opens itself, so two exports in
/// one process exclude each other as two processes do.)
#[test]
fn concurrent_exports_of_one_recording_land_once() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    let trace = recording(&dir.path().join("a"), 9, 2_000);
    let barrier = std::sync::Barrier::new(2);
    let results: Vec<Result<runtrace_parquet::Summary, String>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    export(std::slice::from_ref(&trace), &ds, &opts("h1"))
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let ok: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    let errs: Vec<_> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert_eq!(ok.len(), 1, "exactly one export lands: {errs:?}");
    assert_eq!(errs.len(), 1);
    assert!(
        errs[0].contains("0000000000000009") && errs[0].contains("--replace"),
        "{}",
        errs[0]
    );
    // One copy, complete: one file per table, the tasks table has every
    // task once.
    assert_eq!(all_files(&ds).len(), Table::ALL.len());
    assert_eq!(ok[0].rows("tasks"), 2_000);
    let tasks = data_files(&ds, Table::Tasks);
    assert_eq!(tasks.len(), 1);
    let rows: usize =
        ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&tasks[0]).unwrap())
            .unwrap()
            .build()
            .unwrap()
            .map(|b| b.unwrap().num_rows())
            .sum();
    assert_eq!(rows, 2_000);
}

/// Issue 37: a failure after part of an export was committed names the
/// files that were (it said "nothing was written"). A directory planted
/// at the second file's final path makes its rename fail.
#[test]
fn a_failure_after_a_partial_commit_names_what_was_committed() {
    let dir = tempfile::tempdir().unwrap();
    let trace = recording(&dir.path().join("a"), 3, 10);
    // Learn the export's files, in commit order, from a scratch dataset.
    let scratch = dir.path().join("scratch");
    let s = export(std::slice::from_ref(&trace), &scratch, &opts("h1")).unwrap();
    assert!(s.files.len() >= 2, "{:?}", s.files);
    let rel = |p: &Path| p.strip_prefix(&scratch).unwrap().to_path_buf();
    let first = rel(&s.files[0].1);
    let second = rel(&s.files[1].1);
    let ds = dir.path().join("ds");
    std::fs::create_dir_all(ds.join(&second)).unwrap();
    std::fs::write(ds.join(&second).join("keep"), "x").unwrap();
    let err = export(std::slice::from_ref(&trace), &ds, &opts("h1")).unwrap_err();
    assert!(err.contains("cannot rename into place"), "{err}");
    assert!(err.contains(second.to_str().unwrap()), "{err}");
    assert!(
        err.contains("1 file(s) of this export were committed before it")
            && err.contains(first.to_str().unwrap()),
        "{err}"
    );
    assert!(!err.contains("nothing was written"), "{err}");
    assert!(ds.join(&first).is_file());
    // No temporary file is left behind.
    let mut left = vec![ds.clone()];
    while let Some(d) = left.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            assert!(
                !name.contains(".tmp-"),
                "left behind: {}",
                e.path().display()
            );
            if e.file_type().unwrap().is_dir() {
                left.push(e.path());
            }
        }
    }
}
