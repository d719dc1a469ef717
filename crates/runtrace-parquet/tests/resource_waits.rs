//! The `resource_waits` table (issue 36 item 5), on the shared fixture of
//! a tokio Mutex held across an await (`synth::mutex_held_across_await`):
//! queried with DuckDB, one row per finished wait, with its waiter,
//! resource, times and who let it go.
//!
//! Needs python3 with `duckdb`: outside CI a missing one skips with a
//! message; with CI=true it fails.

mod common;

use common::{duckdb, have_duckdb};
use runtrace_model::synth::mutex_held_across_await;
use runtrace_parquet::{export, ExportOptions};

#[test]
fn every_wait_is_a_row_through_duckdb() {
    if !have_duckdb() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("trace.0.bin");
    std::fs::write(&file, mutex_held_across_await()).unwrap();
    let ds = dir.path().join("ds");
    std::fs::create_dir(&ds).unwrap();
    let opts = ExportOptions {
        host: Some("h".into()),
        service: Some("api".into()),
        replace: false,
    };
    export(&[file], &ds, &opts).unwrap();
    let s = |v: &serde_json::Value| v.as_str().map(str::to_string);
    let rows = duckdb(
        &ds,
        &["resource_waits"],
        "SELECT spawn_loc, resource_kind, resource_created_at, resource_internal, released_by, released_by_loc, \
                COUNT(*), SUM(wait_ns), MIN(wait_ns), MAX(wait_ns), BOOL_AND(end_ns - start_ns = wait_ns), \
                MIN(released_by_task_id), MAX(released_by_task_id) \
         FROM resource_waits GROUP BY ALL ORDER BY COUNT(*)",
    );
    let rows: Vec<Vec<Option<String>>> = rows.iter().map(|r| r.iter().map(s).collect()).collect();
    let row = |by: &str, n: &str, sum: &str, min_by: &str, max_by: &str| {
        [
            "src/req.rs:40:9",
            "Mutex",
            "src/state.rs:4:17",
            "False",
            "wake",
            by,
            n,
            sum,
            "35090000",
            "35090000",
            "True",
            min_by,
            max_by,
        ]
        .map(|v| Some(v.to_string()))
        .to_vec()
    };
    // Each round: the holder (task 1) hands the lock to the first waiter,
    // each waiter to the next; every wait is 35.09 ms.
    assert_eq!(
        rows,
        [
            row("src/sync.rs:12:5", "20", "701800000", "1", "1"),
            row("src/req.rs:40:9", "140", "4912600000", "100", "258"),
        ]
    );
    // One row per waiting task, tied to the tasks table.
    let joined = duckdb(
        &ds,
        &["resource_waits", "tasks"],
        "SELECT COUNT(*), COUNT(DISTINCT w.task_id) FROM resource_waits w JOIN tasks t \
         ON t.task_id = w.task_id AND t.recording_id = w.recording_id AND t.spawn_loc = w.spawn_loc",
    );
    assert_eq!(s(&joined[0][0]).as_deref(), Some("160"));
    assert_eq!(s(&joined[0][1]).as_deref(), Some("160"));
    // docs/parquet.md's query, as written there.
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/parquet.md"
    ))
    .unwrap();
    let start = doc
        .find("-- The resources waited on most")
        .expect("the doc's query");
    let sql = &doc[start..start + doc[start..].find("```").unwrap()];
    let top = duckdb(&ds, &["resource_waits"], sql);
    assert_eq!(s(&top[0][2]).as_deref(), Some("src/req.rs:40:9"), "{top:?}");
    assert_eq!(s(&top[0][3]).as_deref(), Some("140"));
}
