//! `polls.queue` and `tasks.parent_task_id` on a real recording: the
//! runtrace executor with two named queues, tasks that spawn children
//! from inside their polls, recorded in process. The dataset, queried
//! with DuckDB, must give every task the parent its `task_spawn` event
//! names, and every poll the queue its `task_poll_start` event names
//! (the trace's own events, read back with runtrace-format).
//!
//! Needs python3 with `duckdb`: outside CI a missing one skips with a
//! message; with CI=true it fails.

mod common;

use common::{duckdb, have_duckdb};
use runtrace_executor::{Executor, QueueConfig};
use runtrace_format::merge::EventStream;
use runtrace_format::Value;
use runtrace_parquet::{export, ExportOptions};
use runtrace_recorder::Recorder;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The tables the queries read.
const TABLES: &[&str] = &["polls", "tasks"];

/// Parents each spawning `CHILDREN` children on the other queue.
const PARENTS: u64 = 24;
const CHILDREN: u64 = 3;

/// Records the executor workload into `dir`; returns the trace files.
fn record(dir: &Path) -> Vec<PathBuf> {
    let guard = Recorder::builder()
        .path(dir.join("trace"))
        .start()
        .expect("start recording");
    let ex = Executor::builder()
        .queue("latency", QueueConfig::fifo().share(4))
        .queue("batch", QueueConfig::las())
        .build()
        .expect("executor");
    let sp = ex.spawner();
    ex.block_on(async {
        let mut parents = Vec::new();
        for i in 0..PARENTS {
            let (mine, theirs) = if i % 2 == 0 {
                ("latency", "batch")
            } else {
                ("batch", "latency")
            };
            let sp = sp.clone();
            let parent = async move {
                let mut kids = Vec::new();
                for _ in 0..CHILDREN {
                    kids.push(sp.spawn_on(theirs, async {}).expect("spawn child"));
                }
                for k in kids {
                    k.await.expect("child");
                }
            };
            parents.push(ex.spawn_on(mine, parent).expect("spawn parent"));
        }
        for p in parents {
            p.await.expect("parent");
        }
    });
    drop(ex);
    guard.finish().expect("finish recording");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "bin"))
        .collect();
    runtrace_format::files::sort_trace_paths(&mut files);
    files
}

/// What the trace's own events say: parent by task, and polls by
/// (task, queue).
#[derive(Default)]
struct Truth {
    parents: BTreeMap<u64, u64>,
    polls: BTreeMap<(u64, String), u64>,
}

fn truth(files: &[PathBuf]) -> Truth {
    let mut t = Truth::default();
    let mut s = EventStream::open(files).expect("open trace");
    while let Some(ev) = s.next_event() {
        let u = |k: &str| ev.get(k).and_then(Value::as_u64).unwrap();
        match &*ev.schema.name {
            "task_spawn" => {
                t.parents.insert(u("task_id"), u("parent_task_id"));
            }
            "task_poll_start" => {
                let q = ev.get("queue").and_then(Value::as_str).unwrap().to_string();
                *t.polls.entry((u("task_id"), q)).or_default() += 1;
            }
            _ => {}
        }
    }
    t
}

#[test]
fn executor_queues_and_parents_through_duckdb() {
    if !have_duckdb() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let files = record(&dir.path().join("rec"));
    let want = truth(&files);
    // The workload is what the test means: nested spawns on named queues.
    let nested = want.parents.values().filter(|&&p| p != 0).count() as u64;
    assert_eq!(nested, PARENTS * CHILDREN, "{:?}", want.parents);
    assert!(want.polls.keys().any(|(_, q)| q == "batch"));
    assert!(want.polls.keys().any(|(_, q)| q == "latency"));

    let ds = dir.path().join("ds");
    let opts = ExportOptions {
        host: Some("h".into()),
        ..Default::default()
    };
    let s = export(&files, &ds, &opts).unwrap();
    assert!(!s.damaged, "{:?}", s.errors);

    let rows = duckdb(
        &ds,
        TABLES,
        "SELECT task_id, parent_task_id FROM tasks ORDER BY task_id",
    );
    let got: BTreeMap<u64, u64> = rows
        .iter()
        .map(|r| {
            let id = r[0].as_str().unwrap().parse().unwrap();
            // Null: spawned outside a task (parent_task_id 0 in the trace).
            let parent = r[1].as_str().map_or(0, |p| p.parse().unwrap());
            (id, parent)
        })
        .collect();
    assert_eq!(got, want.parents, "tasks.parent_task_id");

    let rows = duckdb(
        &ds,
        TABLES,
        "SELECT task_id, queue, COUNT(*) FROM polls GROUP BY task_id, queue ORDER BY 1, 2",
    );
    let got: BTreeMap<(u64, String), u64> = rows
        .iter()
        .map(|r| {
            let q = r[1].as_str().expect("polls.queue is null").to_string();
            (
                (r[0].as_str().unwrap().parse().unwrap(), q),
                r[2].as_str().unwrap().parse().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, want.polls, "polls.queue");
}
