//! The `spans` table and the runtime columns (issue 34 items 3 and 5), on
//! a synthetic trace with two named runtimes, each with a worker 0, and
//! request spans entered in their polls: queried with DuckDB, each span
//! row has its label, task, runtime and times, and the two runtimes' polls
//! and workers stay apart.
//!
//! Needs python3 with `duckdb`: outside CI a missing one skips with a
//! message; with CI=true it fails.

mod common;

use common::{duckdb, have_duckdb};
use runtrace_model::synth::TraceBuilder;
use runtrace_parquet::{export, ExportOptions};

fn trace(path: &std::path::Path) {
    let mut b = TraceBuilder::new();
    b.location(1, "src/server.rs", 10, 5);
    for (tid, rt, name) in [(100, 0, "api"), (200, 1, "blocking")] {
        b.runtime_name(tid, 400, rt, name);
        b.worker_start(tid, 0, 500, rt);
    }
    let mut t = 1_000u64;
    for i in 0..6u64 {
        let (task, span) = (1 + i, 100 + i);
        let (tid, uri) = if i % 2 == 0 {
            (100, "/item")
        } else {
            (200, "/slow")
        };
        b.spawn(tid, t, task, 0, 1, 0);
        b.poll_start(tid, 0, t + 100, task, 0, 0);
        b.span_new(
            tid,
            t + 150,
            span,
            0,
            "request",
            &format!("method=GET uri={uri}"),
        );
        b.span_enter(tid, t + 200, span);
        b.span_exit(tid, t + 300, span);
        b.poll_end(tid, 0, t + 400, task, false);
        b.park(tid, 0, t + 450, 0, 0);
        b.unpark(tid, 0, t + 480, 0, 0);
        b.wake(tid, 0, t + 500, task, 0);
        b.poll_start(tid, 0, t + 600, task, 0, 0);
        b.span_enter(tid, t + 700, span);
        b.span_exit(tid, t + 800, span);
        b.poll_end(tid, 0, t + 900, task, true);
        if i != 5 {
            b.span_close(tid, t + 950, span);
        }
        b.terminate(tid, t + 1_000, task);
        t += 2_000;
    }
    std::fs::write(path, b.finish()).unwrap();
}

#[test]
fn spans_and_runtimes_through_duckdb() {
    if !have_duckdb() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("trace.0.bin");
    trace(&file);
    let ds = dir.path().join("ds");
    std::fs::create_dir(&ds).unwrap();
    let opts = ExportOptions {
        host: Some("h".into()),
        service: Some("api".into()),
        replace: false,
    };
    export(&[file], &ds, &opts).unwrap();
    let rows = duckdb(
        &ds,
        &["spans"],
        "SELECT span_id, label, name, fields, task_id, runtime_name, wall_ns, busy_ns, delay_ns, enters, close_ns IS NULL \
         FROM spans ORDER BY span_id",
    );
    let s = |v: &serde_json::Value| v.as_str().map(str::to_string);
    assert_eq!(rows.len(), 6, "{rows:?}");
    let first: Vec<Option<String>> = rows[0].iter().map(s).collect();
    assert_eq!(
        first,
        [
            Some("100".into()),
            Some("GET /item".into()),
            Some("request".into()),
            Some("method=GET uri=/item".into()),
            Some("1".into()),
            Some("api".into()),
            Some("750".into()), // first enter 1200 -> close 1950
            Some("200".into()),
            Some("100".into()), // wake 1500 -> poll 1600
            Some("2".into()),
            Some("False".into()), // Python's str(False)
        ]
    );
    assert_eq!(s(&rows[1][5]).as_deref(), Some("blocking"));
    assert_eq!(s(&rows[1][1]).as_deref(), Some("GET /slow"));
    // The last span never closed: no wall time, still a row.
    assert_eq!(s(&rows[5][6]), None);
    assert_eq!(s(&rows[5][10]).as_deref(), Some("True"));

    // Both runtimes have a worker 0: their polls and parks stay apart.
    let polls = duckdb(
        &ds,
        &["polls"],
        "SELECT runtime, runtime_name, worker, COUNT(*) FROM polls GROUP BY ALL ORDER BY runtime",
    );
    let polls: Vec<Vec<Option<String>>> = polls.iter().map(|r| r.iter().map(s).collect()).collect();
    let row = |rt: &str, name: &str, n: &str| {
        vec![
            Some(rt.to_string()),
            Some(name.to_string()),
            Some("0".to_string()),
            Some(n.to_string()),
        ]
    };
    assert_eq!(polls, [row("0", "api", "6"), row("1", "blocking", "6")]);
    let parks = duckdb(
        &ds,
        &["workers"],
        "SELECT runtime_name, COUNT(*) FROM workers GROUP BY ALL ORDER BY 1",
    );
    assert_eq!(parks.len(), 2, "{parks:?}");
}
