//! The loaded trace (`TraceIndex`): summary, queries, timelines and a
//! damaged trace.

use runtrace_analyze::index::TraceIndex;
use runtrace_analyze::query::{query, timeline, Query};
use runtrace_model::synth::TraceBuilder;
use serde_json::Value;

/// Two locations; tasks 1..=50 at src/a.rs on worker 0, 51..=100 at
/// src/b.rs on worker 1; each spawned, woken, polled twice, terminated;
/// task i's first poll starts at i ms.
fn trace() -> TraceBuilder {
    let mut b = TraceBuilder::new();
    b.location(1, "src/a.rs", 1, 1);
    b.location(2, "src/b.rs", 2, 2);
    for task in 1..=100u64 {
        let (loc, w) = if task <= 50 { (1, 0) } else { (2, 1) };
        let tid = 10 + w as u64;
        let t = task * 1_000_000;
        b.spawn(tid, t - 500, task, 0, loc, 0);
        b.poll_start(tid, w, t, task, 0, 0);
        b.poll_end(tid, w, t + 100, task, false);
        b.wake(tid, w, t + 200, task, 0);
        b.poll_start(tid, w, t + 300, task, 0, 0);
        b.poll_end(tid, w, t + 400, task, true);
        b.terminate(tid, t + 400, task);
        if task % 10 == 0 {
            b.flush(); // several chunks, so that a cut file keeps some
        }
    }
    b
}

fn load(bytes: Vec<u8>) -> (tempfile::TempDir, TraceIndex) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.0.bin");
    std::fs::write(&path, bytes).unwrap();
    let ix = TraceIndex::load(&[path]);
    (dir, ix)
}

fn events(v: &Value) -> &Vec<Value> {
    v["events"].as_array().unwrap()
}

#[test]
fn filters_combine_and_the_limit_says_when_it_cut() {
    let (_d, ix) = load(trace().finish());
    assert_eq!(ix.events.len(), 700);
    let all = query(&ix, &Query::default()).unwrap();
    assert_eq!(all["matched"], 700);
    assert_eq!(all["returned"], 100);
    assert_eq!(all["truncated"], true);

    let q = Query {
        event_type: Some("task_poll_start".into()),
        spawn_loc: Some("src/b.rs".into()),
        start_ns: Some(60_000_000),
        end_ns: Some(70_000_000),
        limit: 1000,
        ..Query::default()
    };
    let r = query(&ix, &q).unwrap();
    // Tasks 60..=69 twice, and task 70's first poll start (at exactly 70 ms).
    assert_eq!(r["matched"], 21, "{r}");
    assert_eq!(r["truncated"], false);
    for e in events(&r) {
        assert_eq!(e["event"], "task_poll_start");
        assert_eq!(e["spawn_loc"], "src/b.rs:2:2");
        assert_eq!(e["worker"], 1);
        let ts = e["ts_ns"].as_i64().unwrap();
        assert!((60_000_000..=70_000_000).contains(&ts), "{e}");
    }

    let r = query(
        &ix,
        &Query {
            worker: Some(0),
            limit: 1000,
            ..Query::default()
        },
    )
    .unwrap();
    // Polls (4 events) and wakes (1) of tasks 1..=50 carry a worker.
    assert_eq!(r["matched"], 250);

    let r = query(
        &ix,
        &Query {
            task_id: Some(7),
            ..Query::default()
        },
    )
    .unwrap();
    assert_eq!(r["matched"], 7);

    let e = query(
        &ix,
        &Query {
            event_type: Some("poll".into()),
            ..Query::default()
        },
    )
    .unwrap_err();
    assert!(
        e.contains("unknown event_type \"poll\"") && e.contains("task_poll_start"),
        "{e}"
    );
}

#[test]
fn timeline_has_spawn_wakes_polls_and_terminate_in_order() {
    let (_d, ix) = load(trace().finish());
    let t = timeline(&ix, 42, None).unwrap();
    let kinds: Vec<&str> = events(&t)
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "task_spawn",
            "task_poll_start",
            "task_poll_end",
            "task_wake",
            "task_poll_start",
            "task_poll_end",
            "task_terminate"
        ]
    );
    assert_eq!(t["spawn_loc"], "src/a.rs:1:1");
    assert_eq!(t["terminated"], true);
    let e = timeline(&ix, 4242, None).unwrap_err();
    assert!(e.contains("task 4242"), "{e}");
}

#[test]
fn summary_lists_events_and_which_analyzers_apply() {
    let (_d, ix) = load(trace().finish());
    let s = ix.summary();
    assert_eq!(s["events"], 700);
    assert_eq!(s["event_counts"]["task_wake"], 100);
    let avail: Vec<&str> = s["capabilities"]["available_events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(
        avail,
        [
            "task_spawn",
            "task_poll_start",
            "task_poll_end",
            "task_wake",
            "task_terminate"
        ]
    );
    let an = s["capabilities"]["analyzers"].as_array().unwrap();
    let get = |n: &str| an.iter().find(|a| a["name"] == n).unwrap();
    assert_eq!(get("wakeup_latency")["applicable"], true);
    assert_eq!(get("backlog")["applicable"], false);
    assert!(get("backlog")["reason"]
        .as_str()
        .unwrap()
        .contains("runtrace-sync"));
    assert!(get("flamegraph")["reason"]
        .as_str()
        .unwrap()
        .contains("CPU samples"));
    let all = ix.run_all();
    assert!(all["backlog"].is_null());
    assert_eq!(all["analyze"]["events"], 700);
    assert!(all["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["name"] == "backlog"));
}

#[test]
fn a_damaged_trace_loads_what_is_readable_and_says_where_it_broke() {
    let whole = trace().finish();
    let (_d, ix) = load(whole[..whole.len() * 2 / 3].to_vec());
    assert!(ix.stats.damaged);
    let s = ix.summary();
    assert_eq!(s["damaged"], true);
    let err = s["errors"][0].as_str().unwrap();
    assert!(
        err.contains("trace.0.bin") && err.contains("at byte"),
        "{err}"
    );
    // Not nothing, not everything.
    let n = ix.events.len();
    assert!(n > 0 && n < 700, "{n} events");
}

/// The reports computed from memory are those of a read of the files.
#[test]
fn reports_from_memory_equal_those_of_the_files() {
    let golden =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../runtrace-cli/tests/golden");
    for name in ["quickstart", "backlog"] {
        let mut files: Vec<_> = std::fs::read_dir(golden.join(name))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        let ix = TraceIndex::load(&files);
        let rt = runtrace_analyze::analyze_files(&files, Default::default());
        assert_eq!(ix.runtime().to_json(), rt.to_json(), "{name}");
        assert_eq!(ix.duration_ns(), rt.duration_ns, "{name}");
        let bl = runtrace_analyze::backlog::analyze_files(&files, &Default::default());
        assert_eq!(ix.backlog().to_json(), bl.to_json(), "{name}");
    }
}
