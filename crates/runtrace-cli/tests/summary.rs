//! `runtrace summary`, `runtrace outliers` and `runtrace analyze --all` on
//! the recorded golden traces: JSON keys, exit codes, flag errors.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn golden(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name)
}

fn runtrace(args: &[&str], paths: &[&Path]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_runtrace"))
        .args(args)
        .args(paths)
        .output()
        .unwrap()
}

fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

#[test]
fn summary_counts_events_and_names_the_analyzers_that_apply() {
    let o = runtrace(&["summary", "--json"], &[&golden("quickstart")]);
    assert!(o.status.success());
    let s = json(&o);
    assert_eq!(s["events"], 10625);
    assert_eq!(s["event_counts"]["task_poll_start"], 2712);
    assert_eq!(s["recordings"].as_array().unwrap().len(), 1);
    let avail = s["capabilities"]["available_events"].as_array().unwrap();
    assert!(avail.iter().any(|e| e == "task_wake"));
    let an = s["capabilities"]["analyzers"].as_array().unwrap();
    let backlog = an.iter().find(|a| a["name"] == "backlog").unwrap();
    assert_eq!(backlog["applicable"], false);

    let o = runtrace(&["summary", "--json"], &[&golden("backlog")]);
    let s = json(&o);
    let an = s["capabilities"]["analyzers"].as_array().unwrap();
    assert_eq!(
        an.iter().find(|a| a["name"] == "backlog").unwrap()["applicable"],
        true
    );
    assert!(s["capabilities"]["available_events"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e == "enqueue"));

    let text = runtrace(&["summary"], &[&golden("quickstart")]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("backlog") && text.contains("does not apply"),
        "{text}"
    );
}

#[test]
fn outliers_report_each_category_with_its_thresholds() {
    let o = runtrace(
        &[
            "outliers",
            "--json",
            "--method",
            "mad",
            "--category",
            "latency",
            "--limit",
            "3",
        ],
        &[&golden("quickstart")],
    );
    assert!(o.status.success());
    let r = json(&o);
    assert_eq!(r["method"], "mad");
    let lat = &r["categories"]["latency"];
    assert!(r["categories"].get("poll").is_none());
    assert!(lat["outliers"].as_array().unwrap().len() <= 3);
    for x in lat["outliers"].as_array().unwrap() {
        assert!(
            x["value"].as_f64().unwrap() > x["threshold"].as_f64().unwrap()
                || x["direction"] == "low"
        );
        for key in ["task_id", "spawn_loc", "worker", "window_ns", "scope"] {
            assert!(x.get(key).is_some(), "{key} in {x}");
        }
    }
    let bad = runtrace(
        &["outliers", "--method", "zscore"],
        &[&golden("quickstart")],
    );
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--method"));
}

#[test]
fn analyze_all_is_one_json_with_every_applicable_analysis() {
    let o = runtrace(&["analyze", "--all"], &[&golden("quickstart")]);
    assert!(o.status.success());
    let r = json(&o);
    assert_eq!(r["analyze"]["events"], 10625);
    assert!(r["backlog"].is_null());
    assert!(
        r["outliers"]["categories"]["poll"]["samples"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert!(r["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["name"] == "backlog"));
    assert_eq!(r["summary"]["events"], 10625);
}

#[test]
fn a_damaged_trace_is_summarised_as_far_as_readable_with_exit_1() {
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("summary-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("trace.0.bin");
    let whole = std::fs::read(golden("backlog/trace.0.bin")).unwrap();
    std::fs::write(&path, &whole[..whole.len() / 2]).unwrap();
    let o = runtrace(&["summary", "--json"], &[&path]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(o.status.code(), Some(1));
    let s = json(&o);
    assert_eq!(s["damaged"], true);
    assert!(s["events"].as_u64().unwrap() > 0);
    assert!(String::from_utf8_lossy(&o.stderr).contains("trace.0.bin"));
}

/// Drops the recorder's writer thread reports are profiler samples: `check`,
/// `summary` and `analyze` say how many, apart from the others.
#[test]
fn profiler_sample_losses_are_counted_apart() {
    use runtrace_model::synth::TraceBuilder;
    const MS: u64 = 1_000_000;
    let mut b = TraceBuilder::new();
    b.location(1, "src/main.rs", 3, 5);
    b.thread_name(99, "runtrace-writer");
    b.spawn(1, MS, 7, 0, 1, 0);
    b.poll_start(1, 0, 2 * MS, 7, 0, 0);
    b.poll_end(1, 0, 3 * MS, 7, true);
    b.terminate(1, 3 * MS, 7);
    b.dropped(99, 4, 2 * MS, 4 * MS);
    b.dropped(1, 2, 2 * MS, 4 * MS);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("summary-profiler-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("trace.0.bin");
    std::fs::write(&path, b.finish()).unwrap();

    let s = json(&runtrace(&["summary", "--json"], &[&path]));
    assert_eq!(
        (
            s["dropped_events"].as_u64(),
            s["dropped_profiler_samples"].as_u64()
        ),
        (Some(6), Some(4)),
        "{s:#}"
    );
    let text = runtrace(&["summary"], &[&path]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("6 dropped, 4 of them profiler samples"),
        "{text}"
    );
    let a = json(&runtrace(&["analyze", "--json"], &[&path]));
    assert_eq!(a["dropped_profiler_samples"], 4, "{a:#}");
    let check = runtrace(&["check"], &[&path]);
    let check = String::from_utf8_lossy(&check.stdout);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        check.contains("6 events dropped")
            && check.contains("2 to full thread buffers")
            && check.contains("4 profiler samples"),
        "{check}"
    );
}
